// The Slurm test cluster (issue 35, tests/common/slurm_cluster.h) is a real one: a 2-node job runs
// one task per node, a job waiting for resources shows PENDING with reason Resources in
// `squeue --json` until scancel removes it, a killed slurmd ends its job NODE_FAIL, two clusters
// run side by side without sharing ports or job ids, a start-up failure names the daemon's error,
// and teardown leaves no process of the cluster, the slurmstepd of a killed slurmd included.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/proc_files.h"
#include "common/slurm_cluster.h"

namespace ringmaster::testing {
namespace {

using std::chrono::seconds;

std::set<std::string> linesOf(const std::string& text) {
  std::set<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.insert(line);
  return lines;
}

// The job's entry in `squeue --json`, or null when squeue does not list it.
nlohmann::json squeueJob(const SlurmCluster& cluster, const std::string& job_id) {
  const nlohmann::json all = nlohmann::json::parse(cluster.squeue({"--json"}));
  for (const nlohmann::json& job : all.at("jobs"))
    if (std::to_string(job.at("job_id").get<long>()) == job_id) return job;
  return nullptr;
}

// Waits (bounded) until squeue --json shows the job in `state` (with `reason` when given).
nlohmann::json waitForSqueueState(const SlurmCluster& cluster, const std::string& job_id,
                                  const std::string& state, const std::string& reason = "") {
  nlohmann::json job;
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    job = squeueJob(cluster, job_id);
    if (!job.is_null() && job.value("job_state", "") == state &&
        (reason.empty() || job.value("state_reason", "") == reason))
      return job;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return job;
}

std::string readAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Those of `pids` that still run.
std::vector<pid_t> stillRunning(const std::vector<pid_t>& pids) {
  std::vector<pid_t> running;
  for (const pid_t pid : pids)
    if (processRuns(pid)) running.push_back(pid);
  return running;
}

int countWithName(const std::vector<pid_t>& pids, const std::string& name) {
  return static_cast<int>(std::count_if(pids.begin(), pids.end(), [&](pid_t pid) {
    return readProcFile(pid, "comm") == name + "\n";
  }));
}

class SlurmClusterFixtureTest : public SlurmClusterTest {};

TEST_F(SlurmClusterFixtureTest, StartsWithEveryNodeIdleAtLoopbackAddresses) {
  EXPECT_EQ(cluster().nodeNames(), (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(cluster().nodeStates(),
            (std::map<std::string, std::string>{{"n1", "idle"}, {"n2", "idle"}}));
  const std::string n1 = cluster().command("scontrol", {"show", "node", "n1", "-o"}).out;
  EXPECT_NE(n1.find("NodeAddr=127.0.0.1"), std::string::npos) << n1;
  EXPECT_NE(n1.find("CPUTot=2"), std::string::npos) << n1;
}

TEST_F(SlurmClusterFixtureTest, ATwoNodeJobRunsOneTaskPerNode) {
  const std::filesystem::path out = cluster().dir() / "two-nodes.out";
  const std::string id =
      cluster().sbatch({"-N2", "--ntasks-per-node=1", "--output=" + out.string(), "--wrap",
                        "srun sh -c 'echo \"$SLURM_NODEID $SLURMD_NODENAME\"'"});
  const std::string final_line = cluster().waitForSacct(id, seconds(60));
  EXPECT_EQ(final_line, id + "|COMPLETED|0:0|n[1-2]") << cluster().logTails();
  EXPECT_EQ(linesOf(readAll(out)), (std::set<std::string>{"0 n1", "1 n2"}));
}

TEST_F(SlurmClusterFixtureTest, AJobWaitingForResourcesIsPendingUntilScancelRemovesIt) {
  const std::string holder = cluster().sbatch({"-N2", "--exclusive", "--wrap", "sleep 300"});
  ASSERT_EQ(waitForSqueueState(cluster(), holder, "RUNNING").value("job_state", ""), "RUNNING");
  const std::string waiting = cluster().sbatch({"-N1", "--wrap", "true"});
  const nlohmann::json pending = waitForSqueueState(cluster(), waiting, "PENDING", "Resources");
  EXPECT_EQ(pending.value("job_state", ""), "PENDING") << pending.dump();
  EXPECT_EQ(pending.value("state_reason", ""), "Resources") << pending.dump();

  ASSERT_TRUE(cluster().command("scancel", {waiting}).ok());
  const std::string final_line = cluster().waitForSacct(waiting, seconds(30));
  EXPECT_EQ(final_line.rfind(waiting + "|CANCELLED|", 0), 0u) << final_line << cluster().logTails();
  const nlohmann::json after = squeueJob(cluster(), waiting);
  EXPECT_TRUE(after.is_null() || after.value("job_state", "") == "CANCELLED") << after.dump();
  EXPECT_EQ(waitForSqueueState(cluster(), holder, "RUNNING").value("job_state", ""), "RUNNING");
}

// A job holding both nodes, one slurmd killed: the job ends NODE_FAIL while that node's
// slurmstepd lives on, and a restarted slurmd brings the node back. Then the cluster torn down:
// none of the processes it had is left, nor any the job's tasks name themselves (each task prints
// its node, its own PID and its parent's, its slurmstepd's).
TEST(SlurmCluster, AKilledSlurmdFailsItsJobAndTeardownStopsItsStepsByPid) {
  if (const std::string why = slurmUnavailable(); !why.empty()) GTEST_SKIP() << why;
  std::vector<pid_t> had, named_by_tasks;
  std::filesystem::path dir;
  {
    SlurmCluster cluster({.slurmd_timeout_s = 3, .message_timeout_s = 3});
    dir = cluster.dir();
    const std::filesystem::path out = dir / "sleepers.out";
    const std::string id =
        cluster.sbatch({"-N2", "--no-requeue", "--output=" + out.string(), "--wrap",
                        "srun sh -c 'echo $SLURMD_NODENAME $$ $PPID; exec sleep 300'"});
    const auto deadline = std::chrono::steady_clock::now() + seconds(60);
    while (linesOf(readAll(out)).size() < 2) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << cluster.logTails();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::map<std::string, pid_t> stepd_of;
    std::istringstream lines(readAll(out));
    std::string node;
    for (pid_t task = 0, stepd = 0; lines >> node >> task >> stepd;) {
      named_by_tasks.insert(named_by_tasks.end(), {task, stepd});
      stepd_of[node] = stepd;
    }
    cluster.killSlurmd("n2");
    had = cluster.processes();
    // munged, slurmctld, n1's slurmd; the batch step and both nodes' job steps; both sleeps.
    EXPECT_EQ(countWithName(had, "slurmd"), 1);
    EXPECT_EQ(countWithName(had, "slurmctld"), 1);
    EXPECT_EQ(countWithName(had, "munged"), 1);
    EXPECT_EQ(countWithName(had, "slurmstepd"), 3);
    EXPECT_EQ(countWithName(had, "sleep"), 2);
    EXPECT_EQ(countWithName(named_by_tasks, "slurmstepd"), 2);
    EXPECT_EQ(countWithName(named_by_tasks, "sleep"), 2);

    EXPECT_EQ(cluster.waitForSacct(id, seconds(120)), id + "|NODE_FAIL|0:0|n[1-2]")
        << cluster.logTails();
    EXPECT_TRUE(processRuns(stepd_of["n2"])) << "n2's slurmstepd, whose slurmd was killed";
    cluster.restartSlurmd("n2");
    EXPECT_TRUE(cluster.waitIdle(seconds(60))) << cluster.sinfo() << cluster.logTails();
  }
  EXPECT_EQ(stillRunning(had), std::vector<pid_t>{});
  EXPECT_EQ(stillRunning(named_by_tasks), std::vector<pid_t>{});
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// Two clusters at once (as two tests under ctest -j2 start them): their own ports, job ids and
// nodes; the options shape the second (3 nodes of 3 CPUs, a second partition, a time limit).
TEST(SlurmCluster, TwoClustersAtOnceShareNothing) {
  if (const std::string why = slurmUnavailable(); !why.empty()) GTEST_SKIP() << why;
  SlurmCluster one({.nodes = 1});
  SlurmCluster three({.nodes = 3, .cpus_per_node = 3, .max_time = "5", .extra_partition = "big"});
  EXPECT_NE(one.slurmctldPort(), three.slurmctldPort());
  EXPECT_NE(one.conf(), three.conf());
  EXPECT_EQ(linesOf(three.sinfo({"-h", "-o", "%P %l %c %D %t"})),
            (std::set<std::string>{"debug* 5:00 3 3 idle", "big 5:00 3 3 idle"}));
  EXPECT_EQ(linesOf(one.sinfo({"-h", "-o", "%P %D %t"})), (std::set<std::string>{"debug* 1 idle"}));

  const std::string id_one = one.sbatch({"-N1", "--wrap", "srun true"});
  const std::string id_three = three.sbatch({"-N3", "-p", "big", "--wrap", "srun true"});
  EXPECT_NE(id_one, id_three);
  EXPECT_EQ(one.waitForSacct(id_one, seconds(60)), id_one + "|COMPLETED|0:0|n1");
  EXPECT_EQ(three.waitForSacct(id_three, seconds(60)), id_three + "|COMPLETED|0:0|n[1-3]");
  EXPECT_EQ(one.sacctLine(id_three), "");  // each knows only its own jobs
}

// A daemon that cannot start fails the constructor at once with its own words, leaving nothing.
TEST(SlurmCluster, ADaemonThatCannotStartFailsTheStartWithItsError) {
  if (const std::string why = slurmUnavailable(); !why.empty()) GTEST_SKIP() << why;
  try {
    SlurmCluster broken({.extra_conf = {"NoSuchKey=1"}});
    FAIL() << "started with a bad slurm.conf";
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    // slurmctld or a slurmd, whichever read slurm.conf and exited first.
    EXPECT_NE(message.find(" exit code 1\n"), std::string::npos) << message;
    EXPECT_NE(message.find("unrecognized key: NoSuchKey"), std::string::npos) << message;
  }
}

// exportConf() points this process's own client commands at the cluster; the destructor puts
// back what was there before.
TEST(SlurmCluster, ExportConfSetsSlurmConfForThisProcessAndTeardownRestoresIt) {
  if (const std::string why = slurmUnavailable(); !why.empty()) GTEST_SKIP() << why;
  ::setenv("SLURM_CONF", "/nonexistent/slurm.conf", 1);
  {
    SlurmCluster cluster({.nodes = 1});
    cluster.exportConf();
    EXPECT_EQ(std::string(std::getenv("SLURM_CONF")), cluster.conf().string());
  }
  EXPECT_EQ(std::string(std::getenv("SLURM_CONF")), "/nonexistent/slurm.conf");
  ::unsetenv("SLURM_CONF");
}

}  // namespace
}  // namespace ringmaster::testing
