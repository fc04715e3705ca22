// RollupAccumulator: the rollup buckets (scalar_rollups, widths kRollupWidths) one batch of the
// recorder touched, summarised in memory so that each bucket is written with one upsert per batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <unordered_map>
#include <utility>
#include <vector>

#include "db/series_summary.h"

namespace ringmaster::storage {

// The rollup buckets a batch touched. Points of one series arrive in step order, so each series
// keeps one open bucket per width and hands it over when a point falls outside it: one hash lookup
// per point, none per bucket. A bucket handed over twice (steps out of order) is merged by the
// upsert.
class RollupAccumulator {
 public:
  struct Bucket {
    int64_t metric_id, rank, width, bucket;
    SeriesSummary summary;
  };

  void add(int64_t metric_id, int64_t rank, int64_t step, double value) {
    OpenBuckets& open = series_[{metric_id, rank}];
    for (size_t w = 0; w < std::size(kRollupWidths); ++w) {
      const int64_t bucket = step / kRollupWidths[w];
      if (!open.summary[w].empty() && open.bucket[w] != bucket) {
        done_.push_back({metric_id, rank, kRollupWidths[w], open.bucket[w], open.summary[w]});
        open.summary[w] = {};
      }
      open.bucket[w] = bucket;
      open.summary[w].add(step, value);
    }
  }

  // Every bucket touched since the last call, the open ones included.
  std::vector<Bucket> take() {
    for (auto& [key, open] : series_)
      for (size_t w = 0; w < std::size(kRollupWidths); ++w)
        if (!open.summary[w].empty())
          done_.push_back(
              {key.first, key.second, kRollupWidths[w], open.bucket[w], open.summary[w]});
    series_.clear();
    return std::exchange(done_, {});
  }

 private:
  struct OpenBuckets {
    int64_t bucket[std::size(kRollupWidths)] = {};
    SeriesSummary summary[std::size(kRollupWidths)];
  };
  struct SeriesHash {
    size_t operator()(const std::pair<int64_t, int64_t>& key) const {
      return std::hash<uint64_t>()(static_cast<uint64_t>(key.first) * 0x9E3779B97F4A7C15ull +
                                   static_cast<uint64_t>(key.second));
    }
  };
  std::unordered_map<std::pair<int64_t, int64_t>, OpenBuckets, SeriesHash>
      series_;  // by (metric, rank)
  std::vector<Bucket> done_;
};

}  // namespace ringmaster::storage
