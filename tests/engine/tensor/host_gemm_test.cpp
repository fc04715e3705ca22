// Tests of the host GEMM's two libraries behind one entry point (tensor/host_gemm.h): each gives
// the product a double reference gives, in every transpose mode with padded row strides (bf16 on
// the processor's bf16 instructions too, where it has them), the
// thread setting reaches threads that start after it, and signals handled while a product runs
// leave the heap and the product intact.
#include "tensor/host_gemm.h"

#include <pthread.h>
#include <signal.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/random.h"
#include "tensor/device.h"  // floatToBf16, bf16ToFloat

extern "C" int omp_get_max_threads();  // the libgomp oneDNN runs on

namespace ringmaster::cpu {
namespace {

struct Matrices {
  int64_t m, n, k, lda, ldb, ldc;
  bool trans_a, trans_b;
  std::vector<float> a, b, c;
};

// op(A) [m, k] and op(B) [k, n] with `pad` unused columns at the end of every stored row, and a C
// whose padding holds a sentinel that must survive.
Matrices randomProduct(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t pad,
                       uint64_t seed) {
  Matrices x{m,  n,  k, (trans_a ? m : k) + pad, (trans_b ? k : n) + pad, n + pad, trans_a, trans_b,
             {}, {}, {}};
  Rng rng(seed);
  x.a.resize(static_cast<size_t>((trans_a ? k : m) * x.lda));
  x.b.resize(static_cast<size_t>((trans_b ? n : k) * x.ldb));
  x.c.resize(static_cast<size_t>(m * x.ldc));
  for (float& v : x.a) v = static_cast<float>(rng.normal());
  for (float& v : x.b) v = static_cast<float>(rng.normal());
  for (float& v : x.c) v = static_cast<float>(rng.normal());
  return x;
}

float elementA(const Matrices& x, int64_t i, int64_t p) {
  return x.trans_a ? x.a[p * x.lda + i] : x.a[i * x.lda + p];
}
float elementB(const Matrices& x, int64_t p, int64_t j) {
  return x.trans_b ? x.b[j * x.ldb + p] : x.b[p * x.ldb + j];
}

// Runs alpha op(A) op(B) + beta C through `library` and compares every element with the product
// summed in double, to a bound that grows with k; the padding of C is left as it was.
void expectProduct(GemmLibrary library, Matrices x, float alpha, float beta) {
  const std::vector<float> before = x.c;
  sgemmWith(library, x.trans_a, x.trans_b, x.m, x.n, x.k, alpha, x.a.data(), x.lda, x.b.data(),
            x.ldb, beta, x.c.data(), x.ldc);
  for (int64_t i = 0; i < x.m; ++i) {
    for (int64_t j = 0; j < x.ldc; ++j) {
      const size_t at = static_cast<size_t>(i * x.ldc + j);
      if (j >= x.n) {
        ASSERT_EQ(x.c[at], before[at]) << "padding of C at row " << i << " column " << j;
        continue;
      }
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < x.k; ++p) {
        sum += static_cast<double>(elementA(x, i, p)) * elementB(x, p, j);
        magnitude += std::abs(static_cast<double>(elementA(x, i, p)) * elementB(x, p, j));
      }
      const double want = alpha * sum + beta * static_cast<double>(before[at]);
      const double bound = 4e-7 * (static_cast<double>(x.k) + 2) * (magnitude + 1);
      ASSERT_NEAR(x.c[at], want, bound)
          << "C[" << i << ", " << j << "] of " << x.m << " x " << x.n << " x " << x.k;
    }
  }
}

TEST(HostGemm, EveryLibraryAndModeMatchesTheDoubleProductWithPaddedRows) {
  for (const GemmLibrary library : {GemmLibrary::kOneDnn, GemmLibrary::kOpenBlas})
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true})
        for (const auto& [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                                      {7, 5, 3},
                                      {33, 17, 65},
                                      {64, 130, 257}}) {
          SCOPED_TRACE(::testing::Message()
                       << (library == GemmLibrary::kOneDnn ? "oneDNN" : "OpenBLAS") << " "
                       << (trans_a ? 'T' : 'N') << (trans_b ? 'T' : 'N'));
          expectProduct(library, randomProduct(trans_a, trans_b, m, n, k, 3, 11 + m), 1.0f, 0.0f);
          expectProduct(library, randomProduct(trans_a, trans_b, m, n, k, 0, 13 + k), -0.5f, 1.5f);
        }
}

// sgemm hands each product to the library gemmLibraryFor names for its mode and threads (one
// thread and two go to different libraries).
TEST(HostGemm, TheEngineEntryPointGivesThePickedLibrarysBits) {
  const int before = gemmThreads();
  for (const int threads : {1, 2}) {
    setGemmThreads(threads);
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true}) {
        Matrices picked = randomProduct(trans_a, trans_b, 48, 72, 96, 1, 5);
        Matrices direct = picked;
        sgemm(trans_a, trans_b, picked.m, picked.n, picked.k, 1.0f, picked.a.data(), picked.lda,
              picked.b.data(), picked.ldb, 0.5f, picked.c.data(), picked.ldc);
        sgemmWith(gemmLibraryFor(trans_a, threads), trans_a, trans_b, direct.m, direct.n, direct.k,
                  1.0f, direct.a.data(), direct.lda, direct.b.data(), direct.ldb, 0.5f,
                  direct.c.data(), direct.ldc);
        EXPECT_EQ(picked.c, direct.c)
            << (trans_a ? 'T' : 'N') << (trans_b ? 'T' : 'N') << ", " << threads << " thread(s)";
      }
  }
  setGemmThreads(before);
}

TEST(HostGemm, TheThreadSettingReachesAThreadStartedAfterIt) {
  const int before = gemmThreads();
  setGemmThreads(1);
  int seen = 0;
  std::thread worker([&] {
    Matrices x = randomProduct(false, false, 8, 8, 8, 0, 3);
    sgemmWith(GemmLibrary::kOneDnn, false, false, x.m, x.n, x.k, 1.0f, x.a.data(), x.lda,
              x.b.data(), x.ldb, 0.0f, x.c.data(), x.ldc);
    seen = omp_get_max_threads();
  });
  worker.join();
  setGemmThreads(before);
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(gemmThreads(), before);
  EXPECT_THROW(setGemmThreads(-1), std::exception);
}

std::atomic<int> signals_handled{0};

void countSignal(int) {
  signals_handled.fetch_add(1, std::memory_order_relaxed);
}

// In this (forked) process: every library multiplies over and over, each product on freshly
// allocated matrices, while another thread aims SIGUSR1 (handled) at the multiplying thread every
// 20 us. Exits 0 when every product equals the first and signals were handled, 1 otherwise; a
// corrupted heap aborts it.
[[noreturn]] void multiplyWhileSignalled() {
  struct sigaction action {};
  action.sa_handler = countSignal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGUSR1, &action, nullptr);
  setGemmThreads(1);
  const pthread_t multiplier = ::pthread_self();
  std::atomic<bool> done{false};
  std::thread signaller([&] {
    while (!done.load()) {
      ::pthread_kill(multiplier, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  bool same = true;
  for (const bool trans_a : {false, true}) {
    const Matrices x = randomProduct(trans_a, false, 256, 384, 512, 0, 17);
    std::vector<float> first;
    for (int round = 0; round < 40; ++round) {
      Matrices y = x;  // fresh heap blocks around every product
      sgemm(trans_a, false, y.m, y.n, y.k, 1.0f, y.a.data(), y.lda, y.b.data(), y.ldb, 0.0f,
            y.c.data(), y.ldc);
      if (first.empty()) first = y.c;
      same = same && y.c == first;
    }
  }
  done.store(true);
  signaller.join();
  std::_Exit(same && signals_handled.load() > 0 ? 0 : 1);
}

// bf16 products on the processor's bf16 instructions, in every transpose mode, a batch of three
// matrices with alpha and beta: each element against the product of the same bf16 values summed
// in double. The pairs multiply exactly; only the fp32 sum rounds.
TEST(HostGemm, NativeBf16ProductsMatchTheDoubleProductInEveryMode) {
  if (!haveNativeBf16Gemm())
    GTEST_SKIP() << "this processor has no bf16 instructions (avx512_bf16): bf16 products widen "
                    "to fp32 for sgemm";
  const int before = gemmThreads();
  setGemmThreads(1);
  const int64_t batch = 3, m = 37, n = 45, k = 130;
  const float alpha = 0.75f, beta = -0.5f;
  for (const bool trans_a : {false, true})
    for (const bool trans_b : {false, true}) {
      SCOPED_TRACE(::testing::Message() << (trans_a ? 'T' : 'N') << (trans_b ? 'T' : 'N'));
      Rng rng(29);
      std::vector<uint16_t> a(static_cast<size_t>(batch * m * k)),
          b(static_cast<size_t>(batch * k * n));
      std::vector<float> c(static_cast<size_t>(batch * m * n));
      for (uint16_t& v : a) v = floatToBf16(static_cast<float>(rng.normal()));
      for (uint16_t& v : b) v = floatToBf16(static_cast<float>(rng.normal()));
      for (float& v : c) v = static_cast<float>(rng.normal());
      const std::vector<float> before_c = c;
      ASSERT_TRUE(bf16GemmNative(trans_a, trans_b, batch, m, n, k, alpha, a.data(), m * k, b.data(),
                                 k * n, beta, c.data(), m * n));
      for (int64_t i = 0; i < batch; ++i)
        for (int64_t r = 0; r < m; ++r)
          for (int64_t col = 0; col < n; ++col) {
            double sum = 0, magnitude = 0;
            for (int64_t p = 0; p < k; ++p) {
              const float x = bf16ToFloat(a[i * m * k + (trans_a ? p * m + r : r * k + p)]);
              const float y = bf16ToFloat(b[i * k * n + (trans_b ? col * k + p : p * n + col)]);
              sum += static_cast<double>(x) * y;
              magnitude += std::abs(static_cast<double>(x) * y);
            }
            const size_t at = static_cast<size_t>(i * m * n + r * n + col);
            const double want = alpha * sum + beta * static_cast<double>(before_c[at]);
            const double bound = static_cast<double>(k + 3) * 0x1p-24 *
                                 (alpha * magnitude + std::abs(beta * before_c[at]));
            ASSERT_NEAR(c[at], want, bound) << "matrix " << i << " C[" << r << ", " << col << "]";
          }
    }
  // Several threads: declined, as sgemm leaves them to OpenBLAS; the caller widens.
  setGemmThreads(2);
  uint16_t one = floatToBf16(1.0f);
  float out = 0;
  EXPECT_FALSE(bf16GemmNative(false, false, 1, 1, 1, 1, 1.0f, &one, 1, &one, 1, 0.0f, &out, 1));
  EXPECT_EQ(out, 0.0f);
  setGemmThreads(before);
}

bool signalBlockedHere(int signo) {
  sigset_t mask;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, signo) == 1;
}

// A hold blocks what a handler could catch and leaves the faults open; nested, the outermost one
// gives the thread back the mask it found, a signal blocked before included.
TEST(HostGemm, ASignalHoldNestsAndGivesBackTheMaskItFound) {
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &usr2, nullptr);
  {
    const GemmSignalHold outer;
    EXPECT_TRUE(signalBlockedHere(SIGTERM));
    EXPECT_TRUE(signalBlockedHere(SIGINT));
    EXPECT_FALSE(signalBlockedHere(SIGSEGV));
    {
      const GemmSignalHold inner;
      EXPECT_TRUE(signalBlockedHere(SIGTERM));
    }
    EXPECT_TRUE(signalBlockedHere(SIGTERM)) << "the inner hold let go of the outer one's signals";
  }
  EXPECT_FALSE(signalBlockedHere(SIGTERM));
  EXPECT_FALSE(signalBlockedHere(SIGINT));
  EXPECT_TRUE(signalBlockedHere(SIGUSR2));
  ::pthread_sigmask(SIG_UNBLOCK, &usr2, nullptr);
}

// oneDNN 2.6's JIT sgemm kernels point the stack pointer into the heap while they run (oneDNN
// issue 4845, fixed upstream after 3.11): a signal handled on the multiplying thread then writes
// its frame into the heap. A cancelled run's worker (SIGTERM, handled) died of it, "corrupted size
// vs. prev_size".
TEST(HostGemmDeathTest, SignalsHandledWhileAProductRunsLeaveTheHeapAndTheProductIntact) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(multiplyWhileSignalled(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ringmaster::cpu
