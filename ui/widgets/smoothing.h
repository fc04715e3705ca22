// TensorBoard's scalar smoothing: an exponential moving average debiased like Adam's moments, so
// the first points are not pulled towards zero. Qt-free and header-only, tested on its own; it
// smooths the points it is given (the buckets on screen), not the stored series.
#pragma once

#include <cmath>
#include <vector>

namespace ringmaster::ui {

// Smoothing weight w in [0, 1): for the t-th finite value v_t (t = 0, 1, ...),
//   ema_t = w * ema_{t-1} + (1 - w) * v_t, ema_{-1} = 0,   smoothed_t = ema_t / (1 - w^(t+1)).
// As TensorBoard does (classicSmoothing in its line chart's data transformer): a NaN or infinite
// value is passed through unchanged and neither counted nor folded into the average, and a series
// whose values are all equal is returned as it is (the division would only add rounding).
inline std::vector<double> smoothEma(const std::vector<double>& values, double weight) {
  std::vector<double> out = values;
  if (weight <= 0 || values.empty()) return out;
  bool constant = true;
  for (double v : values) constant = constant && v == values.front();
  if (constant) return out;
  double ema = 0;
  double decay = 1;  // w^(t+1), the weight the zero start still has
  for (double& v : out) {
    if (!std::isfinite(v)) continue;
    ema = ema * weight + (1 - weight) * v;
    decay *= weight;
    v = weight >= 1 ? ema : ema / (1 - decay);
  }
  return out;
}

}  // namespace ringmaster::ui
