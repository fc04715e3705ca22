// Issue 37: the plan of a sweep's shared Slurm allocation (remote/slurm/slurm_allocation.h): its
// nodes are the largest fitting member's times the members at once, capped; its time the limits
// summed over the rounds; members whose options differ or that need more nodes than the cap run
// as their own jobs, saying why; Slurm's time forms in seconds; the holder's script.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "slurm/slurm_allocation.h"
#include "spec/job_spec.h"

namespace ringmaster {
namespace {

using json = nlohmann::json;
using slurm::SweepMemberPlacement;
using Kind = SweepMemberPlacement::Kind;

JobSpec member(const json& scheduler) {
  json launch = {{"scheduler", {{"kind", "slurm"}}}};
  launch["scheduler"].update(scheduler);
  const json document = {
      {"name", "m"},
      {"strategy", json::object()},
      {"model", {{"kind", "mlp"}, {"layers", {4, 8, 3}}}},
      {"data", {{"kind", "synthetic"}, {"samples", 64}, {"features", 4}, {"classes", 3}}},
      {"train", {{"steps", 10}, {"batch_size", 8}}},
      {"optimizer", {{"kind", "sgd"}, {"lr", 0.1}}},
      {"launch", launch}};
  SpecParseResult parsed = parseJobSpec(document);
  EXPECT_TRUE(parsed.ok()) << parsed.describe();
  return parsed.ok() ? *parsed.spec : JobSpec{};
}

JobSpec localMember() {
  JobSpec spec = member(json::object());
  spec.launch.slurm.reset();
  spec.launch.hosts = {LaunchHostSpec{}};
  return spec;
}

TEST(SlurmTimeSeconds, EverySlurmFormAndTheUnlimitedOnes) {
  EXPECT_EQ(slurm::slurmTimeSeconds("30"), 1800);
  EXPECT_EQ(slurm::slurmTimeSeconds("30:15"), 1815);
  EXPECT_EQ(slurm::slurmTimeSeconds("1:30:00"), 5400);
  EXPECT_EQ(slurm::slurmTimeSeconds("2-00"), 172800);
  EXPECT_EQ(slurm::slurmTimeSeconds("2-01:30"), 172800 + 3600 + 1800);
  EXPECT_EQ(slurm::slurmTimeSeconds("1-00:00:10"), 86410);
  for (const char* none : {"UNLIMITED", "INFINITE", "", "a", "1:2:3:4", "-5", "1-"})
    EXPECT_EQ(slurm::slurmTimeSeconds(none), std::nullopt) << none;
}

TEST(SweepAllocationPlan, NodesAreTheLargestTimesTheMembersAtOnceAndTimeTheRoundsSum) {
  // Four members, two at once: two rounds; the two largest limits (40 and 30 minutes) summed,
  // plus a minute a round for the steps' start.
  const std::vector<JobSpec> members = {
      member({{"nodes", 1}, {"time", "10"}, {"cpus_per_task", 2}}),
      member({{"nodes", 2}, {"time", "40"}}),
      member({{"nodes", 1}, {"time", "30:00"}, {"gpus_per_node", 4}}),
      member({{"nodes", 1}, {"time", "5"}, {"cpus_per_task", 8}})};
  const slurm::SweepAllocationPlan plan = slurm::planSweepAllocation(members, 2);
  ASSERT_TRUE(plan.allocation);
  EXPECT_EQ(plan.allocation->nodes, 4);
  EXPECT_EQ(plan.allocation->time, "72");
  EXPECT_EQ(plan.allocation->cpus_per_task, 8);
  EXPECT_EQ(plan.allocation->gpus_per_node, 4);
  for (const SweepMemberPlacement& placement : plan.members)
    EXPECT_EQ(placement.kind, Kind::kInAllocation);
  // One at a time: every limit; more at once than members: only as many as there are.
  EXPECT_EQ(slurm::planSweepAllocation(members, 1).allocation->time, "89");
  EXPECT_EQ(slurm::planSweepAllocation(members, 1).allocation->nodes, 2);
  EXPECT_EQ(slurm::planSweepAllocation(members, 9).allocation->nodes, 8);
  EXPECT_EQ(slurm::planSweepAllocation(members, 9).allocation->time, "41");
}

TEST(SweepAllocationPlan, AMemberWithoutALimitLeavesTheTimeToThePartition) {
  const slurm::SweepAllocationPlan plan =
      slurm::planSweepAllocation({member({{"time", "10"}}), member({{"nodes", 1}})}, 1);
  ASSERT_TRUE(plan.allocation);
  EXPECT_EQ(plan.allocation->time, std::nullopt);
  EXPECT_EQ(slurm::planSweepAllocation({member({{"time", "UNLIMITED"}})}, 1).allocation->time,
            std::nullopt);
}

TEST(SweepAllocationPlan, MembersThatDifferOrNeedMoreThanTheCapRunAsTheirOwnJobs) {
  const std::vector<JobSpec> members = {
      member({{"nodes", 1}, {"partition", "gpu"}}),
      member({{"nodes", 1}, {"partition", "cpu"}}),
      member({{"nodes", 3}, {"partition", "gpu"}}),
      member({{"nodes", 2}, {"partition", "gpu"}}),
      member({{"nodes", 1}, {"partition", "gpu"}, {"account", "other"}}),
      member({{"nodes", 1}, {"partition", "gpu"}, {"extra_sbatch", {"--exclusive"}}}),
      localMember()};
  const slurm::SweepAllocationPlan plan = slurm::planSweepAllocation(members, 2, 2);
  ASSERT_TRUE(plan.allocation);
  EXPECT_EQ(plan.allocation->partition, "gpu");
  EXPECT_EQ(plan.allocation->nodes, 2);
  const std::vector<Kind> kinds = {Kind::kInAllocation, Kind::kOwnJob, Kind::kOwnJob,
                                   Kind::kInAllocation, Kind::kOwnJob, Kind::kOwnJob,
                                   Kind::kNotSlurm};
  for (size_t i = 0; i < members.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(plan.members[i].kind, kinds[i]);
    EXPECT_EQ(plan.members[i].reason.empty(), kinds[i] != Kind::kOwnJob) << plan.members[i].reason;
  }
  EXPECT_NE(plan.members[1].reason.find("partition cpu"), std::string::npos)
      << plan.members[1].reason;
  EXPECT_NE(plan.members[2].reason.find("needs 3 nodes"), std::string::npos);
  // The most common options win, not the first member's.
  const slurm::SweepAllocationPlan majority =
      slurm::planSweepAllocation({member({{"partition", "cpu"}}), member({{"partition", "gpu"}}),
                                  member({{"partition", "gpu"}})},
                                 1);
  EXPECT_EQ(majority.allocation->partition, "gpu");
  EXPECT_EQ(majority.members[0].kind, Kind::kOwnJob);
}

TEST(SweepAllocationPlan, NoMemberUnderSlurmOrNoneFittingMeansNoAllocation) {
  EXPECT_FALSE(slurm::planSweepAllocation({localMember(), localMember()}, 2).allocation);
  EXPECT_FALSE(slurm::planSweepAllocation({}, 2).allocation);
  const slurm::SweepAllocationPlan plan =
      slurm::planSweepAllocation({member({{"nodes", 4}})}, 1, 2);
  EXPECT_FALSE(plan.allocation);
  EXPECT_EQ(plan.members[0].kind, Kind::kOwnJob);
  EXPECT_THROW(slurm::planSweepAllocation({member(json::object())}, 0), Error);
}

TEST(SweepAllocationScript, HoldsTheSizedAllocationWhileTheHeartbeatChanges) {
  SlurmSpec shape = *member({{"nodes", 1}, {"partition", "gpu"}}).launch.slurm;
  shape.nodes = 4;
  shape.time = "72";
  const std::string script = slurm::sweepAllocationScript(shape, "sweep-3", "/shared/sw$HOME", 180);
  for (const char* line :
       {"#SBATCH --job-name=sweep-3\n", "#SBATCH --nodes=4\n", "#SBATCH --partition=gpu\n",
        "#SBATCH --time=72\n", "#SBATCH --no-requeue\n", "beat='/shared/sw$HOME'/heartbeat\n",
        "-lt 180 ]"})
    EXPECT_NE(script.find(line), std::string::npos) << line << "\n" << script;
}

}  // namespace
}  // namespace ringmaster
