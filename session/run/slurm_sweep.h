// A sweep's runs under Slurm in one allocation (issue 37, docs/slurm.md "Sweeps in one
// allocation"): what the sweep runner calls before its members start and after they end. It plans
// which members share one allocation (slurm/slurm_allocation.h), obtains it (a holder job sized
// for them, on this machine or the members' login node) and hands out its job id, which each
// fitting member's RunRequest::slurm_allocation carries; the others run as their own Slurm jobs,
// each with the reason the sweep shows. It runs no member itself.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "slurm/slurm_allocation.h"
#include "spec/job_spec.h"
#if RINGMASTER_HAVE_LIBSSH
#include "ssh/ssh_session.h"
#endif

namespace ringmaster::session {

struct SweepAllocationRequest {
  std::vector<JobSpec> members;  // each member's spec, its overrides applied (memberSpec)
  int parallel = 1;              // how many members run at once
  // The holder's files (its script, output and heartbeat) on this machine, in a directory the
  // nodes share (the sweep's own, beside its runs'); made 0700 when missing. Submitted from a
  // login node, one is made there under $HOME/.ringmaster/jobs instead.
  std::string dir;
  // At most this many nodes; 0: the partition's node count as sinfo gives it (no cap when sinfo
  // cannot say). A member needing more runs as its own job.
  int max_nodes = 0;
  std::string job_name = "ringmaster-sweep";
  std::chrono::milliseconds heartbeat_every{std::chrono::seconds(10)};
  std::chrono::seconds heartbeat_timeout{180};
  // The login node over SSH, as RunRequest has them.
  std::optional<std::string> ssh_config;
#if RINGMASTER_HAVE_LIBSSH
  SshConnectOptions connect;
#endif
};

class SlurmSweepAllocation {
 public:
  SlurmSweepAllocation() = default;
  SlurmSweepAllocation(slurm::SweepAllocationPlan plan,
                       std::unique_ptr<slurm::SweepAllocation> allocation);
  SlurmSweepAllocation(SlurmSweepAllocation&&) noexcept;
  SlurmSweepAllocation& operator=(SlurmSweepAllocation&&) noexcept;
  // release().
  ~SlurmSweepAllocation();

  // The allocation's job id; "" when no member runs in one.
  std::string jobId() const;
  // What member `index`'s RunRequest::slurm_allocation takes: the job id, or nullopt for a member
  // that runs as its own job or not under Slurm.
  std::optional<std::string> allocationFor(size_t index) const;
  // Why member `index` runs as its own Slurm job ("" when it runs in the allocation or not under
  // Slurm): what the sweep says of it.
  std::string ownJobReason(size_t index) const;
  const slurm::SweepAllocationPlan& plan() const { return plan_; }
  // The holder's state now; nullopt without an allocation or when Slurm no longer knows it.
  std::optional<slurm::SlurmJobState> state();
  // Cancels the allocation (idempotent; every exit path of the sweep calls it, the destructor
  // too); scancel's complaint, or "".
  std::string release();

 private:
  slurm::SweepAllocationPlan plan_;
  std::unique_ptr<slurm::SweepAllocation> allocation_;
};

// Plans and, when at least one member fits, obtains the allocation (sbatch returns at once: the
// holder may still be queued, and members wait in their step script until it runs). Throws kComm
// when sbatch refuses it, kInvalidArgument for parallel < 1.
SlurmSweepAllocation allocateForSweep(const SweepAllocationRequest& request);

// A member's spec: `spec_text` with its "field=<json>" overrides applied (applyOverrides), parsed;
// throws kSpec naming the problems.
JobSpec memberSpec(const std::string& spec_text, const std::vector<std::string>& overrides);

}  // namespace ringmaster::session
