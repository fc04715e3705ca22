// Issue 36: the vectorised host optimizer kernels (cpu_optimizer_kernels.cpp) against the scalar
// loops they replaced, kept here as the reference: adamStep, sgdStep and scale byte for byte over
// every size from 0 to 67 (each vector tail), larger ones, unaligned starts and every branch of the
// update; sumSquares against its fixed blocked order byte for byte, and against one running sum
// within 1e-12 relative; and the ReLU kernels (now `omp simd` selects) against their plain loops.
// This file is built with -ffp-contract=off, so the reference rounds every multiply and add on
// its own, as the code it copies did.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/random.h"
#include "tensor/kernels.h"

namespace ringmaster {
namespace {

// ------------------------------------------------------------------------------------------------
// The reference: the loops as they were before issue 36, unchanged.

void referenceSgdStep(float* param, const float* grad, float* momentum_buffer, int64_t n, float lr,
                      float momentum, float dampening, float weight_decay, bool nesterov,
                      bool first_step) {
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] + weight_decay * param[i];
    if (momentum != 0.0f) {
      float& buf = momentum_buffer[i];
      buf = first_step ? g : momentum * buf + (1.0f - dampening) * g;
      g = nesterov ? g + momentum * buf : buf;
    }
    param[i] -= lr * g;
  }
}

void referenceAdamStep(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                       int64_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                       int64_t step, bool decoupled) {
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(beta1), step);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(beta2), step);
  const float step_size = static_cast<float>(lr / bias_correction1);
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i];
    if (decoupled) {
      param[i] *= 1.0f - lr * weight_decay;
    } else {
      g += weight_decay * param[i];
    }
    exp_avg[i] += (1.0f - beta1) * (g - exp_avg[i]);
    exp_avg_sq[i] = beta2 * exp_avg_sq[i] + (1.0f - beta2) * g * g;
    const float denom = std::sqrt(exp_avg_sq[i]) / bias_correction2_sqrt + eps;
    param[i] -= step_size * exp_avg[i] / denom;
  }
}

void referenceScale(float* y, float alpha, int64_t n) {
  if (alpha == 0.0f) {
    std::fill(y, y + n, 0.0f);
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
}

double runningSumSquares(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

// sumSquares' stated order: 16 lanes, lane k summing x[i] for i % 16 == k in index order, then
// lanes k + 8 into k, k + 4 into k, k + 2, k + 1.
double blockedSumSquares(const float* x, int64_t n) {
  double lane[16] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % 16] += static_cast<double>(x[i]) * x[i];
  for (int width = 8; width > 0; width /= 2)
    for (int k = 0; k < width; ++k) lane[k] += lane[k + width];
  return lane[0];
}

// ------------------------------------------------------------------------------------------------
// Inputs

// Sizes: every vector tail up to 67, then sizes around and well past the vector and cache widths.
// The largest is run at an aligned start only (offsetsFor), to keep the test fast.
constexpr int64_t kLarge = (1 << 18) + 5;
std::vector<int> offsetsFor(int64_t n) {
  return n == kLarge ? std::vector<int>{0} : std::vector<int>{0, 1};
}

std::vector<int64_t> sizes() {
  std::vector<int64_t> out;
  for (int64_t n = 0; n <= 67; ++n) out.push_back(n);
  for (int64_t n : {int64_t{127}, int64_t{128}, int64_t{129}, int64_t{1000}, int64_t{4099}, kLarge})
    out.push_back(n);
  return out;
}

// Gradient-like values: signed, magnitudes from about 2^-27 to 2^8, some exact zeros and some
// denormals (which a flush-to-zero setting would change).
std::vector<float> gradients(Rng& rng, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    const uint64_t kind = rng.below(16);
    if (kind == 0) {
      x = 0.0f;
    } else if (kind == 1) {
      x = static_cast<float>(rng.uniform(-1.0, 1.0) * 1e-39);  // denormal
    } else {
      const auto exponent = static_cast<int>(rng.below(34)) - 27;  // 2^-27 .. 2^6
      x = static_cast<float>(std::ldexp(rng.normal(), exponent));
    }
  }
  return v;
}

std::vector<float> normals(Rng& rng, int64_t n, double sigma) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(rng.normal() * sigma);
  return v;
}

// Second moments: non-negative, as Adam's are.
std::vector<float> squares(Rng& rng, int64_t n) {
  std::vector<float> v = gradients(rng, n);
  for (float& x : v) x *= x;
  return v;
}

// A buffer with `offset` floats in front, so that the kernel sees a start that is not 32-byte
// aligned when offset is odd.
struct Shifted {
  Shifted(const std::vector<float>& values, int offset) : storage(offset, 0.0f), offset(offset) {
    storage.insert(storage.end(), values.begin(), values.end());
  }
  float* data() { return storage.data() + offset; }
  std::vector<float> storage;
  int offset;
};

// The first index where two arrays differ bitwise, printed with both values; "" when equal.
std::string firstDifference(const char* what, const float* got, const float* want, int64_t n) {
  if (n == 0 || std::memcmp(got, want, static_cast<size_t>(n) * sizeof(float)) == 0) return "";
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      return fmt::format("{}[{}]: {:.9g} (vectorised) vs {:.9g} (reference)", what, i, got[i],
                         want[i]);
    }
  }
  return "";
}

// ------------------------------------------------------------------------------------------------
// Adam / AdamW

TEST(OptimizerKernels, AdamIsBitIdenticalToTheScalarLoop) {
  Rng rng(36);
  int64_t cases = 0;
  for (const int64_t n : sizes()) {
    // One set of inputs per size, shared by its cases: step 1 starts from PyTorch's zero state,
    // later steps from state already built up.
    const std::vector<float> param = normals(rng, n, 0.05);
    const std::vector<float> grad = gradients(rng, n);
    const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
    const std::vector<float> built_m = gradients(rng, n), built_v = squares(rng, n);
    for (const int offset : offsetsFor(n)) {
      for (const bool decoupled : {false, true}) {
        for (const float weight_decay : {0.0f, 0.01f}) {
          for (const int64_t step : {int64_t{1}, int64_t{2}, int64_t{1000}}) {
            const std::vector<float>& m = step == 1 ? zeros : built_m;
            const std::vector<float>& v = step == 1 ? zeros : built_v;
            Shifted p_vec(param, offset), g_vec(grad, offset), m_vec(m, offset), v_vec(v, offset);
            std::vector<float> p_ref = param, m_ref = m, v_ref = v;
            cpu::adamStep(p_vec.data(), g_vec.data(), m_vec.data(), v_vec.data(), n, 1e-3f, 0.9f,
                          0.999f, 1e-8f, weight_decay, step, decoupled);
            referenceAdamStep(p_ref.data(), grad.data(), m_ref.data(), v_ref.data(), n, 1e-3f, 0.9f,
                              0.999f, 1e-8f, weight_decay, step, decoupled);
            const std::string where =
                fmt::format("n={} offset={} decoupled={} weight_decay={} step={}", n, offset,
                            decoupled, weight_decay, step);
            EXPECT_EQ(firstDifference("param", p_vec.data(), p_ref.data(), n), "") << where;
            EXPECT_EQ(firstDifference("exp_avg", m_vec.data(), m_ref.data(), n), "") << where;
            EXPECT_EQ(firstDifference("exp_avg_sq", v_vec.data(), v_ref.data(), n), "") << where;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, (2 * static_cast<int64_t>(sizes().size()) - 1) * 2 * 2 * 3);
}

// Three steps in a row on the same tensors, so that the state each step leaves is the next one's
// input, with other hyperparameters (betas, eps, a large learning rate).
TEST(OptimizerKernels, AdamStaysBitIdenticalOverConsecutiveSteps) {
  Rng rng(3600);
  for (const int64_t n : {int64_t{13}, int64_t{67}, int64_t{100003}}) {
    for (const bool decoupled : {false, true}) {
      std::vector<float> p_vec = normals(rng, n, 1.0), m_vec(n), v_vec(n);
      std::vector<float> p_ref = p_vec, m_ref(n), v_ref(n);
      for (int64_t step = 1; step <= 3; ++step) {
        const std::vector<float> grad = gradients(rng, n);
        cpu::adamStep(p_vec.data(), grad.data(), m_vec.data(), v_vec.data(), n, 0.5f, 0.8f, 0.95f,
                      1e-6f, 0.1f, step, decoupled);
        referenceAdamStep(p_ref.data(), grad.data(), m_ref.data(), v_ref.data(), n, 0.5f, 0.8f,
                          0.95f, 1e-6f, 0.1f, step, decoupled);
      }
      const std::string where = fmt::format("n={} decoupled={}", n, decoupled);
      EXPECT_EQ(firstDifference("param", p_vec.data(), p_ref.data(), n), "") << where;
      EXPECT_EQ(firstDifference("exp_avg", m_vec.data(), m_ref.data(), n), "") << where;
      EXPECT_EQ(firstDifference("exp_avg_sq", v_vec.data(), v_ref.data(), n), "") << where;
    }
  }
}

// ------------------------------------------------------------------------------------------------
// SGD

struct SgdCase {
  float momentum, dampening, weight_decay;
  bool nesterov, first_step;
};

std::vector<SgdCase> sgdCases() {
  std::vector<SgdCase> out;
  for (const float momentum : {0.0f, 0.9f})
    for (const float dampening : {0.0f, 0.1f})
      for (const float weight_decay : {0.0f, 1e-4f})
        for (const bool nesterov : {false, true})
          for (const bool first_step : {false, true})
            out.push_back({momentum, dampening, weight_decay, nesterov, first_step});
  return out;
}

TEST(OptimizerKernels, SgdIsBitIdenticalToTheScalarLoop) {
  Rng rng(37);
  for (const int64_t n : sizes()) {
    const std::vector<float> param = normals(rng, n, 0.05);
    const std::vector<float> grad = gradients(rng, n);
    const std::vector<float> buffer = gradients(rng, n);
    for (const int offset : offsetsFor(n)) {
      for (const SgdCase& c : sgdCases()) {
        Shifted p_vec(param, offset), g_vec(grad, offset), b_vec(buffer, offset);
        std::vector<float> p_ref = param, b_ref = buffer;
        // Momentum 0: no buffer at all, as Sgd::step passes none.
        float* vec_buffer = c.momentum != 0.0f ? b_vec.data() : nullptr;
        float* ref_buffer = c.momentum != 0.0f ? b_ref.data() : nullptr;
        cpu::sgdStep(p_vec.data(), g_vec.data(), vec_buffer, n, 0.05f, c.momentum, c.dampening,
                     c.weight_decay, c.nesterov, c.first_step);
        referenceSgdStep(p_ref.data(), grad.data(), ref_buffer, n, 0.05f, c.momentum, c.dampening,
                         c.weight_decay, c.nesterov, c.first_step);
        const std::string where = fmt::format(
            "n={} offset={} momentum={} dampening={} weight_decay={} nesterov={} "
            "first_step={}",
            n, offset, c.momentum, c.dampening, c.weight_decay, c.nesterov, c.first_step);
        EXPECT_EQ(firstDifference("param", p_vec.data(), p_ref.data(), n), "") << where;
        EXPECT_EQ(firstDifference("momentum_buffer", b_vec.data(), b_ref.data(), n), "") << where;
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Gradient clipping: scale and sumSquares

TEST(OptimizerKernels, ScaleIsBitIdenticalToTheScalarLoop) {
  Rng rng(38);
  for (const int64_t n : sizes()) {
    for (const float alpha : {0.37f, -2.0f, 1e-30f, 0.0f}) {
      const std::vector<float> y = gradients(rng, n);
      Shifted vec(y, 1);
      std::vector<float> ref = y;
      cpu::scale(vec.data(), alpha, n);
      referenceScale(ref.data(), alpha, n);
      EXPECT_EQ(firstDifference("y", vec.data(), ref.data(), n), "")
          << fmt::format("n={} alpha={}", n, alpha);
    }
  }
}

// sumSquares cannot keep one running sum's order and vectorise; its order is the blocked one
// above, fixed whatever the vector width, so a clipping coefficient is the same on every machine
// and every run. It stays within 1e-12 of the running sum (its squares are exact; only the sums
// round).
TEST(OptimizerKernels, SumSquaresFollowsItsBlockedOrderExactly) {
  Rng rng(39);
  double worst = 0;
  for (const int64_t n : sizes()) {
    for (const int offset : offsetsFor(n)) {
      const std::vector<float> x = gradients(rng, n);
      Shifted shifted(x, offset);
      const double got = cpu::sumSquares(shifted.data(), n);
      const double blocked = blockedSumSquares(x.data(), n);
      EXPECT_EQ(std::memcmp(&got, &blocked, sizeof got), 0) << fmt::format(
          "n={} offset={}: {:.17g} vs the blocked order's {:.17g}", n, offset, got, blocked);
      const double again = cpu::sumSquares(shifted.data(), n);
      EXPECT_EQ(std::memcmp(&got, &again, sizeof got), 0) << "n=" << n;
      const double running = runningSumSquares(x.data(), n);
      const double relative = running == 0 ? std::abs(got) : std::abs(got - running) / running;
      EXPECT_LE(relative, 1e-12) << fmt::format("n={}: {:.17g} vs {:.17g}", n, got, running);
      worst = std::max(worst, relative);
    }
  }
  // The orders do differ somewhere on these inputs (else this test would not see a reordering).
  EXPECT_GT(worst, 0.0);
  std::printf("sumSquares vs one running sum: worst relative difference %.3g\n", worst);
}

// ------------------------------------------------------------------------------------------------
// ReLU: a select per element, so the vectorised loops must give the plain ones' bits exactly,
// signed zeros, infinities and NaNs included.

TEST(ElementwiseKernels, ReluAndItsBackwardEqualThePlainLoops) {
  Rng rng(40);
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            1e-40f,
                            -1e-40f};
  for (const int64_t n : sizes()) {
    std::vector<float> x = gradients(rng, n), dy = gradients(rng, n);
    for (int64_t i = 0; i < n; i += 5) x[i] = specials[rng.below(std::size(specials))];
    for (int64_t i = 2; i < n; i += 7) dy[i] = specials[rng.below(std::size(specials))];
    std::vector<float> want_y(n), want_dx(n);
    for (int64_t i = 0; i < n; ++i) {
      want_y[i] = x[i] > 0.0f ? x[i] : 0.0f;
      want_dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
    }
    std::vector<float> y(n), dx(n);
    cpu::relu(x.data(), y.data(), n);
    cpu::reluBackward(x.data(), dy.data(), dx.data(), n);
    EXPECT_EQ(firstDifference("relu", y.data(), want_y.data(), n), "") << "n=" << n;
    EXPECT_EQ(firstDifference("reluBackward", dx.data(), want_dx.data(), n), "") << "n=" << n;
  }
}

}  // namespace
}  // namespace ringmaster
