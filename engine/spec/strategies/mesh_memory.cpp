// The memory of a rank of the device mesh (dp x tp x pp, spec/mesh_layout.h), composed as the mesh
// runtime composes the dimensions (parallel/mesh_strategy.cpp): tensor parallelism shrinks the
// model a rank holds (the inputs describe one tp rank's share: nn/model.h TensorParallelShare);
// with one stage the data-parallel plan's estimate over the (split) model; with pp > 1 the
// pipeline's stage and schedule, its parameters and gradients moved into flat buffers the dp group
// reduces after the schedule (parallel/replica_gradients.h).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "spec/mesh_layout.h"
#include "spec/strategies/plan.h"

namespace ringmaster {

namespace {

constexpr double kBytes = 4;  // float32

// Whether the job's collectives run over Gloo: its backend, or `auto` on the CPU.
bool usesGloo(const JobSpec& spec) {
  return spec.backend == BackendKind::kGloo ||
         (spec.backend == BackendKind::kAuto && spec.device == DeviceKind::kCpu);
}

// One stage (pp = 1): the replica's whole (tp-split) model under its data-parallel plan, which
// wraps it where dp > 1 and always under FSDP (parallel/mesh_strategy.cpp MeshModelStrategy);
// otherwise the model as a single rank holds it.
std::vector<MemoryPart> replicaMemory(const MemoryInputs& inputs, const MeshCoordinates& at) {
  const StrategySpec& strategy = inputs.spec.strategy;
  if (strategy.mesh.dp == 1 && strategy.data_parallel == "ddp") return singleMemory(inputs);
  const DimensionPlan* plan = findDataParallelPlan(strategy.data_parallel);
  RM_ENFORCE(plan != nullptr, "strategy.dp.kind without a data-parallel plan");
  MemoryInputs replica = inputs;
  replica.world = strategy.mesh.dp;
  return plan->estimateMemory(replica, at.dp);
}

// pp > 1 with dp > 1 or FSDP (parallel/replica_gradients.h): the stage's parameters (and its tied
// copies) viewed in one flat value and one flat gradient buffer, padded to the dp ranks; under
// FSDP this rank's shard of both beside them, and the optimizer's state for the shard only. The
// reduction runs after the schedule, when the micro-batches' buffers (`schedule_bytes`) are gone:
// it counts where it needs more than they held.
std::vector<MemoryPart> replicaStageMemory(const MemoryInputs& inputs, const PipelinePosition& at,
                                           double schedule_bytes) {
  const StrategySpec& strategy = inputs.spec.strategy;
  const int dp = strategy.mesh.dp;
  const bool sharded = strategy.data_parallel == "fsdp";
  double elements = 0, tensors = 0;  // the stage's parameters; their tensors, each rounded
  for (const MemoryInputs::ParameterTensor& tensor : pipelineRankTensors(inputs, at)) {
    elements += static_cast<double>(tensor.elements);
    tensors += allocatedBytes(static_cast<double>(tensor.elements) * kBytes);
  }
  const double padded = std::ceil(elements / dp) * dp;
  const double flat = allocatedBytes(padded * kBytes);
  const double shard = allocatedBytes(padded / dp * kBytes);
  const std::string held = fmt::format(
      "4 B × the stage's {:.0f} parameters in one flat buffer (padded to {} shards)", elements, dp);
  const std::string with_shard = sharded ? fmt::format(", and this rank's 1 / {} shard", dp) : "";
  std::vector<MemoryPart> parts = {
      {"parameters", sharded ? flat + shard : flat, held + with_shard},
      {"gradients", sharded ? flat + shard : flat,
       fmt::format("4 B × the stage's parameters in one flat gradient{}", with_shard)},
      {"optimizer state", inputs.moments * (sharded ? shard : tensors),
       fmt::format("4 B × {} × the stage's parameters{} ({})", inputs.moments,
                   sharded ? fmt::format(" / {}", dp) : "", inputs.moment_text)}};
  // FSDP: the reduce-scatter's output shard, and over Gloo its copy of the flat gradient and a
  // receive block (comm/gloo).
  const double reduction =
      sharded ? shard + (usesGloo(inputs.spec) ? flat * (1 + 1.0 / dp) : 0) : 0;
  if (reduction > schedule_bytes) {
    parts.push_back({"gradient reduction after the schedule (transient)",
                     reduction - schedule_bytes,
                     fmt::format("4 B × the stage's parameters / {} (the reduce-scattered shard) "
                                 "and 4 B × (1 + 1 / {}) × them (Gloo's copy and receive block), "
                                 "beyond what the schedule held",
                                 dp, dp)});
  }
  return parts;
}

}  // namespace

std::vector<MemoryPart> meshMemory(const MemoryInputs& inputs, int rank) {
  const JobSpec& spec = inputs.spec;
  const MeshSpec& mesh = spec.strategy.mesh;
  const MeshCoordinates at = meshCoordinates(mesh, rank);
  std::vector<MemoryPart> parts;
  if (mesh.pp == 1) {
    parts = replicaMemory(inputs, at);
  } else {
    // Stages balanced by the whole model's parameter counts (parallel/pipeline.cpp), not a tp
    // rank's share.
    const int stages = mesh.pp * std::max(spec.strategy.pipeline.virtual_stages, 1);
    const PipelinePosition position{
        .rank = at.pp,
        .ranks = mesh.pp,
        .starts = pipelineStageStarts(spec, layerParameters(spec.model), stages)};
    std::vector<MemoryPart> schedule = pipelineActivationMemory(inputs, position);
    double schedule_bytes = 0;
    for (const MemoryPart& part : schedule) schedule_bytes += part.bytes;
    parts = mesh.dp > 1 || spec.strategy.data_parallel != "ddp"
                ? replicaStageMemory(inputs, position, schedule_bytes)
                : pipelineStateMemory(inputs, position);
    for (MemoryPart& part : schedule) parts.push_back(std::move(part));
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
