// Forward values and conventions of the layers against PyTorch's definitions. Reference numbers
// come from Debian's python3-torch 1.13 in float64.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/mlp.h"

namespace ringmaster {
namespace {

void expectNear(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

TEST(Linear, InitialisesLikeNnLinear) {
  Linear linear(400, 300, 5);
  const double bound = 1.0 / std::sqrt(400.0);
  for (auto* p : {&linear.weight(), &linear.bias()}) {
    std::vector<float> v = p->value.toFloatVector();
    double sum = 0.0, sum_sq = 0.0;
    for (float x : v) {
      ASSERT_LE(std::abs(x), bound);
      sum += x;
      sum_sq += x * x;
    }
    // U(-b, b) has mean 0 and variance b^2 / 3.
    const double n = static_cast<double>(v.size());
    EXPECT_NEAR(sum / n, 0.0, 5 * bound / std::sqrt(3 * n));
    EXPECT_NEAR(sum_sq / n, bound * bound / 3, 0.1 * bound * bound / 3);
  }
  EXPECT_EQ(linear.weight().value.shape(), (Shape{300, 400}));
}

TEST(Linear, ComputesXWTransposePlusBias) {
  Linear linear(2, 2, 1);
  linear.weight().value.copyFrom(Tensor::fromVector({1, 2, 3, 4}, {2, 2}));
  linear.bias().value.copyFrom(Tensor::fromVector({0.5f, -1}, {2}));
  Tensor y = linear.forward(Tensor::fromVector({1, 1, 2, -1}, {2, 2}));
  expectNear(y.toFloatVector(), {3.5, 6, 0.5, 1}, 0);
}

TEST(Linear, RejectsWrongInputWidth) {
  Linear linear(3, 2, 1);
  EXPECT_THROW(linear.forward(Tensor::zeros({2, 4})), Error);
}

TEST(Gelu, MatchesPyTorchExactForm) {
  GELU gelu;
  Tensor y = gelu.forward(Tensor::fromVector({-2, -0.5f, 0, 1, 3}, {1, 5}));
  expectNear(y.toFloatVector(),
             {-0.04550026389635842, -0.15426876936299344, 0.0, 0.841344746068543,
              2.99595030590511},
             1e-6);
}

TEST(LayerNorm, MatchesPyTorch) {
  LayerNorm norm(3);
  Tensor y = norm.forward(Tensor::fromVector({1, 2, 3, -1, 0.5f, 0}, {2, 3}));
  expectNear(y.toFloatVector(),
             {-1.2247356859083902, 0.0, 1.2247356859083902, -1.3362890288136269,
              1.0690312230509016, 0.2672578057627254},
             1e-5);
}

TEST(CrossEntropy, MatchesPyTorchMeanReduction) {
  SoftmaxCrossEntropy loss;
  double value = loss.forward(Tensor::fromVector({1, 2, 3, -1, 0.5f, 0}, {2, 3}),
                              Tensor::fromInts({2, 0}, {2}));
  EXPECT_NEAR(value, 1.2558682848905545, 1e-6);
}

TEST(CrossEntropy, RejectsLabelOutOfRange) {
  SoftmaxCrossEntropy loss;
  EXPECT_THROW(loss.forward(Tensor::zeros({1, 3}), Tensor::fromInts({3}, {1})), Error);
}

TEST(Dropout, ScalesKeptElementsAndIsReproducible) {
  Dropout a(0.25f, 42), b(0.25f, 42);
  Tensor x = Tensor::full({64, 64}, 1.0f);
  std::vector<float> ya = a.forward(x).toFloatVector();
  EXPECT_EQ(ya, b.forward(x).toFloatVector());
  int zeros = 0;
  for (float v : ya) {
    if (v == 0.0f) {
      zeros++;
    } else {
      EXPECT_FLOAT_EQ(v, 1.0f / 0.75f);
    }
  }
  // 4096 Bernoulli(0.25) draws: mean 1024, standard deviation ~28.
  EXPECT_NEAR(zeros, 1024, 5 * 28);
  // The next call draws a different mask.
  EXPECT_NE(ya, a.forward(x).toFloatVector());
}

TEST(Dropout, IsIdentityInEvalMode) {
  Dropout dropout(0.5f, 1);
  dropout.setTraining(false);
  Tensor x = Tensor::fromVector({1, 2, 3}, {1, 3});
  EXPECT_EQ(dropout.forward(x).toFloatVector(), x.toFloatVector());
}

TEST(Mlp, NamesParametersLikeNnSequential) {
  auto model = buildMlp({.layers = {784, 256, 256, 10}, .dropout = 0.1f});
  std::vector<std::string> names;
  for (auto& p : model->namedParameters()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias",
                                             "6.weight", "6.bias"}));
  EXPECT_EQ(model->parameterCount(), 784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
}

TEST(Mlp, SameSeedBuildsTheSameModel) {
  auto a = buildMlp({.layers = {8, 4, 2}, .seed = 7});
  auto b = buildMlp({.layers = {8, 4, 2}, .seed = 7});
  auto c = buildMlp({.layers = {8, 4, 2}, .seed = 8});
  auto pa = a->namedParameters(), pb = b->namedParameters(), pc = c->namedParameters();
  EXPECT_EQ(pa[0].parameter->value.toFloatVector(), pb[0].parameter->value.toFloatVector());
  EXPECT_NE(pa[0].parameter->value.toFloatVector(), pc[0].parameter->value.toFloatVector());
}

}  // namespace
}  // namespace ringmaster
