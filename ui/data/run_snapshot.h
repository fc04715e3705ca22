// Everything a run view shows, read from the run database in one go: the run and its ranks, the
// summary figures, communication statistics, the chart series at the resolution the charts ask
// for, the communication-wait heat map, logs and flight-recorder dumps. Plain data and no Qt, so
// it is loaded on a worker thread and handed to the GUI thread whole.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "query/comm_stats.h"
#include "query/evals.h"
#include "query/hang.h"
#include "query/run_report.h"
#include "query/runs.h"
#include "query/schedule.h"
#include "query/series.h"
#include "query/summary.h"
#include "spec/mesh_layout.h"
#include "spec/program.h"

namespace ringmaster::ui {

// What the charts ask for: which metrics, over which steps, at how many buckets (their width in
// pixels, so every pixel column gets its min / max), for which ranks; an empty rank list means
// the all-ranks band (min / median / max), or a band per group where groups are given (the
// ranks grouped by a mesh coordinate: data/rank_groups.h).
struct ChartRequest {
  std::vector<std::string> metrics;
  storage::SeriesRange range;
  std::vector<int> ranks;
  std::vector<std::pair<std::string, std::vector<int>>> band_groups;  // label, ranks
};

struct MetricSeries {
  std::string metric;
  std::map<int, storage::Series> per_rank;  // rank -> series, when ranks were asked for
  std::optional<storage::Band> band;        // when no rank and no group was
  std::vector<std::pair<std::string, storage::Band>> group_bands;  // label, band; in request order
};

// Rank x bucket of mean exposed communication per step (ms): a straggler shows as a bright row of
// its peers, a hang as a column that stops.
struct WaitHeatMap {
  int64_t bucket_width = 1;
  std::vector<int64_t> bucket_starts;
  std::vector<std::vector<std::optional<double>>> values;  // [rank][bucket]
  // The last step of the bucket starting at `start`, without overflow (storage::Series's rule).
  int64_t lastStepOf(int64_t start) const {
    return storage::Series{.bucket_width = bucket_width}.lastStepOf(start);
  }
};

// Time per step in each collective, for the "communication time by op" chart.
struct CommByOpRequest {
  storage::SeriesRange range;
  std::optional<int> rank;  // one rank's, else the mean over ranks
};

struct RunSnapshot {
  // The run's report (query/run_report.h): what `ringmaster show` and the web API show of it.
  storage::RunReport report;
  const storage::RunRecord& run() const { return report.summary.run; }
  std::vector<MetricSeries> charts;  // in ChartRequest order
  storage::CommTimeByOp comm_by_op;  // when SnapshotRequest::comm_by_op was set
  WaitHeatMap wait_map;
  std::vector<storage::LogLine> logs;
  std::vector<storage::FlightRecorderDump> dumps;
  // Rank 0's wall time per bucket (`wall_time_s`, seconds since the epoch) when
  // SnapshotRequest::wall_clock was set, and the run's start on the same clock: the recorder's
  // start, or the first step's wall time where that is earlier (a rank's clock ahead of it).
  storage::Series wall_clock;
  double wall_clock_origin = 0;
  std::vector<int64_t> scheduled_steps;  // pipeline runs
  // Each rank's mesh coordinates (dp, tp, pp), by rank, as storage recorded them (its hello's,
  // else the mesh's rank order).
  std::vector<MeshCoordinates> coordinates;
};

// The run's mesh as stored (every dimension at least 1, their product the world size); a stored
// mesh that is not one (a run record read before its ranks said): the world as dp replicas.
MeshSpec meshOf(const storage::RunRecord& run);

struct SnapshotRequest {
  std::vector<ChartRequest> charts;
  std::optional<CommByOpRequest> comm_by_op;
  std::optional<storage::SeriesRange> wall_clock;  // the steps' wall times, for time axes
  int heat_map_buckets = 120;
  int log_lines = 2000;
};

// Opens its own connection (so it can run on any thread). Throws as the storage queries do.
RunSnapshot loadRunSnapshot(const std::string& db_path, int64_t run_id,
                            const SnapshotRequest& request);

// The same, on an open database.
RunSnapshot loadRunSnapshot(const storage::Database& db, int64_t run_id,
                            const SnapshotRequest& request);

}  // namespace ringmaster::ui
