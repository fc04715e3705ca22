// launchUnderSlurm: the batch script, the submission and the job's states recorded with the run.
#include "run/slurm_run.h"

#include "db/database.h"
#include "recorder/run_lifecycle.h"
#include "slurm/slurm_host.h"
#include "slurm/slurm_script.h"
#if RINGMASTER_HAVE_LIBSSH
#include "ssh/ssh_slurm_host.h"
#endif

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster::session {

std::string slurmScriptOf(const JobSpec& spec, const std::string& job_dir,
                          const std::string& spec_path, const std::string& node_binary,
                          double grace_s) {
  return slurm::slurmBatchScript(
      spec,
      {.job_dir = job_dir, .spec_path = spec_path, .node_binary = node_binary, .grace_s = grace_s});
}

namespace {

// Where Slurm's commands run: this machine, or the login node over SSH.
std::unique_ptr<slurm::SlurmHost> submittingHost(const SlurmRun& run) {
  const std::optional<LaunchHostSpec>& login = run.worker_spec.launch.slurm->submit_from;
  if (!login) return slurm::localSlurmHost();
#if RINGMASTER_HAVE_LIBSSH
  return run.ssh_config ? slurm::sshSlurmHost(*login, run.connect, *run.ssh_config)
                        : slurm::sshSlurmHost(*login, run.connect);
#else
  RM_THROW(kUnavailable,
           fmt::format("launch.scheduler.submit_from names the login node {}, and this build has "
                       "no SSH (libssh was not found when it was configured)",
                       login->host));
#endif
}

// A job directory of its own on the login node, in its home (which Slurm's nodes share), owner
// only; the command is constant text, no value of the spec in it.
std::string makeLoginJobDirectory(slurm::SlurmHost& host) {
  const slurm::CommandOutput made =
      host.run({"sh", "-c",
                "umask 077 && mkdir -p \"$HOME/.ringmaster/jobs\" && mktemp -d "
                "\"$HOME/.ringmaster/jobs/run-XXXXXXXX\""},
               std::chrono::seconds(60));
  std::string dir = made.out.substr(0, made.out.find('\n'));
  if (!made.status.ok() || dir.empty() || dir.front() != '/')
    RM_THROW(kIo, fmt::format("cannot make a job directory on {}: {}", host.describe(),
                              made.err.empty() ? made.status.describe() : made.err));
  return dir;
}

}  // namespace

SlurmLaunched launchUnderSlurm(const SlurmRun& run) {
  storage::Database& db = run.db;
  const int64_t run_id = run.run_id;
  std::unique_ptr<slurm::SlurmHost> host = submittingHost(run);
  std::string job_dir = run.job_dir;
  std::string spec_path = run.spec_path;
  if (run.worker_spec.launch.slurm->submit_from) {
    if (job_dir.empty()) job_dir = makeLoginJobDirectory(*host);
    spec_path = job_dir + "/spec.json";
    if (!run.job_id) host->writeFile(spec_path, toJson(run.worker_spec).dump(2) + "\n");
  }
  slurm::SlurmLaunchOptions options{
      .spec = run.worker_spec,
      .job_dir = job_dir,
      .script_path = job_dir + "/slurm.sbatch",
      .script = slurmScriptOf(run.worker_spec, job_dir, spec_path, run.node_binary, run.grace_s),
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
  auto launch = std::make_unique<slurm::SlurmLaunch>(std::move(host), std::move(options));
  if (!run.job_id) {
    // From here on the job lives in Slurm's queue whatever happens to this process.
    storage::recordSchedulerJob(db, run_id, "slurm", launch->jobId());
    storage::markRunDetached(db, run_id, {job_dir});
  }
  return {.launch = std::move(launch), .job_dir = job_dir};
}

}  // namespace ringmaster::session
