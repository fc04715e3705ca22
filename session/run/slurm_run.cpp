// launchUnderSlurm: the batch script, the submission and the job's states recorded with the run.
#include "run/slurm_run.h"

#include "db/database.h"
#include "recorder/run_lifecycle.h"
#include "slurm/slurm_host.h"
#include "slurm/slurm_script.h"

namespace ringmaster::session {

std::string slurmScriptOf(const JobSpec& spec, const std::string& job_dir,
                          const std::string& spec_path, const std::string& node_binary,
                          double grace_s) {
  return slurm::slurmBatchScript(
      spec,
      {.job_dir = job_dir, .spec_path = spec_path, .node_binary = node_binary, .grace_s = grace_s});
}

std::unique_ptr<slurm::SlurmLaunch> launchUnderSlurm(const SlurmRun& run) {
  storage::Database& db = run.db;
  const int64_t run_id = run.run_id;
  slurm::SlurmLaunchOptions options{
      .spec = run.worker_spec,
      .job_dir = run.job_dir,
      .script_path = run.job_dir + "/slurm.sbatch",
      .script =
          slurmScriptOf(run.worker_spec, run.job_dir, run.spec_path, run.node_binary, run.grace_s),
      .node_binary = run.node_binary,
      .job_id = run.job_id,
      .follow_from = run.follow_from,
      .on_state = [&db, run_id](const slurm::SlurmJobState& state) {
        storage::recordSchedulerState(db, run_id,
                                      {.kind = "slurm",
                                       .job_id = state.job_id,
                                       .state = state.state,
                                       .reason = state.reason,
                                       .nodes = state.nodes});
      }};
  auto launch = std::make_unique<slurm::SlurmLaunch>(slurm::localSlurmHost(), std::move(options));
  if (!run.job_id) {
    // From here on the job lives in Slurm's queue whatever happens to this process.
    storage::recordSchedulerJob(db, run_id, "slurm", launch->jobId());
    storage::markRunDetached(db, run_id, {run.job_dir});
  }
  return launch;
}

}  // namespace ringmaster::session
