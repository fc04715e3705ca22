// The strategies, registered once: each entry's plan is defined in its own file of this folder,
// and its runtime is made in parallel/strategies.cpp.
#include "core/error.h"
#include "spec/strategies/plan.h"

namespace ringmaster {

const StrategyPlan& singlePlan();
const StrategyPlan& ddpPlan();
const StrategyPlan& fsdpPlan();
const StrategyPlan& pipelinePlan();

std::span<const StrategyPlan* const> strategyPlans() {
  // In the order of StrategyKind.
  static const StrategyPlan* const kPlans[] = {&singlePlan(), &ddpPlan(), &fsdpPlan(),
                                               &pipelinePlan()};
  return kPlans;
}

const StrategyPlan& strategyPlan(StrategyKind kind) {
  for (const StrategyPlan* plan : strategyPlans())
    if (plan->kind() == kind) return *plan;
  RM_ENFORCE(false, "a strategy kind without a plan in spec/strategies/table.cpp");
  return singlePlan();
}

}  // namespace ringmaster
