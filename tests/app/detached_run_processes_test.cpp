// Issue 32, point 1: as long as a detached run has processes, Ringmaster knows them and can stop
// them, whatever was deleted and whatever the run's recorded status. On real local runs of the
// DDP example (3 ranks, a small model): with the spool deleted mid-run, `attach` leaves the run
// `running` while its agent lives and `cancel` stops every process; with the whole job directory
// deleted, `cancel` stops every process too (by the agent's PID, start time and session recorded
// in the run database); a run recorded `failed` while its processes still run is cancelled by
// stopping them, and then has nothing left to cancel, said as such; a rank's children that outlive
// the agent are stopped too. A recorded PID whose start time is not the one recorded (a reused
// PID) is never signalled, nor its session's processes. Point 7: every file of a detached job's
// directory is owner-only whatever the umask (that attach and cancel refuse a --db with no file is
// FirstHourCli.AMissingDatabase...). Each test checks that no process of its runs is left.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
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
#include "process/process_identity.h"
#include "recorder/run_lifecycle.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using storage::testing::queryText;
using testing::CapturedProcess;

constexpr int kRanks = 3;
// Every process the job starts: its agent and one worker per rank.
constexpr size_t kJobProcesses = kRanks + 1;

class DetachedRunProcesses : public testing::CliRunTest {
 protected:
  fs::path jobDir(int64_t run) const {
    return dir_ / "runs.db-runs" / fmt::format("run-{}", run) / "job";
  }

  // A run that trains until it is stopped, on a model small enough to start in a moment.
  std::string writeLongSpec(const std::string& name) const {
    json spec = testing::localDdpSpec(kRanks);
    spec["name"] = name;
    spec["model"]["layers"] = json::array({784, 16, 10});
    spec["train"]["steps"] = 1000000;
    spec["train"]["batch_size"] = 16;
    return CliRunTest::writeSpec(name, spec);
  }

  // `run --detach` of a long run as run `run`; returns once its agent and every worker run.
  void startDetached(int64_t run) {
    CapturedProcess launch =
        ringmaster({"run", writeLongSpec(fmt::format("run{}", run)), "--detach", "-q"});
    const ExitStatus launched = launch.wait(120s);
    ASSERT_TRUE(launched.ok()) << launched.describe() << "\n" << launch.err();
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (jobProcesses() < kJobProcesses && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    ASSERT_EQ(jobProcesses(), kJobProcesses);
  }

  // How many processes of the test's jobs run (an attach's follower left out).
  size_t jobProcesses() const {
    size_t count = 0;
    for (pid_t pid : testing::processesOfRunsUnder(dir_))
      if (testing::readProcFile(pid, "cmdline").find("spool-follow") == std::string::npos) ++count;
    return count;
  }

  std::string status(int64_t run) const {
    storage::Database db(dbPath());
    return queryText(db, fmt::format("SELECT status FROM runs WHERE id = {}", run));
  }

  // Stops `command` by Ctrl-C (SIGINT) and returns how it ended.
  static ExitStatus interrupt(CapturedProcess& command) {
    command.signal(SIGINT);
    return command.wait(60s);
  }

  void TearDown() override {
    // Only after a failure: what is left of the test's runs, found by their command lines.
    for (pid_t pid : testing::processesOfRunsUnder(dir_)) ::kill(pid, SIGKILL);
    StorageTest::TearDown();
  }
};

// The spool deleted while the run trains: attach says so and leaves the run running while its
// agent lives (Ctrl-C leaves it, as for any attach); cancel then stops the agent and every worker
// and records the run cancelled.
TEST_F(DetachedRunProcesses, ASpoolDeletedMidRunLeavesTheRunRunningAndCancelStopsEveryProcess) {
  startDetached(1);
  fs::remove_all(jobDir(1) / "spool");

  CapturedProcess attach = ringmaster({"attach", "1"});
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (attach.err().find("is gone while the detached agent") == std::string::npos &&
         !attach.status() && std::chrono::steady_clock::now() < deadline)
    attach.readFor(50ms);
  ASSERT_NE(attach.err().find("is gone while the detached agent"), std::string::npos)
      << attach.err();
  EXPECT_EQ(status(1), "running");
  EXPECT_EQ(jobProcesses(), kJobProcesses);
  const ExitStatus left = interrupt(attach);
  EXPECT_EQ(left.exit_code, 0) << left.describe() << "\n" << attach.err();
  EXPECT_EQ(status(1), "running");

  CapturedProcess cancel = ringmaster({"cancel", "1"});
  const ExitStatus cancelled = cancel.wait(120s);
  EXPECT_EQ(cancelled.exit_code, 130) << cancelled.describe() << "\n" << cancel.err();
  EXPECT_NE(cancel.err().find("no process of the run is left"), std::string::npos) << cancel.err();
  EXPECT_EQ(status(1), "cancelled");
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_));
}

// The whole job directory deleted (its PID files with it): cancel finds the agent and its workers
// by what the launch recorded in the database, stops them and records the run cancelled.
TEST_F(DetachedRunProcesses, AJobDirectoryDeletedMidRunIsStillCancelledToItsLastProcess) {
  startDetached(1);
  fs::remove_all(jobDir(1));
  CapturedProcess cancel = ringmaster({"cancel", "1"});
  const ExitStatus cancelled = cancel.wait(120s);
  EXPECT_EQ(cancelled.exit_code, 130) << cancelled.describe() << "\n" << cancel.err();
  EXPECT_NE(cancel.err().find("no process of the run is left"), std::string::npos) << cancel.err();
  EXPECT_EQ(status(1), "cancelled");
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_));
}

// A run recorded as ended while its processes go on (as an attach did before issue 32 when the
// spool was gone), whatever status it ended with: cancel stops them and leaves the status; a
// second cancel has nothing to cancel and says so, not "nothing to attach to".
TEST_F(DetachedRunProcesses, ARunRecordedEndedWhileItsProcessesRunIsCancelledByStoppingThem) {
  const std::vector<std::string> statuses = {"failed", "completed"};
  for (size_t i = 0; i < statuses.size(); ++i) {
    const auto run = static_cast<int64_t>(i + 1);
    startDetached(run);
    fs::remove_all(jobDir(run) / "spool");
    {
      storage::Database db(dbPath());
      storage::finishRun(db, run, statuses[i]);
    }
    CapturedProcess cancel = ringmaster({"cancel", std::to_string(run)});
    const ExitStatus stopped = cancel.wait(120s);
    EXPECT_EQ(stopped.exit_code, 0) << stopped.describe() << "\n" << cancel.err();
    EXPECT_NE(cancel.err().find(fmt::format("run {} has ended ({}), but {} of its processes still "
                                            "run",
                                            run, statuses[i], kJobProcesses)),
              std::string::npos)
        << cancel.err();
    EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_)) << statuses[i];
    EXPECT_EQ(status(run), statuses[i]);

    CapturedProcess again = ringmaster({"cancel", std::to_string(run)});
    EXPECT_EQ(again.wait(60s).exit_code, 2) << again.err();
    EXPECT_NE(again.err().find(fmt::format("run {} has already ended ({}) and no process of it "
                                           "runs: there is nothing to cancel",
                                           run, statuses[i])),
              std::string::npos)
        << again.err();
    EXPECT_EQ(again.err().find("attach"), std::string::npos) << again.err();
  }
}

// A rank's child that outlives its rank and the agent (it is no child of the agent's, so it does
// not die with it) is still the job's, in the agent's session: the agent SIGKILLed, its workers
// gone with it and the run recorded failed, cancel finds the children and stops them.
TEST_F(DetachedRunProcesses, ChildrenThatOutliveTheAgentAreStillStoppedByCancel) {
  fs::create_directories(dir_);
  const fs::path script = dir_ / "leaves_a_child.sh";
  std::ofstream(script) << "sleep 600 </dev/null >/dev/null 2>&1 &\n"
                           "echo $! >> \"$1/children\"\n"
                           "exec sleep 600\n";
  const json spec = {
      {"name", "leaves-children"},
      {"program",
       {{"python", "sh"}, {"script", script.string()}, {"args", {dir_.string()}}, {"steps", 10}}},
      {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", kRanks}}}}}}};
  CapturedProcess launch =
      ringmaster({"run", CliRunTest::writeSpec("leaves-children", spec), "--detach", "-q"});
  ASSERT_TRUE(launch.wait(120s).ok()) << launch.err();
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (testing::pidsInFile(dir_ / "children").size() < kRanks &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  const std::vector<pid_t> children = testing::pidsInFile(dir_ / "children");
  ASSERT_EQ(children.size(), static_cast<size_t>(kRanks));
  const std::vector<pid_t> agent = testing::pidsInFile(jobDir(1) / "agent.pid");
  ASSERT_EQ(agent.size(), 1u);
  ASSERT_EQ(::kill(agent[0], SIGKILL), 0);
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_));  // the agent and its workers
  for (pid_t child : children) EXPECT_TRUE(testing::processRuns(child)) << child;
  {
    storage::Database db(dbPath());
    storage::finishRun(db, 1, "failed");
  }
  CapturedProcess cancel = ringmaster({"cancel", "1"});
  const ExitStatus stopped = cancel.wait(120s);
  EXPECT_EQ(stopped.exit_code, 0) << stopped.describe() << "\n" << cancel.err();
  EXPECT_NE(cancel.err().find(fmt::format("but {} of its processes still run", kRanks)),
            std::string::npos)
      << cancel.err();
  for (pid_t child : children) {
    EXPECT_FALSE(testing::processRuns(child)) << child;
    if (testing::processRuns(child)) ::kill(child, SIGKILL);
  }
}

// A process that is not the job's, in a session of its own (setsid: its PID is its session's id),
// recorded as a run's agent. With another start time than its own (the PID reused), or its own in
// another boot, neither it nor its session is signalled by cancel, whether the run is recorded
// running (its job directory gone) or ended; with its own start time in this boot, the same cancel
// stops it: the check is what spares it.
TEST_F(DetachedRunProcesses, ARecordedPidWithAnotherStartTimeIsNeverSignalled) {
  CapturedProcess stranger("/usr/bin/setsid", {"sleep", "600"});
  std::optional<ProcessIdentity> identity;
  for (int i = 0; i < 200 && !(identity = processIdentity(stranger.pid())); ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(identity.has_value());
  // setsid runs sleep in place (it is not a group leader), so the PID is the session's.
  for (int i = 0; i < 200 && readProcessStat(stranger.pid())->session != stranger.pid(); ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_EQ(readProcessStat(stranger.pid())->session, stranger.pid());

  json spec = testing::localDdpSpec(kRanks);
  spec["name"] = "reused";
  const auto recordRun = [&](uint64_t start_time, bool ended,
                             const std::string& boot_id = bootId()) {
    storage::Database db(dbPath());
    const int64_t run = storage::createRun(
        db, {.name = "reused", .spec_json = spec.dump(), .strategy = "ddp", .world_size = kRanks});
    storage::markRunDetached(db, run, {jobDir(run).string()});
    storage::recordDetachedAgent(db, run, 0,
                                 {.pid = stranger.pid(),
                                  .start_time = static_cast<int64_t>(start_time),
                                  .session = stranger.pid(),
                                  .boot_id = boot_id});
    if (ended) storage::finishRun(db, run, "failed");
    return run;
  };

  const int64_t running = recordRun(identity->start_time + 1, /*ended=*/false);
  CapturedProcess cancel_running = ringmaster({"cancel", std::to_string(running)});
  const ExitStatus first = cancel_running.wait(120s);
  // No agent of the run is found: cancelled or, when the follower ended before the cancel was
  // sent, failed; either way nothing of the stranger's was touched.
  EXPECT_TRUE(first.exit_code == 130 || first.exit_code == 1) << first.describe() << "\n"
                                                              << cancel_running.err();
  EXPECT_NE(status(running), "running");
  EXPECT_TRUE(identityRuns(*identity)) << cancel_running.err();

  const int64_t ended = recordRun(identity->start_time - 1, /*ended=*/true);
  CapturedProcess cancel_ended = ringmaster({"cancel", std::to_string(ended)});
  EXPECT_EQ(cancel_ended.wait(60s).exit_code, 2) << cancel_ended.err();
  EXPECT_NE(cancel_ended.err().find("there is nothing to cancel"), std::string::npos)
      << cancel_ended.err();
  EXPECT_TRUE(identityRuns(*identity));

  // Its own start time in another boot (the database read after a restart, or on another machine).
  const int64_t other_boot =
      recordRun(identity->start_time, /*ended=*/true, "00000000-0000-0000-0000-000000000000");
  CapturedProcess cancel_other_boot = ringmaster({"cancel", std::to_string(other_boot)});
  EXPECT_EQ(cancel_other_boot.wait(60s).exit_code, 2) << cancel_other_boot.err();
  EXPECT_TRUE(identityRuns(*identity));

  const int64_t its_own = recordRun(identity->start_time, /*ended=*/true);
  CapturedProcess cancel_own = ringmaster({"cancel", std::to_string(its_own), "--grace", "1"});
  EXPECT_EQ(cancel_own.wait(60s).exit_code, 0) << cancel_own.err();
  const ExitStatus stranger_end = stranger.wait(30s);
  EXPECT_EQ(stranger_end.signal, SIGTERM) << stranger_end.describe();
}

// Point 7: a detached job's files (PID files, node-binary, log, spool) are owner-only even under
// umask 022.
TEST_F(DetachedRunProcesses, TheJobsFilesAreOwnerOnlyWhateverTheUmask) {
  const mode_t saved = ::umask(022);
  startDetached(1);
  ::umask(saved);
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(jobDir(1))) {
    const auto mode = static_cast<unsigned>(entry.status().permissions() & fs::perms::all);
    EXPECT_EQ(mode, entry.is_directory() ? 0700u : 0600u)
        << entry.path() << fmt::format(" {:o}", mode);
    files += entry.is_regular_file() ? 1 : 0;
  }
  for (const char* name : {"agent.pid", "workers.pid", "node-binary", "agent.log"})
    EXPECT_TRUE(fs::exists(jobDir(1) / name)) << name;
  EXPECT_GE(files, 5);
  CapturedProcess cancel = ringmaster({"cancel", "1"});
  EXPECT_EQ(cancel.wait(120s).exit_code, 130) << cancel.err();
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_));
}

}  // namespace
}  // namespace ringmaster
