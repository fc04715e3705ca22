// Finite-difference checks of every module's backward and of the loss.
//
// Tensors are float32, so the checks use central differences with h = 3e-3 and compare against the
// analytic gradient with |numeric - analytic| <= 3e-3 + 2e-2 |analytic|. Why that is tight enough
// to catch a wrong backward yet loose enough for float32: the truncation error h^2/6 f''' is
// largest for the LayerNorm stack (measured ~2e-4 at this h, 2e-3 at h = 1e-2, shrinking as h^2);
// the rounding error is about eps_f32 * |L| / h with |L| <= ~10 here, i.e. ~2e-4; a real bug (a
// missing term, a transposed matrix, a wrong scale) moves the gradient by O(|analytic|), far above
// 2e-2 relative. ReLU's kink is avoided by keeping inputs at least 2h away from 0.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/random.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/mlp.h"
#include "tensor/ops.h"

namespace ringmaster {
namespace {

constexpr double kStep = 3e-3;
constexpr double kAbsTolerance = 3e-3;
constexpr double kRelTolerance = 2e-2;

std::vector<float> randomValues(int64_t n, uint64_t seed, double away_from_zero = 0.0) {
  Rng rng(seed);
  std::vector<float> values(n);
  for (float& v : values) {
    double x = rng.normal();
    if (std::abs(x) < away_from_zero) x = x < 0 ? x - away_from_zero : x + away_from_zero;
    v = static_cast<float>(x);
  }
  return values;
}

// L = sum(output * weights), accumulated in double.
double weightedSum(const Tensor& output, const std::vector<float>& weights) {
  std::vector<float> out = output.toFloatVector();
  double sum = 0.0;
  for (size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * weights[i];
  return sum;
}

struct Mismatch {
  double worst_error = 0.0;
  int failures = 0;
};

void expectClose(const std::string& what, int64_t index, double numeric, double analytic,
                 Mismatch& m) {
  const double error = std::abs(numeric - analytic);
  m.worst_error = std::max(m.worst_error, error);
  if (error > kAbsTolerance + kRelTolerance * std::abs(analytic)) {
    if (m.failures++ < 5) {
      ADD_FAILURE() << what << "[" << index << "]: numeric " << numeric << " analytic " << analytic;
    }
  }
}

// Checks d L / d input and d L / d every parameter of `module` by central differences, where
// L = sum(module(input) * r) for a fixed random r. `before_forward` resets per-call state
// (dropout).
void checkGradients(
    Module& module, const Shape& input_shape, uint64_t seed, double away_from_zero = 0.0,
    const std::function<void()>& before_forward = [] {}) {
  Tensor input =
      Tensor::fromVector(randomValues(shapeNumel(input_shape), seed, away_from_zero), input_shape);
  before_forward();
  Tensor output = module.forward(input);
  const std::vector<float> r = randomValues(output.numel(), seed + 1);
  module.zeroGrad();
  Tensor grad_input = module.backward(Tensor::fromVector(r, output.shape())).clone();
  std::vector<float> analytic_input = grad_input.toFloatVector();

  auto loss = [&] {
    before_forward();
    return weightedSum(module.forward(input), r);
  };

  Mismatch m;
  float* x = input.data<float>();
  for (int64_t i = 0; i < input.numel(); ++i) {
    const float saved = x[i];
    x[i] = static_cast<float>(saved + kStep);
    const double plus = loss();
    x[i] = static_cast<float>(saved - kStep);
    const double minus = loss();
    x[i] = saved;
    expectClose(module.typeName() + " input", i, (plus - minus) / (2 * kStep), analytic_input[i],
                m);
  }
  for (auto& named : module.namedParameters()) {
    std::vector<float> analytic = named.parameter->grad.toFloatVector();
    float* p = named.parameter->value.data<float>();
    for (int64_t i = 0; i < named.parameter->value.numel(); ++i) {
      const float saved = p[i];
      p[i] = static_cast<float>(saved + kStep);
      const double plus = loss();
      p[i] = static_cast<float>(saved - kStep);
      const double minus = loss();
      p[i] = saved;
      expectClose(module.typeName() + " " + named.name, i, (plus - minus) / (2 * kStep),
                  analytic[i], m);
    }
  }
  std::cout << module.typeName() << ": worst absolute error " << m.worst_error << "\n";
}

TEST(GradientCheck, Linear) {
  Linear linear(5, 3, 11);
  checkGradients(linear, {4, 5}, 1);
}

TEST(GradientCheck, LinearSingleRow) {
  Linear linear(1, 1, 12);
  checkGradients(linear, {1, 1}, 2);
}

TEST(GradientCheck, ReLU) {
  ReLU relu;
  checkGradients(relu, {3, 7}, 3, /*away_from_zero=*/2 * kStep);
}

TEST(GradientCheck, GELU) {
  GELU gelu;
  checkGradients(gelu, {3, 7}, 4);
}

TEST(GradientCheck, DropoutWithFixedMask) {
  Dropout dropout(0.3f, 99);
  checkGradients(dropout, {4, 6}, 5, 0.0, [&] { dropout.setCalls(0); });
}

TEST(GradientCheck, LayerNorm) {
  LayerNorm norm(6);
  // Non-trivial affine parameters, so that dgamma and dbeta are exercised in general position.
  auto params = norm.namedParameters();
  params[0].parameter->value.copyFrom(Tensor::fromVector(randomValues(6, 70), {6}));
  params[1].parameter->value.copyFrom(Tensor::fromVector(randomValues(6, 71), {6}));
  checkGradients(norm, {3, 6}, 6);
}

TEST(GradientCheck, MlpWithLayerNormGeluDropout) {
  MlpConfig config{.layers = {6, 5, 4, 3},
                   .activation = Activation::kGelu,
                   .dropout = 0.2f,
                   .layer_norm = true,
                   .seed = 3};
  auto model = buildMlp(config);
  ASSERT_EQ(model->size(), 9u);  // Linear LN GELU Dropout, Linear LN GELU Dropout, Linear
  checkGradients(*model, {4, 6}, 7, 0.0, [&] {
    for (size_t i = 0; i < model->size(); ++i) {
      if (auto* d = dynamic_cast<Dropout*>(&model->child(i))) d->setCalls(0);
    }
  });
}

TEST(GradientCheck, ResidualAroundLayerNormLinearGeluLinear) {
  auto branch = std::make_unique<Sequential>();
  branch->append(std::make_unique<LayerNorm>(5));
  branch->append(std::make_unique<Linear>(5, 5, 21));
  branch->append(std::make_unique<GELU>());
  branch->append(std::make_unique<Linear>(5, 5, 22));
  Residual residual(std::move(branch));
  checkGradients(residual, {3, 5}, 9);
}

// The residual_mlp model (nn/residual_mlp.cpp) as the registry builds it: input Linear, two
// pre-LayerNorm GELU blocks, output Linear.
TEST(GradientCheck, ResidualMlpModel) {
  ModelSpec spec{.kind = "residual_mlp",
                 .layers = {6, 5, 5, 5, 3},
                 .activation = ActivationKind::kGelu,
                 .layer_norm = true,
                 .seed = 4};
  auto model = buildModel(spec);
  ASSERT_EQ(model->size(), 4u);  // Linear, Residual, Residual, Linear
  checkGradients(*model, {4, 6}, 10);
}

TEST(GradientCheck, SoftmaxCrossEntropy) {
  const int64_t rows = 4, classes = 5;
  Tensor logits = Tensor::fromVector(randomValues(rows * classes, 8), {rows, classes});
  Tensor labels = Tensor::fromInts({0, 4, 2, 2}, {rows});
  SoftmaxCrossEntropy loss;
  loss.forward(logits, labels);
  std::vector<float> analytic = loss.backward().toFloatVector();
  Mismatch m;
  float* x = logits.data<float>();
  for (int64_t i = 0; i < logits.numel(); ++i) {
    const float saved = x[i];
    x[i] = static_cast<float>(saved + kStep);
    const double plus = loss.forward(logits, labels);
    x[i] = static_cast<float>(saved - kStep);
    const double minus = loss.forward(logits, labels);
    x[i] = saved;
    expectClose("cross-entropy logits", i, (plus - minus) / (2 * kStep), analytic[i], m);
  }
}

}  // namespace
}  // namespace ringmaster
