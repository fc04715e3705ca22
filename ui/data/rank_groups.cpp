// Grouping ranks by mesh coordinates: a stable sort by the grouping's key, then the groups cut
// where the key changes.
#include "data/rank_groups.h"

#include <algorithm>
#include <nlohmann/json.hpp>
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

int positiveOr(const nlohmann::json& block, const char* key, int fallback) {
  const auto it = block.find(key);
  return it != block.end() && it->is_number_integer() && it->get<int>() > 0 ? it->get<int>()
                                                                            : fallback;
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

MeshSpec runMesh(const std::string& spec_json, const std::string& strategy, int world_size) {
  const int world = std::max(world_size, 1);
  const nlohmann::json spec = nlohmann::json::parse(spec_json, nullptr, false);
  const nlohmann::json* mesh = nullptr;
  if (spec.is_object() && spec.contains("strategy") && spec["strategy"].is_object() &&
      spec["strategy"].contains("mesh") && spec["strategy"]["mesh"].is_object())
    mesh = &spec["strategy"]["mesh"];
  if (mesh) {
    MeshSpec parsed{.tp = positiveOr(*mesh, "tp", 1), .pp = positiveOr(*mesh, "pp", 1)};
    parsed.dp = positiveOr(*mesh, "dp", std::max(world / (parsed.tp * parsed.pp), 1));
    if (parsed.size() == world) return parsed;
  }
  if (strategy == "pipeline") return MeshSpec{.dp = 1, .tp = 1, .pp = world};
  return MeshSpec{.dp = world, .tp = 1, .pp = 1};
}

}  // namespace ringmaster::ui
