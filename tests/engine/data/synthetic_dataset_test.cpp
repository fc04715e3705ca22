// The synthetic teacher dataset: determinism (per sample, lazy = precomputed), input statistics,
// class balance, learnability by a small softmax-regression student, and makeBatch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "data/dataset.h"
#include "data/synthetic_dataset.h"

namespace ringmaster {
namespace {

struct Samples {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Samples fetch(const ClassificationDataset& dataset, const std::vector<int64_t>& indices) {
  Samples s{std::vector<float>(indices.size() * dataset.features()),
            std::vector<int32_t>(indices.size())};
  dataset.fill(indices, s.x.data(), s.y.data());
  return s;
}

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> r(n);
  std::iota(r.begin(), r.end(), 0);
  return r;
}

TEST(SyntheticTeacherDataset, IsDeterministicPerSeed) {
  SyntheticTeacherDataset a(500, 12, 10, 7), b(500, 12, 10, 7), c(500, 12, 10, 8);
  EXPECT_EQ(a.size(), 500);
  EXPECT_EQ(a.features(), 12);
  EXPECT_EQ(a.classes(), 10);
  EXPECT_TRUE(a.precomputed());
  const Samples sa = fetch(a, range(500)), sb = fetch(b, range(500)), sc = fetch(c, range(500));
  EXPECT_EQ(sa.x, sb.x);
  EXPECT_EQ(sa.y, sb.y);
  EXPECT_NE(sa.x, sc.x);
  EXPECT_NE(sa.y, sc.y);
}

TEST(SyntheticTeacherDataset, SampleDependsOnlyOnSeedAndIndex) {
  SyntheticTeacherDataset small(300, 16, 10, 3), large(5000, 16, 10, 3);
  // Fetch order and the dataset's size do not change a sample.
  const std::vector<int64_t> picks{299, 0, 17, 17, 123};
  const Samples from_small = fetch(small, picks), from_large = fetch(large, picks);
  EXPECT_EQ(from_small.x, from_large.x);
  EXPECT_EQ(from_small.y, from_large.y);
  const Samples one = fetch(small, {123});
  EXPECT_EQ(std::vector<float>(from_small.x.end() - 16, from_small.x.end()), one.x);
}

TEST(SyntheticTeacherDataset, LazyGenerationMatchesPrecomputed) {
  // 2^27 samples x 8 features x 4 bytes = 4 GiB: far past the precompute limit.
  SyntheticTeacherDataset lazy(int64_t{1} << 27, 8, 10, 21);
  SyntheticTeacherDataset eager(1000, 8, 10, 21);
  ASSERT_FALSE(lazy.precomputed());
  ASSERT_TRUE(eager.precomputed());
  const std::vector<int64_t> picks{0, 999, 5, 500, 5};
  const Samples a = fetch(lazy, picks), b = fetch(eager, picks);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.y, b.y);
  const Samples far = fetch(lazy, {(int64_t{1} << 27) - 1});
  EXPECT_GE(far.y[0], 0);
  EXPECT_LT(far.y[0], 10);
}

TEST(SyntheticTeacherDataset, InputsAreStandardNormal) {
  SyntheticTeacherDataset data(4096, 16, 10, 1);
  const Samples s = fetch(data, range(4096));
  double sum = 0, sum_sq = 0;
  for (float v : s.x) sum += v, sum_sq += static_cast<double>(v) * v;
  const double n = static_cast<double>(s.x.size());
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(var, 1.0, 0.03);
}

TEST(SyntheticTeacherDataset, ClassesAreBalanced) {
  for (int64_t features : {4, 32, 784}) {
    for (uint64_t seed = 0; seed < (features > 100 ? 2u : 8u); ++seed) {
      const int64_t samples = 4096, classes = 10;
      SyntheticTeacherDataset data(samples, features, classes, seed);
      const Samples s = fetch(data, range(samples));
      std::vector<int64_t> counts(classes);
      for (int32_t y : s.y) {
        ASSERT_GE(y, 0);
        ASSERT_LT(y, classes);
        ++counts[y];
      }
      const int64_t least = *std::min_element(counts.begin(), counts.end());
      EXPECT_GE(least * 3 * classes, samples)
          << "features " << features << " seed " << seed << ": least frequent class has " << least
          << " of " << samples << " samples";
    }
  }
  // Two classes and many classes too.
  for (int64_t classes : {2, 100}) {
    SyntheticTeacherDataset data(20000, 20, classes, 5);
    const Samples s = fetch(data, range(20000));
    std::vector<int64_t> counts(classes);
    for (int32_t y : s.y) ++counts[y];
    EXPECT_GE(*std::min_element(counts.begin(), counts.end()) * 3 * classes, 20000)
        << classes << " classes";
  }
}

// A softmax-regression student trained by full-batch gradient descent: if the labels carry a
// learnable structure, its loss falls well below log(classes) and it beats chance by far.
TEST(SyntheticTeacherDataset, StudentLossFalls) {
  const int64_t n = 4096, f = 16, c = 10;
  SyntheticTeacherDataset data(n, f, c, 2024);
  const Samples s = fetch(data, range(n));
  std::vector<double> w(f * c, 0.0), b(c, 0.0), grad_w(f * c), grad_b(c), p(c);
  auto epoch = [&](bool update, double* accuracy) {
    double loss = 0;
    int64_t correct = 0;
    std::fill(grad_w.begin(), grad_w.end(), 0.0);
    std::fill(grad_b.begin(), grad_b.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const float* x = s.x.data() + i * f;
      double max_logit = -1e300;
      for (int64_t k = 0; k < c; ++k) {
        p[k] = b[k];
        for (int64_t j = 0; j < f; ++j) p[k] += w[j * c + k] * x[j];
        max_logit = std::max(max_logit, p[k]);
      }
      const int64_t argmax = std::max_element(p.begin(), p.end()) - p.begin();
      correct += argmax == s.y[i];
      double z = 0;
      for (int64_t k = 0; k < c; ++k) z += (p[k] = std::exp(p[k] - max_logit));
      for (int64_t k = 0; k < c; ++k) p[k] /= z;
      loss -= std::log(p[s.y[i]]);
      p[s.y[i]] -= 1.0;
      for (int64_t k = 0; k < c; ++k) {
        grad_b[k] += p[k];
        for (int64_t j = 0; j < f; ++j) grad_w[j * c + k] += p[k] * x[j];
      }
    }
    if (update) {
      for (size_t k = 0; k < w.size(); ++k) w[k] -= 0.5 * grad_w[k] / n;
      for (int64_t k = 0; k < c; ++k) b[k] -= 0.5 * grad_b[k] / n;
    }
    if (accuracy) *accuracy = static_cast<double>(correct) / n;
    return loss / n;
  };
  const double initial = epoch(true, nullptr);
  for (int it = 0; it < 150; ++it) epoch(true, nullptr);
  double accuracy = 0;
  const double final_loss = epoch(false, &accuracy);
  EXPECT_NEAR(initial, std::log(10.0), 1e-9);
  EXPECT_LT(final_loss, 0.7 * initial) << "initial " << initial << " final " << final_loss;
  EXPECT_GT(accuracy, 0.4) << "final loss " << final_loss;
}

TEST(SyntheticTeacherDataset, RejectsBadArguments) {
  EXPECT_THROW(SyntheticTeacherDataset(-1, 4, 2, 0), Error);
  EXPECT_THROW(SyntheticTeacherDataset(10, 0, 2, 0), Error);
  EXPECT_THROW(SyntheticTeacherDataset(10, 4, 0, 0), Error);
  SyntheticTeacherDataset one_class(10, 4, 1, 0);
  EXPECT_EQ(fetch(one_class, range(10)).y, std::vector<int32_t>(10, 0));
  SyntheticTeacherDataset empty(0, 4, 3, 0);
  EXPECT_EQ(empty.size(), 0);
}

TEST(MakeBatch, GathersFeaturesAndLabels) {
  SyntheticTeacherDataset data(50, 6, 4, 9);
  const std::vector<int64_t> picks{3, 49, 3};
  const Batch batch = makeBatch(data, picks, Device::cpu());
  EXPECT_EQ(batch.inputs.shape(), (Shape{3, 6}));
  EXPECT_EQ(batch.inputs.dtype(), DType::kF32);
  EXPECT_EQ(batch.targets.shape(), (Shape{3}));
  EXPECT_EQ(batch.targets.dtype(), DType::kI32);
  const Samples s = fetch(data, picks);
  EXPECT_EQ(batch.inputs.toFloatVector(), s.x);
  EXPECT_EQ(std::vector<int32_t>(batch.targets.data<int32_t>(), batch.targets.data<int32_t>() + 3),
            s.y);
  const Batch none = makeBatch(data, {}, Device::cpu());
  EXPECT_EQ(none.inputs.shape(), (Shape{0, 6}));
  EXPECT_EQ(none.targets.shape(), (Shape{0}));
}

TEST(MakeBatch, RejectsIndicesOutsideTheDataset) {
  SyntheticTeacherDataset data(50, 6, 4, 9);
  for (int64_t bad : {int64_t{-1}, int64_t{50}}) {
    try {
      makeBatch(data, std::vector<int64_t>{0, bad});
      FAIL() << "no error for index " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(e.message().find(std::to_string(bad)), std::string::npos) << e.message();
    }
  }
}

TEST(MakeBatch, MovesToCudaWhenAvailable) {
  if (!cudaAvailable()) GTEST_SKIP() << "no CUDA device in this build or on this machine";
  SyntheticTeacherDataset data(50, 6, 4, 9);
  const std::vector<int64_t> picks{1, 2, 3, 4};
  const Batch batch = makeBatch(data, picks, Device::cuda(0));
  EXPECT_TRUE(batch.inputs.device().isCuda());
  EXPECT_TRUE(batch.targets.device().isCuda());
  EXPECT_EQ(batch.inputs.toFloatVector(), fetch(data, picks).x);
}

}  // namespace
}  // namespace ringmaster
