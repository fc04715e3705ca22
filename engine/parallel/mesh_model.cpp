// This rank's model on the device mesh (parallel/mesh_model.h).
#include "parallel/mesh_model.h"

#include "core/error.h"

namespace ringmaster {

MeshModel makeMeshModel(Sequential& built, const JobSpec& spec, DeviceMesh& mesh) {
  MeshModel out;
  out.model = &built;
  out.tp_whole = [](const std::string&) { return true; };
  out.gather_full = [](const std::string&, const Tensor& local) { return local; };
  if (mesh.size(MeshDim::kTp) == 1) return out;
  RM_THROW(kUnavailable, "strategy.mesh.tp: tensor parallelism is not built in yet");
}

}  // namespace ringmaster
