// Scalar series reduced to at most N buckets for a step range, each bucket carrying min, max, mean
// and last, so a spike always survives however far the series is reduced (unlike sampling). Long
// ranges are read from scalar_rollups rather than point by point: a 1M-step series reduced to
// 2,000 buckets reads about 16,000 summaries.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/database.h"
#include "db/series_summary.h"

namespace ringmaster::storage {

// Any range may be asked for; steps below 0 (only a hand-edited database holds them) are never
// read, and from_step <= 0 means from the series' first step.
struct SeriesRange {
  int64_t from_step = 0;                                  // inclusive
  int64_t to_step = std::numeric_limits<int64_t>::max();  // inclusive
  int buckets = 1000;  // at most this many buckets come back (at least 1)
};

// One bucket: the steps [start, start + width) of the grid, summarised. Empty buckets (no point in
// them) are left out.
struct SeriesBucket {
  int64_t start = 0;
  SeriesSummary summary;
};

struct Series {
  // Steps per bucket. 2^63 - 1 stands for 2^63: one bucket over every step [0, 2^63 - 1].
  int64_t bucket_width = 1;
  std::vector<SeriesBucket> buckets;

  // The last step of the bucket that starts at `start`: start + bucket_width - 1, at most
  // 2^63 - 1, computed without overflow.
  int64_t lastStepOf(int64_t start) const {
    constexpr int64_t kLastStep = std::numeric_limits<int64_t>::max();
    int64_t last = 0;
    if (bucket_width == kLastStep || __builtin_add_overflow(start, bucket_width - 1, &last))
      return kLastStep;
    return last;
  }
};

// One rank's series of `metric`. Unknown metric or rank: an empty series.
Series loadSeries(const Database& db, int64_t run_id, const std::string& metric, int rank,
                  const SeriesRange& range = {});

// One metric of one run read rank after rank, its statements prepared once: for loops over a
// run's ranks (16,384 of them in bench/scale_bench), where preparing them for every rank had cost
// a quarter of the time. load and summarize answer as loadSeries and summarizeSeries.
class SeriesReader {
 public:
  SeriesReader(const Database& db, int64_t run_id, const std::string& metric);
  ~SeriesReader();
  SeriesReader(const SeriesReader&) = delete;
  SeriesReader& operator=(const SeriesReader&) = delete;

  Series load(int rank, const SeriesRange& range = {});
  SeriesSummary summarize(int rank);

  struct Statements;  // series.cpp

 private:
  int64_t run_id_;
  std::unique_ptr<Statements> statements_;  // none for a metric the database does not know
};

// Across ranks, per bucket: the lowest min, the median of the ranks' means and the highest max.
struct BandBucket {
  int64_t start = 0;
  double min = 0, median = 0, max = 0;
  int ranks = 0;  // ranks with points in the bucket
};
struct Band {
  int64_t bucket_width = 1;
  std::vector<BandBucket> buckets;
};
// Every rank of the run (0 .. world_size - 1) on one grid.
Band loadRankBand(const Database& db, int64_t run_id, const std::string& metric,
                  const SeriesRange& range = {});
// The same over some ranks only (a mesh group's: ui/data/rank_groups.h), on their own grid.
Band loadRankBand(const Database& db, int64_t run_id, const std::string& metric,
                  const SeriesRange& range, const std::vector<int>& among);

// The whole series of one rank as one summary (count, mean, min, max, last).
SeriesSummary summarizeSeries(const Database& db, int64_t run_id, const std::string& metric,
                              int rank);

}  // namespace ringmaster::storage
