// Where each rank sits on the device mesh (dp x tp x pp, spec/job_spec.h MeshSpec): its
// coordinates, the ranks of each of its groups, and the names of the mesh's dimensions as
// telemetry and storage write them. Pure arithmetic: the job editor, the memory estimate and the
// runtime's DeviceMesh (parallel/device_mesh.h) share it. Rank order: tp fastest, then dp, then
// pp (Megatron-LM's): rank = tp + T * (dp + D * pp).
#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "spec/job_spec.h"

namespace ringmaster {

enum class MeshDim { kDp, kTp, kPp };

// "dp", "tp", "pp": a comm event's `dim` (besides "world", an operation over every rank).
std::string_view toString(MeshDim dim);
inline constexpr std::array<MeshDim, 3> kMeshDims = {MeshDim::kDp, MeshDim::kTp, MeshDim::kPp};
inline constexpr std::string_view kWorldDim = "world";

struct MeshCoordinates {
  int dp = 0, tp = 0, pp = 0;
  int at(MeshDim dim) const { return dim == MeshDim::kDp ? dp : dim == MeshDim::kTp ? tp : pp; }
  bool operator==(const MeshCoordinates&) const = default;
};

int meshSize(const MeshSpec& mesh, MeshDim dim);
MeshCoordinates meshCoordinates(const MeshSpec& mesh, int rank);
int meshRank(const MeshSpec& mesh, const MeshCoordinates& coordinates);
// The world ranks of `rank`'s group along `dim` (the ranks that differ from it only there),
// ascending: its position in the list is its coordinate.
std::vector<int> meshGroupRanks(const MeshSpec& mesh, int rank, MeshDim dim);
// Every group along `dim`, each ascending, ordered by their lowest rank: the order in which every
// rank creates them (Communicator::newGroup needs the same calls on every rank).
std::vector<std::vector<int>> meshGroups(const MeshSpec& mesh, MeshDim dim);

}  // namespace ringmaster
