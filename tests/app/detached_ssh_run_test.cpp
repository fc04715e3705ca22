// Issue 21's acceptance for detached runs over SSH, on two real sshd "hosts" on 127.0.0.1 (2 ranks
// each): `ringmaster run --detach` killed (SIGKILL) and every SSH connection cut, the workers go
// on; `ringmaster attach` reconnects (host keys verified against known_hosts), replays each host's
// spool from the last event stored per rank and completes the run, every event stored exactly once
// (per rank and kind against the spools' telemetry lines). `ringmaster cancel` of another detached
// run leaves no process on either host, checked by the PIDs the agents wrote.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/proc_files.h"
#include "common/ssh_hosts.h"
#include "common/test_paths.h"
#include "db/database.h"
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

constexpr int kRanksPerHost = 2;

class DetachedSshRun : public testing::CliRunTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    if (auto why = testing::sshdUnavailable(); !why.empty()) GTEST_SKIP() << why;
    servers_ = testing::startSshHosts(dir_, 2);
  }
  void TearDown() override {
    // Only after a failure: what the agents of the runs still run, by their PIDs.
    for (const std::string& dir : job_dirs_seen_)
      for (const char* file : {"agent.pid", "workers.pid"})
        for (pid_t pid : testing::pidsInFile(fs::path(dir) / file))
          if (testing::processRuns(pid)) ::kill(pid, SIGKILL);
    for (const std::string& dir : job_dirs_seen_) fs::remove_all(dir);
    servers_.clear();
    StorageTest::TearDown();
  }

  std::string writeSpec(const std::string& name, int steps) {
    json spec = testing::exampleSpec("ddp_mlp");
    spec["name"] = name;
    spec["train"]["steps"] = steps;
    spec["train"]["batch_size"] = 128;
    spec["model"]["layers"] = json::array({784, 512, 512, 10});
    spec["telemetry"]["every_steps"] = 1;
    spec["launch"]["hosts"] = testing::loopbackLaunchHosts(servers_, dir_, kRanksPerHost);
    return CliRunTest::writeSpec(name, spec);
  }
  // `ringmaster` with the hosts' known_hosts and ssh_config.
  CapturedProcess ringmaster(std::vector<std::string> args) {
    for (const std::string& option : testing::sshOptions(dir_)) args.push_back(option);
    return CliRunTest::ringmaster(args);
  }
  std::vector<std::string> jobDirsOf(int64_t run) {
    std::vector<std::string> dirs;
    if (!fs::exists(dbPath())) return dirs;
    storage::Database db(dbPath());
    const std::string text = queryText(
        db, fmt::format("SELECT coalesce(group_concat(job_dir, char(10)), '') FROM (SELECT "
                        "job_dir FROM run_job_dirs WHERE run_id = {} ORDER BY node_rank)",
                        run));
    for (size_t begin = 0; begin < text.size();) {
      const size_t end = std::min(text.find('\n', begin), text.size());
      dirs.push_back(text.substr(begin, end - begin));
      begin = end + 1;
    }
    for (const std::string& dir : dirs) job_dirs_seen_.push_back(dir);
    return dirs;
  }
  // Starts `run --detach` and, once every host's workers run, kills it (SIGKILL) and cuts every
  // SSH connection; returns the hosts' job directories.
  std::vector<std::string> startDetachedAndCut(const std::string& spec, int64_t run) {
    CapturedProcess launch = ringmaster({"run", spec, "--detach", "-q"});
    std::vector<std::string> dirs;
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    const auto allRunning = [&] {
      dirs = jobDirsOf(run);
      if (dirs.size() != servers_.size()) return false;
      for (const std::string& dir : dirs)
        if (testing::pidsInFile(fs::path(dir) / "workers.pid").size() != kRanksPerHost)
          return false;
      return true;
    };
    while (!allRunning() && std::chrono::steady_clock::now() < deadline) launch.readFor(50ms);
    EXPECT_TRUE(allRunning()) << launch.err();
    launch.signal(SIGKILL);
    launch.wait(30s);
    for (const auto& server : servers_)
      for (pid_t pid : testing::descendantsOf(server->pid()))
        if (testing::readProcFile(pid, "comm") == "sshd\n") ::kill(pid, SIGKILL);
    return dirs;
  }

  testing::SshdServers servers_;
  std::vector<std::string> job_dirs_seen_;
};

TEST_F(DetachedSshRun, SurvivesTheLauncherAndItsConnectionsAndAttachCompletesItOnce) {
  const std::vector<std::string> dirs = startDetachedAndCut(writeSpec("detached-ssh", 300), 1);
  ASSERT_EQ(dirs.size(), 2u);
  std::vector<pid_t> workers;
  for (const std::string& dir : dirs)
    for (pid_t pid : testing::pidsInFile(fs::path(dir) / "workers.pid")) workers.push_back(pid);
  std::this_thread::sleep_for(1s);  // the cut connections would have ended them by now
  for (pid_t pid : workers) EXPECT_TRUE(testing::processRuns(pid)) << pid;
  {
    storage::Database db(dbPath());
    EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "running");
  }

  CapturedProcess attach = ringmaster({"attach", "1", "-q"});
  const ExitStatus status = attach.wait(300s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << attach.err();
  for (pid_t pid : workers) EXPECT_FALSE(testing::processRuns(pid)) << pid;

  // The spools were read before a completed attach removes the job directories: count what the
  // workers wrote from the stored run's own rows instead, against the hello / done / step counts
  // the spec fixes, and every seq stored once.
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "completed");
  for (const std::string& dir : dirs) EXPECT_FALSE(fs::exists(dir)) << dir;
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM run_hosts WHERE run_id = 1"), 2);
  const int64_t total_seqs =
      queryInt(db, "SELECT total(last_seq - first_seq + 1) FROM seq_ranges WHERE run_id = 1");
  EXPECT_EQ(queryInt(db, "SELECT sum(events_stored) FROM attempts WHERE run_id = 1"), total_seqs);
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE(fmt::format("rank {}", rank));
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM steps WHERE run_id = 1 AND rank = {}",
                                       rank)),
              300);
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM seq_ranges WHERE run_id = 1 AND "
                                       "rank = {}",
                                       rank)),
              1);  // one range: no seq missing
    EXPECT_EQ(
        queryText(db, fmt::format("SELECT status FROM ranks WHERE run_id = 1 AND rank = {}", rank)),
        "completed");
  }
}

TEST_F(DetachedSshRun, CancelLeavesNoProcessOnEitherHost) {
  const std::vector<std::string> dirs = startDetachedAndCut(writeSpec("cancelled-ssh", 100000), 1);
  ASSERT_EQ(dirs.size(), 2u);
  std::vector<pid_t> processes;
  for (const std::string& dir : dirs)
    for (const char* file : {"agent.pid", "workers.pid"})
      for (pid_t pid : testing::pidsInFile(fs::path(dir) / file)) processes.push_back(pid);
  ASSERT_EQ(processes.size(), 2u + 2u * kRanksPerHost);
  for (pid_t pid : processes) EXPECT_TRUE(testing::processRuns(pid)) << pid;
  CapturedProcess cancel = ringmaster({"cancel", "1"});
  const ExitStatus status = cancel.wait(120s);
  EXPECT_EQ(status.exit_code, 130) << status.describe() << "\n" << cancel.err();
  EXPECT_NE(cancel.err().find("no process of the run is left on any of its 2 hosts"),
            std::string::npos)
      << cancel.err();
  for (pid_t pid : processes) EXPECT_FALSE(testing::processRuns(pid)) << pid;
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "cancelled");
}

}  // namespace
}  // namespace ringmaster
