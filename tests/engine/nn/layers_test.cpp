// Forward values and conventions of the layers against PyTorch's definitions. Reference numbers
// come from Debian's python3-torch 1.13 in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"
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
             {-0.04550026389635842, -0.15426876936299344, 0.0, 0.841344746068543, 2.99595030590511},
             1e-6);
}

TEST(LayerNorm, MatchesPyTorch) {
  LayerNorm norm(3);
  Tensor y = norm.forward(Tensor::fromVector({1, 2, 3, -1, 0.5f, 0}, {2, 3}));
  expectNear(y.toFloatVector(),
             {-1.2247356859083902, 0.0, 1.2247356859083902, -1.3362890288136269, 1.0690312230509016,
              0.2672578057627254},
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
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias", "6.weight",
                                             "6.bias"}));
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

// ---------------------------------------------------------------------------------------------
// Issue 36: a model whose input is data computes no input gradient (the first Linear's dx = dy W
// is left out, as PyTorch leaves it out for an input without requires_grad), and every parameter
// gradient stays the same, bit for bit: over one micro-batch and three accumulated, through the
// plain backward, the split one (backwardInput, then backwardWeights: zero-bubble pipelines) and
// activation checkpointing, for the MLP variants (ReLU, GELU + LayerNorm + dropout).

enum class BackwardPath { kPlain, kSplit, kCheckpointed };

struct GradientRun {
  std::vector<std::vector<float>> gradients;  // per parameter, in namedParameters() order
  int input_gradients = 0;                    // micro-batches whose backward returned a dx
};

GradientRun accumulateGradients(const MlpConfig& config, bool input_gradient_needed,
                                int micro_batches, BackwardPath path) {
  auto model = buildMlp(config);
  model->setInputGradientNeeded(input_gradient_needed);
  if (path == BackwardPath::kCheckpointed) model->setActivationCheckpointing(true);
  model->zeroGrad();
  SoftmaxCrossEntropy loss;
  GradientRun run;
  const int64_t batch = 5, features = config.layers.front(), classes = config.layers.back();
  for (int micro = 0; micro < micro_batches; ++micro) {
    Rng rng(100 + micro);
    std::vector<float> x(batch * features);
    for (float& v : x) v = static_cast<float>(rng.normal());
    std::vector<int32_t> y(batch);
    for (int32_t& v : y) v = static_cast<int32_t>(rng.below(classes));
    loss.forward(model->forward(Tensor::fromVector(x, {batch, features})),
                 Tensor::fromInts(y, {batch}));
    Tensor grad = loss.backward(1.0f / static_cast<float>(micro_batches));
    if (path == BackwardPath::kSplit) {
      for (size_t m = model->size(); m-- > 0;) grad = model->backwardInputChild(m, grad);
      for (size_t m = model->size(); m-- > 0;) model->child(m).backwardWeights();
    } else {
      grad = model->backward(grad);
    }
    if (grad.defined()) {
      EXPECT_EQ(grad.shape(), (Shape{batch, features}));
      ++run.input_gradients;
    }
  }
  for (auto& named : model->namedParameters())
    run.gradients.push_back(named.parameter->grad.toFloatVector());
  return run;
}

TEST(Mlp, ModelOnDataComputesNoInputGradientAndTheSameParameterGradientsIssue36) {
  const std::vector<MlpConfig> configs{{.layers = {12, 16, 16, 4}, .seed = 3},
                                       {.layers = {9, 8, 8, 8, 3},
                                        .activation = Activation::kGelu,
                                        .dropout = 0.25f,
                                        .layer_norm = true,
                                        .seed = 4}};
  for (const MlpConfig& config : configs) {
    for (const int micro_batches : {1, 3}) {
      for (const BackwardPath path :
           {BackwardPath::kPlain, BackwardPath::kSplit, BackwardPath::kCheckpointed}) {
        const std::string where =
            fmt::format("{} widths, {} micro-batch(es), path {}", config.layers.size(),
                        micro_batches, static_cast<int>(path));
        const GradientRun reference = accumulateGradients(config, true, micro_batches, path);
        const GradientRun on_data = accumulateGradients(config, false, micro_batches, path);
        EXPECT_EQ(reference.input_gradients, micro_batches) << where;
        EXPECT_EQ(on_data.input_gradients, 0) << where;
        ASSERT_EQ(on_data.gradients.size(), reference.gradients.size()) << where;
        for (size_t p = 0; p < reference.gradients.size(); ++p) {
          const std::vector<float>& want = reference.gradients[p];
          const std::vector<float>& got = on_data.gradients[p];
          ASSERT_EQ(got.size(), want.size()) << where;
          EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
              << where << ", parameter " << p;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ringmaster
