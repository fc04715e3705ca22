// StepClock: steps to seconds since the run started and back, by linear interpolation between
// known (step, wall time) points, for charts drawn against wall time. Qt-free and header-only; it
// knows nothing of storage (the run view fills it from the `wall_time_s` series).
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

namespace ringmaster::ui {

class StepClock {
 public:
  StepClock() = default;
  // Points (step, seconds since start), in any order; a point that would make time run backwards
  // (a resumed attempt's clock, a host's skew) is dropped so the mapping stays monotonic.
  explicit StepClock(std::vector<std::pair<double, double>> points) {
    std::sort(points.begin(), points.end());
    for (const auto& p : points) {
      if (!knots_.empty() && (p.first <= knots_.back().first || p.second < knots_.back().second))
        continue;
      knots_.push_back(p);
    }
  }

  bool empty() const { return knots_.empty(); }
  size_t size() const { return knots_.size(); }

  // Seconds at `step`; outside the known steps the nearest segment's rate is extended (a single
  // point: that point's time everywhere).
  double seconds(double step) const { return interpolate(step, false); }
  // The inverse: the (fractional) step at `seconds`.
  double step(double seconds) const { return interpolate(seconds, true); }

 private:
  double interpolate(double at, bool inverse) const {
    if (knots_.empty()) return at;
    if (knots_.size() == 1) return inverse ? knots_[0].first : knots_[0].second;
    auto key = [inverse](const std::pair<double, double>& k) {
      return inverse ? k.second : k.first;
    };
    auto value = [inverse](const std::pair<double, double>& k) {
      return inverse ? k.first : k.second;
    };
    // The segment [i - 1, i] holding `at`, or the first / last segment outside.
    auto it =
        std::lower_bound(knots_.begin(), knots_.end(), at,
                         [&](const std::pair<double, double>& k, double x) { return key(k) < x; });
    const size_t i =
        std::clamp<size_t>(static_cast<size_t>(it - knots_.begin()), 1, knots_.size() - 1);
    const auto& a = knots_[i - 1];
    const auto& b = knots_[i];
    const double span = key(b) - key(a);
    if (span <= 0) return value(a);
    return value(a) + (at - key(a)) / span * (value(b) - value(a));
  }

  std::vector<std::pair<double, double>> knots_;  // (step, seconds), both increasing
};

}  // namespace ringmaster::ui
