// Issue 21, waiting versus transfer, measured on real runs: `ringmaster run` of the DDP example on
// 3 and 4 local ranks, one of them slowed by the test-only compute delay
// (RINGMASTER_TEST_COMPUTE_DELAY), is recorded with every collective split into waiting and
// transfer; the slowed rank is named the straggler (by the query and by `show --json`), the
// others' collective time is mostly waiting and its own wait is small. A run without the delay has
// the split filled in and names no straggler. Assertions compare relative quantities only.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "query/comm_stats.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using testing::CapturedProcess;

// Large against the noise of a loaded two-core machine running four ranks.
constexpr int kDelayMs = 150;

class StragglerRun : public testing::CliRunTest, public ::testing::WithParamInterface<int> {
 protected:
  int worldSize() const { return GetParam(); }

  // The DDP example on worldSize() local ranks for `steps` steps; returns the stored run's id.
  int64_t run(int steps, const std::map<std::string, std::string>& env) {
    json spec = testing::localDdpSpec(worldSize());
    spec["train"]["steps"] = steps;
    spec["telemetry"]["every_steps"] = 1;
    CapturedProcess process = ringmaster({"run", writeSpec("ddp", spec), "-q", "--json"}, env);
    const ExitStatus status = process.wait(240s);
    EXPECT_TRUE(status.ok()) << status.describe() << "\n" << process.err();
    return json::parse(process.out())["run"]["id"].get<int64_t>();
  }

  json show(int64_t run_id) {
    CapturedProcess process = ringmaster({"show", std::to_string(run_id), "--json"});
    const ExitStatus status = process.wait(60s);
    EXPECT_TRUE(status.ok()) << process.err();
    return json::parse(process.out());
  }

  // Every collective of a group of several ranks has its wait, none is left unsplit.
  static void expectEveryCollectiveSplit(const storage::Database& db, int64_t run_id) {
    const std::string collectives = fmt::format(
        "FROM comm_events WHERE run_id = {} AND op NOT IN ('send', 'recv') AND group_size > 1",
        run_id);
    EXPECT_GT(queryInt(db, "SELECT count(*) " + collectives), 0);
    EXPECT_EQ(queryInt(db, "SELECT count(*) " + collectives +
                               " AND (start_us IS NULL OR wait_ms "
                               "IS NULL OR seq_op IS NULL)"),
              0);
    EXPECT_EQ(queryInt(db, "SELECT count(*) " + collectives + " AND wait_ms > duration_ms"), 0);
  }
};

TEST_P(StragglerRun, TheSlowedRankIsTheStragglerAndTheOthersWaitForIt) {
  const int slow = worldSize() == 3 ? 1 : worldSize() - 1;
  const int64_t run_id =
      run(10, {{"RINGMASTER_TEST_COMPUTE_DELAY", fmt::format("{}:{}", slow, kDelayMs)}});
  storage::Database db(dbPath());
  expectEveryCollectiveSplit(db, run_id);

  const std::vector<storage::RankCommStats> ranks = storage::commStatsByRank(db, run_id);
  ASSERT_EQ(ranks.size(), static_cast<size_t>(worldSize()));
  const storage::RankCommStats& slowed = ranks[static_cast<size_t>(slow)];
  ASSERT_TRUE(slowed.mean_wait_ms.has_value());
  for (const storage::RankCommStats& rank : ranks) {
    SCOPED_TRACE(fmt::format("rank {} (slowed: {})", rank.rank, slow));
    EXPECT_EQ(rank.straggler, rank.rank == slow);
    ASSERT_TRUE(rank.wait_ms && rank.transfer_ms && rank.mean_wait_ms);
    if (rank.rank == slow) continue;
    // The others' collective time is mostly waiting for the slowed rank...
    EXPECT_GT(*rank.wait_ms, *rank.transfer_ms);
    // ... which itself waits little: a small fraction of what each of them waits.
    EXPECT_LT(*slowed.mean_wait_ms, *rank.mean_wait_ms / storage::kWaitStragglerRatio);
  }

  const json shown = show(run_id);
  ASSERT_EQ(shown["ranks"].size(), static_cast<size_t>(worldSize()));
  for (const json& rank : shown["ranks"]) {
    EXPECT_EQ(rank["straggler"].get<bool>(), rank["rank"].get<int>() == slow) << rank.dump();
    EXPECT_TRUE(rank["wait_ms"].is_number()) << rank.dump();
  }
  for (const json& op : shown["comm_ops"]) EXPECT_TRUE(op["wait_ms"].is_number()) << op.dump();
}

TEST_P(StragglerRun, ARunWithoutTheDelayHasItsWaitsMeasuredAndNoStraggler) {
  const int64_t run_id = run(20, {});
  storage::Database db(dbPath());
  expectEveryCollectiveSplit(db, run_id);
  for (const storage::RankCommStats& rank : storage::commStatsByRank(db, run_id)) {
    SCOPED_TRACE(rank.rank);
    EXPECT_TRUE(rank.mean_wait_ms.has_value());
    EXPECT_FALSE(rank.straggler) << "mean wait " << rank.mean_wait_ms.value_or(-1) << " ms, peers' "
                                 << rank.peers_mean_wait_ms.value_or(-1);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, StragglerRun, ::testing::Values(3, 4),
                         [](const auto& info) { return fmt::format("{}Ranks", info.param); });

}  // namespace
}  // namespace ringmaster
