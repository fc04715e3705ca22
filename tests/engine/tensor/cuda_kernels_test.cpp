// The CUDA path against the host reference: every op of ops.h (the transformer ops included) runs
// on the same random inputs on both devices, over sizes including 0, 1, odd ones and ones past a
// grid's first pass, and each comparison prints its worst relative error. Also copies, device
// names, and the CUDA caching allocator's figures; the mixed-precision kernels (bf16 / fp16 casts
// bit for bit, the non-finite count, 16-bit GEMM on the tensor cores). Without CUDA in the build,
// or without a device, every test skips and says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"
#include "tensor/allocator.h"
#include "tensor/cuda/cuda_runtime.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace ringmaster {
namespace {

// ------------------------------------------------------------------------------------------------
// Tolerances
//
// The error of an element is |cuda - cpu| / max(|cpu|, scale), where the scale is what the value's
// rounding errors are proportional to (for a sum, the sum of the magnitudes of its terms). Bounds
// are in u = 2^-24, float32's unit roundoff: one correctly rounded operation is within u of exact.

constexpr double kU = 1.0 / 16777216.0;
constexpr double kExact = 0.0;
// A sum or dot product of `terms` products, plus scaling by alpha and beta: each side is within
// (terms + 2) u of the exact value relative to the sum of magnitudes, whatever the order, FMA or
// blocking (the classical gamma_n bound), so the two sides within twice that.
double sumBound(int64_t terms) {
  return 2.0 * static_cast<double>(terms + 3) * kU;
}
// The host's formula evaluated with the same operations, but nvcc fuses a * b + c into one FMA and
// reductions add in double in another order before rounding once to float: a handful of roundings
// differ, each at most u or one ulp (2u) of the scale. 32u (1.9e-6) leaves a margin of several;
// a wrong formula is off by orders of magnitude more.
constexpr double kFewRoundings = 32 * kU;
// Softmax: CUDA's expf is within 2 ulp and glibc's within 1, which moves each exponential, their
// sum, its inverse and so each probability by up to about 16u; twice that again for the margin.
constexpr double kExpRoundings = 64 * kU;
// GELU: CUDA's erff and expf are within 2 ulp, glibc's within 1; near the cancellation in
// 1 + erf(x / sqrt 2) for negative x the difference is a few ulp of 1, times |x| / 2, so errors
// are measured against |x| (forward) or |dy| (backward). The exact-vs-tanh-approximation
// difference is ~5e-4, far above this.
constexpr double kTranscendental = 1e-5;

// ------------------------------------------------------------------------------------------------
// Fixtures and helpers

Device gpu() {
  return Device::cuda(0);
}

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cudaAvailable()) {
      GTEST_SKIP() << "no CUDA device visible: "
                   << (cuda::kBuiltWithCuda
                           ? "the driver reports none (no GPU, no driver, or CUDA_VISIBLE_DEVICES)"
                           : "this build has no CUDA support (configure with the CUDA toolkit)");
    }
  }
};
class CudaRuntime : public CudaTest {};
class CudaAllocator : public CudaTest {};
class CudaKernels : public CudaTest {};

// Elementwise sizes: empty, one, odd, and past one pass of a grid-stride loop (4096 x 256).
const std::vector<int64_t> kSizes = {0, 1, 7, 1000, (2 << 20) + 3};

struct RowsCols {
  int64_t rows, cols;
};
// Matrix shapes for the row-wise ops: single rows and columns, odd sizes, rows longer than a block
// (256 threads), and more rows than one grid of row blocks (65535).
const std::vector<RowsCols> kRowShapes = {{1, 1},     {1, 7},    {7, 1},     {5, 3},
                                          {33, 1000}, {3, 4097}, {70001, 3}, {4, 0}};

std::vector<float> randomValues(int64_t n, uint64_t seed, double stddev = 1.0, double mean = 0.0) {
  Rng rng(seed);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = static_cast<float>(mean + stddev * rng.normal());
  return values;
}

Tensor randomTensor(const Shape& shape, uint64_t seed, double stddev = 1.0, double mean = 0.0) {
  return Tensor::fromVector(randomValues(shapeNumel(shape), seed, stddev, mean), shape);
}

std::vector<int32_t> randomLabels(int64_t rows, int64_t cols, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  for (int32_t& label : labels) label = static_cast<int32_t>(rng.below(cols));
  return labels;
}

double elementError(double got, double want, double scale) {
  if (got == want || (std::isnan(got) && std::isnan(want))) return 0.0;
  if (std::isnan(got) || std::isnan(want) || std::isinf(got) || std::isinf(want)) {
    return std::numeric_limits<double>::infinity();
  }
  const double denominator = std::max(std::abs(want), scale);
  return denominator > 0.0 ? std::abs(got - want) / denominator
                           : std::numeric_limits<double>::infinity();
}

// Compares a CUDA result with the host's element by element (see Tolerances), prints the worst
// error, and fails past `tolerance` naming the worst element.
void expectClose(const std::string& what, const Tensor& on_cuda, const Tensor& on_cpu,
                 const std::vector<double>& scale, double tolerance) {
  ASSERT_TRUE(on_cuda.device().isCuda()) << what;
  ASSERT_FALSE(on_cpu.device().isCuda()) << what;
  const std::vector<float> got = on_cuda.toFloatVector();
  const std::vector<float> want = on_cpu.toFloatVector();
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(scale.size(), want.size()) << what;
  double worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double error = elementError(got[i], want[i], scale[i]);
    if (error > worst) {
      worst = error;
      worst_at = i;
    }
  }
  std::printf("  %-60s worst relative error %.2e (tolerance %.2e)\n", what.c_str(), worst,
              tolerance);
  EXPECT_LE(worst, tolerance) << fmt::format(
      "{}: element {} of {} is {} on CUDA and {} on the host", what, worst_at, want.size(),
      got[worst_at], want[worst_at]);
}

void expectClose(const std::string& what, const Tensor& on_cuda, const Tensor& on_cpu, double scale,
                 double tolerance) {
  expectClose(what, on_cuda, on_cpu, std::vector<double>(on_cpu.numel(), scale), tolerance);
}

void expectEqual(const std::string& what, const Tensor& on_cuda, const Tensor& on_cpu) {
  expectClose(what, on_cuda, on_cpu, 0.0, kExact);
}

void expectScalarClose(const std::string& what, double on_cuda, double on_cpu, double scale,
                       double tolerance) {
  const double error = elementError(on_cuda, on_cpu, scale);
  std::printf("  %-60s worst relative error %.2e (tolerance %.2e)\n", what.c_str(), error,
              tolerance);
  EXPECT_LE(error, tolerance) << fmt::format("{}: {} on CUDA and {} on the host", what, on_cuda,
                                             on_cpu);
}

// ------------------------------------------------------------------------------------------------
// Runtime: devices and copies

TEST_F(CudaRuntime, ReportsTheDevice) {
  EXPECT_GE(cudaDeviceCount(), 1);
  const std::string name = deviceName(gpu());
  std::printf("  cuda:0 is %s (%d CUDA devices visible)\n", name.c_str(), cudaDeviceCount());
  EXPECT_FALSE(name.empty());
  EXPECT_NO_THROW(synchronize(gpu()));
  EXPECT_THROW(Tensor::empty({1}, DType::kF32, Device::cuda(cudaDeviceCount())), Error);
}

TEST_F(CudaRuntime, CopiesAreExactInEveryDirection) {
  for (int64_t n : kSizes) {
    const Tensor host = randomTensor({n}, 100 + n);
    const Tensor device = host.to(gpu());       // host to device
    const Tensor device_copy = device.clone();  // device to device
    Tensor back = Tensor::empty({n});
    back.copyFrom(device_copy);  // device to host
    EXPECT_EQ(std::memcmp(back.raw(), host.raw(), host.nbytes()), 0) << "size " << n;

    const Tensor zeros = Tensor::zeros({n}, DType::kF32, gpu());
    for (float v : zeros.toFloatVector()) ASSERT_EQ(v, 0.0f) << "size " << n;
  }
  const Tensor ints = Tensor::fromInts({3, -1, 7}, {3}, gpu());
  EXPECT_EQ(ints.toFloatVector(), (std::vector<float>{3, -1, 7}));
  if (cudaDeviceCount() >= 2) {  // between devices, through cudaMemcpyDefault
    const Tensor host = randomTensor({1001}, 5);
    const Tensor back = host.to(gpu()).to(Device::cuda(1)).to(Device::cpu());
    EXPECT_EQ(std::memcmp(back.raw(), host.raw(), host.nbytes()), 0);
  }
}

// ------------------------------------------------------------------------------------------------
// The CUDA caching allocator

TEST_F(CudaAllocator, CountsAllocatedPeakAndReserved) {
  CachingAllocator& allocator = allocatorFor(gpu());
  allocator.emptyCache();
  allocator.resetPeakStats();
  const MemoryStats before = allocator.stats();
  EXPECT_EQ(before.reserved_bytes, before.allocated_bytes);  // an empty cache holds nothing
  const uint64_t small_block = 4096;        // 1000 floats, 4000 bytes, in 512-byte granules
  const uint64_t large_block = 3ull << 20;  // 3 MiB: a multiple of 2 MiB / 8
  {
    Tensor small = Tensor::empty({1000}, DType::kF32, gpu());
    Tensor large = Tensor::empty({3 << 18}, DType::kF32, gpu());
    const MemoryStats s = allocator.stats();
    EXPECT_EQ(s.allocated_bytes, before.allocated_bytes + small_block + large_block);
    EXPECT_EQ(s.reserved_bytes, before.reserved_bytes + small_block + large_block);
    EXPECT_EQ(s.peak_allocated_bytes, s.allocated_bytes);
    EXPECT_EQ(s.allocations, before.allocations + 2);
  }
  const MemoryStats freed = allocator.stats();
  EXPECT_EQ(freed.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(freed.peak_allocated_bytes, before.allocated_bytes + small_block + large_block);
  EXPECT_EQ(freed.reserved_bytes, before.reserved_bytes + small_block + large_block);  // cached
  {
    Tensor again = Tensor::empty({900}, DType::kF32, gpu());  // 3600 bytes: the cached 4096 block
    const MemoryStats s = allocator.stats();
    EXPECT_EQ(s.cache_hits, freed.cache_hits + 1);
    EXPECT_EQ(s.reserved_bytes, freed.reserved_bytes);
    EXPECT_EQ(s.allocated_bytes, before.allocated_bytes + small_block);
  }
  allocator.emptyCache();
  const MemoryStats emptied = allocator.stats();
  EXPECT_EQ(emptied.reserved_bytes, before.reserved_bytes);
  EXPECT_EQ(emptied.allocated_bytes, before.allocated_bytes);
  EXPECT_GE(emptied.peak_reserved_bytes, before.reserved_bytes + small_block + large_block);
}

TEST_F(CudaAllocator, DeviceMemoryComesFromTheDriver) {
  CachingAllocator& allocator = allocatorFor(gpu());
  const DeviceMemoryInfo before = allocator.deviceMemory();
  std::printf("  cuda:0 memory: %.1f of %.1f GiB in use\n", before.used_bytes / 1073741824.0,
              before.total_bytes / 1073741824.0);
  EXPECT_GT(before.total_bytes, 0u);
  EXPECT_GT(before.used_bytes, 0u);  // the context alone takes some
  EXPECT_LE(before.used_bytes, before.total_bytes);
  const uint64_t held = 64ull << 20;
  Tensor big = Tensor::empty({static_cast<int64_t>(held / sizeof(float))}, DType::kF32, gpu());
  const DeviceMemoryInfo during = allocator.deviceMemory();
  EXPECT_GE(during.used_bytes, held);
  EXPECT_EQ(during.total_bytes, before.total_bytes);
}

TEST_F(CudaAllocator, OutOfMemoryIsAnErrorAndTheDeviceStaysUsable) {
  const DeviceMemoryInfo info = allocatorFor(gpu()).deviceMemory();
  const auto too_many = static_cast<int64_t>(info.total_bytes / sizeof(float) * 2);
  try {
    Tensor::empty({too_many}, DType::kF32, gpu());
    FAIL() << "allocating twice the device's memory succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable) << e.what();
  }
  // The failed cudaMalloc's error was cleared: the next launches and copies do not report it.
  Tensor host = randomTensor({1000}, 9);
  Tensor device = host.to(gpu());
  ops::scale(host, 2.0f);
  ops::scale(device, 2.0f);
  expectEqual("scale after an out-of-memory error", device, host);
}

// ------------------------------------------------------------------------------------------------
// gemm

TEST_F(CudaKernels, MatmulMatchesTheHost) {
  struct Case {
    int64_t m, n, k;
  };
  const std::vector<Case> cases = {{0, 3, 2}, {3, 0, 2},   {3, 2, 0},     {1, 1, 1},     {1, 7, 1},
                                   {7, 1, 5}, {17, 33, 9}, {64, 48, 130}, {127, 65, 257}};
  uint64_t seed = 1;
  for (const Case& shape : cases) {
    const int64_t m = shape.m, n = shape.n, k = shape.k;
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
          const Tensor a = randomTensor(trans_a ? Shape{k, m} : Shape{m, k}, seed++);
          const Tensor b = randomTensor(trans_b ? Shape{n, k} : Shape{k, n}, seed++);
          // beta = 0 must clear C, NaN included, as BLAS does.
          Tensor c =
              beta == 0.0f ? Tensor::full({m, n}, std::nanf("")) : randomTensor({m, n}, seed++);
          const std::vector<float> c0 = c.toFloatVector();
          Tensor c_cuda = c.to(gpu());
          ops::matmul(a, trans_a, b, trans_b, c, alpha, beta);
          ops::matmul(a.to(gpu()), trans_a, b.to(gpu()), trans_b, c_cuda, alpha, beta);

          const float* pa = a.data<float>();
          const float* pb = b.data<float>();
          std::vector<double> scale(static_cast<size_t>(m * n));
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double s = 0.0;
              for (int64_t p = 0; p < k; ++p) {
                const float aip = trans_a ? pa[p * m + i] : pa[i * k + p];
                const float bpj = trans_b ? pb[j * k + p] : pb[p * n + j];
                s += std::abs(static_cast<double>(aip) * bpj);
              }
              scale[i * n + j] =
                  std::abs(alpha) * s + (beta == 0.0f ? 0.0 : std::abs(beta * c0[i * n + j]));
            }
          }
          expectClose(fmt::format("gemm {}x{}x{} {}{} alpha {} beta {}", m, n, k,
                                  trans_a ? "A^T" : "A", trans_b ? "B^T" : "B", alpha, beta),
                      c_cuda, c, scale, sumBound(k));
        }
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// fill, addBiasRows, sumRows, axpy, scale, mul, sumSquares

TEST_F(CudaKernels, FillMatchesTheHost) {
  for (int64_t n : kSizes) {
    for (float value : {0.0f, -2.5f}) {
      Tensor y = randomTensor({n}, n);
      Tensor y_cuda = y.to(gpu());
      ops::fill(y, value);
      ops::fill(y_cuda, value);
      expectEqual(fmt::format("fill n={} value {}", n, value), y_cuda, y);
    }
  }
}

TEST_F(CudaKernels, AddBiasRowsMatchesTheHost) {
  for (auto [rows, cols] : kRowShapes) {
    Tensor y = randomTensor({rows, cols}, 1);
    const Tensor bias = randomTensor({cols}, 2);
    Tensor y_cuda = y.to(gpu());
    ops::addBiasRows(y, bias);
    ops::addBiasRows(y_cuda, bias.to(gpu()));
    expectEqual(fmt::format("addBiasRows {}x{}", rows, cols), y_cuda, y);  // one addition each
  }
}

TEST_F(CudaKernels, SumRowsMatchesTheHost) {
  for (auto [rows, cols] : kRowShapes) {
    for (float beta : {0.0f, 1.0f, 0.5f}) {
      const Tensor x = randomTensor({rows, cols}, 3);
      Tensor out = beta == 0.0f ? Tensor::full({cols}, std::nanf("")) : randomTensor({cols}, 4);
      const std::vector<float> out0 = out.toFloatVector();
      Tensor out_cuda = out.to(gpu());
      ops::sumRows(x, out, beta);
      ops::sumRows(x.to(gpu()), out_cuda, beta);
      std::vector<double> scale(static_cast<size_t>(cols));
      for (int64_t c = 0; c < cols; ++c) {
        double s = beta == 0.0f ? 0.0 : std::abs(beta * out0[c]);
        for (int64_t r = 0; r < rows; ++r) s += std::abs(x.data<float>()[r * cols + c]);
        scale[c] = s;
      }
      expectClose(fmt::format("sumRows {}x{} beta {}", rows, cols, beta), out_cuda, out, scale,
                  sumBound(rows));
    }
  }
}

TEST_F(CudaKernels, AxpyScaleMulMatchTheHost) {
  for (int64_t n : kSizes) {
    const Tensor x = randomTensor({n}, 10);
    const Tensor b = randomTensor({n}, 11);
    for (float alpha : {0.0f, 1.5f, -0.25f}) {
      Tensor y = randomTensor({n}, 12);
      const std::vector<float> y0 = y.toFloatVector();
      Tensor y_cuda = y.to(gpu());
      ops::axpy(alpha, x, y);
      ops::axpy(alpha, x.to(gpu()), y_cuda);
      // y + alpha x, fused into one FMA or not: within 3u of |alpha x| + |y|.
      std::vector<double> scale(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        scale[i] = std::abs(alpha * x.data<float>()[i]) + std::abs(y0[i]);
      expectClose(fmt::format("axpy n={} alpha {}", n, alpha), y_cuda, y, scale, 4 * kU);

      Tensor z = randomTensor({n}, 13);
      if (n > 0) z.data<float>()[0] = std::numeric_limits<float>::infinity();
      if (n > 1) z.data<float>()[1] = std::nanf("");
      Tensor z_cuda = z.to(gpu());
      ops::scale(z, alpha);  // alpha = 0 clears Inf and NaN
      ops::scale(z_cuda, alpha);
      expectEqual(fmt::format("scale n={} alpha {}", n, alpha), z_cuda, z);
    }
    Tensor out = Tensor::empty({n});
    Tensor out_cuda = Tensor::empty({n}, DType::kF32, gpu());
    ops::mul(x, b, out);
    ops::mul(x.to(gpu()), b.to(gpu()), out_cuda);
    expectEqual(fmt::format("mul n={}", n), out_cuda, out);
  }
}

TEST_F(CudaKernels, SumSquaresMatchesTheHost) {
  for (int64_t n : kSizes) {
    const Tensor x = randomTensor({n}, 20);
    const double on_cpu = ops::sumSquares(x);
    const double on_cuda = ops::sumSquares(x.to(gpu()));
    // Exact float products summed in double, all terms positive: each side within n double ulps.
    expectScalarClose(fmt::format("sumSquares n={}", n), on_cuda, on_cpu, on_cpu,
                      2.0 * static_cast<double>(n + 1) * std::ldexp(1.0, -53));
  }
}

// ------------------------------------------------------------------------------------------------
// relu, gelu, dropout

TEST_F(CudaKernels, ReluMatchesTheHost) {
  for (int64_t n : kSizes) {
    Tensor x = randomTensor({n}, 30);
    for (int64_t i = 0; i < n; i += 5) x.data<float>()[i] = 0.0f;  // the kink itself
    const Tensor dy = randomTensor({n}, 31);
    Tensor y = Tensor::empty({n}), dx = Tensor::empty({n});
    Tensor y_cuda = Tensor::empty({n}, DType::kF32, gpu());
    Tensor dx_cuda = Tensor::empty({n}, DType::kF32, gpu());
    ops::relu(x, y);
    ops::relu(x.to(gpu()), y_cuda);
    ops::reluBackward(x, dy, dx);
    ops::reluBackward(x.to(gpu()), dy.to(gpu()), dx_cuda);
    expectEqual(fmt::format("relu n={}", n), y_cuda, y);
    expectEqual(fmt::format("reluBackward n={}", n), dx_cuda, dx);
  }
}

TEST_F(CudaKernels, GeluMatchesTheHost) {
  for (int64_t n : kSizes) {
    const Tensor x = randomTensor({n}, 40, 3.0);  // into both tails
    const Tensor dy = randomTensor({n}, 41);
    Tensor y = Tensor::empty({n}), dx = Tensor::empty({n});
    Tensor y_cuda = Tensor::empty({n}, DType::kF32, gpu());
    Tensor dx_cuda = Tensor::empty({n}, DType::kF32, gpu());
    ops::gelu(x, y);
    ops::gelu(x.to(gpu()), y_cuda);
    ops::geluBackward(x, dy, dx);
    ops::geluBackward(x.to(gpu()), dy.to(gpu()), dx_cuda);
    std::vector<double> x_scale(static_cast<size_t>(n)), dy_scale(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      x_scale[i] = std::abs(x.data<float>()[i]);
      dy_scale[i] = std::abs(dy.data<float>()[i]);
    }
    expectClose(fmt::format("gelu n={}", n), y_cuda, y, x_scale, kTranscendental);
    expectClose(fmt::format("geluBackward n={}", n), dx_cuda, dx, dy_scale, kTranscendental);
  }
}

TEST_F(CudaKernels, DropoutMasksEqualTheHostsBitForBit) {
  for (int64_t n : kSizes) {
    for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
      for (uint64_t offset : {uint64_t{0}, uint64_t{12345}, uint64_t{1} << 40}) {
        const Tensor x = randomTensor({n}, 50);
        Tensor y = Tensor::empty({n}), mask = Tensor::empty({n});
        Tensor y_cuda = Tensor::empty({n}, DType::kF32, gpu());
        Tensor mask_cuda = Tensor::empty({n}, DType::kF32, gpu());
        const uint64_t seed = 0x5eed + n;
        ops::dropout(x, y, mask, p, seed, offset);
        ops::dropout(x.to(gpu()), y_cuda, mask_cuda, p, seed, offset);
        const std::string what = fmt::format("dropout n={} p={} offset {}", n, p, offset);
        expectEqual(what + " mask", mask_cuda, mask);
        expectEqual(what + " output", y_cuda, y);
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// layer norm

TEST_F(CudaKernels, LayerNormForwardMatchesTheHost) {
  const float eps = 1e-5f;
  for (auto [rows, cols] : kRowShapes) {
    const Tensor x = randomTensor({rows, cols}, 60, 1.0, 2.0);  // a mean to subtract
    const Tensor gamma = randomTensor({cols}, 61);
    const Tensor beta = randomTensor({cols}, 62);
    Tensor y = Tensor::empty({rows, cols}), mean = Tensor::empty({rows}),
           rstd = Tensor::empty({rows});
    Tensor y_cuda = Tensor::empty({rows, cols}, DType::kF32, gpu());
    Tensor mean_cuda = Tensor::empty({rows}, DType::kF32, gpu());
    Tensor rstd_cuda = Tensor::empty({rows}, DType::kF32, gpu());
    ops::layerNormForward(x, gamma, beta, y, mean, rstd, eps);
    ops::layerNormForward(x.to(gpu()), gamma.to(gpu()), beta.to(gpu()), y_cuda, mean_cuda,
                          rstd_cuda, eps);

    // mean against the mean magnitude of the row; y against the magnitudes of its terms.
    const float* px = x.data<float>();
    std::vector<double> mean_scale(static_cast<size_t>(rows)),
        y_scale(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      double abs_sum = 0.0;
      for (int64_t c = 0; c < cols; ++c) abs_sum += std::abs(px[r * cols + c]);
      mean_scale[r] = cols > 0 ? abs_sum / cols : 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        y_scale[r * cols + c] = (std::abs(px[r * cols + c]) + std::abs(mean.data<float>()[r])) *
                                    rstd.data<float>()[r] * std::abs(gamma.data<float>()[c]) +
                                std::abs(beta.data<float>()[c]);
      }
    }
    const std::string shape = fmt::format("{}x{}", rows, cols);
    expectClose("layerNormForward " + shape + " mean", mean_cuda, mean, mean_scale, kFewRoundings);
    expectClose("layerNormForward " + shape + " rstd", rstd_cuda, rstd, 0.0, kFewRoundings);
    expectClose("layerNormForward " + shape + " y", y_cuda, y, y_scale, kFewRoundings);
  }
}

TEST_F(CudaKernels, LayerNormBackwardMatchesTheHost) {
  for (auto [rows, cols] : kRowShapes) {
    const Tensor x = randomTensor({rows, cols}, 70, 1.0, -1.0);
    const Tensor gamma = randomTensor({cols}, 71);
    const Tensor beta = randomTensor({cols}, 72);
    const Tensor dy = randomTensor({rows, cols}, 73);
    // Both sides differentiate at the host's mean and rstd, so only the backward is compared.
    Tensor y = Tensor::empty({rows, cols}), mean = Tensor::empty({rows}),
           rstd = Tensor::empty({rows});
    ops::layerNormForward(x, gamma, beta, y, mean, rstd, 1e-5f);
    Tensor dx = Tensor::empty({rows, cols});
    Tensor dgamma = randomTensor({cols}, 74), dbeta = randomTensor({cols}, 75);  // added into
    const std::vector<float> dgamma0 = dgamma.toFloatVector(), dbeta0 = dbeta.toFloatVector();
    Tensor dx_cuda = Tensor::empty({rows, cols}, DType::kF32, gpu());
    Tensor dgamma_cuda = dgamma.to(gpu()), dbeta_cuda = dbeta.to(gpu());
    ops::layerNormBackward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta);
    ops::layerNormBackward(x.to(gpu()), gamma.to(gpu()), mean.to(gpu()), rstd.to(gpu()),
                           dy.to(gpu()), dx_cuda, dgamma_cuda, dbeta_cuda);

    // dx = rstd (dy gamma - mean(dy gamma) - xhat mean(dy gamma xhat)): its scale bounds each term
    // with the row means of the magnitudes. dgamma and dbeta are sums over the rows.
    const float* px = x.data<float>();
    const float* pdy = dy.data<float>();
    const float* pg = gamma.data<float>();
    std::vector<double> dx_scale(static_cast<size_t>(rows * cols));
    std::vector<double> dgamma_scale(dgamma0.begin(), dgamma0.end());
    std::vector<double> dbeta_scale(dbeta0.begin(), dbeta0.end());
    for (double& s : dgamma_scale) s = std::abs(s);
    for (double& s : dbeta_scale) s = std::abs(s);
    for (int64_t r = 0; r < rows; ++r) {
      const double mu = mean.data<float>()[r], inv = rstd.data<float>()[r];
      double m1 = 0.0, m2 = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double xhat = (px[r * cols + c] - mu) * inv;
        m1 += std::abs(pdy[r * cols + c] * pg[c]) / cols;
        m2 += std::abs(pdy[r * cols + c] * pg[c] * xhat) / cols;
        dgamma_scale[c] += std::abs(pdy[r * cols + c] * xhat);
        dbeta_scale[c] += std::abs(pdy[r * cols + c]);
      }
      for (int64_t c = 0; c < cols; ++c) {
        const double xhat = (px[r * cols + c] - mu) * inv;
        dx_scale[r * cols + c] =
            inv * (std::abs(pdy[r * cols + c] * pg[c]) + m1 + std::abs(xhat) * m2);
      }
    }
    const std::string shape = fmt::format("{}x{}", rows, cols);
    expectClose("layerNormBackward " + shape + " dx", dx_cuda, dx, dx_scale, kFewRoundings);
    expectClose("layerNormBackward " + shape + " dgamma", dgamma_cuda, dgamma, dgamma_scale,
                sumBound(rows));
    expectClose("layerNormBackward " + shape + " dbeta", dbeta_cuda, dbeta, dbeta_scale,
                sumBound(rows));
  }
}

// ------------------------------------------------------------------------------------------------
// softmax cross-entropy, countCorrect

const std::vector<RowsCols> kClassShapes = {{1, 1},   {1, 7},    {5, 3},
                                            {64, 10}, {3, 5000}, {70001, 3}};

TEST_F(CudaKernels, SoftmaxCrossEntropyMatchesTheHost) {
  for (auto [rows, cols] : kClassShapes) {
    const Tensor logits = randomTensor({rows, cols}, 80, 3.0);
    const Tensor labels = Tensor::fromInts(randomLabels(rows, cols, 81), {rows});
    Tensor probs = Tensor::empty({rows, cols});
    Tensor probs_cuda = Tensor::empty({rows, cols}, DType::kF32, gpu());
    const double loss = ops::softmaxCrossEntropyForward(logits, labels, probs);
    const double loss_cuda =
        ops::softmaxCrossEntropyForward(logits.to(gpu()), labels.to(gpu()), probs_cuda);
    const std::string shape = fmt::format("{}x{}", rows, cols);
    expectScalarClose("softmaxCrossEntropyForward " + shape + " loss", loss_cuda, loss,
                      std::max(1.0, std::abs(loss)), kExpRoundings);
    expectClose("softmaxCrossEntropyForward " + shape + " probs", probs_cuda, probs, 0.0,
                kExpRoundings);

    // The backward from the same probabilities: one subtraction and one product, exact.
    const float scale = 1.0f / static_cast<float>(rows);
    Tensor dlogits = Tensor::empty({rows, cols});
    Tensor dlogits_cuda = Tensor::empty({rows, cols}, DType::kF32, gpu());
    ops::softmaxCrossEntropyBackward(probs, labels, dlogits, scale);
    ops::softmaxCrossEntropyBackward(probs.to(gpu()), labels.to(gpu()), dlogits_cuda, scale);
    expectEqual("softmaxCrossEntropyBackward " + shape, dlogits_cuda, dlogits);
  }
}

TEST_F(CudaKernels, SoftmaxCrossEntropyRejectsLabelsOutOfRange) {
  const Tensor logits = randomTensor({3, 4}, 90).to(gpu());
  Tensor probs = Tensor::empty({3, 4}, DType::kF32, gpu());
  for (int32_t bad : {-1, 4}) {
    const Tensor labels = Tensor::fromInts({0, bad, 1}, {3}, gpu());
    for (bool forward : {true, false}) {
      try {
        if (forward) {
          ops::softmaxCrossEntropyForward(logits, labels, probs);
        } else {
          ops::softmaxCrossEntropyBackward(probs, labels, probs, 1.0f);
        }
        ADD_FAILURE() << "label " << bad << " accepted by the "
                      << (forward ? "forward" : "backward");
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
        EXPECT_NE(e.message().find(fmt::format("label {} of row 1", bad)), std::string::npos)
            << e.message();
      }
    }
  }
  // Nothing sticky was left behind.
  const Tensor labels = Tensor::fromInts({0, 3, 1}, {3}, gpu());
  EXPECT_TRUE(std::isfinite(ops::softmaxCrossEntropyForward(logits, labels, probs)));
}

TEST_F(CudaKernels, CountCorrectMatchesTheHost) {
  for (auto [rows, cols] : kClassShapes) {
    const Tensor logits = randomTensor({rows, cols}, 100);
    std::vector<int32_t> labels = randomLabels(rows, cols, 101);
    for (int64_t r = 0; r < rows; r += 2) {  // every other row right, to have something to count
      const float* row = logits.data<float>() + r * cols;
      labels[r] = static_cast<int32_t>(std::max_element(row, row + cols) - row);
    }
    const Tensor label_tensor = Tensor::fromInts(labels, {rows});
    const int64_t on_cpu = ops::countCorrect(logits, label_tensor);
    const int64_t on_cuda = ops::countCorrect(logits.to(gpu()), label_tensor.to(gpu()));
    std::printf("  countCorrect %ldx%ld: %ld on CUDA, %ld on the host\n", static_cast<long>(rows),
                static_cast<long>(cols), static_cast<long>(on_cuda), static_cast<long>(on_cpu));
    EXPECT_EQ(on_cuda, on_cpu) << rows << "x" << cols;
  }
  // Ties go to the first largest logit, as std::max_element has it.
  const Tensor ties = Tensor::full({4, 5}, 1.0f);
  const Tensor tie_labels = Tensor::fromInts({0, 1, 0, 4}, {4});
  EXPECT_EQ(ops::countCorrect(ties, tie_labels), 2);
  EXPECT_EQ(ops::countCorrect(ties.to(gpu()), tie_labels.to(gpu())), 2);
}

// ------------------------------------------------------------------------------------------------
// Zero rows with columns: ops.h cannot express them (it derives 0 columns from a [0, n] shape), so
// the raw kernels are called directly.

TEST_F(CudaKernels, ZeroRowsWithColumnsMatchTheHost) {
#if RINGMASTER_HAVE_CUDA
  const int64_t cols = 5;
  const Tensor none = Tensor::empty({0});
  const Tensor none_cuda = Tensor::empty({0}, DType::kF32, gpu());
  const Tensor no_labels = Tensor::fromInts({}, {0});
  const Tensor no_labels_cuda = Tensor::fromInts({}, {0}, gpu());
  const Tensor gamma = randomTensor({cols}, 110);
  const Tensor gamma_cuda = gamma.to(gpu());
  Tensor out = randomTensor({cols}, 111), out_cuda = out.to(gpu());
  Tensor dgamma = randomTensor({cols}, 112), dgamma_cuda = dgamma.to(gpu());
  Tensor dbeta = randomTensor({cols}, 113), dbeta_cuda = dbeta.to(gpu());
  auto f = [](const Tensor& t) { return const_cast<float*>(t.data<float>()); };

  cpu::sumRows(f(none), f(out), 0, cols, 0.5f);  // out = 0.5 out
  cuda::sumRows(f(none_cuda), f(out_cuda), 0, cols, 0.5f);
  expectEqual("sumRows 0x5 beta 0.5", out_cuda, out);

  cpu::layerNormBackward(f(none), f(gamma), f(none), f(none), f(none), f(none), f(dgamma), f(dbeta),
                         0, cols);  // adds nothing
  cuda::layerNormBackward(f(none_cuda), f(gamma_cuda), f(none_cuda), f(none_cuda), f(none_cuda),
                          f(none_cuda), f(dgamma_cuda), f(dbeta_cuda), 0, cols);
  expectEqual("layerNormBackward 0x5 dgamma", dgamma_cuda, dgamma);
  expectEqual("layerNormBackward 0x5 dbeta", dbeta_cuda, dbeta);

  cuda::addBiasRows(f(none_cuda), f(gamma_cuda), 0, cols);
  cuda::layerNormForward(f(none_cuda), f(gamma_cuda), f(gamma_cuda), f(none_cuda), f(none_cuda),
                         f(none_cuda), 0, cols, 1e-5f);
  EXPECT_EQ(cuda::softmaxCrossEntropyForward(f(none_cuda), no_labels_cuda.data<int32_t>(),
                                             f(none_cuda), 0, cols),
            cpu::softmaxCrossEntropyForward(f(none), no_labels.data<int32_t>(), f(none), 0, cols));
  cuda::softmaxCrossEntropyBackward(f(none_cuda), no_labels_cuda.data<int32_t>(), f(none_cuda), 0,
                                    cols, 1.0f);
  EXPECT_EQ(cuda::countCorrect(f(none_cuda), no_labels_cuda.data<int32_t>(), 0, cols), 0);
  EXPECT_NO_THROW(synchronize(gpu()));
#endif
}

// ------------------------------------------------------------------------------------------------
// sgdStep, adamStep: three steps each, so that the state carries over

TEST_F(CudaKernels, SgdStepMatchesTheHost) {
  struct Config {
    float momentum, dampening, weight_decay;
    bool nesterov;
  };
  const std::vector<Config> configs = {
      {0.0f, 0.0f, 0.0f, false}, {0.9f, 0.0f, 0.0f, false}, {0.9f, 0.1f, 1e-2f, true}};
  for (int64_t n : kSizes) {
    for (const Config& cfg : configs) {
      Tensor param = randomTensor({n}, 120), param_cuda = param.to(gpu());
      Tensor buffer = Tensor::zeros({n}), buffer_cuda = Tensor::zeros({n}, DType::kF32, gpu());
      for (int step = 1; step <= 3; ++step) {
        const Tensor grad = randomTensor({n}, 121 + step);
        ops::sgdStep(param, grad, buffer, 0.1f, cfg.momentum, cfg.dampening, cfg.weight_decay,
                     cfg.nesterov, step == 1);
        ops::sgdStep(param_cuda, grad.to(gpu()), buffer_cuda, 0.1f, cfg.momentum, cfg.dampening,
                     cfg.weight_decay, cfg.nesterov, step == 1);
      }
      // Parameters and buffers are O(1): compared against 1 where they cancel below it.
      const std::string what =
          fmt::format("sgd n={} momentum {} dampening {} wd {}{}", n, cfg.momentum, cfg.dampening,
                      cfg.weight_decay, cfg.nesterov ? " nesterov" : "");
      expectClose(what + " param", param_cuda, param, 1.0, kFewRoundings);
      expectClose(what + " buffer", buffer_cuda, buffer, 1.0, kFewRoundings);
    }
  }
}

TEST_F(CudaKernels, AdamStepMatchesTheHost) {
  struct Config {
    float weight_decay;
    bool decoupled;
  };
  for (int64_t n : kSizes) {
    for (const Config& cfg : {Config{0.0f, false}, Config{1e-2f, false}, Config{1e-2f, true}}) {
      Tensor param = randomTensor({n}, 130), param_cuda = param.to(gpu());
      Tensor m = Tensor::zeros({n}), m_cuda = Tensor::zeros({n}, DType::kF32, gpu());
      Tensor v = Tensor::zeros({n}), v_cuda = Tensor::zeros({n}, DType::kF32, gpu());
      for (int64_t step = 1; step <= 3; ++step) {
        const Tensor grad = randomTensor({n}, 131 + step);
        ops::adamStep(param, grad, m, v, 1e-2f, 0.9f, 0.999f, 1e-8f, cfg.weight_decay, step,
                      cfg.decoupled);
        ops::adamStep(param_cuda, grad.to(gpu()), m_cuda, v_cuda, 1e-2f, 0.9f, 0.999f, 1e-8f,
                      cfg.weight_decay, step, cfg.decoupled);
      }
      // Parameters and first moments are O(1) or below and can cancel; second moments are sums of
      // squares (~1e-3 here) and cannot, so they are compared relatively down to 1e-6.
      const std::string what =
          fmt::format("{} n={} wd {}", cfg.decoupled ? "adamw" : "adam", n, cfg.weight_decay);
      expectClose(what + " param", param_cuda, param, 1.0, kFewRoundings);
      expectClose(what + " exp_avg", m_cuda, m, 1.0, kFewRoundings);
      expectClose(what + " exp_avg_sq", v_cuda, v, 1e-6, kFewRoundings);
    }
  }
}

// The multi-tensor steps (one launch for every tensor) give the per-tensor kernels' bits: tensors
// of every kSizes size at once, several spanning many chunks, over three steps.
std::vector<uint32_t> bitsOf(const Tensor& t) {
  const std::vector<float> values = t.toFloatVector();
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

TEST_F(CudaKernels, AdamStepMultiGivesThePerTensorBits) {
  for (bool decoupled : {false, true}) {
    std::vector<Tensor> single, multi, m1, v1, m2, v2;
    for (size_t i = 0; i < kSizes.size(); ++i) {
      const Tensor init = randomTensor({kSizes[i]}, 140 + i);
      single.push_back(init.to(gpu()));
      multi.push_back(init.to(gpu()));
      for (auto* state : {&m1, &v1, &m2, &v2})
        state->push_back(Tensor::zeros({kSizes[i]}, DType::kF32, gpu()));
    }
    for (int64_t step = 1; step <= 3; ++step) {
      std::vector<Tensor> grads;
      std::vector<ops::AdamTensors> tensors;
      for (size_t i = 0; i < kSizes.size(); ++i)
        grads.push_back(randomTensor({kSizes[i]}, 150 + 10 * step + i).to(gpu()));
      for (size_t i = 0; i < kSizes.size(); ++i) {
        ops::adamStep(single[i], grads[i], m1[i], v1[i], 1e-2f, 0.9f, 0.999f, 1e-8f, 1e-2f, step,
                      decoupled);
        tensors.push_back(ops::AdamTensors{&multi[i], &grads[i], &m2[i], &v2[i]});
      }
      ops::adamStepMulti(tensors, 1e-2f, 0.9f, 0.999f, 1e-8f, 1e-2f, step, decoupled);
    }
    for (size_t i = 0; i < kSizes.size(); ++i) {
      EXPECT_EQ(bitsOf(multi[i]), bitsOf(single[i])) << "param n=" << kSizes[i];
      EXPECT_EQ(bitsOf(m2[i]), bitsOf(m1[i])) << "exp_avg n=" << kSizes[i];
      EXPECT_EQ(bitsOf(v2[i]), bitsOf(v1[i])) << "exp_avg_sq n=" << kSizes[i];
    }
  }
}

TEST_F(CudaKernels, SgdStepMultiGivesThePerTensorBits) {
  for (float momentum : {0.0f, 0.9f}) {
    std::vector<Tensor> single, multi, b1, b2;
    for (size_t i = 0; i < kSizes.size(); ++i) {
      const Tensor init = randomTensor({kSizes[i]}, 160 + i);
      single.push_back(init.to(gpu()));
      multi.push_back(init.to(gpu()));
      b1.push_back(Tensor::zeros({kSizes[i]}, DType::kF32, gpu()));
      b2.push_back(Tensor::zeros({kSizes[i]}, DType::kF32, gpu()));
    }
    for (int step = 1; step <= 3; ++step) {
      std::vector<Tensor> grads;
      std::vector<ops::SgdTensors> tensors;
      for (size_t i = 0; i < kSizes.size(); ++i)
        grads.push_back(randomTensor({kSizes[i]}, 170 + 10 * step + i).to(gpu()));
      for (size_t i = 0; i < kSizes.size(); ++i) {
        ops::sgdStep(single[i], grads[i], b1[i], 0.1f, momentum, 0.0f, 1e-2f, momentum != 0.0f,
                     step == 1);
        tensors.push_back(
            ops::SgdTensors{&multi[i], &grads[i], momentum != 0.0f ? &b2[i] : nullptr});
      }
      ops::sgdStepMulti(tensors, 0.1f, momentum, 0.0f, 1e-2f, momentum != 0.0f, step == 1);
    }
    for (size_t i = 0; i < kSizes.size(); ++i) {
      EXPECT_EQ(bitsOf(multi[i]), bitsOf(single[i]))
          << "momentum " << momentum << " n=" << kSizes[i];
      if (momentum != 0.0f) {
        EXPECT_EQ(bitsOf(b2[i]), bitsOf(b1[i])) << "buffer n=" << kSizes[i];
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Transformer kernels: batched GEMM, tanh GELU, embeddings, head layout, causal softmax

// Sizes [B, T, H, D] for the attention layout: single elements, odd sizes, and one (2 x 257 x 12
// x 64 x 3 = 1.18M elements of qkv) past one pass of an elementwise grid (4096 x 256 = 1.05M).
struct AttentionShape {
  int64_t batch, tokens, heads, head_dim;
};
const std::vector<AttentionShape> kAttentionShapes = {
    {1, 1, 1, 1}, {2, 5, 3, 7}, {3, 33, 4, 16}, {0, 4, 2, 3}, {2, 257, 12, 64}};

std::string attentionStr(const AttentionShape& s) {
  return fmt::format("B{} T{} H{} D{}", s.batch, s.tokens, s.heads, s.head_dim);
}

TEST_F(CudaKernels, MatmulBatchedMatchesTheHost) {
  struct Case {
    Shape batch;
    int64_t m, n, k;
  };
  const std::vector<Case> cases = {{{1}, 1, 1, 1},     {{3}, 7, 5, 3}, {{2, 3}, 17, 33, 9},
                                   {{5}, 65, 31, 130}, {{4}, 0, 3, 2}, {{2}, 3, 2, 0},
                                   {{}, 9, 7, 5},      {{0}, 3, 3, 3}};
  uint64_t seed = 300;
  for (const Case& shape : cases) {
    const int64_t m = shape.m, n = shape.n, k = shape.k;
    const int64_t batch = shapeNumel(shape.batch);
    const auto with_batch = [&](int64_t rows, int64_t cols) {
      Shape full = shape.batch;
      full.push_back(rows);
      full.push_back(cols);
      return full;
    };
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.125f, 1.0f}}) {
          const Tensor a = randomTensor(trans_a ? with_batch(k, m) : with_batch(m, k), seed++);
          const Tensor b = randomTensor(trans_b ? with_batch(n, k) : with_batch(k, n), seed++);
          Tensor c = beta == 0.0f ? Tensor::full(with_batch(m, n), std::nanf(""))
                                  : randomTensor(with_batch(m, n), seed++);
          const std::vector<float> c0 = c.toFloatVector();
          Tensor c_cuda = c.to(gpu());
          ops::matmulBatched(a, trans_a, b, trans_b, c, alpha, beta);
          ops::matmulBatched(a.to(gpu()), trans_a, b.to(gpu()), trans_b, c_cuda, alpha, beta);

          // Each element is a dot product of k terms: the gemm test's bound on its magnitudes.
          const float* pa = a.data<float>();
          const float* pb = b.data<float>();
          std::vector<double> scale(static_cast<size_t>(batch * m * n));
          for (int64_t bi = 0; bi < batch; ++bi) {
            const float* ai = pa + bi * m * k;
            const float* bbi = pb + bi * k * n;
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                double s = 0.0;
                for (int64_t p = 0; p < k; ++p) {
                  const float aip = trans_a ? ai[p * m + i] : ai[i * k + p];
                  const float bpj = trans_b ? bbi[j * k + p] : bbi[p * n + j];
                  s += std::abs(static_cast<double>(aip) * bpj);
                }
                const int64_t at = (bi * m + i) * n + j;
                scale[at] = std::abs(alpha) * s + (beta == 0.0f ? 0.0 : std::abs(beta * c0[at]));
              }
            }
          }
          expectClose(fmt::format("matmulBatched {} x {}x{}x{} {}{} alpha {} beta {}",
                                  shapeStr(shape.batch), m, n, k, trans_a ? "A^T" : "A",
                                  trans_b ? "B^T" : "B", alpha, beta),
                      c_cuda, c, scale, sumBound(k));
        }
      }
    }
  }
}

TEST_F(CudaKernels, GeluTanhMatchesTheHost) {
  for (int64_t n : kSizes) {
    const Tensor x = randomTensor({n}, 310, 2.0);
    const Tensor dy = randomTensor({n}, 311);
    Tensor y = Tensor::empty({n}), dx = Tensor::empty({n});
    Tensor y_cuda = Tensor::empty({n}, DType::kF32, gpu());
    Tensor dx_cuda = Tensor::empty({n}, DType::kF32, gpu());
    ops::geluTanh(x, y);
    ops::geluTanh(x.to(gpu()), y_cuda);
    ops::geluTanhBackward(x, dy, dx);
    ops::geluTanhBackward(x.to(gpu()), dy.to(gpu()), dx_cuda);
    // As for gelu: tanhf is within a few ulp on both sides, and 1 + tanh(u) cancels for negative
    // x, so the forward is measured against |x|. The backward's second term
    // 0.5 x (1 - t^2) sqrt(2/pi) (1 + 0.134 x^2) has magnitude below |x| (1 + x^2) and the same
    // cancellation in 1 - t^2, so its errors are measured against |dy| (1 + |x| (1 + x^2)).
    std::vector<double> x_scale(static_cast<size_t>(n)), dy_scale(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const double xi = std::abs(x.data<float>()[i]);
      x_scale[i] = xi;
      dy_scale[i] = std::abs(dy.data<float>()[i]) * (1.0 + xi * (1.0 + xi * xi));
    }
    expectClose(fmt::format("geluTanh n={}", n), y_cuda, y, x_scale, kTranscendental);
    expectClose(fmt::format("geluTanhBackward n={}", n), dx_cuda, dx, dy_scale, kTranscendental);
  }
}

TEST_F(CudaKernels, EmbeddingsMatchTheHost) {
  struct Case {
    int64_t batch, tokens, vocab, dim;
  };
  // A vocabulary smaller than the token count repeats ids (the backward's atomicAdd collisions);
  // the last case has more elements than one grid pass.
  const std::vector<Case> cases = {
      {1, 1, 1, 1}, {2, 7, 5, 3}, {3, 33, 50, 65}, {0, 4, 3, 2}, {4, 300, 97, 1001}};
  uint64_t seed = 320;
  for (const Case& cs : cases) {
    const std::string what = fmt::format("B{} T{} V{} C{}", cs.batch, cs.tokens, cs.vocab, cs.dim);
    const int64_t count = cs.batch * cs.tokens;
    const Tensor ids =
        Tensor::fromInts(randomLabels(count, cs.vocab, seed++), {cs.batch, cs.tokens});
    const Tensor table = randomTensor({cs.vocab, cs.dim}, seed++);
    Tensor out = Tensor::empty({cs.batch, cs.tokens, cs.dim});
    Tensor out_cuda = Tensor::empty({cs.batch, cs.tokens, cs.dim}, DType::kF32, gpu());
    ops::embeddingForward(ids, table, out);
    ops::embeddingForward(ids.to(gpu()), table.to(gpu()), out_cuda);
    expectEqual("embeddingForward " + what, out_cuda, out);  // a gather: copies only

    // The scatter-add: atomics add in any order, so each row is within the bound of a sum of its
    // contributions plus the value it started from.
    const Tensor dout = randomTensor({cs.batch, cs.tokens, cs.dim}, seed++);
    Tensor dtable = randomTensor({cs.vocab, cs.dim}, seed++);
    const std::vector<float> dtable0 = dtable.toFloatVector();
    Tensor dtable_cuda = dtable.to(gpu());
    ops::embeddingBackward(ids, dout, dtable);
    ops::embeddingBackward(ids.to(gpu()), dout.to(gpu()), dtable_cuda);
    std::vector<double> scale(dtable0.begin(), dtable0.end());
    for (double& s : scale) s = std::abs(s);
    std::vector<int64_t> uses(static_cast<size_t>(cs.vocab), 0);
    for (int64_t i = 0; i < count; ++i) {
      const int32_t id = ids.data<int32_t>()[i];
      ++uses[id];
      for (int64_t c = 0; c < cs.dim; ++c) {
        scale[id * cs.dim + c] += std::abs(dout.data<float>()[i * cs.dim + c]);
      }
    }
    const int64_t most_uses = uses.empty() ? 0 : *std::max_element(uses.begin(), uses.end());
    expectClose("embeddingBackward " + what, dtable_cuda, dtable, scale, sumBound(most_uses));

    // Position rows: a table longer than the batch's tokens (its first T rows are used).
    const Tensor pos = randomTensor({cs.tokens + 3, cs.dim}, seed++);
    Tensor y = randomTensor({cs.batch, cs.tokens, cs.dim}, seed++);
    Tensor y_cuda = y.to(gpu());
    ops::addPositionRows(y, pos);
    ops::addPositionRows(y_cuda, pos.to(gpu()));
    expectEqual("addPositionRows " + what, y_cuda, y);  // one addition per element

    Tensor dpos = randomTensor({cs.tokens + 3, cs.dim}, seed++);
    const std::vector<float> dpos0 = dpos.toFloatVector();
    Tensor dpos_cuda = dpos.to(gpu());
    ops::positionRowsBackward(dout, dpos);
    ops::positionRowsBackward(dout.to(gpu()), dpos_cuda);
    std::vector<double> dpos_scale(dpos0.begin(), dpos0.end());
    for (double& s : dpos_scale) s = std::abs(s);
    for (int64_t i = 0; i < dout.numel(); ++i) {
      dpos_scale[i % (cs.tokens * cs.dim)] += std::abs(dout.data<float>()[i]);
    }
    expectClose("positionRowsBackward " + what, dpos_cuda, dpos, dpos_scale, sumBound(cs.batch));
  }
}

TEST_F(CudaKernels, EmbeddingRejectsIdsOutsideTheVocabulary) {
  const Tensor table = randomTensor({5, 3}, 330).to(gpu());
  Tensor out = Tensor::empty({4, 3}, DType::kF32, gpu());
  for (int32_t bad : {-1, 5}) {
    const Tensor ids = Tensor::fromInts({0, 4, bad, 1}, {4}, gpu());
    try {
      ops::embeddingForward(ids, table, out);
      ADD_FAILURE() << "id " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
      EXPECT_NE(e.message().find(fmt::format("token id {} at position 2", bad)), std::string::npos)
          << e.message();
    }
  }
  // Ids must be I32 and on the table's device.
  EXPECT_THROW(ops::embeddingForward(randomTensor({4}, 331).to(gpu()), table, out), Error);
  EXPECT_THROW(ops::embeddingForward(Tensor::fromInts({0, 1, 2, 3}, {4}), table, out), Error);
  // Nothing sticky was left behind.
  ops::embeddingForward(Tensor::fromInts({0, 1, 2, 3}, {4}, gpu()), table, out);
  EXPECT_EQ(out.toFloatVector()[3], table.toFloatVector()[3]);
}

TEST_F(CudaKernels, HeadLayoutMatchesTheHost) {
  uint64_t seed = 340;
  for (const AttentionShape& s : kAttentionShapes) {
    const Shape heads_shape = {s.batch, s.heads, s.tokens, s.head_dim};
    const int64_t width = s.heads * s.head_dim;
    const Tensor qkv = randomTensor({s.batch, s.tokens, 3 * width}, seed++);
    Tensor q = Tensor::empty(heads_shape), k = Tensor::empty(heads_shape),
           v = Tensor::empty(heads_shape);
    Tensor q_cuda = Tensor::empty(heads_shape, DType::kF32, gpu());
    Tensor k_cuda = Tensor::empty(heads_shape, DType::kF32, gpu());
    Tensor v_cuda = Tensor::empty(heads_shape, DType::kF32, gpu());
    ops::splitQkv(qkv, q, k, v);
    ops::splitQkv(qkv.to(gpu()), q_cuda, k_cuda, v_cuda);
    // Pure copies: equal bit for bit.
    expectEqual("splitQkv q " + attentionStr(s), q_cuda, q);
    expectEqual("splitQkv k " + attentionStr(s), k_cuda, k);
    expectEqual("splitQkv v " + attentionStr(s), v_cuda, v);

    const Tensor dq = randomTensor(heads_shape, seed++), dk = randomTensor(heads_shape, seed++),
                 dv = randomTensor(heads_shape, seed++);
    Tensor dqkv = Tensor::empty({s.batch, s.tokens, 3 * width});
    Tensor dqkv_cuda = Tensor::empty({s.batch, s.tokens, 3 * width}, DType::kF32, gpu());
    ops::mergeQkv(dq, dk, dv, dqkv);
    ops::mergeQkv(dq.to(gpu()), dk.to(gpu()), dv.to(gpu()), dqkv_cuda);
    expectEqual("mergeQkv " + attentionStr(s), dqkv_cuda, dqkv);
    // merge undoes split
    Tensor round_trip = Tensor::empty({s.batch, s.tokens, 3 * width}, DType::kF32, gpu());
    ops::mergeQkv(q_cuda, k_cuda, v_cuda, round_trip);
    expectEqual("mergeQkv(splitQkv(qkv)) " + attentionStr(s), round_trip, qkv);

    // Heads to tokens and back.
    const Shape tokens_shape = {s.batch, s.tokens, s.heads, s.head_dim};
    const Tensor x = randomTensor(heads_shape, seed++);
    Tensor y = Tensor::empty(tokens_shape);
    Tensor y_cuda = Tensor::empty(tokens_shape, DType::kF32, gpu());
    ops::permute0213(x, y);
    ops::permute0213(x.to(gpu()), y_cuda);
    expectEqual("permute0213 " + attentionStr(s), y_cuda, y);
    Tensor back = Tensor::empty(heads_shape, DType::kF32, gpu());
    ops::permute0213(y_cuda, back);
    expectEqual("permute0213 twice " + attentionStr(s), back, x);
  }
}

TEST_F(CudaKernels, CausalSoftmaxMatchesTheHost) {
  struct Case {
    int64_t matrices, tokens;
  };
  // Rows shorter and longer than a block (256 threads), and more rows (13200 x 5 = 66000) than
  // one grid of row blocks (65535).
  const std::vector<Case> cases = {{1, 1}, {1, 2}, {3, 7}, {2, 33}, {2, 300}, {13200, 5}, {0, 4}};
  uint64_t seed = 350;
  for (const Case& cs : cases) {
    const std::string what = fmt::format("{} x {}x{}", cs.matrices, cs.tokens, cs.tokens);
    const Shape shape = {cs.matrices, cs.tokens, cs.tokens};
    const float scale = 1.0f / std::sqrt(static_cast<float>(cs.tokens));
    const Tensor scores = randomTensor(shape, seed++, 3.0);
    Tensor probs = Tensor::empty(shape);
    Tensor probs_cuda = Tensor::full(shape, std::nanf("")).to(gpu());  // every element written
    ops::causalSoftmaxForward(scores, probs, scale);
    ops::causalSoftmaxForward(scores.to(gpu()), probs_cuda, scale);
    // As for softmaxCrossEntropy: each probability within a few roundings of exp relative to
    // itself; the masked ones are exactly 0 on both sides. nvcc also fuses scale * s - max into
    // one FMA, which moves exp's argument by up to u |scale s| (|scale s| < 10 here), so up to 10u
    // more: still inside kExpRoundings.
    expectClose("causalSoftmaxForward " + what, probs_cuda, probs, 0.0, kExpRoundings);

    // The backward from the host's probabilities: dscores = scale p (dp - sum_j p_j dp_j). The
    // row's dot product is a sum of up to T terms (gamma_T relative to the sum of |p_j dp_j|), the
    // rest a few roundings, so each element is measured against scale p (|dp| + sum |p dp|).
    const Tensor dprobs = randomTensor(shape, seed++);
    Tensor dscores = Tensor::empty(shape);
    Tensor dscores_cuda = Tensor::full(shape, std::nanf("")).to(gpu());
    ops::causalSoftmaxBackward(probs, dprobs, dscores, scale);
    ops::causalSoftmaxBackward(probs.to(gpu()), dprobs.to(gpu()), dscores_cuda, scale);
    const float* p = probs.data<float>();
    const float* dp = dprobs.data<float>();
    std::vector<double> dscale(static_cast<size_t>(probs.numel()));
    for (int64_t r = 0; r < cs.matrices * cs.tokens; ++r) {
      double dot_magnitude = 0.0;
      for (int64_t j = 0; j < cs.tokens; ++j) {
        dot_magnitude +=
            std::abs(static_cast<double>(p[r * cs.tokens + j]) * dp[r * cs.tokens + j]);
      }
      for (int64_t j = 0; j < cs.tokens; ++j) {
        const int64_t at = r * cs.tokens + j;
        dscale[at] = scale * p[at] * (std::abs(dp[at]) + dot_magnitude);
      }
    }
    expectClose("causalSoftmaxBackward " + what, dscores_cuda, dscores, dscale,
                sumBound(cs.tokens) + kFewRoundings);
  }
}

// ------------------------------------------------------------------------------------------------
// Mixed precision: 16-bit casts, round-through, the non-finite count, 16-bit GEMM

// Float bit patterns every 4093rd (about a million: every exponent, both signs, subnormals, inf
// and NaN among them), then hand-picked specials: ties, fp16's overflow boundary, -0.
std::vector<float> floatPatterns() {
  std::vector<float> values;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 4093) {
    values.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  }
  for (float v : {0.0f, -0.0f, 1.0f + 0x1p-8f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f,
                  65519.996f, 65520.0f, 0x1p-24f, 0x1p-25f, 3 * 0x1p-25f, 0x1p-14f - 0x1p-26f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::nanf(""),
                  std::bit_cast<float>(0xFF802000u)}) {
    values.push_back(v);
  }
  return values;
}

// The first element whose bytes differ, or -1.
int64_t firstDifference(const Tensor& on_cuda, const Tensor& on_cpu) {
  const Tensor back = on_cuda.to(Device::cpu());
  const size_t size = dtypeSize(on_cpu.dtype());
  const auto* got = static_cast<const unsigned char*>(back.raw());
  const auto* want = static_cast<const unsigned char*>(on_cpu.raw());
  for (int64_t i = 0; i < on_cpu.numel(); ++i) {
    if (std::memcmp(got + i * size, want + i * size, size) != 0) return i;
  }
  return -1;
}

void expectSameBits(const std::string& what, const Tensor& on_cuda, const Tensor& on_cpu) {
  ASSERT_EQ(on_cuda.dtype(), on_cpu.dtype()) << what;
  ASSERT_EQ(on_cuda.numel(), on_cpu.numel()) << what;
  const int64_t at = firstDifference(on_cuda, on_cpu);
  std::printf("  %-60s %s\n", what.c_str(), at < 0 ? "bit for bit equal" : "DIFFERS");
  if (at >= 0) {
    const std::vector<float> got = on_cuda.toFloatVector(), want = on_cpu.toFloatVector();
    ADD_FAILURE() << fmt::format("{}: element {} of {} is {} on CUDA and {} on the host", what, at,
                                 on_cpu.numel(), got[at], want[at]);
  }
}

TEST_F(CudaKernels, CastsAndRoundThroughEqualTheHostsBitForBit) {
  const std::vector<float> patterns = floatPatterns();
  const Tensor sweep = Tensor::fromVector(patterns, {static_cast<int64_t>(patterns.size())});
  std::vector<Tensor> inputs = {sweep};
  for (int64_t n : kSizes) inputs.push_back(randomTensor({n}, 700 + n, 3.0));
  for (DType format : {DType::kBF16, DType::kF16}) {
    for (const Tensor& x : inputs) {
      const std::string what = fmt::format("{} of {} floats", dtypeName(format), x.numel());
      const Tensor narrow = ops::cast(x, format);
      const Tensor narrow_cuda = ops::cast(x.to(gpu()), format);
      expectSameBits("cast to " + what, narrow_cuda, narrow);
      expectSameBits("cast back from " + what, ops::cast(narrow_cuda, DType::kF32),
                     ops::cast(narrow, DType::kF32));
      Tensor rounded = x.clone();
      Tensor rounded_cuda = x.to(gpu());
      ops::roundThrough(rounded, format);
      ops::roundThrough(rounded_cuda, format);
      expectSameBits("roundThrough " + what, rounded_cuda, rounded);
    }
    // Every 16-bit pattern widened, NaNs included.
    Tensor every = Tensor::empty({0x10000}, format);
    auto* bits = static_cast<uint16_t*>(every.raw());
    for (uint32_t h = 0; h < 0x10000; ++h) bits[h] = static_cast<uint16_t>(h);
    expectSameBits(fmt::format("every {} pattern widened", dtypeName(format)),
                   ops::cast(every.to(gpu()), DType::kF32), ops::cast(every, DType::kF32));
    // Tensor's conversions on the device.
    expectSameBits(fmt::format("toDType {} on the device", dtypeName(format)),
                   sweep.to(gpu()).toDType(format), sweep.toDType(format));
  }
}

TEST_F(CudaKernels, CountNonFiniteMatchesTheHost) {
  for (int64_t n : kSizes) {
    std::vector<float> values = randomValues(n, 800 + n);
    for (int64_t i = 0; i < n; i += 97) {
      const float specials[] = {std::numeric_limits<float>::infinity(), std::nanf(""),
                                -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::max()};
      values[i] = specials[(i / 97) % 4];
    }
    const Tensor x = Tensor::fromVector(values, {n});
    const int64_t on_cpu = ops::countNonFinite(x);
    const int64_t on_cuda = ops::countNonFinite(x.to(gpu()));
    std::printf("  countNonFinite of %-10lld cuda %lld, host %lld\n", static_cast<long long>(n),
                static_cast<long long>(on_cuda), static_cast<long long>(on_cpu));
    EXPECT_EQ(on_cuda, on_cpu) << "n = " << n;
  }
}

// The 16-bit operands' fp32 products are exact on both devices (8- or 11-bit significands); only
// the fp32 summation differs. Tensor cores may align and truncate rather than round inside an
// MMA step (Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021), which can double the
// device's rounding error per addition: twice the fp32 bound, and never below 1e-5.
double lowPrecisionSumBound(int64_t terms) {
  return std::max(2.0 * sumBound(terms), 1e-5);
}

TEST_F(CudaKernels, LowPrecisionMatmulMatchesTheHost) {
  struct Case {
    Shape batch;  // empty: ops::matmul, else ops::matmulBatched
    int64_t m, n, k;
  };
  const std::vector<Case> cases = {{{}, 0, 3, 2},      {{}, 3, 2, 0},   {{}, 1, 1, 1},
                                   {{}, 7, 1, 5},      {{}, 17, 33, 9}, {{}, 64, 48, 130},
                                   {{}, 127, 65, 257}, {{3}, 7, 5, 3},  {{2, 3}, 17, 33, 9},
                                   {{5}, 65, 31, 130}, {{2}, 3, 2, 0},  {{0}, 3, 3, 3}};
  uint64_t seed = 900;
  for (DType format : {DType::kBF16, DType::kF16}) {
    for (const Case& shape : cases) {
      const int64_t m = shape.m, n = shape.n, k = shape.k;
      const bool batched = !shape.batch.empty();
      const int64_t batch = batched ? shapeNumel(shape.batch) : 1;
      const auto with_batch = [&](int64_t rows, int64_t cols) {
        Shape full = shape.batch;
        full.push_back(rows);
        full.push_back(cols);
        return full;
      };
      for (bool trans_a : {false, true}) {
        for (bool trans_b : {false, true}) {
          const float alpha = 0.5f, beta = trans_a ? 0.0f : -1.5f;
          const Tensor a = ops::cast(
              randomTensor(trans_a ? with_batch(k, m) : with_batch(m, k), seed++), format);
          const Tensor b = ops::cast(
              randomTensor(trans_b ? with_batch(n, k) : with_batch(k, n), seed++), format);
          // beta = 0 must clear C, NaN included, as BLAS does.
          Tensor c = beta == 0.0f ? Tensor::full(with_batch(m, n), std::nanf(""))
                                  : randomTensor(with_batch(m, n), seed++);
          const std::vector<float> c0 = c.toFloatVector();
          Tensor c_cuda = c.to(gpu());
          if (batched) {
            ops::matmulBatched(a, trans_a, b, trans_b, c, alpha, beta);
            ops::matmulBatched(a.to(gpu()), trans_a, b.to(gpu()), trans_b, c_cuda, alpha, beta);
          } else {
            ops::matmul(a, trans_a, b, trans_b, c, alpha, beta);
            ops::matmul(a.to(gpu()), trans_a, b.to(gpu()), trans_b, c_cuda, alpha, beta);
          }
          const std::vector<float> pa = a.toFloatVector(), pb = b.toFloatVector();
          std::vector<double> scale(static_cast<size_t>(batch * m * n));
          for (int64_t bi = 0; bi < batch; ++bi) {
            const float* ai = pa.data() + bi * m * k;
            const float* bbi = pb.data() + bi * k * n;
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                double s = 0.0;
                for (int64_t p = 0; p < k; ++p) {
                  const float aip = trans_a ? ai[p * m + i] : ai[i * k + p];
                  const float bpj = trans_b ? bbi[j * k + p] : bbi[p * n + j];
                  s += std::abs(static_cast<double>(aip) * bpj);
                }
                const int64_t at = (bi * m + i) * n + j;
                scale[at] = std::abs(alpha) * s + (beta == 0.0f ? 0.0 : std::abs(beta * c0[at]));
              }
            }
          }
          expectClose(fmt::format("{} {} {} x {}x{}x{} {}{}", dtypeName(format),
                                  batched ? "matmulBatched" : "matmul", shapeStr(shape.batch), m, n,
                                  k, trans_a ? "A^T" : "A", trans_b ? "B^T" : "B"),
                      c_cuda, c, scale, lowPrecisionSumBound(k));
        }
      }
    }
  }
}

}  // namespace
}  // namespace ringmaster
