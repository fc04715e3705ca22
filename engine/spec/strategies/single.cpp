// The `single` strategy's plan: one rank, the whole model, no options.
#include <fmt/format.h>

#include "spec/strategies/plan.h"

namespace ringmaster {

namespace {

class SinglePlan final : public StrategyPlan {
 public:
  StrategyKind kind() const override { return StrategyKind::kSingle; }
  bool needsWorld() const override { return false; }
  void check(const JobSpec&, StrategyCheck& check) const override {
    if (check.world_size && *check.world_size != 1) {
      check.report("strategy.kind", fmt::format("single runs exactly 1 rank, but launch.hosts "
                                                "give a world size of {}",
                                                *check.world_size));
    }
  }
  std::vector<MemoryPart> estimateMemory(const MemoryInputs& inputs, int) const override {
    return replicatedMemory(inputs,
                            {"gradients", parameterTensorBytes(inputs, 0, inputs.layers.size(), 4),
                             "4 B × Ψ, one gradient per parameter tensor"});
  }
};

}  // namespace

const StrategyPlan& singlePlan() {
  static const SinglePlan plan;
  return plan;
}

}  // namespace ringmaster
