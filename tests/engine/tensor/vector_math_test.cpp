// vector_math.h's exp and tanh against the C library's in double over the whole float range
// (a sample of bit patterns: tiny, huge, saturating), their NaN / inf cases, and the host GELU and
// softmax kernels that use them against double-precision formulas.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tensor/kernels.h"
#include "tensor/vector_math.h"

namespace ringmaster {
namespace {

constexpr double kExpBound = 1.5e-7;   // relative, where e^x is a normal float
constexpr double kTanhBound = 2.5e-7;  // relative, where tanh(x) is a normal float
constexpr double kFltMin = std::numeric_limits<float>::min();
constexpr double kFltMax = std::numeric_limits<float>::max();

// Every 4099th positive float below inf, and its negation: about 2M arguments.
std::vector<float> sampleFloats() {
  std::vector<float> xs;
  for (uint32_t bits = 0; bits < 0x7F800000u; bits += 4099) {
    const auto x = std::bit_cast<float>(bits);
    xs.push_back(x);
    xs.push_back(-x);
  }
  return xs;
}

TEST(VectorMath, ExpIsWithinItsBoundOverTheFloats) {
  double worst = 0;
  float worst_at = 0;
  int64_t checked = 0;
  for (const float x : sampleFloats()) {
    const double want = std::exp(static_cast<double>(x));
    const float got = vmath::exp(x);
    if (want > kFltMax * (1 + kExpBound)) {
      EXPECT_EQ(got, std::numeric_limits<float>::infinity()) << "x = " << x;
    } else if (want < kFltMin) {
      EXPECT_NEAR(got, want, 1.5e-45) << "x = " << x;  // a denormal: within one of its steps
    } else {
      const double err = std::abs(got - want) / want;
      if (err > worst) worst = err, worst_at = x;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100000);
  EXPECT_LE(worst, kExpBound) << "at x = " << worst_at;
}

TEST(VectorMath, TanhIsWithinItsBoundOverTheFloats) {
  double worst = 0;
  float worst_at = 0;
  for (const float x : sampleFloats()) {
    const double want = std::tanh(static_cast<double>(x));
    const float got = vmath::tanh(x);
    if (std::abs(want) < kFltMin) {
      EXPECT_EQ(got, static_cast<float>(want)) << "x = " << x;
      continue;
    }
    const double err = std::abs(got - want) / std::abs(want);
    if (err > worst) worst = err, worst_at = x;
  }
  EXPECT_LE(worst, kTanhBound) << "at x = " << worst_at;
  EXPECT_EQ(vmath::tanh(30.0f), 1.0f);
  EXPECT_EQ(vmath::tanh(-1e30f), -1.0f);
}

TEST(VectorMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(vmath::exp(nan)));
  EXPECT_TRUE(std::isnan(vmath::tanh(nan)));
  EXPECT_EQ(vmath::exp(inf), inf);
  EXPECT_EQ(vmath::exp(-inf), 0.0f);
  EXPECT_EQ(vmath::exp(0.0f), 1.0f);
  EXPECT_EQ(vmath::exp(89.0f), inf);
  EXPECT_EQ(vmath::exp(-104.0f), 0.0f);
  EXPECT_EQ(vmath::tanh(inf), 1.0f);
  EXPECT_EQ(vmath::tanh(-inf), -1.0f);
  EXPECT_EQ(vmath::tanh(0.0f), 0.0f);
}

// The tanh GELU and its derivative in double, as PyTorch's F.gelu(approximate="tanh").
double geluTanhRef(double v) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
}
double geluTanhGradRef(double v) {
  const double k = std::sqrt(2.0 / M_PI);
  const double t = std::tanh(k * (v + 0.044715 * v * v * v));
  return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * v * v);
}

TEST(VectorMath, GeluTanhKernelsMatchDouble) {
  std::vector<float> x;
  for (int i = -200000; i <= 200000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);  // [-20, 20]
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size()), dy(x.size(), 1.0f), dx(x.size());
  cpu::geluTanh(x.data(), y.data(), n);
  cpu::geluTanhBackward(x.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i + 1 < n; ++i) {
    // Absolute near GELU's zero at x = 0 and its tail, relative elsewhere.
    const double want = geluTanhRef(x[i]);
    ASSERT_NEAR(y[i], want, 1e-6 * std::max(1.0, std::abs(want)) + 1e-7) << "x = " << x[i];
    const double grad = geluTanhGradRef(x[i]);
    ASSERT_NEAR(dx[i], grad, 2e-6) << "x = " << x[i];
  }
  EXPECT_TRUE(std::isnan(y[n - 1]));
  EXPECT_TRUE(std::isnan(dx[n - 1]));
}

TEST(VectorMath, SoftmaxKernelsMatchDouble) {
  const int64_t rows = 3, cols = 1001;  // odd: the vector loops' remainders too
  std::vector<float> logits(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i)
    logits[i] = static_cast<float>(std::sin(0.37 * i) * 12.0 + (i % 7));
  std::vector<int32_t> labels = {0, 500, 1000};
  std::vector<float> probs(rows * cols);
  const double loss =
      cpu::softmaxCrossEntropyForward(logits.data(), labels.data(), probs.data(), rows, cols);
  double want_loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double max = -1e300, sum = 0;
    for (int64_t c = 0; c < cols; ++c) max = std::max(max, double(logits[r * cols + c]));
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(logits[r * cols + c] - max);
    for (int64_t c = 0; c < cols; ++c) {
      const double p = std::exp(logits[r * cols + c] - max) / sum;
      ASSERT_NEAR(probs[r * cols + c], p, 1e-6 * p + 1e-12) << "row " << r << " col " << c;
    }
    want_loss += -(logits[r * cols + labels[r]] - max - std::log(sum));
  }
  EXPECT_NEAR(loss, want_loss / rows, 1e-6 * std::abs(want_loss / rows));

  // The causal softmax: a [1, T, T] score matrix, row i over columns 0..i.
  const int64_t tokens = 37;
  const float scale = 0.25f;
  std::vector<float> scores(tokens * tokens), causal(tokens * tokens);
  for (int64_t i = 0; i < tokens * tokens; ++i)
    scores[i] = static_cast<float>(std::cos(0.91 * i) * 20.0);
  cpu::causalSoftmaxForward(scores.data(), causal.data(), 1, tokens, scale);
  for (int64_t i = 0; i < tokens; ++i) {
    double max = -1e300, sum = 0;
    for (int64_t j = 0; j <= i; ++j) max = std::max(max, double(scores[i * tokens + j] * scale));
    for (int64_t j = 0; j <= i; ++j) sum += std::exp(scores[i * tokens + j] * scale - max);
    for (int64_t j = 0; j < tokens; ++j) {
      const double p = j <= i ? std::exp(scores[i * tokens + j] * scale - max) / sum : 0.0;
      ASSERT_NEAR(causal[i * tokens + j], p, 1e-6 * p + 1e-12) << "row " << i << " col " << j;
    }
  }
}

}  // namespace
}  // namespace ringmaster
