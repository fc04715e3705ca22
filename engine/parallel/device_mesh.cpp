// The device mesh's groups (parallel/device_mesh.h).
#include "parallel/device_mesh.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

DeviceMesh::DeviceMesh(Communicator& world, const MeshSpec& shape)
    : world_(world), shape_(shape), coordinates_(meshCoordinates(shape, world.rank())) {
  RM_CHECK_ARG(shape.size() == world.size(),
               fmt::format("strategy.mesh: dp {} x tp {} x pp {} = {} ranks, but the world has {}",
                           shape.dp, shape.tp, shape.pp, shape.size(), world.size()));
  for (size_t i = 0; i < kMeshDims.size(); ++i) {
    const MeshDim dim = kMeshDims[i];
    const std::string name(toString(dim));
    if (size(dim) == world.size() && world.size() > 1) {
      world.setMeshDimension(name);
      groups_[i] = &world;
      continue;
    }
    for (const std::vector<int>& ranks : meshGroups(shape, dim)) {
      std::unique_ptr<Communicator> group = world.newGroup(ranks, name);
      if (group) owned_[i] = std::move(group);
    }
    owned_[i]->setMeshDimension(name);
    groups_[i] = owned_[i].get();
  }
}

Communicator& DeviceMesh::group(MeshDim dim) const {
  return *groups_[static_cast<size_t>(dim)];
}

}  // namespace ringmaster
