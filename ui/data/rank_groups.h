// Ranks grouped and ordered by their device-mesh coordinates (dp, tp, pp; spec/mesh_layout.h), for
// the rank table, the band charts and the heat map: the groups a grouping choice makes of the
// coordinates the run recorded (RunSnapshot::coordinates). Plain data and no Qt; it reads nothing.
#pragma once

#include <string>
#include <vector>

#include "spec/mesh_layout.h"

namespace ringmaster::ui {

// How ranks are grouped: none (rank order), or by the coordinate they share: the pipeline stage
// (pp), the data-parallel replica (dp), or the tensor-parallel group (the ranks that differ only
// in tp: same dp and pp).
enum class RankGrouping { kRankOrder, kByPpStage, kByDpReplica, kByTpGroup };

// "rank order", "by pp stage", "by dp replica", "by tp group": the grouping control's items.
const char* groupingName(RankGrouping grouping);
inline constexpr RankGrouping kRankGroupings[] = {
    RankGrouping::kRankOrder, RankGrouping::kByPpStage, RankGrouping::kByDpReplica,
    RankGrouping::kByTpGroup};

struct RankGroup {
  std::string label;       // "pp stage 1", "dp replica 0", "tp group dp 0 · pp 1", "all ranks"
  std::vector<int> ranks;  // ordered by the other coordinates (pp, dp, then tp), then rank
};

// The groups of `coordinates` (indexed by rank), ordered by their shared coordinate. Rank order is
// one group of every rank, ascending.
std::vector<RankGroup> groupRanks(const std::vector<MeshCoordinates>& coordinates,
                                  RankGrouping grouping);

// The ranks of `groups` one after another.
std::vector<int> rankOrder(const std::vector<RankGroup>& groups);

// "dp 0 · tp 1 · pp 0".
std::string coordinatesText(const MeshCoordinates& coordinates);

}  // namespace ringmaster::ui
