// The host implementation of kernels.inc: GEMM through oneDNN or OpenBLAS (host_gemm.h),
// everything else as plain loops that double as the obvious reference the CUDA kernels are tested
// against.
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"
#include "tensor/allocator.h"
#include "tensor/host_gemm.h"
#include "tensor/kernels.h"
#include "tensor/vector_math.h"

namespace ringmaster::cpu {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    scale(c, beta, m * n);
    return;
  }
  sgemm(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

void fill(float* y, int64_t n, float value) {
  std::fill(y, y + n, value);
}

void addBiasRows(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
  }
}

void sumRows(const float* x, float* out, int64_t rows, int64_t cols, float beta) {
  for (int64_t c = 0; c < cols; ++c) out[c] = beta == 0.0f ? 0.0f : beta * out[c];
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    for (int64_t c = 0; c < cols; ++c) out[c] += row[c];
  }
}

void axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void mul(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

// `omp simd` lets the selects read both sides (a plain loop may not read dy[i] where x[i] <= 0, so
// GCC kept a branch per element, mispredicted on every sign change: 6 % of an MLP step).
RM_VECTOR_CLONES void relu(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

RM_VECTOR_CLONES void reluBackward(const float* x, const float* dy, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
}  // namespace

void gelu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

void geluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float cdf = 0.5f * (1.0f + std::erf(x[i] * kInvSqrt2));
    float pdf = kInvSqrt2Pi * std::exp(-0.5f * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

void dropout(const float* x, float* y, float* mask, int64_t n, float p, uint64_t seed,
             uint64_t offset) {
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    mask[i] = uniformFloat(seed, offset + static_cast<uint64_t>(i)) >= p ? keep_scale : 0.0f;
    y[i] = x[i] * mask[i];
  }
}

// LayerNorm sums each row in double, in `omp simd` reductions: vector lanes of partial sums, so
// that the row is not one chain of dependent adds (the order differs from a plain loop's in the
// last bits of the double, far below the float result's).
RM_VECTOR_CLONES void layerNormForward(const float* x, const float* gamma, const float* beta,
                                       float* y, float* mean, float* rstd, int64_t rows,
                                       int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < cols; ++c) sum += xr[c];
    const double mu = cols > 0 ? sum / cols : 0.0;
    double sum_sq = 0.0;
#pragma omp simd reduction(+ : sum_sq)
    for (int64_t c = 0; c < cols; ++c) sum_sq += (xr[c] - mu) * (xr[c] - mu);
    const double var = cols > 0 ? sum_sq / cols : 0.0;
    const auto row_mean = static_cast<float>(mu);
    const auto inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    mean[r] = row_mean;
    rstd[r] = inv;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = (xr[c] - row_mean) * inv * gamma[c] + beta[c];
  }
}

RM_VECTOR_CLONES void layerNormBackward(const float* x, const float* gamma, const float* mean,
                                        const float* rstd, const float* dy, float* dx,
                                        float* dgamma, float* dbeta, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    const float row_mean = mean[r], inv = rstd[r];
    double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - row_mean) * inv;
      const float dxhat = dyr[c] * gamma[c];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += static_cast<double>(dxhat) * xhat;
      dgamma[c] += dyr[c] * xhat;
      dbeta[c] += dyr[c];
    }
    const auto mean_dxhat = static_cast<float>(sum_dxhat / cols);
    const auto mean_dxhat_xhat = static_cast<float>(sum_dxhat_xhat / cols);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - row_mean) * inv;
      dxr[c] = inv * (dyr[c] * gamma[c] - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
}

namespace {
// Sum of n floats in double, in four interleaved partial sums (one long chain of dependent adds
// would be latency-bound: the softmaxes' rows run to the vocabulary's 50257).
double sumAsDouble(const float* x, int64_t n) {
  double part[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k) part[k] += x[i + k];
  for (; i < n; ++i) part[0] += x[i];
  return (part[0] + part[1]) + (part[2] + part[3]);
}

void checkLabel(int32_t label, int64_t cols, int64_t row) {
  if (label < 0 || label >= cols) {
    RM_THROW(kInvalidArgument,
             fmt::format("label {} of row {} is outside [0, {})", label, row, cols));
  }
}
}  // namespace

RM_VECTOR_CLONES double softmaxCrossEntropyForward(const float* logits, const int32_t* labels,
                                                   float* probs, int64_t rows, int64_t cols) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    checkLabel(labels[r], cols, r);
    const float* lr = logits + r * cols;
    float* pr = probs + r * cols;
    const float max = *std::max_element(lr, lr + cols);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) pr[c] = vmath::exp(lr[c] - max);
    const double sum = sumAsDouble(pr, cols);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < cols; ++c) pr[c] *= inv;
    total += -(static_cast<double>(lr[labels[r]]) - max - std::log(sum));
  }
  return rows > 0 ? total / rows : 0.0;
}

void softmaxCrossEntropyBackward(const float* probs, const int32_t* labels, float* dlogits,
                                 int64_t rows, int64_t cols, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    checkLabel(labels[r], cols, r);
    for (int64_t c = 0; c < cols; ++c) {
      dlogits[r * cols + c] = (probs[r * cols + c] - (c == labels[r] ? 1.0f : 0.0f)) * scale;
    }
  }
}

int64_t countCorrect(const float* logits, const int32_t* labels, int64_t rows, int64_t cols) {
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* lr = logits + r * cols;
    correct += (std::max_element(lr, lr + cols) - lr) == labels[r];
  }
  return correct;
}

// scale, sumSquares, sgdStep and adamStep: cpu_optimizer_kernels.cpp.

// ------------------------------------------------------------------------------------------------
// Transformer kernels

void gemmBatched(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                 float alpha, const float* a, int64_t stride_a, const float* b, int64_t stride_b,
                 float beta, float* c, int64_t stride_c) {
  const GemmSignalHold held;  // once for the batch, not per product
  for (int64_t i = 0; i < batch; ++i)
    gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, b + i * stride_b, beta,
         c + i * stride_c);
}

namespace {

// Rows of C per product in gemmBatchedCausal: a [T, T] matrix in 32-row blocks costs
// (T / 32 + 1) / (2 T / 32) of the full product (62.5 % at T = 128).
constexpr int64_t kCausalRowBlock = 32;

// C[r0:r1, :] of one causal product, from the parts of A and B that are not masked: where C is
// the causal matrix, columns 0..r1 of C (k whole); where A is, k over 0..r1 (A's rows r0..r1,
// zero past column r1) or, for A^T, over r0..m (A's columns r0..r1 are zero above row r0).
void causalRowBlock(bool causal_a, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                    const float* a, const float* b, float* c, int64_t r0, int64_t r1) {
  const int64_t lda = trans_a ? m : k;
  const int64_t ldb = trans_b ? k : n;
  const float* a_rows = trans_a ? a + r0 : a + r0 * lda;
  int64_t cols = n, k_first = 0, k_end = k;
  if (!causal_a)
    cols = r1;
  else if (!trans_a)
    k_end = r1;
  else
    k_first = r0;
  const float* a_part = a_rows + (trans_a ? k_first * lda : k_first);
  const float* b_part = b + (trans_b ? k_first : k_first * ldb);
  sgemm(trans_a, trans_b, r1 - r0, cols, k_end - k_first, 1.0f, a_part, lda, b_part, ldb, 0.0f,
        c + r0 * n, n);
}

}  // namespace

void gemmBatchedCausal(bool causal_a, bool trans_a, bool trans_b, int64_t batch, int64_t m,
                       int64_t n, int64_t k, const float* a, int64_t stride_a, const float* b,
                       int64_t stride_b, float* c, int64_t stride_c) {
  RM_ENFORCE(causal_a ? m == k : m == n,
             fmt::format("a causal product of {} x {} x {} has no square causal matrix", m, n, k));
  if (m == 0 || n == 0 || k == 0) {
    gemmBatched(trans_a, trans_b, batch, m, n, k, 1.0f, a, stride_a, b, stride_b, 0.0f, c,
                stride_c);
    return;
  }
  const GemmSignalHold held;  // once for the batch, not per product
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t r0 = 0; r0 < m; r0 += kCausalRowBlock)
      causalRowBlock(causal_a, trans_a, trans_b, m, n, k, a + i * stride_a, b + i * stride_b,
                     c + i * stride_c, r0, std::min(m, r0 + kCausalRowBlock));
}

namespace {

constexpr float kGeluTanhScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluTanhCubic = 0.044715f;

}  // namespace

// The GELU and (below) the softmaxes call vmath::exp / tanh inline in `omp simd` loops
// (-fopenmp-simd, no OpenMP runtime), which vectorise where glibc's expf / tanhf calls kept them
// scalar; RM_VECTOR_CLONES adds AVX2 + FMA and AVX-512 builds of each, picked where the CPU has
// them.
RM_VECTOR_CLONES void geluTanh(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + vmath::tanh(kGeluTanhScale * (v + kGeluTanhCubic * v * v * v)));
  }
}

// The derivative in the sigmoid form of the tanh GELU: 0.5 (1 + tanh u) = s with s = 1 / (1 + e)
// and e = e^{-2u}, so d/dx [x s] = s + x 2 s (1 - s) u', one exp and one division an element
// (tanh's two branches cost both). s (1 - s) is written s (e s), exact where s rounds to 1 (1 - s
// would lose every digit there). The exponent is capped at 80 so that e stays finite: e s then
// stays in [0, 1] instead of giving inf * 0 in the far negative tail. The forward keeps the tanh
// form: its output feeds the next product, where autocast rounds it to 16 bits, and the tanh form
// rounds as PyTorch's does (gpt_reference_test compares the two roundings).
RM_VECTOR_CLONES void geluTanhBackward(const float* x, const float* dy, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    float minus_2u = -2.0f * kGeluTanhScale * (v + kGeluTanhCubic * v * v * v);
    minus_2u = minus_2u > 80.0f ? 80.0f : minus_2u;  // NaN fails the comparison and stays NaN
    const float e = vmath::exp(minus_2u);
    const float s = 1.0f / (1.0f + e);
    const float dinner = kGeluTanhScale * (1.0f + 3.0f * kGeluTanhCubic * v * v);
    dx[i] = dy[i] * (s + 2.0f * v * (s * (e * s)) * dinner);
  }
}

void embeddingForward(const int32_t* ids, const float* table, float* out, int64_t count,
                      int64_t dim, int64_t vocab) {
  for (int64_t i = 0; i < count; ++i) {
    const int32_t id = ids[i];
    RM_CHECK_ARG(
        id >= 0 && id < vocab,
        fmt::format("token id {} at position {} is outside the vocabulary [0, {})", id, i, vocab));
    std::copy(table + id * dim, table + (id + 1) * dim, out + i * dim);
  }
}

void embeddingBackward(const int32_t* ids, const float* dout, float* dtable, int64_t count,
                       int64_t dim) {
  for (int64_t i = 0; i < count; ++i) axpy(1.0f, dout + i * dim, dtable + ids[i] * dim, dim);
}

void addPositionRows(float* y, const float* pos, int64_t batch, int64_t tokens, int64_t dim) {
  for (int64_t b = 0; b < batch; ++b) axpy(1.0f, pos, y + b * tokens * dim, tokens * dim);
}

void positionRowsBackward(const float* dy, float* dpos, int64_t batch, int64_t tokens,
                          int64_t dim) {
  for (int64_t b = 0; b < batch; ++b) axpy(1.0f, dy + b * tokens * dim, dpos, tokens * dim);
}

void splitQkv(const float* qkv, float* q, float* k, float* v, int64_t batch, int64_t tokens,
              int64_t heads, int64_t head_dim) {
  const int64_t C = heads * head_dim;
  float* outs[3] = {q, k, v};
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t) {
      const float* row = qkv + (b * tokens + t) * 3 * C;
      for (int part = 0; part < 3; ++part)
        for (int64_t h = 0; h < heads; ++h)
          std::copy(row + part * C + h * head_dim, row + part * C + (h + 1) * head_dim,
                    outs[part] + ((b * heads + h) * tokens + t) * head_dim);
    }
}

void mergeQkv(const float* dq, const float* dk, const float* dv, float* dqkv, int64_t batch,
              int64_t tokens, int64_t heads, int64_t head_dim) {
  const int64_t C = heads * head_dim;
  const float* ins[3] = {dq, dk, dv};
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t) {
      float* row = dqkv + (b * tokens + t) * 3 * C;
      for (int part = 0; part < 3; ++part)
        for (int64_t h = 0; h < heads; ++h) {
          const float* from = ins[part] + ((b * heads + h) * tokens + t) * head_dim;
          std::copy(from, from + head_dim, row + part * C + h * head_dim);
        }
    }
}

void permute0213(const float* x, float* y, int64_t n0, int64_t n1, int64_t n2, int64_t n3) {
  for (int64_t a = 0; a < n0; ++a)
    for (int64_t b = 0; b < n1; ++b)
      for (int64_t c = 0; c < n2; ++c) {
        const float* from = x + ((a * n1 + b) * n2 + c) * n3;
        std::copy(from, from + n3, y + ((a * n2 + c) * n1 + b) * n3);
      }
}

RM_VECTOR_CLONES void causalSoftmaxForward(const float* scores, float* probs, int64_t matrices,
                                           int64_t tokens, float scale) {
  for (int64_t r = 0; r < matrices * tokens; ++r) {
    const int64_t i = r % tokens;  // the row's token: it sees columns 0..i
    const float* in = scores + r * tokens;
    float* out = probs + r * tokens;
    float max = in[0] * scale;
#pragma omp simd reduction(max : max)
    for (int64_t j = 1; j <= i; ++j) max = std::max(max, in[j] * scale);
#pragma omp simd
    for (int64_t j = 0; j <= i; ++j) out[j] = vmath::exp(in[j] * scale - max);
    const double sum = sumAsDouble(out, i + 1);
    const auto inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j <= i; ++j) out[j] *= inv;
    std::fill(out + i + 1, out + tokens, 0.0f);
  }
}

RM_VECTOR_CLONES void causalSoftmaxBackward(const float* probs, const float* dprobs, float* dscores,
                                            int64_t matrices, int64_t tokens, float scale) {
  for (int64_t r = 0; r < matrices * tokens; ++r) {
    const int64_t i = r % tokens;
    const float* p = probs + r * tokens;
    const float* dp = dprobs + r * tokens;
    float* out = dscores + r * tokens;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j <= i; ++j) dot += static_cast<double>(p[j]) * dp[j];
    const auto row_dot = static_cast<float>(dot);
#pragma omp simd
    for (int64_t j = 0; j <= i; ++j) out[j] = scale * p[j] * (dp[j] - row_dot);
    std::fill(out + i + 1, out + tokens, 0.0f);
  }
}

// ------------------------------------------------------------------------------------------------
// Mixed precision: 16-bit casts, round-through, the non-finite count, low-precision GEMM
//
// bf16 is the top half of a float, so its conversions are bit arithmetic in loops GCC vectorises.
// fp16 goes through x86's F16C (vcvtps2ph with round to nearest even, vcvtph2ps; 8 values an
// instruction) where the processor has it, else through device.h's scalar floatToHalf /
// halfToFloat, which give the same bits (low_precision_test checks every half and a sweep of
// floats). bf16 products run on the processor's bf16 instructions where it has them (avx512_bf16:
// oneDNN's matmul, host_gemm.h's bf16GemmNative, one thread); elsewhere, and for fp16, the host
// GEMM widens its 16-bit operands to fp32 (exact) and calls sgemm (Debian's OpenBLAS 0.3.21 exports
// no cblas_sbgemm). Both multiply the pairs exactly and sum in fp32, in different orders; widening
// costs one pass over the operands and runs at fp32's rate, half the bf16 instructions'.

namespace {

void checkFormat(DType format) {
  RM_CHECK_ARG(format == DType::kBF16 || format == DType::kF16,
               fmt::format("a 16-bit kernel takes BF16 or F16, got {}", dtypeName(format)));
}

// floatToBf16, inline so that the loops below vectorise (the same bits: tested).
inline uint16_t toBf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  return static_cast<uint16_t>((bits & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
}

inline float fromBf16(uint16_t value) {
  return std::bit_cast<float>(static_cast<uint32_t>(value) << 16);
}

#if defined(__x86_64__) && defined(__GNUC__)
// CPUID leaf 1 directly: clang 14's __builtin_cpu_supports knows "avx" but not "f16c". F16C's
// 256-bit forms need AVX, and AVX needs the OS to save the YMM registers (OSXSAVE, then XCR0).
bool haveF16c() {
  static const bool have = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    const bool osxsave = (ecx & bit_OSXSAVE) != 0, avx = (ecx & bit_AVX) != 0,
               f16c = (ecx & bit_F16C) != 0;
    if (!osxsave || !avx || !f16c) return false;
    unsigned xcr0_low = 0, xcr0_high = 0;
    __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    return (xcr0_low & 0x6u) == 0x6u;  // XMM and YMM state enabled
  }();
  return have;
}

[[gnu::target("avx,f16c")]] void floatToHalfF16c(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = floatToHalf(src[i]);
}

[[gnu::target("avx,f16c")]] void halfToFloatF16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = halfToFloat(src[i]);
}

[[gnu::target("avx,f16c")]] void roundThroughHalfF16c(float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(y + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) y[i] = halfToFloat(floatToHalf(y[i]));
}
#else
bool haveF16c() {
  return false;
}
void floatToHalfF16c(const float*, uint16_t*, int64_t) {}
void halfToFloatF16c(const uint16_t*, float*, int64_t) {}
void roundThroughHalfF16c(float*, int64_t) {}
#endif

// fp32 copies of 16-bit operands, from the host's caching allocator (so they count in its
// figures, and cost no malloc once cached), freed when the GEMM returns.
class Widened {
 public:
  Widened(const uint16_t* src, int64_t n, DType format)
      : data_(static_cast<float*>(
            allocatorFor(Device::cpu()).allocate(static_cast<size_t>(n) * sizeof(float)))) {
    castToFloat(src, data_, n, format);
  }
  ~Widened() { allocatorFor(Device::cpu()).deallocate(data_); }
  Widened(const Widened&) = delete;
  Widened& operator=(const Widened&) = delete;
  const float* data() const { return data_; }

 private:
  float* data_;
};

// Elements a strided batch of `batch` matrices of `size` elements spans.
int64_t batchExtent(int64_t batch, int64_t stride, int64_t size) {
  return (batch - 1) * stride + size;
}

}  // namespace

RM_VECTOR_CLONES void castFromFloat(const float* src, uint16_t* dst, int64_t n, DType format) {
  checkFormat(format);
  if (format == DType::kBF16) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = toBf16(src[i]);
  } else if (haveF16c()) {
    floatToHalfF16c(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = floatToHalf(src[i]);
  }
}

RM_VECTOR_CLONES void castToFloat(const uint16_t* src, float* dst, int64_t n, DType format) {
  checkFormat(format);
  if (format == DType::kBF16) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = fromBf16(src[i]);
  } else if (haveF16c()) {
    halfToFloatF16c(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = halfToFloat(src[i]);
  }
}

RM_VECTOR_CLONES void roundThrough(float* y, int64_t n, DType format) {
  checkFormat(format);
  if (format == DType::kBF16) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = fromBf16(toBf16(y[i]));
  } else if (haveF16c()) {
    roundThroughHalfF16c(y, n);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = halfToFloat(floatToHalf(y[i]));
  }
}

RM_VECTOR_CLONES int64_t countNonFinite(const float* x, int64_t n) {
  int64_t count = 0;
#pragma omp simd reduction(+ : count)
  for (int64_t i = 0; i < n; ++i) {
    count += (std::bit_cast<uint32_t>(x[i]) & 0x7F800000u) == 0x7F800000u ? 1 : 0;
  }
  return count;
}

void gemmLowPrecision(DType format, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                      float alpha, const uint16_t* a, const uint16_t* b, float beta, float* c) {
  checkFormat(format);
  if (m == 0 || n == 0 || k == 0) {  // no operand is read: gemm scales C
    gemm(trans_a, trans_b, m, n, k, alpha, nullptr, nullptr, beta, c);
    return;
  }
  if (format == DType::kBF16 &&
      bf16GemmNative(trans_a, trans_b, 1, m, n, k, alpha, a, m * k, b, k * n, beta, c, m * n))
    return;
  const Widened wide_a(a, m * k, format);
  const Widened wide_b(b, k * n, format);
  gemm(trans_a, trans_b, m, n, k, alpha, wide_a.data(), wide_b.data(), beta, c);
}

void gemmBatchedLowPrecision(DType format, bool trans_a, bool trans_b, int64_t batch, int64_t m,
                             int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t stride_a,
                             const uint16_t* b, int64_t stride_b, float beta, float* c,
                             int64_t stride_c) {
  checkFormat(format);
  if (batch <= 0 || m == 0 || n == 0) return;
  if (k == 0) {  // no products: every C_i = beta * C_i, as gemm does
    for (int64_t i = 0; i < batch; ++i) scale(c + i * stride_c, beta, m * n);
    return;
  }
  if (format == DType::kBF16 && bf16GemmNative(trans_a, trans_b, batch, m, n, k, alpha, a, stride_a,
                                               b, stride_b, beta, c, stride_c))
    return;
  const Widened wide_a(a, batchExtent(batch, stride_a, m * k), format);
  const Widened wide_b(b, batchExtent(batch, stride_b, k * n), format);
  gemmBatched(trans_a, trans_b, batch, m, n, k, alpha, wide_a.data(), stride_a, wide_b.data(),
              stride_b, beta, c, stride_c);
}

}  // namespace ringmaster::cpu
