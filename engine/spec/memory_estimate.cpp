// estimateMemory: the model's and the optimizer's figures, handed to the strategy's plan for its
// formulas rank by rank.
#include "spec/memory_estimate.h"

#include <algorithm>

#include "spec/job_spec.h"
#include "spec/strategies/plan.h"

namespace ringmaster {

namespace {

constexpr double kBytes = 4;  // float32

// The model's side of the estimate. Today's one model is the MLP of model.layers; a model
// description (parameters per block, activation bytes per sample) replaces this arithmetic when
// models describe themselves.
MemoryInputs mlpMemoryInputs(const JobSpec& spec) {
  MemoryInputs inputs{.spec = spec, .world = std::max(worldSize(spec), 1)};
  inputs.layers = layerParameters(spec.model);
  for (int64_t n : inputs.layers) inputs.parameters += n;
  const OptimizerSpec& o = spec.optimizer;
  inputs.moments = o.kind == OptimizerKind::kSgd ? (o.momentum > 0 ? 1 : 0) : 2;
  inputs.moment_text = o.kind == OptimizerKind::kSgd
                           ? (o.momentum > 0 ? "1 momentum buffer" : "no state")
                           : "2 Adam moments";
  // Each Linear keeps its input ([batch, width_in]); the activation function its output.
  const std::vector<int64_t> widths = spec.model.layers;
  inputs.activation_bytes = [widths](size_t first, size_t end, int64_t batch) {
    double elements = 0;
    for (size_t l = first; l < end; ++l) {
      elements += static_cast<double>(batch * widths[l]);
      if (l + 2 < widths.size()) elements += static_cast<double>(batch * widths[l + 1]);
    }
    return elements * kBytes;
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
  std::vector<int64_t> layers;
  for (size_t i = 0; i + 1 < model.layers.size(); ++i) {
    int64_t n = model.layers[i] * model.layers[i + 1] + model.layers[i + 1];
    const bool hidden = i + 2 < model.layers.size();
    if (model.layer_norm && hidden) n += 2 * model.layers[i + 1];
    layers.push_back(n);
  }
  return layers;
}

std::vector<RankMemoryEstimate> estimateMemory(const JobSpec& spec) {
  const MemoryInputs inputs = mlpMemoryInputs(spec);
  const StrategyPlan& plan = strategyPlan(spec.strategy.kind);
  std::vector<RankMemoryEstimate> ranks(static_cast<size_t>(inputs.world));
  for (int r = 0; r < inputs.world; ++r) {
    ranks[static_cast<size_t>(r)].rank = r;
    ranks[static_cast<size_t>(r)].parts = plan.estimateMemory(inputs, r);
  }
  return ranks;
}

}  // namespace ringmaster
