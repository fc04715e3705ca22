// Loading and printing one metric of several runs on one grid (`compare --metric`).
#include "cli/metric_overlay.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include <fmt/format.h>

#include "cli/terminal.h"
#include "core/display_text.h"
#include "core/error.h"
#include "query/runs.h"

namespace ringmaster::cli {

using nlohmann::json;
using namespace storage;

namespace {

constexpr int kOverlayRank = 0;

json bucketJson(const SeriesBucket& bucket) {
  return {{"start", bucket.start},
          {"mean", bucket.summary.mean()},
          {"min", bucket.summary.min},
          {"max", bucket.summary.max},
          {"last", bucket.summary.last_value}};
}

// Names the first metrics the runs did record: a run may hold hundreds.
[[noreturn]] void throwUnrecorded(const Database& db, const std::vector<int64_t>& run_ids,
                                  const std::string& metric) {
  constexpr size_t kNamed = 12;
  std::set<std::string> recorded;
  for (const int64_t run_id : run_ids)
    for (std::string& name : metricNames(db, run_id)) recorded.insert(std::move(name));
  std::vector<std::string> named(recorded.begin(),
                                 std::next(recorded.begin(), std::min(kNamed, recorded.size())));
  if (recorded.size() > kNamed) named.push_back(fmt::format("... ({} in all)", recorded.size()));
  RM_THROW(kInvalidArgument,
           fmt::format("--metric {}: no run of {} recorded it; they recorded: {} (`ringmaster show "
                       "RUN` lists a run's metrics)",
                       displaySafeLine(metric), fmt::join(run_ids, ", "),
                       named.empty() ? "nothing"
                                     : displaySafeLine(fmt::format("{}", fmt::join(named, ", ")))));
}

}  // namespace

MetricOverlay loadMetricOverlay(const Database& db, const std::vector<int64_t>& run_ids,
                                const std::string& metric, int buckets) {
  MetricOverlay overlay{.metric = metric};
  int64_t last_step = 1;
  bool any = false;
  for (const int64_t run_id : run_ids) {
    MetricOverlay::RunSeries run{.run_id = run_id,
                                 .whole = summarizeSeries(db, run_id, metric, kOverlayRank)};
    if (run.whole.count > 0) {
      any = true;
      last_step = std::max(last_step, run.whole.last_step);
    }
    overlay.runs.push_back(std::move(run));
  }
  if (!any) throwUnrecorded(db, run_ids, metric);
  for (MetricOverlay::RunSeries& run : overlay.runs) {
    if (run.whole.count == 0) continue;
    run.series = loadSeries(db, run.run_id, metric, kOverlayRank,
                            {.from_step = 1, .to_step = last_step, .buckets = buckets});
  }
  return overlay;
}

json overlayJson(const MetricOverlay& overlay) {
  json runs = json::array();
  for (const MetricOverlay::RunSeries& run : overlay.runs) {
    const bool recorded = run.whole.count > 0;
    json series = json::array();
    for (const SeriesBucket& bucket : run.series.buckets) series.push_back(bucketJson(bucket));
    runs.push_back({{"run", run.run_id},
                    {"points", run.whole.count},
                    {"last_step", recorded ? json(run.whole.last_step) : json(nullptr)},
                    {"last", recorded ? json(run.whole.last_value) : json(nullptr)},
                    {"series", std::move(series)}});
  }
  return {{"metric", overlay.metric}, {"rank", kOverlayRank}, {"runs", std::move(runs)}};
}

void printOverlay(const MetricOverlay& overlay, const std::vector<std::string>& run_headers,
                  std::FILE* out) {
  fmt::print(out, "\n{} (rank {}, mean per bucket)\n", displaySafeLine(overlay.metric),
             kOverlayRank);
  std::vector<std::string> headers = {"STEPS"};
  headers.insert(headers.end(), run_headers.begin(), run_headers.end());
  std::vector<size_t> right;
  for (size_t i = 1; i < headers.size(); ++i) right.push_back(i);
  Table table(headers);
  table.alignRight(right);
  const size_t columns = overlay.runs.size();
  std::map<int64_t, std::vector<std::string>> by_start;
  int64_t width = 1;
  for (size_t i = 0; i < columns; ++i) {
    if (!overlay.runs[i].series.buckets.empty()) width = overlay.runs[i].series.bucket_width;
    for (const SeriesBucket& bucket : overlay.runs[i].series.buckets) {
      auto& cells = by_start[bucket.start];
      cells.resize(columns, "-");
      cells[i] = formatNumber(bucket.summary.mean());
    }
  }
  const Series grid{.bucket_width = width};
  for (auto& [start, cells] : by_start) {
    cells.resize(columns, "-");
    std::vector<std::string> row = {fmt::format("{}-{}", start, grid.lastStepOf(start))};
    row.insert(row.end(), cells.begin(), cells.end());
    table.addRow(std::move(row));
  }
  std::vector<std::string> last = {"last"};
  for (const MetricOverlay::RunSeries& run : overlay.runs) {
    last.push_back(
        run.whole.count > 0
            ? fmt::format("{} (step {})", formatNumber(run.whole.last_value), run.whole.last_step)
            : "-");
  }
  table.addRow(std::move(last));
  table.print(out);
}

void printMetricNames(const std::vector<std::string>& metrics, std::FILE* out) {
  if (metrics.empty()) return;
  fmt::print(out, "\nMetrics ({}): {}\n", metrics.size(),
             displaySafeLine(fmt::format("{}", fmt::join(metrics, ", "))));
}

}  // namespace ringmaster::cli
