// Tests of the learning-rate schedules (optim/lr_schedule.h) at their boundaries, against values
// of nanoGPT's get_lr written out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "optim/lr_schedule.h"

namespace ringmaster {
namespace {

// nanoGPT's get_lr(it), transcribed (train.py), for comparison.
double nanoGptLr(int64_t it, double learning_rate, int64_t warmup_iters, int64_t lr_decay_iters,
                 double min_lr) {
  if (it < warmup_iters) return learning_rate * (it + 1) / (warmup_iters + 1);
  if (it > lr_decay_iters) return min_lr;
  const double decay_ratio =
      static_cast<double>(it - warmup_iters) / static_cast<double>(lr_decay_iters - warmup_iters);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * decay_ratio));
  return min_lr + coeff * (learning_rate - min_lr);
}

TEST(LrSchedule, ConstantIsTheLearningRateEveryStep) {
  const LrSchedule constant;
  for (int64_t step : {1, 2, 50, 100, 1000}) EXPECT_EQ(scheduledLr(constant, 0.1, step, 100), 0.1);
}

TEST(LrSchedule, CosineWarmsUpLinearlyFromLrOverWarmupPlusOne) {
  const LrSchedule cosine{.kind = LrScheduleKind::kCosine, .warmup_steps = 4, .min_lr = 0.001};
  // Steps 1..4 are iterations 0..3: lr * 1/5 .. lr * 4/5, never 0.
  EXPECT_DOUBLE_EQ(scheduledLr(cosine, 0.01, 1, 20), 0.01 * 1 / 5);
  EXPECT_DOUBLE_EQ(scheduledLr(cosine, 0.01, 2, 20), 0.01 * 2 / 5);
  EXPECT_DOUBLE_EQ(scheduledLr(cosine, 0.01, 4, 20), 0.01 * 4 / 5);
  // Step 5 (iteration 4 = warmup): the decay's start, the full lr.
  EXPECT_DOUBLE_EQ(scheduledLr(cosine, 0.01, 5, 20), 0.01);
}

TEST(LrSchedule, CosineDecaysToMinLrAtDecayStepsAndStaysThere) {
  const LrSchedule cosine{.kind = LrScheduleKind::kCosine, .warmup_steps = 2, .min_lr = 0.001};
  // Iteration 2 + (12 - 2) / 2 = 7 (step 8) is halfway: the mean of lr and min_lr.
  EXPECT_NEAR(scheduledLr(cosine, 0.01, 8, 12), (0.01 + 0.001) / 2, 1e-15);
  // Iteration 12 (step 13) = decay_steps: min_lr; beyond it, min_lr.
  EXPECT_NEAR(scheduledLr(cosine, 0.01, 13, 12), 0.001, 1e-15);
  EXPECT_EQ(scheduledLr(cosine, 0.01, 14, 12), 0.001);
  EXPECT_EQ(scheduledLr(cosine, 0.01, 1000, 12), 0.001);
  // Monotone between the warm-up's end and the decay's.
  for (int64_t step = 3; step < 13; ++step)
    EXPECT_GT(scheduledLr(cosine, 0.01, step, 12), scheduledLr(cosine, 0.01, step + 1, 12)) << step;
}

TEST(LrSchedule, CosineIsNanoGptsGetLrAtEveryStep) {
  for (const int64_t warmup : {0, 1, 7}) {
    for (const int64_t decay : {8, 30}) {
      const LrSchedule cosine{
          .kind = LrScheduleKind::kCosine, .warmup_steps = warmup, .min_lr = 6e-5};
      for (int64_t step = 1; step <= decay + 3; ++step) {
        EXPECT_DOUBLE_EQ(scheduledLr(cosine, 6e-4, step, decay),
                         nanoGptLr(step - 1, 6e-4, warmup, decay, 6e-5))
            << "warmup " << warmup << " decay " << decay << " step " << step;
      }
    }
  }
}

TEST(LrSchedule, DecayStepsOverridesTheRunsLength) {
  const LrSchedule own{
      .kind = LrScheduleKind::kCosine, .warmup_steps = 0, .min_lr = 0, .decay_steps = 10};
  const LrSchedule run{.kind = LrScheduleKind::kCosine, .warmup_steps = 0, .min_lr = 0};
  EXPECT_DOUBLE_EQ(scheduledLr(own, 1.0, 6, 1000), scheduledLr(run, 1.0, 6, 10));
  EXPECT_DOUBLE_EQ(scheduledLr(own, 1.0, 6, 1000), 0.5);
}

TEST(LrSchedule, RefusesStepZeroAndAWarmupAsLongAsTheDecay) {
  const LrSchedule cosine{.kind = LrScheduleKind::kCosine, .warmup_steps = 10};
  EXPECT_THROW(scheduledLr(LrSchedule{}, 0.1, 0, 10), Error);
  EXPECT_THROW(scheduledLr(cosine, 0.1, 1, 10), Error);
  EXPECT_NO_THROW(scheduledLr(cosine, 0.1, 1, 11));
}

}  // namespace
}  // namespace ringmaster
