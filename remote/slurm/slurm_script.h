// The batch script a Slurm job runs (issue 35, docs/slurm.md): the #SBATCH options from
// launch.scheduler, then one `ringmaster-node agent` per node through srun, with the master's
// address and port taken from the allocation. Pure text: written beside the run, shown in the job
// editor before submission, and submitted with `sbatch --parsable SCRIPT`.
#pragma once

#include <string>
#include <vector>

#include "spec/job_spec.h"

namespace ringmaster::slurm {

// Where the job's files are, as the compute nodes see them (a file system they share with the
// submitting host, as $HOME is on Slurm clusters).
struct SlurmScriptPaths {
  std::string job_dir;      // the run's job directory: node-N/ spools, slurm-JOBID.out
  std::string spec_path;    // the worker spec the agents read
  std::string node_binary;  // ringmaster-node on the nodes
  double grace_s = 5;       // the agents' --grace
};

// The options sbatch is given, one "--name=value" word each, in the script's order: job name
// (spec.name when job_name is unset), nodes, --ntasks-per-node=1, cpus, gpus, mem, partition,
// account, qos, time, constraint, reservation, --output=<job_dir>/slurm-%j.out, --no-requeue,
// then extra_sbatch as written. Requires spec.launch.slurm.
std::vector<std::string> sbatchOptions(const JobSpec& spec, const SlurmScriptPaths& paths);

// The whole script: "#!/bin/bash", an "#SBATCH <option>" line per sbatchOptions word, then the
// body: MASTER_ADDR from the first node of `scontrol show hostnames "$SLURM_JOB_NODELIST"` (its
// NodeAddr), MASTER_PORT launch.master_port or derived from SLURM_JOB_ID, and (its lines continued
// with a backslash)
//   srun --nodes=N --ntasks-per-node=1 --kill-on-bad-exit=1 --input=none
//     <node_binary> agent --spec <spec> --nnodes N --node-rank "$SLURM_NODEID"
//     --master "$MASTER_ADDR:$MASTER_PORT" --grace G --spool-dir <job_dir>/node-"$SLURM_NODEID"
// with every path shell-quoted (shellQuote). $SLURM_NODEID is each node's own: srun runs
// `/bin/bash -c 'exec "$1" agent ...' ringmaster-node-agent <node_binary> <spec> <master>
// <job_dir>` there (the batch script's own is 0). Requires spec.launch.slurm; throws
// kInvalidArgument for a job_dir that an #SBATCH --output line cannot carry (a blank, quote,
// backslash, '#' or control character; '%' is written doubled).
std::string slurmBatchScript(const JobSpec& spec, const SlurmScriptPaths& paths);

// A sweep's member as a job step of the sweep's allocation (issue 37, docs/slurm.md "Sweeps in
// one allocation"): the script the submitting host runs detached instead of sbatch. It writes its
// own output to <job_dir>/slurm-step.out, waits while the allocation `allocation_id` (digits) is
// queued (ending with 143 as soon as <job_dir>/slurm-step-cancel exists), then starts the step with
//   srun --jobid=ALLOC --nodes=N --ntasks-per-node=1 [cpus, gpus, mem, time] --job-name=NAME
//     --kill-on-bad-exit=1 --input=none /bin/bash -c '<agent>' ...
// every option word shell-quoted; each node's task takes the master from the step's own first
// node, MASTER_PORT launch.master_port or derived from the job and step ids (two members of one
// allocation differ), and node 0's writes "ALLOC.STEP" to <job_dir>/slurm-step. When srun ends
// (or the script is stopped by TERM, INT or HUP) its exit status goes to
// <job_dir>/slurm-step-exit. While it waits, squeue is asked every 2 s; `unreachable_polls` failed
// answers in a row (a controller gone: 5 minutes by default) end the script with 1 and squeue's
// words, so that no step script outlives a cluster that went away. Throws kInvalidArgument for an
// allocation id that is not a job id.
std::string slurmStepScript(const JobSpec& spec, const SlurmScriptPaths& paths,
                            const std::string& allocation_id, int unreachable_polls = 150);

// The srun options of slurmStepScript's step, one word each (unquoted), in its order.
std::vector<std::string> stepOptions(const JobSpec& spec, const std::string& allocation_id);

}  // namespace ringmaster::slurm
