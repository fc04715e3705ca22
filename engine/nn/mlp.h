// Builds the multi-layer perceptron a job spec describes: Linear layers of the given widths with
// [LayerNorm], activation and [Dropout] between them, as the equivalent nn.Sequential would be.
// Registered as model kind "mlp" (nn/models.cpp); each Linear layer with what follows it is a
// block.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/layers.h"
#include "nn/model.h"

namespace ringmaster {

enum class Activation { kRelu, kGelu };

struct MlpConfig {
  std::vector<int64_t> layers;  // widths, input first: {784, 256, 256, 10}
  Activation activation = Activation::kRelu;
  float dropout = 0.0f;
  bool layer_norm = false;
  uint64_t seed = 0;
};

// The MLP a spec's model section describes.
MlpConfig mlpConfig(const ModelSpec& spec);

// Parameters, blocks (Linear layer i and the modules after it up to the next Linear), FLOPs and
// activation memory, from the config alone; under a 16-bit `compute` the Linears keep their
// inputs in 16-bit (nn/autocast.h).
ModelDescription describeMlp(const MlpConfig& config, DType compute = DType::kF32);

// Linear layer i (0-based) is initialised from a stream derived from (seed, i), and Dropout after
// it from (seed, i) too, so the same config always builds the same model. Its blocks are set.
std::unique_ptr<Sequential> buildMlp(const MlpConfig& config, Device device = Device::cpu());

// The registration of kind "mlp".
ModelDefinition mlpModel();

}  // namespace ringmaster
