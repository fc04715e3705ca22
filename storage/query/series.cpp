// Series reduction: a bucket grid aligned to the rollup width it reads, the partial rollup buckets
// at either end of the range read as points, and everything merged with SeriesSummary::merge.
// The grid's arithmetic is unsigned over the steps [0, 2^63 - 1], so no step a database holds, nor
// any range asked for, can overflow it; negative steps (only a hand-edited database has them) are
// left out.
#include "query/series.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "db/statement.h"
#include "db/step_columns.h"
#include "db/step_rollups.h"

namespace ringmaster::storage {

namespace {

// A metric's identity and where its points and rollups are: a step event's field is a column of
// `steps` with its rollups in `step_rollups`, any other metric rows of `scalars` and of
// `scalar_rollups`, keyed by the metric's id.
struct MetricSource {
  int64_t id = 0;
  std::string points_sql;   // ?1 run, ?2 metric id (scalars only), ?3 rank, ?4..?5 the steps
  std::string rollups_sql;  // (bucket, n, sum, min, max, first, last, last value) of buckets with
                            // points; ?1 run, ?2 metric id, ?3 rank, ?4 width, ?5..?6 the buckets
  std::string extent_sql;   // the series' first and last step; ?1 run, ?2 metric id, ?3 rank,
                            // ?4 width
};

MetricSource stepColumnSource(int64_t id, const std::string& column) {
  // A fixed column name, never the caller's text.
  const std::string n = stepRollupColumn(column, "n");
  const std::string rollups =
      fmt::format("FROM step_rollups WHERE run_id = ?1 AND width = ?4 AND rank = ?3 AND {} > 0", n);
  return {.id = id,
          .points_sql = fmt::format("SELECT step, {0} FROM steps WHERE run_id = ?1 AND rank = ?3 "
                                    "AND step BETWEEN ?4 AND ?5 AND {0} IS NOT NULL",
                                    column),
          .rollups_sql = fmt::format("SELECT bucket, {} {} AND bucket BETWEEN ?5 AND ?6",
                                     stepRollupColumns(column), rollups),
          .extent_sql = fmt::format(
              "SELECT (SELECT {0} {2} ORDER BY bucket LIMIT 1), (SELECT {1} {2} "
              "ORDER BY bucket DESC LIMIT 1)",
              stepRollupColumn(column, "first"), stepRollupColumn(column, "last"), rollups)};
}

MetricSource customMetricSource(int64_t id) {
  const std::string rollups =
      "FROM scalar_rollups WHERE run_id = ?1 AND metric_id = ?2 AND rank = ?3 AND width = ?4";
  return {.id = id,
          .points_sql =
              "SELECT step, value FROM scalars WHERE run_id = ?1 AND metric_id = ?2 AND "
              "rank = ?3 AND step BETWEEN ?4 AND ?5",
          .rollups_sql = "SELECT bucket, n, sum, min, max, first_step, last_step, last_value " +
                         rollups + " AND bucket BETWEEN ?5 AND ?6",
          .extent_sql = fmt::format("SELECT (SELECT first_step {0} ORDER BY bucket LIMIT 1), "
                                    "(SELECT last_step {0} ORDER BY bucket DESC LIMIT 1)",
                                    rollups)};
}

std::optional<MetricSource> metricSource(const Database& db, const std::string& name) {
  Statement select(db, "SELECT id FROM metrics WHERE name = ?");
  select.bind(1, name);
  if (!select.run()) return std::nullopt;
  const int64_t id = select.columnInt(0);
  select.reset();
  return isStepColumn(name) ? stepColumnSource(id, name) : customMetricSource(id);
}

struct Extent {
  int64_t first = 0, last = -1;
  bool empty() const { return last < first; }
};

}  // namespace

// A metric's statements, prepared once for every rank a query reads: a loop over 16,384 ranks
// had spent a quarter of its time preparing the same three statements again.
struct SeriesReader::Statements {
  Statements(const Database& db, const MetricSource& source)
      : id(source.id),
        points(db, source.points_sql),
        rollups(db, source.rollups_sql),
        extent(db, source.extent_sql) {}
  int64_t id;
  Statement points, rollups, extent;
};

namespace {

constexpr int64_t kLastStep = std::numeric_limits<int64_t>::max();

// The first and last step of a rank's series, from its widest rollups (written in the same
// transaction as the points): the first bucket holds the first step, the last the last.
Extent stepExtent(SeriesReader::Statements& metric, int64_t run_id, int rank) {
  Statement& select = metric.extent;
  select.bind(1, run_id).bind(2, metric.id).bind(3, rank);
  select.bind(4, kRollupWidths[std::size(kRollupWidths) - 1]);
  Extent extent;
  if (select.run() && !select.isNull(0) && !select.isNull(1))
    extent = {std::max<int64_t>(0, select.columnInt(0)), select.columnInt(1)};
  select.reset();
  return extent;
}

// Buckets [base + i * width, base + (i + 1) * width) for i < count, covering [first, last], with
// 0 <= base <= first <= last <= 2^63 - 1. When rollup_width > 0 the width is a multiple of it and
// the base aligned to it, so every rollup bucket falls inside one grid bucket. Unsigned: a width
// may be 2^63 (one bucket over every step).
struct Grid {
  int64_t first = 0, last = 0;  // the steps to read
  uint64_t base = 0, width = 1, count = 0;
  uint64_t rollup_width = 0;  // 0: read points only

  // The bucket of a step, or nullopt when the step is outside the grid (a row a hand-edited
  // database holds that contradicts the query that found it).
  std::optional<size_t> indexOf(int64_t step) const {
    if (step < first || step > last) return std::nullopt;
    const uint64_t index = (static_cast<uint64_t>(step) - base) / width;
    return index < count ? std::optional<size_t>(index) : std::nullopt;
  }
  // The first step of bucket i (i < count), which is at most `last`.
  int64_t startOf(size_t i) const { return static_cast<int64_t>(base + i * width); }
};

// 0 <= first <= last.
Grid makeGrid(int64_t first, int64_t last, int buckets) {
  Grid grid{.first = first, .last = last};
  const uint64_t n = static_cast<uint64_t>(std::max(1, buckets));
  const uint64_t span_less_one = static_cast<uint64_t>(last) - static_cast<uint64_t>(first);
  const uint64_t wanted = span_less_one / n + 1;  // >= ceil(span / n), no overflow
  for (int64_t width : kRollupWidths)
    if (static_cast<uint64_t>(width) <= wanted) grid.rollup_width = static_cast<uint64_t>(width);
  const uint64_t w = std::max<uint64_t>(grid.rollup_width, 1);
  grid.base = static_cast<uint64_t>(first) / w * w;
  // The narrowest multiple of w for which n buckets from base reach last.
  const uint64_t reach = (static_cast<uint64_t>(last) - grid.base) / n + 1;
  grid.width = (reach - 1) / w * w + w;
  grid.count = (static_cast<uint64_t>(last) - grid.base) / grid.width + 1;
  return grid;
}

void readPoints(SeriesReader::Statements& metric, int64_t run_id, int rank, int64_t first,
                int64_t last, const Grid& grid, std::vector<SeriesSummary>& into) {
  if (last < first) return;
  Statement& select = metric.points;
  select.bind(1, run_id).bind(2, metric.id).bind(3, rank).bind(4, first).bind(5, last);
  while (select.run()) {
    const int64_t step = select.columnInt(0);
    if (const std::optional<size_t> index = grid.indexOf(step))
      into[*index].add(step, select.columnDouble(1));
  }
}

// Adds one rank's points in [grid.first, grid.last] to `into` (grid.count summaries).
void readRank(SeriesReader::Statements& metric, int64_t run_id, int rank, const Grid& grid,
              std::vector<SeriesSummary>& into) {
  const uint64_t w = grid.rollup_width;
  if (w == 0) {
    readPoints(metric, run_id, rank, grid.first, grid.last, grid, into);
    return;
  }
  // Rollup buckets wholly inside the range, [first_bucket, last_bucket) (unsigned: last + 1 may
  // be 2^63); the partial ones at the ends are read as points.
  const uint64_t first_bucket = (static_cast<uint64_t>(grid.first) + w - 1) / w;
  const uint64_t last_bucket = (static_cast<uint64_t>(grid.last) + 1) / w;
  if (first_bucket >= last_bucket) {
    readPoints(metric, run_id, rank, grid.first, grid.last, grid, into);
    return;
  }
  readPoints(metric, run_id, rank, grid.first, static_cast<int64_t>(first_bucket * w) - 1, grid,
             into);
  if (last_bucket * w - 1 < static_cast<uint64_t>(grid.last))
    readPoints(metric, run_id, rank, static_cast<int64_t>(last_bucket * w), grid.last, grid, into);
  Statement& select = metric.rollups;
  select.bind(1, run_id).bind(2, metric.id).bind(3, rank).bind(4, static_cast<int64_t>(w));
  select.bind(5, static_cast<int64_t>(first_bucket)).bind(6, static_cast<int64_t>(last_bucket) - 1);
  while (select.run()) {
    // A rollup row counts at least one point, inside its bucket (a hand-edited one may not).
    const auto bucket = static_cast<uint64_t>(select.columnInt(0));
    const auto bucket_first = static_cast<int64_t>(bucket * w);
    const auto bucket_last = static_cast<int64_t>(bucket * w + (w - 1));
    if (select.columnInt(1) < 1) continue;
    const SeriesSummary summary{
        .count = select.columnInt(1),
        .sum = select.columnDouble(2),
        .min = select.columnDouble(3),
        .max = select.columnDouble(4),
        .first_step = std::clamp(select.columnInt(5), bucket_first, bucket_last),
        .last_step = std::clamp(select.columnInt(6), bucket_first, bucket_last),
        .last_value = select.columnDouble(7)};
    // The bucket is in [first_bucket, last_bucket), so its steps are steps of the grid.
    if (const std::optional<size_t> index = grid.indexOf(bucket_first)) into[*index].merge(summary);
  }
}

// The grid spans the range asked for (the series' own first / last step where the range is left
// open), so series of several runs or ranks asked for the same range share one grid; only the
// steps that exist are read.
std::optional<Grid> gridFor(Extent extent, const SeriesRange& range) {
  if (extent.empty()) return std::nullopt;
  const int64_t grid_first = range.from_step <= 0 ? extent.first : range.from_step;
  const int64_t grid_last = range.to_step == kLastStep ? extent.last : range.to_step;
  if (grid_last < grid_first) return std::nullopt;
  Grid grid = makeGrid(grid_first, grid_last, range.buckets);
  grid.first = std::max(grid_first, extent.first);
  grid.last = std::min(grid_last, extent.last);
  if (grid.last < grid.first) return std::nullopt;
  return grid;
}

}  // namespace

SeriesReader::SeriesReader(const Database& db, int64_t run_id, const std::string& metric)
    : run_id_(run_id) {
  if (const std::optional<MetricSource> source = metricSource(db, metric))
    statements_ = std::make_unique<Statements>(db, *source);
}

SeriesReader::~SeriesReader() = default;

Series SeriesReader::load(int rank, const SeriesRange& range) {
  Series series;
  if (!statements_) return series;
  const std::optional<Grid> grid = gridFor(stepExtent(*statements_, run_id_, rank), range);
  if (!grid) return series;
  std::vector<SeriesSummary> buckets(static_cast<size_t>(grid->count));
  readRank(*statements_, run_id_, rank, *grid, buckets);
  series.bucket_width = static_cast<int64_t>(std::min<uint64_t>(grid->width, kLastStep));
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (!buckets[i].empty()) series.buckets.push_back({grid->startOf(i), buckets[i]});
  }
  return series;
}

Band loadRankBand(const Database& db, int64_t run_id, const std::string& metric,
                  const SeriesRange& range) {
  Statement world(db, "SELECT world_size FROM runs WHERE id = ?");
  world.bind(1, run_id);
  const int world_size = world.run() ? static_cast<int>(world.columnInt(0)) : 0;
  world.reset();
  std::vector<int> every_rank(static_cast<size_t>(std::max(world_size, 0)));
  for (int rank = 0; rank < world_size; ++rank) every_rank[static_cast<size_t>(rank)] = rank;
  return loadRankBand(db, run_id, metric, range, every_rank);
}

Band loadRankBand(const Database& db, int64_t run_id, const std::string& metric,
                  const SeriesRange& range, const std::vector<int>& among) {
  Band band;
  const std::optional<MetricSource> source = metricSource(db, metric);
  if (!source) return band;
  SeriesReader::Statements statements(db, *source);
  Extent all;
  std::vector<int> ranks;
  for (int rank : among) {
    const Extent extent = stepExtent(statements, run_id, rank);
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
    readRank(statements, run_id, rank, *grid, per_rank.back());
  }
  band.bucket_width = static_cast<int64_t>(std::min<uint64_t>(grid->width, kLastStep));
  std::vector<double> means;
  for (size_t i = 0; i < static_cast<size_t>(grid->count); ++i) {
    BandBucket bucket{.start = grid->startOf(i)};
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

Series loadSeries(const Database& db, int64_t run_id, const std::string& metric, int rank,
                  const SeriesRange& range) {
  return SeriesReader(db, run_id, metric).load(rank, range);
}

SeriesSummary SeriesReader::summarize(int rank) {
  SeriesSummary total;
  for (const SeriesBucket& bucket : load(rank, {.buckets = 1}).buckets) total.merge(bucket.summary);
  return total;
}

SeriesSummary summarizeSeries(const Database& db, int64_t run_id, const std::string& metric,
                              int rank) {
  return SeriesReader(db, run_id, metric).summarize(rank);
}

}  // namespace ringmaster::storage
