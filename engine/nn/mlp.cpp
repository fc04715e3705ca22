// buildMlp: the nn.Sequential an MLP spec describes, its description, and its registration.
#include "nn/mlp.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"

namespace ringmaster {

MlpConfig mlpConfig(const ModelSpec& spec) {
  return MlpConfig{.layers = spec.layers,
                   .activation = spec.activation == ActivationKind::kGelu ? Activation::kGelu
                                                                          : Activation::kRelu,
                   .dropout = static_cast<float>(spec.dropout),
                   .layer_norm = spec.layer_norm,
                   .seed = spec.seed};
}

ModelDescription describeMlp(const MlpConfig& config, DType compute) {
  RM_CHECK_ARG(config.layers.size() >= 2,
               fmt::format("an MLP needs at least 2 widths, got {}", config.layers.size()));
  ModelDescription d;
  const size_t linear_count = config.layers.size() - 1;
  size_t child = 0;
  for (size_t i = 0; i < linear_count; ++i) {
    const int64_t in = config.layers[i], out = config.layers[i + 1];
    ModelBlock block{.name = fmt::format("layer.{}", i),
                     .first_child = child,
                     .parameters = out * in + out,
                     .input_shape = {in},
                     .output_shape = {out}};
    d.parameters.push_back({fmt::format("{}.weight", child), {out, in}});
    d.parameters.push_back({fmt::format("{}.bias", child), {out}});
    d.flops_per_sample += 2 * in * out;
    // Per sample, what the forward keeps: the Linear's input (16-bit under autocast), then floats.
    const int64_t linear_input_bytes = in * static_cast<int64_t>(dtypeSize(compute));
    int64_t kept_floats = 0;
    ++child;
    if (i + 1 < linear_count) {
      if (config.layer_norm) {
        d.parameters.push_back({fmt::format("{}.weight", child), {out}});
        d.parameters.push_back({fmt::format("{}.bias", child), {out}});
        block.parameters += 2 * out;
        kept_floats += out + 2;  // input, mean, rstd
        ++child;
      }
      kept_floats += out;  // the activation's input
      ++child;
      if (config.dropout > 0.0f) {
        kept_floats += out;  // the mask
        ++child;
      }
    }
    block.end_child = child;
    block.activation_bytes_per_sample =
        linear_input_bytes + kept_floats * static_cast<int64_t>(sizeof(float));
    // Its backward at its most: the float32 gradient arriving and the one each module returns
    // from it (out floats each), the Linear's input gradient last (in floats).
    block.backward_bytes_per_sample =
        (out + std::max(out, in)) * static_cast<int64_t>(sizeof(float));
    // zb_h1: the Linear keeps its output's gradient (16-bit under autocast) for its weights.
    block.deferred_weight_bytes_per_sample = out * static_cast<int64_t>(dtypeSize(compute));
    block.keeps_input = compute == DType::kF32;  // the Linear's input, uncast
    d.activation_bytes_per_sample += block.activation_bytes_per_sample;
    d.blocks.push_back(std::move(block));
  }
  return d;
}

std::unique_ptr<Sequential> buildMlp(const MlpConfig& config, Device device) {
  ModelDescription description = describeMlp(config, DType::kF32);  // checks the widths
  auto model = std::make_unique<Sequential>();
  const size_t linear_count = config.layers.size() - 1;
  for (size_t i = 0; i < linear_count; ++i) {
    const uint64_t layer_seed = mix64(config.seed * 0x100000001B3ull + i);
    model->append(
        std::make_unique<Linear>(config.layers[i], config.layers[i + 1], layer_seed, device));
    if (i + 1 == linear_count) break;  // logits: no activation after the last layer
    if (config.layer_norm)
      model->append(std::make_unique<LayerNorm>(config.layers[i + 1], 1e-5f, device));
    if (config.activation == Activation::kGelu) {
      model->append(std::make_unique<GELU>());
    } else {
      model->append(std::make_unique<ReLU>());
    }
    if (config.dropout > 0.0f)
      model->append(std::make_unique<Dropout>(config.dropout, ~layer_seed));
  }
  model->setBlocks(std::move(description.blocks));
  return model;
}

ModelDefinition mlpModel() {
  return ModelDefinition{
      .kind = "mlp",
      .summary = "Linear layers of model.layers' widths with activation, [LayerNorm], [Dropout]",
      .validate = [](const ModelSpec&) { return std::vector<ModelProblem>{}; },
      .describe = [](const ModelSpec& spec,
                     DType compute) { return describeMlp(mlpConfig(spec), compute); },
      .build = [](const ModelSpec& spec,
                  Device device) { return buildMlp(mlpConfig(spec), device); }};
}

}  // namespace ringmaster
