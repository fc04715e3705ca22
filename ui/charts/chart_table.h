// The one table of the charts a run shows, read by both front ends: the desktop's run view builds
// its charts from it, the web page reads it from GET /api/v1/charts. Each chart names its metrics
// (the step events' fields, telemetry/fields.h), its title and unit, what it draws when every rank
// is chosen, and when it applies to a run. No Qt and no drawing here: how a unit is shown (MiB on
// the desktop, formatted bytes on the web) is each front end's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ringmaster::ui {

// A step metric a chart draws, and its name in a legend ("exposed comm").
struct ChartMetric {
  std::string_view key;
  std::string_view label;
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
  kFp16,  // train.precision fp16: only it scales the loss (a loss scale chart)
};

struct ChartSpec {
  std::string_view id;     // a stable name: the web page's element is chart-ID
  std::string_view title;  // "Step time"
  std::string_view unit;   // of the values as recorded: "ms", "bytes", "loss", ...
  ChartSource source = ChartSource::kStepMetrics;
  std::vector<ChartMetric> metrics;  // empty for kCommByOp; the first drawn solid, the rest dashed
  EveryRank every_rank = EveryRank::kLinePerRank;
  bool validation_loss = false;  // draws the run's evaluations beside, where it has any
  ChartCondition applies_when = ChartCondition::kAlways;
};

// What of a run decides which charts apply.
struct ChartRunFacts {
  std::string precision = "fp32";  // train.precision
};

// Every chart, in the order the front ends show them.
const std::vector<ChartSpec>& chartTable();

// The facts of a run from its spec (runs.spec_json); a spec that does not parse, or a program job
// that names no precision, is fp32.
ChartRunFacts chartRunFacts(std::string_view spec_json);

bool chartApplies(const ChartSpec& chart, const ChartRunFacts& run);

// The charts of chartTable() that apply to the run, in order.
std::vector<const ChartSpec*> chartsFor(const ChartRunFacts& run);

// The names of a condition and a rank choice as the API writes them ("always", "fp16"; "per_rank",
// "band").
std::string_view conditionName(ChartCondition condition);
std::string_view everyRankName(EveryRank every_rank);

}  // namespace ringmaster::ui
