// The device mesh's rank arithmetic (spec/mesh_layout.h).
#include "spec/mesh_layout.h"

#include "core/error.h"

namespace ringmaster {

std::string_view toString(MeshDim dim) {
  switch (dim) {
    case MeshDim::kDp:
      return "dp";
    case MeshDim::kTp:
      return "tp";
    case MeshDim::kPp:
      return "pp";
  }
  return "world";
}

int meshSize(const MeshSpec& mesh, MeshDim dim) {
  return dim == MeshDim::kDp ? mesh.dp : dim == MeshDim::kTp ? mesh.tp : mesh.pp;
}

MeshCoordinates meshCoordinates(const MeshSpec& mesh, int rank) {
  RM_CHECK_ARG(rank >= 0 && rank < mesh.size(), "a rank outside the mesh");
  return {.dp = (rank / mesh.tp) % mesh.dp, .tp = rank % mesh.tp, .pp = rank / (mesh.tp * mesh.dp)};
}

int meshRank(const MeshSpec& mesh, const MeshCoordinates& c) {
  return c.tp + mesh.tp * (c.dp + mesh.dp * c.pp);
}

std::vector<int> meshGroupRanks(const MeshSpec& mesh, int rank, MeshDim dim) {
  MeshCoordinates c = meshCoordinates(mesh, rank);
  std::vector<int> ranks;
  for (int i = 0; i < meshSize(mesh, dim); ++i) {
    (dim == MeshDim::kDp ? c.dp : dim == MeshDim::kTp ? c.tp : c.pp) = i;
    ranks.push_back(meshRank(mesh, c));
  }
  return ranks;
}

std::vector<std::vector<int>> meshGroups(const MeshSpec& mesh, MeshDim dim) {
  std::vector<std::vector<int>> groups;
  for (int rank = 0; rank < mesh.size(); ++rank)
    if (meshCoordinates(mesh, rank).at(dim) == 0) groups.push_back(meshGroupRanks(mesh, rank, dim));
  return groups;
}

}  // namespace ringmaster
