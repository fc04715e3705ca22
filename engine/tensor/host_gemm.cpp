// The host's fp32 matrix product: oneDNN or OpenBLAS by threads, transpose mode and instruction
// set, and one thread count for both (host_gemm.h).
#include "tensor/host_gemm.h"

#include <cblas.h>
#include <dnnl.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>

#include <fmt/format.h>

#include "core/error.h"

// OpenMP's thread setting, from the libgomp that oneDNN is built against (declared here rather
// than through <omp.h>, which each compiler ships its own of; the clang builds link the same
// libgomp).
extern "C" {
int omp_get_max_threads();
void omp_set_num_threads(int threads);
}

namespace ringmaster::cpu {

namespace {

std::atomic<int> gemm_threads{0};

// oneDNN's weight-gradient kernel (op(A) = A^T: dW = x^T dy) runs at 43 GFLOP/s against
// OpenBLAS's 95-99 on an AVX2 core when K is long and N short, and at 104-115 against 93-99 with
// AVX-512 (gemm_bench, bench/README.md); in the other modes oneDNN is the faster or within 6 %.
bool oneDnnHasAvx512() {
  static const bool have = [] {
    const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
    const unsigned avx512 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core);
    return (isa & avx512) == avx512;
  }();
  return have;
}

// OpenMP's thread count is a setting of each thread, so every thread that multiplies takes the
// process's before oneDNN reads it. Returns the calling thread's count.
int applyThreadsToThisThread() {
  const int threads = gemm_threads.load(std::memory_order_relaxed);
  if (threads > 0 && omp_get_max_threads() != threads) omp_set_num_threads(threads);
  return omp_get_max_threads();
}

// The signals a handler could catch: all but the faults a product itself raises (SIGSEGV, SIGBUS,
// SIGFPE, SIGILL, SIGTRAP), which stay open for their handlers.
const sigset_t& asynchronousSignals() {
  static const sigset_t set = [] {
    sigset_t all;
    sigfillset(&all);
    for (const int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP}) sigdelset(&all, fault);
    return all;
  }();
  return set;
}

// This thread's open GemmSignalHold scopes, and the mask the outermost one found.
thread_local int signal_hold_depth = 0;
thread_local sigset_t mask_before_hold;

void oneDnnSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  const GemmSignalHold held;
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
                                          a, lda, b, ldb, beta, c, ldc);
  RM_ENFORCE(status == dnnl_success,
             fmt::format("oneDNN's sgemm failed on a {} x {} x {} product (status {})", m, n, k,
                         static_cast<int>(status)));
}

void openBlasSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void multiply(GemmLibrary library, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
              float* c, int64_t ldc) {
  if (library == GemmLibrary::kOneDnn)
    oneDnnSgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    openBlasSgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

GemmSignalHold::GemmSignalHold() {
  if (signal_hold_depth++ == 0)
    ::pthread_sigmask(SIG_BLOCK, &asynchronousSignals(), &mask_before_hold);
}

GemmSignalHold::~GemmSignalHold() {
  if (--signal_hold_depth == 0) ::pthread_sigmask(SIG_SETMASK, &mask_before_hold, nullptr);
}

GemmLibrary gemmLibraryFor(bool trans_a, int threads) {
  // Several threads: OpenBLAS's pool alone. oneDNN 2.6 leaves a product with B transposed and few
  // rows on one thread (40-105 GFLOP/s against OpenBLAS's 100-165 at 32-128 rows on two), and
  // the two libraries' pools, each spinning a while after its products, took the cores from each
  // other when both were in use (a 1-rank DDP run fell to 0.24-0.61x PyTorch).
  if (threads > 1) return GemmLibrary::kOpenBlas;
  if (trans_a) return oneDnnHasAvx512() ? GemmLibrary::kOneDnn : GemmLibrary::kOpenBlas;
  return GemmLibrary::kOneDnn;
}

void sgemmWith(GemmLibrary library, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
               float* c, int64_t ldc) {
  applyThreadsToThisThread();
  multiply(library, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int threads = applyThreadsToThisThread();
  multiply(gemmLibraryFor(trans_a, threads), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
           c, ldc);
}

void setGemmThreads(int threads) {
  RM_CHECK_ARG(threads >= 0, fmt::format("GEMM threads must be 0 or more, got {}", threads));
  // Each library's own default, as the process started, for setGemmThreads(0) to go back to.
  static const int openblas_default = openblas_get_num_threads();
  static const int openmp_default = omp_get_max_threads();
  gemm_threads.store(threads, std::memory_order_relaxed);
  openblas_set_num_threads(threads > 0 ? threads : openblas_default);
  omp_set_num_threads(threads > 0 ? threads : openmp_default);
}

int gemmThreads() {
  return gemm_threads.load(std::memory_order_relaxed);
}

}  // namespace ringmaster::cpu
