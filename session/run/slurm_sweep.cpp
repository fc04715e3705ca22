// allocateForSweep: a sweep's members planned into one Slurm allocation, which is obtained on the
// members' submitting host with its node count capped by the partition's.
#include "run/slurm_sweep.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "run/run_session.h"
#include "run/slurm_run.h"
#include "slurm/sinfo.h"

namespace ringmaster::session {
namespace {

// The node count of `partition` (the default one when unset) as sinfo gives it; 0 when unknown.
int partitionNodes(slurm::SlurmHost& host, const std::optional<std::string>& partition) {
  const std::optional<slurm::SlurmClusterInfo> info =
      slurm::querySlurmCluster([&host](const std::vector<std::string>& argv) {
        return host.run(argv, std::chrono::seconds(60));
      });
  if (!info) return 0;
  for (const slurm::SlurmPartition& found : info->partitions)
    if (partition ? found.name == *partition : found.is_default) return found.total;
  return 0;
}

}  // namespace

SlurmSweepAllocation::SlurmSweepAllocation(slurm::SweepAllocationPlan plan,
                                           std::unique_ptr<slurm::SweepAllocation> allocation)
    : plan_(std::move(plan)), allocation_(std::move(allocation)) {}
SlurmSweepAllocation::SlurmSweepAllocation(SlurmSweepAllocation&&) noexcept = default;
SlurmSweepAllocation& SlurmSweepAllocation::operator=(SlurmSweepAllocation&& other) noexcept {
  if (this != &other) {
    release();
    plan_ = std::move(other.plan_);
    allocation_ = std::move(other.allocation_);
  }
  return *this;
}
SlurmSweepAllocation::~SlurmSweepAllocation() {
  release();
}

std::string SlurmSweepAllocation::jobId() const {
  return allocation_ ? allocation_->jobId() : std::string();
}

std::optional<std::string> SlurmSweepAllocation::allocationFor(size_t index) const {
  if (!allocation_ || index >= plan_.members.size() ||
      plan_.members[index].kind != slurm::SweepMemberPlacement::Kind::kInAllocation)
    return std::nullopt;
  return allocation_->jobId();
}

std::string SlurmSweepAllocation::ownJobReason(size_t index) const {
  if (index >= plan_.members.size()) return {};
  const slurm::SweepMemberPlacement& placement = plan_.members[index];
  return placement.kind == slurm::SweepMemberPlacement::Kind::kOwnJob ? placement.reason : "";
}

std::optional<slurm::SlurmJobState> SlurmSweepAllocation::state() {
  return allocation_ ? allocation_->state() : std::nullopt;
}

std::string SlurmSweepAllocation::release() {
  return allocation_ ? allocation_->release() : std::string();
}

SlurmSweepAllocation allocateForSweep(const SweepAllocationRequest& request) {
  const auto first =
      std::find_if(request.members.begin(), request.members.end(),
                   [](const JobSpec& spec) { return spec.launch.slurm.has_value(); });
  if (first == request.members.end())
    return {slurm::planSweepAllocation(request.members, request.parallel), nullptr};
  // The common options decide the host; plan once to learn them, then cap by their partition.
  slurm::SweepAllocationPlan plan =
      slurm::planSweepAllocation(request.members, request.parallel, request.max_nodes);
  if (!plan.allocation) return {std::move(plan), nullptr};
#if RINGMASTER_HAVE_LIBSSH
  std::unique_ptr<slurm::SlurmHost> host =
      slurmSubmittingHost(*plan.allocation, request.ssh_config, request.connect);
#else
  std::unique_ptr<slurm::SlurmHost> host =
      slurmSubmittingHost(*plan.allocation, request.ssh_config);
#endif
  if (request.max_nodes == 0) {
    const int nodes = partitionNodes(*host, plan.allocation->partition);
    if (nodes > 0) plan = slurm::planSweepAllocation(request.members, request.parallel, nodes);
    if (!plan.allocation) return {std::move(plan), nullptr};
  }
  const std::string dir =
      plan.allocation->submit_from ? makeLoginDirectory(*host, "sweep") : request.dir;
  auto allocation = std::make_unique<slurm::SweepAllocation>(
      std::move(host), *plan.allocation,
      slurm::SweepAllocationOptions{.dir = dir,
                                    .job_name = request.job_name,
                                    .heartbeat_every = request.heartbeat_every,
                                    .heartbeat_timeout = request.heartbeat_timeout});
  return {std::move(plan), std::move(allocation)};
}

JobSpec memberSpec(const std::string& spec_text, const std::vector<std::string>& overrides) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(spec_text);
  } catch (const nlohmann::json::exception& e) {
    RM_THROW(kSpec, fmt::format("the sweep's spec is not JSON: {}", e.what()));
  }
  applyOverrides(document, overrides);
  const SpecParseResult parsed = parseJobSpec(document);
  if (!parsed.ok())
    RM_THROW(kSpec,
             fmt::format("a member of the sweep is not a valid job spec:\n{}", parsed.describe()));
  return *parsed.spec;
}

}  // namespace ringmaster::session
