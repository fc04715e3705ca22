// The device mesh at run time: this rank's (dp, tp, pp) coordinates on the spec's mesh
// (spec/mesh_layout.h: tp fastest, then dp, then pp) and one communicator per dimension, made from
// the world with newGroup and labelled with its dimension, so that every comm event names it. A
// dimension spanning the whole world is the world communicator itself; one of size 1 is a
// one-rank group that never communicates.
#pragma once

#include <array>
#include <memory>

#include "comm/communicator.h"
#include "spec/mesh_layout.h"

namespace ringmaster {

class DeviceMesh {
 public:
  // Collective over `world`: every rank creates every group of every dimension, in the same order.
  // `world` must outlive the mesh.
  DeviceMesh(Communicator& world, const MeshSpec& shape);

  const MeshSpec& shape() const { return shape_; }
  const MeshCoordinates& coordinates() const { return coordinates_; }
  int size(MeshDim dim) const { return meshSize(shape_, dim); }
  // This rank's group along `dim`; its rank there is coordinates().at(dim).
  Communicator& group(MeshDim dim) const;
  Communicator& world() const { return world_; }

 private:
  Communicator& world_;
  MeshSpec shape_;
  MeshCoordinates coordinates_;
  std::array<std::unique_ptr<Communicator>, 3> owned_;  // the groups that are not the world
  std::array<Communicator*, 3> groups_{};
};

}  // namespace ringmaster
