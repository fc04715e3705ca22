// The strategies' runtimes, registered once: each entry's class is in its own
// <name>_strategy.cpp; its plan (options, checks, memory) is registered in
// spec/strategies/table.cpp.
#include "core/error.h"
#include "parallel/strategy.h"
#include "spec/strategies/plan.h"

namespace ringmaster {

std::unique_ptr<ParallelStrategy> makeSingleStrategy(const StrategySetup& setup);
std::unique_ptr<ParallelStrategy> makeDdpStrategy(const StrategySetup& setup);
std::unique_ptr<ParallelStrategy> makeFsdpStrategy(const StrategySetup& setup);
std::unique_ptr<ParallelStrategy> makePipelineStrategy(const StrategySetup& setup);

namespace {

struct StrategyRuntime {
  StrategyKind kind;
  std::unique_ptr<ParallelStrategy> (*make)(const StrategySetup&);
};

constexpr StrategyRuntime kStrategies[] = {{StrategyKind::kSingle, makeSingleStrategy},
                                           {StrategyKind::kDdp, makeDdpStrategy},
                                           {StrategyKind::kFsdp, makeFsdpStrategy},
                                           {StrategyKind::kPipeline, makePipelineStrategy}};

}  // namespace

std::unique_ptr<ParallelStrategy> makeParallelStrategy(const StrategySetup& setup) {
  for (const StrategyRuntime& strategy : kStrategies) {
    if (strategy.kind != setup.spec.strategy.kind) continue;
    RM_CHECK_ARG(setup.world != nullptr || !strategyPlan(strategy.kind).needsWorld(),
                 "a strategy over ranks needs the world communicator");
    setup.model.setActivationCheckpointing(setup.spec.train.activation_checkpointing);
    return strategy.make(setup);
  }
  RM_ENFORCE(false, "a strategy kind without a runtime in parallel/strategies.cpp");
  return nullptr;
}

}  // namespace ringmaster
