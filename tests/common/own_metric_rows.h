// A run's own metric (issue 33: a name outside the step record, as `ringmaster.log(step, **m)`
// writes it) stored as rows of the generic tables the series query reads: its `metrics` row, a
// `scalars` row per point and the `scalar_rollups` of every width. It stands in for the
// recorder's own path for such names in the front ends' tests; a point's value and step are the
// caller's, nothing is checked; written again, the same rows are replaced.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "db/database.h"
#include "db/series_summary.h"
#include "db/statement.h"

namespace ringmaster::testing {

// points: (step, value), ascending steps, each step once.
inline void writeOwnMetric(storage::Database& db, int64_t run_id, const std::string& name, int rank,
                           const std::vector<std::pair<int64_t, double>>& points) {
  db.transaction([&] {
    storage::Statement(db, "INSERT OR IGNORE INTO metrics (name) VALUES (?)").bind(1, name).run();
    storage::Statement id(db, "SELECT id FROM metrics WHERE name = ?");
    id.bind(1, name);
    id.run();
    const int64_t metric_id = id.columnInt(0);
    id.reset();
    storage::Statement point(
        db,
        "INSERT OR REPLACE INTO scalars (run_id, metric_id, rank, step, value, attempt) "
        "VALUES (?, ?, ?, ?, ?, 0)");
    for (const auto& [step, value] : points) {
      point.bind(1, run_id).bind(2, metric_id).bind(3, int64_t{rank});
      point.bind(4, step).bind(5, value).run();
    }
    storage::Statement rollup(
        db,
        "INSERT OR REPLACE INTO scalar_rollups (run_id, metric_id, rank, width, bucket, "
        "n, sum, min, max, first_step, last_step, last_value) VALUES (?, ?, "
        "?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (int64_t width : storage::kRollupWidths) {
      std::map<int64_t, storage::SeriesSummary> buckets;
      for (const auto& [step, value] : points) buckets[step / width].add(step, value);
      for (const auto& [bucket, s] : buckets) {
        rollup.bind(1, run_id).bind(2, metric_id).bind(3, int64_t{rank}).bind(4, width);
        rollup.bind(5, bucket).bind(6, s.count).bind(7, s.sum).bind(8, s.min).bind(9, s.max);
        rollup.bind(10, s.first_step).bind(11, s.last_step).bind(12, s.last_value).run();
      }
    }
  });
}

}  // namespace ringmaster::testing
