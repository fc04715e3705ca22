// GradScaler (grad_scaler.h): unscaling and the non-finite check through tensor ops, and the
// scale's backoff and growth.
#include "optim/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include <fmt/format.h>

#include "core/error.h"
#include "tensor/ops.h"

namespace ringmaster {

namespace {

bool isPositiveFloat(double value) {
  return std::isfinite(value) && value > 0 && value <= std::numeric_limits<float>::max() &&
         value >= std::numeric_limits<float>::min();
}

}  // namespace

GradScaler::GradScaler(const GradScalerOptions& options)
    : options_(options), scale_(options.init_scale) {
  RM_CHECK_ARG(isPositiveFloat(options.init_scale),
               fmt::format("train.loss_scale.init: {} is not a positive finite float scale",
                           options.init_scale));
  RM_CHECK_ARG(
      options.growth_interval >= 1,
      fmt::format("train.loss_scale.growth_interval: {} (at least 1)", options.growth_interval));
  RM_CHECK_ARG(options.growth_factor > 1 && std::isfinite(options.growth_factor),
               fmt::format("loss scaler: growth factor {} (more than 1)", options.growth_factor));
  RM_CHECK_ARG(options.backoff_factor > 0 && options.backoff_factor < 1,
               fmt::format("loss scaler: backoff factor {} (in (0, 1))", options.backoff_factor));
}

int64_t GradScaler::unscale(const std::vector<NamedParameter>& parameters) const {
  // As PyTorch: the reciprocal in double, applied in float (exact for a power of two).
  const auto inverse = static_cast<float>(1.0 / scale_);
  int64_t non_finite = 0;
  std::unordered_set<const Parameter*> seen;  // a parameter listed twice is unscaled once
  for (const NamedParameter& named : parameters) {
    if (!seen.insert(named.parameter).second) continue;
    Tensor& grad = named.parameter->grad;
    if (!grad.defined() || grad.numel() == 0) continue;
    ops::scale(grad, inverse);
    non_finite += ops::countNonFinite(grad);
  }
  return non_finite;
}

void GradScaler::update(bool found_inf) {
  if (found_inf) {
    // Never to zero: the smallest normal float stays a usable scale.
    scale_ = std::max(scale_ * options_.backoff_factor,
                      static_cast<double>(std::numeric_limits<float>::min()));
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ < options_.growth_interval) return;
  growth_tracker_ = 0;
  const double grown = scale_ * options_.growth_factor;
  if (grown <= std::numeric_limits<float>::max()) scale_ = grown;
}

void GradScaler::loadState(const GradScalerState& state) {
  if (!isPositiveFloat(state.scale)) {
    RM_THROW(kFormat, fmt::format("loss scaler state: scale {} is not a positive finite float",
                                  state.scale));
  }
  // A tracker at or past a growth interval lowered since the save grows at the next clean step.
  if (state.growth_tracker < 0) {
    RM_THROW(kFormat,
             fmt::format("loss scaler state: growth tracker {} is negative", state.growth_tracker));
  }
  scale_ = state.scale;
  growth_tracker_ = state.growth_tracker;
}

}  // namespace ringmaster
