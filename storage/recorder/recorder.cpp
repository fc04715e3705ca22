// The recorder's writer thread and the statements that put each kind of event in its table.
#include "recorder/recorder.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "db/database.h"
#include "db/series_summary.h"
#include "db/statement.h"
#include "telemetry/codec.h"

namespace ringmaster::storage {

namespace {

double nowSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string thisHost() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

struct RollupKey {
  int64_t metric_id;
  int64_t rank;
  int64_t width;
  int64_t bucket;
  auto operator<=>(const RollupKey&) const = default;
};

// Every statement the writer needs, prepared once on its connection.
class EventStore {
 public:
  EventStore(Database& db, int64_t run_id, int attempt)
      : db_(db),
        run_id_(run_id),
        attempt_(attempt),
        seen_(db,
              "INSERT OR IGNORE INTO events_seen (run_id, attempt, rank, seq) VALUES (?, ?, ?, ?)"),
        rank_(db,
              "INSERT OR REPLACE INTO ranks (run_id, attempt, rank, local_rank, host, pid, device, "
              "device_name, memory_total, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        rank_done_(db, "UPDATE ranks SET status = ? WHERE run_id = ? AND attempt = ? AND rank = ?"),
        metric_insert_(db, "INSERT OR IGNORE INTO metrics (name) VALUES (?)"),
        metric_select_(db, "SELECT id FROM metrics WHERE name = ?"),
        scalar_(db,
                "INSERT OR REPLACE INTO scalars (run_id, metric_id, rank, step, value, attempt) "
                "VALUES (?, ?, ?, ?, ?, ?)"),
        comm_(db,
              "INSERT INTO comm_events (run_id, attempt, rank, t, step, op, group_name, "
              "group_size, bytes, dtype, duration_ms, wait_ms, algbw_gbps, busbw_gbps) VALUES "
              "(?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)"),
        sched_(db,
               "INSERT INTO sched_events (run_id, attempt, rank, step, stage, virtual_stage, "
               "micro_batch, phase, start_us, end_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        log_(db,
             "INSERT INTO logs (run_id, attempt, rank, t, level, message) VALUES (?, ?, ?, ?, ?, "
             "?)"),
        root_cause_(db,
                    "UPDATE runs SET error = ?, error_rank = ?, error_host = ? "
                    "WHERE id = ? AND error IS NULL"),
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
                "events_duplicate = events_duplicate + ?, events_dropped = events_dropped + ?, "
                "lines_malformed = lines_malformed + ? WHERE run_id = ? AND attempt = ?") {}

  // False when the event was stored before.
  bool store(const TelemetryEvent& e) {
    seen_.bind(1, run_id_).bind(2, int64_t{attempt_}).bind(3, int64_t{e.rank});
    seen_.bind(4, static_cast<int64_t>(e.seq)).run();
    if (sqlite3_changes(db_.handle()) == 0) return false;
    std::visit([&](const auto& body) { storeBody(e, body); }, e.body);
    return true;
  }

  void log(std::optional<int64_t> rank, double t, std::string_view level,
           const std::string& message) {
    log_.bind(1, run_id_).bind(2, int64_t{attempt_}).bind(3, rank).bind(4, t);
    log_.bind(5, level).bind(6, message).run();
  }

  // Merges the batch's bucket summaries into scalar_rollups: one upsert per bucket touched, not
  // per point.
  void writeRollups() {
    for (const auto& [key, bucket] : rollups_) {
      rollup_.bind(1, run_id_).bind(2, key.metric_id).bind(3, key.rank).bind(4, key.width);
      rollup_.bind(5, key.bucket).bind(6, bucket.count).bind(7, bucket.sum).bind(8, bucket.min);
      rollup_.bind(9, bucket.max).bind(10, bucket.first_step).bind(11, bucket.last_step);
      rollup_.bind(12, bucket.last_value).run();
    }
    rollups_.clear();
  }

  void addCounts(const RecorderCounts& delta) {
    counts_.bind(1, delta.stored).bind(2, delta.duplicates).bind(3, delta.dropped);
    counts_.bind(4, delta.malformed).bind(5, run_id_).bind(6, int64_t{attempt_}).run();
  }

 private:
  int64_t metricId(const std::string& name) {
    if (auto it = metric_ids_.find(name); it != metric_ids_.end()) return it->second;
    metric_insert_.bind(1, name).run();
    metric_select_.bind(1, name);
    RM_ENFORCE(metric_select_.run(), "a metric row just inserted is missing");
    const int64_t id = metric_select_.columnInt(0);
    metric_select_.reset();
    metric_ids_.emplace(name, id);
    return id;
  }

  void scalar(const TelemetryEvent& e, int64_t step, const std::string& name, double value) {
    const int64_t metric = metricId(name);
    scalar_.bind(1, run_id_).bind(2, metric).bind(3, int64_t{e.rank}).bind(4, step);
    scalar_.bind(5, value).bind(6, int64_t{attempt_}).run();
    for (int64_t width : kRollupWidths)
      rollups_[RollupKey{metric, e.rank, width, step / width}].add(step, value);
  }

  void storeBody(const TelemetryEvent& e, const HelloEvent& hello) {
    rank_.bind(1, run_id_).bind(2, int64_t{attempt_}).bind(3, int64_t{e.rank});
    rank_.bind(4, int64_t{hello.local_rank}).bind(5, hello.host).bind(6, hello.pid);
    rank_.bind(7, hello.device).bind(8, hello.device_name);
    rank_.bind(9, static_cast<int64_t>(hello.device_memory_total)).bind(10, hello.version).run();
  }
  void storeBody(const TelemetryEvent& e, const StepEvent& s) {
    scalar(e, s.step, "wall_time_s", e.time);
    scalar(e, s.step, "loss", s.loss);
    scalar(e, s.step, "lr", s.lr);
    scalar(e, s.step, "samples", static_cast<double>(s.samples));
    scalar(e, s.step, "step_ms", s.step_ms);
    scalar(e, s.step, "compute_ms", s.compute_ms);
    scalar(e, s.step, "comm_ms", s.comm_ms);
    scalar(e, s.step, "exposed_comm_ms", s.exposed_comm_ms);
    scalar(e, s.step, "mem_allocated", static_cast<double>(s.mem_allocated));
    scalar(e, s.step, "mem_peak", static_cast<double>(s.mem_peak));
    scalar(e, s.step, "mem_reserved", static_cast<double>(s.mem_reserved));
    scalar(e, s.step, "device_mem_used", static_cast<double>(s.device_mem_used));
    if (s.grad_norm) scalar(e, s.step, "grad_norm", *s.grad_norm);
    if (s.accuracy) scalar(e, s.step, "accuracy", *s.accuracy);
  }
  void storeBody(const TelemetryEvent& e, const CommEvent& c) {
    comm_.bind(1, run_id_).bind(2, int64_t{attempt_}).bind(3, int64_t{e.rank}).bind(4, e.time);
    comm_.bind(5, c.step).bind(6, c.op).bind(7, c.group).bind(8, static_cast<int64_t>(c.bytes));
    comm_.bind(9, c.dtype).bind(10, c.duration_ms).bind(11, c.wait_ms).bind(12, c.algbw_gbps);
    comm_.bind(13, c.busbw_gbps).run();
  }
  void storeBody(const TelemetryEvent& e, const SchedEvent& s) {
    sched_.bind(1, run_id_).bind(2, int64_t{attempt_}).bind(3, int64_t{e.rank}).bind(4, s.step);
    sched_.bind(5, int64_t{s.stage}).bind(6, int64_t{s.virtual_stage});
    sched_.bind(7, int64_t{s.micro_batch}).bind(8, toString(s.phase));
    sched_.bind(9, s.start_us).bind(10, s.end_us).run();
  }
  void storeBody(const TelemetryEvent& e, const LogEvent& l) {
    log(int64_t{e.rank}, e.time, toString(l.level), l.message);
  }
  void storeBody(const TelemetryEvent& e, const ErrorEvent& error) {
    log(int64_t{e.rank}, e.time, "error", error.message);
    if (error.fatal) {
      root_cause_.bind(1, error.message).bind(2, int64_t{e.rank}).bind(3, error.host);
      root_cause_.bind(4, run_id_).run();
    }
    if (error.flight_recorder) {
      dump_.bind(1, run_id_).bind(2, int64_t{attempt_}).bind(3, int64_t{e.rank}).bind(4, e.time);
      dump_.bind(5, error.flight_recorder->dump()).run();
    }
  }
  void storeBody(const TelemetryEvent& e, const DoneEvent& done) {
    rank_done_.bind(1, toString(done.status)).bind(2, run_id_);
    rank_done_.bind(3, int64_t{attempt_}).bind(4, int64_t{e.rank}).run();
  }

  Database& db_;
  int64_t run_id_;
  int attempt_;
  Statement seen_, rank_, rank_done_, metric_insert_, metric_select_, scalar_, comm_, sched_, log_,
      root_cause_, dump_, rollup_, counts_;
  std::map<std::string, int64_t> metric_ids_;
  std::map<RollupKey, SeriesSummary> rollups_;  // this batch's points, per bucket
};

}  // namespace

int64_t createRun(Database& db, const NewRun& run) {
  const double now = nowSeconds();
  int64_t id = 0;
  db.transaction([&] {
    Statement insert(db,
                     "INSERT INTO runs (name, spec, strategy, world_size, status, created_at, "
                     "started_at, recorder_pid, recorder_host) "
                     "VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?)");
    insert.bind(1, run.name).bind(2, run.spec_json).bind(3, run.strategy);
    insert.bind(4, int64_t{run.world_size}).bind(5, now).bind(6, now);
    insert.bind(7, static_cast<int64_t>(getpid())).bind(8, thisHost()).run();
    id = sqlite3_last_insert_rowid(db.handle());
    Statement attempt(db, "INSERT INTO attempts (run_id, attempt, started_at) VALUES (?, 0, ?)");
    attempt.bind(1, id).bind(2, now).run();
  });
  return id;
}

void finishRun(Database& db, int64_t run_id, const std::string& status) {
  db.transaction([&] {
    Statement update(db,
                     "UPDATE runs SET status = ?, ended_at = ?, recorder_pid = NULL WHERE id = ?");
    update.bind(1, status).bind(2, nowSeconds()).bind(3, run_id).run();
    Statement attempt(db, "UPDATE attempts SET ended_at = ? WHERE run_id = ? AND ended_at IS NULL");
    attempt.bind(1, nowSeconds()).bind(2, run_id).run();
  });
}

void recordRunHosts(Database& db, int64_t run_id, const std::vector<RunHost>& hosts) {
  db.transaction([&] {
    Statement insert(db,
                     "INSERT INTO run_hosts (run_id, node_rank, alias, hostname, port, user, "
                     "fingerprint, node_binary, uploaded, command, libssh_version) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (const RunHost& host : hosts) {
      insert.bind(1, run_id)
          .bind(2, host.node_rank)
          .bind(3, host.alias)
          .bind(4, host.hostname)
          .bind(5, host.port)
          .bind(6, host.user)
          .bind(7, host.fingerprint)
          .bind(8, host.node_binary)
          .bind(9, host.uploaded ? 1 : 0)
          .bind(10, host.command)
          .bind(11, host.libssh_version);
      insert.run();
    }
  });
}

void recordRunError(Database& db, int64_t run_id, const std::string& message,
                    std::optional<int> rank, std::optional<std::string> host) {
  Statement update(db,
                   "UPDATE runs SET error = ?, error_rank = ?, error_host = ? WHERE id = ? AND "
                   "error IS NULL");
  update.bind(1, message).bind(2, rank).bind(3, host).bind(4, run_id).run();
}

void recordRunRootCause(Database& db, int64_t run_id, const std::string& message) {
  Statement update(db,
                   "UPDATE runs SET error = ?, error_rank = NULL, error_host = NULL WHERE id = ?");
  update.bind(1, message).bind(2, run_id).run();
}

int reconcileInterruptedRuns(Database& db) {
  const std::string host = thisHost();
  std::vector<int64_t> orphaned;
  {
    Statement running(db,
                      "SELECT id, recorder_pid FROM runs WHERE status IN ('pending', 'running') "
                      "AND recorder_host = ?");
    running.bind(1, host);
    while (running.run()) {
      const auto pid = static_cast<pid_t>(running.columnInt(1));
      if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH))
        orphaned.push_back(running.columnInt(0));
    }
  }
  for (int64_t id : orphaned) finishRun(db, id, "interrupted");
  return static_cast<int>(orphaned.size());
}

Recorder::Recorder(std::string db_path, int64_t run_id, int attempt, RecorderOptions options)
    : db_path_(std::move(db_path)), run_id_(run_id), attempt_(attempt), options_(options) {
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

bool Recorder::submit(TelemetryEvent event) {
  {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= options_.queue_capacity || !failure_.empty()) {
      ++counts_.dropped;
      ++pending_.dropped;
      return false;
    }
    queue_.push_back(std::move(event));
    ++submitted_;
  }
  queued_.notify_one();
  return true;
}

bool Recorder::submitLine(std::string_view line) {
  DecodeResult decoded = decodeEvent(line);
  if (decoded.ok()) return submit(std::move(decoded.event()));
  {
    std::lock_guard lock(mutex_);
    ++counts_.malformed;
    ++pending_.malformed;
    if (malformed_reasons_.size() < 100) malformed_reasons_.push_back(decoded.error().message);
    ++submitted_;
    ++malformed_queued_;
  }
  queued_.notify_one();
  return false;
}

bool Recorder::submitLog(std::optional<int> rank, std::string_view level,
                         std::string_view message) {
  {
    std::lock_guard lock(mutex_);
    if (logs_.size() >= options_.queue_capacity || !failure_.empty()) {
      ++counts_.dropped;
      ++pending_.dropped;
      return false;
    }
    logs_.push_back({rank, std::string(level), std::string(message), nowSeconds()});
    ++submitted_;
  }
  queued_.notify_one();
  return true;
}

void Recorder::flush() {
  std::unique_lock lock(mutex_);
  const uint64_t target = submitted_;
  written_.wait(lock, [&] { return committed_ >= target || !failure_.empty(); });
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
  std::optional<Database> db;
  std::optional<EventStore> store;
  try {
    db.emplace(db_path_);
    store.emplace(*db, run_id_, attempt_);
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    failure_ = e.what();
    written_.notify_all();
    return;
  }
  for (;;) {
    std::vector<TelemetryEvent> batch;
    std::deque<PendingLog> logs;
    std::deque<std::string> reasons;
    RecorderCounts delta;
    uint64_t processed = 0;
    {
      std::unique_lock lock(mutex_);
      queued_.wait(lock, [&] {
        return stopping_ || !queue_.empty() || !logs_.empty() || malformed_queued_ > 0 ||
               pending_.dropped > 0;
      });
      if (stopping_ && queue_.empty() && logs_.empty() && malformed_queued_ == 0 &&
          pending_.dropped == 0)
        break;
      while (!queue_.empty() && batch.size() < options_.batch_size) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      while (!logs_.empty() && logs.size() < options_.batch_size) {
        logs.push_back(std::move(logs_.front()));
        logs_.pop_front();
      }
      reasons.swap(malformed_reasons_);
      delta.dropped = pending_.dropped;
      delta.malformed = pending_.malformed;
      pending_ = {};
      processed = batch.size() + logs.size() + malformed_queued_;
      malformed_queued_ = 0;
    }
    try {
      db->transaction([&] {
        for (const TelemetryEvent& event : batch) {
          if (store->store(event))
            ++delta.stored;
          else
            ++delta.duplicates;
        }
        for (const PendingLog& line : logs) {
          store->log(line.rank ? std::optional<int64_t>(*line.rank) : std::nullopt, line.t,
                     line.level, line.message);
        }
        for (const std::string& reason : reasons)
          store->log(std::nullopt, nowSeconds(), "warn", "malformed telemetry line: " + reason);
        store->writeRollups();
        store->addCounts(delta);
      });
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex_);
      failure_ = fmt::format("recording run {} stopped: {}", run_id_, e.what());
      counts_.dropped += static_cast<int64_t>(batch.size() + queue_.size());
      queue_.clear();
      logs_.clear();
      committed_ += processed;
      written_.notify_all();
      return;
    }
    std::lock_guard lock(mutex_);
    counts_.stored += delta.stored;
    counts_.duplicates += delta.duplicates;
    committed_ += processed;
    written_.notify_all();
  }
}

}  // namespace ringmaster::storage
