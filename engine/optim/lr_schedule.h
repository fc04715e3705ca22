// Learning-rate schedules (the spec's optimizer.schedule): the learning rate of each optimizer step
// as a pure function of the step, so that a run resumed from a checkpoint continues its schedule
// exactly where it left off.
#pragma once

#include <cstdint>
#include <optional>

namespace ringmaster {

enum class LrScheduleKind {
  kConstant,  // optimizer.lr at every step
  kCosine,    // linear warm-up, then cosine decay to min_lr (nanoGPT's get_lr)
};

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  // kCosine only.
  int64_t warmup_steps = 0;
  double min_lr = 0;
  // The step after which the learning rate stays at min_lr; nullopt: train.steps.
  std::optional<int64_t> decay_steps;
  bool operator==(const LrSchedule&) const = default;
};

// The learning rate of optimizer step `step` (counted from 1, as Optimizer::stepCount() after it)
// for a peak learning rate `lr` and a run of `total_steps` steps (train.steps, the decay's end
// when decay_steps is unset). kCosine is nanoGPT's get_lr(it) with it = step - 1: for
// it < warmup_steps, lr * (it + 1) / (warmup_steps + 1); for it > decay_steps, min_lr; in between
// min_lr + 0.5 * (1 + cos(pi * (it - warmup_steps) / (decay_steps - warmup_steps))) *
// (lr - min_lr). Needs step >= 1 and warmup_steps < decay_steps (the spec parser's rules).
double scheduledLr(const LrSchedule& schedule, double lr, int64_t step, int64_t total_steps);

}  // namespace ringmaster
