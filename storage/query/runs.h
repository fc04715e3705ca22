// Reading runs back: the run records (for the run list and a run's header), their ranks, logs and
// flight-recorder dumps, and the names of the scalar metrics a run has.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "db/database.h"
#include "db/scheduler_job.h"
#include "telemetry/events.h"

namespace ringmaster::storage {

struct RunRecord {
  int64_t id = 0;
  std::string name;
  std::string spec_json;
  std::string strategy;
  int world_size = 1;
  // The device mesh (issue 34): dp x tp x pp = world_size, from its ranks' hello, else its spec;
  // runs recorded before it: dp = world_size, or pp = world_size for a pipeline.
  MeshAxes mesh{.dp = 1, .tp = 1, .pp = 1};
  // Ranks that split each batch between them (the others of a replica see the same samples).
  int dataParallelSize() const { return mesh.dp; }
  std::string status;  // pending, running, completed, failed, cancelled, interrupted
  double created_at = 0;
  std::optional<double> started_at, ended_at;
  std::optional<std::string> error;  // the root cause
  std::optional<int> error_rank;
  std::optional<std::string> error_host;
  // Started with `ringmaster run --detach` (issue 21): while `running`, it goes on with or without
  // a recorder attached (`ringmaster attach` / `cancel`).
  bool detached = false;
  // A run handed to a scheduler (issue 35): the Slurm job id, state and reason; nullopt otherwise.
  std::optional<SchedulerJob> scheduler;
  // What a person wrote about the run (issue 33): its tags, sorted, and a free-text note.
  std::vector<std::string> tags;
  std::optional<std::string> note;
  // Seconds from start to end (to now while running); 0 when it never started.
  double durationSeconds() const;
};

// A spec field's value (issue 33): `path` as "optimizer.lr" or "strategy.mesh[0]" (the stored
// spec JSON's keys), `value` as written: a number matches any equal number (3e-4 matches 0.0003),
// true / false a boolean, anything else the text.
struct SpecFieldMatch {
  std::string path;
  std::string value;
};

// Every condition given must hold. Text matches ignore ASCII case.
struct RunFilter {
  std::optional<std::string> name_contains;
  std::optional<std::string> strategy;
  std::optional<std::string> status;
  std::optional<double> created_after, created_before;  // seconds since the epoch
  std::vector<std::string> words;                       // each in the name, a tag or the note
  std::vector<std::string> tags;                        // has every one of these tags
  std::optional<std::string> note_contains;
  std::vector<SpecFieldMatch> spec_fields;
  int limit = 1000;
};

// Newest first. Throws kInvalidArgument for a spec field path that is not one (query/run_search.h
// says what is).
std::vector<RunRecord> listRuns(const Database& db, const RunFilter& filter = {});
// Throws kInvalidArgument naming the id when there is no such run.
RunRecord loadRun(const Database& db, int64_t run_id);

struct RankRecord {
  int rank = 0;
  int attempt = 0;
  std::string host, device, device_name, version;
  int64_t pid = 0;
  uint64_t memory_total = 0;          // bytes
  std::optional<std::string> status;  // from its done event
  // Its coordinates on the run's mesh (issue 34): as its hello said, else by the mesh's rank
  // order (spec/mesh_layout.h); none for a row without a hello.
  std::optional<MeshAxes> coords;
};
// The ranks of the run's latest attempt, by rank.
std::vector<RankRecord> loadRanks(const Database& db, int64_t run_id);

// One attempt of a run (launch.max_restarts restarts every worker as the next attempt): when it
// began and ended, the steps it stored (first_step - 1 is the checkpoint it resumed from; the
// previous attempt's steps from first_step on were rolled back), and its root cause.
struct AttemptRecord {
  int attempt = 0;
  double started_at = 0;
  std::optional<double> ended_at;
  std::optional<int64_t> first_step, last_step;
  std::optional<std::string> error;
  std::optional<int> error_rank;
  std::optional<std::string> error_host;
};
// By attempt.
std::vector<AttemptRecord> loadAttempts(const Database& db, int64_t run_id);

struct LogLine {
  std::optional<int> rank;  // empty: the recorder's own line
  double t = 0;
  std::string level, message;
};
// Oldest first; at most `limit` lines, the last ones when there are more.
std::vector<LogLine> loadLogs(const Database& db, int64_t run_id, std::optional<int> rank = {},
                              int limit = 1000);

// A run's log lines read in order from a cursor, as `ringmaster logs` (and its --follow) reads
// them: the lines after row `after_row` (0: from the first), oldest first, at most `limit`; with
// `rank`, that rank's only; with `containing`, the lines holding that text only. `last_row` is the
// cursor of the next read (after_row when no line came).
struct LogQuery {
  std::optional<int> rank;
  std::optional<std::string> containing;
  int limit = 1000;
};
struct LogPage {
  std::vector<LogLine> lines;
  int64_t last_row = 0;
};
LogPage loadLogsAfter(const Database& db, int64_t run_id, int64_t after_row, const LogQuery& query);

// What the rank named by a root cause last wrote on its stderr (issue 33: a script failing on a
// bad argument shows argparse's message, not only its exit code): the last kErrorOutputLines lines
// of `rank` in `attempt`, oldest first, without the "[rank N] " the agent or the worker put before
// them; each line made safe to show (displaySafeMessageLine: controls and invalid UTF-8 as
// visible escapes, so that its JSON is valid), cut at kErrorOutputLineBytes, and all of them
// within kErrorOutputBytes (the oldest go first).
inline constexpr int kErrorOutputLines = 20;
inline constexpr size_t kErrorOutputLineBytes = 400;
inline constexpr size_t kErrorOutputBytes = 4096;
std::vector<std::string> loadErrorOutput(const Database& db, int64_t run_id, int attempt, int rank);

// The run's warnings and errors: the last `limit` of them, oldest first, and how many it has.
struct ProblemLines {
  std::vector<LogLine> last;
  int64_t total = 0;
};
ProblemLines loadProblemLines(const Database& db, int64_t run_id, int limit);

struct FlightRecorderDump {
  int rank = 0;
  double t = 0;
  std::string dump_json;
};
std::vector<FlightRecorderDump> loadFlightRecorderDumps(const Database& db, int64_t run_id);

// The scalar metrics the run recorded ("loss", "step_ms", ...), sorted.
std::vector<std::string> metricNames(const Database& db, int64_t run_id);

// What the recorder counted for the run's attempts together.
struct IngestCounts {
  int64_t stored = 0, duplicates = 0, dropped = 0, malformed = 0;
};
IngestCounts loadIngestCounts(const Database& db, int64_t run_id);

}  // namespace ringmaster::storage
