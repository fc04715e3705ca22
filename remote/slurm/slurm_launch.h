// SlurmLaunch (issue 35): a job handed to Slurm, as the run session sees any launch. It submits
// the batch script with `sbatch --parsable` (or, attaching, takes the job id recorded), follows
// the job's state through squeue then sacct, and reads every node's telemetry spool through
// `ringmaster-node spool-follow` on the submitting host (the spools lie in the job directory,
// which the nodes share with it). cancel() is `scancel --signal=TERM` (the agents stop their
// workers, which end cancelled), kill() is `scancel`.
// A sweep's member (issue 37, options.allocation) is a job step of the sweep's allocation instead:
// its step script (slurmStepScript) is started detached on the submitting host (`setsid -f`), its
// state is its step's (squeue --steps, then the exit status the script writes), and cancel and
// kill stop only its step.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "launcher/launch.h"
#include "slurm/slurm_host.h"
#include "slurm/slurm_state.h"
#include "spec/job_spec.h"

namespace ringmaster::slurm {

struct SlurmLaunchOptions {
  JobSpec spec;                       // spec.launch.slurm set
  std::string job_dir;                // on the submitting host (shared with the nodes)
  std::string script_path;            // where the batch script is written (in job_dir)
  std::string script;                 // slurmBatchScript's text
  std::string node_binary;            // ringmaster-node on the submitting host (spool-follow)
  std::optional<std::string> job_id;  // attach: the job recorded; nothing is submitted
  // A sweep's member: the sweep's allocation (its job id); `script` is then slurmStepScript's. When
  // attaching, job_id is what was recorded: the allocation, or "ALLOC.STEP" once the step ran.
  std::optional<std::string> allocation;
  std::string follow_from;                     // spool-follow --from, per rank (attach)
  std::chrono::milliseconds poll_every{1000};  // squeue / sacct
  // Called on the pumping thread with every state Slurm reports that differs from the last (the
  // first right after submission: PENDING with its reason, or RUNNING).
  std::function<void(const SlurmJobState&)> on_state;
};

class SlurmLaunch final : public Launch {
 public:
  // Submits (unless options.job_id): throws kComm / kIo naming sbatch's words when it refuses.
  SlurmLaunch(std::unique_ptr<SlurmHost> host, SlurmLaunchOptions options);
  ~SlurmLaunch() override;
  bool pump(std::chrono::milliseconds timeout, const LaunchSink& sink) override;
  void cancel() override;
  void kill() override;
  ExitStatus wait() override;
  // The job's end when it did not complete: "Slurm job 42 ended TIMEOUT (timed out: its time
  // limit) on n[1-2]"; empty when it completed or was cancelled.
  std::string failure() const override;
  // Reads the job's state now (on_state hears it when it changed): what a launch that is not
  // followed (ringmaster run --detach) records before it returns.
  void refreshState();
  // The job submitted, or a member's allocation; a member's step is lastState().job_id once it
  // started ("ALLOC.STEP").
  const std::string& jobId() const;
  const SlurmJobState& lastState() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ringmaster::slurm
