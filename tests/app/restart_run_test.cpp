// Issue 21, automatic restarts, on real runs: `ringmaster run` of the DDP example on 3 local ranks
// with checkpoints every 5 steps, one worker killed with SIGKILL once a checkpoint exists. With
// launch.max_restarts 2 the run resumes from the checkpoint as attempt 1 and completes, both
// attempts stored (attempt 0's root cause names the killed rank and SIGKILL), its final parameters
// byte-equal to an uninterrupted run's, and its rollups equal to rollups recomputed from the stored
// points (no step counted twice). With max_restarts 0 the run fails as before. Every process is
// found by PID through /proc and none is left behind.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/proc_files.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using storage::testing::queryText;
using testing::CapturedProcess;

constexpr int kSteps = 60;
constexpr int kCheckpointEvery = 5;
constexpr int kKilledRank = 2;

using testing::fileBytes;

class RestartRun : public testing::CliRunTest {
 protected:
  // The DDP example on 3 local ranks, steps slow enough (a wider model, larger batches) that a
  // worker can be killed between the first checkpoint and the last step.
  std::string writeSpec(const std::string& name, int max_restarts) const {
    json spec = testing::localDdpSpec(3);
    spec["name"] = name;
    spec["launch"]["max_restarts"] = max_restarts;
    spec["model"]["layers"] = json::array({784, 1024, 1024, 10});
    spec["train"]["steps"] = kSteps;
    spec["train"]["batch_size"] = 256;
    spec["telemetry"]["every_steps"] = 1;
    spec["checkpoint"] = {{"dir", (dir_ / (name + "_checkpoints")).string()},
                          {"every_steps", kCheckpointEvery}};
    return CliRunTest::writeSpec(name, spec);
  }
  fs::path checkpointDir(const std::string& name) const { return dir_ / (name + "_checkpoints"); }

  CapturedProcess start(const std::string& spec_path) const {
    return ringmaster({"run", spec_path, "-q", "--json"});
  }

  // Waits (bounded) for the first checkpoint of `name` and for run `run_id`'s rank kKilledRank of
  // attempt 0 to be stored, then kills that worker with SIGKILL; returns its pid, 0 when the run
  // ended or the time ran out first.
  pid_t killWorkerAfterFirstCheckpoint(CapturedProcess& run, const std::string& name,
                                       int64_t run_id) {
    const fs::path first = checkpointDir(name) / fmt::format("step_{:08d}", kCheckpointEvery);
    const auto deadline = std::chrono::steady_clock::now() + 180s;
    while (std::chrono::steady_clock::now() < deadline) {
      run.readFor(50ms);
      if (run.status()) return 0;
      if (!fs::exists(first) || !fs::exists(dbPath())) continue;
      storage::Database db(dbPath());
      const int64_t pid = queryInt(
          db, fmt::format("SELECT pid FROM ranks WHERE run_id = {} AND attempt = 0 AND rank = {}",
                          run_id, kKilledRank));
      if (pid <= 0) continue;
      EXPECT_EQ(::kill(static_cast<pid_t>(pid), SIGKILL), 0);
      return static_cast<pid_t>(pid);
    }
    return 0;
  }

  bool noProcessesLeft() const { return testing::noProcessOfRunsLeftUnder(dir_); }
  void TearDown() override {
    for (pid_t pid : testing::processesOfRunsUnder(dir_))
      ::kill(pid, SIGKILL);  // only after a failure
    StorageTest::TearDown();
  }
};

TEST_F(RestartRun, AKilledWorkerRestartsEveryWorkerFromTheCheckpointAsAttemptOne) {
  // The uninterrupted run the restarted one must equal (run 1).
  {
    CapturedProcess reference = start(writeSpec("reference", 0));
    const ExitStatus status = reference.wait(240s);
    ASSERT_TRUE(status.ok()) << status.describe() << "\n" << reference.err();
  }
  CapturedProcess run = start(writeSpec("restarted", 2));
  const pid_t killed = killWorkerAfterFirstCheckpoint(run, "restarted", 2);
  ASSERT_NE(killed, 0) << "the run ended before a worker could be killed:\n" << run.err();
  const ExitStatus status = run.wait(240s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.err();
  EXPECT_TRUE(noProcessesLeft());

  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 2"), "completed");
  EXPECT_EQ(queryInt(db, "SELECT error IS NULL FROM runs WHERE id = 2"), 1);
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM attempts WHERE run_id = 2"), 2);
  const std::string cause =
      queryText(db, "SELECT error FROM attempts WHERE run_id = 2 AND attempt = 0");
  EXPECT_NE(cause.find(fmt::format("rank {}", kKilledRank)), std::string::npos) << cause;
  EXPECT_NE(cause.find(fmt::format("pid {}", killed)), std::string::npos) << cause;
  EXPECT_NE(cause.find("SIGKILL"), std::string::npos) << cause;
  EXPECT_EQ(queryInt(db, "SELECT error_rank FROM attempts WHERE run_id = 2 AND attempt = 0"),
            kKilledRank);
  EXPECT_EQ(queryInt(db, "SELECT error IS NULL FROM attempts WHERE run_id = 2 AND attempt = 1"), 1);
  // Attempt 1 went on from a checkpoint of attempt 0: the step after one, no later than where
  // attempt 0 stopped, and it reached the end.
  const int64_t resumed =
      queryInt(db, "SELECT first_step FROM attempts WHERE run_id = 2 AND attempt = 1");
  const int64_t stopped =
      queryInt(db, "SELECT last_step FROM attempts WHERE run_id = 2 AND attempt = 0");
  EXPECT_GT(resumed, kCheckpointEvery);
  EXPECT_EQ((resumed - 1) % kCheckpointEvery, 0) << resumed;
  EXPECT_LE(resumed, stopped + 1);
  EXPECT_EQ(queryInt(db, "SELECT last_step FROM attempts WHERE run_id = 2 AND attempt = 1"),
            kSteps);
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM ranks WHERE run_id = 2 AND attempt = 1 AND "
                     "status = 'completed'"),
            3);
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM logs WHERE run_id = 2 AND attempt = 1 AND "
                     "message LIKE 'resuming from %'"),
            1);

  // `show` marks the attempts: when each began, where attempt 1 resumed, what it rolled back.
  {
    CapturedProcess show = ringmaster({"show", "2", "--json"});
    ASSERT_TRUE(show.wait(60s).ok()) << show.err();
    const json attempts = json::parse(show.out())["attempts"];
    ASSERT_EQ(attempts.size(), 2u) << attempts.dump();
    EXPECT_EQ(attempts[0]["error_rank"], kKilledRank);
    EXPECT_EQ(attempts[1]["first_step"], resumed);
    if (stopped >= resumed) {
      EXPECT_EQ(attempts[1]["rolled_back"], json::array({resumed, stopped}));
    }
    CapturedProcess text = ringmaster({"show", "2"});
    ASSERT_TRUE(text.wait(60s).ok()) << text.err();
    EXPECT_NE(text.out().find(fmt::format("attempt 1: began")), std::string::npos) << text.out();
    EXPECT_NE(text.out().find(fmt::format("resumed from the checkpoint of step {}", resumed - 1)),
              std::string::npos)
        << text.out();
  }

  // The same parameters and optimizer state as the uninterrupted run, byte for byte.
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    const fs::path last = fs::path(fmt::format("step_{:08d}", kSteps)) / file;
    const std::string expected = fileBytes(checkpointDir("reference") / last);
    ASSERT_FALSE(expected.empty()) << last;
    EXPECT_TRUE(fileBytes(checkpointDir("restarted") / last) == expected) << last;
  }

  // Every step once in the rollups: each bucket equals the one recomputed from the stored points.
  EXPECT_EQ(
      queryInt(
          db,
          "SELECT sum(n) FROM series_rollups WHERE run_id = 2 AND metric = 'loss' AND rank = 0 AND "
          "width = 64"),
      kSteps);
  const std::string points =
      "FROM scalar_points p WHERE p.run_id = r.run_id AND p.metric = r.metric AND p.rank = r.rank "
      "AND p.step / r.width = r.bucket";
  EXPECT_GT(queryInt(db, "SELECT count(*) FROM series_rollups WHERE run_id = 2"), 0);
  EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM series_rollups r "
                                     "WHERE r.run_id = 2 AND (r.n != (SELECT "
                                     "count(*) {0}) OR abs(r.sum - (SELECT total(value) {0})) > "
                                     "1e-9 * (1 + abs(r.sum)) OR r.min != (SELECT min(value) {0}) "
                                     "OR r.max != (SELECT max(value) {0}) OR r.first_step != "
                                     "(SELECT min(step) {0}) OR r.last_step != (SELECT max(step) "
                                     "{0}))",
                                     points)),
            0);
}

TEST_F(RestartRun, WithoutRestartsAKilledWorkerFailsTheRun) {
  CapturedProcess run = start(writeSpec("once", 0));
  const pid_t killed = killWorkerAfterFirstCheckpoint(run, "once", 1);
  ASSERT_NE(killed, 0) << "the run ended before a worker could be killed:\n" << run.err();
  const ExitStatus status = run.wait(240s);
  EXPECT_FALSE(status.ok()) << run.err();
  EXPECT_TRUE(noProcessesLeft());

  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "failed");
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM attempts WHERE run_id = 1"), 1);
  const std::string cause = queryText(db, "SELECT error FROM runs WHERE id = 1");
  EXPECT_NE(cause.find(fmt::format("rank {} (pid {})", kKilledRank, killed)), std::string::npos)
      << cause;
  EXPECT_NE(cause.find("SIGKILL"), std::string::npos) << cause;
  EXPECT_EQ(queryText(db, "SELECT error FROM attempts WHERE run_id = 1 AND attempt = 0"), cause);
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM ranks WHERE run_id = 1 AND attempt > 0"), 0);
}

}  // namespace
}  // namespace ringmaster
