// Issue 32, point 1: processes known by PID and start time. A process's stat is read as the
// kernel says it (session, start time, a zombie); a PID recorded with another start time (a reused
// PID), or with its own start time in another boot, is not taken to run and is never signalled,
// while the right one is; a session's members are found; the detached agent's launch line
// round-trips and no other line parses as one; a detached job's processes are its agent's session,
// not a session whose leader is someone else's.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "common/captured_process.h"
#include "process/detached_job.h"
#include "process/process_identity.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using testing::CapturedProcess;

// A `sleep` in a session of its own (setsid runs it in place: its PID is the session's id).
CapturedProcess sessionLeader() {
  CapturedProcess leader("/usr/bin/setsid", {"sleep", "600"});
  for (int i = 0; i < 500; ++i) {
    const std::optional<ProcessStat> stat = readProcessStat(leader.pid());
    if (stat && stat->session == leader.pid()) break;
    std::this_thread::sleep_for(10ms);
  }
  return leader;
}

TEST(ProcessIdentity, ThisProcessReadsAsTheKernelSaysIt) {
  const std::optional<ProcessStat> stat = readProcessStat(::getpid());
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->session, ::getsid(0));
  EXPECT_GT(stat->start_time, 0u);
  EXPECT_NE(stat->state, 'Z');
  EXPECT_FALSE(readProcessStat(0).has_value());
  EXPECT_FALSE(readProcessStat(-1).has_value());
}

TEST(ProcessIdentity, AnotherStartTimeIsAnotherProcessAndIsNeverSignalled) {
  CapturedProcess child("/bin/sleep", {"600"});
  const std::optional<ProcessIdentity> identity = processIdentity(child.pid());
  ASSERT_TRUE(identity.has_value());
  EXPECT_TRUE(identityRuns(*identity));
  for (const uint64_t other :
       {identity->start_time - 1, identity->start_time + 1, uint64_t{0}, UINT64_MAX}) {
    const ProcessIdentity reused{.pid = child.pid(), .start_time = other, .boot_id = bootId()};
    EXPECT_FALSE(identityRuns(reused)) << other;
    EXPECT_FALSE(signalIdentity(reused, SIGKILL)) << other;
  }
  // Its own PID and start time, but in another boot (a restart, another machine).
  ProcessIdentity other_boot = *identity;
  other_boot.boot_id = "00000000-0000-0000-0000-000000000000";
  EXPECT_FALSE(identityRuns(other_boot));
  EXPECT_FALSE(signalIdentity(other_boot, SIGKILL));
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(identityRuns(*identity));  // still running
  EXPECT_TRUE(signalIdentity(*identity, SIGTERM));
  EXPECT_EQ(child.wait(10s).signal, SIGTERM);
  // Ended (a zombie, then reaped): neither runs nor is signalled.
  EXPECT_FALSE(identityRuns(*identity));
  EXPECT_FALSE(signalIdentity(*identity, SIGTERM));
}

TEST(ProcessIdentity, ASessionsMembersAreFound) {
  CapturedProcess leader = sessionLeader();
  ASSERT_EQ(readProcessStat(leader.pid())->session, leader.pid());
  const std::vector<ProcessIdentity> members = sessionIdentities(leader.pid());
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(members[0].pid, leader.pid());
  EXPECT_TRUE(sessionIdentities(0).empty());
}

TEST(DetachedJob, TheLaunchLineRoundTripsAndNoOtherLineParses) {
  const DetachedAgent agent{.node_rank = 3,
                            .process = {.pid = 4242,
                                        .start_time = 987654321,
                                        .boot_id = "45ca08b6-271d-4bd9-a604-a674c490f351"},
                            .session = 4241};
  const std::optional<DetachedAgent> parsed =
      parseDetachedAgentLine(detachedAgentLine(agent, "/tmp/a dir/job"));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->node_rank, 3);
  EXPECT_EQ(parsed->process.pid, 4242);
  EXPECT_EQ(parsed->process.start_time, 987654321u);
  EXPECT_EQ(parsed->session, 4241);
  EXPECT_EQ(parsed->process.boot_id, agent.process.boot_id);
  for (const char* other :
       {"", "[agent node 0] detached: pid 12, job directory /x",
        "[agent node 0] detached: pid 12 (ended already), job directory /x",
        "[agent node 0] detached: pid 1, start time 2, session 3, job directory /x",
        "[rank 0] [agent node 0] detached: pid 1, start time 2, session 3, boot b, job directory "
        "/x",
        "[agent node 0] detached: pid 0, start time 2, session 3, boot b, job directory /x",
        "[agent node 0] detached: pid 1, start time 2, session -3, boot b, job directory /x",
        "[agent node -1] detached: pid 1, start time 2, session 3, boot b, job directory /x",
        "[agent node 0] detached: pid 1, start time 2, session 3, boot $(x), job directory /x"})
    EXPECT_FALSE(parseDetachedAgentLine(other).has_value()) << other;
}

// The job's processes are the recorded agent's and its session's while that session is the job's.
// An agent recorded with another start time, in a session whose leader runs (so the session is
// that leader's, not the job's), has none: nothing of it would be stopped.
TEST(DetachedJob, ASessionWhoseLeaderIsAnotherProcessIsNotTheJobs) {
  CapturedProcess leader = sessionLeader();
  const std::optional<ProcessIdentity> identity = processIdentity(leader.pid());
  ASSERT_TRUE(identity.has_value());
  const DetachedAgent recorded{.process = *identity, .session = leader.pid()};
  ASSERT_EQ(detachedJobProcesses(recorded, "/nonexistent").size(), 1u);
  DetachedAgent reused = recorded;
  reused.process.start_time += 1;
  EXPECT_TRUE(detachedJobProcesses(reused, "/nonexistent").empty());
  EXPECT_TRUE(stopDetachedJob(reused, "/nonexistent", 100ms).empty());
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(identityRuns(*identity));  // untouched
  EXPECT_TRUE(stopDetachedJob(recorded, "/nonexistent", 100ms).empty());
  EXPECT_EQ(leader.wait(10s).signal, SIGTERM);
}

}  // namespace
}  // namespace ringmaster
