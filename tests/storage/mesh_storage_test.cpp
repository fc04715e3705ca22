// Issue 34, storage of the device mesh: telemetry lines as a worker writes them, through the real
// recorder into a real SQLite file, keep each comm event's dimension, each rank's coordinates and
// the run's mesh; communication per dimension is counted from them; the queries that guessed from
// the strategy's name ("pipeline") read the stored data-parallel size instead, for every mesh of
// four ranks; and a database of the previous schema (16) is migrated with its runs' meshes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "db/database.h"
#include "query/comm_by_dimension.h"
#include "query/comm_stats.h"
#include "query/run_report.h"
#include "query/runs.h"
#include "query/summary.h"
#include "recorder/recorder.h"
#include "storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster::storage {
namespace {

// A telemetry line as a worker's writer emits it.
std::string line(int rank, uint64_t seq, double t, EventBody body) {
  return encodeEvent({.rank = rank, .seq = seq, .time = t, .body = std::move(body)});
}

HelloEvent hello(int world, std::optional<MeshAxes> mesh = {},
                 std::optional<MeshAxes> coords = {}) {
  return {.world_size = world,
          .host = "h",
          .device = "cpu",
          .strategy = "pipeline",  // a label no query may read the mesh from
          .mesh = mesh,
          .coords = coords};
}

// One comm event of 2 ms ending at `t`, in step `step`, over `dim`'s group.
CommEvent comm(const std::string& dim, int64_t step, uint64_t bytes) {
  return {.seq_op = 0,
          .op = "all_reduce",
          .group = dim + "0",
          .bytes = bytes,
          .dtype = "float32",
          .duration_ms = 2,
          .step = step,
          .dim = dim};
}

class MeshStorage : public testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    path_ = (dir_ / "runs.db").string();
    db_.emplace(path_);
  }
  void TearDown() override {
    db_.reset();
    StorageTest::TearDown();
  }
  int64_t newRun(int world, const std::string& strategy = "ddp") {
    return createRun(
        *db_, {.name = "mesh", .spec_json = "{}", .strategy = strategy, .world_size = world});
  }
  // Feeds the lines through a recorder of the run, every one stored.
  void record(int64_t run, const std::vector<std::string>& lines) {
    Recorder recorder(path_, run, 0);
    for (const std::string& text : lines) ASSERT_TRUE(recorder.submitLine(text)) << text;
    recorder.flush();
    EXPECT_EQ(recorder.counts().stored, static_cast<int64_t>(lines.size()));
    EXPECT_EQ(recorder.counts().malformed + recorder.counts().rejected, 0);
  }
  std::string path_;
  std::optional<Database> db_;
};

// A 2 x 2 (dp x tp) run: each rank's hello names the mesh (ranks 0..2 with their coordinates,
// rank 3 without: it gets the mesh's rank order's), then per step one tp all-reduce of 1 KiB and
// one dp all-reduce of 4 KiB, 2 ms each, disjoint, and one step event with 1 ms exposed.
TEST_F(MeshStorage, CommRowsKeepTheirDimensionAndRanksTheirCoordinates) {
  const MeshAxes mesh{.dp = 2, .tp = 2, .pp = 1};
  const int64_t run = newRun(4);
  std::vector<std::string> lines;
  for (int rank = 0; rank < 4; ++rank) {
    uint64_t seq = 0;
    const MeshAxes coords{.dp = rank / 2, .tp = rank % 2, .pp = 0};
    lines.push_back(
        line(rank, seq++, 100, hello(4, mesh, rank < 3 ? std::optional(coords) : std::nullopt)));
    for (int step = 1; step <= 3; ++step) {
      const double t = 100 + step;
      lines.push_back(line(rank, seq++, t, comm("tp", step, 1024)));
      lines.push_back(line(rank, seq++, t + 0.01, comm("dp", step, 4096)));
      lines.push_back(
          line(rank, seq++, t + 0.02,
               StepEvent{.step = step, .samples = 8, .step_ms = 20, .exposed_comm_ms = 1}));
    }
  }
  // A line of a build before the field: its dimension is the world's.
  lines.push_back(R"({"v":1,"type":"comm","rank":0,"seq":10,"t":104.5,"seq_op":9,"op":"barrier",)"
                  R"("group":"world","bytes":0,"dtype":"float32","duration_ms":2,"algbw_gbps":0,)"
                  R"("busbw_gbps":0})");
  record(run, lines);

  const RunRecord stored = loadRun(*db_, run);
  EXPECT_EQ(stored.mesh, mesh);
  EXPECT_EQ(stored.dataParallelSize(), 2);
  const std::vector<RankRecord> ranks = loadRanks(*db_, run);
  ASSERT_EQ(ranks.size(), 4u);
  for (const RankRecord& rank : ranks) {
    ASSERT_TRUE(rank.coords) << rank.rank;
    EXPECT_EQ(*rank.coords, (MeshAxes{.dp = rank.rank / 2, .tp = rank.rank % 2, .pp = 0}))
        << rank.rank;
  }
  EXPECT_EQ(testing::queryInt(*db_, "SELECT count(*) FROM comm_events WHERE dim = 'tp'"), 12);
  EXPECT_EQ(testing::queryInt(*db_, "SELECT count(*) FROM comm_events WHERE dim = 'dp'"), 12);
  EXPECT_EQ(testing::queryInt(*db_, "SELECT count(*) FROM comm_events WHERE dim = 'world'"), 1);

  const CommByDimension by_dim = commByDimension(*db_, run);
  ASSERT_EQ(by_dim.dims.size(), 3u);
  EXPECT_EQ(by_dim.dims[0].dim, "dp");
  EXPECT_EQ(by_dim.dims[1].dim, "tp");
  EXPECT_EQ(by_dim.dims[2].dim, "world");
  for (const DimensionComm& dim : {by_dim.dims[0], by_dim.dims[1]}) {
    EXPECT_EQ(dim.ranks, 4);
    EXPECT_EQ(dim.operations, 12);
    EXPECT_DOUBLE_EQ(dim.total_ms, 24);    // 4 ranks x 3 ops x 2 ms
    EXPECT_DOUBLE_EQ(dim.ms_per_step, 2);  // one op per step
    EXPECT_FALSE(dim.exposed_ms);          // each rank's communication is two dimensions'
    EXPECT_FALSE(dim.wait_ms);
  }
  EXPECT_EQ(by_dim.dims[0].bytes, 12u * 4096);
  EXPECT_EQ(by_dim.dims[1].bytes, 12u * 1024);
  EXPECT_EQ(by_dim.dims[2].ranks, 1);
  EXPECT_DOUBLE_EQ(by_dim.dims[2].ms_per_step, 0);  // its one op belongs to no step
  ASSERT_EQ(by_dim.ranks.size(), 9u);
  EXPECT_EQ(by_dim.ranks[0].rank, 0);
  EXPECT_EQ(by_dim.ranks[0].dim, "dp");
  EXPECT_EQ(by_dim.ranks[2].dim, "world");
  EXPECT_EQ(by_dim.ranks[3].rank, 1);

  // The report and its JSON carry them: the dimensions, the mesh and each rank's coordinates.
  const nlohmann::json report = toJson(buildRunReport(*db_, run, 200));
  EXPECT_EQ(report["comm_dims"], toJson(by_dim));
  EXPECT_EQ(report["run"]["mesh"], (nlohmann::json{{"dp", 2}, {"tp", 2}, {"pp", 1}}));
  EXPECT_EQ(report["ranks"][3]["coords"], (nlohmann::json{{"dp", 1}, {"tp", 1}, {"pp", 0}}));
}

// A rank whose communication is all one dimension's has its steps' exposed time in it.
TEST_F(MeshStorage, ExposedTimeIsKnownWhereARanksCommunicationIsOneDimensions) {
  const int64_t run = newRun(2);
  std::vector<std::string> lines;
  for (int rank = 0; rank < 2; ++rank) {
    lines.push_back(line(rank, 0, 100, hello(2)));
    for (int step = 1; step <= 4; ++step) {
      lines.push_back(
          line(rank, static_cast<uint64_t>(2 * step - 1), 100 + step, comm("dp", step, 64)));
      lines.push_back(
          line(rank, static_cast<uint64_t>(2 * step), 100.5 + step,
               StepEvent{.step = step, .samples = 8, .step_ms = 10, .exposed_comm_ms = 0.5}));
    }
  }
  record(run, lines);
  const CommByDimension by_dim = commByDimension(*db_, run);
  ASSERT_EQ(by_dim.dims.size(), 1u);
  ASSERT_TRUE(by_dim.dims[0].exposed_ms);
  EXPECT_DOUBLE_EQ(*by_dim.dims[0].exposed_ms, 2 * 4 * 0.5);
  EXPECT_DOUBLE_EQ(by_dim.dims[0].ms_per_step, 2);
  // Without a hello's mesh, a run created as ddp keeps dp = world, and the rank order's coords.
  EXPECT_EQ(loadRun(*db_, run).mesh, (MeshAxes{.dp = 2, .tp = 1, .pp = 1}));
  EXPECT_EQ(loadRanks(*db_, run)[1].coords, (MeshAxes{.dp = 1, .tp = 0, .pp = 0}));
}

// Every mesh of four ranks, each labelled "pipeline" by its hello and its run: the job's samples
// per second count each replica once (dp / world of the ranks' sum), and a rank computing three
// times slower than the others is a straggler only where it has at least two data-parallel peers
// to compare with (its work group: the ranks that differ from it only in dp).
TEST_F(MeshStorage, SharesAndWorkGroupsFollowTheStoredDataParallelSize) {
  const std::vector<MeshAxes> meshes = {{4, 1, 1}, {1, 4, 1}, {1, 1, 4},
                                        {2, 2, 1}, {2, 1, 2}, {1, 2, 2}};
  for (const MeshAxes& mesh : meshes) {
    SCOPED_TRACE(fmt::format("{} x {} x {}", mesh.dp, mesh.tp, mesh.pp));
    const int64_t run = newRun(4, "pipeline");
    std::vector<std::string> lines;
    for (int rank = 0; rank < 4; ++rank) {
      lines.push_back(line(rank, 0, 100, hello(4, mesh)));
      for (int step = 1; step <= 3; ++step) {
        const double compute = rank == 3 ? 30 : 10;
        lines.push_back(line(rank, static_cast<uint64_t>(step), 100 + step,
                             StepEvent{.step = step,
                                       .samples = 8,
                                       .step_ms = 40,
                                       .compute_ms = compute,
                                       .exposed_comm_ms = 40 - compute}));
      }
    }
    record(run, lines);
    EXPECT_EQ(loadRun(*db_, run).dataParallelSize(), mesh.dp);
    // Each rank: 8 samples per 40 ms step = 200/s.
    EXPECT_DOUBLE_EQ(summarizeRun(*db_, run).samples_per_second, 200.0 * mesh.dp);
    const std::vector<RankCommStats> ranks = commStatsByRank(*db_, run);
    ASSERT_EQ(ranks.size(), 4u);
    EXPECT_EQ(ranks[3].straggler, mesh.dp >= 3) << "rank 3";
    for (int r = 0; r < 3; ++r) EXPECT_FALSE(ranks[static_cast<size_t>(r)].straggler) << r;
  }
}

// A database of the previous schema (16), with a run of each strategy and their ranks and comm
// rows, reaches the current one: comm rows are the world's, each run has its one-dimensional mesh
// (a pipeline's stages pp, the others' replicas dp) and each rank its coordinates on it.
TEST_F(MeshStorage, MigrationGivesOldRunsTheirMeshAndRanksTheirCoordinates) {
  db_.reset();
  const std::string old_path = (dir_ / "v16.db").string();
  {
    Database old(old_path, {.schema_version = 16});
    ASSERT_EQ(old.schemaVersion(), 16);
    old.exec(
        "INSERT INTO runs (id, name, spec, strategy, world_size, status, created_at) VALUES "
        "(1, 'single', '{}', 'single', 1, 'completed', 1), (2, 'ddp', '{}', 'ddp', 4, "
        "'completed', 2), (3, 'fsdp', '{}', 'fsdp', 3, 'completed', 3), (4, 'pipe', '{}', "
        "'pipeline', 4, 'completed', 4);"
        "INSERT INTO attempts (run_id, attempt, started_at) VALUES (1, 0, 1), (2, 0, 2), "
        "(3, 0, 3), (4, 0, 4);");
    for (const auto& [run, world] :
         std::vector<std::pair<int, int>>{{1, 1}, {2, 4}, {3, 3}, {4, 4}}) {
      for (int rank = 0; rank < world; ++rank) {
        old.exec(fmt::format(
            "INSERT INTO ranks (run_id, attempt, rank, host) VALUES ({0}, 0, {1}, 'h');"
            "INSERT INTO comm_events (run_id, attempt, rank, t, step, op, group_name, "
            "group_size, bytes, dtype, duration_ms, algbw_gbps, busbw_gbps) VALUES ({0}, 0, {1}, "
            "100, 1, 'all_reduce', 'world', {2}, 64, 'float32', 2, 1, 1)",
            run, rank, world));
      }
    }
  }
  Database db(old_path);
  EXPECT_EQ(db.schemaVersion(), currentSchemaVersion());
  const std::vector<MeshAxes> expected = {{1, 1, 1}, {4, 1, 1}, {3, 1, 1}, {1, 1, 4}};
  for (int run = 1; run <= 4; ++run) {
    SCOPED_TRACE(run);
    const RunRecord record = loadRun(db, run);
    EXPECT_EQ(record.mesh, expected[static_cast<size_t>(run - 1)]);
    for (const RankRecord& rank : loadRanks(db, run)) {
      const bool pipeline = record.strategy == "pipeline";
      EXPECT_EQ(rank.coords,
                (MeshAxes{.dp = pipeline ? 0 : rank.rank, .tp = 0, .pp = pipeline ? rank.rank : 0}))
          << rank.rank;
    }
    const CommByDimension by_dim = commByDimension(db, run);
    ASSERT_EQ(by_dim.dims.size(), 1u);
    EXPECT_EQ(by_dim.dims[0].dim, "world");
    EXPECT_EQ(by_dim.dims[0].operations, record.world_size);
  }
  // The pipeline's samples are its one replica's: each of its ranks reported the same 8.
  EXPECT_EQ(loadRun(db, 4).dataParallelSize(), 1);
}

}  // namespace
}  // namespace ringmaster::storage
