// Issue 34, seeing the mesh: ranks grouped and ordered by their mesh coordinates
// (ui/data/rank_groups.h), over every dp x tp x pp layout of 1 to 8 ranks and every grouping, and
// the run's mesh read from its spec (the canonical block and the legacy strategy kinds).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/rank_groups.h"

namespace ringmaster::ui {
namespace {

std::vector<MeshSpec> everyLayout(int max_world) {
  std::vector<MeshSpec> layouts;
  for (int dp = 1; dp <= max_world; ++dp)
    for (int tp = 1; dp * tp <= max_world; ++tp)
      for (int pp = 1; dp * tp * pp <= max_world; ++pp) layouts.push_back({dp, tp, pp});
  return layouts;
}

std::vector<MeshCoordinates> coordinatesOf(const MeshSpec& mesh) {
  std::vector<MeshCoordinates> coordinates;
  for (int rank = 0; rank < mesh.size(); ++rank) coordinates.push_back(meshCoordinates(mesh, rank));
  return coordinates;
}

// What a group shares, in the order groups come: its pp stage, its dp replica, its tp group's
// (pp, dp); nothing in rank order.
std::pair<int, int> sharedKey(const MeshCoordinates& c, RankGrouping grouping) {
  switch (grouping) {
    case RankGrouping::kByPpStage:
      return {c.pp, 0};
    case RankGrouping::kByDpReplica:
      return {c.dp, 0};
    case RankGrouping::kByTpGroup:
      return {c.pp, c.dp};
    case RankGrouping::kRankOrder:
      break;
  }
  return {0, 0};
}

int expectedGroupCount(const MeshSpec& mesh, RankGrouping grouping) {
  switch (grouping) {
    case RankGrouping::kByPpStage:
      return mesh.pp;
    case RankGrouping::kByDpReplica:
      return mesh.dp;
    case RankGrouping::kByTpGroup:
      return mesh.dp * mesh.pp;
    case RankGrouping::kRankOrder:
      break;
  }
  return 1;
}

TEST(RankGroups, EveryLayoutOfUpToEightRanksIsPartitionedByTheSharedCoordinate) {
  for (const MeshSpec& mesh : everyLayout(8)) {
    const std::vector<MeshCoordinates> coordinates = coordinatesOf(mesh);
    for (RankGrouping grouping : kRankGroupings) {
      SCOPED_TRACE(testing::Message() << "dp " << mesh.dp << " tp " << mesh.tp << " pp " << mesh.pp
                                      << ", " << groupingName(grouping));
      const std::vector<RankGroup> groups = groupRanks(coordinates, grouping);
      ASSERT_EQ(static_cast<int>(groups.size()), expectedGroupCount(mesh, grouping));
      // Every rank exactly once.
      std::vector<int> order = rankOrder(groups);
      ASSERT_EQ(static_cast<int>(order.size()), mesh.size());
      std::sort(order.begin(), order.end());
      for (int rank = 0; rank < mesh.size(); ++rank) EXPECT_EQ(order[rank], rank);
      std::set<std::string> labels;
      std::vector<std::pair<int, int>> keys;
      for (const RankGroup& group : groups) {
        EXPECT_TRUE(labels.insert(group.label).second) << group.label;
        EXPECT_EQ(static_cast<int>(group.ranks.size()),
                  mesh.size() / expectedGroupCount(mesh, grouping));
        const auto key = sharedKey(coordinates[group.ranks.front()], grouping);
        keys.push_back(key);
        for (size_t i = 0; i < group.ranks.size(); ++i) {
          EXPECT_EQ(sharedKey(coordinates[group.ranks[i]], grouping), key);
          // Inside a group, by the other coordinates, outermost (pp) first: in rank order.
          if (i > 0) {
            EXPECT_LT(group.ranks[i - 1], group.ranks[i]);
          }
        }
      }
      // The groups by their shared coordinate, each once.
      EXPECT_TRUE(std::adjacent_find(keys.begin(), keys.end(), std::greater_equal<>()) ==
                  keys.end());
    }
  }
}

TEST(RankGroups, ADpByPpMeshGroupedByReplicaTakesEachReplicasStagesTogether) {
  // dp 2 x pp 2: rank = dp + 2 * pp, so replica 0 is ranks 0 and 2, replica 1 ranks 1 and 3.
  const std::vector<RankGroup> groups =
      groupRanks(coordinatesOf({.dp = 2, .tp = 1, .pp = 2}), RankGrouping::kByDpReplica);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].label, "dp replica 0");
  EXPECT_EQ(groups[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(groups[1].ranks, (std::vector<int>{1, 3}));
  // dp 2 x tp 2 by tp group: the tp pairs {0, 1} and {2, 3}.
  const std::vector<RankGroup> tp =
      groupRanks(coordinatesOf({.dp = 2, .tp = 2, .pp = 1}), RankGrouping::kByTpGroup);
  ASSERT_EQ(tp.size(), 2u);
  EXPECT_EQ(tp[0].label, "tp group dp 0 · pp 0");
  EXPECT_EQ(tp[1].ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(coordinatesText(meshCoordinates({.dp = 2, .tp = 2, .pp = 1}, 3)), "dp 1 · tp 1 · pp 0");
}

}  // namespace
}  // namespace ringmaster::ui
