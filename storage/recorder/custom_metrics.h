// CustomMetricStore: a step event's custom metrics (StepEvent::metrics) as rows of the generic
// tables, `metrics` (name to id) and `scalars` (run, metric, rank, step, value, attempt), with
// their rollups: the points within the bounds of telemetry/custom_metrics.h, and one counted
// warning in the run's log per kind of refusal (per name for non-finite values). It opens no
// transaction: EventStore calls it inside the writer's batch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/statement.h"
#include "recorder/rollup_accumulator.h"
#include "telemetry/custom_metrics.h"

namespace ringmaster::storage {

class Database;

class CustomMetricStore {
 public:
  // Reads the custom names the run already stores (a recorder started again: attach).
  CustomMetricStore(Database& db, int64_t run_id);

  // Stores a step's points that pass the bounds and adds them to `rollups`. `restored`: the step
  // was stored before (a later attempt resumed before it), so its earlier points go first, as its
  // `steps` row is replaced; the caller recomputes the rollup buckets holding it.
  void store(int64_t rank, int64_t step, int attempt, double t, bool restored,
             const std::map<std::string, double>& metrics, RollupAccumulator& rollups);
  // A restored bucket's rollups of every custom metric, from the rows (the caller deleted them).
  void recomputeBucket(int64_t rank, int64_t width, int64_t bucket);
  // Logs each new refusal warning under `attempt`, and rewrites the ones whose count grew.
  void writeWarnings(int attempt);

  std::size_t storedNames() const { return ids_.size(); }

 private:
  struct Warning {
    std::string what;     // the message without its count
    double t = 0;         // when the first refused point came
    int64_t points = 0;   // refused so far
    int64_t rowid = 0;    // its `logs` row, once written
    bool changed = true;  // since the last writeWarnings
  };

  // The metric id of an accepted name, registering a new one while the run has room; nothing (a
  // refusal counted) for a name past the bounds.
  std::optional<int64_t> acceptedId(const std::string& name, double t);
  void refuse(const std::string& key, std::string what, double t);

  Database& database_;
  int64_t run_id_;
  Statement insert_, erase_, name_insert_, name_select_, recompute_, log_insert_, log_update_;
  std::map<std::string, int64_t> ids_;       // the run's custom names
  std::map<std::string, Warning> warnings_;  // by kind ("name:<problem>", "limit", "value:<name>")
};

}  // namespace ringmaster::storage
