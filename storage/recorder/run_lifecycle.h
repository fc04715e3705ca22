// A run's lifecycle in the run database, apart from the telemetry the Recorder writes into it:
// creating and finishing a run, its root cause, the hosts it ran on, and the reconciliation of runs
// a vanished process left running.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/scheduler_job.h"
#include "telemetry/events.h"

namespace ringmaster::storage {

class Database;

// A run as it is created: what the runs table needs before any telemetry arrives.
struct NewRun {
  std::string name;
  std::string spec_json;  // canonical
  std::string strategy;
  int world_size = 1;
  // The device mesh (issue 34), dp x tp x pp = world_size, where the spec gives it; else
  // legacyRunMesh. A rank's hello that names one replaces it.
  std::optional<MeshAxes> mesh;
};

// The mesh of a run whose strategy was one dimension, as migration 17 fills it for runs recorded
// before: a pipeline's stages (pp = world size), any other strategy's replicas (dp = world size).
MeshAxes legacyRunMesh(const std::string& strategy, int world_size);

// Inserts a `running` run with attempt 0, owned by this process (pid and host, so that a later
// start can tell it was interrupted); returns its id, past every run's, deleted ones' too (an id,
// and the run directory named by it, never names two runs).
int64_t createRun(Database& db, const NewRun& run);
// Sets the final status (completed, failed, cancelled) and the end time.
void finishRun(Database& db, int64_t run_id, const std::string& status);
// Sets the run's root cause unless a rank already reported one (the first failure wins).
void recordRunError(Database& db, int64_t run_id, const std::string& message,
                    std::optional<int> rank = {}, std::optional<std::string> host = {});
// Sets a failure known to have caused the others (a host's connection was lost), replacing what
// the ranks reported as they were stopped because of it.
void recordRunRootCause(Database& db, int64_t run_id, const std::string& message);
// A host of a run launched over SSH (the run_hosts table).
struct RunHost {
  int node_rank = 0;
  std::string alias, hostname, user;
  int port = 22;
  std::string fingerprint, node_binary;
  bool uploaded = false;
  std::string command, libssh_version;
};
void recordRunHosts(Database& db, int64_t run_id, const std::vector<RunHost>& hosts);
// Runs left `running` by a process of this host that no longer exists become `interrupted`;
// returns how many. A detached run is not one: its agents go on with no recorder.
int reconcileInterruptedRuns(Database& db);

// Detached runs (ringmaster run --detach, issue 21): the run is marked detached, owned by no
// process, with each host's job directory (`job_dirs[i]` of node i).
void markRunDetached(Database& db, int64_t run_id, const std::vector<std::string>& job_dirs);
// A host's detached agent as its launch said it: PID, start time (/proc/PID/stat field 22), the
// session its workers are in and the host's boot id (issue 32).
struct RecordedAgent {
  int64_t pid = 0;
  int64_t start_time = 0;
  int64_t session = 0;
  std::string boot_id;
};
void recordDetachedAgent(Database& db, int64_t run_id, int node_rank, const RecordedAgent& agent);
// A run handed to a scheduler (issue 35): its kind and job id, recorded once sbatch answers, the
// state empty until the first recordSchedulerState.
void recordSchedulerJob(Database& db, int64_t run_id, const std::string& kind,
                        const std::string& job_id);
// The scheduler's word for the job now, kept beside the run's status: a job waiting in the queue
// (Slurm's PENDING) makes a `running` run `pending`, and a running one (RUNNING) a `pending` run
// `running` again; an ended run's status is finishRun's alone.
void recordSchedulerState(Database& db, int64_t run_id, const SchedulerJob& job);
// A run as attach and cancel find it: its spec, status, and job directories by node rank (empty
// when it was never detached), with each host's agent where its launch recorded it; nullopt when
// there is no such run.
struct DetachedRun {
  std::string spec_json, status;
  int world_size = 1;
  std::vector<std::string> job_dirs;
  std::vector<std::optional<RecordedAgent>> agents;  // by node rank, as job_dirs
  std::optional<SchedulerJob> scheduler;  // a run handed to Slurm (issue 35)
};
std::optional<DetachedRun> findDetachedRun(Database& db, int64_t run_id);
// A process attaching to a detached run records its pid and host as the run's recorder (a run
// whose attach dies stays detached, never interrupted).
void claimRun(Database& db, int64_t run_id);
// How many ranks of the run said hello (in any attempt): a run none of whose ranks did cannot
// have completed (issue 32).
int ranksThatSaidHello(Database& db, int64_t run_id);
// Each rank's last stored event: the highest attempt with stored events and its highest seq, from
// which a replay goes on (RANK -> (ATTEMPT, SEQ)).
std::map<int, std::pair<int, uint64_t>> lastStoredSeqs(Database& db, int64_t run_id);

}  // namespace ringmaster::storage
