// What Slurm says of a job, read from squeue (its --json form, or the text form where JSON is
// missing) while the job is known there, then from sacct, and the run status each state maps to
// (as torchx's Slurm scheduler maps them). Pure parsing: tested on the real commands' output.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ringmaster::slurm {

struct SlurmJobState {
  std::string job_id;
  std::string state;   // Slurm's own word: PENDING, RUNNING, COMPLETED, TIMEOUT, NODE_FAIL, ...
  std::string reason;  // squeue's reason (Resources, Priority, ...); empty for None
  std::string nodes;   // the allocated node list ("n[1-2]"); empty while pending
  std::optional<int> exit_code;  // the batch script's, once ended (sacct's ExitCode N:S)
  std::optional<int> signal;     // the signal that ended it, when one did
  bool operator==(const SlurmJobState&) const = default;
};

// The run status of a Slurm state: "pending" (PENDING, CONFIGURING, REQUEUED, RESIZING,
// SUSPENDED), "running" (RUNNING, COMPLETING, STOPPED, SIGNALING, STAGE_OUT), "completed"
// (COMPLETED), "cancelled" (CANCELLED, PREEMPTED), "failed" (FAILED, TIMEOUT, NODE_FAIL,
// OUT_OF_MEMORY, BOOT_FAIL, DEADLINE, and any word Slurm adds later).
std::string_view runStatusOfSlurmState(std::string_view state);
// Whether the state is one a job ends in (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...).
bool isFinalSlurmState(std::string_view state);
// How a person reads an ended state: "timed out (its time limit)", "a node failed (NODE_FAIL)"...
std::string describeSlurmState(const SlurmJobState& state);

// `squeue --json --jobs ID` (Slurm 21.08+): the job's entry; nullopt when it is not listed.
// Throws kFormat naming the problem when the text is not squeue's JSON.
std::optional<SlurmJobState> parseSqueueJson(std::string_view text, std::string_view job_id);
// `squeue --noheader --jobs ID --format=%i|%T|%r|%N`: the job's line; nullopt when not listed.
std::optional<SlurmJobState> parseSqueueText(std::string_view text, std::string_view job_id);
// `squeue --steps --noheader --jobs ALLOC --format=%i|%N` (issue 37): the step "ALLOC.STEP" as
// RUNNING on its nodes while it is listed (squeue lists running steps only); nullopt when not.
std::optional<SlurmJobState> parseSqueueSteps(std::string_view text, std::string_view step_id);
// `sacct --jobs ID --allocations --noheader --parsable2 --format=JobID,State,ExitCode,NodeList`
// (or `sacct -c`, the jobcomp file, where accounting storage is off): the job's allocation line;
// nullopt when sacct does not know it (yet: slurmdbd lags a few seconds).
std::optional<SlurmJobState> parseSacct(std::string_view text, std::string_view job_id);
// `sbatch --parsable`'s answer: "ID" or "ID;CLUSTER"; throws kFormat quoting it otherwise.
std::string parseSbatchJobId(std::string_view text);

}  // namespace ringmaster::slurm
