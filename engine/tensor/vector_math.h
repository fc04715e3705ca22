// Branch-free, call-free single-precision exp and tanh that GCC and Clang vectorise inside plain
// loops (`#pragma omp simd` with -fopenmp-simd), for the host kernels' GELU and softmax loops.
#pragma once

#include <bit>
#include <cstdint>

// Put on a host kernel whose loop uses these: GCC builds it three times, for baseline x86-64 (SSE2,
// 4 floats a vector), x86-64-v3 (AVX2 + FMA, 8) and x86-64-v4 (AVX-512, 16), and picks one per
// machine when the program loads (an ifunc). Results differ between them in the last bits (FMA
// contraction, the order of `omp simd` reductions), within the bounds stated below. Elsewhere
// (other compilers, other architectures) one build.
// Not under ThreadSanitizer: the loader runs an ifunc's resolver before the TSan runtime is up, and
// the instrumented resolver crashes the program at start-up.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define RM_VECTOR_CLONES [[gnu::target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")]]
#else
#define RM_VECTOR_CLONES
#endif

namespace ringmaster::vmath {

// e^x. Cephes' expf: x = n ln2 + r with n = round(x / ln2), |r| <= ln2 / 2 (ln2 split in two for
// an exact n ln2), e^r by a degree-7 polynomial, 2^n applied as two normal halves so that the
// whole range works without a branch: results from e^-104 (0: below the smallest denormal) to
// e^89 (inf: above FLT_MAX), denormals included. Relative error below 1.5e-7 where the result is
// normal (asserted in vector_math_test; 8.1e-8 the largest seen over every 37th float); NaN gives
// NaN, -inf 0, +inf inf.
[[gnu::always_inline]] inline float exp(float x) {
  constexpr float kLo = -104.0f;
  constexpr float kHi = 89.0f;
  x = x > kHi ? kHi : x;  // NaN fails both comparisons and stays NaN
  x = x < kLo ? kLo : x;
  // n from a NaN-free copy, so the float -> int conversion is always defined.
  const float xs = x == x ? x : 0.0f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float nf = (xs * 1.44269504088896341f + kRound) - kRound;
  const float r = (x - nf * 0.693359375f) - nf * -2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  const auto n = static_cast<int32_t>(nf);  // in [-150, 128]
  const int32_t half = n >> 1;
  const float s1 = std::bit_cast<float>((half + 127) << 23);
  const float s2 = std::bit_cast<float>((n - half + 127) << 23);
  return p * s1 * s2;
}

// tanh(x): Cephes' tanhf, branch-free. |x| < 0.625: an odd polynomial; otherwise
// 1 - 2 / (e^{2|x|} + 1) with the sign put back; both are computed and one is kept. Relative error
// below 2.5e-7 (asserted in vector_math_test; 1.4e-7 the largest seen over every 37th float);
// saturates to +-1 (exp's inf gives 2 / inf = 0), NaN gives NaN.
[[gnu::always_inline]] inline float tanh(float x) {
  const float a = x < 0.0f ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);
  const float signed_big = x < 0.0f ? -big : big;
  return a < 0.625f ? small : signed_big;
}

}  // namespace ringmaster::vmath
