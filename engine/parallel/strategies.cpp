// The strategies' runtimes, registered once: each entry's class is in its own
// <name>_strategy.cpp; its plan (options, checks, memory) is registered in
// spec/strategies/table.cpp. The runtime is chosen by the mesh's layout (strategyLabel): one rank,
// one data-parallel plan over dp, or a pipeline over pp; a mixed mesh has no runtime yet.
#include <fmt/format.h>

#include "core/error.h"
#include "parallel/strategy.h"
#include "spec/strategies/plan.h"

namespace ringmaster {

std::unique_ptr<ParallelStrategy> makeSingleStrategy(const StrategySetup& setup);
std::unique_ptr<ParallelStrategy> makeDdpStrategy(const StrategySetup& setup);
std::unique_ptr<ParallelStrategy> makeFsdpStrategy(const StrategySetup& setup);
std::unique_ptr<ParallelStrategy> makePipelineStrategy(const StrategySetup& setup);

namespace {

// The runtime of each one-part layout, by strategyLabel: "single", a data-parallel plan's name,
// "pipeline".
struct StrategyRuntime {
  std::string_view label;
  std::unique_ptr<ParallelStrategy> (*make)(const StrategySetup&);
};

constexpr StrategyRuntime kStrategies[] = {{"single", makeSingleStrategy},
                                           {"ddp", makeDdpStrategy},
                                           {"fsdp", makeFsdpStrategy},
                                           {"pipeline", makePipelineStrategy}};

}  // namespace

std::unique_ptr<ParallelStrategy> makeParallelStrategy(const StrategySetup& setup) {
  const std::string label = strategyLabel(setup.spec);
  for (const StrategyRuntime& strategy : kStrategies) {
    if (strategy.label != label) continue;
    RM_CHECK_ARG(setup.world != nullptr || !needsWorldCommunicator(setup.spec),
                 "a strategy over ranks needs the world communicator");
    setup.model.setActivationCheckpointing(setup.spec.train.activation_checkpointing);
    return strategy.make(setup);
  }
  const MeshSpec& mesh = setup.spec.strategy.mesh;
  RM_THROW(kUnavailable, fmt::format("the {} layout (strategy.mesh dp {} × tp {} × pp {}) has no "
                                     "runtime in this build yet",
                                     label, mesh.dp, mesh.tp, mesh.pp));
}

}  // namespace ringmaster
