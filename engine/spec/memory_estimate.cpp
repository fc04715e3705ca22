// estimateMemory: the model's and the optimizer's figures, handed to the strategy's plan for its
// formulas rank by rank.
#include "spec/memory_estimate.h"

#include <algorithm>

#include "spec/job_spec.h"
#include "spec/strategies/plan.h"

namespace ringmaster {

namespace {

// The model's side of the estimate, from what the model declares (nn/model.h): parameters and
// activation bytes per block.
MemoryInputs modelMemoryInputs(const JobSpec& spec) {
  MemoryInputs inputs{.spec = spec, .world = std::max(worldSize(spec), 1)};
  const ModelDescription description = describeModel(spec.model);
  for (const ModelBlock& block : description.blocks) inputs.layers.push_back(block.parameters);
  for (int64_t n : inputs.layers) inputs.parameters += n;
  const OptimizerSpec& o = spec.optimizer;
  inputs.moments = o.kind == OptimizerKind::kSgd ? (o.momentum > 0 ? 1 : 0) : 2;
  inputs.moment_text = o.kind == OptimizerKind::kSgd
                           ? (o.momentum > 0 ? "1 momentum buffer" : "no state")
                           : "2 Adam moments";
  std::vector<int64_t> kept;  // bytes per sample, per block
  for (const ModelBlock& block : description.blocks)
    kept.push_back(block.activation_bytes_per_sample);
  inputs.activation_bytes = [kept](size_t first, size_t end, int64_t batch) {
    double bytes = 0;
    for (size_t b = first; b < end; ++b) bytes += static_cast<double>(batch * kept[b]);
    return bytes;
  };
  return inputs;
}

}  // namespace

double RankMemoryEstimate::total() const {
  double sum = 0;
  for (const auto& part : parts) sum += part.bytes;
  return sum;
}

std::vector<int64_t> layerParameters(const ModelSpec& model) {
  std::vector<int64_t> blocks;
  for (const ModelBlock& block : describeModel(model).blocks) blocks.push_back(block.parameters);
  return blocks;
}

std::vector<RankMemoryEstimate> estimateMemory(const JobSpec& spec) {
  const MemoryInputs inputs = modelMemoryInputs(spec);
  const StrategyPlan& plan = strategyPlan(spec.strategy.kind);
  std::vector<RankMemoryEstimate> ranks(static_cast<size_t>(inputs.world));
  for (int r = 0; r < inputs.world; ++r) {
    ranks[static_cast<size_t>(r)].rank = r;
    ranks[static_cast<size_t>(r)].parts = plan.estimateMemory(inputs, r);
  }
  return ranks;
}

}  // namespace ringmaster
