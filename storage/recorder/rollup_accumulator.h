// The rollup buckets (widths kRollupWidths) one batch of the recorder touched, summarised in
// memory so that each bucket is written with one upsert per batch: a custom metric's in
// `scalar_rollups` (RollupAccumulator, a bucket per metric and rank), the step columns' in
// `step_rollups` (StepRollupAccumulator, a bucket per rank holding every column).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <unordered_map>
#include <utility>
#include <vector>

#include "db/series_summary.h"
#include "db/step_columns.h"

namespace ringmaster::storage {

// The buckets a batch touched, per series `Key`. Points of one series arrive in step order, so
// each series keeps one open bucket per width and hands it over when a point falls outside it: one
// hash lookup per point, none per bucket. A bucket handed over twice (steps out of order) is
// merged by the upsert. `Summary` has add(step, point...) and empty().
template <typename Key, typename Summary, typename Hash = std::hash<Key>>
class BucketAccumulator {
 public:
  struct Bucket {
    Key key;
    int64_t width, bucket;
    Summary summary;
  };

  template <typename... Point>
  void add(const Key& key, int64_t step, const Point&... point) {
    OpenBuckets& open = series_[key];
    for (size_t w = 0; w < std::size(kRollupWidths); ++w) {
      const int64_t bucket = step / kRollupWidths[w];
      if (!open.summary[w].empty() && open.bucket[w] != bucket) {
        done_.push_back({key, kRollupWidths[w], open.bucket[w], open.summary[w]});
        open.summary[w] = {};
      }
      open.bucket[w] = bucket;
      open.summary[w].add(step, point...);
    }
  }

  // Every bucket touched since the last call, the open ones included.
  std::vector<Bucket> take() {
    for (auto& [key, open] : series_)
      for (size_t w = 0; w < std::size(kRollupWidths); ++w)
        if (!open.summary[w].empty())
          done_.push_back({key, kRollupWidths[w], open.bucket[w], open.summary[w]});
    series_.clear();
    return std::exchange(done_, {});
  }

 private:
  struct OpenBuckets {
    int64_t bucket[std::size(kRollupWidths)] = {};
    Summary summary[std::size(kRollupWidths)];
  };
  std::unordered_map<Key, OpenBuckets, Hash> series_;
  std::vector<Bucket> done_;
};

struct MetricRank {
  int64_t metric_id, rank;
  bool operator==(const MetricRank&) const = default;
};
struct MetricRankHash {
  size_t operator()(const MetricRank& key) const {
    return std::hash<uint64_t>()(static_cast<uint64_t>(key.metric_id) * 0x9E3779B97F4A7C15ull +
                                 static_cast<uint64_t>(key.rank));
  }
};

// A custom metric's buckets, per (metric, rank).
using RollupAccumulator = BucketAccumulator<MetricRank, SeriesSummary, MetricRankHash>;

// The summaries of every step column over one bucket; a column absent from each of its steps
// (NaN: the field was not sent) stays empty.
struct StepColumnSummaries {
  std::array<SeriesSummary, kStepColumns.size()> columns;

  bool empty() const { return step_count == 0; }
  void add(int64_t step, const std::array<double, kStepColumns.size()>& values) {
    ++step_count;
    for (size_t i = 0; i < values.size(); ++i)
      if (!std::isnan(values[i])) columns[i].add(step, values[i]);
  }

  int64_t step_count = 0;  // step events added, with or without values
};

// The step columns' buckets, per rank.
using StepRollupAccumulator = BucketAccumulator<int64_t, StepColumnSummaries>;

}  // namespace ringmaster::storage
