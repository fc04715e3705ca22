// RunSession: one job run from start to end, as every front end runs it (the `ringmaster run`
// command, the window through that command, the coming web server): the spec validated (with
// `--set` overrides), the run created in the database with its own directory, the job launched
// here or over SSH, every telemetry and log line recorded, progress observed, cancel (the first
// stop request) and kill (the second), and the status the run ended with. What the user sees of
// it, and how SSH's questions are asked, stay with the front end (RunObserver, RunRequest).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "process/detached_job.h"
#include "spec/job_spec.h"
#include "telemetry/progress.h"
#if RINGMASTER_HAVE_LIBSSH
#include "ssh/ssh_session.h"
#endif

namespace ringmaster {
class Launch;
}  // namespace ringmaster

namespace ringmaster::storage {
class Database;
class OutputFile;
struct RecordedAgent;
}  // namespace ringmaster::storage

namespace ringmaster::session {

struct RunRequest {
  std::string spec_path;                      // the job spec file (named in every message about it)
  std::optional<std::string> spec_text;       // the spec itself, instead of reading spec_path
  std::string db_path;                        // the run database
  std::vector<std::string> overrides;         // "train.steps=40": a JSON value, else a string
  std::optional<std::string> save_telemetry;  // a copy of every telemetry line received
  double grace_s = 5;                         // cancel: SIGTERM to SIGKILL
  // Detached (ringmaster run --detach, issue 21): the agents are started detached, spooling their
  // lines in each host's job directory; run() returns "detached" once they run, and the run is
  // recorded by `attach` (AttachRequest) from then on.
  bool detach = false;
  // A sweep's shared Slurm allocation (issue 37, run/slurm_sweep.h): the job id a spec with
  // launch.scheduler runs in as a job step, instead of a Slurm job of its own. Ignored by a spec
  // without launch.scheduler.
  std::optional<std::string> slurm_allocation;
  // Over SSH (launch.hosts names other hosts):
  std::optional<std::string> ssh_config;  // default ~/.ssh/config
  std::string master_addr;  // node 0's address as the other hosts reach it; default its HostName
#if RINGMASTER_HAVE_LIBSSH
  // known_hosts and the front end's answers to unknown host keys, passphrases and passwords.
  SshConnectOptions connect;
#endif
};

// Attaching to a detached run (ringmaster attach, cancel, the history's attach): the recorded
// spec and job directories; run() replays each host's spool from the last event stored per rank
// and records the run to its end.
struct AttachRequest {
  std::string db_path;
  int64_t run_id = 0;
  double grace_s = 5;
  // Over SSH: the hosts are reached again, their keys verified against known_hosts as at launch.
  std::optional<std::string> ssh_config;
#if RINGMASTER_HAVE_LIBSSH
  SshConnectOptions connect;
#endif
};

// What a front end hears while the run goes (every callback optional, all on the thread that
// called run()).
struct RunObserver {
  // Each turn of the loop (about every 100 ms): where a front end turns its own stop requests
  // (signals, a button) into requestStop().
  std::function<void()> on_tick;
  // After each turn, with the progress so far.
  std::function<void(const RunProgress& progress)> on_progress;
  // One line the agents or workers wrote on stderr (already recorded).
  std::function<void(std::string_view line)> on_log;
  // The first stop request was taken: the ranks finish their step.
  std::function<void()> on_cancelling;
  // Recording failed (the database, the telemetry copy): the run is being stopped, as failed.
  std::function<void(const std::string& failure)> on_recording_failure;
  // Asked from the launch's threads while an SSH launch (not an attach) connects and starts its
  // hosts (no tick comes then): true, like a requestStop() made after run() began, gives the
  // launch up and the run is recorded failed.
  std::function<bool()> stop_launch;
};

struct RunOutcome {
  // "completed", "failed" or "cancelled"; "detached" when a detached launch left the job running.
  std::string status;
  // Set when that status could not be recorded (the run shows as interrupted from the next start).
  std::optional<std::string> finish_failure;
};

class RunSession {
 public:
  // Validates the spec (and, for a local run, its data files and an absolute checkpoint.dir),
  // then creates the run, its directory and the spec file its workers read. Throws (kSpec,
  // kInvalidArgument, kUnavailable, kIo...) for a bad spec, an unusable database or a missing
  // ringmaster-node, before the run exists; a run created and then failing is recorded failed.
  explicit RunSession(RunRequest request);
  // Attaches to a detached run that is still running. Throws kInvalidArgument for a run that does
  // not exist, was not detached or has ended.
  explicit RunSession(AttachRequest request);
  ~RunSession();
  RunSession(const RunSession&) = delete;
  RunSession& operator=(const RunSession&) = delete;

  int64_t runId() const { return run_id_; }
  const JobSpec& spec() const { return spec_; }  // as recorded
  // As the workers read it: a local run's relative checkpoint.dir made absolute.
  const JobSpec& workerSpec() const { return worker_spec_; }
  bool local() const { return local_; }
  // Handed to Slurm (launch.scheduler, issue 35): submitted from here, followed through the
  // job directory the nodes share.
  bool underSlurm() const { return spec_.launch.slurm.has_value(); }
  bool attached() const { return attach_; }
  // A detached run's job directory on each host (spool, PID files), by node rank.
  const std::vector<std::string>& jobDirs() const { return job_dirs_; }
  // Attached: node `node_rank`'s detached agent as its launch recorded it (PID, start time,
  // session; issue 32); nullopt for a run recorded before agents were.
  std::optional<DetachedAgent> recordedAgent(int node_rank) const {
    const auto node = static_cast<size_t>(node_rank);
    return node < recorded_agents_.size() ? recorded_agents_[node] : std::nullopt;
  }
  int worldSize() const { return world_size_; }
  // With checkpoint.resume: the earlier run whose checkpoints this one continues.
  std::optional<int64_t> resumedFrom() const { return resumed_from_; }
  const std::string& dbPath() const { return request_.db_path; }
  // The run database, open for the session's life (a front end prints its report from it).
  const storage::Database& database() const { return *db_; }
  // The progress so far: null before run(); read it on the thread that called run().
  const RunProgress* progress() const { return progress_.get(); }

  // Launches (over SSH: connecting, asking the request's SSH questions), records until every
  // agent has ended and returns the status recorded. Throws, with the run recorded failed, when
  // the launch itself fails. Once per session.
  RunOutcome run(const RunObserver& observer = {});

  // Safe from any thread and from a signal handler: the first asks the ranks to stop after their
  // step (status `cancelled`), the second kills them.
  void requestStop() { stop_requests_.fetch_add(1); }

 private:
  std::unique_ptr<Launch> startLaunch(storage::Database& db, const RunObserver& observer);

  RunRequest request_;
  JobSpec spec_, worker_spec_;
  bool local_ = true;
  int world_size_ = 0;
  int64_t run_id_ = 0;
  std::optional<int64_t> resumed_from_;
  std::string canonical_;  // the recorded spec's JSON
  std::filesystem::path spec_file_;
  std::string node_binary_;
  std::unique_ptr<storage::Database> db_;
  std::unique_ptr<storage::OutputFile> telemetry_copy_;
  std::unique_ptr<RunProgress> progress_;
  std::atomic<int> stop_requests_{0};
  bool ran_ = false;
  bool attach_ = false;
  std::vector<std::string> job_dirs_;
  std::vector<std::optional<DetachedAgent>> recorded_agents_;  // attached: by node rank
  std::optional<std::string> slurm_job_id_;                    // attached to a Slurm run
};

// A run's own directory for the files it writes (its spec.json, a local run's relative
// checkpoint.dir: docs/spec.md), beside the database and named after it:
// DB_DIR/DB_FILE-runs/run-ID, so that two databases in one directory never share one. Created
// owner-only by the run, which refuses one left by an earlier database of the same name.
std::filesystem::path runDirectory(const std::string& db_path, int64_t run_id);
// A local detached run's job directory (its agent's spool and PID files): RUN_DIRECTORY/job.
std::filesystem::path localJobDirectory(const std::string& db_path, int64_t run_id);

// A detached agent as the run database recorded it (issue 32), for finding and signalling it.
DetachedAgent detachedAgentFrom(int node_rank, const storage::RecordedAgent& recorded);

// Applies "a.b.c=VALUE" overrides to a spec document; VALUE is read as JSON when it parses,
// else taken as a string. Throws kInvalidArgument naming a malformed override.
void applyOverrides(nlohmann::json& document, const std::vector<std::string>& overrides);

}  // namespace ringmaster::session
