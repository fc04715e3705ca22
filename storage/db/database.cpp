// Opening the run database (pragmas, the network file system check) and its migrations.
#include "db/database.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "db/files.h"
#include "db/step_columns.h"
#include "db/step_rollups.h"

namespace ringmaster::storage {

namespace {

namespace fs = std::filesystem;

// Migration 20 (issue 36): the step columns' rollups as one row per run, width, rank and bucket
// holding every column (step_rollups.h), so a batch writes one rollup row per bucket, not one per
// column: the upserts of scalar_rollups had cost the recorder a fifth of its writer's time. The
// step columns' rows of scalar_rollups move there, pivoted. The columns are those of schema 19,
// written out: a step column added later adds its rollup columns in its own migration.
std::string stepRollupsMigrationSql() {
  static constexpr std::string_view kColumnsAtSchema19[] = {
      "wall_time_s",   "loss",       "lr",           "samples",
      "step_ms",       "compute_ms", "comm_ms",      "exposed_comm_ms",
      "mem_allocated", "mem_peak",   "mem_reserved", "device_mem_used",
      "grad_norm",     "accuracy",   "tokens",       "tokens_per_s",
      "mfu",           "loss_scale", "skipped"};
  std::vector<std::string> definitions, columns, pivots, names;
  for (std::string_view column : kColumnsAtSchema19) {
    for (std::string_view part : kStepRollupParts) {
      const bool whole = part == "n" || part == "first" || part == "last";
      definitions.push_back(
          fmt::format("  {} {}", stepRollupColumn(column, part), whole ? "INTEGER" : "REAL"));
    }
    columns.push_back(stepRollupColumns(column));
    pivots.push_back(fmt::format(
        "max(CASE WHEN m.name = '{0}' THEN r.n END), max(CASE WHEN m.name = '{0}' THEN r.sum END), "
        "max(CASE WHEN m.name = '{0}' THEN r.min END), max(CASE WHEN m.name = '{0}' THEN r.max "
        "END), max(CASE WHEN m.name = '{0}' THEN r.first_step END), max(CASE WHEN m.name = '{0}' "
        "THEN r.last_step END), max(CASE WHEN m.name = '{0}' THEN r.last_value END)",
        column));
    names.push_back(fmt::format("'{}'", column));
  }
  return fmt::format(R"sql(
CREATE TABLE step_rollups (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  width INTEGER NOT NULL,             -- steps per bucket: 64, 512 or 4096
  rank INTEGER NOT NULL,
  bucket INTEGER NOT NULL,            -- step / width
{0},
  PRIMARY KEY (run_id, width, rank, bucket)
);
INSERT INTO step_rollups (run_id, width, rank, bucket, {1})
  SELECT r.run_id, r.width, r.rank, r.bucket, {2}
  FROM scalar_rollups r JOIN metrics m ON m.id = r.metric_id
  WHERE m.name IN ({3}) GROUP BY r.run_id, r.width, r.rank, r.bucket;
DELETE FROM scalar_rollups WHERE metric_id IN (SELECT id FROM metrics WHERE name IN ({3}));
)sql",
                     fmt::join(definitions, ",\n"), fmt::join(columns, ", "),
                     fmt::join(pivots, ", "), fmt::join(names, ", "));
}

// Migration i (0-based) takes a database from user_version i to i + 1. Append, never edit: a
// database written by an older build must reach the current version through every step.
// The one edit: migrations 5, 8 and 9 created (and recreated) the view `scalar_points`, and no
// longer do; every connection makes it instead, from kStepColumns (scalarPointsViewSql). No file
// holds anything else for it: a view holds no data, no later migration reads it, the only files
// at versions 5 to 13 are earlier builds' (this build migrates every file it opens to the
// latest), and migration 14 drops the view those left, so every file ends the same.
const std::vector<std::string>& migrationSql() {
  static const std::vector<std::string> kMigrations = {
      // 1: runs, their attempts and ranks, and everything the telemetry protocol carries.
      R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  spec TEXT NOT NULL,                 -- the canonical spec JSON
  strategy TEXT NOT NULL,
  world_size INTEGER NOT NULL CHECK (world_size >= 1),
  status TEXT NOT NULL CHECK (status IN
      ('pending', 'running', 'completed', 'failed', 'cancelled', 'interrupted')),
  created_at REAL NOT NULL,           -- seconds since the epoch
  started_at REAL,
  ended_at REAL,
  error TEXT,                         -- the root cause, as the first failing rank reported it
  error_rank INTEGER,
  error_host TEXT,
  recorder_pid INTEGER,               -- the process recording it while running
  recorder_host TEXT
);
CREATE INDEX runs_by_created ON runs (created_at);

CREATE TABLE attempts (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL,
  started_at REAL NOT NULL,
  ended_at REAL,
  events_stored INTEGER NOT NULL DEFAULT 0,
  events_duplicate INTEGER NOT NULL DEFAULT 0,
  events_dropped INTEGER NOT NULL DEFAULT 0,   -- the recorder's queue was full
  lines_malformed INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (run_id, attempt)
);

CREATE TABLE ranks (
  run_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  local_rank INTEGER,
  host TEXT,
  pid INTEGER,
  device TEXT,
  device_name TEXT,
  memory_total INTEGER,
  version TEXT,
  status TEXT,                        -- from the rank's done event
  PRIMARY KEY (run_id, attempt, rank),
  FOREIGN KEY (run_id, attempt) REFERENCES attempts ON DELETE CASCADE
);

-- (run, attempt, rank, seq) of every stored event: a replayed event is stored once.
CREATE TABLE events_seen (
  run_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (run_id, attempt, rank, seq),
  FOREIGN KEY (run_id, attempt) REFERENCES attempts ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE metrics (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE           -- "loss", "step_ms", "mem_peak", ...
);

-- Generic scalar series: one value per (run, metric, rank, step), whatever the strategy.
CREATE TABLE scalars (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  metric_id INTEGER NOT NULL REFERENCES metrics (id),
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  value REAL NOT NULL,
  attempt INTEGER NOT NULL,
  PRIMARY KEY (run_id, metric_id, rank, step)
) WITHOUT ROWID;

CREATE TABLE comm_events (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  t REAL NOT NULL,
  step INTEGER,
  op TEXT NOT NULL,
  group_name TEXT NOT NULL,
  group_size INTEGER NOT NULL,
  bytes INTEGER NOT NULL,
  dtype TEXT NOT NULL,
  duration_ms REAL NOT NULL,
  wait_ms REAL,
  algbw_gbps REAL NOT NULL,
  busbw_gbps REAL NOT NULL,
  peer INTEGER
);
CREATE INDEX comm_events_by_run ON comm_events (run_id, op, bytes);

CREATE TABLE sched_events (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  stage INTEGER NOT NULL,
  virtual_stage INTEGER NOT NULL,
  micro_batch INTEGER NOT NULL,
  phase TEXT NOT NULL CHECK (phase IN ('F', 'B', 'W')),
  start_us INTEGER NOT NULL,
  end_us INTEGER NOT NULL
);
CREATE INDEX sched_events_by_step ON sched_events (run_id, step);

CREATE TABLE logs (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL,
  rank INTEGER,                       -- null: the recorder's own lines
  t REAL NOT NULL,
  level TEXT NOT NULL,
  message TEXT NOT NULL
);
CREATE INDEX logs_by_run ON logs (run_id, rank);

CREATE TABLE flight_recorder_dumps (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  t REAL NOT NULL,
  dump TEXT NOT NULL                  -- the flight recorder's JSON
);
)sql",
      // 2: every scalar series summarised per bucket of 64 and of 4096 steps (count, sum, min,
      // max, first and last point), so a series of any length loads reduced to a few thousand
      // buckets without reading every point. Existing series are summarised here.
      R"sql(
CREATE TABLE scalar_rollups (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  metric_id INTEGER NOT NULL REFERENCES metrics (id),
  rank INTEGER NOT NULL,
  width INTEGER NOT NULL,             -- steps per bucket: 64 or 4096
  bucket INTEGER NOT NULL,            -- step / width
  n INTEGER NOT NULL,
  sum REAL NOT NULL,
  min REAL NOT NULL,
  max REAL NOT NULL,
  first_step INTEGER NOT NULL,
  last_step INTEGER NOT NULL,
  last_value REAL NOT NULL,
  PRIMARY KEY (run_id, metric_id, rank, width, bucket)
) WITHOUT ROWID;
INSERT INTO scalar_rollups
  SELECT g.run_id, g.metric_id, g.rank, 64, g.bucket, g.n, g.sum, g.min, g.max, g.first_step,
         g.last_step, s.value
  FROM (SELECT run_id, metric_id, rank, step / 64 AS bucket, count(*) AS n, sum(value) AS sum,
               min(value) AS min, max(value) AS max, min(step) AS first_step,
               max(step) AS last_step
        FROM scalars GROUP BY run_id, metric_id, rank, step / 64) g
  JOIN scalars s ON s.run_id = g.run_id AND s.metric_id = g.metric_id AND s.rank = g.rank
                AND s.step = g.last_step;
INSERT INTO scalar_rollups
  SELECT g.run_id, g.metric_id, g.rank, 4096, g.bucket, g.n, g.sum, g.min, g.max, g.first_step,
         g.last_step, r.last_value
  FROM (SELECT run_id, metric_id, rank, bucket / 64 AS bucket, sum(n) AS n, sum(sum) AS sum,
               min(min) AS min, max(max) AS max, min(first_step) AS first_step,
               max(last_step) AS last_step, max(bucket) AS last_bucket
        FROM scalar_rollups WHERE width = 64 GROUP BY run_id, metric_id, rank, bucket / 64) g
  JOIN scalar_rollups r ON r.run_id = g.run_id AND r.metric_id = g.metric_id
                       AND r.rank = g.rank AND r.width = 64 AND r.bucket = g.last_bucket;
)sql",
      // 3: the hosts of a run launched over SSH: who ran what where, with the verified host key.
      R"sql(
CREATE TABLE run_hosts (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  node_rank INTEGER NOT NULL,
  alias TEXT NOT NULL,                -- as written in launch.hosts
  hostname TEXT NOT NULL,
  port INTEGER NOT NULL,
  user TEXT NOT NULL,
  fingerprint TEXT NOT NULL,          -- the host key verified against known_hosts (SHA256:...)
  node_binary TEXT NOT NULL,
  uploaded INTEGER NOT NULL,          -- 1: this launch uploaded ringmaster-node
  command TEXT NOT NULL,              -- exactly what was started
  libssh_version TEXT NOT NULL,
  PRIMARY KEY (run_id, node_rank)
);
)sql",
      // 4: rollups of 512 steps between the 64 and 4096 ones, so that a long series reduced to
      // one bucket per pixel column (about a thousand) reads a few thousand summaries per rank,
      // not tens of thousands: the desktop's all-ranks band of 64 ranks x 1M steps.
      R"sql(
INSERT INTO scalar_rollups
  SELECT g.run_id, g.metric_id, g.rank, 512, g.bucket, g.n, g.sum, g.min, g.max, g.first_step,
         g.last_step, r.last_value
  FROM (SELECT run_id, metric_id, rank, bucket / 8 AS bucket, sum(n) AS n, sum(sum) AS sum,
               min(min) AS min, max(max) AS max, min(first_step) AS first_step,
               max(last_step) AS last_step, max(bucket) AS last_bucket
        FROM scalar_rollups WHERE width = 64 GROUP BY run_id, metric_id, rank, bucket / 8) g
  JOIN scalar_rollups r ON r.run_id = g.run_id AND r.metric_id = g.metric_id
                       AND r.rank = g.rank AND r.width = 64 AND r.bucket = g.last_bucket;
)sql",
      // 5: ingest at a row per event. A step event is one row of `steps`, its fixed fields as
      // columns, instead of a `scalars` row per field; `scalars` keeps every other metric. The
      // (run, attempt, rank, seq) of stored events are kept as ranges of consecutive sequence
      // numbers instead of a row per event. (`scalar_points`, which reads both tables as one long
      // series, was created here; see scalarPointsViewSql.)
      // Communication events are indexed by step instead of by op and size.
      R"sql(
CREATE TABLE steps (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  wall_time_s REAL,                   -- null: the field was absent (or NaN, for loss)
  loss REAL,
  lr REAL,
  samples REAL,
  step_ms REAL,
  compute_ms REAL,
  comm_ms REAL,
  exposed_comm_ms REAL,
  mem_allocated REAL,
  mem_peak REAL,
  mem_reserved REAL,
  device_mem_used REAL,
  grad_norm REAL,
  accuracy REAL,
  PRIMARY KEY (run_id, rank, step)
) WITHOUT ROWID;
INSERT INTO steps
  SELECT s.run_id, s.rank, s.step, max(s.attempt),
         max(CASE m.name WHEN 'wall_time_s' THEN s.value END),
         max(CASE m.name WHEN 'loss' THEN s.value END),
         max(CASE m.name WHEN 'lr' THEN s.value END),
         max(CASE m.name WHEN 'samples' THEN s.value END),
         max(CASE m.name WHEN 'step_ms' THEN s.value END),
         max(CASE m.name WHEN 'compute_ms' THEN s.value END),
         max(CASE m.name WHEN 'comm_ms' THEN s.value END),
         max(CASE m.name WHEN 'exposed_comm_ms' THEN s.value END),
         max(CASE m.name WHEN 'mem_allocated' THEN s.value END),
         max(CASE m.name WHEN 'mem_peak' THEN s.value END),
         max(CASE m.name WHEN 'mem_reserved' THEN s.value END),
         max(CASE m.name WHEN 'device_mem_used' THEN s.value END),
         max(CASE m.name WHEN 'grad_norm' THEN s.value END),
         max(CASE m.name WHEN 'accuracy' THEN s.value END)
  FROM scalars s JOIN metrics m ON m.id = s.metric_id
  WHERE m.name IN ('wall_time_s', 'loss', 'lr', 'samples', 'step_ms', 'compute_ms', 'comm_ms',
    'exposed_comm_ms', 'mem_allocated', 'mem_peak', 'mem_reserved', 'device_mem_used', 'grad_norm',
    'accuracy')
  GROUP BY s.run_id, s.rank, s.step;
DELETE FROM scalars WHERE metric_id IN (SELECT id FROM metrics WHERE name IN (
    'wall_time_s', 'loss', 'lr', 'samples', 'step_ms', 'compute_ms', 'comm_ms',
    'exposed_comm_ms', 'mem_allocated', 'mem_peak', 'mem_reserved', 'device_mem_used', 'grad_norm',
    'accuracy'));

CREATE TABLE seq_ranges (
  run_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,          -- every seq in [first_seq, last_seq] is stored
  PRIMARY KEY (run_id, attempt, rank, first_seq),
  FOREIGN KEY (run_id, attempt) REFERENCES attempts ON DELETE CASCADE
) WITHOUT ROWID;
INSERT INTO seq_ranges
  SELECT run_id, attempt, rank, min(seq), max(seq)
  FROM (SELECT run_id, attempt, rank, seq,
               seq - row_number() OVER (PARTITION BY run_id, attempt, rank ORDER BY seq) AS island
        FROM events_seen)
  GROUP BY run_id, attempt, rank, island;
DROP TABLE events_seen;

-- Communication events are read per run and by step range; an index by op and size costs
-- more at ingest than one by step, and the statistics by op sort the run's events instead.
DROP INDEX comm_events_by_run;
CREATE INDEX comm_events_by_step ON comm_events (run_id, step);
)sql",
      // 6: a pipeline action's compute apart from its wait: ready_us is when its input arrived
      // and its compute began (null in runs recorded before: read as start_us), transfer_us the
      // exposed transfer at the end of that wait (null: 0).
      R"sql(
ALTER TABLE sched_events ADD COLUMN ready_us INTEGER;
ALTER TABLE sched_events ADD COLUMN transfer_us INTEGER;
)sql",
      // 7: evaluations on the validation set (the eval event): a row per run, rank and step, the
      // latest attempt's values kept.
      R"sql(
CREATE TABLE evals (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  rank INTEGER NOT NULL,
  step INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  t REAL NOT NULL,                    -- the event's time, seconds since 1970
  val_loss REAL,                      -- null: NaN or infinite
  perplexity REAL,                    -- null: NaN or infinite
  tokens INTEGER NOT NULL,
  eval_ms REAL NOT NULL,
  PRIMARY KEY (run_id, rank, step)
) WITHOUT ROWID;
)sql",
      // 8: throughput in the step event: tokens processed, tokens/s and model FLOPs utilisation
      // (null in runs recorded before, and mfu where no peak FLOP/s was known), as step columns
      // (scalar_points was recreated with them here; see scalarPointsViewSql).
      R"sql(
ALTER TABLE steps ADD COLUMN tokens REAL;
ALTER TABLE steps ADD COLUMN tokens_per_s REAL;
ALTER TABLE steps ADD COLUMN mfu REAL;
)sql",
      // 9: fp16's loss scaling in the step event: the loss scale of the step and the steps whose
      // update was skipped since the previous event (null in runs without fp16 and in those
      // recorded before), as step columns (scalar_points was recreated with them here; see
      // scalarPointsViewSql).
      R"sql(
ALTER TABLE steps ADD COLUMN loss_scale REAL;
ALTER TABLE steps ADD COLUMN skipped REAL;
)sql",
      // 10: automatic restarts (launch.max_restarts): the steps each attempt stored, first and
      // last (the steps a restart rolled back stay known once a later attempt has stored them
      // again), and each attempt's root cause (runs.error keeps the last attempt's).
      R"sql(
ALTER TABLE attempts ADD COLUMN first_step INTEGER;
ALTER TABLE attempts ADD COLUMN last_step INTEGER;
ALTER TABLE attempts ADD COLUMN error TEXT;
ALTER TABLE attempts ADD COLUMN error_rank INTEGER;
ALTER TABLE attempts ADD COLUMN error_host TEXT;
)sql",
      // 11: waiting versus transfer of a collective: each comm event's operation sequence number
      // and, for collectives, its start and end in microseconds on the clock aligned to rank 0's
      // (null in runs recorded before, and for point-to-point). The recorder fills wait_ms of a
      // collective's rows from their starts once every member's row is stored (group_size, which
      // was 0 before, is now the group's size where the event says).
      R"sql(
ALTER TABLE comm_events ADD COLUMN seq_op INTEGER;
ALTER TABLE comm_events ADD COLUMN start_us INTEGER;
ALTER TABLE comm_events ADD COLUMN end_us INTEGER;
)sql",
      // The live hang view: each rank's latest progress event per communicator group (an upsert
      // per report, not a row per report), which query/hang.h turns into a diagnosis.
      R"sql(
CREATE TABLE rank_progress (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL,
  rank INTEGER NOT NULL,
  group_name TEXT NOT NULL,
  t REAL NOT NULL,                    -- when the rank reported (its clock)
  period_s REAL NOT NULL,             -- its reporting period
  step INTEGER,
  started INTEGER NOT NULL,           -- last collective started
  completed INTEGER NOT NULL,         -- last collective completed
  completed_op TEXT,
  op TEXT,                            -- the op it waits in, if any
  op_seq INTEGER,
  peer INTEGER,
  waiting_ms REAL,
  not_arrived TEXT,                   -- world ranks, comma-separated
  silent TEXT,
  PRIMARY KEY (run_id, attempt, rank, group_name)
);
)sql",
      // Detached runs (issue 21, ringmaster run --detach): a run going on with no recorder attached
      // is `detached`, never reconciled as interrupted; each host's job directory (its agent's
      // spool and PID files) is where attach and cancel find it.
      R"sql(
ALTER TABLE runs ADD COLUMN detached INTEGER NOT NULL DEFAULT 0;
CREATE TABLE run_job_dirs (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  node_rank INTEGER NOT NULL,
  job_dir TEXT NOT NULL,
  PRIMARY KEY (run_id, node_rank)
);
)sql",
      // 14: `scalar_points` is no longer a view of the file: every connection makes its own,
      // from the step columns of this build (scalarPointsViewSql). Drops the one migrations 5, 8
      // and 9 of earlier builds created.
      R"sql(
DROP VIEW IF EXISTS main.scalar_points;
)sql",
      // 15 (issue 32): each host's detached agent as its launch said it (PID, start time, session,
      // boot), kept where deleting the job directory does not lose it, so that cancel finds and
      // stops the job's processes by them, and a PID the kernel reused (or any, after a restart)
      // is never taken for the agent.
      R"sql(
ALTER TABLE run_job_dirs ADD COLUMN agent_pid INTEGER;
ALTER TABLE run_job_dirs ADD COLUMN agent_start_time INTEGER;
ALTER TABLE run_job_dirs ADD COLUMN agent_session INTEGER;
ALTER TABLE run_job_dirs ADD COLUMN agent_boot_id TEXT;
)sql",
      // 16 (issue 33): runs a person organises: a free-text note per run and its tags (a row per
      // run and tag, indexed by tag for the search), and the highest id of a deleted run, past
      // which createRun numbers (a new run never takes a deleted one's id, nor its directory).
      R"sql(
ALTER TABLE runs ADD COLUMN note TEXT;
CREATE TABLE run_ids_retired (last_id INTEGER NOT NULL);
CREATE TABLE run_tags (
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  tag TEXT NOT NULL,
  PRIMARY KEY (run_id, tag)
) WITHOUT ROWID;
CREATE INDEX run_tags_by_tag ON run_tags (tag, run_id);
)sql",
      // 17 (issue 34): the device mesh. Each comm row keeps the mesh dimension of its group
      // ('world' for rows recorded before); each run its mesh, dp x tp x pp = world_size, and so
      // its data-parallel size; each rank its coordinates on it. Runs recorded before were one
      // dimension: a pipeline's stages (pp = world size, dp = 1: they share the samples), any
      // other strategy's replicas (dp = world size); their ranks' coordinates follow the mesh's
      // rank order (tp fastest, then dp, then pp: spec/mesh_layout.h).
      R"sql(
ALTER TABLE comm_events ADD COLUMN dim TEXT NOT NULL DEFAULT 'world';
ALTER TABLE runs ADD COLUMN mesh_dp INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN mesh_tp INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN mesh_pp INTEGER NOT NULL DEFAULT 1;
UPDATE runs SET mesh_dp = CASE strategy WHEN 'pipeline' THEN 1 ELSE world_size END,
                mesh_pp = CASE strategy WHEN 'pipeline' THEN world_size ELSE 1 END;
ALTER TABLE ranks ADD COLUMN coord_dp INTEGER;
ALTER TABLE ranks ADD COLUMN coord_tp INTEGER;
ALTER TABLE ranks ADD COLUMN coord_pp INTEGER;
UPDATE ranks SET (coord_dp, coord_tp, coord_pp) =
  (SELECT (ranks.rank / r.mesh_tp) % r.mesh_dp, ranks.rank % r.mesh_tp,
          ranks.rank / (r.mesh_tp * r.mesh_dp)
   FROM runs r WHERE r.id = ranks.run_id)
  WHERE host IS NOT NULL;
)sql",
      // 18 (issue 35): a run handed to a cluster scheduler: which one ('slurm'), the job's id
      // there, and the scheduler's own word for the job (PENDING, RUNNING, TIMEOUT, ...), why it
      // waits or ended, and its allocated nodes, kept beside the run's status. NULL for every
      // other run, and for every run recorded before.
      R"sql(
ALTER TABLE runs ADD COLUMN scheduler TEXT;
ALTER TABLE runs ADD COLUMN scheduler_job_id TEXT;
ALTER TABLE runs ADD COLUMN scheduler_state TEXT;
ALTER TABLE runs ADD COLUMN scheduler_reason TEXT;
ALTER TABLE runs ADD COLUMN scheduler_nodes TEXT;
)sql",
      // 19 (issue 37): sweeps. A sweep is a base spec and the members drawn from its axes, each a
      // set of spec overrides run as one run. A member is planned, then started (its run), refused
      // (its spec was invalid: the error kept) or not_started (the sweep was cancelled first); a
      // deleted run leaves its member with no run. The sweep's driver (the process that starts the
      // members) is kept for `attach --sweep` and `cancel --sweep` as a detached agent is.
      R"sql(
CREATE TABLE sweeps (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  spec_path TEXT NOT NULL,
  spec TEXT NOT NULL,
  plan TEXT NOT NULL,
  parallel INTEGER NOT NULL DEFAULT 1,
  status TEXT NOT NULL,
  created_at REAL NOT NULL,
  ended_at REAL,
  detached INTEGER NOT NULL DEFAULT 0,
  driver_pid INTEGER,
  driver_start_time INTEGER,
  driver_boot_id TEXT,
  driver_host TEXT
);
CREATE TABLE sweep_members (
  sweep_id INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
  position INTEGER NOT NULL,
  overrides TEXT NOT NULL,
  state TEXT NOT NULL,
  run INTEGER REFERENCES runs (id) ON DELETE SET NULL,
  error TEXT,
  PRIMARY KEY (sweep_id, position)
) WITHOUT ROWID;
CREATE INDEX sweep_members_by_run ON sweep_members (run);
)sql",
      stepRollupsMigrationSql(),
  };
  return kMigrations;
}

// `sql` followed by a UNION ALL of `arm` for each step column, {0} in it the column's name and {1}
// its rollup columns (step_rollups.h): the views below, generated so that a new step column is in
// them without more SQL.
std::string withStepColumnArms(std::string sql, std::string_view arm) {
  for (const std::string_view column : kStepColumns)
    sql += "\nUNION ALL " + fmt::format(fmt::runtime(arm), column, stepRollupColumns(column));
  return sql;
}

// `scalar_points` (run_id, rank, metric, step, value, attempt): every point of every series as one
// long table, the metrics of `scalars` and a row per non-null step column of `steps` (named by
// the column), built from kStepColumns so that a new step column is in it without more SQL. A
// TEMP view, made by every connection when it opens: a read-only connection cannot create
// anything in the file, but each connection has a temp schema of its own.
std::string scalarPointsViewSql() {
  return withStepColumnArms(
      "CREATE TEMP VIEW IF NOT EXISTS scalar_points (run_id, rank, metric, step, value, attempt) "
      "AS SELECT s.run_id, s.rank, m.name, s.step, s.value, s.attempt FROM scalars s JOIN metrics "
      "m ON m.id = s.metric_id",
      "SELECT run_id, rank, '{0}', step, {0}, attempt FROM steps WHERE {0} IS NOT NULL");
}

// `series_rollups` (run_id, metric, rank, width, bucket, n, sum, min, max, first_step, last_step,
// last_value): every rollup bucket of every series as one long table, as scalar_points is for the
// points: the custom metrics' rows of `scalar_rollups` and a row per step column with values in a
// row of `step_rollups`. A TEMP view of every connection, as scalar_points.
std::string seriesRollupsViewSql() {
  return withStepColumnArms(
      "CREATE TEMP VIEW IF NOT EXISTS series_rollups (run_id, metric, rank, width, bucket, n, sum, "
      "min, max, first_step, last_step, last_value) AS SELECT r.run_id, m.name, r.rank, r.width, "
      "r.bucket, r.n, r.sum, r.min, r.max, r.first_step, r.last_step, r.last_value FROM "
      "scalar_rollups r JOIN metrics m ON m.id = r.metric_id",
      "SELECT run_id, '{0}', rank, width, bucket, {1} FROM step_rollups WHERE {0}_n > 0");
}

// SQLite counts its allocations behind a global mutex unless told otherwise before it initialises,
// that is before the process's first open; nothing here reads the counts, and not counting makes
// ingest about a seventh faster (bench/storage_bench). Fails harmlessly if SQLite already started.
void configureSqliteOnce() {
  static const bool configured = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  (void)configured;
}

int userVersion(sqlite3* db) {
  sqlite3_stmt* statement = nullptr;
  checkSqlite(db, sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &statement, nullptr),
              "reading the schema version");
  int version = 0;
  if (sqlite3_step(statement) == SQLITE_ROW) version = sqlite3_column_int(statement, 0);
  sqlite3_finalize(statement);
  return version;
}

}  // namespace

DatabaseOptions readingOptions(const std::string& path) {
  return {.read_only = whyNotWritable(path).has_value()};
}

std::string defaultDatabasePath() {
  const char* data_home = std::getenv("XDG_DATA_HOME");
  fs::path base;
  if (data_home != nullptr && data_home[0] == '/') {
    base = data_home;
  } else {
    const char* home = std::getenv("HOME");
    RM_CHECK_ARG(home != nullptr && home[0] != '\0',
                 "neither XDG_DATA_HOME nor HOME is set: give the database with --db");
    base = fs::path(home) / ".local" / "share";
  }
  return (base / "ringmaster" / "runs.db").string();
}

std::optional<std::string> networkFileSystem(const std::string& path) {
  fs::path probe = fs::absolute(path);
  std::error_code ec;
  while (!fs::exists(probe, ec) && probe.has_parent_path() && probe != probe.parent_path())
    probe = probe.parent_path();
  struct statfs info {};
  if (::statfs(probe.c_str(), &info) != 0) return std::nullopt;
  switch (static_cast<unsigned long>(info.f_type)) {
    case 0x6969:  // NFS_SUPER_MAGIC
      return "nfs";
    case 0xFF534D42:  // CIFS_MAGIC_NUMBER
      return "cifs";
    case 0xFE534D42:  // SMB2_MAGIC_NUMBER
      return "smb2";
    case 0x517B:  // SMB_SUPER_MAGIC
      return "smb";
    case 0x5346414F:  // AFS_SUPER_MAGIC
      return "afs";
    case 0x65735546:  // FUSE_SUPER_MAGIC (sshfs, s3fs, ...)
      return "fuse";
    default:
      return std::nullopt;
  }
}

namespace {

// Whether a failed write was refused for space: SQLite reports ENOSPC as SQLITE_FULL, but a write
// past the process's file size limit (EFBIG, ulimit -f) or a disk filled between the check and the
// write arrives as SQLITE_IOERR_WRITE, with the file's errno no longer readable through the API.
bool writeRefusedForSpace(sqlite3* db, int extended_code) {
  if (extended_code != SQLITE_IOERR_WRITE && extended_code != SQLITE_IOERR_TRUNCATE) return false;
  rlimit limit{};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) return true;
  const char* file = sqlite3_db_filename(db, "main");
  struct statvfs disk {};
  if (file == nullptr || *file == '\0' ||
      ::statvfs(fs::path(file).parent_path().c_str(), &disk) != 0)
    return false;
  return static_cast<uint64_t>(disk.f_bavail) * disk.f_frsize < (uint64_t{1} << 20);
}

}  // namespace

void checkSqlite(sqlite3* db, int code, const std::string& what) {
  if (code == SQLITE_OK || code == SQLITE_DONE || code == SQLITE_ROW) return;
  const std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(code);
  if (db != nullptr && writeRefusedForSpace(db, sqlite3_extended_errcode(db))) code = SQLITE_FULL;
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      RM_THROW(kTimeout, fmt::format("{}: the database is locked by another process ({}); "
                                     "nothing was written, try again when it is done",
                                     what, message));
    case SQLITE_FULL:
      RM_THROW(kIo, fmt::format("{}: the database or its disk is full ({}); the transaction "
                                "was rolled back, what was committed before is kept",
                                what, message));
    case SQLITE_READONLY:
      RM_THROW(kIo, fmt::format("{}: the database is read-only here ({}); nothing was written",
                                what, message));
    default:
      RM_THROW(kIo, fmt::format("{}: {}", what, message));
  }
}

int currentSchemaVersion() {
  return static_cast<int>(migrationSql().size());
}

namespace {

std::atomic<QueryThreadCheck> query_thread_check{nullptr};
thread_local int queries_allowed_here = 0;

}  // namespace

void setQueryThreadCheck(QueryThreadCheck check) {
  query_thread_check.store(check);
}

void enforceQueryThread(std::string_view what) {
  const QueryThreadCheck check = query_thread_check.load();
  RM_ENFORCE(check == nullptr || queries_allowed_here > 0 || check(),
             fmt::format("database work on a thread that must not do any (the GUI thread?): {}",
                         what.substr(0, what.find('\n'))));
}

AllowQueriesOnThisThread::AllowQueriesOnThisThread() {
  ++queries_allowed_here;
}

AllowQueriesOnThisThread::~AllowQueriesOnThisThread() {
  --queries_allowed_here;
}

Database::Database(const std::string& path, DatabaseOptions options)
    : path_(path), read_only_(options.read_only) {
  enforceQueryThread("opening " + path);
  if (std::optional<std::string> remote = networkFileSystem(path)) {
    RM_THROW(kUnavailable,
             fmt::format("{} is on a network file system ({}); the run database uses SQLite's "
                         "WAL mode, which needs a local disk: give a local path with --db",
                         path, *remote));
  }
  configureSqliteOnce();
  if (read_only_) {
    openReadOnly();
    return;
  }
  createDirectories(fs::absolute(path).parent_path());
  if (std::optional<std::string> reason = whyNotWritable(path)) {
    RM_THROW(kIo, fmt::format("the run database {} is read-only here ({}): recording needs it and "
                              "its directory writable (its -wal and -shm files are beside it); "
                              "runs, show, compare and export read it as it is",
                              path, *reason));
  }
  // Created here, not by SQLite, so that it is owner-only; its -wal and -shm files take its mode.
  if (const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, newFileMode());
      fd >= 0) {
    ::close(fd);
  } else if (errno != EEXIST) {
    RM_THROW(kIo, fmt::format("cannot create the run database {}: {}", path, std::strerror(errno)));
  }
  const int opened =
      sqlite3_open_v2(path.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (opened != SQLITE_OK) {
    const std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(opened);
    sqlite3_close(db_);
    db_ = nullptr;
    RM_THROW(kIo, fmt::format("cannot open the run database {}: {}", path, message));
  }
  try {
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, options.busy_timeout_ms);
    // 16 KiB pages for a new file (an existing one keeps its own): fewer page splits per row
    // ingested, about a tenth faster than the 4 KiB default (bench/storage_bench).
    exec("PRAGMA page_size = 16384");
    // Switching a new file to WAL takes an exclusive lock without calling the busy handler: when
    // another connection is creating the same file, wait here as a busy statement would.
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options.busy_timeout_ms);
    for (;;) {
      try {
        exec("PRAGMA journal_mode = WAL");
        break;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kTimeout || std::chrono::steady_clock::now() > give_up) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    exec(options.full_sync ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
    exec("PRAGMA foreign_keys = ON");
    const int version = userVersion(db_);
    if (version > currentSchemaVersion()) {
      RM_THROW(kFormat, fmt::format("{} has schema version {}, newer than this build's {}: "
                                    "open it with a newer ringmaster",
                                    path, version, currentSchemaVersion()));
    }
    migrate(*this, options.schema_version < 0 ? currentSchemaVersion() : options.schema_version);
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

namespace {

// `path` as an SQLite URI with `immutable=1`: the file is read as it is, without the -shm file a
// WAL database otherwise needs (and cannot create in a read-only directory).
std::string immutableUri(const std::string& path) {
  std::string uri = "file:";
  for (const char c : fs::absolute(path).string()) {
    if (c == '%' || c == '?' || c == '#')
      uri += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    else
      uri += c;
  }
  return uri + "?immutable=1";
}

}  // namespace

// A WAL database is read through its -shm file, which a read-only directory can neither hold nor
// get: when it is missing and cannot be made, the file is read as immutable, which is exact as long
// as no -wal file holds transactions not yet copied into it (a recorder killed mid-run, or still
// running elsewhere); then the error says so.
void Database::openReadOnly() {
  std::error_code ec;
  if (!fs::exists(path_, ec))
    RM_THROW(kIo, fmt::format("no run database at {}: the file does not exist", path_));
  const auto open = [&](const std::string& name, int flags) {
    sqlite3_close(db_);
    db_ = nullptr;
    const int opened = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
    if (opened == SQLITE_OK) {
      sqlite3_extended_result_codes(db_, 1);
      // A read never needs the write lock, but a checkpoint by another process may hold the
      // database briefly.
      sqlite3_busy_timeout(db_, 5000);
      char* error = nullptr;
      const int code = sqlite3_exec(db_, "PRAGMA user_version", nullptr, nullptr, &error);
      if (error != nullptr) sqlite3_free(error);
      return code;
    }
    return opened;
  };
  int code = open(path_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
  if ((code & 0xff) == SQLITE_CANTOPEN || (code & 0xff) == SQLITE_READONLY) {
    const fs::path wal = path_ + "-wal";
    if (fs::exists(wal, ec) && fs::file_size(wal, ec) > 0) {
      sqlite3_close(db_);
      db_ = nullptr;
      RM_THROW(kIo, fmt::format("cannot read the run database {}: it is read-only and its "
                                "write-ahead log {} holds transactions without the index "
                                "(-shm file) needed to read them; open it once where it can be "
                                "written",
                                path_, wal.string()));
    }
    code = open(immutableUri(path_), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX);
  }
  if (code != SQLITE_OK) {
    const std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(code);
    sqlite3_close(db_);
    db_ = nullptr;
    RM_THROW(kIo, fmt::format("cannot read the run database {}: {}", path_, message));
  }
  const int version = userVersion(db_);
  if (version != currentSchemaVersion()) {
    sqlite3_close(db_);
    db_ = nullptr;
    RM_THROW(
        kFormat,
        fmt::format("{} has schema version {}, {} this build's {}, and is read-only here: {}",
                    path_, version, version > currentSchemaVersion() ? "newer than" : "older than",
                    currentSchemaVersion(),
                    version > currentSchemaVersion()
                        ? "open it with a newer ringmaster"
                        : "open it once where it can be written, so that it is upgraded"));
  }
  exec(scalarPointsViewSql());
  exec(seriesRollupsViewSql());
}

Database::~Database() {
  if (db_ != nullptr) sqlite3_close(db_);
}

int64_t Database::dataVersion() const {
  enforceQueryThread("PRAGMA data_version");
  sqlite3_stmt* statement = nullptr;
  checkSqlite(db_, sqlite3_prepare_v2(db_, "PRAGMA data_version", -1, &statement, nullptr),
              "reading data_version");
  int64_t version = 0;
  if (sqlite3_step(statement) == SQLITE_ROW) version = sqlite3_column_int64(statement, 0);
  sqlite3_finalize(statement);
  return version;
}

int Database::schemaVersion() const {
  enforceQueryThread("PRAGMA user_version");
  return userVersion(db_);
}

void Database::exec(const std::string& sql) {
  enforceQueryThread(sql);
  char* error = nullptr;
  const int code = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  if (error != nullptr) sqlite3_free(error);
  checkSqlite(db_, code, fmt::format("{}: {}", path_, sql.substr(0, sql.find('\n'))));
}

void Database::transaction(const std::function<void()>& body) {
  exec("BEGIN IMMEDIATE");
  try {
    body();
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

void migrate(Database& db, int target) {
  RM_CHECK_ARG(target >= 0 && target <= currentSchemaVersion(),
               fmt::format("no schema version {}", target));
  // Each step re-reads the version inside its write transaction: another process opening the
  // same new file at the same moment (a viewer beside the recorder) may have migrated it already.
  while (db.schemaVersion() < target) {
    db.transaction([&] {
      const int version = db.schemaVersion();
      if (version >= target) return;
      db.exec(migrationSql()[static_cast<size_t>(version)]);
      db.exec(fmt::format("PRAGMA user_version = {}", version + 1));
    });
  }
  // The view reads the current schema's step columns: an older one (a test's) goes without.
  if (target == currentSchemaVersion()) {
    db.exec(scalarPointsViewSql());
    db.exec(seriesRollupsViewSql());
  }
}

}  // namespace ringmaster::storage
