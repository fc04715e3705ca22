// The dimension plans, registered once: each entry's plan is defined in its own file of this
// folder, and its runtime is made in parallel/strategies.cpp. A data-parallel plan is registered
// by name (strategy.dp.kind), as a model is by model.kind.
#include <algorithm>

#include "spec/strategies/plan.h"

namespace ringmaster {

const DimensionPlan& ddpPlan();
const DimensionPlan& fsdpPlan();

std::span<const DimensionPlan* const> dataParallelPlans() {
  static const DimensionPlan* const kPlans[] = {&ddpPlan(), &fsdpPlan()};
  return kPlans;
}

std::vector<std::string_view> dataParallelPlanNames() {
  std::vector<std::string_view> names;
  for (const DimensionPlan* plan : dataParallelPlans()) names.push_back(plan->name());
  return names;
}

const DimensionPlan* findDataParallelPlan(std::string_view name) {
  for (const DimensionPlan* plan : dataParallelPlans())
    if (plan->name() == name) return plan;
  return nullptr;
}

std::vector<const DimensionPlan*> dimensionPlans() {
  std::vector<const DimensionPlan*> plans(dataParallelPlans().begin(), dataParallelPlans().end());
  plans.push_back(&tensorParallelPlan());
  plans.push_back(&pipelineParallelPlan());
  return plans;
}

const DimensionPlan* soleDimensionPlan(const JobSpec& spec) {
  const std::string label = strategyLabel(spec);
  if (label == "pipeline") return &pipelineParallelPlan();
  if (label == "tp") return &tensorParallelPlan();
  return findDataParallelPlan(label);
}

}  // namespace ringmaster
