// CustomMetricStore: the bounds applied to a step's custom metrics, their rows, their rollups
// recomputed after a restart, and the counted warnings.
#include "recorder/custom_metrics.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "db/database.h"
#include "db/step_columns.h"

namespace ringmaster::storage {

namespace {

// A name as a warning quotes it: printable ASCII as is, other bytes as \xNN, cut after 40 bytes.
std::string namePreview(const std::string& name) {
  constexpr std::size_t kShown = 40;
  std::string preview;
  for (std::size_t i = 0; i < name.size() && i < kShown; ++i) {
    const auto byte = static_cast<unsigned char>(name[i]);
    if (byte < 0x20 || byte >= 0x7f || name[i] == '\\' || name[i] == '\'')
      preview += fmt::format("\\x{:02x}", byte);
    else
      preview += name[i];
  }
  return name.size() > kShown ? preview + "..." : preview;
}

// A name's problem as the recorder sees it: telemetry's bounds, and the storage-only series of
// the step (wall_time_s), which a custom metric may not shadow either.
std::optional<MetricNameProblem> nameProblem(const std::string& name) {
  if (auto problem = customMetricNameProblem(name)) return problem;
  if (isStepColumn(name)) return MetricNameProblem::kStepField;
  return std::nullopt;
}

}  // namespace

CustomMetricStore::CustomMetricStore(Database& db, int64_t run_id)
    : database_(db),
      run_id_(run_id),
      insert_(db,
              "INSERT INTO scalars (run_id, metric_id, rank, step, value, attempt) VALUES "
              "(?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, metric_id, rank, step) DO UPDATE SET "
              "value = excluded.value, attempt = excluded.attempt"),
      erase_(db,
             "DELETE FROM scalars WHERE run_id = ? AND metric_id = ? AND rank = ? AND step = ?"),
      name_insert_(db, "INSERT OR IGNORE INTO metrics (name) VALUES (?)"),
      name_select_(db, "SELECT id FROM metrics WHERE name = ?"),
      // ?1 run, ?2 metric, ?3 rank, ?4 width, ?5 bucket, ?6 .. ?7 its steps.
      recompute_(db,
                 "INSERT INTO scalar_rollups (run_id, metric_id, rank, width, bucket, n, sum, "
                 "min, max, first_step, last_step, last_value) SELECT ?1, ?2, ?3, ?4, ?5, "
                 "count(*), total(value), min(value), max(value), min(step), max(step), (SELECT "
                 "value FROM scalars WHERE run_id = ?1 AND metric_id = ?2 AND rank = ?3 AND step "
                 "BETWEEN ?6 AND ?7 ORDER BY step DESC LIMIT 1) FROM scalars WHERE run_id = ?1 "
                 "AND metric_id = ?2 AND rank = ?3 AND step BETWEEN ?6 AND ?7 HAVING count(*) > "
                 "0"),
      log_insert_(db,
                  "INSERT INTO logs (run_id, attempt, rank, t, level, message) VALUES (?, ?, "
                  "NULL, ?, 'warn', ?)"),
      log_update_(db, "UPDATE logs SET message = ? WHERE rowid = ?") {
  // One primary-key seek per known name, as metricNames (query/runs.cpp).
  Statement stored(db,
                   "SELECT id, name FROM metrics AS m WHERE EXISTS (SELECT 1 FROM scalars WHERE "
                   "run_id = ? AND metric_id = m.id)");
  stored.bind(1, run_id_);
  while (stored.run()) {
    std::string name = stored.columnText(1);
    if (!isStepColumn(name)) ids_.emplace(std::move(name), stored.columnInt(0));
  }
}

void CustomMetricStore::store(int64_t rank, int64_t step, int attempt, double t, bool restored,
                              const std::map<std::string, double>& metrics,
                              RollupAccumulator& rollups) {
  if (restored) {
    for (const auto& [name, id] : ids_) {
      erase_.bind(1, run_id_).bind(2, id).bind(3, rank).bind(4, step).run();
    }
  }
  for (const auto& [name, value] : metrics) {
    const std::optional<int64_t> id = acceptedId(name, t);
    if (!id) continue;
    if (!std::isfinite(value)) {
      refuse("value:" + name,
             fmt::format("custom metric '{}' refused, a non-finite value (NaN or infinite)", name),
             t);
      continue;
    }
    insert_.bind(1, run_id_).bind(2, *id).bind(3, rank).bind(4, step).bind(5, value);
    insert_.bind(6, int64_t{attempt}).run();
    rollups.add({*id, rank}, step, value);
  }
}

std::optional<int64_t> CustomMetricStore::acceptedId(const std::string& name, double t) {
  if (const auto known = ids_.find(name); known != ids_.end()) return known->second;
  if (const auto problem = nameProblem(name)) {
    refuse(fmt::format("name:{}", static_cast<int>(*problem)),
           fmt::format("custom metrics refused, {} (the first: '{}')", describe(*problem),
                       namePreview(name)),
           t);
    return std::nullopt;
  }
  if (ids_.size() >= kMaxCustomMetricsPerRun) {
    refuse("limit",
           fmt::format("custom metrics refused past the limit of {} names per run (the first: "
                       "'{}')",
                       kMaxCustomMetricsPerRun, namePreview(name)),
           t);
    return std::nullopt;
  }
  name_insert_.bind(1, name).run();
  name_select_.bind(1, name);
  RM_ENFORCE(name_select_.run(), "a metric row just inserted is missing");
  const int64_t id = name_select_.columnInt(0);
  name_select_.reset();
  ids_.emplace(name, id);
  return id;
}

void CustomMetricStore::refuse(const std::string& key, std::string what, double t) {
  auto [warning, first] = warnings_.try_emplace(key);
  if (first) {
    warning->second.what = std::move(what);
    warning->second.t = t;
  }
  ++warning->second.points;
  warning->second.changed = true;
}

void CustomMetricStore::recomputeBucket(int64_t rank, int64_t width, int64_t bucket) {
  for (const auto& [name, id] : ids_) {
    recompute_.bind(1, run_id_).bind(2, id).bind(3, rank).bind(4, width).bind(5, bucket);
    recompute_.bind(6, bucket * width).bind(7, bucket * width + width - 1).run();
  }
}

void CustomMetricStore::writeWarnings(int attempt) {
  for (auto& [key, warning] : warnings_) {
    if (!warning.changed) continue;
    warning.changed = false;
    const std::string message =
        fmt::format("{}: {} point{}", warning.what, warning.points, warning.points == 1 ? "" : "s");
    if (warning.rowid == 0) {
      log_insert_.bind(1, run_id_).bind(2, int64_t{attempt}).bind(3, warning.t);
      log_insert_.bind(4, message).run();
      warning.rowid = sqlite3_last_insert_rowid(database_.handle());
    } else {
      log_update_.bind(1, message).bind(2, warning.rowid).run();
    }
  }
}

}  // namespace ringmaster::storage
