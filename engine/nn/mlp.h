// Builds the multi-layer perceptron a job spec describes: Linear layers of the given widths with
// [LayerNorm], activation and [Dropout] between them, as the equivalent nn.Sequential would be.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"

namespace ringmaster {

enum class Activation { kRelu, kGelu };

struct MlpConfig {
  std::vector<int64_t> layers;  // widths, input first: {784, 256, 256, 10}
  Activation activation = Activation::kRelu;
  float dropout = 0.0f;
  bool layer_norm = false;
  uint64_t seed = 0;
};

// Linear layer i (0-based) is initialised from a stream derived from (seed, i), and Dropout after
// it from (seed, i) too, so the same config always builds the same model.
std::unique_ptr<Sequential> buildMlp(const MlpConfig& config, Device device = Device::cpu());

}  // namespace ringmaster
