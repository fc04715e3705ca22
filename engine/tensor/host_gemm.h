// The host's fp32 matrix product behind one entry point: oneDNN's dnnl_sgemm or OpenBLAS's
// cblas_sgemm, whichever measured faster for the transpose mode, the processor's instruction set
// and the thread count, and one thread count that both libraries follow.
#pragma once

#include <cstdint>

namespace ringmaster::cpu {

// The library a product goes to (named so that benchmarks and tests can say which ran).
enum class GemmLibrary { kOneDnn, kOpenBlas };

// C[m, n] (row stride ldc) = alpha * op(A) op(B) + beta * C, every matrix row-major with its own
// row stride; op transposes when the flag is set. m, n and k are positive.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Holds, for its scope, the signals a handler could catch on this thread, and lets the pending
// ones through at its end. Every oneDNN product takes one: oneDNN 2.6's JIT sgemm kernels point
// the stack pointer into the heap while they run (oneDNN issue 4845, fixed upstream after 3.11 by
// pull request 4855), so a handler run meanwhile would write its frame into the heap. A loop of
// many small products (the causal blocks) takes one around the loop: nested holds cost nothing, the
// outermost two system calls (about 0.4 us together).
class GemmSignalHold {
 public:
  GemmSignalHold();
  ~GemmSignalHold();
  GemmSignalHold(const GemmSignalHold&) = delete;
  GemmSignalHold& operator=(const GemmSignalHold&) = delete;
};

// The same product through one library, for benchmarks and the tests that compare the two.
void sgemmWith(GemmLibrary library, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
               float* c, int64_t ldc);

// C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, with A and B in bf16 (the top half of each
// float, stored as uint16_t) and C in fp32, every matrix row-major and packed (A_i at a + i *
// stride_a, each [m, k], or [k, m] when trans_a; likewise B_i and C_i): oneDNN's matmul on the
// processor's bf16 instructions (avx512_bf16), which multiply bf16 pairs exactly and sum them in
// fp32, twice as fast as fp32 products. Returns false, having done nothing, where there are none
// or the calling thread multiplies on several threads (sgemm's rule: OpenBLAS alone there); the
// caller then widens the operands to fp32 for sgemm, the same products summed in another order.
bool bf16GemmNative(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                    float alpha, const uint16_t* a, int64_t stride_a, const uint16_t* b,
                    int64_t stride_b, float beta, float* c, int64_t stride_c);

// Whether bf16GemmNative multiplies on this processor, on one thread.
bool haveNativeBf16Gemm();

// Which library sgemm gives a product (op(A) = A^T when trans_a) on this processor with this many
// threads: a rule from gemm_bench's measurements (host_gemm.cpp), never from timing this run, so
// that results do not change from one start to the next.
GemmLibrary gemmLibraryFor(bool trans_a, int threads);

// Threads per product for both libraries, from every thread of the process that calls sgemm
// (OpenMP's own setting is per thread). 0, as at start, leaves each library at its default:
// OMP_NUM_THREADS and OPENBLAS_NUM_THREADS, else one per CPU. gemmThreads() is the setting.
void setGemmThreads(int threads);
int gemmThreads();

}  // namespace ringmaster::cpu
