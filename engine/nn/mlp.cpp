// buildMlp: the nn.Sequential an MLP spec describes.
#include "nn/mlp.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"

namespace ringmaster {

std::unique_ptr<Sequential> buildMlp(const MlpConfig& config, Device device) {
  RM_CHECK_ARG(config.layers.size() >= 2,
               fmt::format("an MLP needs at least 2 widths, got {}", config.layers.size()));
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
  return model;
}

}  // namespace ringmaster
