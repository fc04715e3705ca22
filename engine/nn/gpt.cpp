// The GPT model kind: its config from the spec, its validation, its description (Hugging Face
// GPT-2 parameter names and shapes, blocks, FLOPs, activation memory), its build and its
// registration.
#include "nn/gpt.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "core/random.h"
#include "nn/embedding.h"
#include "nn/transformer_block.h"

namespace ringmaster {

GptConfig gptConfig(const ModelSpec& spec) {
  return GptConfig{.vocab_size = spec.vocab_size,
                   .context = spec.context,
                   .layers = spec.block_count,
                   .heads = spec.heads,
                   .dim = spec.dim,
                   .dropout = static_cast<float>(spec.dropout),
                   .bias = spec.bias,
                   .seed = spec.seed};
}

namespace {

// The parameters of one transformer block, "h.<i>." prefixed, in GPT-2's order, as one of `tp`
// tensor-parallel ranks holds them (Megatron-LM): c_attn and c_fc column-parallel (their weights'
// columns and biases split), the projections row-parallel (their weights' rows split, their biases
// whole), the LayerNorms whole.
void blockParameters(const GptConfig& c, int64_t i, int64_t tp, std::vector<ParameterInfo>& out) {
  const std::string p = fmt::format("h.{}.", i);
  const int64_t C = c.dim;
  auto add = [&](const std::string& name, Shape shape, bool is_bias) {
    if (!is_bias || c.bias) out.push_back({p + name, std::move(shape)});
  };
  add("ln_1.weight", {C}, false);
  add("ln_1.bias", {C}, true);
  add("attn.c_attn.weight", {C, 3 * C / tp}, false);
  add("attn.c_attn.bias", {3 * C / tp}, true);
  add("attn.c_proj.weight", {C / tp, C}, false);
  add("attn.c_proj.bias", {C}, true);
  add("ln_2.weight", {C}, false);
  add("ln_2.bias", {C}, true);
  add("mlp.c_fc.weight", {C, 4 * C / tp}, false);
  add("mlp.c_fc.bias", {4 * C / tp}, true);
  add("mlp.c_proj.weight", {4 * C / tp, C}, false);
  add("mlp.c_proj.bias", {C}, true);
}

int64_t elements(const std::vector<ParameterInfo>& parameters, size_t from) {
  int64_t n = 0;
  for (size_t i = from; i < parameters.size(); ++i) n += shapeNumel(parameters[i].shape);
  return n;
}

}  // namespace

std::vector<ModelProblem> validateGpt(const GptConfig& c) {
  std::vector<ModelProblem> problems;
  auto positive = [&](int64_t value, const char* field) {
    if (value < 1)
      problems.push_back({fmt::format("model.{}", field),
                          fmt::format("expected a positive integer, got {}", value)});
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.context, "context");
  positive(c.layers, "layers");
  positive(c.heads, "heads");
  positive(c.dim, "dim");
  if (!problems.empty()) return problems;
  if (c.dim % c.heads != 0) {
    problems.push_back(
        {"model.heads", fmt::format("must divide model.dim ({}), got {}", c.dim, c.heads)});
    return problems;
  }
  return problems;
}

ModelDescription describeGpt(const GptConfig& c, DType compute, const TensorParallelShare& share) {
  const std::vector<ModelProblem> problems = validateGpt(c);
  RM_CHECK_ARG(problems.empty(), problems.empty() ? std::string()
                                                  : fmt::format("{}: {}", problems.front().path,
                                                                problems.front().message));
  const int64_t V = c.vocab_size, T = c.context, C = c.dim, H = c.heads, L = c.layers;
  // One of P tensor-parallel ranks (P divides the heads and the vocabulary: the spec's rule): the
  // heads, the MLP's hidden units and the vocabulary are split P ways; under sequence parallelism
  // the LayerNorms' inputs and the residual stream are split too (S ways, rounded up), else
  // whole (S = 1).
  const int64_t P = share.ranks;
  RM_CHECK_ARG(P >= 1 && H % P == 0 && V % P == 0,
               fmt::format("GPT tensor parallelism over {} ranks: they must divide model.heads "
                           "({}) and model.vocab_size ({})",
                           P, H, V));
  const int64_t S = share.sequence_parallel ? P : 1;
  auto seq = [S](int64_t n) { return (n + S - 1) / S; };
  const bool dropout = c.dropout > 0.0f;
  const auto f32 = static_cast<int64_t>(sizeof(float));
  // What the products' modules keep (their 16-bit operands under autocast): bytes an element.
  const auto lowp = static_cast<int64_t>(dtypeSize(compute));
  ModelDescription d;
  d.input_dtype = DType::kI32;

  // Embedding (vocabulary-parallel: wte's rows split): the token ids, and the dropout mask.
  d.parameters.push_back({"wte.weight", {V / P, C}});
  d.parameters.push_back({"wpe.weight", {T, C}});
  d.blocks.push_back(
      ModelBlock{.name = "embedding",
                 .first_child = 0,
                 .end_child = 1,
                 .parameters = elements(d.parameters, 0),
                 .input_shape = {T},
                 .output_shape = {T, C},
                 .activation_bytes_per_sample =
                     T * static_cast<int64_t>(sizeof(int32_t)) + (dropout ? seq(T * C) * f32 : 0),
                 // the gradient it receives (and its dropped-out copy)
                 .backward_bytes_per_sample = (dropout ? 2 : 1) * seq(T * C) * f32});

  // Blocks: what each module keeps for its backward (see the modules' saveContext). In fp32: the
  // LayerNorms' inputs and statistics (2 T C + 4 T). In the product's type: the inputs of c_attn
  // and c_fc (T C each, whole on every tensor-parallel rank), of attn.c_proj (T C / P) and
  // mlp.c_proj (4 T C / P), q, k, v (3 T C / P), the GELU's input (4 T C / P) and the
  // probabilities (H T T / P).
  int64_t block_bytes =
      seq(2 * T * C + 4 * T) * f32 + (2 * T * C + (12 * T * C + H * T * T) / P) * lowp;
  // With dropout: the fp32 masks of the attention and of the two residual branches, and the
  // dropped-out probabilities (attention keeps them besides probs).
  if (dropout) block_bytes += (H * T * T / P + seq(2 * T * C)) * f32 + H * T * T / P * lowp;
  // A block's backward at its most, as c_attn's backward returns (nn/attention.cpp): in fp32 the
  // block's incoming gradient and dh (T C each, residual stream), attn.c_proj's dy and c_attn's dx
  // (T C each, whole), attn.c_proj's dx, dv, dq, dk (T C / P each), dqkv (3 T C / P), with
  // dattended and dscores (H T T / P, and dprobs beside them under dropout); under autocast also
  // the 16-bit dy (T C) and dscores (H T T / P) and c_attn's 16-bit dqkv (3 T C / P).
  int64_t block_backward =
      (seq(2 * T * C) + 2 * T * C + (7 * T * C + (dropout ? 3 : 2) * H * T * T) / P) * f32;
  if (lowp < f32) block_backward += (T * C + (3 * T * C + H * T * T) / P) * lowp;
  for (int64_t i = 0; i < L; ++i) {
    const size_t first = d.parameters.size();
    blockParameters(c, i, P, d.parameters);
    d.blocks.push_back(ModelBlock{.name = fmt::format("h.{}", i),
                                  .first_child = static_cast<size_t>(i + 1),
                                  .end_child = static_cast<size_t>(i + 2),
                                  .parameters = elements(d.parameters, first),
                                  .input_shape = {T, C},
                                  .output_shape = {T, C},
                                  .activation_bytes_per_sample = block_bytes,
                                  .backward_bytes_per_sample = block_backward,
                                  .keeps_input = true});  // ln_1 keeps it
  }

  // Head: ln_f, then the logits (their vocabulary slice) through the embedding's wte, which it
  // declares tied (FSDP keeps both in one unit, a pipeline a copy on the last stage).
  const size_t first = d.parameters.size();
  d.parameters.push_back({"ln_f.weight", {C}});
  if (c.bias) d.parameters.push_back({"ln_f.bias", {C}});
  d.blocks.push_back(ModelBlock{
      .name = "head",
      .first_child = static_cast<size_t>(L + 1),
      .end_child = static_cast<size_t>(L + 2),
      .parameters = elements(d.parameters, first),
      .input_shape = {T, C},
      .output_shape = {T, V / P},
      // ln_f's input and statistics; its output, the product's input
      .activation_bytes_per_sample = seq(T * C + 2 * T) * f32 + T * C * lowp,
      // the product's dx and ln_f's (the logits' gradient is the
      // loss's), and under autocast the 16-bit logits' gradient
      .backward_bytes_per_sample = (T * C + seq(T * C)) * f32 + (lowp < f32 ? T * V / P * lowp : 0),
      .keeps_input = true,  // ln_f keeps it
      .tied_parameters = {"wte.weight"}});

  for (const ModelBlock& block : d.blocks)
    d.activation_bytes_per_sample += block.activation_bytes_per_sample;
  const int64_t n_without_positions = d.parameterCount() - T * C;
  d.flops_per_sample = T * (2 * n_without_positions + 4 * L * T * C / P);
  return d;
}

std::unique_ptr<Sequential> buildGpt(const GptConfig& c, Device device) {
  ModelDescription description = describeGpt(c, DType::kF32);  // validates
  // Every weight and dropout stream from its own seed, derived from (model.seed, role, block).
  auto seedOf = [&](uint64_t role, int64_t block) {
    return mix64(mix64(c.seed * 0x100000001B3ull + role) ^ static_cast<uint64_t>(block + 1));
  };
  constexpr double kStd = 0.02;
  const double proj_std = kStd / std::sqrt(2.0 * static_cast<double>(c.layers));

  auto model = std::make_unique<Sequential>();
  auto embedding =
      std::make_unique<GptEmbedding>(GptEmbedding::Options{.vocab = c.vocab_size,
                                                           .context = c.context,
                                                           .dim = c.dim,
                                                           .dropout = c.dropout,
                                                           .token_init = {seedOf(1, -1), kStd},
                                                           .position_init = {seedOf(2, -1), kStd},
                                                           .dropout_seed = seedOf(3, -1)},
                                     device);
  Parameter* wte = &embedding->tokenEmbedding();
  model->append(std::move(embedding), "");
  for (int64_t i = 0; i < c.layers; ++i) {
    model->append(std::make_unique<TransformerBlock>(
                      TransformerBlockOptions{.dim = c.dim,
                                              .heads = c.heads,
                                              .head_dim = c.headDim(),
                                              .hidden = 4 * c.dim,
                                              .dropout = c.dropout,
                                              .bias = c.bias,
                                              .init = {seedOf(4, i), kStd},
                                              .proj_init = {seedOf(5, i), proj_std},
                                              .dropout_seed = seedOf(6, i)},
                      device),
                  fmt::format("h.{}", i));
  }
  model->append(std::make_unique<LmHead>(c.dim, c.bias, wte, device), "");
  model->setBlocks(std::move(description.blocks));
  return model;
}

ModelDefinition gptModel() {
  return ModelDefinition{
      .kind = "gpt",
      .summary =
          "GPT-2: token and position embedding, model.layers pre-LayerNorm transformer "
          "blocks, LM head tied to the embedding",
      .validate = [](const ModelSpec& spec) { return validateGpt(gptConfig(spec)); },
      .describe = [](const ModelSpec& spec,
                     DType compute) { return describeGpt(gptConfig(spec), compute); },
      .describe_share =
          [](const ModelSpec& spec, DType compute, const TensorParallelShare& share) {
            return describeGpt(gptConfig(spec), compute, share);
          },
      .build = [](const ModelSpec& spec,
                  Device device) { return buildGpt(gptConfig(spec), device); }};
}

}  // namespace ringmaster
