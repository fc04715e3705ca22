// Loads a RunSnapshot: the run's report (query/run_report.h) and what only the views show.
#include "data/run_snapshot.h"

#include "db/database.h"
#include "db/step_columns.h"
#include "telemetry/writer.h"

namespace ringmaster::ui {

namespace {

WaitHeatMap loadWaitHeatMap(const storage::Database& db, const storage::RunRecord& run,
                            int buckets) {
  WaitHeatMap map;
  storage::SeriesRange range;
  range.buckets = std::max(buckets, 1);
  std::vector<storage::Series> per_rank;
  int64_t width = 1;
  for (int rank = 0; rank < run.world_size; ++rank) {
    per_rank.push_back(storage::loadSeries(db, run.id, step_field::kExposedCommMs, rank, range));
    width = std::max(width, per_rank.back().bucket_width);
  }
  // The ranks' grids agree (same range, same bucket count) unless a rank has fewer steps; use
  // the widest and place every bucket by its start.
  std::map<int64_t, size_t> column;
  for (const auto& series : per_rank)
    for (const auto& bucket : series.buckets) column.emplace(bucket.start / width * width, 0);
  for (auto& [start, index] : column) {
    index = map.bucket_starts.size();
    map.bucket_starts.push_back(start);
  }
  map.bucket_width = width;
  map.values.assign(per_rank.size(), std::vector<std::optional<double>>(map.bucket_starts.size()));
  for (size_t rank = 0; rank < per_rank.size(); ++rank)
    for (const auto& bucket : per_rank[rank].buckets)
      map.values[rank][column[bucket.start / width * width]] = bucket.summary.mean();
  return map;
}

// The ranks' coordinates on the run's mesh: each as storage recorded it, else by the mesh's order.
std::vector<MeshCoordinates> rankCoordinates(const storage::RunReport& report) {
  const storage::RunRecord& run = report.summary.run;
  const MeshSpec mesh = meshOf(run);
  std::vector<MeshCoordinates> coordinates;
  for (int rank = 0; rank < run.world_size; ++rank)
    coordinates.push_back(meshCoordinates(mesh, rank));
  for (const storage::RankReport& rank : report.ranks) {
    const int r = rank.figures.rank;
    if (rank.record && rank.record->coords && r >= 0 && r < run.world_size)
      coordinates[static_cast<size_t>(r)] = {.dp = rank.record->coords->dp,
                                             .tp = rank.record->coords->tp,
                                             .pp = rank.record->coords->pp};
  }
  return coordinates;
}

}  // namespace

MeshSpec meshOf(const storage::RunRecord& run) {
  const MeshSpec mesh{.dp = run.mesh.dp, .tp = run.mesh.tp, .pp = run.mesh.pp};
  if (mesh.dp >= 1 && mesh.tp >= 1 && mesh.pp >= 1 && mesh.size() == run.world_size) return mesh;
  return MeshSpec{.dp = std::max(run.world_size, 1), .tp = 1, .pp = 1};
}

RunSnapshot loadRunSnapshot(const std::string& db_path, int64_t run_id,
                            const SnapshotRequest& request) {
  storage::Database db(db_path, storage::readingOptions(db_path));
  return loadRunSnapshot(db, run_id, request);
}

RunSnapshot loadRunSnapshot(const storage::Database& db, int64_t run_id,
                            const SnapshotRequest& request) {
  RunSnapshot snapshot;
  snapshot.report = storage::buildRunReport(db, run_id, telemetryNow());
  for (const ChartRequest& chart : request.charts) {
    for (const std::string& metric : chart.metrics) {
      MetricSeries series{metric, {}, std::nullopt};
      if (!chart.band_groups.empty())
        for (const auto& [label, ranks] : chart.band_groups)
          series.group_bands.emplace_back(
              label, storage::loadRankBand(db, run_id, metric, chart.range, ranks));
      else if (chart.ranks.empty())
        series.band = storage::loadRankBand(db, run_id, metric, chart.range);
      else
        for (int rank : chart.ranks)
          series.per_rank[rank] = storage::loadSeries(db, run_id, metric, rank, chart.range);
      snapshot.charts.push_back(std::move(series));
    }
  }
  if (request.comm_by_op)
    snapshot.comm_by_op = storage::commTimeByOp(
        db, run_id, request.comm_by_op->range.from_step, request.comm_by_op->range.to_step,
        request.comm_by_op->range.buckets, request.comm_by_op->rank);
  if (request.wall_clock) {
    snapshot.wall_clock =
        storage::loadSeries(db, run_id, storage::kWallTimeColumn, 0, *request.wall_clock);
    const storage::SeriesSummary all =
        storage::summarizeSeries(db, run_id, storage::kWallTimeColumn, 0);
    snapshot.wall_clock_origin = all.empty() ? snapshot.run().started_at.value_or(0) : all.min;
    if (snapshot.run().started_at && *snapshot.run().started_at <= snapshot.wall_clock_origin)
      snapshot.wall_clock_origin = *snapshot.run().started_at;
  }
  snapshot.wait_map = loadWaitHeatMap(db, snapshot.run(), request.heat_map_buckets);
  snapshot.logs = storage::loadLogs(db, run_id, std::nullopt, request.log_lines);
  snapshot.dumps = storage::loadFlightRecorderDumps(db, run_id);
  snapshot.scheduled_steps = storage::scheduledSteps(db, run_id);
  snapshot.coordinates = rankCoordinates(snapshot.report);
  return snapshot;
}

}  // namespace ringmaster::ui
