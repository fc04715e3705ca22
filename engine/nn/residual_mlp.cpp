// Model kind "residual_mlp": an input Linear, residual blocks x + Linear(act(Linear([LN](x)))) of
// one width, and an output Linear. model.layers is {input, width, width, ..., width, output}: one
// residual block per repeated width after the first. Each layer and each residual block is a block.
// It has no dropout (a Dropout inside a block would escape the checkpoint's dropout state).
#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"
#include "nn/layers.h"
#include "nn/model.h"

namespace ringmaster {

namespace {

struct Widths {
  int64_t input = 0, width = 0, output = 0, residual_blocks = 0;
};

Widths shapeOf(const ModelSpec& spec) {
  const auto& w = spec.layers;
  return {w.front(), w[1], w.back(), static_cast<int64_t>(w.size()) - 3};
}

std::vector<ModelProblem> validate(const ModelSpec& spec) {
  std::vector<ModelProblem> problems;
  if (spec.layers.size() < 3) {
    problems.push_back({"model.layers", fmt::format("residual_mlp needs at least 3 widths (input, "
                                                    "width, output), got {}",
                                                    spec.layers.size())});
    return problems;
  }
  for (size_t i = 2; i + 1 < spec.layers.size(); ++i) {
    if (spec.layers[i] != spec.layers[1]) {
      problems.push_back({fmt::format("model.layers[{}]", i),
                          fmt::format("residual_mlp's hidden widths must all equal "
                                      "model.layers[1] ({}), got {}",
                                      spec.layers[1], spec.layers[i])});
    }
  }
  if (spec.dropout != 0)
    problems.push_back({"model.dropout", "residual_mlp has no dropout: must be 0"});
  return problems;
}

// The branch's children: [LayerNorm] Linear activation Linear.
size_t firstLinearInBranch(const ModelSpec& spec) {
  return spec.layer_norm ? 1 : 0;
}

// Under a 16-bit `compute` the Linears keep their inputs in 16-bit (nn/autocast.h).
ModelDescription describe(const ModelSpec& spec, DType compute) {
  const Widths s = shapeOf(spec);
  const auto linear_input = static_cast<int64_t>(dtypeSize(compute));  // bytes an element
  ModelDescription d;
  auto linear = [&](const std::string& prefix, int64_t in, int64_t out) {
    d.parameters.push_back({prefix + "weight", {out, in}});
    d.parameters.push_back({prefix + "bias", {out}});
    d.flops_per_sample += 2 * in * out;
    return out * in + out;
  };
  // Per sample, what a block's forward keeps for the backward: floats and Linear inputs.
  // Its backward at its most: the float32 gradient arriving and the one returned (the widest of
  // its ends, twice); zb_h1: each Linear's output gradient (linear_outputs elements) kept for its
  // weights.
  auto add = [&](ModelBlock block, int64_t kept_floats, int64_t linear_inputs,
                 int64_t linear_outputs) {
    block.activation_bytes_per_sample =
        kept_floats * static_cast<int64_t>(sizeof(float)) + linear_inputs * linear_input;
    const int64_t widest = std::max(shapeNumel(block.input_shape), shapeNumel(block.output_shape));
    block.backward_bytes_per_sample = 2 * widest * static_cast<int64_t>(sizeof(float));
    block.deferred_weight_bytes_per_sample = linear_outputs * linear_input;
    d.activation_bytes_per_sample += block.activation_bytes_per_sample;
    d.blocks.push_back(std::move(block));
  };
  add({.name = "input",
       .first_child = 0,
       .end_child = 1,
       .parameters = linear("0.", s.input, s.width),
       .input_shape = {s.input},
       .output_shape = {s.width},
       .keeps_input = compute == DType::kF32},  // a Linear keeps its input uncast in float32
      0, s.input, s.width);                     // the Linear's input
  for (int64_t b = 0; b < s.residual_blocks; ++b) {
    const size_t child = static_cast<size_t>(1 + b);
    ModelBlock block{.name = fmt::format("block.{}", b),
                     .first_child = child,
                     .end_child = child + 1,
                     .input_shape = {s.width},
                     .output_shape = {s.width},
                     // the LayerNorm keeps its input; the Linear, uncast in float32
                     .keeps_input = spec.layer_norm || compute == DType::kF32};
    int64_t kept_floats = 0;
    if (spec.layer_norm) {
      d.parameters.push_back({fmt::format("{}.0.weight", child), {s.width}});
      d.parameters.push_back({fmt::format("{}.0.bias", child), {s.width}});
      block.parameters += 2 * s.width;
      kept_floats += s.width + 2;  // input, mean, rstd
    }
    const size_t l = firstLinearInBranch(spec);
    block.parameters += linear(fmt::format("{}.{}.", child, l), s.width, s.width);
    block.parameters += linear(fmt::format("{}.{}.", child, l + 2), s.width, s.width);
    kept_floats += s.width;                                        // the activation's input
    add(std::move(block), kept_floats, 2 * s.width, 2 * s.width);  // and both Linears' inputs
  }
  const size_t last = static_cast<size_t>(1 + s.residual_blocks);
  add({.name = "output",
       .first_child = last,
       .end_child = last + 1,
       .parameters = linear(fmt::format("{}.", last), s.width, s.output),
       .input_shape = {s.width},
       .output_shape = {s.output},
       .keeps_input = compute == DType::kF32},
      0, s.width, s.output);
  return d;
}

// Linear k of the model (0: input, 1 + 2b and 2 + 2b: block b's, last: output) is seeded from
// (seed, k), so the same spec always builds the same model.
std::unique_ptr<Sequential> build(const ModelSpec& spec, Device device) {
  const Widths s = shapeOf(spec);
  uint64_t k = 0;
  auto seed = [&] { return mix64(spec.seed * 0x100000001B3ull + k++); };
  auto model = std::make_unique<Sequential>();
  model->append(std::make_unique<Linear>(s.input, s.width, seed(), device));
  for (int64_t b = 0; b < s.residual_blocks; ++b) {
    auto branch = std::make_unique<Sequential>();
    if (spec.layer_norm) branch->append(std::make_unique<LayerNorm>(s.width, 1e-5f, device));
    branch->append(std::make_unique<Linear>(s.width, s.width, seed(), device));
    if (spec.activation == ActivationKind::kGelu) {
      branch->append(std::make_unique<GELU>());
    } else {
      branch->append(std::make_unique<ReLU>());
    }
    branch->append(std::make_unique<Linear>(s.width, s.width, seed(), device));
    model->append(std::make_unique<Residual>(std::move(branch)));
  }
  model->append(std::make_unique<Linear>(s.width, s.output, seed(), device));
  model->setBlocks(describe(spec, DType::kF32).blocks);
  return model;
}

}  // namespace

ModelDefinition residualMlpModel() {
  return ModelDefinition{
      .kind = "residual_mlp",
      .summary = "input Linear, [LayerNorm] residual blocks of one width, output Linear",
      .validate = validate,
      .describe = describe,
      .build = build};
}

}  // namespace ringmaster
