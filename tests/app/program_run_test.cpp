// `ringmaster run` of program jobs (issue 19): a real PyTorch DDP script (Gloo, 4 ranks) launched
// through the node agent and reporting through the `ringmaster` Python package. Every event it sent
// is stored, step and comm events counted per rank, DDP's bucket all-reduces timed; its prints are
// logs, never telemetry; an exception on rank 2 is the run's root cause with its traceback and the
// flight recorder's last operations; SIGKILL of a script fails the run as a worker's does; Ctrl-C
// leaves no Python process. Skipped where /usr/bin/python3 cannot import torch.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/python_torch.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "db/statement.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::Statement;
using storage::testing::queryInt;
using storage::testing::queryText;
using storage::testing::storedEvents;
using testing::CapturedProcess;

const std::string kRingmaster = testing::ringmasterBinary();
const std::string kScript =
    std::string(ringmaster::testSourceDir()) + "/tests/app/scripts/ddp_program.py";
constexpr int kRanks = 4;
// The DDP model's parameters: Linear(32, 64) and Linear(64, 4) in float32, one gradient bucket.
constexpr int64_t kParameterBytes = (32 * 64 + 64 + 64 * 4 + 4) * 4;

bool processExists(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

class ProgramRun : public testing::CliRunTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    if (const std::string why = testing::pythonTorchUnavailable(RINGMASTER_PYTHON_TORCH);
        !why.empty())
      GTEST_SKIP() << why;
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (fs::exists(dbPath())) {
      for (pid_t pid : scriptPids()) ::kill(pid, SIGKILL);  // only after a failure
    }
    StorageTest::TearDown();
  }

  std::string writeSpec(std::vector<std::string> args, const std::string& name = "torch-ddp") {
    const json spec = {
        {"name", name},
        {"program",
         {{"python", RINGMASTER_PYTHON_TORCH}, {"script", kScript}, {"args", args}, {"steps", 10}}},
        {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", kRanks}}}}, {"timeout_s", 60}}}};
    const fs::path path = dir_ / "spec.json";
    std::ofstream(path) << spec.dump(2);
    return path.string();
  }
  std::vector<pid_t> scriptPids() const {
    storage::Database db(dbPath());
    std::vector<pid_t> pids;
    for (int rank = 0; rank < kRanks; ++rank) {
      const int64_t pid =
          queryInt(db, fmt::format("SELECT pid FROM ranks WHERE rank = {} AND pid > 0", rank));
      if (pid > 0) pids.push_back(static_cast<pid_t>(pid));
    }
    return pids;
  }
  bool noScriptLeft(std::chrono::seconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      bool any = false;
      for (pid_t pid : scriptPids()) any = any || processExists(pid);
      if (!any) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(50ms);
    }
  }
  // Waits until every rank has stored a step.
  bool waitForTraining(CapturedProcess& run, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      run.readFor(200ms);
      if (!fs::exists(dbPath())) continue;
      storage::Database db(dbPath());
      if (queryInt(db, "SELECT count(DISTINCT rank) FROM steps") == kRanks) return true;
    }
    return false;
  }
};

TEST_F(ProgramRun, FourRanksStoreEveryEventTheirBucketAllReducesAndTheirPrintsAsLogs) {
  const std::string telemetry = (dir_ / "telemetry.jsonl").string();
  CapturedProcess run(kRingmaster, {"--db", dbPath(), "run", writeSpec({"--steps", "10"}),
                                    "--save-telemetry", telemetry});
  const ExitStatus status = run.wait(240s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.out() << run.err();

  std::map<int, int64_t> sent;
  std::ifstream in(telemetry);
  for (std::string line; std::getline(in, line);) {
    const DecodeResult decoded = decodeEvent(line);
    ASSERT_TRUE(decoded.ok()) << line;
    EXPECT_EQ(decoded.event().seq, static_cast<uint64_t>(sent[decoded.event().rank]));
    ++sent[decoded.event().rank];
  }
  ASSERT_EQ(sent.size(), static_cast<size_t>(kRanks));
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "completed");
  EXPECT_EQ(queryText(db, "SELECT strategy FROM runs"), "ddp");
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE(fmt::format("rank {}", rank));
    EXPECT_EQ(storedEvents(db, rank), sent[rank]);
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM steps WHERE rank = {}", rank)), 10);
    EXPECT_EQ(queryText(db, fmt::format("SELECT status FROM ranks WHERE rank = {}", rank)),
              "completed");
    // DDP's gradient bucket, all-reduced once a step, timed through the comm hook; and the
    // script's own all_reduce of its loss.
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM comm_events WHERE rank = {} AND "
                                       "op = 'all_reduce' AND bytes = {} AND duration_ms > 0",
                                       rank, kParameterBytes)),
              10);
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM comm_events WHERE rank = {} AND "
                                       "op = 'all_reduce' AND bytes = 4",
                                       rank)),
              10);
    // Printed look-alikes of telemetry are the rank's log lines.
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM logs WHERE rank = {} AND message "
                                       "LIKE '[rank {}] {{\"v\":1,\"type\":\"step\"%'",
                                       rank, rank)),
              10);
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM logs WHERE rank = {} AND message "
                                       "LIKE '[rank {}] rank {} step % on stderr'",
                                       rank, rank, rank)),
              10);
  }
  // Every bucket's busbw is the engine's: algbw times 2(n-1)/n for an all_reduce.
  EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM comm_events WHERE bytes = {} AND "
                                     "abs(busbw_gbps - algbw_gbps * 1.5) > 1e-9 * busbw_gbps",
                                     kParameterBytes)),
            0);
  CapturedProcess show(kRingmaster, {"--db", dbPath(), "show", "1"});
  ASSERT_TRUE(show.wait(60s).ok()) << show.err();
  // The communication table's row of the buckets: 9,488 bytes, 40 all-reduces.
  EXPECT_NE(show.out().find("all_reduce  9.3 KiB     40"), std::string::npos) << show.out();
  EXPECT_NE(show.out().find("0 bad lines"), std::string::npos) << show.out();
  EXPECT_TRUE(noScriptLeft(10s));
}

// Issue 32, point 10: a script that logs its loss without samples= (steps of 0 samples) still
// has a final loss and a final step, in `show` and `runs`: the ranks' unweighted mean.
TEST_F(ProgramRun, ALossLoggedWithoutSamplesIsStillTheFinalLoss) {
  CapturedProcess run(kRingmaster,
                      {"--db", dbPath(), "run", writeSpec({"--steps", "3", "--no-samples"}), "-q"});
  const ExitStatus status = run.wait(240s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.out() << run.err();
  double mean = 0;
  {
    storage::Database db(dbPath());
    ASSERT_EQ(queryInt(db, "SELECT count(*) FROM steps WHERE step = 3 AND loss IS NOT NULL"),
              kRanks);
    EXPECT_EQ(queryInt(db, "SELECT count(*) FROM steps WHERE samples > 0"), 0);
    Statement losses(db, "SELECT avg(loss) FROM steps WHERE step = 3");
    ASSERT_TRUE(losses.run());
    mean = losses.columnDouble(0);
  }
  CapturedProcess show(kRingmaster, {"--db", dbPath(), "show", "1", "--json"});
  ASSERT_TRUE(show.wait(60s).ok()) << show.err();
  const json shown = json::parse(show.out());
  EXPECT_EQ(shown["final_step"], 3);
  ASSERT_TRUE(shown["final_loss"].is_number()) << shown.dump(2);
  EXPECT_NEAR(shown["final_loss"].get<double>(), mean, 1e-12);
  CapturedProcess runs(kRingmaster, {"--db", dbPath(), "runs", "--json"});
  ASSERT_TRUE(runs.wait(60s).ok()) << runs.err();
  const json listed = json::parse(runs.out());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["final_step"], 3);
  EXPECT_NEAR(listed[0]["final_loss"].get<double>(), mean, 1e-12);
}

TEST_F(ProgramRun, AnExceptionOnRankTwoIsTheRootCauseWithItsTracebackAndFlightRecorder) {
  CapturedProcess run(
      kRingmaster,
      {"--db", dbPath(), "run",
       writeSpec({"--steps", "10", "--fail-rank", "2", "--fail-step", "3"}), "--grace", "2"});
  const ExitStatus status = run.wait(240s);
  EXPECT_FALSE(status.ok());
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "failed");
  EXPECT_EQ(queryInt(db, "SELECT error_rank FROM runs"), 2);
  const std::string cause = queryText(db, "SELECT error FROM runs");
  EXPECT_NE(cause.find("RuntimeError: rank 2 found a bad batch at step 3"), std::string::npos)
      << cause;
  EXPECT_NE(cause.find("Traceback (most recent call last)"), std::string::npos) << cause;
  EXPECT_NE(cause.find("in check_inputs"), std::string::npos) << cause;
  // The flight recorder's last operations: the first two steps' all-reduces, completed.
  const std::string dump =
      queryText(db, "SELECT dump FROM flight_recorder_dumps WHERE rank = 2 LIMIT 1");
  ASSERT_FALSE(dump.empty());
  const json records = json::parse(dump);
  ASSERT_TRUE(records.is_array());
  EXPECT_GE(records.size(), 4u);
  EXPECT_NE(dump.find("all_reduce"), std::string::npos) << dump;
  CapturedProcess show(kRingmaster, {"--db", dbPath(), "show", "1"});
  show.wait(60s);
  EXPECT_NE(show.out().find("RuntimeError: rank 2 found a bad batch"), std::string::npos)
      << show.out();
  EXPECT_TRUE(noScriptLeft(10s));
}

TEST_F(ProgramRun, ASigkilledScriptFailsTheRunAsAWorkerDoes) {
  CapturedProcess run(
      kRingmaster, {"--db", dbPath(), "run", writeSpec({"--steps", "1000", "--step-sleep", "0.05"}),
                    "--grace", "2"});
  ASSERT_TRUE(waitForTraining(run, 120s)) << run.out() << run.err();
  const std::vector<pid_t> pids = scriptPids();
  ASSERT_EQ(pids.size(), static_cast<size_t>(kRanks));
  ::kill(pids[1], SIGKILL);
  EXPECT_FALSE(run.wait(120s).ok());
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "failed");
  EXPECT_EQ(queryInt(db, "SELECT error_rank FROM runs"), 1);
  EXPECT_NE(queryText(db, "SELECT error FROM runs").find("killed by SIGKILL"), std::string::npos)
      << queryText(db, "SELECT error FROM runs");
  EXPECT_TRUE(noScriptLeft(10s));
}

TEST_F(ProgramRun, CtrlCCancelsAndLeavesNoPythonProcess) {
  CapturedProcess run(
      kRingmaster, {"--db", dbPath(), "run", writeSpec({"--steps", "1000", "--step-sleep", "0.05"}),
                    "--grace", "2"});
  ASSERT_TRUE(waitForTraining(run, 120s)) << run.out() << run.err();
  run.signal(SIGINT);
  const ExitStatus status = run.wait(120s);
  EXPECT_EQ(status.exit_code, 130) << status.describe();
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "cancelled");
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM ranks WHERE status = 'cancelled'"), kRanks);
  EXPECT_TRUE(noScriptLeft(10s));
}

}  // namespace
}  // namespace ringmaster
