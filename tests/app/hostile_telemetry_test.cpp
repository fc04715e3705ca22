// `ringmaster run` against a stand-in node agent (RINGMASTER_NODE) that prints crafted telemetry,
// as issue 16's hostile test did, read by the real local launcher and recorder: a flood of 400,008
// events from 4 ranks is stored whole, done included (finding 3); events from ranks the run does
// not have are counted as bad lines and stored nowhere (finding 5); an oversized telemetry line,
// dropped by the launcher or reported by the agent, is counted and logged under its rank
// (finding 10), and `ringmaster show` reports the bad lines.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using storage::testing::queryInt;
using storage::testing::queryText;
using testing::CapturedProcess;

const std::string kRingmaster = testing::ringmasterBinary();
const std::string kDdpExample =
    std::string(ringmaster::testSourceDir()) + "/resources/examples/ddp_mlp.json";
constexpr int kWorld = 4;  // the example's ranks

// One rank's stream: hello, `steps` steps, done.
std::vector<std::string> rankLines(int rank, int64_t steps, int world = kWorld) {
  std::vector<std::string> lines;
  uint64_t seq = 0;
  auto add = [&](EventBody body) {
    lines.push_back(encodeEvent({.rank = rank,
                                 .seq = seq,
                                 .time = 1.8e9 + static_cast<double>(seq) * 1e-3,
                                 .body = std::move(body)}));
    ++seq;
  };
  add(HelloEvent{.world_size = world, .local_rank = rank, .host = "stand-in", .strategy = "ddp"});
  for (int64_t step = 1; step <= steps; ++step)
    add(StepEvent{.step = step, .loss = 1.0 / static_cast<double>(step), .samples = 8});
  add(DoneEvent{.status = DoneStatus::kCompleted, .final_step = steps});
  return lines;
}

class HostileTelemetry : public testing::CliRunTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    fs::create_directories(dir_);
  }

  // A stand-in for ringmaster-node: as the agent, it prints `stdout_text` on stdout and
  // `stderr_text` on stderr (from files, whatever their size) and exits 0.
  std::string standInNode(const std::string& stdout_text, const std::string& stderr_text) {
    std::ofstream(dir_ / "stdout.txt", std::ios::binary) << stdout_text;
    std::ofstream(dir_ / "stderr.txt", std::ios::binary) << stderr_text;
    const fs::path script = dir_ / "stand-in-node";
    std::ofstream(script) << fmt::format("#!/bin/sh\ncat '{}'\ncat '{}' >&2\n",
                                         (dir_ / "stdout.txt").string(),
                                         (dir_ / "stderr.txt").string());
    fs::permissions(script, fs::perms::owner_all);
    return script.string();
  }

  // `ringmaster run` of the 4-rank example with the stand-in node; returns its exit status.
  ExitStatus run(const std::string& node) {
    CapturedProcess process(kRingmaster, {"--db", dbPath(), "run", kDdpExample},
                            {{"RINGMASTER_NODE", node}});
    const ExitStatus status = process.wait(120s);
    EXPECT_FALSE(process.timedOut());
    err_ = process.err();
    return status;
  }

  nlohmann::json show() {
    CapturedProcess process(kRingmaster, {"--db", dbPath(), "show", "1", "--json"});
    EXPECT_TRUE(process.wait(60s).ok()) << process.err();
    return nlohmann::json::parse(process.out());
  }

  std::string err_;
};

// Finding 3, through the real launcher: the flood the issue measured (0.9 s, 179,092 lost).
TEST_F(HostileTelemetry, AFloodOfFourHundredThousandEventsIsStoredWholeDoneIncluded) {
  constexpr int64_t kSteps = 100'000;
  std::string text;
  std::vector<std::vector<std::string>> ranks;
  for (int rank = 0; rank < kWorld; ++rank) ranks.push_back(rankLines(rank, kSteps));
  for (size_t i = 0; i < ranks[0].size(); ++i)  // interleaved, as an agent multiplexes them
    for (const auto& lines : ranks) text += lines[i] + "\n";
  const ExitStatus status = run(standInNode(text, ""));
  EXPECT_TRUE(status.ok()) << status.describe() << "\n" << err_;

  storage::Database db(dbPath());
  EXPECT_EQ(queryInt(db, "SELECT events_stored FROM attempts"), kWorld * (kSteps + 2));
  EXPECT_EQ(queryInt(db, "SELECT events_dropped + lines_malformed FROM attempts"), 0);
  for (int rank = 0; rank < kWorld; ++rank) {
    SCOPED_TRACE(fmt::format("rank {}", rank));
    const std::string where = fmt::format("WHERE rank = {}", rank);
    EXPECT_EQ(queryInt(db, "SELECT count(*) FROM steps " + where), kSteps);
    EXPECT_EQ(queryInt(db, "SELECT max(step) FROM steps " + where), kSteps);
    EXPECT_EQ(queryText(db, "SELECT status FROM ranks " + where), "completed");
  }
}

// Findings 5 and 10: a 4-rank run receiving events from ranks 4, 2^31-1, a hello for rank
// 100,000, a line with rank -1, a 10 MB line on the agent's stdout and the agent's report of a
// worker's 20 MB line: nothing of them is stored, each is counted and logged, and `show` says so.
TEST_F(HostileTelemetry, EventsOfNoRankAndOversizedLinesAreCountedNotStored) {
  std::string text;
  for (int rank = 0; rank < kWorld; ++rank)
    for (const std::string& line : rankLines(rank, 3)) text += line + "\n";
  for (int rank : {4, std::numeric_limits<int>::max()})
    for (const std::string& line : rankLines(rank, 2)) text += line + "\n";  // 4 events each
  text += rankLines(100'000, 0, 100'001)[0] + "\n";                          // a hello
  text += R"({"v":1,"type":"log","rank":-1,"seq":0,"t":1.8e9,"level":"info","message":"x"})"
          "\n";
  text += std::string(10'485'760, 'x') + "\n";
  const LineSplitter::Line worker_line{.text = "{\"v\":1", .oversized = true, .bytes = 20'000'000};
  const std::string report =
      "[agent node 0] " + oversizedLineReport(1, worker_line, kMaxLineBytes) + "\n";
  const ExitStatus status = run(standInNode(text, report));
  EXPECT_TRUE(status.ok()) << status.describe() << "\n" << err_;

  // Ranks 4 and 2^31-1 send 4 events each: the decoder refuses their hellos (world_size 4 is not
  // above the rank), the recorder the rest.
  constexpr int64_t kRejected = 3 + 3 + 1, kMalformed = 2 + 1, kOversized = 2;
  storage::Database db(dbPath());
  EXPECT_EQ(queryInt(db, "SELECT lines_malformed FROM attempts"),
            kRejected + kMalformed + kOversized);
  EXPECT_EQ(queryInt(db, "SELECT events_stored FROM attempts"), kWorld * 5);
  for (const char* table :
       {"ranks", "steps", "logs", "seq_ranges", "scalar_rollups", "step_rollups"}) {
    SCOPED_TRACE(table);
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM {} WHERE rank < 0 OR rank >= {}",
                                       table, kWorld)),
              0);
  }
  EXPECT_EQ(queryInt(db, "SELECT count(DISTINCT rank) FROM ranks"), kWorld);
  // The agent's report is logged under the worker's rank, the launcher's own without one.
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM logs WHERE rank = 1 AND level = 'warn' AND message "
                     "LIKE '%oversized telemetry line from rank 1: 20000000 bytes%'"),
            1);
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM logs WHERE rank IS NULL AND level = 'warn' AND "
                     "message LIKE '%oversized telemetry line: 10485760 bytes%'"),
            1);
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM logs WHERE level = 'warn' AND message LIKE "
                     "'%which this run of 4 ranks does not have%'"),
            kRejected);
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM logs WHERE message LIKE '%hello event from rank "
                     "100000,%'"),
            1);
  EXPECT_EQ(show()["ingest"]["malformed"], kRejected + kMalformed + kOversized);
  CapturedProcess shown_text(kRingmaster, {"--db", dbPath(), "show", "1"});
  EXPECT_TRUE(shown_text.wait(60s).ok()) << shown_text.err();
  EXPECT_NE(shown_text.out().find(fmt::format("{} bad lines", kRejected + kMalformed + kOversized)),
            std::string::npos)
      << shown_text.out();
}

// Issue 32, point 7: a run whose workers all ended well without one hello (nothing at all; an
// error and a done; every rank's done) fails with a message saying so, and exits 1, where it
// printed "completed" beside the error's root cause and exited 0; a done without a hello is kept
// in its rank's row (it was counted as stored and kept nowhere). A run missing only some hellos
// completes, each done in its row.
TEST_F(HostileTelemetry, ARunWithoutAnyHelloFailsAndADoneWithoutHelloIsKept) {
  auto event = [](int rank, uint64_t seq, EventBody body) {
    return encodeEvent({.rank = rank, .seq = seq, .time = 1.8e9, .body = std::move(body)}) + "\n";
  };
  const std::string error =
      event(0, 0, ErrorEvent{.message = "real failure", .kind = "io", .fatal = true});
  std::string dones;
  for (int rank = 0; rank < kWorld; ++rank)
    dones += event(rank, 1, DoneEvent{.status = DoneStatus::kCompleted});
  const std::vector<std::pair<std::string, int64_t>> silent_runs = {
      {"", 0}, {error + event(0, 1, DoneEvent{}), 1}, {dones, kWorld}};  // stdout, its dones
  int64_t run_id = 0;
  for (const auto& [text, done_ranks] : silent_runs) {
    SCOPED_TRACE(text);
    const ExitStatus status = run(standInNode(text, ""));
    ++run_id;
    EXPECT_EQ(status.exit_code, 1) << status.describe() << "\n" << err_;
    storage::Database db(dbPath());
    const std::string run = fmt::format(" run_id = {}", run_id);
    EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = " + std::to_string(run_id)),
              "failed");
    EXPECT_TRUE(queryText(db, "SELECT error FROM runs WHERE id = " + std::to_string(run_id))
                    .starts_with("no rank said hello"));
    EXPECT_EQ(queryInt(db, "SELECT count(*) FROM ranks WHERE status = 'completed' AND" + run),
              done_ranks);
    EXPECT_EQ(queryInt(db, "SELECT events_stored FROM attempts WHERE" + run),
              done_ranks + (text.starts_with(error) ? 1 : 0));
    EXPECT_EQ(queryInt(db, "SELECT lines_malformed FROM attempts WHERE" + run), 0);
  }

  // Ranks 0 to 2 say hello and end; rank 3 sends only its done.
  std::string text;
  for (int rank = 0; rank < kWorld - 1; ++rank)
    for (const std::string& line : rankLines(rank, 2)) text += line + "\n";
  text += event(kWorld - 1, 0, DoneEvent{.status = DoneStatus::kCompleted});
  const ExitStatus status = run(standInNode(text, ""));
  ++run_id;
  EXPECT_TRUE(status.ok()) << status.describe() << "\n" << err_;
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, fmt::format("SELECT status FROM runs WHERE id = {}", run_id)),
            "completed");
  EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM ranks WHERE run_id = {} AND status = "
                                     "'completed'",
                                     run_id)),
            kWorld);
}

}  // namespace
}  // namespace ringmaster
