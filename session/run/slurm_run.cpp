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
#if RINGMASTER_HAVE_LIBSSH
  return slurmSubmittingHost(*run.worker_spec.launch.slurm, run.ssh_config, run.connect);
#else
  return slurmSubmittingHost(*run.worker_spec.launch.slurm, run.ssh_config);
#endif
}

// A sweep member's allocation when attaching: the recorded "ALLOC.STEP", or a job id whose job
// directory keeps the member's step script (its step never started).
std::optional<std::string> recordedAllocation(const SlurmRun& run, slurm::SlurmHost& host) {
  if (!run.job_id) return run.allocation;
  const size_t dot = run.job_id->find('.');
  if (dot != std::string::npos) return run.job_id->substr(0, dot);
  const bool member =
      host.run({"test", "-f", run.job_dir + "/slurm-step.sh"}, std::chrono::seconds(60))
          .status.ok();
  return member ? run.job_id : std::nullopt;
}

}  // namespace

std::unique_ptr<slurm::SlurmHost> slurmSubmittingHost(const SlurmSpec& slurm,
                                                      const std::optional<std::string>& ssh_config
#if RINGMASTER_HAVE_LIBSSH
                                                      ,
                                                      const SshConnectOptions& connect
#endif
) {
  const std::optional<LaunchHostSpec>& login = slurm.submit_from;
  if (!login) return slurm::localSlurmHost();
#if RINGMASTER_HAVE_LIBSSH
  return ssh_config ? slurm::sshSlurmHost(*login, connect, *ssh_config)
                    : slurm::sshSlurmHost(*login, connect);
#else
  (void)ssh_config;
  RM_THROW(kUnavailable,
           fmt::format("launch.scheduler.submit_from names the login node {}, and this build has "
                       "no SSH (libssh was not found when it was configured)",
                       login->host));
#endif
}

// A directory of its own on the login node, in its home (which Slurm's nodes share), owner only;
// the command is constant text, the prefix passed as data.
std::string makeLoginDirectory(slurm::SlurmHost& host, const std::string& prefix) {
  const slurm::CommandOutput made =
      host.run({"sh", "-c",
                "umask 077 && mkdir -p \"$HOME/.ringmaster/jobs\" && mktemp -d "
                "\"$HOME/.ringmaster/jobs/$1-XXXXXXXX\"",
                "sh", prefix},
               std::chrono::seconds(60));
  std::string dir = made.out.substr(0, made.out.find('\n'));
  if (!made.status.ok() || dir.empty() || dir.front() != '/')
    RM_THROW(kIo, fmt::format("cannot make a job directory on {}: {}", host.describe(),
                              made.err.empty() ? made.status.describe() : made.err));
  return dir;
}

SlurmLaunched launchUnderSlurm(const SlurmRun& run) {
  storage::Database& db = run.db;
  const int64_t run_id = run.run_id;
  std::unique_ptr<slurm::SlurmHost> host = submittingHost(run);
  const std::optional<std::string> allocation = recordedAllocation(run, *host);
  std::string job_dir = run.job_dir;
  std::string spec_path = run.spec_path;
  if (run.worker_spec.launch.slurm->submit_from) {
    if (job_dir.empty()) job_dir = makeLoginDirectory(*host, "run");
    spec_path = job_dir + "/spec.json";
    if (!run.job_id) host->writeFile(spec_path, toJson(run.worker_spec).dump(2) + "\n");
  }
  slurm::SlurmLaunchOptions options{
      .spec = run.worker_spec,
      .job_dir = job_dir,
      .script_path = job_dir + (allocation ? "/slurm-step.sh" : "/slurm.sbatch"),
      .script = allocation ? slurm::slurmStepScript(run.worker_spec,
                                                    {.job_dir = job_dir,
                                                     .spec_path = spec_path,
                                                     .node_binary = run.node_binary,
                                                     .grace_s = run.grace_s},
                                                    *allocation)
                           : slurmScriptOf(run.worker_spec, job_dir, spec_path, run.node_binary,
                                           run.grace_s),
      .node_binary = run.node_binary,
      .job_id = run.job_id,
      .allocation = allocation,
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
