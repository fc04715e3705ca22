// Issue 37, `ringmaster sweep` on real local runs of the DDP example (2 ranks, a small MLP, few
// steps): a 2x2 grid completes with 4 runs grouped under one sweep (read back through
// query/sweeps.h, each run's spec holding its member's values); a member failing at run time and
// one whose spec is refused do not stop the others; Ctrl-C cancels the running run and records the
// rest not started, leaving no process (checked by PID), and a SIGKILLed sweep leaves none either
// and is found interrupted; `--detach` then `attach --sweep` follows a
// sweep to its end, Ctrl-C on an attach leaves the sweep running, and `cancel --sweep` stops it
// leaving neither its driver nor a run's process, and losing no run.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
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
#include "db/database.h"
#include "query/sweeps.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using storage::testing::queryText;
using testing::CapturedProcess;
using testing::CliResult;

class SweepCli : public testing::CliRunTest {
 protected:
  // The DDP example on 2 local ranks, small: `steps` steps of a 784-16-10 MLP.
  std::string smallSpec(const std::string& name, int steps) const {
    json spec = testing::localDdpSpec(2);
    spec["name"] = name;
    spec["model"]["layers"] = json::array({784, 16, 10});
    spec["train"]["steps"] = steps;
    spec["train"]["batch_size"] = 16;
    spec["telemetry"]["every_steps"] = 1;
    return writeSpec(name, spec);
  }

  storage::SweepRecord sweep(int64_t id) const {
    storage::Database db(dbPath());
    return storage::loadSweep(db, id);
  }

  // Reads the command's output until its stderr holds `needle` (at most `limit`).
  static bool awaitStderr(CapturedProcess& process, const std::string& needle,
                          std::chrono::seconds limit = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (process.err().find(needle) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      process.readFor(20ms);
    }
    return true;
  }

  // Waits until the runs' processes (agent and both workers) run; their PIDs.
  std::vector<pid_t> awaitRunProcesses() const {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    std::vector<pid_t> pids;
    while ((pids = testing::processesOfRunsUnder(dir_)).size() < 3 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    return pids;
  }

  static bool anyRuns(const std::vector<pid_t>& pids) {
    for (pid_t pid : pids)
      if (testing::processRuns(pid)) return true;
    return false;
  }

  void TearDown() override {
    // Only after a failure: a driver or a run's process still running, by PID.
    if (fs::exists(dbPath())) {
      storage::Database db(dbPath());
      for (const storage::SweepRecord& s : storage::listSweeps(db))
        if (s.driver_pid && testing::processRuns(static_cast<pid_t>(*s.driver_pid)) &&
            *s.driver_pid != ::getpid())
          ::kill(static_cast<pid_t>(*s.driver_pid), SIGKILL);
    }
    for (pid_t pid : testing::processesOfRunsUnder(dir_)) ::kill(pid, SIGKILL);
    StorageTest::TearDown();
  }
};

TEST_F(SweepCli, AGridOf2x2CompletesWithFourRunsGroupedUnderOneSweep) {
  const CliResult command =
      runRingmaster({"sweep", smallSpec("grid", 4), "--axis", "optimizer.lr=0.001,0.003", "--axis",
                     "train.batch_size=16,32", "--parallel", "2", "--name", "lr-by-batch"},
                    180s);
  ASSERT_EQ(command.status.exit_code, 0) << command.err << command.out;
  EXPECT_NE(command.out.find("best by final loss"), std::string::npos) << command.out;

  storage::Database db(dbPath());
  const std::vector<storage::SweepRecord> sweeps = storage::listSweeps(db);
  ASSERT_EQ(sweeps.size(), 1u);
  const storage::SweepRecord& s = sweeps[0];
  EXPECT_EQ(s.name, "lr-by-batch");
  EXPECT_EQ(s.status, "completed");
  EXPECT_EQ(s.parallel, 2);
  ASSERT_EQ(s.members.size(), 4u);
  EXPECT_EQ(s.membersEnded(), 4);
  const std::vector<std::pair<double, int>> expected = {
      {0.001, 16}, {0.001, 32}, {0.003, 16}, {0.003, 32}};
  std::set<int64_t> runs;
  for (const storage::SweepMember& member : s.members) {
    SCOPED_TRACE(member.position);
    EXPECT_EQ(member.state, "started");
    EXPECT_EQ(member.run_status, "completed");
    ASSERT_TRUE(member.run_id);
    runs.insert(*member.run_id);
    const std::optional<storage::SweepMembership> membership =
        storage::sweepOfRun(db, *member.run_id);
    ASSERT_TRUE(membership);
    EXPECT_EQ(membership->sweep_id, s.id);
    EXPECT_EQ(membership->position, member.position);
    // The run was started with its member's values.
    const json spec = json::parse(
        queryText(db, fmt::format("SELECT spec FROM runs WHERE id = {}", *member.run_id)));
    EXPECT_DOUBLE_EQ(spec["optimizer"]["lr"].get<double>(), expected[member.position].first);
    EXPECT_EQ(spec["train"]["batch_size"], expected[member.position].second);
    EXPECT_EQ(spec["train"]["steps"], 4);
  }
  EXPECT_EQ(runs.size(), 4u);
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM runs"), 4);

  const CliResult list = runRingmaster({"sweeps", "--json"}, 30s);
  ASSERT_EQ(list.status.exit_code, 0) << list.err;
  const json listed = json::parse(list.out);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["ended"], 4);
  const CliResult show = runRingmaster({"show", "--sweep", std::to_string(s.id), "--json"}, 30s);
  ASSERT_EQ(show.status.exit_code, 0) << show.err;
  const json report = json::parse(show.out);
  ASSERT_EQ(report["members"].size(), 4u);
  for (const json& member : report["members"])
    EXPECT_TRUE(member["figures"]["final_loss"].is_number()) << member.dump();
  const CliResult by_rate =
      runRingmaster({"show", "--sweep", std::to_string(s.id), "--by", "samples_per_second"}, 30s);
  ASSERT_EQ(by_rate.status.exit_code, 0) << by_rate.err;
  EXPECT_NE(by_rate.out.find("best by samples/s (higher is better)"), std::string::npos)
      << by_rate.out;
}

TEST_F(SweepCli, AMemberFailingAtRunTimeAndOneRefusedDoNotStopTheOthers) {
  // device=cuda is a valid spec that fails in the workers where no CUDA device is visible; "tpu"
  // is no device the spec knows.
  const CliResult command =
      runRingmaster({"sweep", smallSpec("failing", 3), "--axis", "device=cuda,tpu,cpu"}, 180s,
                    {{"CUDA_VISIBLE_DEVICES", ""}});
  EXPECT_EQ(command.status.exit_code, 1) << command.err;
  const storage::SweepRecord s = sweep(1);
  EXPECT_EQ(s.status, "completed");
  ASSERT_EQ(s.members.size(), 3u);
  EXPECT_EQ(s.members[0].state, "started");
  EXPECT_EQ(s.members[0].run_status, "failed");
  EXPECT_EQ(s.members[1].state, "refused");
  ASSERT_TRUE(s.members[1].error);
  EXPECT_NE(s.members[1].error->find("device"), std::string::npos) << *s.members[1].error;
  EXPECT_FALSE(s.members[1].run_id);
  EXPECT_EQ(s.members[2].state, "started");
  EXPECT_EQ(s.members[2].run_status, "completed");
  EXPECT_NE(command.err.find("member 2/3 (device=tpu): refused"), std::string::npos) << command.err;
  EXPECT_NE(command.err.find("member 1/3 (device=cuda): run 1 failed"), std::string::npos)
      << command.err;
}

TEST_F(SweepCli, CtrlCCancelsTheRunningRunRecordsTheRestNotStartedAndLeavesNoProcess) {
  CapturedProcess command = ringmaster(
      {"sweep", smallSpec("cancelled", 1000000), "--axis", "optimizer.lr=0.001,0.002,0.003"});
  ASSERT_TRUE(awaitStderr(command, "run 1 started")) << command.err();
  const std::vector<pid_t> processes = awaitRunProcesses();
  ASSERT_EQ(processes.size(), 3u) << command.err();
  command.signal(SIGINT);
  const ExitStatus status = command.wait(60s);
  EXPECT_EQ(status.exit_code, 130) << command.err();
  EXPECT_FALSE(anyRuns(processes));
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_, 1s));
  const storage::SweepRecord s = sweep(1);
  EXPECT_EQ(s.status, "cancelled");
  ASSERT_EQ(s.members.size(), 3u);
  EXPECT_EQ(s.members[0].state, "started");
  EXPECT_EQ(s.members[0].run_status, "cancelled");
  EXPECT_EQ(s.members[1].state, "not_started");
  EXPECT_EQ(s.members[2].state, "not_started");
  storage::Database db(dbPath());
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM runs WHERE status = 'running'"), 0);
}

TEST_F(SweepCli, AKilledDriverLeavesNoProcessAndItsSweepIsFoundInterrupted) {
  CapturedProcess command =
      ringmaster({"sweep", smallSpec("killed", 1000000), "--axis", "optimizer.lr=0.001,0.002"});
  ASSERT_TRUE(awaitStderr(command, "run 1 started")) << command.err();
  const std::vector<pid_t> processes = awaitRunProcesses();
  ASSERT_EQ(processes.size(), 3u) << command.err();
  command.signal(SIGKILL);
  command.wait(30s);
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_, 15s));
  EXPECT_FALSE(anyRuns(processes));
  // The next reading command finds the sweep's driver gone.
  const CliResult list = runRingmaster({"sweeps", "--json"}, 30s);
  ASSERT_EQ(list.status.exit_code, 0) << list.err;
  const json listed = json::parse(list.out);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["status"], "interrupted");
  const storage::SweepRecord s = sweep(1);
  EXPECT_EQ(s.members[0].run_status, "interrupted");
  EXPECT_EQ(s.members[1].state, "not_started");
}

TEST_F(SweepCli, DetachedSweepIsFollowedByAttachAndCancelLeavesNoProcessAndLosesNoRun) {
  // A short sweep detached, followed to its end.
  const CliResult detach = runRingmaster(
      {"sweep", smallSpec("short", 3), "--axis", "optimizer.lr=0.001,0.003", "--detach"}, 60s);
  ASSERT_EQ(detach.status.exit_code, 0) << detach.err;
  EXPECT_EQ(detach.out, "1\n");
  const fs::path log = dir_ / "runs.db-runs" / "sweep-1" / "driver.log";
  struct stat info {};
  ASSERT_EQ(::stat(log.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  ASSERT_TRUE(sweep(1).driver_pid);
  const auto driver1 = static_cast<pid_t>(*sweep(1).driver_pid);
  const CliResult attach = runRingmaster({"attach", "--sweep", "1"});
  ASSERT_EQ(attach.status.exit_code, 0) << attach.err;
  EXPECT_NE(attach.err.find("member 2/2 (optimizer.lr=0.003): run 2 completed"), std::string::npos)
      << attach.err;
  EXPECT_EQ(sweep(1).status, "completed");
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (testing::processRuns(driver1) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(testing::processRuns(driver1));

  // A long one: Ctrl-C on its attach leaves it running; cancel stops it.
  const CliResult long_detach = runRingmaster(
      {"sweep", smallSpec("long", 1000000), "--axis", "optimizer.lr=0.001,0.003", "--detach"}, 60s);
  ASSERT_EQ(long_detach.status.exit_code, 0) << long_detach.err;
  const auto driver2 = static_cast<pid_t>(*sweep(2).driver_pid);
  CapturedProcess follower = ringmaster({"attach", "--sweep", "2"});
  ASSERT_TRUE(awaitStderr(follower, "run 3 started")) << follower.err();
  const std::vector<pid_t> processes = awaitRunProcesses();
  ASSERT_EQ(processes.size(), 3u);
  follower.signal(SIGINT);
  ASSERT_EQ(follower.wait(30s).exit_code, 0) << follower.err();
  EXPECT_NE(follower.err().find("left sweep 2"), std::string::npos) << follower.err();
  EXPECT_EQ(sweep(2).status, "running");
  EXPECT_TRUE(testing::processRuns(driver2));

  const CliResult cancel = runRingmaster({"cancel", "--sweep", "2"});
  ASSERT_EQ(cancel.status.exit_code, 0) << cancel.err;
  EXPECT_NE(cancel.err.find("no process of its runs is left"), std::string::npos) << cancel.err;
  EXPECT_FALSE(testing::processRuns(driver2));
  EXPECT_FALSE(anyRuns(processes));
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_, 1s));
  const storage::SweepRecord s = sweep(2);
  EXPECT_EQ(s.status, "cancelled");
  EXPECT_EQ(s.members[0].run_status, "cancelled");
  EXPECT_EQ(s.members[1].state, "not_started");
  storage::Database db(dbPath());
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM runs"), 3);  // every run recorded, none running
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM runs WHERE status = 'running'"), 0);
  // A cancel of an ended sweep says so.
  const CliResult again = runRingmaster({"cancel", "--sweep", "2"}, 30s);
  EXPECT_EQ(again.status.exit_code, 2);
  EXPECT_NE(again.err.find("has already ended (cancelled)"), std::string::npos) << again.err;
}

}  // namespace
}  // namespace ringmaster
