// Issue 37: a sweep's runs under Slurm in one allocation, against a real slurmctld and slurmd
// (tests/common/slurm_cluster.h). Two DDP members run as job steps of one allocation and complete,
// recorded with its job id and distinct steps; cancelling one member cancels only its step;
// releasing the allocation leaves no job in squeue and no process; a member too large for the
// allocation runs as its own job; a driver that dies without releasing it loses it to the
// heartbeat; a member waits `pending` while the allocation is queued, and its cancel then starts
// no step; a member given an allocation that has ended ends as it did, saying its step never
// started; `ringmaster cancel` of a detached member stops its step and not the allocation. Skipped
// where the Slurm daemons are not installed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/proc_files.h"
#include "common/slurm_cluster.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "query/sweeps.h"
#include "run/run_session.h"
#include "run/slurm_sweep.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryText;
using testing::CapturedProcess;

class SlurmSweep : public testing::CliRunTest {
 protected:
  void SetUp() override {
    CliRunTest::SetUp();
    if (const std::string why = testing::slurmUnavailable(); !why.empty()) GTEST_SKIP() << why;
    cluster_ = std::make_unique<testing::SlurmCluster>(testing::SlurmClusterOptions{.nodes = 2});
    cluster_->exportConf();
    ::setenv("RINGMASTER_NODE", (std::string(testBinaryDir()) + "/app/ringmaster-node").c_str(), 1);
  }

  void TearDown() override {
    for (pid_t pid : testing::processesOfRunsUnder(dir_)) ::kill(pid, SIGKILL);
    cluster_.reset();
    CliRunTest::TearDown();
  }

  // The DDP example on `nodes` nodes of two ranks each, `steps` steps.
  JobSpec member(const std::string& name, int nodes, int steps) const {
    json spec = testing::exampleSpec("ddp_mlp");
    spec["name"] = name;
    spec["launch"].erase("hosts");
    spec["launch"]["scheduler"] = {
        {"kind", "slurm"}, {"nodes", nodes}, {"ranks_per_node", 2}, {"time", "10"}};
    spec["train"]["steps"] = steps;
    spec["telemetry"]["every_steps"] = 1;
    return session::memberSpec(spec.dump(), {});
  }

  session::SlurmSweepAllocation allocate(const std::vector<JobSpec>& members, int parallel,
                                         int max_nodes = 0) const {
    return session::allocateForSweep({.members = members,
                                      .parallel = parallel,
                                      .dir = (dir_ / "sweep").string(),
                                      .max_nodes = max_nodes,
                                      .heartbeat_every = 500ms,
                                      .heartbeat_timeout = 5s});
  }

  std::unique_ptr<session::RunSession> session(const JobSpec& spec,
                                               std::optional<std::string> allocation) const {
    return std::make_unique<session::RunSession>(
        session::RunRequest{.spec_path = spec.name + ".json",
                            .spec_text = toJson(spec).dump(),
                            .db_path = dbPath(),
                            .slurm_allocation = std::move(allocation)});
  }

  std::string recordedJob(int64_t run) const {
    storage::Database db(dbPath());
    return queryText(
        db, fmt::format("SELECT coalesce(scheduler_job_id, '') FROM runs WHERE id = {}", run));
  }

  // The run's status, its error and its Slurm state, for failure messages.
  std::string recordedEnd(int64_t run) const {
    storage::Database db(dbPath());
    return queryText(db, fmt::format("SELECT status || ': ' || coalesce(error, '') || ' [' || "
                                     "coalesce(scheduler_state, '') || ']' FROM runs WHERE id = {}",
                                     run));
  }

  // Every recorded run's end (recordedEnd), one per line, for failure messages.
  std::string everyRunsEnd() const {
    storage::Database db(dbPath());
    return queryText(db,
                     "SELECT coalesce(group_concat('run ' || id || ': ' || status || ': ' || "
                     "coalesce(error, '') || ' [' || coalesce(scheduler_state, '') || ']', "
                     "char(10)), 'no run recorded') FROM runs");
  }

  // squeue's lines for the job (running, pending or completing).
  std::string queued(const std::string& job_id) const {
    return cluster_->squeue({"--noheader", "--jobs", job_id, "--format=%i %T"});
  }
  std::string steps(const std::string& job_id) const {
    return cluster_->squeue({"--steps", "--noheader", "--jobs", job_id, "--format=%i"});
  }

  // Waits (bounded) until squeue no longer lists the job; whether it did.
  bool goneFromQueue(const std::string& job_id) const {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (queued(job_id).find(job_id) != std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(200ms);
    }
    return true;
  }

  // Waits (bounded) until no process of the cluster but its daemons runs (no step, no step
  // script, no holder); "" then, else the
  // command lines of those left.
  std::string processesLeft() const {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    for (;;) {
      std::vector<pid_t> left = cluster_->processes();
      for (pid_t daemon : cluster_->daemonPids()) std::erase(left, daemon);
      // slurmctld's own helper (slurmscriptd) is part of the daemon.
      std::erase_if(left, [](pid_t pid) {
        return testing::readProcFile(pid, "cmdline").starts_with("slurmctld");
      });
      if (left.empty()) return "";
      if (std::chrono::steady_clock::now() > deadline) {
        std::string text;
        for (pid_t pid : left) {
          std::string command = testing::readProcFile(pid, "cmdline");
          std::replace(command.begin(), command.end(), '\0', ' ');
          text += fmt::format("{}: {}\n", pid, command);
        }
        return text;
      }
      std::this_thread::sleep_for(200ms);
    }
  }

  std::unique_ptr<testing::SlurmCluster> cluster_;
};

TEST_F(SlurmSweep, TwoMembersRunAsStepsOfOneAllocationAndItsReleaseLeavesNothing) {
  const std::vector<JobSpec> members = {member("a", 1, 8), member("b", 1, 8)};
  session::SlurmSweepAllocation allocation = allocate(members, 2);
  const std::string job = allocation.jobId();
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(allocation.plan().allocation);
  EXPECT_EQ(allocation.plan().allocation->nodes, 2);
  EXPECT_EQ(allocation.allocationFor(0), job);
  EXPECT_EQ(allocation.allocationFor(1), job);
  std::vector<std::unique_ptr<session::RunSession>> runs;
  for (size_t i = 0; i < members.size(); ++i)
    runs.push_back(session(members[i], allocation.allocationFor(i)));
  std::vector<std::string> statuses(runs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < runs.size(); ++i)
    threads.emplace_back([&, i] { statuses[i] = runs[i]->run().status; });
  for (std::thread& thread : threads) thread.join();
  std::vector<std::string> recorded;
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(statuses[i], "completed") << recordedEnd(runs[i]->runId());
    recorded.push_back(recordedJob(runs[i]->runId()));
    EXPECT_TRUE(recorded.back().starts_with(job + ".")) << recorded.back() << " in " << job;
  }
  EXPECT_NE(recorded[0], recorded[1]);
  // The allocation outlives its members until it is released; then nothing of it is left.
  EXPECT_NE(queued(job).find("RUNNING"), std::string::npos) << queued(job);
  EXPECT_EQ(allocation.release(), "");
  EXPECT_TRUE(goneFromQueue(job)) << queued(job);
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_));
  EXPECT_EQ(processesLeft(), "");
}

TEST_F(SlurmSweep, RingmasterSweepPutsItsMembersIntoOneAllocationAndReleasesIt) {
  // The command itself: a 2-member grid over a Slurm spec, both members at once.
  json spec = toJson(member("grid", 1, 4));
  const std::string path = writeSpec("grid", spec);
  CapturedProcess sweep =
      ringmaster({"sweep", path, "--axis", "optimizer.lr=0.01,0.02", "--parallel", "2", "--json"});
  const ExitStatus status = sweep.wait(240s);
  ASSERT_TRUE(testing::exitedWith(status, 0)) << sweep.err() << everyRunsEnd();
  EXPECT_NE(sweep.err().find("the members share Slurm allocation"), std::string::npos)
      << sweep.err();
  storage::Database db(dbPath());
  const std::vector<storage::SweepRecord> sweeps = storage::listSweeps(db);
  ASSERT_EQ(sweeps.size(), 1u);
  ASSERT_EQ(sweeps[0].members.size(), 2u);
  std::vector<std::string> jobs;
  for (const storage::SweepMember& each : sweeps[0].members) {
    ASSERT_TRUE(each.run_id) << each.state;
    EXPECT_EQ(each.run_status, "completed") << recordedEnd(*each.run_id);
    jobs.push_back(recordedJob(*each.run_id));
  }
  // One allocation, a step each.
  const std::string allocation = jobs[0].substr(0, jobs[0].find('.'));
  ASSERT_FALSE(allocation.empty());
  EXPECT_TRUE(jobs[1].starts_with(allocation + ".")) << jobs[0] << " and " << jobs[1];
  EXPECT_NE(jobs[0], jobs[1]);
  EXPECT_TRUE(goneFromQueue(allocation)) << queued(allocation);
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_));
}

TEST_F(SlurmSweep, CancellingOneMemberCancelsOnlyItsStep) {
  const std::vector<JobSpec> members = {member("a", 1, 1000000), member("b", 1, 1000000)};
  session::SlurmSweepAllocation allocation = allocate(members, 2);
  const std::string job = allocation.jobId();
  ASSERT_FALSE(job.empty());
  std::vector<std::unique_ptr<session::RunSession>> runs;
  for (size_t i = 0; i < members.size(); ++i)
    runs.push_back(session(members[i], allocation.allocationFor(i)));
  std::vector<std::string> statuses(runs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < runs.size(); ++i)
    threads.emplace_back([&, i] { statuses[i] = runs[i]->run().status; });
  // Both steps run.
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while ((recordedJob(runs[0]->runId()).find('.') == std::string::npos ||
          recordedJob(runs[1]->runId()).find('.') == std::string::npos) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(200ms);
  const std::string first = recordedJob(runs[0]->runId());
  const std::string second = recordedJob(runs[1]->runId());
  ASSERT_NE(first.find('.'), std::string::npos) << first;
  ASSERT_NE(second.find('.'), std::string::npos) << second;
  runs[0]->requestStop();
  threads[0].join();
  EXPECT_EQ(statuses[0], "cancelled") << recordedEnd(runs[0]->runId());
  // The other member's step and the allocation go on.
  EXPECT_EQ(steps(job).find(first + "\n"), std::string::npos) << steps(job);
  EXPECT_NE(steps(job).find(second + "\n"), std::string::npos) << steps(job);
  EXPECT_NE(queued(job).find("RUNNING"), std::string::npos) << queued(job);
  runs[1]->requestStop();
  threads[1].join();
  EXPECT_EQ(statuses[1], "cancelled") << recordedEnd(runs[1]->runId());
  EXPECT_EQ(allocation.release(), "");
  EXPECT_TRUE(goneFromQueue(job)) << queued(job);
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_, 60s));
  EXPECT_EQ(processesLeft(), "");
}

TEST_F(SlurmSweep, CancelOfADetachedMemberStopsOnlyItsStepNotTheAllocation) {
  // `ringmaster cancel` of a member whose launching process left (recorded with the allocation's
  // job id only: nobody followed it to its step) must find its step, never scancel the allocation.
  const std::vector<JobSpec> members = {member("a", 1, 1000000), member("b", 1, 1000000)};
  session::SlurmSweepAllocation allocation = allocate(members, 2);
  const std::string job = allocation.jobId();
  ASSERT_FALSE(job.empty());
  auto detached = std::make_unique<session::RunSession>(
      session::RunRequest{.spec_path = "a.json",
                          .spec_text = toJson(members[0]).dump(),
                          .db_path = dbPath(),
                          .detach = true,
                          .slurm_allocation = job});
  EXPECT_EQ(detached->run().status, "detached");
  const int64_t cancelled = detached->runId();
  detached.reset();
  EXPECT_EQ(recordedJob(cancelled), job);
  auto followed = session(members[1], job);
  std::string followed_status;
  std::thread thread([&] { followed_status = followed->run().status; });
  const fs::path step_file = session::localJobDirectory(dbPath(), cancelled) / "slurm-step";
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (
      (!fs::exists(step_file) || recordedJob(followed->runId()).find('.') == std::string::npos) &&
      std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(200ms);
  const std::string step = testing::fileBytes(step_file);
  const std::string other = recordedJob(followed->runId());
  ASSERT_TRUE(step.starts_with(job + ".")) << step;
  ASSERT_NE(other.find('.'), std::string::npos) << other;

  CapturedProcess cancel = ringmaster({"cancel", std::to_string(cancelled)}, cluster_->env());
  const ExitStatus status = cancel.wait(120s);
  EXPECT_EQ(status.exit_code, 130) << status.describe() << "\n" << cancel.err();
  EXPECT_EQ(recordedEnd(cancelled), "cancelled:  [CANCELLED]");
  EXPECT_EQ(recordedJob(cancelled), step.substr(0, step.find('\n')));
  EXPECT_NE(steps(job).find(other + "\n"), std::string::npos) << steps(job);
  EXPECT_NE(queued(job).find("RUNNING"), std::string::npos) << queued(job);
  followed->requestStop();
  thread.join();
  EXPECT_EQ(followed_status, "cancelled") << recordedEnd(followed->runId());
  EXPECT_EQ(allocation.release(), "");
  EXPECT_TRUE(goneFromQueue(job)) << queued(job);
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_, 60s));
  EXPECT_EQ(processesLeft(), "");
}

TEST_F(SlurmSweep, AMemberWaitsPendingWhileTheAllocationIsQueuedAndItsCancelStartsNoStep) {
  // Both nodes held by another job: the sweep's allocation waits in the queue, and so its member.
  const std::string blocker =
      cluster_->sbatch({"--nodes=2", "--exclusive", "--output=/dev/null", "--wrap", "sleep 300"});
  const std::vector<JobSpec> members = {member("a", 1, 5)};
  session::SlurmSweepAllocation allocation = allocate(members, 1);
  const std::string job = allocation.jobId();
  ASSERT_FALSE(job.empty());
  auto run = session(members[0], job);
  std::string status;
  std::thread thread([&] { status = run->run().status; });
  storage::Database db(dbPath());
  const auto reason = [&] {
    return queryText(db,
                     fmt::format("SELECT status || ' ' || coalesce(scheduler_state, '') || "
                                 "' ' || coalesce(scheduler_reason, '') FROM runs WHERE id = {}",
                                 run->runId()));
  };
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (reason().find("Resources") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(200ms);
  EXPECT_EQ(reason(),
            fmt::format("pending PENDING the sweep's allocation {} waits: Resources", job));
  run->requestStop();
  thread.join();
  EXPECT_EQ(status, "cancelled") << recordedEnd(run->runId());
  EXPECT_EQ(recordedJob(run->runId()), job);  // no step was ever made
  EXPECT_EQ(
      testing::fileBytes(session::localJobDirectory(dbPath(), run->runId()) / "slurm-step-exit"),
      "143\n");
  EXPECT_EQ(allocation.release(), "");
  cluster_->command("scancel", {blocker});
  EXPECT_TRUE(goneFromQueue(job)) << queued(job);
  EXPECT_TRUE(goneFromQueue(blocker)) << queued(blocker);
  EXPECT_EQ(processesLeft(), "");
}

TEST_F(SlurmSweep, AMemberGivenAnAllocationThatEndedEndsAsItSayingItsStepNeverStarted) {
  const std::vector<JobSpec> members = {member("a", 1, 5)};
  session::SlurmSweepAllocation allocation = allocate(members, 1);
  const std::string job = allocation.jobId();
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(allocation.release(), "");
  ASSERT_TRUE(goneFromQueue(job));
  auto run = session(members[0], job);
  EXPECT_EQ(run->run().status, "cancelled");
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, fmt::format("SELECT scheduler_state || ': ' || scheduler_reason FROM "
                                      "runs WHERE id = {}",
                                      run->runId())),
            fmt::format("CANCELLED: its step never started: the sweep's allocation {} ended "
                        "CANCELLED",
                        job));
  EXPECT_EQ(processesLeft(), "");
}

TEST_F(SlurmSweep, AMemberTooLargeForTheAllocationRunsAsItsOwnJob) {
  const std::vector<JobSpec> members = {member("small", 1, 5), member("large", 2, 5)};
  session::SlurmSweepAllocation allocation = allocate(members, 1, /*max_nodes=*/1);
  const std::string job = allocation.jobId();
  ASSERT_FALSE(job.empty());
  EXPECT_EQ(allocation.allocationFor(0), job);
  EXPECT_EQ(allocation.allocationFor(1), std::nullopt);
  EXPECT_NE(allocation.ownJobReason(1).find("needs 2 nodes"), std::string::npos)
      << allocation.ownJobReason(1);
  auto small = session(members[0], allocation.allocationFor(0));
  EXPECT_EQ(small->run().status, "completed");
  EXPECT_TRUE(recordedJob(small->runId()).starts_with(job + "."));
  EXPECT_EQ(allocation.release(), "");
  auto large = session(members[1], allocation.allocationFor(1));
  EXPECT_EQ(large->run().status, "completed");
  const std::string own = recordedJob(large->runId());
  EXPECT_EQ(own.find('.'), std::string::npos) << own;
  EXPECT_NE(own, job);
  EXPECT_TRUE(goneFromQueue(job));
  EXPECT_EQ(processesLeft(), "");
}

TEST_F(SlurmSweep, AnAllocationWhoseDriverDiesEndsWithItsHeartbeat) {
  // The driver: a child process that obtains the allocation, says its id, and is killed.
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const std::vector<JobSpec> members = {member("a", 1, 5)};
  const pid_t driver = ::fork();
  ASSERT_GE(driver, 0);
  if (driver == 0) {
    ::close(pipe_fds[0]);
    try {
      session::SlurmSweepAllocation allocation = allocate(members, 1);
      const std::string job = allocation.jobId() + "\n";
      (void)!::write(pipe_fds[1], job.data(), job.size());
      for (;;) ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(pipe_fds[1]);
  std::string job;
  char byte = 0;
  while (::read(pipe_fds[0], &byte, 1) == 1 && byte != '\n') job += byte;
  ::close(pipe_fds[0]);
  if (job.empty()) {
    ::kill(driver, SIGKILL);
    ::waitpid(driver, nullptr, 0);
    FAIL() << "the driver obtained no allocation";
  }
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (queued(job).find("RUNNING") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(200ms);
  EXPECT_NE(queued(job).find("RUNNING"), std::string::npos) << queued(job);
  ::kill(driver, SIGKILL);
  ::waitpid(driver, nullptr, 0);
  // heartbeat_timeout is 5 s: the holder ends, and the allocation with it.
  EXPECT_TRUE(goneFromQueue(job)) << queued(job);
  EXPECT_EQ(processesLeft(), "");
}

}  // namespace
}  // namespace ringmaster
