// The one interface every model stands behind: the model section of a job spec (ModelSpec), what a
// model declares without allocating a weight (ModelDescription: parameter names and shapes, blocks,
// FLOPs and activation memory per sample), and the registration table that maps a kind name to its
// validate / describe / build functions (engine/nn/models.cpp). A built model is a Sequential whose
// top-level children are grouped into the declared blocks: FSDP units and pipeline stage boundaries
// come from those blocks. Nothing here knows a strategy.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace ringmaster {

class Sequential;

// ---------------------------------------------------------------------------------------------
// The model section of a job spec (the spec parser fills it; the fields a kind reads are its own).

// Named ActivationKind so as not to clash with nn/mlp.h's Activation, to which it maps one to one.
enum class ActivationKind { kRelu, kGelu };

struct ModelSpec {
  std::string kind = "mlp";  // a registered model kind: modelKinds()
  // mlp, residual_mlp: required; widths, input first: {784, 256, 256, 10}. Empty for gpt.
  std::vector<int64_t> layers;
  ActivationKind activation = ActivationKind::kRelu;  // mlp, residual_mlp
  double dropout = 0;                                 // in [0, 1)
  bool layer_norm = false;                            // mlp, residual_mlp
  // gpt (all required but bias): the spec's "layers" is the number of transformer blocks.
  int64_t vocab_size = 0;
  int64_t context = 0;  // tokens per sample (the position embedding's rows)
  int64_t block_count = 0;
  int64_t heads = 0;
  int64_t dim = 0;   // the residual stream's width; a multiple of heads
  bool bias = true;  // biases in the Linear layers and LayerNorms
  uint64_t seed = 0;
  std::optional<std::string> init_checkpoint;  // weights to start from instead of the seed's
  bool operator==(const ModelSpec&) const = default;
};

// ---------------------------------------------------------------------------------------------
// What a model declares, computed from its spec alone (no weights are allocated).

struct ParameterInfo {
  std::string name;  // state_dict naming, exactly as the built model's namedParameters()
  Shape shape;
};

// A contiguous run of the built Sequential's top-level children: the unit FSDP shards as one flat
// parameter and the smallest piece a pipeline stage holds.
struct ModelBlock {
  std::string name;                         // "layer.0", "block.2", "output", ...
  size_t first_child = 0, end_child = 0;    // top-level children [first, end)
  int64_t parameters = 0;                   // elements of the block's parameters
  Shape input_shape, output_shape;          // per sample: {features}
  int64_t activation_bytes_per_sample = 0;  // what its forward keeps for the backward, in training
  // What its backward holds at once beyond what the forward kept, per sample, at its most: the
  // gradient it receives, the working gradients of its modules and the gradient it returns.
  int64_t backward_bytes_per_sample = 0;
  // zb_h1: what its backwardInput keeps for the deferred backwardWeights, per sample (the Linear
  // layers' output gradients; 0 where the modules do their weight gradients in the first half).
  int64_t deferred_weight_bytes_per_sample = 0;
  // Whether its first module keeps the input tensor itself (not a 16-bit copy) for the backward,
  // counted in activation_bytes_per_sample: then a pipeline stage's received input is that memory.
  bool keeps_input = false;
  // Parameters of an earlier block that this block's modules also read (the GPT's LM head reads
  // "wte.weight", the embedding block's): state_dict names, listed and counted once, by their
  // owner. FSDP puts the blocks sharing a parameter into one unit; a pipeline keeps a copy on each
  // stage that reads it and sums the copies' gradients (parallel/tied_parameters.h).
  std::vector<std::string> tied_parameters;
  bool operator==(const ModelBlock&) const = default;
};

struct ModelDescription {
  std::vector<ParameterInfo> parameters;  // in namedParameters() order
  std::vector<ModelBlock> blocks;         // in order, covering every top-level child once
  DType input_dtype = DType::kF32;        // per-sample input: blocks.front().input_shape
  // Forward FLOPs per sample (2 per multiply-add of the matrix products; training is about 3x).
  int64_t flops_per_sample = 0;
  // Bytes the forward keeps per sample for the backward (inputs, masks, statistics), in training,
  // under the compute type it was described for.
  int64_t activation_bytes_per_sample = 0;

  int64_t parameterCount() const;
  const Shape& inputShape() const;   // blocks.front().input_shape
  const Shape& outputShape() const;  // blocks.back().output_shape
};

// One tensor-parallel rank's share of a model (Megatron-LM's split over `ranks`; every rank's is
// the same): its parameter shapes and the activations it keeps. Under sequence parallelism
// (Korthikanti et al. 2022) the LayerNorms' inputs and the residual stream are split too.
struct TensorParallelShare {
  int ranks = 1;
  bool sequence_parallel = false;
};

// ---------------------------------------------------------------------------------------------
// The registration table.

// One problem with a model section: the JSON path under "model" ("model.layers") and the message.
struct ModelProblem {
  std::string path;
  std::string message;
};

struct ModelDefinition {
  std::string_view kind;     // the spec's model.kind
  std::string_view summary;  // one line for menus and the CLI
  // Problems beyond the spec's generic field checks (those have passed when this runs).
  std::function<std::vector<ModelProblem>(const ModelSpec&)> validate;
  // `compute`: the autocast type the model trains under (train.precision's DType): what the
  // modules keep in 16-bit under BF16 / F16 is counted at 2 bytes an element.
  std::function<ModelDescription(const ModelSpec&, DType compute)> describe;
  // What one tensor-parallel rank holds (describe at share.ranks == 1); null for a kind without
  // tensor parallelism.
  std::function<ModelDescription(const ModelSpec&, DType compute, const TensorParallelShare&)>
      describe_share;
  // The model with its blocks set (Sequential::blocks() == describe(spec).blocks).
  std::function<std::unique_ptr<Sequential>(const ModelSpec&, Device)> build;
};

// Every registered model, in table order.
const std::vector<ModelDefinition>& modelDefinitions();
std::vector<std::string_view> modelKinds();
// nullptr for an unknown kind.
const ModelDefinition* findModel(std::string_view kind);

// Through the table; an unknown kind or an invalid spec is a kInvalidArgument error.
std::vector<ModelProblem> validateModel(const ModelSpec& spec);
// `compute`: as ModelDefinition::describe's (F32, BF16 or F16).
ModelDescription describeModel(const ModelSpec& spec, DType compute = DType::kF32);
// One tensor-parallel rank's share (describeModel when share.ranks is 1); a kInvalidArgument
// error for a kind without tensor parallelism.
ModelDescription describeModelShare(const ModelSpec& spec, DType compute,
                                    const TensorParallelShare& share);
std::unique_ptr<Sequential> buildModel(const ModelSpec& spec, Device device = Device::cpu());

}  // namespace ringmaster
