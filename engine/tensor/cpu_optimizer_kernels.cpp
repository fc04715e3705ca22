// The host's optimizer and gradient-clipping kernels of kernels.inc (sgdStep, adamStep, scale,
// sumSquares): plain loops that vectorise, with the same bits as the element-by-element loops they
// replaced (tests/engine/tensor/optimizer_kernels_test.cpp keeps those as the reference and
// compares every byte). Three things make that hold, and this file is built for them
// (engine/tensor/CMakeLists.txt):
// - -ffp-contract=off: no multiply-add is fused (the AVX2 clone has FMA, which rounds once where
//   the reference rounds twice), so each element sees the reference's operations in its order;
// - -fno-math-errno: std::sqrt becomes sqrtps, correctly rounded as sqrtss, without the branch to
//   the library call that sets errno for a negative argument (that branch kept the loops scalar);
// - `#pragma omp simd` (-fopenmp-simd) says the arrays do not overlap, so no run-time alias check.
// Loop-invariant choices (decoupled weight decay, momentum, Nesterov, the first step) are template
// parameters, so each loop body is straight-line code. Constants hoisted out of a loop (1 - beta)
// are the same float operations on the same operands. No division is replaced by a multiplication
// by a reciprocal: that is not the same rounding.
#include <algorithm>
#include <cmath>

#include "tensor/kernels.h"
#include "tensor/vector_math.h"  // RM_VECTOR_CLONES

namespace ringmaster::cpu {

RM_VECTOR_CLONES void scale(float* y, float alpha, int64_t n) {
  if (alpha == 0.0f) {
    std::fill(y, y + n, 0.0f);  // like BLAS: beta = 0 clears NaN and Inf too
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
}

// The sum runs in kSquareLanes interleaved partial sums (lane k takes the elements i with
// i % kSquareLanes == k), folded pairwise at the end: lane k + 8 into k, then k + 4 into k, ...
// That order is fixed by this code, not by the vector width, so the SSE2 and AVX2 builds (and any
// other) give the same bits. It is not the order of one running sum, which no vector code can
// keep; the squares themselves are exact in double (a float's 24-bit significand squared fits in
// 53 bits), so only the additions round, and the two orders agree to within n * 2^-53 relative
// (the test asserts 1e-12 against the running sum on its sizes).
constexpr int kSquareLanes = 16;

RM_VECTOR_CLONES double sumSquares(const float* x, int64_t n) {
  double lane[kSquareLanes] = {};
  int64_t i = 0;
  for (; i + kSquareLanes <= n; i += kSquareLanes) {
    for (int k = 0; k < kSquareLanes; ++k) {
      const double v = x[i + k];
      lane[k] += v * v;
    }
  }
  for (int k = 0; i + k < n; ++k) {
    const double v = x[i + k];
    lane[k] += v * v;
  }
  for (int width = kSquareLanes / 2; width > 0; width /= 2) {
    for (int k = 0; k < width; ++k) lane[k] += lane[k + width];
  }
  return lane[0];
}

namespace {

// SGD with momentum for one tensor (torch.optim.SGD's update):
//   g = grad + weight_decay * param
//   buf = first step ? g : momentum * buf + (1 - dampening) * g
//   g = nesterov ? g + momentum * buf : buf
//   param -= lr * g
template <bool kFirstStep, bool kNesterov>
[[gnu::always_inline]] inline void sgdMomentumLoop(float* param, const float* grad, float* buf,
                                                   int64_t n, float lr, float momentum,
                                                   float dampening, float weight_decay) {
  const float keep = 1.0f - dampening;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] + weight_decay * param[i];
    buf[i] = kFirstStep ? g : momentum * buf[i] + keep * g;
    g = kNesterov ? g + momentum * buf[i] : buf[i];
    param[i] -= lr * g;
  }
}

// Adam for one tensor (torch.optim.Adam, or AdamW when kDecoupled):
//   AdamW: param *= 1 - lr * weight_decay;   Adam: g = grad + weight_decay * param
//   m += (1 - beta1) * (g - m);   v = beta2 * v + (1 - beta2) * g * g
//   param -= step_size * m / (sqrt(v) / sqrt(bias_correction2) + eps)
template <bool kDecoupled>
[[gnu::always_inline]] inline void adamLoop(float* param, const float* grad, float* exp_avg,
                                            float* exp_avg_sq, int64_t n, float lr, float beta1,
                                            float beta2, float eps, float weight_decay,
                                            float step_size, float bias_correction2_sqrt) {
  const float one_minus_beta1 = 1.0f - beta1;
  const float one_minus_beta2 = 1.0f - beta2;
  const float decay = 1.0f - lr * weight_decay;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i];
    if constexpr (kDecoupled) {
      param[i] *= decay;
    } else {
      g += weight_decay * param[i];
    }
    const float m = exp_avg[i] + one_minus_beta1 * (g - exp_avg[i]);
    const float v = beta2 * exp_avg_sq[i] + one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    const float denom = std::sqrt(v) / bias_correction2_sqrt + eps;
    param[i] -= step_size * m / denom;
  }
}

}  // namespace

RM_VECTOR_CLONES void sgdStep(float* param, const float* grad, float* momentum_buffer, int64_t n,
                              float lr, float momentum, float dampening, float weight_decay,
                              bool nesterov, bool first_step) {
  if (momentum == 0.0f) {  // no buffer: g = grad + weight_decay * param; param -= lr * g
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) param[i] -= lr * (grad[i] + weight_decay * param[i]);
    return;
  }
  // Called, not taken by address: each is inlined into this function's clone and built for its ISA.
  float* buf = momentum_buffer;
  if (first_step && nesterov) {
    sgdMomentumLoop<true, true>(param, grad, buf, n, lr, momentum, dampening, weight_decay);
  } else if (first_step) {
    sgdMomentumLoop<true, false>(param, grad, buf, n, lr, momentum, dampening, weight_decay);
  } else if (nesterov) {
    sgdMomentumLoop<false, true>(param, grad, buf, n, lr, momentum, dampening, weight_decay);
  } else {
    sgdMomentumLoop<false, false>(param, grad, buf, n, lr, momentum, dampening, weight_decay);
  }
}

RM_VECTOR_CLONES void adamStep(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                               int64_t n, float lr, float beta1, float beta2, float eps,
                               float weight_decay, int64_t step, bool decoupled) {
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(beta1), step);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(beta2), step);
  const auto step_size = static_cast<float>(lr / bias_correction1);
  const auto bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  if (decoupled) {
    adamLoop<true>(param, grad, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay,
                   step_size, bias_correction2_sqrt);
  } else {
    adamLoop<false>(param, grad, exp_avg, exp_avg_sq, n, lr, beta1, beta2, eps, weight_decay,
                    step_size, bias_correction2_sqrt);
  }
}

}  // namespace ringmaster::cpu
