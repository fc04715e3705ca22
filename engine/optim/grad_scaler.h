// Dynamic loss scaling for fp16 training, with torch.cuda.amp.GradScaler's semantics: the loss
// gradient is multiplied by a scale so that small gradients survive fp16, the gradients are
// unscaled before clipping and the optimizer, and a step whose gradients hold an inf or NaN is
// skipped and halves the scale, while growth_interval clean steps in a row double it.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/module.h"

namespace ringmaster {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16, train.loss_scale.init
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // train.loss_scale.growth_interval
};

// What a checkpoint keeps of a scaler: its scale and the clean steps counted towards growth.
struct GradScalerState {
  double scale = 0;
  int64_t growth_tracker = 0;
  bool operator==(const GradScalerState&) const = default;
};

class GradScaler {
 public:
  // Throws kInvalidArgument (naming train.loss_scale's field) for a scale that is not a positive
  // finite float, a growth interval below 1, or factors outside growth > 1 > backoff > 0.
  explicit GradScaler(const GradScalerOptions& options);

  // The scale the next step's loss gradients are multiplied by.
  double scale() const { return scale_; }
  // Clean steps in a row since the scale last changed (or the run began).
  int64_t growthTracker() const { return growth_tracker_; }

  // Multiplies every gradient of `parameters` by 1 / scale() in place (exact for a power-of-two
  // scale; a parameter listed twice, once) and returns how many of their elements are then +-inf
  // or NaN. Local to this rank: the caller agrees on the verdict across ranks that hold different
  // gradients.
  int64_t unscale(const std::vector<NamedParameter>& parameters) const;
  // The step's verdict, the same on every rank: found_inf (the step is skipped) multiplies the
  // scale by the backoff factor and resets the tracker; a clean step counts towards growth, and
  // the growth_interval-th in a row multiplies the scale by the growth factor (never past the
  // largest float, 2^127) and resets the tracker.
  void update(bool found_inf);

  GradScalerState state() const { return {.scale = scale_, .growth_tracker = growth_tracker_}; }
  // Restores a checkpoint's state; kFormat for a scale that is not a positive finite float or a
  // negative tracker (one at or past a since lowered growth interval grows at the next clean step).
  void loadState(const GradScalerState& state);

 private:
  GradScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
};

}  // namespace ringmaster
