// The chart table (chart_table.h), when each chart applies, and the charts of a run's own metrics
// grouped into panels.
#include "charts/chart_table.h"

#include <algorithm>
#include <map>
#include <set>

#include "db/step_columns.h"
#include "telemetry/fields.h"

namespace ringmaster::ui {

const std::vector<ChartSpec>& chartTable() {
  static const std::vector<ChartSpec> table = {
      {.id = "loss",
       .title = "Loss",
       .unit = "loss",
       .metrics = {{step_field::kLoss, "loss"}},
       .validation_loss = true},
      // The step, and what it was spent on: a pipeline stage's wait for another stage is the gap
      // between the step and its compute plus exposed communication.
      {.id = "step",
       .title = "Step time",
       .unit = "ms",
       .metrics = {{step_field::kStepMs, "step"},
                   {step_field::kComputeMs, "compute"},
                   {step_field::kExposedCommMs, "exposed comm"}},
       .every_rank = EveryRank::kBand},
      {.id = "comm",
       .title = "Communication time",
       .unit = "ms per step",
       .metrics = {{step_field::kCommMs, "communication"}}},
      {.id = "comm-ops",
       .title = "Communication time by op",
       .unit = "ms per step",
       .source = ChartSource::kCommByOp},
      {.id = "memory",
       .title = "Allocator memory",
       .unit = "bytes",
       .metrics = {{step_field::kMemAllocated, "allocated"},
                   {step_field::kMemPeak, "peak"},
                   {step_field::kMemReserved, "reserved"}},
       .every_rank = EveryRank::kBand},
      {.id = "device-memory",
       .title = "Device memory",
       .unit = "bytes",
       .metrics = {{step_field::kDeviceMemUsed, "device memory"}}},
      // optimizer.schedule's value at each step, as the step events report it.
      {.id = "lr",
       .title = "Learning rate",
       .unit = "lr",
       .metrics = {{step_field::kLr, "learning rate"}}},
      // The global gradient norm before clipping.
      {.id = "grad-norm",
       .title = "Gradient norm",
       .unit = "norm",
       .metrics = {{step_field::kGradNorm, "gradient norm"}},
       .applies_when = ChartCondition::kRecorded},
      {.id = "accuracy",
       .title = "Accuracy",
       .unit = "fraction",
       .metrics = {{step_field::kAccuracy, "accuracy"}},
       .applies_when = ChartCondition::kRecorded},
      // Only for a model with tokens: a run without them has no tokens_per_s series.
      {.id = "tokens-per-s",
       .title = "Tokens/s",
       .unit = "tokens/s",
       .metrics = {{step_field::kTokensPerS, "tokens/s"}},
       .applies_when = ChartCondition::kRecorded},
      {.id = "mfu",
       .title = "Model FLOPs utilisation",
       .unit = "fraction of peak",
       .metrics = {{step_field::kMfu, "MFU"}},
       .applies_when = ChartCondition::kRecorded},
      // fp16's dynamic loss scale at each step: a drop is a step skipped on an inf or NaN
      // gradient (fp32 and bf16 scale nothing, and record no loss scale).
      {.id = "loss-scale",
       .title = "Loss scale",
       .unit = "scale",
       .metrics = {{step_field::kLossScale, "loss scale"}},
       .applies_when = ChartCondition::kRecorded},
      {.id = "skipped",
       .title = "Skipped steps",
       .unit = "steps per event",
       .metrics = {{step_field::kSkipped, "skipped"}},
       .applies_when = ChartCondition::kRecorded},
  };
  return table;
}

bool ChartRunFacts::recorded(std::string_view metric) const {
  return std::find(metrics.begin(), metrics.end(), metric) != metrics.end();
}

bool chartApplies(const ChartSpec& chart, const ChartRunFacts& run) {
  switch (chart.applies_when) {
    case ChartCondition::kAlways:
      return true;
    case ChartCondition::kRecorded:
      return std::any_of(chart.metrics.begin(), chart.metrics.end(),
                         [&](const ChartMetric& m) { return run.recorded(m.key); });
  }
  return false;
}

std::string panelOf(std::string_view metric) {
  const size_t slash = metric.find('/');
  return slash == std::string_view::npos ? std::string() : std::string(metric.substr(0, slash));
}

bool notChartedAlone(std::string_view metric) {
  return metric == storage::kWallTimeColumn || metric == step_field::kSamples ||
         metric == step_field::kTokens;
}

namespace {

bool drawnByTheTable(std::string_view metric) {
  for (const ChartSpec& chart : chartTable())
    for (const ChartMetric& m : chart.metrics)
      if (m.key == metric) return true;
  return false;
}

// A metric's own chart: a line per rank, titled by its name, in its prefix's panel.
ChartSpec ownChart(const std::string& metric) {
  return {.id = "metric:" + metric,
          .title = metric,
          .unit = "",
          .metrics = {{metric, metric}},
          .applies_when = ChartCondition::kRecorded,
          .panel = panelOf(metric)};
}

}  // namespace

std::vector<ChartSpec> chartsFor(const ChartRunFacts& run) {
  std::vector<ChartSpec> charts;
  for (const ChartSpec& chart : chartTable())
    if (chartApplies(chart, run)) charts.push_back(chart);
  // The run's own metrics by panel ("" first), each panel's by name.
  std::map<std::string, std::set<std::string>> panels;
  for (const std::string& metric : run.metrics)
    if (!drawnByTheTable(metric) && !notChartedAlone(metric))
      panels[panelOf(metric)].insert(metric);
  for (const auto& [panel, metrics] : panels)
    for (const std::string& metric : metrics) charts.push_back(ownChart(metric));
  return charts;
}

std::vector<std::string> comparableMetrics(const std::vector<std::vector<std::string>>& per_run) {
  std::set<std::string> names;
  for (const std::vector<std::string>& metrics : per_run)
    for (const std::string& metric : metrics)
      if (metric != storage::kWallTimeColumn) names.insert(metric);
  return {names.begin(), names.end()};
}

std::string metricTitle(std::string_view metric) {
  for (const ChartSpec& chart : chartTable())
    if (!chart.metrics.empty() && chart.metrics.front().key == metric) return chart.title;
  return std::string(metric);
}

std::string_view conditionName(ChartCondition condition) {
  return condition == ChartCondition::kRecorded ? "recorded" : "always";
}

std::string_view everyRankName(EveryRank every_rank) {
  return every_rank == EveryRank::kBand ? "band" : "per_rank";
}

}  // namespace ringmaster::ui
