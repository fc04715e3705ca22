// The host's fp32 matrix product: oneDNN or OpenBLAS by threads, transpose mode and instruction
// set, and one thread count for both; bf16 products on oneDNN's matmul where the cores have bf16
// instructions (host_gemm.h).
#include "tensor/host_gemm.h"

#include <cblas.h>
#include <dnnl.h>
#include <pthread.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <bit>
#include <map>
#include <string_view>

#include <dnnl.hpp>

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

// Whether oneDNN's kernels for `isa` run here (dnnl_get_effective_cpu_isa, so DNNL_MAX_CPU_ISA
// is followed).
bool oneDnnRuns(dnnl_cpu_isa_t isa) {
  static const unsigned effective = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const unsigned wanted = static_cast<unsigned>(isa);
  return (effective & wanted) == wanted;
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

// ------------------------------------------------------------------------------------------------
// bf16 products through oneDNN's matmul primitive. A primitive is made for one shape (a few hundred
// microseconds), so each thread keeps those it made, by shape, transposes, alpha and beta.

// Everything a matmul primitive is made for.
struct Bf16Shape {
  bool trans_a, trans_b;
  int64_t batch, m, n, k, stride_a, stride_b, stride_c;
  float alpha, beta;

  // The same, as one ordered key (alpha and beta as their bits).
  std::array<int64_t, 11> key() const {
    return {trans_a,
            trans_b,
            batch,
            m,
            n,
            k,
            stride_a,
            stride_b,
            stride_c,
            std::bit_cast<int32_t>(alpha),
            std::bit_cast<int32_t>(beta)};
  }
};

struct Bf16Product {
  bool native = false;  // false: oneDNN offers only its reference kernel here (widen instead)
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c;
};

// A batch of row-major matrices [rows, cols], each stored transposed when `transposed`, the
// batch `stride` elements apart.
dnnl::memory::desc matricesDesc(dnnl::memory::data_type type, int64_t batch, int64_t rows,
                                int64_t cols, bool transposed, int64_t stride) {
  const dnnl::memory::dims strides =
      transposed ? dnnl::memory::dims{stride, 1, rows} : dnnl::memory::dims{stride, cols, 1};
  return dnnl::memory::desc({batch, rows, cols}, type, strides);
}

struct Bf16Products {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<std::array<int64_t, 11>, Bf16Product> made;
};

// The calling thread's engine, stream and primitives; at most kMaxBf16Products of them, the
// oldest set dropped whole when a run's shapes outgrow it.
constexpr size_t kMaxBf16Products = 512;
Bf16Products& threadBf16Products() {
  thread_local Bf16Products products;
  return products;
}

const Bf16Product& bf16Product(const Bf16Shape& shape) {
  Bf16Products& products = threadBf16Products();
  const auto key = shape.key();
  if (auto found = products.made.find(key); found != products.made.end()) return found->second;
  if (products.made.size() >= kMaxBf16Products) products.made.clear();
  using type = dnnl::memory::data_type;
  Bf16Product product;
  const Bf16Shape& s = shape;
  product.a = matricesDesc(type::bf16, s.batch, s.m, s.k, s.trans_a, s.stride_a);
  product.b = matricesDesc(type::bf16, s.batch, s.k, s.n, s.trans_b, s.stride_b);
  product.c = matricesDesc(type::f32, s.batch, s.m, s.n, false, s.stride_c);
  dnnl::primitive_attr attr;
  if (s.alpha != 1.0f) attr.set_output_scales(0, {s.alpha});
  if (s.beta != 0.0f) {
    dnnl::post_ops accumulate;
    accumulate.append_sum(s.beta);
    attr.set_post_ops(accumulate);
  }
  try {
    const dnnl::matmul::primitive_desc made(dnnl::matmul::desc(product.a, product.b, product.c),
                                            attr, products.engine);
    product.native = std::string_view(made.impl_info_str()).substr(0, 3) != "ref";
    if (product.native) product.primitive = dnnl::matmul(made);
  } catch (const dnnl::error&) {
    product.native = false;  // no implementation for this shape and these strides
  }
  return products.made.emplace(key, std::move(product)).first->second;
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
  // oneDNN's weight-gradient kernel (op(A) = A^T: dW = x^T dy) runs at 43 GFLOP/s against
  // OpenBLAS's 95-99 on an AVX2 core when K is long and N short, and at 104-115 against 93-99
  // with AVX-512 (gemm_bench, bench/README.md); in the other modes oneDNN is the faster or within
  // 6 %.
  if (trans_a)
    return oneDnnRuns(dnnl_cpu_isa_avx512_core) ? GemmLibrary::kOneDnn : GemmLibrary::kOpenBlas;
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

bool haveNativeBf16Gemm() {
  return oneDnnRuns(dnnl_cpu_isa_avx512_core_bf16);
}

bool bf16GemmNative(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                    float alpha, const uint16_t* a, int64_t stride_a, const uint16_t* b,
                    int64_t stride_b, float beta, float* c, int64_t stride_c) {
  if (!haveNativeBf16Gemm() || applyThreadsToThisThread() > 1) return false;
  const Bf16Product& product =
      bf16Product({trans_a, trans_b, batch, m, n, k, stride_a, stride_b, stride_c, alpha, beta});
  if (!product.native) return false;
  Bf16Products& products = threadBf16Products();
  const dnnl::memory a_memory(product.a, products.engine, const_cast<uint16_t*>(a));
  const dnnl::memory b_memory(product.b, products.engine, const_cast<uint16_t*>(b));
  const dnnl::memory c_memory(product.c, products.engine, c);
  const GemmSignalHold held;  // its kernels are generated code, as sgemm's
  try {
    product.primitive.execute(
        products.stream,
        {{DNNL_ARG_SRC, a_memory}, {DNNL_ARG_WEIGHTS, b_memory}, {DNNL_ARG_DST, c_memory}});
    products.stream.wait();
  } catch (const dnnl::error& e) {
    RM_THROW(kInternal,
             fmt::format("oneDNN's bf16 matmul failed on {} products of {} x {} x {}: {}", batch, m,
                         n, k, e.what()));
  }
  return true;
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
