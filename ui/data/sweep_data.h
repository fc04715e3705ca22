// A sweep as the desktop's sweep view shows it (issue 37): its report
// (storage/query/sweep_report.h) read on a worker thread, with the report's axes read back into
// comparison axes (query/compare_axes.h) for the scatter and the parallel-coordinates chart.
// Qt-free; nothing here formats or draws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "query/compare_axes.h"

namespace ringmaster::ui {

struct SweepData {
  nlohmann::json report;                      // sweepReport's JSON
  std::string rank_by;                        // the figure the best run was chosen by
  std::vector<std::string> fields;            // the swept fields, in the plan's order
  std::vector<int64_t> runs;                  // the axes' runs: the members that have one, in order
  std::vector<storage::ComparisonAxis> axes;  // each swept field, then every run figure

  // The axis of a swept field or a run figure; nullptr for neither.
  const storage::ComparisonAxis* axis(std::string_view key) const;
  // The sweep still runs, or a member's run is still going: its figures may change.
  bool live() const;
};

// toJson(ComparisonAxis) read back.
storage::ComparisonAxis axisFromJson(const nlohmann::json& axis);

// The sweep's report with the best run by `rank_by` (a run figure's id; "" for the final loss).
// `reconcile` first marks a sweep whose driver died interrupted (storage's
// reconcileInterruptedSweeps with session::sweepDriverRuns), as the run list does for runs. Throws
// what storage throws (an unknown sweep, a figure that is not a run figure, an unreadable
// database).
SweepData loadSweepData(const std::string& db_path, int64_t sweep_id, const std::string& rank_by,
                        double now, bool reconcile);

// The same from a report already read.
SweepData sweepDataFromReport(nlohmann::json report, std::string rank_by);

}  // namespace ringmaster::ui
