// Grouping ranks by mesh coordinates: a stable sort by the grouping's key, then the groups cut
// where the key changes.
#include "data/rank_groups.h"

#include <algorithm>
#include <tuple>

namespace ringmaster::ui {

namespace {

// The grouping's key of a rank, and its order inside the group: the other coordinates, outermost
// (pp) first.
std::tuple<int, int, int, int> sortKey(const MeshCoordinates& c, RankGrouping grouping) {
  switch (grouping) {
    case RankGrouping::kByPpStage:
      return {c.pp, 0, c.dp, c.tp};
    case RankGrouping::kByDpReplica:
      return {c.dp, 0, c.pp, c.tp};
    case RankGrouping::kByTpGroup:
      return {c.pp, c.dp, c.tp, 0};
    case RankGrouping::kRankOrder:
      break;
  }
  return {0, 0, 0, 0};
}

std::string groupLabel(const MeshCoordinates& c, RankGrouping grouping) {
  switch (grouping) {
    case RankGrouping::kByPpStage:
      return "pp stage " + std::to_string(c.pp);
    case RankGrouping::kByDpReplica:
      return "dp replica " + std::to_string(c.dp);
    case RankGrouping::kByTpGroup:
      return "tp group dp " + std::to_string(c.dp) + " · pp " + std::to_string(c.pp);
    case RankGrouping::kRankOrder:
      break;
  }
  return "all ranks";
}

}  // namespace

const char* groupingName(RankGrouping grouping) {
  switch (grouping) {
    case RankGrouping::kByPpStage:
      return "by pp stage";
    case RankGrouping::kByDpReplica:
      return "by dp replica";
    case RankGrouping::kByTpGroup:
      return "by tp group";
    case RankGrouping::kRankOrder:
      break;
  }
  return "rank order";
}

std::vector<RankGroup> groupRanks(const std::vector<MeshCoordinates>& coordinates,
                                  RankGrouping grouping) {
  std::vector<int> ranks(coordinates.size());
  for (size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<int>(r);
  std::stable_sort(ranks.begin(), ranks.end(), [&](int a, int b) {
    return sortKey(coordinates[a], grouping) < sortKey(coordinates[b], grouping);
  });
  std::vector<RankGroup> groups;
  for (int rank : ranks) {
    const std::string label = groupLabel(coordinates[rank], grouping);
    if (groups.empty() || groups.back().label != label) groups.push_back({label, {}});
    groups.back().ranks.push_back(rank);
  }
  return groups;
}

std::vector<int> rankOrder(const std::vector<RankGroup>& groups) {
  std::vector<int> order;
  for (const RankGroup& group : groups)
    order.insert(order.end(), group.ranks.begin(), group.ranks.end());
  return order;
}

std::string coordinatesText(const MeshCoordinates& c) {
  return "dp " + std::to_string(c.dp) + " · tp " + std::to_string(c.tp) + " · pp " +
         std::to_string(c.pp);
}

}  // namespace ringmaster::ui
