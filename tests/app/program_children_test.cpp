// Issue 32, points 2 and 3: what a program job's script leaves running, and its restarts, through
// `ringmaster run` and the real agent. A child that keeps the script's stdout, one that ignores
// SIGTERM, a daemon that closed every descriptor and left with setsid, and one that left but kept
// stdout: the run still ends once the grace period is over, each such process is named (PID and
// command) in the run's warnings, which `show` prints, and none is left. Ctrl-C ends a script
// and its child together, a second Ctrl-C kills them. With launch.max_restarts a failing rank
// restarts every rank, each attempt recorded and shown; without, the run fails as before. The ranks
// are tests/app/scripts/children_program.py under /usr/bin/python3, speaking the telemetry protocol
// themselves (no torch); every process they leave has the test's directory in its command line
// and is killed by PID in TearDown when a test failed before it ended.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
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

const std::string kScript =
    std::string(ringmaster::testSourceDir()) + "/tests/app/scripts/children_program.py";
constexpr const char* kPython = "/usr/bin/python3";

// Whether `pid` has ended (gone, or a zombie waiting for its parent).
bool processEnded(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string stat = testing::readProcFile(pid, "stat");
  const size_t name_end = stat.rfind(')');
  return name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] == 'Z';
}

bool processEndsWithin(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!processEnded(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

class ProgramChildren : public testing::CliRunTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is not installed";
    fs::create_directories(pidsDir());
  }
  void TearDown() override {
    for (pid_t pid : processesNamingTheTest()) ::kill(pid, SIGKILL);  // only after a failure
    StorageTest::TearDown();
  }

  fs::path pidsDir() const { return dir_ / "pids"; }
  // The ranks and what they left: every process whose command line names the pids directory.
  std::vector<pid_t> processesNamingTheTest() const {
    std::vector<pid_t> found;
    for (const pid_t pid : testing::processIds()) {
      if (pid != ::getpid() &&
          testing::readProcFile(pid, "cmdline").find(pidsDir().string()) != std::string::npos)
        found.push_back(pid);
    }
    return found;
  }
  // Waits (bounded) until none is left: a process killed a moment ago may not be gone yet.
  bool noProcessNamingTheTestWithin(std::chrono::seconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!processesNamingTheTest().empty()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }
  // The PIDs the leftovers wrote (pids/rankN/PID).
  std::vector<pid_t> leftovers() const {
    std::vector<pid_t> pids;
    for (const auto& entry : fs::recursive_directory_iterator(pidsDir()))
      if (entry.is_regular_file()) pids.push_back(std::stoi(entry.path().filename().string()));
    return pids;
  }

  std::string spec(const std::string& mode, int ranks, int fail_attempts, int max_restarts) {
    json launch = {{"hosts", {{{"host", "localhost"}, {"ranks", ranks}}}}, {"timeout_s", 30}};
    if (max_restarts > 0) launch["max_restarts"] = max_restarts;
    return writeSpec(mode, {{"name", "children-" + mode},
                            {"program",
                             {{"python", kPython},
                              {"script", kScript},
                              {"args", {mode, pidsDir().string(), std::to_string(fail_attempts)}}}},
                            {"launch", launch}});
  }
  // `ringmaster run` with a grace period of 1 s; the leftovers sleep 600 s, so a run that waited
  // for them would run into the limit of wait().
  CapturedProcess run(const std::string& spec_path) const {
    return ringmaster({"run", spec_path, "-q", "--grace", "1"});
  }

  // The run's warnings (show's "Warnings and errors") that name process `pid`.
  int64_t warningsNaming(int64_t run_id, pid_t pid, const std::string& saying) const {
    storage::Database db(dbPath());
    return queryInt(db, fmt::format("SELECT count(*) FROM logs WHERE run_id = {} AND level = "
                                    "'warn' AND message LIKE '%{} (%' AND message LIKE '%{}%'",
                                    run_id, pid, saying));
  }
  std::string show(int64_t run_id) const {
    CapturedProcess show = ringmaster({"show", std::to_string(run_id)});
    EXPECT_TRUE(show.wait(60s).ok()) << show.err();
    return show.out();
  }
};

// A child left in the script's process group, holding its stdout: stopped when the script ends
// (SIGTERM; SIGKILL after the grace period when it ignores SIGTERM), named, and the run completed.
TEST_F(ProgramChildren, AChildHoldingTheScriptsStdoutIsStoppedAndNamedWhenTheScriptEnds) {
  int64_t run_id = 0;
  for (const std::string mode : {"holds-stdout", "ignores-term"}) {
    SCOPED_TRACE(mode);
    ++run_id;
    fs::remove_all(pidsDir());
    CapturedProcess ringmaster = run(spec(mode, 1, 0, 0));
    const ExitStatus status = ringmaster.wait(60s);
    ASSERT_FALSE(ringmaster.timedOut()) << "the run waited for the child\n" << ringmaster.err();
    ASSERT_TRUE(status.ok()) << status.describe() << "\n" << ringmaster.err();
    const std::vector<pid_t> left = leftovers();
    ASSERT_EQ(left.size(), 1u);
    EXPECT_TRUE(processEndsWithin(left[0], 10s)) << "left running: " << left[0];
    {
      storage::Database db(dbPath());
      EXPECT_EQ(queryText(db, fmt::format("SELECT status FROM runs WHERE id = {}", run_id)),
                "completed");
      // Each named on one line, though its command line (python3 -c CODE) holds line breaks.
      EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM logs WHERE run_id = {} AND level "
                                         "= 'warn' AND instr(message, char(10)) > 0",
                                         run_id)),
                0);
      // Its stdout closed as it ended: nothing held it past the grace period.
      EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM logs WHERE run_id = {} AND "
                                         "message LIKE '%still held open%'",
                                         run_id)),
                0);
    }
    EXPECT_EQ(warningsNaming(run_id, left[0], "in its process group"), 1);
    if (std::string(mode) == "ignores-term") {
      EXPECT_EQ(warningsNaming(run_id, left[0], "killed with SIGKILL"), 1);
    }
    const std::string shown = show(run_id);
    EXPECT_NE(shown.find("Warnings and errors"), std::string::npos) << shown;
    EXPECT_NE(shown.find(fmt::format("{} (", left[0])), std::string::npos) << shown;
  }
  EXPECT_TRUE(noProcessNamingTheTestWithin(10s));
}

// A process that left the script's process group (setsid after a double fork) is adopted by the
// agent when the script ends: named and stopped, whether it closed every descriptor (a daemon)
// or kept the script's stdout (then the pipe is given up after the grace period, and said so).
TEST_F(ProgramChildren, AProcessThatLeftTheScriptsGroupIsNamedAndStopped) {
  int64_t run_id = 0;
  for (const std::string mode : {"daemon", "escaped-holder"}) {
    SCOPED_TRACE(mode);
    ++run_id;
    fs::remove_all(pidsDir());
    CapturedProcess ringmaster = run(spec(mode, 1, 0, 0));
    const ExitStatus status = ringmaster.wait(60s);
    ASSERT_FALSE(ringmaster.timedOut()) << "the run waited for the process\n" << ringmaster.err();
    ASSERT_TRUE(status.ok()) << status.describe() << "\n" << ringmaster.err();
    const std::vector<pid_t> left = leftovers();
    ASSERT_EQ(left.size(), 1u);
    EXPECT_TRUE(processEndsWithin(left[0], 10s)) << "left running: " << left[0];
    EXPECT_EQ(warningsNaming(run_id, left[0], "outside its process group"), 1) << ringmaster.err();
    if (std::string(mode) == "escaped-holder") {
      storage::Database db(dbPath());
      EXPECT_GE(queryInt(db, fmt::format("SELECT count(*) FROM logs WHERE run_id = {} AND level "
                                         "= 'warn' AND message LIKE '%stdout is still held open%'",
                                         run_id)),
                1);
    }
    EXPECT_NE(show(run_id).find(fmt::format("{} (", left[0])), std::string::npos);
  }
  EXPECT_TRUE(noProcessNamingTheTestWithin(10s));
}

// Ctrl-C while the script runs with a child holding its stdout: both end, the run is cancelled.
TEST_F(ProgramChildren, CtrlCEndsTheScriptAndItsChildTogether) {
  CapturedProcess ringmaster = run(spec("waits", 1, 0, 0));
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (leftovers().empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << ringmaster.err();
    ringmaster.readFor(50ms);
  }
  const std::vector<pid_t> left = leftovers();
  ASSERT_EQ(left.size(), 1u);
  ringmaster.signal(SIGINT);
  const ExitStatus status = ringmaster.wait(60s);
  ASSERT_FALSE(ringmaster.timedOut()) << ringmaster.err();
  EXPECT_EQ(status.exit_code, 130) << status.describe() << "\n" << ringmaster.err();
  EXPECT_TRUE(processEndsWithin(left[0], 10s)) << "left running: " << left[0];
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "cancelled");
  EXPECT_TRUE(noProcessNamingTheTestWithin(10s));
}

// A second Ctrl-C kills the job's whole session here, the script's child too (in the script's
// process group, which the agent's death does not reach). It ignores SIGTERM and the grace period
// is longer than the test waits: only that kill can end it.
TEST_F(ProgramChildren, ASecondCtrlCKillsTheScriptsChildToo) {
  CapturedProcess ringmaster =
      this->ringmaster({"run", spec("waits-ignores-term", 1, 0, 0), "--grace", "600"});
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (leftovers().empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << ringmaster.err();
    ringmaster.readFor(50ms);
  }
  const std::vector<pid_t> left = leftovers();
  ASSERT_EQ(left.size(), 1u);
  // The second once the first was taken (two pending SIGINTs would be one).
  ringmaster.signal(SIGINT);
  while ((ringmaster.out() + ringmaster.err()).find("cancelling") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline + 30s)
    ringmaster.readFor(50ms);
  ringmaster.signal(SIGINT);
  ringmaster.wait(60s);
  ASSERT_FALSE(ringmaster.timedOut()) << ringmaster.err();
  EXPECT_TRUE(processEndsWithin(left[0], 10s)) << "left running: " << left[0];
  EXPECT_TRUE(noProcessNamingTheTestWithin(10s));
}

struct RestartCase {
  int max_restarts;
  int fail_attempts;  // rank 1 fails in attempts 0 .. fail_attempts - 1
  const char* status;
  int attempts;
};

// Issue 32, point 3: launch.max_restarts restarts every rank of a program job, each attempt
// recorded with its root cause and shown as an engine job's.
TEST_F(ProgramChildren, AFailingRankRestartsEveryRankUpToMaxRestarts) {
  int64_t run_id = 0;
  for (const RestartCase& c :
       {RestartCase{1, 1, "completed", 2}, RestartCase{3, 2, "completed", 3}}) {
    SCOPED_TRACE(fmt::format("max_restarts {}, failing {} times", c.max_restarts, c.fail_attempts));
    ++run_id;
    fs::remove_all(pidsDir());
    CapturedProcess ringmaster = run(spec("plain", 2, c.fail_attempts, c.max_restarts));
    const ExitStatus status = ringmaster.wait(60s);
    ASSERT_TRUE(status.ok()) << status.describe() << "\n" << ringmaster.err();
    storage::Database db(dbPath());
    const std::string where = fmt::format("run_id = {}", run_id);
    EXPECT_EQ(queryText(db, fmt::format("SELECT status FROM runs WHERE id = {}", run_id)),
              c.status);
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM attempts WHERE {}", where)),
              c.attempts);
    for (int attempt = 0; attempt + 1 < c.attempts; ++attempt) {
      const std::string cause = queryText(
          db, fmt::format("SELECT error FROM attempts WHERE {} AND attempt = {}", where, attempt));
      EXPECT_NE(cause.find("rank 1"), std::string::npos) << cause;
      EXPECT_NE(cause.find("exit code 3"), std::string::npos) << cause;
    }
    EXPECT_EQ(queryInt(db, fmt::format("SELECT error IS NULL FROM attempts WHERE {} AND attempt "
                                       "= {}",
                                       where, c.attempts - 1)),
              1);
    // Both ranks of the last attempt completed, and said which attempt they were.
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM ranks WHERE {} AND attempt = {} AND "
                                       "status = 'completed'",
                                       where, c.attempts - 1)),
              2);
    CapturedProcess show = this->ringmaster({"show", std::to_string(run_id), "--json"});
    ASSERT_TRUE(show.wait(60s).ok()) << show.err();
    EXPECT_EQ(json::parse(show.out())["attempts"].size(), static_cast<size_t>(c.attempts));
    EXPECT_NE(this->show(run_id).find(fmt::format("attempt {}: began", c.attempts - 1)),
              std::string::npos);
  }
  EXPECT_TRUE(noProcessNamingTheTestWithin(10s));
}

// Without restarts, or once they are used up, a failing rank fails the run.
TEST_F(ProgramChildren, AFailingRankFailsTheRunWithoutARestartLeft) {
  int64_t run_id = 0;
  for (const RestartCase& c : {RestartCase{0, 1, "failed", 1}, RestartCase{1, 2, "failed", 2}}) {
    SCOPED_TRACE(fmt::format("max_restarts {}, failing {} times", c.max_restarts, c.fail_attempts));
    ++run_id;
    CapturedProcess ringmaster = run(spec("plain", 2, c.fail_attempts, c.max_restarts));
    const ExitStatus status = ringmaster.wait(60s);
    EXPECT_EQ(status.exit_code, 1) << status.describe() << "\n" << ringmaster.err();
    storage::Database db(dbPath());
    EXPECT_EQ(queryText(db, fmt::format("SELECT status FROM runs WHERE id = {}", run_id)),
              c.status);
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM attempts WHERE run_id = {}", run_id)),
              c.attempts);
    const std::string cause =
        queryText(db, fmt::format("SELECT error FROM runs WHERE id = {}", run_id));
    EXPECT_NE(cause.find("rank 1"), std::string::npos) << cause;
    EXPECT_NE(cause.find("exit code 3"), std::string::npos) << cause;
  }
  EXPECT_TRUE(noProcessNamingTheTestWithin(10s));
}

}  // namespace
}  // namespace ringmaster
