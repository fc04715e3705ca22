// GradScaler (optim/grad_scaler.h) against torch.cuda.amp.GradScaler's rules: unscaling by the
// reciprocal of a power-of-two scale is exact, an inf or NaN gradient is counted, halves the scale
// and resets the growth count, growth_interval clean steps double it, and its state round-trips.
#include "optim/grad_scaler.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "core/error.h"

namespace ringmaster {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(GradScaler, UnscaleMultipliesByTheReciprocalExactly) {
  GradScaler scaler({.init_scale = 65536.0});
  // Values whose product by 2^-16 is exact in float, and one that is not a multiple of 2^16.
  const std::vector<float> grads{65536.0f, -3.0f * 65536.0f, 1.0f, 0.1f, 1e-30f, 0.0f};
  Parameter p = makeParameter(Tensor::fromVector(std::vector<float>(grads.size(), 1.0f),
                                                 {static_cast<int64_t>(grads.size())}));
  p.grad.copyFrom(Tensor::fromVector(grads, {static_cast<int64_t>(grads.size())}));
  EXPECT_EQ(scaler.unscale({{"w", &p}}), 0);
  const std::vector<float> got = p.grad.toFloatVector();
  for (size_t i = 0; i < grads.size(); ++i)
    EXPECT_EQ(got[i], std::ldexp(grads[i], -16)) << "element " << i;  // bit for bit
}

TEST(GradScaler, CountsNonFiniteGradientsOfEveryParameter) {
  GradScaler scaler({.init_scale = 4.0});
  Parameter a = makeParameter(Tensor::fromVector({1.0f, 2.0f}, {2}));
  Parameter b = makeParameter(Tensor::fromVector({1.0f, 2.0f, 3.0f}, {3}));
  a.grad.copyFrom(Tensor::fromVector({8.0f, 4.0f}, {2}));
  b.grad.copyFrom(Tensor::fromVector({kInf, std::nanf(""), 1.0f}, {3}));
  EXPECT_EQ(scaler.unscale({{"a", &a}, {"b", &b}}), 2);
  EXPECT_EQ(a.grad.toFloatVector(), (std::vector<float>{2.0f, 1.0f}));
  // A finite gradient that the unscale does not overflow stays finite: only b's two count.
  b.grad.copyFrom(Tensor::fromVector({std::numeric_limits<float>::max(), 1.0f, 1.0f}, {3}));
  EXPECT_EQ(scaler.unscale({{"a", &a}, {"b", &b}}), 0);
}

TEST(GradScaler, FoundInfHalvesTheScaleAndResetsTheGrowthCount) {
  GradScaler scaler({.init_scale = 1024.0, .growth_interval = 3});
  scaler.update(false);
  scaler.update(false);
  EXPECT_EQ(scaler.growthTracker(), 2);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 512.0);
  EXPECT_EQ(scaler.growthTracker(), 0);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 256.0);
  // The two clean steps before the overflow do not count towards growth.
  scaler.update(false);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 256.0);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 512.0);
  EXPECT_EQ(scaler.growthTracker(), 0);
}

TEST(GradScaler, GrowsAfterEachGrowthIntervalOfCleanSteps) {
  GradScaler scaler({.init_scale = 65536.0, .growth_interval = 3});
  std::vector<double> scales;
  for (int step = 1; step <= 9; ++step) {
    scaler.update(false);
    scales.push_back(scaler.scale());
  }
  const double s = 65536.0;
  EXPECT_EQ(scales, (std::vector<double>{s, s, 2 * s, 2 * s, 2 * s, 4 * s, 4 * s, 4 * s, 8 * s}));
}

TEST(GradScaler, NeverGrowsPastTheLargestFloatNorShrinksToZero) {
  GradScaler big({.init_scale = std::ldexp(1.0, 127), .growth_interval = 1});
  big.update(false);
  EXPECT_EQ(big.scale(), std::ldexp(1.0, 127));
  GradScaler small({.init_scale = std::ldexp(1.0, -126)});
  small.update(true);
  EXPECT_EQ(small.scale(), std::ldexp(1.0, -126));
  EXPECT_GT(small.scale(), 0.0);
}

TEST(GradScaler, StateRoundTripsAndBadStateIsRefused) {
  GradScaler scaler({.init_scale = 8.0, .growth_interval = 5});
  scaler.update(true);
  scaler.update(false);
  GradScaler restored({.init_scale = 65536.0, .growth_interval = 5});
  restored.loadState(scaler.state());
  EXPECT_EQ(restored.state(), (GradScalerState{.scale = 4.0, .growth_tracker = 1}));
  EXPECT_THROW(restored.loadState({.scale = 0.0, .growth_tracker = 0}), Error);
  EXPECT_THROW(restored.loadState({.scale = std::nan(""), .growth_tracker = 0}), Error);
  EXPECT_THROW(restored.loadState({.scale = 2.0, .growth_tracker = -1}), Error);
  EXPECT_EQ(restored.state().scale, 4.0);  // unchanged by the refusals
}

TEST(GradScaler, RefusesABadInitialScaleNamingTheField) {
  for (const double init : {0.0, -1.0, 1e300, std::numeric_limits<double>::infinity()}) {
    try {
      GradScaler scaler({.init_scale = init});
      ADD_FAILURE() << "accepted " << init;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("train.loss_scale.init"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(GradScaler({.growth_interval = 0}), Error);
}

}  // namespace
}  // namespace ringmaster
