// The memory of a rank of the device mesh (dp x tp x pp, spec/mesh_layout.h), composed from the
// plans of its dimensions: tensor parallelism shrinks the model a rank holds (the inputs describe
// one tp rank's share: nn/model.h TensorParallelShare), a pipeline keeps its stage's blocks and the
// micro-batches its schedule holds, and the data-parallel plan (DDP or FSDP) decides how the
// stage's parameters, gradients and optimizer state are held. A one-dimension layout gets exactly
// that dimension's plan.
#include <algorithm>

#include <fmt/format.h>

#include "spec/mesh_layout.h"
#include "spec/strategies/plan.h"

namespace ringmaster {

// Defined in their own files of this folder (listed in table.cpp).
const StrategyPlan& singlePlan();
const StrategyPlan& ddpPlan();
const StrategyPlan& fsdpPlan();

namespace {

// What a data-parallel replica trains with over the dp dimension: DDP or FSDP (strategy.dp.kind),
// or, with one replica, the model as `single` holds it.
const StrategyPlan& dataParallelPlan(const JobSpec& spec) {
  if (spec.strategy.mesh.dp == 1) return singlePlan();
  return spec.strategy.data_parallel == "fsdp" ? fsdpPlan() : ddpPlan();
}

// `inputs` narrowed to the parameters the pipeline rank at `at` holds (with its tied copies), for
// the data-parallel plan over `dp` replicas of that stage.
MemoryInputs stageInputs(const MemoryInputs& inputs, const PipelinePosition& at, int dp) {
  MemoryInputs stage = inputs;
  stage.world = dp;
  stage.parameter_tensors = pipelineRankTensors(inputs, at);
  stage.layers.assign(inputs.layers.size(), 0);
  stage.parameters = 0;
  // A tied copy counts with the block that reads it; FSDP's units merge the tied blocks (one of
  // them empty where the stage holds a copy).
  for (const MemoryInputs::ParameterTensor& tensor : stage.parameter_tensors) {
    stage.layers[tensor.block] += tensor.elements;
    stage.parameters += tensor.elements;
  }
  return stage;
}

// The parameters, gradients and optimizer state of the pipeline rank at `at` under the
// data-parallel plan.
std::vector<MemoryPart> stageStateMemory(const MemoryInputs& inputs, const PipelinePosition& at) {
  const JobSpec& spec = inputs.spec;
  const int dp = spec.strategy.mesh.dp;
  if (dp == 1) return pipelineStateMemory(inputs, at);
  const MemoryInputs stage = stageInputs(inputs, at, dp);
  if (spec.strategy.data_parallel == "fsdp") return fsdpStageStateMemory(stage);
  // DDP: the stage's parameters and optimizer state as the pipeline holds them, its gradients in
  // buckets.
  std::vector<MemoryPart> parts = pipelineStateMemory(inputs, at);
  std::vector<MemoryPart> gradients = ddpGradientMemory(stage);
  for (MemoryPart& part : parts) {
    if (part.name == "gradients") part = gradients.front();
  }
  for (size_t i = 1; i < gradients.size(); ++i) parts.push_back(std::move(gradients[i]));
  return parts;
}

}  // namespace

std::vector<MemoryPart> meshMemory(const MemoryInputs& inputs, int rank) {
  const JobSpec& spec = inputs.spec;
  const MeshSpec& mesh = spec.strategy.mesh;
  const MeshCoordinates at = meshCoordinates(mesh, rank);
  std::vector<MemoryPart> parts;
  if (mesh.pp == 1) {
    // One stage: the replica's whole (tp-shared) model under the data-parallel plan.
    MemoryInputs replica = inputs;
    replica.world = mesh.dp;
    parts = dataParallelPlan(spec).estimateMemory(replica, at.dp);
  } else {
    const int stages = mesh.pp * std::max(spec.strategy.pipeline.virtual_stages, 1);
    const PipelinePosition position{.rank = at.pp,
                                    .ranks = mesh.pp,
                                    .starts = pipelineStageStarts(spec, inputs.layers, stages)};
    parts = stageStateMemory(inputs, position);
    for (MemoryPart& part : pipelineActivationMemory(inputs, position))
      parts.push_back(std::move(part));
  }
  if (mesh.tp > 1) {
    for (MemoryPart& part : parts) {
      if (part.name != "parameters") continue;
      part.formula += fmt::format(
          "; the tensor-parallel share of 1 of {} ranks: c_attn's and c_fc's columns, the "
          "projections' rows and wte's vocabulary split, LayerNorms, wpe and the projections' "
          "biases whole",
          mesh.tp);
    }
  }
  return parts;
}

}  // namespace ringmaster
