// `compare --metric NAME`: one metric of several runs overlaid on one grid of steps (rank 0's
// series of each, reduced to the same buckets, and its last point), as a table or as JSON; and the
// line of `show` that lists a run's metrics. Any metric the runs recorded: a step field or a
// custom one (`ringmaster.log(step, **metrics)`).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "db/database.h"
#include "query/series.h"

namespace ringmaster::cli {

struct MetricOverlay {
  struct RunSeries {
    int64_t run_id = 0;
    storage::SeriesSummary whole;  // every point of rank 0's series (count 0: none)
    storage::Series series;        // on the grid shared by every run
  };
  std::string metric;
  std::vector<RunSeries> runs;  // in the order asked for
};

// Rank 0's series of `metric` in each run, over the steps of the longest, in `buckets` buckets.
// Throws kInvalidArgument when no run recorded the metric, naming the metrics they did record.
MetricOverlay loadMetricOverlay(const storage::Database& db, const std::vector<int64_t>& run_ids,
                                const std::string& metric, int buckets);

// {"metric", "rank": 0, "runs": [{"run", "points", "last_step", "last", "series": [{"start",
// "mean", "min", "max", "last"}]}]}; last_step and last are null for a run without the metric.
nlohmann::json overlayJson(const MetricOverlay& overlay);

// The metric's buckets as a table (a column per run, headed as `run_headers`), then its last
// value in each run.
void printOverlay(const MetricOverlay& overlay, const std::vector<std::string>& run_headers,
                  std::FILE* out);

// "Metrics (N): grad_norm, loss, ..., train/grad_norm" for `show`.
void printMetricNames(const std::vector<std::string>& metrics, std::FILE* out);

}  // namespace ringmaster::cli
