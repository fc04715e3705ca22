// The mixed-precision kernels and ops on the host, value by value: the scalar bf16 / fp16
// conversions of tensor/device.h on hand-picked cases (ties to even, subnormals, overflow, NaN,
// -0) and on every 16-bit pattern; the vectorised kernels (F16C, GCC-vectorised bit arithmetic)
// against those scalars over a sweep of float bit patterns; roundThrough, countNonFinite; the
// 16-bit matmuls against the fp32 matmul of the widened operands and a double-precision sum; and
// the errors the ops give for dtypes they do not take.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"
#include "tensor/host_gemm.h"
#include "tensor/kernels.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace ringmaster {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float fromBits(uint32_t bits) {
  return std::bit_cast<float>(bits);
}

uint32_t bitsOf(float value) {
  return std::bit_cast<uint32_t>(value);
}

Tensor randomTensor(const Shape& shape, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> values(static_cast<size_t>(shapeNumel(shape)));
  for (float& v : values) v = static_cast<float>(rng.normal());
  return Tensor::fromVector(values, shape);
}

// Runs `call`, expects a kInvalidArgument error whose message contains `fragment`.
template <typename Call>
void expectRefused(Call call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected an error containing \"" << fragment << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    EXPECT_NE(e.message().find(fragment), std::string::npos) << e.message();
  }
}

// Float bit patterns every `stride`-th from 0, the specials appended; an odd count so that the
// vector kernels' scalar tail runs too.
std::vector<float> floatSweep(uint32_t stride) {
  std::vector<float> values;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += stride) {
    values.push_back(fromBits(static_cast<uint32_t>(bits)));
  }
  for (float v : {0.0f, -0.0f, kInf, -kInf, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()}) {
    values.push_back(v);
  }
  if (values.size() % 2 == 0) values.push_back(1.0f);
  return values;
}

const DType kFormats[] = {DType::kBF16, DType::kF16};

uint16_t scalarFromFloat(float value, DType format) {
  return format == DType::kBF16 ? floatToBf16(value) : floatToHalf(value);
}

float scalarToFloat(uint16_t value, DType format) {
  return format == DType::kBF16 ? bf16ToFloat(value) : halfToFloat(value);
}

// ------------------------------------------------------------------------------------------------
// Scalar conversions

TEST(HalfConversion, RoundsToNearestEvenWithSubnormalsAndOverflow) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  // Ties between two halves go to the even one; past the tie, up.
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3C02);
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
  // The largest half, and the boundary where rounding overflows to inf (65520 is a tie with 2^16).
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);
  EXPECT_EQ(floatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(floatToHalf(kInf), 0x7C00);
  EXPECT_EQ(floatToHalf(-kInf), 0xFC00);
  // Subnormals: 2^-24 is the smallest; 2^-25 ties with 0 (even), 3 * 2^-25 ties between 1 and 2
  // units (to 2); the largest subnormal; rounding up into the smallest normal 2^-14.
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);
  EXPECT_EQ(floatToHalf(-0x1p-25f), 0x8000);
  EXPECT_EQ(floatToHalf(0x1.8p-25f), 0x0001);
  EXPECT_EQ(floatToHalf(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(floatToHalf(1023 * 0x1p-24f), 0x03FF);
  EXPECT_EQ(floatToHalf(0x1p-14f - 0x1p-26f), 0x0400);
  EXPECT_EQ(floatToHalf(0x1p-14f), 0x0400);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  // NaN stays NaN, made quiet, keeping the payload's top bits and the sign.
  EXPECT_EQ(floatToHalf(fromBits(0x7FC00000u)), 0x7E00);
  EXPECT_EQ(floatToHalf(fromBits(0x7F800001u)), 0x7E00);  // signalling, payload below fp16's bits
  EXPECT_EQ(floatToHalf(fromBits(0xFF802000u)), 0xFE01);

  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(halfToFloat(0x03FF), 1023 * 0x1p-24f);
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(bitsOf(halfToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(halfToFloat(0xFC00), -kInf);
  EXPECT_EQ(bitsOf(halfToFloat(0x7C01)), 0x7FC02000u);  // a signalling NaN comes back quiet
}

TEST(HalfConversion, EveryHalfSurvivesTheRoundTrip) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const float wide = halfToFloat(half);
    const bool nan = (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0;
    ASSERT_EQ(std::isnan(wide), nan) << fmt::format("{:#06x}", h);
    // A NaN comes back quiet (bit 9 set); every other half exactly.
    ASSERT_EQ(floatToHalf(wide), nan ? (half | 0x200u) : half) << fmt::format("{:#06x}", h);
  }
}

TEST(Bf16Conversion, RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(floatToBf16(1.0f + 0x1p-8f), 0x3F80);  // tie: to even
  EXPECT_EQ(floatToBf16(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(floatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to inf
  EXPECT_EQ(floatToBf16(-kInf), 0xFF80);
  EXPECT_EQ(floatToBf16(fromBits(0x00010000u)), 0x0001);  // a float subnormal bf16 holds
  EXPECT_EQ(floatToBf16(fromBits(0x00008000u)), 0x0000);  // its half: a tie, to even (0)
  EXPECT_EQ(floatToBf16(fromBits(0x00018000u)), 0x0002);  // 1.5 units: a tie, to even (2)
  EXPECT_EQ(floatToBf16(fromBits(0x7F800001u)), 0x7FC0);  // signalling NaN: quiet, still NaN
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto bf = static_cast<uint16_t>(h);
    const bool nan = (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0;
    ASSERT_EQ(floatToBf16(bf16ToFloat(bf)), nan ? (bf | 0x40u) : bf) << fmt::format("{:#06x}", h);
  }
}

// ------------------------------------------------------------------------------------------------
// Kernels against the scalars

TEST(LowPrecisionKernels, CastsEqualTheScalarConversionsBitForBit) {
  const std::vector<float> sweep = floatSweep(257);  // 16.7 million patterns
  const auto n = static_cast<int64_t>(sweep.size());
  std::vector<uint16_t> narrow(sweep.size());
  for (DType format : kFormats) {
    cpu::castFromFloat(sweep.data(), narrow.data(), n, format);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (narrow[i] != scalarFromFloat(sweep[i], format) && wrong++ < 5) {
        ADD_FAILURE() << fmt::format("{} of {:#010x}: kernel {:#06x}, scalar {:#06x}",
                                     dtypeName(format), bitsOf(sweep[i]), narrow[i],
                                     scalarFromFloat(sweep[i], format));
      }
    }
    EXPECT_EQ(wrong, 0) << dtypeName(format);

    std::vector<uint16_t> every(0x10001);  // every pattern, plus one for an odd count
    for (uint32_t h = 0; h < every.size(); ++h) every[h] = static_cast<uint16_t>(h);
    std::vector<float> wide(every.size());
    cpu::castToFloat(every.data(), wide.data(), static_cast<int64_t>(every.size()), format);
    for (size_t h = 0; h < every.size(); ++h) {
      ASSERT_EQ(bitsOf(wide[h]), bitsOf(scalarToFloat(every[h], format)))
          << dtypeName(format) << fmt::format(" {:#06x}", every[h]);
    }
  }
}

TEST(LowPrecisionKernels, RoundThroughIsCastThenWiden) {
  const std::vector<float> sweep = floatSweep(1021);
  const auto n = static_cast<int64_t>(sweep.size());
  for (DType format : kFormats) {
    std::vector<uint16_t> narrow(sweep.size());
    std::vector<float> expected(sweep.size());
    cpu::castFromFloat(sweep.data(), narrow.data(), n, format);
    cpu::castToFloat(narrow.data(), expected.data(), n, format);
    std::vector<float> rounded = sweep;
    cpu::roundThrough(rounded.data(), n, format);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(bitsOf(rounded[i]), bitsOf(expected[i]))
          << dtypeName(format) << fmt::format(" of {:#010x}", bitsOf(sweep[i]));
    }
  }
  // A few values by hand: fp16 saturates to inf above 65519, bf16 keeps the range.
  std::vector<float> y = {70000.0f, 1.0f + 0x1p-11f, 1e-8f, -3.0f};
  cpu::roundThrough(y.data(), 4, DType::kF16);
  EXPECT_EQ(y, (std::vector<float>{kInf, 1.0f, 0.0f, -3.0f}));
  y = {70000.0f, 1.0f + 0x1p-8f, 1e-8f, -3.0f};
  cpu::roundThrough(y.data(), 4, DType::kBF16);
  EXPECT_EQ(y, (std::vector<float>{70144.0f, 1.0f, bf16ToFloat(floatToBf16(1e-8f)), -3.0f}));
  EXPECT_NE(y[2], 0.0f);
}

TEST(LowPrecisionKernels, CountNonFiniteCountsInfAndNaNOnly) {
  for (int64_t n : {0, 1, 7, 1000, 4099}) {
    std::vector<float> x(static_cast<size_t>(n));
    Rng rng(static_cast<uint64_t>(n));
    for (float& v : x) v = static_cast<float>(rng.normal());
    int64_t expected = 0;
    for (int64_t i = 0; i < n; i += 13) {
      const float specials[] = {kInf,
                                -kInf,
                                std::numeric_limits<float>::quiet_NaN(),
                                fromBits(0xFF800001u),
                                std::numeric_limits<float>::max(),
                                -std::numeric_limits<float>::denorm_min(),
                                -0.0f};
      const int which = static_cast<int>((i / 13) % 7);
      x[i] = specials[which];
      if (which < 4) ++expected;
    }
    EXPECT_EQ(cpu::countNonFinite(x.data(), n), expected) << "n = " << n;
  }
}

TEST(LowPrecisionKernels, RefuseAFormatThatIsNot16Bit) {
  float x = 1.0f;
  uint16_t h = 0;
  expectRefused([&] { cpu::castFromFloat(&x, &h, 1, DType::kF32); }, "BF16 or F16, got F32");
  expectRefused([&] { cpu::roundThrough(&x, 1, DType::kI32); }, "BF16 or F16, got I32");
}

// ------------------------------------------------------------------------------------------------
// ops: cast, roundThrough, countNonFinite, Tensor conversions

TEST(LowPrecisionOps, CastConvertsCopiesOrShares) {
  const Tensor x = randomTensor({3, 5}, 1);
  for (DType format : kFormats) {
    const Tensor narrow = ops::cast(x, format);
    EXPECT_EQ(narrow.dtype(), format);
    EXPECT_EQ(narrow.shape(), x.shape());
    const auto* bits = static_cast<const uint16_t*>(narrow.raw());
    const std::vector<float> values = x.toFloatVector();
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(bits[i], scalarFromFloat(values[i], format));
    }
    const Tensor back = ops::cast(narrow, DType::kF32);
    std::vector<float> expected = values;
    cpu::roundThrough(expected.data(), static_cast<int64_t>(expected.size()), format);
    EXPECT_EQ(back.toFloatVector(), expected);
    EXPECT_EQ(narrow.toFloatVector(), expected);  // Tensor reads both formats as float
    Tensor y = x.clone();
    ops::roundThrough(y, format);
    EXPECT_EQ(y.toFloatVector(), expected);

    EXPECT_TRUE(ops::cast(narrow, format).sharesStorageWith(narrow));  // already in the dtype
    Tensor copy = Tensor::empty({15}, format);
    ops::cast(narrow, copy);  // same dtype: a copy
    EXPECT_FALSE(copy.sharesStorageWith(narrow));
    EXPECT_EQ(copy.toFloatVector(), expected);
  }
  // toDType between all three, BF16 <-> F16 through F32.
  const Tensor h = x.toDType(DType::kF16);
  EXPECT_EQ(h.toFloatVector(), ops::cast(x, DType::kF16).toFloatVector());
  const Tensor b = h.toDType(DType::kBF16);
  std::vector<float> expected = h.toFloatVector();
  cpu::roundThrough(expected.data(), static_cast<int64_t>(expected.size()), DType::kBF16);
  EXPECT_EQ(b.toFloatVector(), expected);
  EXPECT_FALSE(x.toDType(DType::kF32).sharesStorageWith(x));
}

TEST(LowPrecisionOps, RefuseWhatTheyDoNotConvert) {
  const Tensor x = randomTensor({4}, 2);
  const Tensor ints = Tensor::fromInts({1, 2, 3, 4}, {4});
  Tensor bf = Tensor::empty({4}, DType::kBF16);
  Tensor half = Tensor::empty({4}, DType::kF16);
  Tensor short_out = Tensor::empty({3}, DType::kBF16);
  expectRefused([&] { ops::cast(ints, bf); }, "no cast from I32 to BF16");
  expectRefused([&] { ops::cast(bf, half); }, "no cast from BF16 to F16");
  expectRefused([&] { ops::cast(x, short_out); }, "differ in size");
  expectRefused([&] { (void)ops::cast(Tensor(), DType::kBF16); }, "undefined tensor");
  Tensor y = x.clone();
  expectRefused([&] { ops::roundThrough(y, DType::kF32); }, "format BF16 or F16, got F32");
  expectRefused([&] { ops::roundThrough(bf, DType::kBF16); }, "must be F32, got BF16");
  expectRefused([&] { (void)ops::countNonFinite(half); }, "must be F32, got F16");
  expectRefused([&] { (void)ints.toDType(DType::kBF16); }, "no conversion from I32 to BF16");
}

TEST(LowPrecisionOps, CountNonFiniteOfATensor) {
  const Tensor x = Tensor::fromVector({1.0f, kInf, std::nanf(""), -kInf, 0.0f}, {5});
  EXPECT_EQ(ops::countNonFinite(x), 3);
  EXPECT_EQ(ops::countNonFinite(Tensor::zeros({0})), 0);
}

// ------------------------------------------------------------------------------------------------
// 16-bit matmuls

// c = alpha op(a) op(b) + beta c in double, from the operands' float values: the reference the
// fp32 results must be within (k + 3) u of, relative to the sum of magnitudes (gamma_n).
void expectNearDoubleReference(const std::vector<float>& a, bool ta, const std::vector<float>& b,
                               bool tb, const std::vector<float>& c_before,
                               const std::vector<float>& c, int64_t m, int64_t n, int64_t k,
                               float alpha, float beta, const std::string& what) {
  const double bound = static_cast<double>(k + 3) * 0x1p-24;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0, magnitude = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double product = static_cast<double>(ta ? a[p * m + i] : a[i * k + p]) *
                               (tb ? b[j * k + p] : b[p * n + j]);
        sum += product;
        magnitude += std::abs(product);
      }
      const double want = alpha * sum + beta * c_before[i * n + j];
      const double scale = std::abs(alpha) * magnitude + std::abs(beta * c_before[i * n + j]);
      ASSERT_LE(std::abs(c[i * n + j] - want), bound * scale + 1e-30)
          << what << fmt::format(" element ({}, {})", i, j);
    }
  }
}

// The host GEMM's threads for one test's length (both GEMM libraries follow them).
class GemmThreadsForTest {
 public:
  explicit GemmThreadsForTest(int threads) : before_(cpu::gemmThreads()) {
    cpu::setGemmThreads(threads);
  }
  ~GemmThreadsForTest() { cpu::setGemmThreads(before_); }
  GemmThreadsForTest(const GemmThreadsForTest&) = delete;
  GemmThreadsForTest& operator=(const GemmThreadsForTest&) = delete;

 private:
  int before_;
};

// bf16 on one thread of a processor with bf16 instructions runs natively (host_gemm.h), summing
// in another order than the fp32 product; everything else widens to fp32, bit for bit.
bool widensToFp32(DType format, int threads) {
  return format != DType::kBF16 || threads > 1 || !cpu::haveNativeBf16Gemm();
}

TEST(LowPrecisionMatmul, EqualsTheFp32MatmulOfTheWidenedOperands) {
  const int64_t m = 5, n = 7, k = 33;
  const float alpha = 0.75f, beta = -1.5f;
  for (const int threads : {1, 2}) {
    const GemmThreadsForTest pinned(threads);
    for (DType format : kFormats) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          const std::string what =
              fmt::format("{} matmul, a{} b{}, {} thread(s)", dtypeName(format), ta ? "^T" : "",
                          tb ? "^T" : "", threads);
          const Tensor a = ops::cast(randomTensor(ta ? Shape{k, m} : Shape{m, k}, 10), format);
          const Tensor b = ops::cast(randomTensor(tb ? Shape{n, k} : Shape{k, n}, 11), format);
          const Tensor c_before = randomTensor({m, n}, 12);
          Tensor c = c_before.clone();
          ops::matmul(a, ta, b, tb, c, alpha, beta);
          Tensor expected = c_before.clone();
          ops::matmul(ops::cast(a, DType::kF32), ta, ops::cast(b, DType::kF32), tb, expected, alpha,
                      beta);
          if (widensToFp32(format, threads))
            EXPECT_EQ(c.toFloatVector(), expected.toFloatVector()) << what;
          expectNearDoubleReference(a.toFloatVector(), ta, b.toFloatVector(), tb,
                                    c_before.toFloatVector(), c.toFloatVector(), m, n, k, alpha,
                                    beta, what);
        }
      }
    }
  }
}

TEST(LowPrecisionMatmul, BatchedEqualsTheFp32BatchedMatmulOfTheWidenedOperands) {
  // scores [B, H, T, T] = q [B, H, T, D] x k^T, and the other transposes, over 2 x 3 matrices.
  const int64_t m = 4, n = 6, k = 9;
  for (const int threads : {1, 2}) {
    const GemmThreadsForTest pinned(threads);
    for (DType format : kFormats) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          const std::string what =
              fmt::format("{} batched matmul, a{} b{}, {} thread(s)", dtypeName(format),
                          ta ? "^T" : "", tb ? "^T" : "", threads);
          const Tensor a =
              ops::cast(randomTensor(ta ? Shape{2, 3, k, m} : Shape{2, 3, m, k}, 20), format);
          const Tensor b =
              ops::cast(randomTensor(tb ? Shape{2, 3, n, k} : Shape{2, 3, k, n}, 21), format);
          const Tensor c_before = randomTensor({2, 3, m, n}, 22);
          Tensor c = c_before.clone();
          ops::matmulBatched(a, ta, b, tb, c, 1.25f, 0.5f);
          Tensor expected = c_before.clone();
          ops::matmulBatched(ops::cast(a, DType::kF32), ta, ops::cast(b, DType::kF32), tb, expected,
                             1.25f, 0.5f);
          if (widensToFp32(format, threads))
            EXPECT_EQ(c.toFloatVector(), expected.toFloatVector()) << what;
          // Each matrix against the double reference, so that the strides are checked too.
          const std::vector<float> av = a.toFloatVector(), bv = b.toFloatVector();
          const std::vector<float> cb = c_before.toFloatVector(), cv = c.toFloatVector();
          for (int64_t i = 0; i < 6; ++i) {
            const auto slice = [i](const std::vector<float>& v, int64_t size) {
              return std::vector<float>(v.begin() + i * size, v.begin() + (i + 1) * size);
            };
            expectNearDoubleReference(slice(av, m * k), ta, slice(bv, k * n), tb, slice(cb, m * n),
                                      slice(cv, m * n), m, n, k, 1.25f, 0.5f,
                                      what + fmt::format(" matrix {}", i));
          }
        }
      }
    }
  }
}

TEST(LowPrecisionMatmul, EmptyProductsScaleC) {
  for (DType format : kFormats) {
    const Tensor a = Tensor::empty({3, 0}, format);
    const Tensor b = Tensor::empty({0, 2}, format);
    Tensor c = Tensor::full({3, 2}, 4.0f);
    ops::matmul(a, false, b, false, c, 1.0f, 0.5f);
    EXPECT_EQ(c.toFloatVector(), std::vector<float>(6, 2.0f));
    Tensor cb = Tensor::full({2, 3, 2}, 4.0f);
    ops::matmulBatched(Tensor::empty({2, 3, 0}, format), false, Tensor::empty({2, 0, 2}, format),
                       false, cb, 1.0f, 0.0f);
    EXPECT_EQ(cb.toFloatVector(), std::vector<float>(12, 0.0f));
    Tensor none = Tensor::empty({0, 2});
    ops::matmul(Tensor::empty({0, 4}, format), false, Tensor::empty({4, 2}, format), false, none);
  }
}

TEST(LowPrecisionMatmul, RefusesMixedOrUnsupportedDTypes) {
  const Tensor f = randomTensor({2, 2}, 30);
  const Tensor bf = ops::cast(f, DType::kBF16);
  const Tensor half = ops::cast(f, DType::kF16);
  const Tensor ints = Tensor::fromInts({1, 2, 3, 4}, {2, 2});
  Tensor c = Tensor::zeros({2, 2});
  Tensor c_bf = Tensor::zeros({2, 2}, DType::kBF16);
  expectRefused([&] { ops::matmul(bf, false, f, false, c); },
                "matmul takes a and b both F32, both BF16 or both F16, got BF16 [2, 2] and F32");
  expectRefused([&] { ops::matmul(bf, false, half, false, c); }, "got BF16 [2, 2] and F16");
  expectRefused([&] { ops::matmul(ints, false, ints, false, c); }, "got I32 [2, 2] and I32");
  expectRefused([&] { ops::matmul(bf, false, bf, false, c_bf); },
                "matmul's output c must be F32 (products accumulate in fp32), got BF16");
  Tensor c3 = Tensor::zeros({1, 2, 2});
  expectRefused(
      [&] {
        ops::matmulBatched(half.view({1, 2, 2}), false, f.view({1, 2, 2}), false, c3);
      },
      "batched matmul takes a and b both F32, both BF16 or both F16, got F16");
}

}  // namespace
}  // namespace ringmaster
