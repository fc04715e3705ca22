// Series reduction: a bucket grid aligned to the rollup width it reads, the partial rollup buckets
// at either end of the range read as points, and everything merged with SeriesSummary::merge.
#include "query/series.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "db/statement.h"
#include "db/step_columns.h"

namespace ringmaster::storage {

namespace {

// A metric's identity and where its points are: a step event's field is a column of `steps`, any
// other metric rows of `scalars`. Its rollups are keyed by the metric's id either way.
struct MetricSource {
  int64_t id = 0;
  std::string points_sql;  // ?1 run, ?2 metric id (scalars only), ?3 rank, ?4..?5 the steps
};

std::optional<MetricSource> metricSource(const Database& db, const std::string& name) {
  Statement select(db, "SELECT id FROM metrics WHERE name = ?");
  select.bind(1, name);
  if (!select.run()) return std::nullopt;
  MetricSource source{.id = select.columnInt(0)};
  select.reset();
  if (isStepColumn(name)) {  // a fixed column name, never the caller's text
    source.points_sql = fmt::format(
        "SELECT step, {0} FROM steps WHERE run_id = ?1 AND rank = ?3 AND step BETWEEN ?4 AND ?5 "
        "AND {0} IS NOT NULL",
        name);
  } else {
    source.points_sql =
        "SELECT step, value FROM scalars WHERE run_id = ?1 AND metric_id = ?2 AND rank = ?3 AND "
        "step BETWEEN ?4 AND ?5";
  }
  return source;
}

struct Extent {
  int64_t first = 0, last = -1;
  bool empty() const { return last < first; }
};

// The first and last step of a rank's series, from its narrowest rollups (written in the same
// transaction as the points): two index seeks whichever table holds the points.
Extent stepExtent(const Database& db, int64_t run_id, int64_t metric_id, int rank) {
  Statement select(db,
                   "SELECT (SELECT first_step FROM scalar_rollups WHERE run_id = ?1 AND "
                   "metric_id = ?2 AND rank = ?3 AND width = ?4 ORDER BY bucket LIMIT 1), "
                   "(SELECT last_step FROM scalar_rollups WHERE run_id = ?1 AND metric_id = ?2 "
                   "AND rank = ?3 AND width = ?4 ORDER BY bucket DESC LIMIT 1)");
  select.bind(1, run_id).bind(2, metric_id).bind(3, rank).bind(4, kRollupWidths[0]);
  Extent extent;
  if (select.run() && !select.isNull(0)) extent = {select.columnInt(0), select.columnInt(1)};
  select.reset();
  return extent;
}

// Buckets [base + i * width, base + (i + 1) * width) for i < count, covering [first, last]. When
// rollup_width > 0 the width is a multiple of it and the base aligned to it, so every rollup
// bucket falls inside one grid bucket.
struct Grid {
  int64_t first = 0, last = 0;  // the steps to read
  int64_t base = 0, width = 1, count = 0;
  int64_t rollup_width = 0;  // 0: read points only

  int64_t indexOf(int64_t step) const { return (step - base) / width; }
};

Grid makeGrid(int64_t first, int64_t last, int buckets) {
  Grid grid{.first = first, .last = last};
  const int64_t n = std::max(1, buckets);
  const int64_t span = last - first + 1;
  const int64_t wanted = (span + n - 1) / n;
  for (int64_t width : kRollupWidths)
    if (width <= wanted) grid.rollup_width = width;
  if (grid.rollup_width == 0) {
    grid.base = first;
    grid.width = wanted;
  } else {
    const int64_t w = grid.rollup_width;
    grid.base = first / w * w;
    grid.width = (wanted + w - 1) / w * w;
    while ((last - grid.base) / grid.width + 1 > n) grid.width += w;
  }
  grid.count = (last - grid.base) / grid.width + 1;
  return grid;
}

void readPoints(const Database& db, int64_t run_id, const MetricSource& metric, int rank,
                int64_t first, int64_t last, const Grid& grid, std::vector<SeriesSummary>& into) {
  if (last < first) return;
  Statement select(db, metric.points_sql);
  select.bind(1, run_id).bind(2, metric.id).bind(3, rank).bind(4, first).bind(5, last);
  while (select.run()) {
    const int64_t step = select.columnInt(0);
    into[static_cast<size_t>(grid.indexOf(step))].add(step, select.columnDouble(1));
  }
}

// Adds one rank's points in [grid.first, grid.last] to `into` (grid.count summaries).
void readRank(const Database& db, int64_t run_id, const MetricSource& metric, int rank,
              const Grid& grid, std::vector<SeriesSummary>& into) {
  const int64_t w = grid.rollup_width;
  if (w == 0) {
    readPoints(db, run_id, metric, rank, grid.first, grid.last, grid, into);
    return;
  }
  // Rollup buckets wholly inside the range; the partial ones at the ends are read as points.
  const int64_t first_bucket = (grid.first + w - 1) / w;
  const int64_t last_bucket = (grid.last + 1) / w - 1;
  if (first_bucket > last_bucket) {
    readPoints(db, run_id, metric, rank, grid.first, grid.last, grid, into);
    return;
  }
  readPoints(db, run_id, metric, rank, grid.first, first_bucket * w - 1, grid, into);
  readPoints(db, run_id, metric, rank, (last_bucket + 1) * w, grid.last, grid, into);
  Statement select(db,
                   "SELECT bucket, n, sum, min, max, first_step, last_step, last_value FROM "
                   "scalar_rollups WHERE run_id = ? AND metric_id = ? AND rank = ? AND width = ? "
                   "AND bucket BETWEEN ? AND ?");
  select.bind(1, run_id).bind(2, metric.id).bind(3, rank).bind(4, w);
  select.bind(5, first_bucket).bind(6, last_bucket);
  while (select.run()) {
    const SeriesSummary summary{.count = select.columnInt(1),
                                .sum = select.columnDouble(2),
                                .min = select.columnDouble(3),
                                .max = select.columnDouble(4),
                                .first_step = select.columnInt(5),
                                .last_step = select.columnInt(6),
                                .last_value = select.columnDouble(7)};
    into[static_cast<size_t>(grid.indexOf(select.columnInt(0) * w))].merge(summary);
  }
}

// The grid spans the range asked for (the series' own first / last step where the range is left
// open), so series of several runs or ranks asked for the same range share one grid; only the
// steps that exist are read.
std::optional<Grid> gridFor(Extent extent, const SeriesRange& range) {
  if (extent.empty()) return std::nullopt;
  const int64_t grid_first = range.from_step == 0 ? extent.first : range.from_step;
  const int64_t grid_last =
      range.to_step == std::numeric_limits<int64_t>::max() ? extent.last : range.to_step;
  if (grid_last < grid_first) return std::nullopt;
  Grid grid = makeGrid(grid_first, grid_last, range.buckets);
  grid.first = std::max(grid_first, extent.first);
  grid.last = std::min(grid_last, extent.last);
  if (grid.last < grid.first) return std::nullopt;
  return grid;
}

}  // namespace

Series loadSeries(const Database& db, int64_t run_id, const std::string& metric, int rank,
                  const SeriesRange& range) {
  Series series;
  const std::optional<MetricSource> source = metricSource(db, metric);
  if (!source) return series;
  const std::optional<Grid> grid = gridFor(stepExtent(db, run_id, source->id, rank), range);
  if (!grid) return series;
  std::vector<SeriesSummary> buckets(static_cast<size_t>(grid->count));
  readRank(db, run_id, *source, rank, *grid, buckets);
  series.bucket_width = grid->width;
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (!buckets[i].empty())
      series.buckets.push_back({grid->base + static_cast<int64_t>(i) * grid->width, buckets[i]});
  }
  return series;
}

Band loadRankBand(const Database& db, int64_t run_id, const std::string& metric,
                  const SeriesRange& range) {
  Band band;
  const std::optional<MetricSource> source = metricSource(db, metric);
  if (!source) return band;
  Statement world(db, "SELECT world_size FROM runs WHERE id = ?");
  world.bind(1, run_id);
  const int world_size = world.run() ? static_cast<int>(world.columnInt(0)) : 0;
  world.reset();

  Extent all;
  std::vector<int> ranks;
  for (int rank = 0; rank < world_size; ++rank) {
    const Extent extent = stepExtent(db, run_id, source->id, rank);
    if (extent.empty()) continue;
    ranks.push_back(rank);
    all = all.empty() ? extent
                      : Extent{std::min(all.first, extent.first), std::max(all.last, extent.last)};
  }
  const std::optional<Grid> grid = gridFor(all, range);
  if (!grid) return band;
  std::vector<std::vector<SeriesSummary>> per_rank;
  for (int rank : ranks) {
    per_rank.emplace_back(static_cast<size_t>(grid->count));
    readRank(db, run_id, *source, rank, *grid, per_rank.back());
  }
  band.bucket_width = grid->width;
  std::vector<double> means;
  for (size_t i = 0; i < static_cast<size_t>(grid->count); ++i) {
    BandBucket bucket{.start = grid->base + static_cast<int64_t>(i) * grid->width};
    SeriesSummary envelope;
    means.clear();
    for (const auto& buckets : per_rank) {
      if (buckets[i].empty()) continue;
      envelope.merge(buckets[i]);
      means.push_back(buckets[i].mean());
    }
    if (means.empty()) continue;
    const auto middle = means.begin() + static_cast<std::ptrdiff_t>(means.size() / 2);
    std::nth_element(means.begin(), middle, means.end());
    double median = *middle;
    if (means.size() % 2 == 0) median = (median + *std::max_element(means.begin(), middle)) / 2;
    bucket.min = envelope.min;
    bucket.max = envelope.max;
    bucket.median = median;
    bucket.ranks = static_cast<int>(means.size());
    band.buckets.push_back(bucket);
  }
  return band;
}

SeriesSummary summarizeSeries(const Database& db, int64_t run_id, const std::string& metric,
                              int rank) {
  SeriesSummary total;
  for (const SeriesBucket& bucket : loadSeries(db, run_id, metric, rank, {.buckets = 1}).buckets)
    total.merge(bucket.summary);
  return total;
}

}  // namespace ringmaster::storage
