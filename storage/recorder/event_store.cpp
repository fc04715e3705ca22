// EventStore's statements, and how each kind of event is stored.
#include "recorder/event_store.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "db/database.h"
#include "db/run_mesh.h"
#include "db/step_rollups.h"
#include "telemetry/codec.h"

namespace ringmaster::storage {

namespace {

// The statements writing a step row: ?1 run, ?2 rank, ?3 step, ?4 attempt, then the fields in the
// order of kStepColumns (and of stepColumnValues).
std::string stepInsertSql() {
  std::vector<std::string> values;
  for (size_t i = 1; i <= 4 + kStepColumns.size(); ++i) values.push_back(fmt::format("?{}", i));
  return fmt::format("INSERT INTO steps (run_id, rank, step, attempt, {}) VALUES ({})",
                     fmt::join(kStepColumns, ", "), fmt::join(values, ", "));
}

std::string stepUpdateSql() {
  std::vector<std::string> sets = {"attempt = ?4"};
  for (size_t i = 0; i < kStepColumns.size(); ++i)
    sets.push_back(fmt::format("{} = ?{}", kStepColumns[i], i + 5));
  return fmt::format("UPDATE steps SET {} WHERE run_id = ?1 AND rank = ?2 AND step = ?3",
                     fmt::join(sets, ", "));
}

// The upsert of a step_rollups row of the step columns in `present` (bit i: kStepColumns[i]):
// ?1 run, ?2 width, ?3 rank, ?4 bucket, then each present column's seven parts
// (kStepRollupParts) in the order of kStepColumns; the others are left as they are (NULL in a new
// row). A row already there (a bucket a batch boundary cut, or steps out of order) is merged with
// it part by part; a column the row lacks takes the new parts.
std::string stepRollupUpsertSql(uint32_t present) {
  std::vector<std::string> columns, values, merges;
  size_t next = 5;
  for (size_t i = 0; i < kStepColumns.size(); ++i) {
    if (!(present & (uint32_t{1} << i))) continue;
    const std::string_view column = kStepColumns[i];
    columns.push_back(stepRollupColumns(column));
    for (size_t part = 0; part < kStepRollupParts.size(); ++part)
      values.push_back(fmt::format("?{}", next++));
    const auto merged = [&](std::string_view part, std::string_view how) {
      const std::string name = stepRollupColumn(column, part);
      merges.push_back(fmt::format("{0} = coalesce({1}, excluded.{0})", name,
                                   fmt::format(fmt::runtime(how), name)));
    };
    merged("n", "{0} + excluded.{0}");
    merged("sum", "{0} + excluded.{0}");
    merged("min", "min({0}, excluded.{0})");
    merged("max", "max({0}, excluded.{0})");
    merged("first", "min({0}, excluded.{0})");
    merged("last", "max({0}, excluded.{0})");
    merges.push_back(fmt::format(
        "{0} = CASE WHEN {1} IS NULL OR excluded.{1} >= {1} THEN excluded.{0} ELSE {0} END",
        stepRollupColumn(column, "last_value"), stepRollupColumn(column, "last")));
  }
  return fmt::format(
      "INSERT INTO step_rollups (run_id, width, rank, bucket, {}) VALUES (?1, ?2, ?3, ?4, {}) "
      "ON CONFLICT (run_id, width, rank, bucket) DO UPDATE SET {}",
      fmt::join(columns, ", "), fmt::join(values, ", "), fmt::join(merges, ", "));
}

// A step_rollups row computed from the `steps` rows of its bucket: ?1 run, ?2 width, ?3 rank,
// ?4 bucket, ?5 .. ?6 its steps.
std::string stepRollupRecomputeSql() {
  std::vector<std::string> columns, parts;
  const std::string where = "run_id = ?1 AND rank = ?3 AND step BETWEEN ?5 AND ?6";
  for (std::string_view column : kStepColumns) {
    columns.push_back(stepRollupColumns(column));
    // NULL rather than 0 where the column has no value in the bucket, as the writer leaves it.
    parts.push_back(fmt::format(
        "nullif(count({0}), 0), CASE WHEN count({0}) > 0 THEN total({0}) END, min({0}), max({0}), "
        "min(CASE WHEN {0} IS NOT NULL THEN step END), max(CASE WHEN {0} IS NOT NULL THEN step "
        "END), (SELECT {0} FROM steps WHERE {1} AND {0} IS NOT NULL ORDER BY step DESC LIMIT 1)",
        column, where));
  }
  return fmt::format(
      "INSERT OR REPLACE INTO step_rollups (run_id, width, rank, bucket, {}) SELECT ?1, ?2, ?3, "
      "?4, {} FROM steps WHERE {} HAVING count(*) > 0",
      fmt::join(columns, ", "), fmt::join(parts, ", "), where);
}

}  // namespace

EventStore::EventStore(Database& db, int64_t run_id, int attempt)
    : run_id_(run_id),
      attempt_(attempt),
      latest_attempt_(attempt),
      database_(db),
      seq_write_(db,
                 "INSERT OR REPLACE INTO seq_ranges (run_id, attempt, rank, first_seq, "
                 "last_seq) VALUES (?, ?, ?, ?, ?)"),
      seq_erase_(db,
                 "DELETE FROM seq_ranges WHERE run_id = ? AND attempt = ? AND rank = ? AND "
                 "first_seq = ?"),
      // A rank's row holds its hello and its done's status, whichever came first (a done
      // without a hello leaves a row with the status alone: host NULL).
      rank_(db,
            "INSERT INTO ranks (run_id, attempt, rank, local_rank, host, pid, device, "
            "device_name, memory_total, version, coord_dp, coord_tp, coord_pp) VALUES (?, ?, ?, "
            "?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, attempt, rank) DO UPDATE SET "
            "local_rank = excluded.local_rank, host = excluded.host, pid = excluded.pid, device = "
            "excluded.device, device_name = excluded.device_name, memory_total = "
            "excluded.memory_total, version = excluded.version, coord_dp = excluded.coord_dp, "
            "coord_tp = excluded.coord_tp, coord_pp = excluded.coord_pp"),
      run_mesh_(db, "UPDATE runs SET mesh_dp = ?, mesh_tp = ?, mesh_pp = ? WHERE id = ?"),
      rank_done_(db,
                 "INSERT INTO ranks (status, run_id, attempt, rank) VALUES (?, ?, ?, ?) "
                 "ON CONFLICT (run_id, attempt, rank) DO UPDATE SET status = excluded.status"),
      step_insert_(db, stepInsertSql()),
      step_update_(db, stepUpdateSql()),
      comm_(db,
            "INSERT INTO comm_events (run_id, attempt, rank, t, step, op, group_name, "
            "group_size, bytes, dtype, duration_ms, wait_ms, algbw_gbps, busbw_gbps, seq_op, "
            "start_us, end_us, dim) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?)"),
      comm_wait_(db, "UPDATE comm_events SET wait_ms = ? WHERE rowid = ?"),
      sched_(db,
             "INSERT INTO sched_events (run_id, attempt, rank, step, stage, virtual_stage, "
             "micro_batch, phase, start_us, end_us, ready_us, transfer_us) VALUES (?, ?, ?, ?, ?, "
             "?, ?, ?, ?, ?, ?, ?)"),
      eval_(db,
            "INSERT INTO evals (run_id, rank, step, attempt, t, val_loss, perplexity, tokens, "
            "eval_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, rank, step) DO "
            "UPDATE SET attempt = excluded.attempt, t = excluded.t, val_loss = "
            "excluded.val_loss, perplexity = excluded.perplexity, tokens = excluded.tokens, "
            "eval_ms = excluded.eval_ms"),
      log_(db,
           "INSERT INTO logs (run_id, attempt, rank, t, level, message) VALUES (?, ?, ?, ?, ?, "
           "?)"),
      root_cause_(db,
                  "UPDATE runs SET error = ?, error_rank = ?, error_host = ? "
                  "WHERE id = ? AND error IS NULL"),
      progress_(db,
                "INSERT INTO rank_progress (run_id, attempt, rank, group_name, t, period_s, "
                "step, started, completed, completed_op, op, op_seq, peer, waiting_ms, "
                "not_arrived, silent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, attempt, rank, group_name) DO UPDATE SET t = excluded.t, "
                "period_s = excluded.period_s, step = excluded.step, started = "
                "excluded.started, completed = excluded.completed, completed_op = "
                "excluded.completed_op, op = excluded.op, op_seq = excluded.op_seq, peer = "
                "excluded.peer, waiting_ms = excluded.waiting_ms, not_arrived = "
                "excluded.not_arrived, silent = excluded.silent WHERE excluded.t >= t"),
      dump_(db,
            "INSERT INTO flight_recorder_dumps (run_id, attempt, rank, t, dump) "
            "VALUES (?, ?, ?, ?, ?)"),
      rollup_(db,
              "INSERT INTO scalar_rollups (run_id, metric_id, rank, width, bucket, n, sum, min, "
              "max, first_step, last_step, last_value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
              "ON CONFLICT DO UPDATE SET n = n + excluded.n, sum = sum + excluded.sum, "
              "min = min(min, excluded.min), max = max(max, excluded.max), "
              "first_step = min(first_step, excluded.first_step), "
              "last_value = CASE WHEN excluded.last_step >= last_step THEN excluded.last_value "
              "ELSE last_value END, last_step = max(last_step, excluded.last_step)"),
      counts_(db,
              "UPDATE attempts SET events_stored = events_stored + ?, "
              "events_duplicate = events_duplicate + ?, lines_malformed = lines_malformed + ? "
              "WHERE run_id = ? AND attempt = ?"),
      attempt_begin_(db,
                     "INSERT OR IGNORE INTO attempts (run_id, attempt, started_at) "
                     "VALUES (?, ?, ?)"),
      attempt_end_(db,
                   "UPDATE attempts SET ended_at = ? WHERE run_id = ? AND attempt < ? AND "
                   "ended_at IS NULL"),
      run_error_clear_(db,
                       "UPDATE runs SET error = NULL, error_rank = NULL, error_host = NULL "
                       "WHERE id = ?"),
      attempt_root_cause_(db,
                          "UPDATE attempts SET error = ?, error_rank = ?, error_host = ? "
                          "WHERE run_id = ? AND attempt = ? AND error IS NULL"),
      attempt_steps_(db,
                     "UPDATE attempts SET first_step = min(coalesce(first_step, ?1), ?1), "
                     "last_step = max(coalesce(last_step, ?2), ?2) "
                     "WHERE run_id = ?3 AND attempt = ?4"),
      custom_metrics_(db, run_id) {
  loadWorldSize(db);
  loadStoredSeqs(db);
  loadRankAttempts(db);
  collectives_.loadPending(db, run_id_, attempt_);
  registerStepMetrics(db);
}

// Finished before registerStepMetrics's transaction: an open read would keep its snapshot.
void EventStore::loadWorldSize(Database& db) {
  Statement world(db, "SELECT world_size, mesh_dp, mesh_tp, mesh_pp FROM runs WHERE id = ?");
  world.bind(1, run_id_);
  if (!world.run()) RM_THROW(kInvalidArgument, fmt::format("run {} does not exist", run_id_));
  world_size_ = world.columnInt(0);
  mesh_ = {.dp = static_cast<int>(world.columnInt(1)),
           .tp = static_cast<int>(world.columnInt(2)),
           .pp = static_cast<int>(world.columnInt(3))};
  // A hand-edited row: the rank order's arithmetic needs a mesh of the world's ranks.
  if (mesh_.dp < 1 || mesh_.tp < 1 || mesh_.pp < 1 ||
      int64_t{mesh_.dp} * mesh_.tp * mesh_.pp != world_size_)
    mesh_ = {.dp = static_cast<int>(world_size_), .tp = 1, .pp = 1};
}

// Every attempt's sequence numbers: a replay may hold events of several.
void EventStore::loadStoredSeqs(Database& db) {
  Statement stored(db,
                   "SELECT attempt, rank, first_seq, last_seq FROM seq_ranges WHERE run_id = ?");
  stored.bind(1, run_id_);
  while (stored.run()) {
    seen_[{static_cast<int>(stored.columnInt(0)), stored.columnInt(1)}].load(
        static_cast<uint64_t>(stored.columnInt(2)), static_cast<uint64_t>(stored.columnInt(3)));
  }
}

// Each rank's events belong to the attempt of its latest hello (launch.max_restarts).
void EventStore::loadRankAttempts(Database& db) {
  Statement latest(db,
                   "SELECT rank, max(attempt) FROM ranks WHERE run_id = ? AND attempt >= ? "
                   "GROUP BY rank");
  latest.bind(1, run_id_).bind(2, int64_t{attempt_});
  while (latest.run()) {
    const int rank_attempt = static_cast<int>(latest.columnInt(1));
    rank_attempt_[latest.columnInt(0)] = rank_attempt;
    latest_attempt_ = std::max(latest_attempt_, rank_attempt);
  }
}

// The step columns are series by name like any metric (metricNames, the compare view's list).
void EventStore::registerStepMetrics(Database& db) {
  db.transaction([&] {
    Statement insert(db, "INSERT OR IGNORE INTO metrics (name) VALUES (?)");
    for (std::string_view column : kStepColumns) insert.bind(1, column).run();
  });
}

EventStore::Outcome EventStore::store(const TelemetryEvent& e, std::string& why) {
  if (!inWorld(e.rank)) {
    why = fmt::format(
        "a {} event from rank {}, which this run of {} rank{} does not have, was "
        "not stored",
        eventTypeName(e.body), e.rank, world_size_, world_size_ == 1 ? "" : "s");
    return Outcome::kRejected;
  }
  if (const auto* hello = std::get_if<HelloEvent>(&e.body);
      hello && hello->world_size != world_size_) {
    why = fmt::format("rank {}'s hello says the world has {} ranks, this run has {}: not stored",
                      e.rank, hello->world_size, world_size_);
    return Outcome::kRejected;
  }
  const auto* hello = std::get_if<HelloEvent>(&e.body);
  if (hello && hello->attempt != attemptOf(e.rank)) beginAttempt(e, hello->attempt);
  event_attempt_ = attemptOf(e.rank);
  if (!seen_[{event_attempt_, e.rank}].insert(e.seq)) return Outcome::kDuplicate;
  std::visit([&](const auto& body) { storeBody(e, body); }, e.body);
  return Outcome::kStored;
}

void EventStore::log(std::optional<int64_t> rank, double t, std::string_view level,
                     const std::string& message, std::optional<int> attempt) {
  log_.bind(1, run_id_).bind(2, int64_t{attempt.value_or(latest_attempt_)}).bind(3, rank);
  log_.bind(4, t);
  log_.bind(5, level).bind(6, message).run();
}

void EventStore::writeBatchState() {
  collectives_.insertHeldRows();
  writeSeqRanges();
  writeRollups();
  recomputeRestoredBuckets();
  writeAttemptSteps();
  custom_metrics_.writeWarnings(latest_attempt_);
}

// The ranges of stored sequence numbers that changed: a range grown is rewritten, one merged into
// another erased.
void EventStore::writeSeqRanges() {
  for (auto& [seen_key, ranges] : seen_) {
    const auto key = seen_key;  // clang 14 cannot capture a structured binding
    const int64_t attempt = key.first, rank = key.second;
    ranges.drainChanges(
        [&](uint64_t first) {
          seq_erase_.bind(1, run_id_).bind(2, attempt).bind(3, rank);
          seq_erase_.bind(4, static_cast<int64_t>(first)).run();
        },
        [&](uint64_t first, uint64_t last) {
          seq_write_.bind(1, run_id_).bind(2, attempt).bind(3, rank);
          seq_write_.bind(4, static_cast<int64_t>(first));
          seq_write_.bind(5, static_cast<int64_t>(last)).run();
        });
  }
}

void EventStore::writeRollups() {
  for (const auto& b : rollups_.take()) {
    rollup_.bind(1, run_id_).bind(2, b.key.metric_id).bind(3, b.key.rank).bind(4, b.width);
    rollup_.bind(5, b.bucket).bind(6, b.summary.count).bind(7, b.summary.sum);
    rollup_.bind(8, b.summary.min).bind(9, b.summary.max).bind(10, b.summary.first_step);
    rollup_.bind(11, b.summary.last_step).bind(12, b.summary.last_value).run();
  }
  for (const auto& b : step_rollups_.take()) {
    uint32_t present = 0;
    for (size_t i = 0; i < b.summary.columns.size(); ++i)
      if (!b.summary.columns[i].empty()) present |= uint32_t{1} << i;
    if (present == 0) continue;  // step events without a value of any column
    std::unique_ptr<Statement>& upsert = step_rollup_upserts_[present];
    if (!upsert) upsert = std::make_unique<Statement>(database_, stepRollupUpsertSql(present));
    upsert->bind(1, run_id_).bind(2, b.width).bind(3, b.key).bind(4, b.bucket);
    int first = 5;  // the column's first part
    for (const SeriesSummary& column : b.summary.columns) {
      if (column.empty()) continue;
      upsert->bind(first, column.count).bind(first + 1, column.sum);
      upsert->bind(first + 2, column.min).bind(first + 3, column.max);
      upsert->bind(first + 4, column.first_step).bind(first + 5, column.last_step);
      upsert->bind(first + 6, column.last_value);
      first += static_cast<int>(kStepRollupParts.size());
    }
    upsert->run();
  }
}

void EventStore::writeAttemptSteps() {
  for (const auto& [attempt, range] : attempt_steps_seen_) {
    attempt_steps_.bind(1, range.first).bind(2, range.second).bind(3, run_id_);
    attempt_steps_.bind(4, int64_t{attempt}).run();
  }
  attempt_steps_seen_.clear();
}

void EventStore::addCounts(const RecorderCounts& delta) {
  counts_.bind(1, delta.stored).bind(2, delta.duplicates);
  counts_.bind(3, delta.malformed + delta.rejected);
  counts_.bind(4, run_id_).bind(5, int64_t{latest_attempt_}).run();
}

int EventStore::attemptOf(int64_t rank) const {
  const auto found = rank_attempt_.find(rank);
  return found == rank_attempt_.end() ? attempt_ : found->second;
}

// A rank's hello of another attempt (launch.max_restarts): its events from here on are that
// attempt's (an earlier one's in a replay). The first rank to reach a new attempt opens its row
// and closes the earlier ones; the run's root cause is cleared, as the run goes on (each attempt
// keeps its own).
void EventStore::beginAttempt(const TelemetryEvent& e, int attempt) {
  rank_attempt_[e.rank] = attempt;
  if (attempt <= latest_attempt_) return;
  latest_attempt_ = attempt;
  attempt_begin_.bind(1, run_id_).bind(2, int64_t{attempt}).bind(3, e.time).run();
  attempt_end_.bind(1, e.time).bind(2, run_id_).bind(3, int64_t{attempt}).run();
  run_error_clear_.bind(1, run_id_).run();
}

// The rollup buckets holding a step that was stored again (a later attempt resumed before it),
// recomputed from the step rows: adding the new point to the bucket would count the step twice,
// and an old minimum or maximum cannot be taken out.
void EventStore::recomputeRestoredBuckets() {
  if (restored_buckets_.empty()) return;
  if (!recompute_) recompute_ = std::make_unique<Statement>(database_, stepRollupRecomputeSql());
  Statement erase(database_,
                  "DELETE FROM scalar_rollups WHERE run_id = ? AND rank = ? AND width = ? AND "
                  "bucket = ?");
  for (const auto& [rank, width, bucket] : restored_buckets_) {
    recompute_->bind(1, run_id_).bind(2, width).bind(3, rank).bind(4, bucket);
    recompute_->bind(5, bucket * width).bind(6, bucket * width + width - 1).run();
    erase.bind(1, run_id_).bind(2, rank).bind(3, width).bind(4, bucket).run();
    custom_metrics_.recomputeBucket(rank, width, bucket);
  }
  restored_buckets_.clear();
}

// A hello that names the mesh makes it the run's (its product is the world size: the decoder
// checked it against world_size, store() that against the run's); the rank's coordinates are its
// own, else those of the mesh's rank order (tp fastest, then dp, then pp).
void EventStore::storeBody(const TelemetryEvent& e, const HelloEvent& hello) {
  if (hello.mesh && *hello.mesh != mesh_) {
    mesh_ = *hello.mesh;
    run_mesh_.bind(1, int64_t{mesh_.dp}).bind(2, int64_t{mesh_.tp}).bind(3, int64_t{mesh_.pp});
    run_mesh_.bind(4, run_id_).run();
  }
  const int rank = static_cast<int>(e.rank);
  const MeshAxes coords = hello.coords.value_or(rankCoordinates(mesh_, rank));
  rank_.bind(1, run_id_).bind(2, int64_t{event_attempt_}).bind(3, int64_t{e.rank});
  rank_.bind(4, int64_t{hello.local_rank}).bind(5, hello.host).bind(6, hello.pid);
  rank_.bind(7, hello.device).bind(8, hello.device_name);
  rank_.bind(9, static_cast<int64_t>(hello.device_memory_total)).bind(10, hello.version);
  rank_.bind(11, int64_t{coords.dp}).bind(12, int64_t{coords.tp}).bind(13, int64_t{coords.pp});
  rank_.run();
}
// A step stored again (a later attempt resumed before it) keeps the latest values.
void EventStore::storeBody(const TelemetryEvent& e, const StepEvent& s) {
  const auto values = stepColumnValues(e, s);
  const auto bind = [&](Statement& statement) {
    statement.bind(1, run_id_).bind(2, int64_t{e.rank}).bind(3, s.step);
    statement.bind(4, int64_t{event_attempt_});
    for (size_t i = 0; i < values.size(); ++i) {
      const int column = static_cast<int>(i) + 5;
      if (std::isnan(values[i]))
        statement.bind(column, std::optional<double>());
      else
        statement.bind(column, values[i]);
    }
  };
  bind(step_insert_);
  const bool restored = !step_insert_.insertUnlessPresent();
  if (restored) {
    bind(step_update_);
    step_update_.run();
    for (const int64_t width : kRollupWidths)
      restored_buckets_.insert({int64_t{e.rank}, width, s.step / width});
  }
  auto [range, first] = attempt_steps_seen_.try_emplace(event_attempt_, s.step, s.step);
  if (!first) {
    range->second.first = std::min(range->second.first, s.step);
    range->second.second = std::max(range->second.second, s.step);
  }
  step_rollups_.add(int64_t{e.rank}, s.step, values);
  custom_metrics_.store(e.rank, s.step, event_attempt_, e.time, restored, s.metrics, rollups_);
}
void EventStore::storeBody(const TelemetryEvent& e, const CommEvent& c) {
  const CommRow row{event_attempt_, e.rank, e.time, c};
  if (CollectiveMatcher::needsMatching(c))
    collectives_.add(row);
  else
    insertComm(row, c.wait_ms);
}

int64_t EventStore::insertComm(const CommRow& row, std::optional<double> wait_ms) {
  const CommEvent& c = row.event;
  comm_.bind(1, run_id_).bind(2, int64_t{row.attempt}).bind(3, int64_t{row.rank}).bind(4, row.t);
  // The texts are the event's, alive until the insert has run: bound without a copy.
  comm_.bind(5, c.step).bindUncopied(6, c.op).bindUncopied(7, c.group);
  comm_.bind(8, c.group_size.value_or(0)).bind(9, static_cast<int64_t>(c.bytes));
  comm_.bindUncopied(10, c.dtype).bind(11, c.duration_ms);
  comm_.bind(12, wait_ms).bind(13, c.algbw_gbps).bind(14, c.busbw_gbps);
  comm_.bind(15, static_cast<int64_t>(c.seq_op)).bind(16, c.start_us).bind(17, c.end_us);
  comm_.bindUncopied(18, c.dim).run();
  return sqlite3_last_insert_rowid(database_.handle());
}

void EventStore::setCommWait(int64_t rowid, double wait_ms) {
  comm_wait_.bind(1, wait_ms).bind(2, rowid).run();
}

void EventStore::storeBody(const TelemetryEvent& e, const SchedEvent& s) {
  sched_.bind(1, run_id_).bind(2, int64_t{event_attempt_}).bind(3, int64_t{e.rank}).bind(4, s.step);
  sched_.bind(5, int64_t{s.stage}).bind(6, int64_t{s.virtual_stage});
  sched_.bind(7, int64_t{s.micro_batch}).bind(8, toString(s.phase));
  sched_.bind(9, s.start_us).bind(10, s.end_us).bind(11, s.ready_us).bind(12, s.transfer_us).run();
}
// An evaluation stored again (a later attempt resumed before it) keeps the latest values.
void EventStore::storeBody(const TelemetryEvent& e, const EvalEvent& v) {
  const auto finite = [](double x) { return std::isfinite(x) ? std::optional(x) : std::nullopt; };
  eval_.bind(1, run_id_).bind(2, int64_t{e.rank}).bind(3, v.step).bind(4, int64_t{event_attempt_});
  eval_.bind(5, e.time).bind(6, finite(v.val_loss)).bind(7, finite(v.perplexity));
  eval_.bind(8, v.tokens).bind(9, v.eval_ms).run();
}
void EventStore::storeBody(const TelemetryEvent& e, const LogEvent& l) {
  log(int64_t{e.rank}, e.time, toString(l.level), l.message, event_attempt_);
}
void EventStore::storeBody(const TelemetryEvent& e, const ErrorEvent& error) {
  log(int64_t{e.rank}, e.time, "error", error.message, event_attempt_);
  if (error.fatal) {
    attempt_root_cause_.bind(1, error.message).bind(2, int64_t{e.rank}).bind(3, error.host);
    attempt_root_cause_.bind(4, run_id_).bind(5, int64_t{event_attempt_}).run();
    // The run's is the latest attempt's: a late error of an earlier one does not replace it.
    if (event_attempt_ == latest_attempt_) {
      root_cause_.bind(1, error.message).bind(2, int64_t{e.rank}).bind(3, error.host);
      root_cause_.bind(4, run_id_).run();
    }
  }
  if (error.flight_recorder) {
    dump_.bind(1, run_id_)
        .bind(2, int64_t{event_attempt_})
        .bind(3, int64_t{e.rank})
        .bind(4, e.time);
    dump_.bind(5, error.flight_recorder->dump()).run();
  }
}
// A dump on request (`ringmaster flight`): kept beside the dumps of failures, and logged.
void EventStore::storeBody(const TelemetryEvent& e, const FlightEvent& flight) {
  dump_.bind(1, run_id_).bind(2, int64_t{event_attempt_}).bind(3, int64_t{e.rank});
  dump_.bind(4, e.time).bind(5, flight.flight_recorder.dump()).run();
  log(int64_t{e.rank}, e.time, "info",
      fmt::format("flight recorder dumped ({} records): {}", flight.flight_recorder.size(),
                  flight.reason),
      event_attempt_);
}
// The latest report per (rank, group) is kept; a replayed older one changes nothing.
void EventStore::storeBody(const TelemetryEvent& e, const ProgressEvent& p) {
  progress_.bind(1, run_id_).bind(2, int64_t{event_attempt_}).bind(3, int64_t{e.rank});
  progress_.bind(4, p.group).bind(5, e.time).bind(6, p.period_s).bind(7, p.step);
  progress_.bind(8, static_cast<int64_t>(p.started));
  progress_.bind(9, static_cast<int64_t>(p.completed)).bind(10, p.completed_op);
  progress_.bind(11, p.op).bind(12, p.op_seq).bind(13, p.peer).bind(14, p.waiting_ms);
  progress_.bind(15, p.not_arrived).bind(16, p.silent).run();
}
void EventStore::storeBody(const TelemetryEvent& e, const DoneEvent& done) {
  rank_done_.bind(1, toString(done.status)).bind(2, run_id_);
  rank_done_.bind(3, int64_t{event_attempt_}).bind(4, int64_t{e.rank}).run();
}

}  // namespace ringmaster::storage
