// Reduce kernels, the composition helpers, half precision and the nccl-tests bus factors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "comm/comm_op.h"
#include "comm/reduce_op.h"
#include "core/error.h"

namespace ringmaster {
namespace {

TEST(ReduceOp, BusFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(busFactor(CommOp::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busFactor(CommOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busFactor(CommOp::kReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(busFactor(CommOp::kAllToAll, 3), 2.0 / 3);
  EXPECT_DOUBLE_EQ(busFactor(CommOp::kGather, 3), 2.0 / 3);
  EXPECT_DOUBLE_EQ(busFactor(CommOp::kScatter, 3), 2.0 / 3);
  EXPECT_DOUBLE_EQ(busFactor(CommOp::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busFactor(CommOp::kReduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(busFactor(CommOp::kSend, 2), 1.0);
}

TEST(ReduceOp, EveryKindOnIntegers) {
  auto run = [](ReduceKind kind, int32_t a, int32_t b) {
    reduceInto(kind, DType::kI32, &a, &b, 1);
    return a;
  };
  EXPECT_EQ(run(ReduceKind::kSum, 6, 3), 9);
  EXPECT_EQ(run(ReduceKind::kProduct, 6, 3), 18);
  EXPECT_EQ(run(ReduceKind::kMin, 6, -3), -3);
  EXPECT_EQ(run(ReduceKind::kMax, 6, -3), 6);
  EXPECT_EQ(run(ReduceKind::kBand, 0b1100, 0b1010), 0b1000);
  EXPECT_EQ(run(ReduceKind::kBor, 0b1100, 0b1010), 0b1110);
  EXPECT_EQ(run(ReduceKind::kBxor, 0b1100, 0b1010), 0b0110);
}

// PyTorch's integer sums and products wrap around; ours must too (and must not be undefined
// behaviour, which the UBSan build would stop at).
TEST(ReduceOp, IntegerSumsAndProductsWrapAround) {
  int32_t a = std::numeric_limits<int32_t>::max(), b = 1;
  reduceInto(ReduceKind::kSum, DType::kI32, &a, &b, 1);
  EXPECT_EQ(a, std::numeric_limits<int32_t>::min());
  int64_t c = int64_t{1} << 62, d = 4;
  reduceInto(ReduceKind::kProduct, DType::kI64, &c, &d, 1);
  EXPECT_EQ(c, 0);
  uint8_t e = 200, f = 100;
  reduceInto(ReduceKind::kSum, DType::kU8, &e, &f, 1);
  EXPECT_EQ(e, 44);
}

TEST(ReduceOp, MinAndMaxPropagateNan) {
  float a = 1.0f, b = std::numeric_limits<float>::quiet_NaN();
  reduceInto(ReduceKind::kMax, DType::kF32, &a, &b, 1);
  EXPECT_TRUE(std::isnan(a));
}

TEST(ReduceOp, UnsupportedCombinationsAreRefusedWithTheirNames) {
  try {
    checkReduceSupported(ReduceOp::band(), DType::kF32);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("band needs an integer tensor, got float32"), std::string::npos)
        << e.message();
  }
  EXPECT_THROW(checkReduceSupported(ReduceOp::premulSum(2), DType::kI64), Error);
  EXPECT_NO_THROW(checkReduceSupported(ReduceOp::bxor(), DType::kI64));
  EXPECT_NO_THROW(checkReduceSupported(ReduceOp::premulSum(0.5), DType::kBF16));
}

TEST(ReduceOp, AverageOfIntegersTruncatesTowardZero) {
  int64_t values[] = {7, -7, 9};
  divideInPlace(DType::kI64, values, 3, 2);
  EXPECT_EQ(values[0], 3);
  EXPECT_EQ(values[1], -3);
  EXPECT_EQ(values[2], 4);
}

TEST(ReduceOp, HalfPrecisionRoundTripsAndRoundsToNearestEven) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(halfToFloat(floatToHalf(v)), v) << v;
  }
  EXPECT_EQ(floatToHalf(1.0f + 1.0f / 2048), floatToHalf(1.0f));  // halfway: to even
  EXPECT_TRUE(std::isinf(halfToFloat(floatToHalf(70000.0f))));
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::nanf("")))));
}

TEST(ReduceOp, SixteenBitFloatsReduceInFloat) {
  uint16_t a = floatToBf16(1.5f), b = floatToBf16(2.25f);
  reduceInto(ReduceKind::kSum, DType::kBF16, &a, &b, 1);
  EXPECT_EQ(bf16ToFloat(a), 3.75f);
  uint16_t h = floatToHalf(3.0f), k = floatToHalf(-0.5f);
  reduceInto(ReduceKind::kProduct, DType::kF16, &h, &k, 1);
  EXPECT_EQ(halfToFloat(h), -1.5f);
}

}  // namespace
}  // namespace ringmaster
