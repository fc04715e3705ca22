// Issue 34, "`ringmaster show` and `compare` give communication per dimension": telemetry lines as
// a worker writes them go through the real recorder into a real run database (a 2 x 2 dp x tp run
// whose comm events name their dimension, and a DDP run written by a build before the field); the
// real `ringmaster` binary then prints each run's communication per dimension, in text and JSON,
// and compares them side by side. Every process is reaped by CapturedProcess.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "db/database.h"
#include "recorder/recorder.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::CapturedProcess;
using testing::CliResult;

const std::string kRingmaster = testing::ringmasterBinary();

std::string line(int rank, uint64_t seq, double t, EventBody body) {
  return encodeEvent({.rank = rank, .seq = seq, .time = t, .body = std::move(body)});
}

CommEvent comm(const std::string& dim, int64_t step, uint64_t bytes, double ms) {
  return {.seq_op = static_cast<uint64_t>(step),
          .op = "all_reduce",
          .group = dim == "world" ? "world" : dim + "0",
          .bytes = bytes,
          .dtype = "float32",
          .duration_ms = ms,
          .step = step,
          .dim = dim};
}

// The cells of the row of `table_title`'s table whose first cell is `first`, split on runs of
// two spaces or more (cells such as "2 (24)" keep their single spaces); empty when there is none.
std::vector<std::string> row(const std::string& text, const std::string& table_title,
                             const std::string& first) {
  const size_t table = text.find(table_title);
  if (table == std::string::npos) return {};
  std::istringstream lines(text.substr(table));
  std::string current;
  std::getline(lines, current);  // the title
  while (std::getline(lines, current) && !current.empty()) {
    std::vector<std::string> cells;
    size_t at = current.find_first_not_of(' ');
    while (at != std::string::npos) {
      size_t end = current.find("  ", at);
      cells.push_back(current.substr(at, end == std::string::npos ? end : end - at));
      at = end == std::string::npos ? end : current.find_first_not_of(' ', end);
    }
    if (!cells.empty() && cells.front() == first) return cells;
  }
  return {};
}

class MeshCommCli : public storage::testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    fs::create_directories(dir_);
    path_ = (dir_ / "runs.db").string();
    storage::Database db(path_);
    recordMeshRun(db);
    recordOldDdpRun(db);
  }
  CliResult ringmaster(std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", path_});
    return testing::runToEnd(CapturedProcess(kRingmaster, args), 60s);
  }
  void record(storage::Database& db, int world, const std::vector<std::string>& lines) {
    const int64_t run = storage::createRun(
        db, {.name = "r", .spec_json = "{}", .strategy = "ddp", .world_size = world});
    storage::Recorder recorder(path_, run, 0);
    for (const std::string& text : lines) ASSERT_TRUE(recorder.submitLine(text)) << text;
    recorder.flush();
    ASSERT_EQ(recorder.counts().stored, static_cast<int64_t>(lines.size()));
    storage::finishRun(db, run, "completed");
  }
  // Run 1, 2 x 2 (dp x tp): per step and rank a tp all-reduce of 3 ms and a dp one of 1 ms.
  void recordMeshRun(storage::Database& db) {
    std::vector<std::string> lines;
    for (int rank = 0; rank < 4; ++rank) {
      uint64_t seq = 0;
      lines.push_back(
          line(rank, seq++, 100,
               HelloEvent{.world_size = 4,
                          .host = "h",
                          .device = "cpu",
                          .strategy = "ddp+tp",
                          .mesh = MeshAxes{.dp = 2, .tp = 2, .pp = 1},
                          .coords = MeshAxes{.dp = rank / 2, .tp = rank % 2, .pp = 0}}));
      for (int step = 1; step <= 5; ++step) {
        lines.push_back(line(rank, seq++, 100 + step, comm("tp", step, 1 << 20, 3)));
        lines.push_back(line(rank, seq++, 100.01 + step, comm("dp", step, 1 << 10, 1)));
        lines.push_back(line(rank, seq++, 100.02 + step,
                             StepEvent{.step = step, .loss = 1, .samples = 4, .step_ms = 20}));
      }
    }
    record(db, 4, lines);
  }
  // Run 2, DDP on 2 ranks, its comm lines without "dim" (a build before it): 2 ms per step.
  void recordOldDdpRun(storage::Database& db) {
    std::vector<std::string> lines;
    for (int rank = 0; rank < 2; ++rank) {
      lines.push_back(
          line(rank, 0, 100,
               HelloEvent{.world_size = 2, .host = "h", .device = "cpu", .strategy = "ddp"}));
      for (int step = 1; step <= 5; ++step) {
        lines.push_back(fmt::format(
            R"({{"v":1,"type":"comm","rank":{},"seq":{},"t":{},"seq_op":{},"op":"all_reduce",)"
            R"("group":"world","bytes":4096,"dtype":"float32","duration_ms":2,)"
            R"("algbw_gbps":1,"busbw_gbps":1,"step":{}}})",
            rank, 2 * step - 1, 100 + step, step, step));
        lines.push_back(line(rank, static_cast<uint64_t>(2 * step), 100.5 + step,
                             StepEvent{.step = step, .loss = 1, .samples = 4, .step_ms = 10}));
      }
    }
    record(db, 2, lines);
  }
  std::string path_;
};

TEST_F(MeshCommCli, ShowPrintsCommunicationPerDimension) {
  const CliResult shown = ringmaster({"show", "1"});
  ASSERT_TRUE(shown.status.ok()) << shown.err;
  const std::string title = "Communication per mesh dimension";
  // DIM RANKS OPS BYTES TOTAL MS WAIT MS EXPOSED MS MS/STEP
  const std::vector<std::string> tp = row(shown.out, title, "tp");
  ASSERT_EQ(tp.size(), 8u) << shown.out;
  EXPECT_EQ(tp[1], "4");
  EXPECT_EQ(tp[2], "20");
  EXPECT_TRUE(tp[3].starts_with("20") && tp[3].ends_with(" MiB")) << tp[3];
  EXPECT_EQ(tp[4], "60");  // 4 ranks x 5 steps x 3 ms
  EXPECT_EQ(tp[7], "3");
  const std::vector<std::string> dp = row(shown.out, title, "dp");
  ASSERT_EQ(dp.size(), 8u) << shown.out;
  EXPECT_EQ(dp[4], "20");
  EXPECT_EQ(dp[7], "1");
  EXPECT_TRUE(row(shown.out, title, "world").empty()) << shown.out;
  // Two dimensions: each rank's time per step in each.
  EXPECT_EQ(row(shown.out, "dp MS/STEP", "3"), (std::vector<std::string>{"3", "1", "3"}))
      << shown.out;

  const json report = json::parse(ringmaster({"show", "1", "--json"}).out);
  ASSERT_EQ(report["comm_dims"]["dims"].size(), 2u);
  EXPECT_EQ(report["comm_dims"]["dims"][0]["dim"], "dp");
  EXPECT_EQ(report["comm_dims"]["dims"][1]["dim"], "tp");
  EXPECT_DOUBLE_EQ(report["comm_dims"]["dims"][1]["total_ms"].get<double>(), 60);
  EXPECT_EQ(report["comm_dims"]["ranks"].size(), 8u);
  EXPECT_EQ(report["run"]["mesh"], (json{{"dp", 2}, {"tp", 2}, {"pp", 1}}));
  EXPECT_EQ(report["ranks"][2]["coords"], (json{{"dp", 1}, {"tp", 0}, {"pp", 0}}));

  // The old run's communication is all the world's, and so is its exposed time (none reported).
  const CliResult old = ringmaster({"show", "2"});
  const std::vector<std::string> world = row(old.out, title, "world");
  ASSERT_EQ(world.size(), 8u) << old.out;
  EXPECT_EQ(world[2], "10");
  EXPECT_EQ(world[7], "2");
}

TEST_F(MeshCommCli, CompareGivesCommunicationPerDimensionPerRun) {
  const CliResult compared = ringmaster({"compare", "1", "2"});
  ASSERT_TRUE(compared.status.ok()) << compared.err;
  const std::string title = "Communication per mesh dimension";
  EXPECT_EQ(row(compared.out, title, "dp"), (std::vector<std::string>{"dp", "1 (20)", "-"}))
      << compared.out;
  EXPECT_EQ(row(compared.out, title, "tp"), (std::vector<std::string>{"tp", "3 (60)", "-"}));
  EXPECT_EQ(row(compared.out, title, "world"), (std::vector<std::string>{"world", "-", "2 (20)"}));
  EXPECT_EQ(row(compared.out, "", "mesh (dp x tp x pp)"),
            (std::vector<std::string>{"mesh (dp x tp x pp)", "2 x 2 x 1", "2 x 1 x 1"}));

  const json document = json::parse(ringmaster({"compare", "1", "2", "--json"}).out);
  ASSERT_EQ(document["runs"].size(), 2u);
  EXPECT_EQ(document["runs"][0]["comm_dims"]["dims"].size(), 2u);
  ASSERT_EQ(document["runs"][1]["comm_dims"]["dims"].size(), 1u);
  EXPECT_EQ(document["runs"][1]["comm_dims"]["dims"][0]["dim"], "world");
  EXPECT_DOUBLE_EQ(document["runs"][1]["comm_dims"]["dims"][0]["ms_per_step"].get<double>(), 2);
}

}  // namespace
}  // namespace ringmaster
