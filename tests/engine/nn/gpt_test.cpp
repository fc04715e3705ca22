// Tests of the GPT's modules and model on the CPU: finite-difference checks of the embedding,
// attention, transformer block, tied LM head and the whole model, the description against the
// build (Hugging Face names and shapes, blocks, FLOPs), and the initialisation.
//
// Finite differences in float32: central differences with h = 3e-3 against the analytic gradient,
// |numeric - analytic| <= 3e-3 + 2e-2 |analytic|, as gradient_check_test.cpp argues for the MLP's
// layers: the truncation error h^2/6 f''' is ~1e-4 here (LayerNorm and softmax are the curviest
// parts), the rounding error eps_f32 |L| / h ~ 2e-4 for |L| <= ~10, while a wrong backward (a
// missing term, a transposed product, a wrong scale, a lost tie) is off by O(|analytic|).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>

#include "core/error.h"
#include "core/random.h"
#include "nn/attention.h"
#include "nn/embedding.h"
#include "nn/gpt.h"
#include "nn/transformer_block.h"
#include "tensor/ops.h"

namespace ringmaster {
namespace {

constexpr double kStep = 3e-3;
constexpr double kAbsTolerance = 3e-3;
constexpr double kRelTolerance = 2e-2;

std::vector<float> randomValues(int64_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> values(n);
  for (float& v : values) v = static_cast<float>(scale * rng.normal());
  return values;
}

double weightedSum(const Tensor& output, const std::vector<float>& weights) {
  std::vector<float> out = output.toFloatVector();
  double sum = 0.0;
  for (size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) * weights[i];
  return sum;
}

struct Worst {
  double error = 0;
  int failures = 0;
};

void expectClose(const std::string& what, int64_t index, double numeric, double analytic,
                 Worst& w) {
  const double error = std::abs(numeric - analytic);
  w.error = std::max(w.error, error);
  if (error > kAbsTolerance + kRelTolerance * std::abs(analytic) && w.failures++ < 5)
    ADD_FAILURE() << what << "[" << index << "]: numeric " << numeric << " analytic " << analytic;
}

// Central differences of L = sum(module(input) * r) in every float element of `input` (when it is
// float) and of every parameter, against module.backward.
void checkGradients(Module& module, Tensor input, uint64_t seed) {
  Tensor output = module.forward(input);
  const std::vector<float> r = randomValues(output.numel(), seed);
  module.zeroGrad();
  const Tensor grad_input = module.backward(Tensor::fromVector(r, output.shape()));
  auto loss = [&] { return weightedSum(module.forward(input), r); };
  auto perturb = [&](float* values, int64_t n, const std::vector<float>& analytic,
                     const std::string& what, Worst& w) {
    for (int64_t i = 0; i < n; ++i) {
      const float saved = values[i];
      values[i] = static_cast<float>(saved + kStep);
      const double plus = loss();
      values[i] = static_cast<float>(saved - kStep);
      const double minus = loss();
      values[i] = saved;
      expectClose(what, i, (plus - minus) / (2 * kStep), analytic[i], w);
    }
  };
  Worst worst;
  if (input.dtype() == DType::kF32) {
    ASSERT_TRUE(grad_input.defined());
    perturb(input.data<float>(), input.numel(), grad_input.toFloatVector(),
            module.typeName() + " input", worst);
  }
  for (NamedParameter& named : module.namedParameters()) {
    const std::vector<float> analytic = named.parameter->grad.toFloatVector();
    perturb(named.parameter->value.data<float>(), named.parameter->value.numel(), analytic,
            module.typeName() + " " + named.name, worst);
  }
  std::cout << module.typeName() << ": worst absolute error " << worst.error << "\n";
}

Tensor randomInput(const Shape& shape, uint64_t seed) {
  return Tensor::fromVector(randomValues(shapeNumel(shape), seed), shape);
}

Tensor randomIds(const Shape& shape, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> ids(shapeNumel(shape));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.below(vocab));
  return Tensor::fromInts(ids, shape);
}

// Biases and LayerNorm parameters away from their 0 / 1 initialisation, so that every gradient
// is exercised in general position.
void randomiseParameters(Module& module, uint64_t seed, double scale = 0.3) {
  for (NamedParameter& named : module.namedParameters()) {
    const std::vector<float> values = randomValues(named.parameter->value.numel(), seed++, scale);
    std::vector<float> current = named.parameter->value.toFloatVector();
    for (size_t i = 0; i < values.size(); ++i) current[i] += values[i];
    named.parameter->value.copyFrom(Tensor::fromVector(current, named.parameter->value.shape()));
  }
}

TEST(GptGradientCheck, Conv1D) {
  Conv1D layer(5, 7, true, {3, 0.5});
  randomiseParameters(layer, 1);
  checkGradients(layer, randomInput({2, 3, 5}, 2), 3);
}

TEST(GptGradientCheck, Embedding) {
  GptEmbedding embedding(
      {.vocab = 7, .context = 6, .dim = 4, .token_init = {1, 0.5}, .position_init = {2, 0.5}});
  // Repeated ids, and fewer tokens than the context.
  checkGradients(embedding, Tensor::fromInts({1, 3, 3, 0, 6, 1, 1, 2, 5, 3}, {2, 5}), 4);
}

TEST(GptGradientCheck, CausalSelfAttention) {
  CausalSelfAttention attention(
      {.dim = 8, .heads = 2, .head_dim = 4, .init = {5, 0.4}, .proj_init = {6, 0.4}});
  randomiseParameters(attention, 7, 0.1);
  checkGradients(attention, randomInput({2, 5, 8}, 8), 9);
}

TEST(GptGradientCheck, AttentionWithOneHeadAndOneToken) {
  CausalSelfAttention attention(
      {.dim = 3, .heads = 1, .head_dim = 3, .init = {10, 0.4}, .proj_init = {11, 0.4}});
  checkGradients(attention, randomInput({2, 1, 3}, 12), 13);
}

TEST(GptGradientCheck, TransformerBlock) {
  TransformerBlock block({.dim = 8,
                          .heads = 2,
                          .head_dim = 4,
                          .hidden = 32,
                          .init = {14, 0.3},
                          .proj_init = {15, 0.3}});
  randomiseParameters(block, 16, 0.1);
  checkGradients(block, randomInput({2, 4, 8}, 17), 18);
}

TEST(GptGradientCheck, BlockWithoutBiases) {
  TransformerBlock block({.dim = 4,
                          .heads = 2,
                          .head_dim = 2,
                          .hidden = 16,
                          .bias = false,
                          .init = {19, 0.3},
                          .proj_init = {20, 0.3}});
  for (const NamedParameter& named : block.namedParameters())
    EXPECT_EQ(named.name.find("bias"), std::string::npos) << named.name;
  checkGradients(block, randomInput({1, 3, 4}, 21), 22);
}

TEST(GptGradientCheck, TiedHead) {
  Parameter wte = makeParameter(Tensor::fromVector(randomValues(9 * 6, 23, 0.5), {9, 6}));
  LmHead head(6, true, &wte);
  randomiseParameters(head, 24, 0.2);
  checkGradients(head, randomInput({2, 3, 6}, 25), 26);
  // The tied weight's gradient: dL/dwte = dlogits^T ln_f(x), checked by differences as well.
  const Tensor input = randomInput({2, 3, 6}, 27);
  const Tensor logits = head.forward(input);
  const std::vector<float> r = randomValues(logits.numel(), 28);
  head.zeroGrad();
  ops::fill(wte.grad, 0.0f);
  head.backward(Tensor::fromVector(r, logits.shape()));
  const std::vector<float> analytic = wte.grad.toFloatVector();
  Worst worst;
  float* w = wte.value.data<float>();
  for (int64_t i = 0; i < wte.value.numel(); ++i) {
    const float saved = w[i];
    w[i] = saved + static_cast<float>(kStep);
    const double plus = weightedSum(head.forward(input), r);
    w[i] = saved - static_cast<float>(kStep);
    const double minus = weightedSum(head.forward(input), r);
    w[i] = saved;
    expectClose("wte", i, (plus - minus) / (2 * kStep), analytic[i], worst);
  }
  EXPECT_TRUE(head.namedParameters().size() == 2);  // ln_f only: the tie is the embedding's
}

GptConfig smallConfig() {
  return GptConfig{.vocab_size = 11, .context = 6, .layers = 2, .heads = 2, .dim = 8, .seed = 5};
}

// The whole model: wte's gradient is the sum of the embedding's and the head's.
TEST(GptGradientCheck, WholeModelWithTiedEmbedding) {
  std::unique_ptr<Sequential> model = buildGpt(smallConfig());
  randomiseParameters(*model, 30, 0.2);
  checkGradients(*model, randomIds({2, 6}, 11, 31), 32);
}

TEST(Gpt, DescriptionMatchesTheBuild) {
  for (bool bias : {true, false}) {
    GptConfig config = smallConfig();
    config.bias = bias;
    const ModelDescription d = describeGpt(config);
    std::unique_ptr<Sequential> model = buildGpt(config);
    const std::vector<NamedParameter> built = model->namedParameters();
    ASSERT_EQ(built.size(), d.parameters.size());
    for (size_t i = 0; i < built.size(); ++i) {
      EXPECT_EQ(built[i].name, d.parameters[i].name);
      EXPECT_EQ(built[i].parameter->value.shape(), d.parameters[i].shape) << built[i].name;
    }
    EXPECT_EQ(model->blocks(), d.blocks);
    EXPECT_EQ(model->size(), 4u);  // embedding, h.0, h.1, head
    EXPECT_EQ(d.blocks.front().name, "embedding");
    EXPECT_EQ(d.blocks[1].name, "h.0");
    EXPECT_EQ(d.blocks.back().name, "head");
    EXPECT_EQ(d.input_dtype, DType::kI32);
    EXPECT_EQ(d.inputShape(), (Shape{6}));
    EXPECT_EQ(d.outputShape(), (Shape{6, 11}));
    EXPECT_EQ(model->forward(randomIds({3, 6}, 11, 1)).shape(), (Shape{3, 6, 11}));
  }
  const std::vector<NamedParameter> names = buildGpt(smallConfig())->namedParameters();
  const std::vector<std::string> expected = {"wte.weight",
                                             "wpe.weight",
                                             "h.0.ln_1.weight",
                                             "h.0.ln_1.bias",
                                             "h.0.attn.c_attn.weight",
                                             "h.0.attn.c_attn.bias",
                                             "h.0.attn.c_proj.weight",
                                             "h.0.attn.c_proj.bias",
                                             "h.0.ln_2.weight",
                                             "h.0.ln_2.bias",
                                             "h.0.mlp.c_fc.weight",
                                             "h.0.mlp.c_fc.bias",
                                             "h.0.mlp.c_proj.weight",
                                             "h.0.mlp.c_proj.bias"};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(names[i].name, expected[i]);
  EXPECT_EQ(names.back().name, "ln_f.bias");
}

// GPT-2 small (124M): the well-known parameter count and the PaLM FLOPs per token.
TEST(Gpt, Gpt2SmallCountsAndFlops) {
  const GptConfig config{
      .vocab_size = 50257, .context = 1024, .layers = 12, .heads = 12, .dim = 768};
  const ModelDescription d = describeGpt(config);
  EXPECT_EQ(d.parameterCount(), 124439808);
  const int64_t n = d.parameterCount() - 1024 * 768;  // without the position embedding
  // Training = 3x forward = 6N + 12 L T C per token.
  EXPECT_EQ(3 * d.flops_per_sample, 1024 * (6 * n + 12 * 12 * 1024 * 768));
  EXPECT_GT(d.activation_bytes_per_sample, 0);
}

TEST(Gpt, InitialisationIsGpt2s) {
  GptConfig config = smallConfig();
  config.vocab_size = 512;
  config.dim = 64;
  config.heads = 4;
  std::unique_ptr<Sequential> model = buildGpt(config);
  auto stddev = [](const Tensor& t) {
    double sum = 0, squares = 0;
    for (float v : t.toFloatVector()) {
      sum += v;
      squares += double(v) * v;
    }
    const double n = static_cast<double>(t.numel());
    return std::sqrt(squares / n - (sum / n) * (sum / n));
  };
  for (NamedParameter& p : model->namedParameters()) {
    const Tensor& v = p.parameter->value;
    if (p.name.ends_with(".bias")) {
      for (float x : v.toFloatVector()) ASSERT_EQ(x, 0.0f) << p.name;
    } else if (p.name.find("ln_") != std::string::npos) {
      for (float x : v.toFloatVector()) ASSERT_EQ(x, 1.0f) << p.name;
    } else if (p.name.find("c_proj") != std::string::npos) {
      EXPECT_NEAR(stddev(v), 0.02 / std::sqrt(4.0), 0.002) << p.name;
    } else {
      EXPECT_NEAR(stddev(v), 0.02, 0.002) << p.name;
    }
  }
  // Deterministic from the seed; another seed gives other weights.
  std::unique_ptr<Sequential> again = buildGpt(config);
  EXPECT_EQ(model->namedParameters()[2 + 2].parameter->value.toFloatVector(),
            again->namedParameters()[2 + 2].parameter->value.toFloatVector());
  config.seed += 1;
  EXPECT_NE(model->namedParameters()[0].parameter->value.toFloatVector(),
            buildGpt(config)->namedParameters()[0].parameter->value.toFloatVector());
}

TEST(Gpt, BadInputIsRefused) {
  std::unique_ptr<Sequential> model = buildGpt(smallConfig());
  EXPECT_THROW(model->forward(Tensor::fromInts({0, 11}, {1, 2})), Error);  // id past the vocab
  EXPECT_THROW(model->forward(randomIds({1, 7}, 11, 1)), Error);           // longer than context
  EXPECT_THROW(model->forward(randomInput({1, 6}, 1)), Error);             // floats, not ids
  GptConfig bad = smallConfig();
  bad.heads = 3;
  ASSERT_EQ(validateGpt(bad).size(), 1u);
  EXPECT_EQ(validateGpt(bad)[0].path, "model.heads");
  EXPECT_EQ(validateGpt(bad)[0].message, "must divide model.dim (8), got 3");
}

}  // namespace
}  // namespace ringmaster
