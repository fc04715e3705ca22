// A sweep's shared Slurm allocation (issue 37, docs/slurm.md "Sweeps in one allocation"): the plan
// (which members fit one allocation, its nodes, time and options) and the allocation itself, a
// holder batch job whose members run as job steps (slurmStepScript). The holder ends by itself
// when the driver's heartbeat stops or its time limit passes, and release() cancels it; it never
// outlives the sweep. It does not run members: each is an ordinary run given the job id.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "slurm/slurm_host.h"
#include "slurm/slurm_state.h"
#include "spec/job_spec.h"

namespace ringmaster::slurm {

// One member in the plan: in the allocation, its own Slurm job (with why), or not under Slurm.
struct SweepMemberPlacement {
  enum class Kind { kInAllocation, kOwnJob, kNotSlurm } kind = Kind::kNotSlurm;
  std::string reason;  // kOwnJob: "needs 3 nodes; the sweep's allocation has 2", ...
};

struct SweepAllocationPlan {
  // The allocation's shape as one Slurm spec (nodes, the largest cpus_per_task and gpus_per_node,
  // the summed time, the shared partition, account, qos, ...); nullopt when no member fits.
  std::optional<SlurmSpec> allocation;
  std::vector<SweepMemberPlacement> members;  // by member, in the sweep's order
};

// Slurm's --time forms ("30", "30:00", "1:30:00", "2-00", "2-00:30", "2-00:00:00") in seconds;
// nullopt for UNLIMITED / INFINITE or a form it does not know.
std::optional<int64_t> slurmTimeSeconds(const std::string& time);

// Which of `members` (each one's spec, overrides applied) share one allocation, `parallel` running
// at once: those under Slurm whose partition, account, qos, reservation, constraint, mem,
// extra_sbatch and submit_from are the most common ones (the first member's on a tie). Nodes: the
// largest such member's times min(parallel, their count), at most `max_nodes` (0: no cap; a
// member needing more runs as its own job). Time: the sum of the ceil(count / parallel) largest
// time limits (the limits summed over the rounds, whichever member runs in which), plus a minute a
// round for each step's start; none when a member has no limit or an unlimited one.
SweepAllocationPlan planSweepAllocation(const std::vector<JobSpec>& members, int parallel,
                                        int max_nodes = 0);

struct SweepAllocationOptions {
  // On the submitting host, shared with the nodes: the holder's script, its output and the
  // heartbeat file. Made (0700) when missing.
  std::string dir;
  std::string job_name = "ringmaster-sweep";
  // The driver rewrites dir/heartbeat this often; the holder ends (and the allocation with it)
  // once the file has not changed for heartbeat_timeout.
  std::chrono::milliseconds heartbeat_every{std::chrono::seconds(10)};
  std::chrono::seconds heartbeat_timeout{180};
};

class SweepAllocation {
 public:
  // Submits the holder job (sbatch --parsable) and starts the heartbeat. Throws kComm naming
  // sbatch's words when it refuses, kInvalidArgument for a plan without an allocation.
  SweepAllocation(std::unique_ptr<SlurmHost> host, const SlurmSpec& allocation,
                  SweepAllocationOptions options);
  // release().
  ~SweepAllocation();
  SweepAllocation(const SweepAllocation&) = delete;
  SweepAllocation& operator=(const SweepAllocation&) = delete;

  const std::string& jobId() const { return job_id_; }
  // The holder's state now (squeue, then sacct); nullopt when neither knows it.
  std::optional<SlurmJobState> state();
  // The holder's batch script as submitted (kept in dir/slurm-allocation.sbatch).
  const std::string& script() const { return script_; }
  // Stops the heartbeat and cancels the allocation (its members' steps with it); safe to call
  // more than once, and from any thread. Returns scancel's complaint, "" when it was done.
  std::string release();

 private:
  void beat();

  struct Heartbeat;
  std::unique_ptr<SlurmHost> host_;
  SweepAllocationOptions options_;
  std::string script_;
  std::string job_id_;
  std::unique_ptr<Heartbeat> heartbeat_;
};

// The holder's script: the #SBATCH words of `allocation` (sbatchOptions, --output in `dir`) and a
// body that waits while `dir`/heartbeat keeps changing, at most heartbeat_timeout_s without.
std::string sweepAllocationScript(const SlurmSpec& allocation, const std::string& job_name,
                                  const std::string& dir, int heartbeat_timeout_s);

}  // namespace ringmaster::slurm
