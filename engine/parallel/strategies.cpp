// The strategy runtime a spec's mesh gets: `single` for one rank without a world communicator,
// else the mesh runtime (mesh_strategy.cpp), which composes every dimension's.
#include "core/error.h"
#include "parallel/strategy.h"

namespace ringmaster {

std::unique_ptr<ParallelStrategy> makeSingleStrategy(const StrategySetup& setup);
std::unique_ptr<ParallelStrategy> makeMeshStrategy(const StrategySetup& setup);

std::unique_ptr<ParallelStrategy> makeParallelStrategy(const StrategySetup& setup) {
  const MeshSpec& mesh = setup.spec.strategy.mesh;
  if (setup.world == nullptr) {
    RM_CHECK_ARG(mesh.size() == 1 && setup.spec.strategy.data_parallel == "ddp",
                 "a strategy over ranks needs the world communicator");
    setup.model.setActivationCheckpointing(setup.spec.train.activation_checkpointing);
    return makeSingleStrategy(setup);
  }
  return makeMeshStrategy(setup);
}

}  // namespace ringmaster
