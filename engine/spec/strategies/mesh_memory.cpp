// The memory of a rank under a layout of more than one non-trivial mesh dimension (dp with tp or
// pp, tp with pp, or tp alone). A placeholder: the per-layout formulas are not written yet, so it
// says so rather than estimate wrongly; one-dimension layouts are their plans' (plan.h).
#include <fmt/format.h>

#include "core/error.h"
#include "spec/strategies/plan.h"

namespace ringmaster {

std::vector<MemoryPart> meshMemory(const MemoryInputs& inputs, int rank) {
  const MeshSpec& mesh = inputs.spec.strategy.mesh;
  RM_THROW(kUnavailable,
           fmt::format("no memory estimate yet for rank {} of the {} layout (strategy.mesh dp {} × "
                       "tp {} × pp {}): only one-dimension layouts are estimated",
                       rank, strategyLabel(inputs.spec), mesh.dp, mesh.tp, mesh.pp));
}

}  // namespace ringmaster
