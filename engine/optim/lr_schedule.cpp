// The learning-rate schedules of lr_schedule.h.
#include "optim/lr_schedule.h"

#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

double scheduledLr(const LrSchedule& schedule, double lr, int64_t step, int64_t total_steps) {
  RM_CHECK_ARG(step >= 1,
               fmt::format("learning-rate schedule: step {} (steps count from 1)", step));
  if (schedule.kind == LrScheduleKind::kConstant) return lr;
  // nanoGPT's get_lr (github.com/karpathy/nanoGPT, train.py, "learning rate decay scheduler
  // (cosine with warmup)"), with its iteration `it` counted from 0 as our steps count from 1:
  //   if it < warmup_iters: return learning_rate * (it + 1) / (warmup_iters + 1)
  //   if it > lr_decay_iters: return min_lr
  //   decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
  //   coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
  //   return min_lr + coeff * (learning_rate - min_lr)
  const int64_t warmup = schedule.warmup_steps;
  const int64_t decay = schedule.decay_steps.value_or(total_steps);
  RM_CHECK_ARG(warmup >= 0 && warmup < decay,
               fmt::format("optimizer.schedule.warmup_steps: must be less than the decay's {} "
                           "steps, got {}",
                           decay, warmup));
  const int64_t it = step - 1;
  if (it < warmup) return lr * static_cast<double>(it + 1) / static_cast<double>(warmup + 1);
  if (it > decay) return schedule.min_lr;
  const double ratio = static_cast<double>(it - warmup) / static_cast<double>(decay - warmup);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
  return schedule.min_lr + coeff * (lr - schedule.min_lr);
}

}  // namespace ringmaster
