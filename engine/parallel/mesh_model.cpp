// This rank's model on the device mesh (parallel/mesh_model.h).
#include "parallel/mesh_model.h"

#include <fmt/format.h>

#include <map>

#include "core/error.h"
#include "parallel/tensor_parallel/tp_gpt.h"

namespace ringmaster {

namespace {

// The tp split of the GPT, each parameter's slice taken from `built` (so model.init_checkpoint
// and a resume from consolidated weights reach every layout), whose storage then goes.
std::unique_ptr<Sequential> splitGpt(Sequential& built, const JobSpec& spec, Communicator& tp) {
  const GptConfig config = gptConfig(spec.model);
  std::map<std::string, Parameter*> whole;
  for (const NamedParameter& p : built.namedParameters()) whole[p.name] = p.parameter;
  const Device device = whole.begin()->second->value.device();
  std::unique_ptr<Sequential> split =
      buildTensorParallelGpt(config, tp, spec.strategy.tp, device);
  for (const NamedParameter& p : split->namedParameters()) {
    p.parameter->value.copyFrom(
        shardOfParameter(p.name, whole.at(p.name)->value, tp.rank(), tp.size(), config));
  }
  for (auto& [name, parameter] : whole) *parameter = Parameter{};
  setAutocast(*split, precisionDType(spec.train.precision));
  return split;
}

}  // namespace

MeshModel makeMeshModel(Sequential& built, const JobSpec& spec, DeviceMesh& mesh) {
  MeshModel out;
  out.model = &built;
  out.tp_whole = [](const std::string&) { return true; };
  out.gather_full = [](const std::string&, const Tensor& local) { return local; };
  if (mesh.size(MeshDim::kTp) == 1) return out;
  RM_CHECK_ARG(spec.model.kind == "gpt",
               fmt::format("strategy.mesh.tp: model.kind '{}' has no tensor-parallel layers "
                           "(the gpt has); set tp to 1",
                           spec.model.kind));
  Communicator& tp = mesh.group(MeshDim::kTp);
  const GptConfig config = gptConfig(spec.model);
  out.owned = splitGpt(built, spec, tp);
  out.model = out.owned.get();
  out.make_loss = [config, &tp] { return makeTensorParallelGptLoss(config, tp); };
  out.tp_whole = [](const std::string& name) { return isTensorParallelReplicated(name); };
  out.gather_full = [config, &tp](const std::string& name, const Tensor& local) {
    return gatherFullParameter(name, local, tp, config);
  };
  return out;
}

}  // namespace ringmaster
