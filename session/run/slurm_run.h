// A run handed to Slurm (issue 35), as the run session starts or attaches to it: the batch script
// written beside the run and submitted, the job id and every state Slurm reports recorded with the
// run, and the run marked detached at once, so that a launching process that goes away leaves a
// run `attach` and `cancel` find.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "slurm/slurm_launch.h"
#include "spec/job_spec.h"
#if RINGMASTER_HAVE_LIBSSH
#include "ssh/ssh_session.h"
#endif

namespace ringmaster::storage {
class Database;
}  // namespace ringmaster::storage

namespace ringmaster::session {

struct SlurmRun {
  const JobSpec& worker_spec;  // as the agents read it (spec_path)
  // The run's job directory on the submitting host (shared with the nodes). Submitted from a
  // login node (launch.scheduler.submit_from) and not attaching, it is made there, under
  // $HOME/.ringmaster/jobs, and the worker spec written into it.
  std::string job_dir;
  std::string spec_path;    // this machine's copy; under the job directory on a login node
  std::string node_binary;  // ringmaster-node here and on the nodes
  double grace_s = 5;
  storage::Database& db;
  int64_t run_id = 0;
  std::optional<std::string> job_id;  // attach: the job recorded
  // A sweep's member (issue 37): the sweep's allocation, which it runs in as a job step instead of
  // a job of its own (slurmStepScript). Attaching, a member is known by its recorded job id
  // ("ALLOC.STEP") or the step script kept in its job directory.
  std::optional<std::string> allocation;
  std::string follow_from;  // attach: spool-follow --from
  // The login node over SSH: the ssh config, and the host-key and credential questions.
  std::optional<std::string> ssh_config;
#if RINGMASTER_HAVE_LIBSSH
  SshConnectOptions connect;
#endif
};

struct SlurmLaunched {
  std::unique_ptr<slurm::SlurmLaunch> launch;
  std::string job_dir;  // where it is, on the submitting host
};

// The batch script of the run, as it is submitted (the job editor shows the same text).
std::string slurmScriptOf(const JobSpec& spec, const std::string& job_dir,
                          const std::string& spec_path, const std::string& node_binary,
                          double grace_s);

// Submits the run's job (or takes the recorded one) and records it; throws as SlurmLaunch does
// (and kComm naming the login node when it cannot be reached).
SlurmLaunched launchUnderSlurm(const SlurmRun& run);

// Where Slurm's commands run for `slurm`: this machine, or its submit_from login node over SSH.
std::unique_ptr<slurm::SlurmHost> slurmSubmittingHost(const SlurmSpec& slurm,
                                                      const std::optional<std::string>& ssh_config
#if RINGMASTER_HAVE_LIBSSH
                                                      ,
                                                      const SshConnectOptions& connect
#endif
);

// A directory of its own on a login node, $HOME/.ringmaster/jobs/PREFIX-XXXXXXXX (0700).
std::string makeLoginDirectory(slurm::SlurmHost& host, const std::string& prefix);

}  // namespace ringmaster::session
