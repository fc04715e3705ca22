// The one table of the charts a run shows, read by both front ends: the desktop's run view builds
// its charts from it, the web page reads it from GET /api/v1/charts. Each chart names its metrics
// (the step events' fields, telemetry/fields.h), its title and unit, what it draws when every rank
// is chosen, and when it applies to a run. Beside the table's curated charts, every other metric a
// run recorded (ringmaster.log's own names) gets a chart of its own, titled by its name; charts
// are grouped into panels by the metric name's prefix before the first '/' ("train/", "eval/"),
// as W&B does. No Qt and no drawing here: how a unit is shown (MiB on the desktop, formatted bytes
// on the web) is each front end's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ringmaster::ui {

// A step metric a chart draws, and its name in a legend ("exposed comm").
struct ChartMetric {
  std::string key;
  std::string label;
};

// Where a chart's lines come from.
enum class ChartSource {
  kStepMetrics,  // the metrics' step series
  kCommByOp,     // the communication events, one line per collective op
};

// What a chart draws when every rank is chosen: a line per rank, or the min / median / max band
// (a chart of several metrics: eight lines of two metrics over four ranks read as noise).
enum class EveryRank { kLinePerRank, kBand };

// When a chart applies to a run.
enum class ChartCondition {
  kAlways,
  // Only where the run recorded one of its metrics: the loss scale only with fp16's loss
  // scaling, tokens/s only for a model with tokens, a gradient norm only where one is reported.
  kRecorded,
};

struct ChartSpec {
  std::string id;     // a stable name: the web page's element is chart-ID
  std::string title;  // "Step time"; a metric's own chart: its name
  std::string unit;   // of the values as recorded: "ms", "bytes", "loss", ...; "" when unknown
  ChartSource source = ChartSource::kStepMetrics;
  std::vector<ChartMetric> metrics;  // empty for kCommByOp; the first drawn solid, the rest dashed
  EveryRank every_rank = EveryRank::kLinePerRank;
  bool validation_loss = false;  // draws the run's evaluations beside, where it has any
  ChartCondition applies_when = ChartCondition::kAlways;
  std::string panel;  // the metric name's prefix ("train"); "" for the default panel
};

// What of a run decides which charts apply: the metrics it recorded (the run report's "metrics",
// storage::metricNames).
struct ChartRunFacts {
  std::vector<std::string> metrics;
  bool recorded(std::string_view metric) const;
};

// The curated charts, in the order the front ends show them (all in the default panel).
const std::vector<ChartSpec>& chartTable();

bool chartApplies(const ChartSpec& chart, const ChartRunFacts& run);

// The charts a run shows, panel by panel: the default panel first (the table's charts that apply,
// in order, then a chart per unprefixed metric of its own, by name), then each prefix's panel by
// name, its metrics' charts by name. A metric of its own is one no table chart draws and that is
// not a step's bookkeeping (notChartedAlone); its chart's id is "metric:" + its name.
std::vector<ChartSpec> chartsFor(const ChartRunFacts& run);

// A metric's panel: its name's prefix before the first '/', or "" (the default panel) when it has
// none.
std::string panelOf(std::string_view metric);

// The default panel's heading ("Charts", as W&B's).
inline constexpr std::string_view kDefaultPanelTitle = "Charts";

// The metrics that get no chart of their own: the wall time (the clock of the charts' time axis),
// and each step's sample and token counts (the figures' samples/s; tokens/s is charted).
bool notChartedAlone(std::string_view metric);

// What a compare view may overlay: the union of the runs' metrics, sorted, without the wall time.
std::vector<std::string> comparableMetrics(const std::vector<std::vector<std::string>>& per_run);

// A metric's name for a chart's title: the table's title of the chart that draws it first
// ("Gradient norm" for grad_norm), else the metric's own name.
std::string metricTitle(std::string_view metric);

// The names of a condition and a rank choice as the API writes them ("always", "recorded";
// "per_rank", "band").
std::string_view conditionName(ChartCondition condition);
std::string_view everyRankName(EveryRank every_rank);

}  // namespace ringmaster::ui
