// The charts' Qt-free arithmetic: TensorBoard's debiased EMA against values worked by hand from
// its formula, and the step clock's interpolation both ways (issue 15, charts).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "widgets/smoothing.h"
#include "widgets/step_clock.h"

namespace ringmaster::ui {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// smoothed_t = ema_t / (1 - w^(t+1)), ema_t = w ema_{t-1} + (1 - w) v_t, ema_{-1} = 0.
TEST(SmoothEma, MatchesTensorBoardsFormulaWorkedByHand) {
  // w = 0.5 over 1, 2, 4:
  //   t0: ema = 0.5             / (1 - 0.5)   = 1
  //   t1: ema = 0.25 + 1 = 1.25 / (1 - 0.25)  = 5/3
  //   t2: ema = 0.625 + 2 = 2.625 / (1 - 0.125) = 3
  const std::vector<double> s = smoothEma({1, 2, 4}, 0.5);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(s[0], 1.0);
  EXPECT_DOUBLE_EQ(s[1], 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(s[2], 3.0);
  // w = 0.9 over 10, 0: t0 = 1 / 0.1 = 10; t1 = 0.9 / (1 - 0.81) = 0.9 / 0.19.
  const std::vector<double> t = smoothEma({10, 0}, 0.9);
  EXPECT_DOUBLE_EQ(t[0], 10.0);
  EXPECT_NEAR(t[1], 0.9 / 0.19, 1e-12);
  // w = 0.99, a step from 0 to 1 at t = 1: t1 = 0.01 / (1 - 0.99^2) = 0.01 / 0.0199.
  const std::vector<double> u = smoothEma({0, 1}, 0.99);
  EXPECT_DOUBLE_EQ(u[0], 0.0);
  EXPECT_NEAR(u[1], 0.01 / 0.0199, 1e-12);
}

TEST(SmoothEma, SkipsNaNAndInfinityWithoutCountingThem) {
  // The same values as above with a NaN and an infinity between them: those pass through, and
  // the finite points smooth exactly as without them (t counts finite points only).
  const std::vector<double> s = smoothEma({1, kNaN, 2, kInf, -kInf, 4}, 0.5);
  ASSERT_EQ(s.size(), 6u);
  EXPECT_DOUBLE_EQ(s[0], 1.0);
  EXPECT_TRUE(std::isnan(s[1]));
  EXPECT_DOUBLE_EQ(s[2], 5.0 / 3.0);
  EXPECT_EQ(s[3], kInf);
  EXPECT_EQ(s[4], -kInf);
  EXPECT_DOUBLE_EQ(s[5], 3.0);
  // A leading NaN does not start the average at zero either.
  const std::vector<double> t = smoothEma({kNaN, 1, 2, 4}, 0.5);
  EXPECT_DOUBLE_EQ(t[1], 1.0);
  EXPECT_DOUBLE_EQ(t[3], 3.0);
}

TEST(SmoothEma, WeightZeroAndConstantSeriesAreUnchanged) {
  EXPECT_EQ(smoothEma({3, 1, 2}, 0.0), (std::vector<double>{3, 1, 2}));
  EXPECT_EQ(smoothEma({0.1, 0.1, 0.1}, 0.9), (std::vector<double>{0.1, 0.1, 0.1}));
  EXPECT_TRUE(smoothEma({}, 0.6).empty());
  // Not constant: the first point is itself (debiased), the rest lag behind the raw values.
  const std::vector<double> s = smoothEma({5, 0, 0, 0}, 0.6);
  EXPECT_DOUBLE_EQ(s[0], 5.0);
  EXPECT_GT(s[1], 0.0);
  EXPECT_GT(s[1], s[2]);
}

TEST(StepClock, InterpolatesBothWaysAndKeepsTimeMonotonic) {
  // Steps 0..10 in 1 s, 10..20 in 4 s; a point going back in time is dropped.
  const StepClock clock({{10, 1.0}, {0, 0.0}, {20, 5.0}, {15, 0.5}});
  EXPECT_EQ(clock.size(), 3u);
  EXPECT_DOUBLE_EQ(clock.seconds(5), 0.5);
  EXPECT_DOUBLE_EQ(clock.seconds(15), 3.0);
  EXPECT_DOUBLE_EQ(clock.step(3.0), 15.0);
  EXPECT_DOUBLE_EQ(clock.step(0.25), 2.5);
  // Beyond the known steps: the nearest segment's rate.
  EXPECT_DOUBLE_EQ(clock.seconds(25), 7.0);
  EXPECT_DOUBLE_EQ(clock.seconds(-10), -1.0);
  EXPECT_TRUE(StepClock().empty());
  EXPECT_DOUBLE_EQ(StepClock({{7, 2.0}}).seconds(100), 2.0);
}

}  // namespace
}  // namespace ringmaster::ui
