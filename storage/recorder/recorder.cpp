// The recorder's writer thread and the statements that put each kind of event in its table.
#include "recorder/recorder.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "db/database.h"
#include "db/series_summary.h"
#include "db/statement.h"
#include "db/step_columns.h"
#include "recorder/seq_ranges.h"
#include "telemetry/codec.h"

namespace ringmaster::storage {

namespace {

double nowSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

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

// The rollup buckets a batch touched. Points of one series arrive in step order, so each series
// keeps one open bucket per width and hands it over when a point falls outside it: a map lookup
// per bucket, not per point. A bucket handed over twice (steps out of order) is merged by the
// upsert.
class RollupAccumulator {
 public:
  struct Bucket {
    int64_t metric_id, rank, width, bucket;
    SeriesSummary summary;
  };

  void add(int64_t metric_id, int64_t rank, int64_t step, double value) {
    OpenBuckets& open = series_[{metric_id, rank}];
    for (size_t w = 0; w < std::size(kRollupWidths); ++w) {
      const int64_t bucket = step / kRollupWidths[w];
      if (!open.summary[w].empty() && open.bucket[w] != bucket) {
        done_.push_back({metric_id, rank, kRollupWidths[w], open.bucket[w], open.summary[w]});
        open.summary[w] = {};
      }
      open.bucket[w] = bucket;
      open.summary[w].add(step, value);
    }
  }

  // Every bucket touched since the last call, the open ones included.
  std::vector<Bucket> take() {
    for (auto& [key, open] : series_)
      for (size_t w = 0; w < std::size(kRollupWidths); ++w)
        if (!open.summary[w].empty())
          done_.push_back(
              {key.first, key.second, kRollupWidths[w], open.bucket[w], open.summary[w]});
    series_.clear();
    return std::exchange(done_, {});
  }

 private:
  struct OpenBuckets {
    int64_t bucket[std::size(kRollupWidths)] = {};
    SeriesSummary summary[std::size(kRollupWidths)];
  };
  std::map<std::pair<int64_t, int64_t>, OpenBuckets> series_;  // by (metric, rank)
  std::vector<Bucket> done_;
};

// Every statement the writer needs, prepared once on its connection.
class EventStore {
 public:
  EventStore(Database& db, int64_t run_id, int attempt)
      : run_id_(run_id),
        attempt_(attempt),
        latest_attempt_(attempt),
        db_(db.handle()),
        database_(db),
        seq_write_(db,
                   "INSERT OR REPLACE INTO seq_ranges (run_id, attempt, rank, first_seq, "
                   "last_seq) VALUES (?, ?, ?, ?, ?)"),
        seq_erase_(db,
                   "DELETE FROM seq_ranges WHERE run_id = ? AND attempt = ? AND rank = ? AND "
                   "first_seq = ?"),
        rank_(db,
              "INSERT OR REPLACE INTO ranks (run_id, attempt, rank, local_rank, host, pid, device, "
              "device_name, memory_total, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        rank_done_(db, "UPDATE ranks SET status = ? WHERE run_id = ? AND attempt = ? AND rank = ?"),
        step_insert_(db, stepInsertSql()),
        step_update_(db, stepUpdateSql()),
        comm_(db,
              "INSERT INTO comm_events (run_id, attempt, rank, t, step, op, group_name, "
              "group_size, bytes, dtype, duration_ms, wait_ms, algbw_gbps, busbw_gbps, seq_op, "
              "start_us, end_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        comm_wait_(db, "UPDATE comm_events SET wait_ms = ? WHERE rowid = ?"),
        sched_(
            db,
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
        rollup_(
            db,
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
                       "WHERE run_id = ?3 AND attempt = ?4") {
    {  // finished before the transaction below: an open read would keep its snapshot
      Statement world(db, "SELECT world_size FROM runs WHERE id = ?");
      world.bind(1, run_id_);
      if (!world.run()) RM_THROW(kInvalidArgument, fmt::format("run {} does not exist", run_id_));
      world_size_ = world.columnInt(0);
    }
    // Every attempt's sequence numbers: a replay may hold events of several.
    Statement stored(db,
                     "SELECT attempt, rank, first_seq, last_seq FROM seq_ranges WHERE run_id = ?");
    stored.bind(1, run_id_);
    while (stored.run()) {
      seen_[{static_cast<int>(stored.columnInt(0)), stored.columnInt(1)}].load(
          static_cast<uint64_t>(stored.columnInt(2)), static_cast<uint64_t>(stored.columnInt(3)));
    }
    // Each rank's events belong to the attempt of its latest hello (launch.max_restarts).
    Statement latest(db,
                     "SELECT rank, max(attempt) FROM ranks WHERE run_id = ? AND attempt >= ? "
                     "GROUP BY rank");
    latest.bind(1, run_id_).bind(2, int64_t{attempt_});
    while (latest.run()) {
      const int rank_attempt = static_cast<int>(latest.columnInt(1));
      rank_attempt_[latest.columnInt(0)] = rank_attempt;
      latest_attempt_ = std::max(latest_attempt_, rank_attempt);
    }
    loadPendingCollectives(db);
    db.transaction([&] {
      Statement insert(db, "INSERT OR IGNORE INTO metrics (name) VALUES (?)");
      Statement select(db, "SELECT id FROM metrics WHERE name = ?");
      for (size_t i = 0; i < kStepColumns.size(); ++i) {
        insert.bind(1, kStepColumns[i]).run();
        select.bind(1, kStepColumns[i]);
        RM_ENFORCE(select.run(), "a metric row just inserted is missing");
        step_metric_ids_[i] = select.columnInt(0);
        select.reset();
      }
    });
  }

  enum class Outcome { kStored, kDuplicate, kRejected };

  // kRejected, with the reason in `why`, for an event naming no rank of the run; such an event
  // leaves no trace but the count and the reason (not even a sequence number).
  Outcome store(const TelemetryEvent& e, std::string& why) {
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

  bool inWorld(int64_t rank) const { return rank >= 0 && rank < world_size_; }

  // A line of the run's log; under the latest attempt unless it is a rank's event's.
  void log(std::optional<int64_t> rank, double t, std::string_view level,
           const std::string& message, std::optional<int> attempt = std::nullopt) {
    log_.bind(1, run_id_).bind(2, int64_t{attempt.value_or(latest_attempt_)}).bind(3, rank);
    log_.bind(4, t);
    log_.bind(5, level).bind(6, message).run();
  }

  // Writes what the batch changed besides its rows: the ranges of stored sequence numbers, and
  // the rollup buckets it touched (one upsert per bucket, not per point).
  void writeBatchState() {
    insertAllHeldRows();
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
    for (const auto& b : rollups_.take()) {
      rollup_.bind(1, run_id_).bind(2, b.metric_id).bind(3, b.rank).bind(4, b.width);
      rollup_.bind(5, b.bucket).bind(6, b.summary.count).bind(7, b.summary.sum);
      rollup_.bind(8, b.summary.min).bind(9, b.summary.max).bind(10, b.summary.first_step);
      rollup_.bind(11, b.summary.last_step).bind(12, b.summary.last_value).run();
    }
    recomputeRestoredBuckets();
    for (const auto& [attempt, range] : attempt_steps_seen_) {
      attempt_steps_.bind(1, range.first).bind(2, range.second).bind(3, run_id_);
      attempt_steps_.bind(4, int64_t{attempt}).run();
    }
    attempt_steps_seen_.clear();
  }

  // Adds to the attempt's counts; malformed and rejected lines are both its bad lines.
  void addCounts(const RecorderCounts& delta) {
    counts_.bind(1, delta.stored).bind(2, delta.duplicates);
    counts_.bind(3, delta.malformed + delta.rejected);
    counts_.bind(4, run_id_).bind(5, int64_t{latest_attempt_}).run();
  }

 private:
  int attemptOf(int64_t rank) const {
    const auto found = rank_attempt_.find(rank);
    return found == rank_attempt_.end() ? attempt_ : found->second;
  }

  // A rank's hello of another attempt (launch.max_restarts): its events from here on are that
  // attempt's (an earlier one's in a replay). The first rank to reach a new attempt opens its row
  // and closes the earlier ones; the run's root cause is cleared, as the run goes on (each attempt
  // keeps its own).
  void beginAttempt(const TelemetryEvent& e, int attempt) {
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
  void recomputeRestoredBuckets() {
    if (restored_buckets_.empty()) return;
    if (recompute_.empty()) {
      for (std::string_view column : kStepColumns) {
        const std::string where = fmt::format(
            "FROM steps WHERE run_id = ?1 AND rank = ?3 AND step BETWEEN ?6 AND ?7 AND {} IS NOT "
            "NULL",
            column);
        recompute_.push_back(std::make_unique<Statement>(
            database_,
            fmt::format("INSERT INTO scalar_rollups (run_id, metric_id, rank, width, bucket, n, "
                        "sum, min, max, first_step, last_step, last_value) SELECT ?1, ?2, ?3, "
                        "?4, ?5, count(*), total({0}), min({0}), max({0}), min(step), max(step), "
                        "(SELECT {0} {1} ORDER BY step DESC LIMIT 1) {1} HAVING count(*) > 0",
                        column, where)));
      }
    }
    Statement erase(database_,
                    "DELETE FROM scalar_rollups WHERE run_id = ? AND rank = ? AND width = ? AND "
                    "bucket = ?");
    for (const auto& [rank, width, bucket] : restored_buckets_) {
      erase.bind(1, run_id_).bind(2, rank).bind(3, width).bind(4, bucket).run();
      for (size_t i = 0; i < kStepColumns.size(); ++i) {
        Statement& insert = *recompute_[i];
        insert.bind(1, run_id_).bind(2, step_metric_ids_[i]).bind(3, rank).bind(4, width);
        insert.bind(5, bucket).bind(6, bucket * width).bind(7, bucket * width + width - 1).run();
      }
    }
    restored_buckets_.clear();
  }

  void storeBody(const TelemetryEvent& e, const HelloEvent& hello) {
    rank_.bind(1, run_id_).bind(2, int64_t{event_attempt_}).bind(3, int64_t{e.rank});
    rank_.bind(4, int64_t{hello.local_rank}).bind(5, hello.host).bind(6, hello.pid);
    rank_.bind(7, hello.device).bind(8, hello.device_name);
    rank_.bind(9, static_cast<int64_t>(hello.device_memory_total)).bind(10, hello.version).run();
  }
  // A step stored again (a later attempt resumed before it) keeps the latest values.
  void storeBody(const TelemetryEvent& e, const StepEvent& s) {
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
    if (!step_insert_.insertUnlessPresent()) {
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
    for (size_t i = 0; i < values.size(); ++i)
      if (!std::isnan(values[i])) rollups_.add(step_metric_ids_[i], e.rank, s.step, values[i]);
  }
  void storeBody(const TelemetryEvent& e, const CommEvent& c) {
    if (c.start_us && c.group_size && *c.group_size > 1 && !c.wait_ms) {
      addCollectiveMember(
          event_attempt_, c.group, static_cast<int64_t>(c.seq_op), *c.group_size,
          {std::nullopt, *c.start_us, c.duration_ms, CommRow{event_attempt_, e.rank, e.time, c}});
      return;
    }
    insertComm(event_attempt_, e.rank, e.time, c, c.wait_ms);
  }

  // Inserts a comm_events row; returns its rowid.
  int64_t insertComm(int attempt, int rank, double t, const CommEvent& c,
                     std::optional<double> wait_ms) {
    comm_.bind(1, run_id_).bind(2, int64_t{attempt}).bind(3, int64_t{rank}).bind(4, t);
    comm_.bind(5, c.step).bind(6, c.op).bind(7, c.group).bind(8, c.group_size.value_or(0));
    comm_.bind(9, static_cast<int64_t>(c.bytes)).bind(10, c.dtype).bind(11, c.duration_ms);
    comm_.bind(12, wait_ms).bind(13, c.algbw_gbps).bind(14, c.busbw_gbps);
    comm_.bind(15, static_cast<int64_t>(c.seq_op)).bind(16, c.start_us).bind(17, c.end_us).run();
    return sqlite3_last_insert_rowid(db_);
  }

  // ------------------------------------------------------------------------------------------
  // Waiting versus transfer of a collective (docs/telemetry.md): the rows of one (group, seq_op)
  // of one attempt (a restart numbers its operations from 1 again) are gathered until every
  // member's is stored; then each row's wait_ms is the time from its start to the latest start, at
  // most its duration. A collective that some member never reported keeps its rows' wait_ms null.
  // A member's row is held back until its collective is complete or the batch ends: most
  // collectives complete within a batch, and their rows are then inserted once, wait included
  // (storage_bench --telemetry on a recorded 4-rank DDP stream, two thirds of it comm events: an
  // UPDATE per row made ingest about a third slower than without the split, held rows about a
  // sixth).
  struct CommRow {
    int attempt;
    int rank;
    double t;
    CommEvent event;
  };
  struct CollectiveMember {
    std::optional<int64_t> rowid;  // its row, once inserted
    int64_t start_us;
    double duration_ms;
    std::optional<CommRow> row;  // its row while held back
  };
  struct PendingCollective {
    int64_t group_size = 0;
    std::vector<CollectiveMember> members;
  };
  // Collectives waiting for members, at most this many: a rank that died leaves its last ones
  // incomplete for good, and those are forgotten oldest first beyond the bound.
  static constexpr size_t kMaxPendingCollectives = 1 << 16;

  void addCollectiveMember(int attempt, const std::string& group, int64_t seq_op,
                           int64_t group_size, CollectiveMember member) {
    auto [it, inserted] = pending_collectives_.try_emplace({attempt, group, seq_op});
    PendingCollective& pending = it->second;
    if (inserted) pending.group_size = group_size;
    const bool held = member.row.has_value();
    pending.members.push_back(std::move(member));
    if (static_cast<int64_t>(pending.members.size()) >= pending.group_size) {
      int64_t arrival = pending.members.front().start_us;
      for (const CollectiveMember& m : pending.members) arrival = std::max(arrival, m.start_us);
      for (const CollectiveMember& m : pending.members) {
        const double late_ms = static_cast<double>(arrival - m.start_us) / 1000.0;
        const double wait_ms = std::clamp(late_ms, 0.0, std::max(m.duration_ms, 0.0));
        if (m.row) {
          insertComm(m.row->attempt, m.row->rank, m.row->t, m.row->event, wait_ms);
        } else {
          comm_wait_.bind(1, wait_ms).bind(2, *m.rowid).run();
        }
      }
      pending_collectives_.erase(it);
      return;
    }
    if (held) held_.push_back(it->first);
    if (pending_collectives_.size() > kMaxPendingCollectives) {
      insertHeldRows(pending_collectives_.begin()->second);
      pending_collectives_.erase(pending_collectives_.begin());
    }
  }

  // Inserts the held rows of a collective still missing members, their wait null for now.
  void insertHeldRows(PendingCollective& pending) {
    for (CollectiveMember& m : pending.members) {
      if (!m.row) continue;
      m.rowid = insertComm(m.row->attempt, m.row->rank, m.row->t, m.row->event, std::nullopt);
      m.row.reset();
    }
  }
  // At the end of a batch: every row still held back.
  void insertAllHeldRows() {
    for (const auto& key : held_) {
      if (auto it = pending_collectives_.find(key); it != pending_collectives_.end())
        insertHeldRows(it->second);
    }
    held_.clear();
  }

  // A recorder that starts on a run already partly stored (attach, a restarted launcher) takes
  // up the collectives still missing members, of every attempt from its own on.
  void loadPendingCollectives(Database& db) {
    Statement rows(db,
                   "SELECT rowid, group_name, seq_op, group_size, start_us, duration_ms, attempt "
                   "FROM comm_events WHERE run_id = ? AND attempt >= ? AND start_us IS NOT NULL "
                   "AND seq_op IS NOT NULL AND wait_ms IS NULL AND group_size > 1 ORDER BY rowid");
    rows.bind(1, run_id_).bind(2, int64_t{attempt_});
    while (rows.run()) {
      PendingCollective& pending = pending_collectives_[{static_cast<int>(rows.columnInt(6)),
                                                         rows.columnText(1), rows.columnInt(2)}];
      pending.group_size = rows.columnInt(3);
      pending.members.push_back(
          {rows.columnInt(0), rows.columnInt(4), rows.columnDouble(5), std::nullopt});
    }
  }
  void storeBody(const TelemetryEvent& e, const SchedEvent& s) {
    sched_.bind(1, run_id_)
        .bind(2, int64_t{event_attempt_})
        .bind(3, int64_t{e.rank})
        .bind(4, s.step);
    sched_.bind(5, int64_t{s.stage}).bind(6, int64_t{s.virtual_stage});
    sched_.bind(7, int64_t{s.micro_batch}).bind(8, toString(s.phase));
    sched_.bind(9, s.start_us)
        .bind(10, s.end_us)
        .bind(11, s.ready_us)
        .bind(12, s.transfer_us)
        .run();
  }
  // An evaluation stored again (a later attempt resumed before it) keeps the latest values.
  void storeBody(const TelemetryEvent& e, const EvalEvent& v) {
    const auto finite = [](double x) { return std::isfinite(x) ? std::optional(x) : std::nullopt; };
    eval_.bind(1, run_id_)
        .bind(2, int64_t{e.rank})
        .bind(3, v.step)
        .bind(4, int64_t{event_attempt_});
    eval_.bind(5, e.time).bind(6, finite(v.val_loss)).bind(7, finite(v.perplexity));
    eval_.bind(8, v.tokens).bind(9, v.eval_ms).run();
  }
  void storeBody(const TelemetryEvent& e, const LogEvent& l) {
    log(int64_t{e.rank}, e.time, toString(l.level), l.message, event_attempt_);
  }
  void storeBody(const TelemetryEvent& e, const ErrorEvent& error) {
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
  void storeBody(const TelemetryEvent& e, const FlightEvent& flight) {
    dump_.bind(1, run_id_).bind(2, int64_t{event_attempt_}).bind(3, int64_t{e.rank});
    dump_.bind(4, e.time).bind(5, flight.flight_recorder.dump()).run();
    log(int64_t{e.rank}, e.time, "info",
        fmt::format("flight recorder dumped ({} records): {}", flight.flight_recorder.size(),
                    flight.reason),
        event_attempt_);
  }
  // The latest report per (rank, group) is kept; a replayed older one changes nothing.
  void storeBody(const TelemetryEvent& e, const ProgressEvent& p) {
    progress_.bind(1, run_id_).bind(2, int64_t{event_attempt_}).bind(3, int64_t{e.rank});
    progress_.bind(4, p.group).bind(5, e.time).bind(6, p.period_s).bind(7, p.step);
    progress_.bind(8, static_cast<int64_t>(p.started));
    progress_.bind(9, static_cast<int64_t>(p.completed)).bind(10, p.completed_op);
    progress_.bind(11, p.op).bind(12, p.op_seq).bind(13, p.peer).bind(14, p.waiting_ms);
    progress_.bind(15, p.not_arrived).bind(16, p.silent).run();
  }
  void storeBody(const TelemetryEvent& e, const DoneEvent& done) {
    rank_done_.bind(1, toString(done.status)).bind(2, run_id_);
    rank_done_.bind(3, int64_t{event_attempt_}).bind(4, int64_t{e.rank}).run();
  }

  int64_t run_id_;
  int attempt_;             // the attempt the recorder was started for
  int latest_attempt_;      // the latest any rank's hello named (launch.max_restarts)
  int event_attempt_ = 0;   // the attempt of the event being stored
  int64_t world_size_ = 0;  // ranks are 0 .. world_size_ - 1
  sqlite3* db_;
  Database& database_;
  Statement seq_write_, seq_erase_, rank_, rank_done_, step_insert_, step_update_, comm_,
      comm_wait_, sched_, eval_, log_, root_cause_, progress_, dump_, rollup_, counts_;
  Statement attempt_begin_, attempt_end_, run_error_clear_, attempt_root_cause_, attempt_steps_;
  // By (attempt, group, seq_op).
  std::map<std::tuple<int, std::string, int64_t>, PendingCollective> pending_collectives_;
  std::vector<std::tuple<int, std::string, int64_t>> held_;  // collectives with held rows
  std::array<int64_t, kStepColumns.size()> step_metric_ids_{};
  std::map<std::pair<int, int64_t>, SeqRanges> seen_;  // by (attempt, rank)
  std::map<int64_t, int> rank_attempt_;                // by rank; absent: attempt_
  RollupAccumulator rollups_;
  // Since the last batch: (rank, width, bucket) of the rollups holding a step stored again, and
  // each attempt's first and last step stored.
  std::set<std::tuple<int64_t, int64_t, int64_t>> restored_buckets_;
  std::map<int, std::pair<int64_t, int64_t>> attempt_steps_seen_;
  std::vector<std::unique_ptr<Statement>> recompute_;  // per step column, made when first needed
};

}  // namespace

Recorder::Recorder(std::string db_path, int64_t run_id, int attempt, RecorderOptions options)
    : db_path_(std::move(db_path)), run_id_(run_id), attempt_(attempt), options_(options) {
  options_.queue_capacity = std::max<size_t>(options_.queue_capacity, 1);
  options_.batch_size = std::max<size_t>(options_.batch_size, 1);
  writer_ = std::thread([this] { writerLoop(); });
}

Recorder::~Recorder() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  writer_.join();
}

bool Recorder::waitForRoom(std::unique_lock<std::mutex>& lock) {
  room_.wait(lock, [&] {
    return queue_.size() + logs_.size() < options_.queue_capacity || !failure_.empty() ||
           writer_done_;
  });
  if (failure_.empty() && !writer_done_) return true;
  ++counts_.dropped;
  return false;
}

bool Recorder::submit(TelemetryEvent event) {
  {
    std::unique_lock lock(mutex_);
    if (!waitForRoom(lock)) return false;
    queue_.push_back(std::move(event));
    ++submitted_;
    const size_t queued = queue_.size() + logs_.size();
    counts_.peak_queued = std::max(counts_.peak_queued, static_cast<int64_t>(queued));
    // The writer waits for the first item, then for a full batch (or its commit delay).
    if (queued != 1 && queued != fullBatch()) return true;
  }
  queued_.notify_one();
  return true;
}

bool Recorder::submitLine(std::string_view line) {
  DecodeResult decoded = decodeEvent(line);
  if (decoded.ok()) return submit(std::move(decoded.event()));
  {
    std::lock_guard lock(mutex_);
    queueBadLine(std::nullopt, "malformed telemetry line: " + decoded.error().message);
  }
  queued_.notify_one();
  return false;
}

void Recorder::reportBadLine(std::optional<int> rank, std::string_view reason) {
  {
    std::lock_guard lock(mutex_);
    queueBadLine(rank, std::string(reason));
  }
  queued_.notify_one();
}

void Recorder::queueBadLine(std::optional<int> rank, std::string reason) {
  ++counts_.malformed;
  if (bad_line_reasons_.size() < 100)
    bad_line_reasons_.push_back({rank, "warn", std::move(reason), nowSeconds()});
  ++submitted_;
  ++bad_lines_queued_;
}

bool Recorder::submitLog(std::optional<int> rank, std::string_view level,
                         std::string_view message) {
  {
    std::unique_lock lock(mutex_);
    if (!waitForRoom(lock)) return false;
    logs_.push_back({rank, std::string(level), std::string(message), nowSeconds()});
    ++submitted_;
    const size_t queued = queue_.size() + logs_.size();
    counts_.peak_queued = std::max(counts_.peak_queued, static_cast<int64_t>(queued));
    if (queued != 1 && queued != fullBatch()) return true;
  }
  queued_.notify_one();
  return true;
}

void Recorder::flush() {
  std::unique_lock lock(mutex_);
  const uint64_t target = submitted_;
  ++flushing_;
  queued_.notify_one();  // no waiting for a fuller batch
  written_.wait(lock, [&] { return committed_ >= target || !failure_.empty(); });
  --flushing_;
}

RecorderCounts Recorder::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::string Recorder::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void Recorder::writerLoop() {
  // However the writer ends, a producer waiting for room must not wait for it any longer.
  struct Done {
    Recorder& recorder;
    ~Done() {
      {
        std::lock_guard lock(recorder.mutex_);
        recorder.writer_done_ = true;
      }
      recorder.room_.notify_all();
      recorder.written_.notify_all();
    }
  } done{*this};
  std::optional<Database> db;
  std::optional<EventStore> store;
  try {
    db.emplace(db_path_);
    store.emplace(*db, run_id_, attempt_);
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    failure_ = e.what();
    counts_.dropped += static_cast<int64_t>(queue_.size() + logs_.size());
    queue_.clear();
    logs_.clear();
    return;
  }
  std::vector<TelemetryEvent> inbox;  // swapped with queue_, so neither buffer is reallocated
  for (;;) {
    std::deque<PendingLog> logs, bad_lines;
    uint64_t bad_line_count = 0;
    {
      std::unique_lock lock(mutex_);
      const auto nothing_queued = [&] {
        return queue_.empty() && logs_.empty() && bad_lines_queued_ == 0;
      };
      queued_.wait(lock, [&] { return stopping_ || !nothing_queued(); });
      if (stopping_ && nothing_queued()) break;
      // Group commit: a transaction's cost is mostly the pages it writes, so a stream of events
      // is committed a batch at a time, not an event at a time.
      queued_.wait_for(lock, options_.commit_delay, [&] {
        return stopping_ || flushing_ > 0 || queue_.size() + logs_.size() >= fullBatch();
      });
      inbox.clear();
      inbox.swap(queue_);
      logs.swap(logs_);
      bad_lines.swap(bad_line_reasons_);
      bad_line_count = std::exchange(bad_lines_queued_, 0);
    }
    room_.notify_all();
    // A transaction per batch_size events; the logs and bad lines go with the first.
    for (size_t first = 0; first == 0 || first < inbox.size(); first += options_.batch_size) {
      const size_t end = std::min(inbox.size(), first + options_.batch_size);
      RecorderCounts batch;
      if (first == 0) batch.malformed = static_cast<int64_t>(bad_line_count);
      const uint64_t processed = (end - first) + (first == 0 ? logs.size() + bad_line_count : 0);
      try {
        db->transaction([&] {
          batch.stored = batch.duplicates = batch.rejected = 0;  // a retried body starts over
          int64_t rejections_logged = 0;
          std::string why;
          for (size_t i = first; i < end; ++i) {
            switch (store->store(inbox[i], why)) {
              case EventStore::Outcome::kStored:
                ++batch.stored;
                break;
              case EventStore::Outcome::kDuplicate:
                ++batch.duplicates;
                break;
              case EventStore::Outcome::kRejected:
                ++batch.rejected;
                if (rejections_logged++ < 100) store->log(std::nullopt, nowSeconds(), "warn", why);
                break;
            }
          }
          if (first == 0) {
            const auto logLine = [&](const PendingLog& line) {
              const bool known = line.rank && store->inWorld(*line.rank);
              store->log(known ? std::optional<int64_t>(*line.rank) : std::nullopt, line.t,
                         line.level, line.message);
            };
            for (const PendingLog& line : logs) logLine(line);
            for (const PendingLog& line : bad_lines) logLine(line);
          }
          store->writeBatchState();
          store->addCounts(batch);
        });
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex_);
        failure_ = fmt::format("recording run {} stopped: {}", run_id_, e.what());
        counts_.dropped += static_cast<int64_t>(inbox.size() - first + queue_.size() +
                                                logs_.size() + (first == 0 ? logs.size() : 0));
        queue_.clear();
        logs_.clear();
        committed_ += processed;
        return;
      }
      std::lock_guard lock(mutex_);
      counts_.stored += batch.stored;
      counts_.duplicates += batch.duplicates;
      counts_.rejected += batch.rejected;
      committed_ += processed;
      written_.notify_all();
    }
  }
}

}  // namespace ringmaster::storage
