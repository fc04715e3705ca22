// SeriesSummary: count, sum, min, max and the first and last point of a run of scalar points, the
// unit that scalar_rollups stores per bucket and that series queries return per bucket. Merging
// two summaries gives the summary of both, so buckets can be built from points or from buckets.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace ringmaster::storage {

// The bucket widths, in steps, that scalar_rollups keeps for every series (schema migrations 2
// and 4), narrowest first.
inline constexpr int64_t kRollupWidths[] = {64, 512, 4096};

struct SeriesSummary {
  int64_t count = 0;
  double sum = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  int64_t first_step = std::numeric_limits<int64_t>::max();
  int64_t last_step = std::numeric_limits<int64_t>::min();
  double last_value = 0;  // the value at last_step

  bool empty() const { return count == 0; }
  double mean() const { return count > 0 ? sum / static_cast<double>(count) : 0.0; }

  // merge() of the one-point summary, written out: the recorder adds 57 points a step event.
  void add(int64_t step, double value) {
    if (count < std::numeric_limits<int64_t>::max()) ++count;
    sum += value;
    min = std::min(min, value);
    max = std::max(max, value);
    first_step = std::min(first_step, step);
    if (step >= last_step) {
      last_step = step;
      last_value = value;
    }
  }
  void merge(const SeriesSummary& other) {
    if (other.count == 0) return;
    // Saturating: a count read from a hand-edited database may be anything.
    if (__builtin_add_overflow(count, other.count, &count))
      count = std::numeric_limits<int64_t>::max();
    sum += other.sum;
    min = std::min(min, other.min);
    max = std::max(max, other.max);
    first_step = std::min(first_step, other.first_step);
    if (other.last_step >= last_step) {
      last_step = other.last_step;
      last_value = other.last_value;
    }
  }
};

}  // namespace ringmaster::storage
