// Issue 21, detached runs, on real local runs of the DDP example on 3 ranks: `ringmaster run
// --detach` returns once the agent runs; killing it (SIGKILL), then an `attach` mid-run, and Ctrl-C
// on another leave the workers going and the run `running`, never reconciled as interrupted; a
// last `attach` replays the spool from the last stored event per rank, follows the run to its end
// and records it completed, every event stored exactly once (counted per rank and kind against the
// spool's telemetry lines). `ringmaster cancel` of another detached run stops it, records it
// cancelled, and leaves neither the agent nor a worker, checked by their PIDs. An attach to a run
// whose agent was killed ends it failed, saying so, instead of waiting forever. Issue 32: a spool
// holding a crash's zero-filled region and a line far over the limit is attached in bounded time,
// each counted once as a bad line of the run.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/proc_files.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "recorder/run_lifecycle.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using storage::testing::queryText;
using testing::CapturedProcess;

constexpr int kRanks = 3;

class DetachedRun : public testing::CliRunTest {
 protected:
  fs::path jobDir(int64_t run) const {
    return dir_ / "runs.db-runs" / fmt::format("run-{}", run) / "job";
  }

  std::string writeSpec(const std::string& name, int steps) const {
    json spec = testing::localDdpSpec(kRanks);
    spec["name"] = name;
    spec["model"]["layers"] = json::array({784, 512, 512, 10});
    spec["train"]["steps"] = steps;
    spec["train"]["batch_size"] = 128;
    spec["telemetry"]["every_steps"] = 1;
    return CliRunTest::writeSpec(name, spec);
  }

  // Starts `run --detach` of `spec`, waits for its agent and workers to run, kills the command
  // (SIGKILL) if it still runs; returns the run id, from the job directory that appeared.
  int64_t startDetached(const std::string& spec, int64_t run) {
    CapturedProcess launch = ringmaster({"run", spec, "--detach", "-q"});
    const fs::path workers = jobDir(run) / "workers.pid";
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (testing::pidsInFile(workers).size() < kRanks &&
           std::chrono::steady_clock::now() < deadline)
      launch.readFor(20ms);
    launch.signal(SIGKILL);  // the launching process goes away, however far it got
    launch.wait(30s);
    EXPECT_EQ(testing::pidsInFile(workers).size(), static_cast<size_t>(kRanks)) << launch.err();
    return run;
  }

  bool everyRankSpooledAStep(int64_t run) const {
    std::set<int> ranks;
    for (const auto& entry : fs::directory_iterator(jobDir(run) / "spool")) {
      if (!entry.path().filename().string().starts_with("segment-")) continue;
      std::ifstream in(entry.path());
      for (std::string line; std::getline(in, line);) {
        DecodeResult decoded = decodeEvent(line.substr(std::min<size_t>(2, line.size())));
        if (line.starts_with("T ") && decoded.ok() &&
            std::holds_alternative<StepEvent>(decoded.event().body))
          ranks.insert(decoded.event().rank);
      }
    }
    return ranks.size() == static_cast<size_t>(kRanks);
  }

  // Steps of `run` stored so far.
  int64_t storedSteps(int64_t run) const {
    storage::Database db(dbPath());
    return queryInt(db, fmt::format("SELECT count(*) FROM steps WHERE run_id = {}", run));
  }

  void TearDown() override {
    // Only after a failure: the agents and workers still running, by their PIDs.
    for (int64_t run = 1; run <= 2; ++run)
      for (const char* file : {"agent.pid", "workers.pid"})
        for (pid_t pid : testing::pidsInFile(jobDir(run) / file))
          if (testing::processRuns(pid)) ::kill(pid, SIGKILL);
    StorageTest::TearDown();
  }
};

TEST_F(DetachedRun, SurvivesItsLaunchAndAnAttachKilledMidRunAndAttachRecordsEveryEventOnce) {
  const int64_t run = startDetached(writeSpec("detached", 400), 1);
  const std::vector<pid_t> workers = testing::pidsInFile(jobDir(run) / "workers.pid");
  const std::vector<pid_t> agent = testing::pidsInFile(jobDir(run) / "agent.pid");
  ASSERT_EQ(agent.size(), 1u);
  for (pid_t pid : workers) EXPECT_TRUE(testing::processRuns(pid)) << pid;
  {
    // Running with no recorder: not reconciled as interrupted.
    storage::Database db(dbPath());
    EXPECT_EQ(storage::reconcileInterruptedRuns(db), 0);
    EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "running");
    EXPECT_EQ(queryInt(db, "SELECT detached FROM runs WHERE id = 1"), 1);
  }
  CapturedProcess runs = ringmaster({"runs", "--json"});
  ASSERT_TRUE(runs.wait(30s).ok()) << runs.err();
  EXPECT_EQ(json::parse(runs.out()).at(0).at("status"), "running") << runs.out();

  // An attach records part of the run and is killed mid-run: the workers go on.
  {
    CapturedProcess attach = ringmaster({"attach", "1", "-q"});
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (storedSteps(run) < 30 && !attach.status() && std::chrono::steady_clock::now() < deadline)
      attach.readFor(100ms);
    ASSERT_FALSE(attach.status().has_value()) << "the run ended first:\n" << attach.err();
    attach.signal(SIGKILL);
    attach.wait(30s);
  }
  const int64_t stored_before = storedSteps(run);
  EXPECT_GE(stored_before, 30);
  // Ctrl-C on an attach leaves the run going (cancel is what stops it).
  {
    CapturedProcess attach = ringmaster({"attach", "1"});
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (storedSteps(run) <= stored_before && !attach.status() &&
           std::chrono::steady_clock::now() < deadline)
      attach.readFor(100ms);
    ASSERT_FALSE(attach.status().has_value()) << "the run ended first:\n" << attach.err();
    attach.signal(SIGINT);
    const ExitStatus left = attach.wait(60s);
    EXPECT_EQ(left.exit_code, 0) << left.describe() << "\n" << attach.err();
    EXPECT_NE(attach.err().find("left run 1: it goes on detached"), std::string::npos)
        << attach.err();
  }
  for (pid_t pid : workers) EXPECT_TRUE(testing::processRuns(pid)) << pid;
  {
    storage::Database db(dbPath());
    EXPECT_EQ(storage::reconcileInterruptedRuns(db), 0);
    EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "running");
  }

  // The second attach replays from the last stored event of each rank and completes the run.
  CapturedProcess attach = ringmaster({"attach", "1", "-q", "--json"});
  const ExitStatus status = attach.wait(300s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << attach.err();
  for (pid_t pid : workers) EXPECT_FALSE(testing::processRuns(pid)) << pid;
  EXPECT_FALSE(testing::processRuns(agent[0]));

  // What the workers wrote (the spool's telemetry lines), per rank and kind.
  std::map<std::pair<int, std::string>, int64_t> written;
  const auto wrote = [&](int rank, const char* kind) { return written[{rank, kind}]; };
  std::map<int, int64_t> written_per_rank;
  int64_t lines = 0;
  for (const auto& entry : fs::directory_iterator(jobDir(run) / "spool")) {
    if (!entry.path().filename().string().starts_with("segment-")) continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      if (!line.starts_with("T ")) continue;
      DecodeResult decoded = decodeEvent(line.substr(2));
      ASSERT_TRUE(decoded.ok()) << line;
      const TelemetryEvent& event = decoded.event();
      ++written[{event.rank, std::string(eventTypeName(event.body))}];
      ++written_per_rank[event.rank];
      ++lines;
    }
  }
  EXPECT_TRUE(fs::exists(jobDir(run) / "spool" / "end"));
  EXPECT_FALSE(fs::exists(jobDir(run) / "spool" / "dropped"));
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "completed");
  EXPECT_EQ(queryInt(db, "SELECT sum(events_stored) FROM attempts WHERE run_id = 1"), lines);
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE(fmt::format("rank {}", rank));
    EXPECT_EQ(wrote(rank, "hello"), 1);
    EXPECT_EQ(wrote(rank, "done"), 1);
    EXPECT_EQ(wrote(rank, "step"), 400);
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM steps WHERE run_id = 1 AND rank = {}",
                                       rank)),
              wrote(rank, "step"));
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM comm_events WHERE run_id = 1 AND "
                                       "rank = {}",
                                       rank)),
              wrote(rank, "comm"));
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM ranks WHERE run_id = 1 AND rank = {}",
                                       rank)),
              wrote(rank, "hello"));
    EXPECT_EQ(queryInt(db, fmt::format("SELECT total(last_seq - first_seq + 1) FROM seq_ranges "
                                       "WHERE run_id = 1 AND rank = {}",
                                       rank)),
              written_per_rank[rank]);
    EXPECT_EQ(
        queryText(db, fmt::format("SELECT status FROM ranks WHERE run_id = 1 AND rank = {}", rank)),
        "completed");
  }
  // Attaching to the ended run is refused, naming why.
  CapturedProcess again = ringmaster({"attach", "1"});
  EXPECT_EQ(again.wait(30s).exit_code, 2);
  EXPECT_NE(again.err().find("has ended (completed)"), std::string::npos) << again.err();
}

TEST_F(DetachedRun, CancelStopsItAndLeavesNoProcess) {
  const int64_t run = startDetached(writeSpec("cancelled", 100000), 1);
  const std::vector<pid_t> workers = testing::pidsInFile(jobDir(run) / "workers.pid");
  const std::vector<pid_t> agent = testing::pidsInFile(jobDir(run) / "agent.pid");
  ASSERT_EQ(agent.size(), 1u);
  ASSERT_EQ(workers.size(), static_cast<size_t>(kRanks));
  for (pid_t pid : workers) EXPECT_TRUE(testing::processRuns(pid)) << pid;
  // Cancelled while it trains: every rank has spooled a step.
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (!everyRankSpooledAStep(run) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(everyRankSpooledAStep(run));
  CapturedProcess cancel = ringmaster({"cancel", "1", "--json"});
  const ExitStatus status = cancel.wait(120s);
  EXPECT_EQ(status.exit_code, 130) << status.describe() << "\n" << cancel.err();
  EXPECT_NE(cancel.err().find("no process of the run is left"), std::string::npos) << cancel.err();
  EXPECT_FALSE(testing::processRuns(agent[0])) << agent[0];
  for (pid_t pid : workers) EXPECT_FALSE(testing::processRuns(pid)) << pid;
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "cancelled");
  for (int rank = 0; rank < kRanks; ++rank)
    EXPECT_EQ(
        queryText(db, fmt::format("SELECT status FROM ranks WHERE run_id = 1 AND rank = {}", rank)),
        "cancelled")
        << rank;
}

// An agent killed outright (SIGKILL: it writes no end) does not leave an attach waiting forever:
// the attach records what the spool holds, says the agent is gone and records the run failed.
TEST_F(DetachedRun, AttachToARunWhoseAgentWasKilledEndsItFailedSayingWhy) {
  const int64_t run = startDetached(writeSpec("agent-killed", 100000), 1);
  const std::vector<pid_t> agent = testing::pidsInFile(jobDir(run) / "agent.pid");
  ASSERT_EQ(agent.size(), 1u);
  ASSERT_EQ(::kill(agent[0], SIGKILL), 0);
  CapturedProcess attach = ringmaster({"attach", "1"});
  const ExitStatus status = attach.wait(120s);
  EXPECT_EQ(status.exit_code, 1) << status.describe() << "\n" << attach.err();
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "failed");
  const std::string error = queryText(db, "SELECT error FROM runs WHERE id = 1");
  EXPECT_NE(error.find("is gone without saying how the job ended"), std::string::npos) << error;
  // The workers die with their agent (they are its children, killed with it).
  for (pid_t pid : testing::pidsInFile(jobDir(run) / "workers.pid")) {
    for (int i = 0; i < 200 && testing::processRuns(pid); ++i) std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(testing::processRuns(pid)) << pid;
  }
}

// Issue 32, point 6: after a crash (the agent killed, its last segment ending in a region of
// zeros), and with a telemetry record four times the limit in a later segment, attach reads on
// past both, counts each as one bad line of the run and records it failed as any killed agent.
TEST_F(DetachedRun, AttachCountsAZeroFilledRegionAndAnOversizedRecordAsBadLinesOnce) {
  const int64_t run = startDetached(writeSpec("spool-damaged", 100000), 1);
  const std::vector<pid_t> agent = testing::pidsInFile(jobDir(run) / "agent.pid");
  ASSERT_EQ(agent.size(), 1u);
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (!everyRankSpooledAStep(run) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  ASSERT_EQ(::kill(agent[0], SIGKILL), 0);
  for (pid_t pid : testing::pidsInFile(jobDir(run) / "workers.pid"))
    for (int i = 0; i < 200 && testing::processRuns(pid); ++i) std::this_thread::sleep_for(50ms);
  const fs::path spool = jobDir(run) / "spool";
  std::vector<fs::path> segments;
  for (const auto& entry : fs::directory_iterator(spool))
    if (entry.path().filename().string().starts_with("segment-")) segments.push_back(entry.path());
  ASSERT_FALSE(segments.empty());
  std::sort(segments.begin(), segments.end());
  std::ofstream(segments.back(), std::ios::binary | std::ios::app)
      << std::string(3 * kMaxLineBytes, '\0');
  const int64_t next = std::stoll(segments.back().filename().string().substr(8)) + 1;
  std::ofstream(spool / fmt::format("segment-{:08}", next), std::ios::binary)
      << "T " << std::string(4 * kMaxLineBytes, '{') << "\nL read on after the damage\n";

  CapturedProcess attach = ringmaster({"attach", "1"});
  const ExitStatus status = attach.wait(120s);
  EXPECT_EQ(status.exit_code, 1) << status.describe() << "\n" << attach.err();
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "failed");
  EXPECT_EQ(queryInt(db, "SELECT sum(lines_malformed) FROM attempts WHERE run_id = 1"), 2)
      << attach.err();
  EXPECT_GT(storedSteps(run), 0);
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM logs WHERE run_id = 1 AND message = "
                     "'read on after the damage'"),
            1);
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM logs WHERE run_id = 1 AND message LIKE "
                     "'%oversized telemetry line: 4194304 bytes%'"),
            1);
}

}  // namespace
}  // namespace ringmaster
