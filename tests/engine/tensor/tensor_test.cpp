// Tensor construction, views, copies, bf16 conversion, and the host matmul against a naive loop.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/random.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace ringmaster {
namespace {

TEST(Tensor, ShapesAndViews) {
  Tensor t = Tensor::fromVector({0, 1, 2, 3, 4, 5}, {3, 2});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 24u);
  Tensor rows = t.narrowRows(1, 2);
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(rows.toFloatVector(), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_TRUE(rows.sharesStorageWith(t));
  rows.data<float>()[0] = 20;  // writes through to the parent
  EXPECT_EQ(t.toFloatVector()[2], 20);
  EXPECT_EQ(t.view({6}).shape(), (Shape{6}));
  EXPECT_THROW(t.view({4}), Error);
  EXPECT_THROW(t.narrowRows(2, 2), Error);
  EXPECT_THROW(t.data<int32_t>(), Error);
}

TEST(Tensor, CloneIsDeep) {
  Tensor t = Tensor::fromVector({1, 2}, {2});
  Tensor c = t.clone();
  c.data<float>()[0] = 5;
  EXPECT_EQ(t.toFloatVector()[0], 1);
  EXPECT_FALSE(c.sharesStorageWith(t));
}

// A transformer block adds the residual in place into a sublayer's output only when nothing else
// can read that storage: no view, copy or clone of the handle may be alive.
TEST(Tensor, SoleHandleUntilAViewOrCopyShareTheStorage) {
  Tensor t = Tensor::zeros({2, 3});
  EXPECT_TRUE(t.isSoleHandle());
  {
    const Tensor view = t.view({3, 2});
    EXPECT_FALSE(t.isSoleHandle());
    EXPECT_FALSE(view.isSoleHandle());
  }
  EXPECT_TRUE(t.isSoleHandle());
  {
    const Tensor copy = t;  // NOLINT(performance-unnecessary-copy-initialization): the point
    EXPECT_FALSE(t.isSoleHandle());
  }
  const Tensor clone = t.clone();
  EXPECT_TRUE(t.isSoleHandle());
  EXPECT_TRUE(clone.isSoleHandle());
  EXPECT_FALSE(Tensor().isSoleHandle());
}

TEST(Tensor, ZeroElementTensors) {
  Tensor t = Tensor::zeros({0, 4});
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.toFloatVector().empty());
  Tensor out = Tensor::zeros({0, 3});
  ops::matmul(t, false, Tensor::zeros({4, 3}), false, out);
}

TEST(Tensor, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16ToFloat(0x3F80), 1.0f);
  // 1 + 2^-8 lies exactly between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(floatToBf16(1.0f + 1.0f / 256), 0x3F80);
  // 1 + 3 * 2^-8 ties too and rounds up to the even 1 + 2^-6.
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::nanf("")))));
  Tensor t = Tensor::fromVector({0.1f, -3.5f, 1e30f}, {3});
  Tensor back = t.toDType(DType::kBF16).toDType(DType::kF32);
  std::vector<float> v = back.toFloatVector();
  EXPECT_NEAR(v[0], 0.1f, 0.1f / 128);
  EXPECT_EQ(v[1], -3.5f);
  EXPECT_NEAR(v[2], 1e30f, 1e30f / 128);
}

// A slow, obvious reference the BLAS path is checked against.
std::vector<float> naiveMatmul(const std::vector<float>& a, bool ta, const std::vector<float>& b,
                               bool tb, int64_t m, int64_t n, int64_t k) {
  std::vector<float> c(m * n, 0.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float x = ta ? a[p * m + i] : a[i * k + p];
        const float y = tb ? b[j * k + p] : b[p * n + j];
        sum += static_cast<double>(x) * y;
      }
      c[i * n + j] = static_cast<float>(sum);
    }
  return c;
}

TEST(Ops, MatmulMatchesNaiveForEveryTransposeAndOddSizes) {
  Rng rng(3);
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, {3, 5, 7}, {17, 1, 9}, {64, 33, 128}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        std::vector<float> a(m * k), b(k * n);
        for (float& x : a) x = static_cast<float>(rng.normal());
        for (float& x : b) x = static_cast<float>(rng.normal());
        Tensor ta_t = Tensor::fromVector(a, ta ? Shape{k, m} : Shape{m, k});
        Tensor tb_t = Tensor::fromVector(b, tb ? Shape{n, k} : Shape{k, n});
        Tensor c = Tensor::zeros({m, n});
        ops::matmul(ta_t, ta, tb_t, tb, c);
        std::vector<float> want = naiveMatmul(a, ta, b, tb, m, n, k);
        std::vector<float> got = c.toFloatVector();
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 1e-4 * std::sqrt(static_cast<double>(k)))
              << m << "x" << n << "x" << k << " ta=" << ta << " tb=" << tb << " at " << i;
        }
      }
    }
  }
}

TEST(Ops, MatmulRejectsMismatchedShapes) {
  Tensor c = Tensor::zeros({2, 2});
  EXPECT_THROW(ops::matmul(Tensor::zeros({2, 3}), false, Tensor::zeros({2, 2}), false, c), Error);
}

TEST(Ops, MatmulAccumulatesWithBeta) {
  Tensor a = Tensor::fromVector({1, 2}, {1, 2});
  Tensor b = Tensor::fromVector({3, 4}, {2, 1});
  Tensor c = Tensor::fromVector({10}, {1, 1});
  ops::matmul(a, false, b, false, c, 1.0f, 1.0f);
  EXPECT_EQ(c.toFloatVector()[0], 21.0f);
}

TEST(Device, CudaIsReportedUnavailableWithoutADevice) {
  if (cudaAvailable()) GTEST_SKIP() << "a CUDA device is visible; this checks the no-device path";
  try {
    Tensor::empty({1}, DType::kF32, Device::cuda(0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
  }
}

}  // namespace
}  // namespace ringmaster
