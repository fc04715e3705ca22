// The device mesh's rank order as storage applies it (issue 34): where a rank's hello gave no
// coordinates, and for runs recorded before the mesh, a rank's coordinates are those of the
// engine's order (spec/mesh_layout.h meshCoordinates: tp fastest, then dp, then pp).
#pragma once

#include "telemetry/events.h"

namespace ringmaster::storage {

// `rank`'s coordinates on `mesh` (each size >= 1, rank < their product).
inline MeshAxes rankCoordinates(const MeshAxes& mesh, int rank) {
  return {.dp = (rank / mesh.tp) % mesh.dp, .tp = rank % mesh.tp, .pp = rank / (mesh.tp * mesh.dp)};
}

}  // namespace ringmaster::storage
