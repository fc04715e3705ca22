// Issue 31, one chart table (ui/charts/chart_table.h): which charts apply to which run, and the
// table's own consistency (ids unique, metrics where the source needs them). Issue 33, any metric:
// every metric a run recorded gets a chart, the run's own ones in panels by their name's prefix,
// and the charts of optional series (loss scale, tokens/s, gradient norm) only where recorded.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "charts/chart_table.h"

namespace ringmaster::ui {
namespace {

// What an engine run of an MLP records (storage::metricNames of ddp_mlp): no loss scale.
const std::vector<std::string> kEngineMetrics = {
    "accuracy", "comm_ms", "compute_ms",    "device_mem_used", "exposed_comm_ms", "grad_norm",
    "loss",     "lr",      "mem_allocated", "mem_peak",        "mem_reserved",    "samples",
    "step_ms",  "tokens",  "tokens_per_s",  "wall_time_s"};

std::vector<std::string> idsFor(const ChartRunFacts& run) {
  std::vector<std::string> ids;
  for (const ChartSpec& chart : chartsFor(run)) ids.push_back(chart.id);
  return ids;
}

bool hasChart(const ChartRunFacts& run, std::string_view id) {
  for (const ChartSpec& chart : chartsFor(run))
    if (chart.id == id) return true;
  return false;
}

std::vector<std::string> with(std::vector<std::string> metrics,
                              const std::vector<std::string>& more) {
  metrics.insert(metrics.end(), more.begin(), more.end());
  return metrics;
}

TEST(ChartTable, AnOptionalSeriesChartAppliesOnlyWhereTheRunRecordedIt) {
  // fp16's loss scale, a model's tokens/s, the gradient norm, accuracy, MFU, skipped steps.
  for (const ChartSpec& chart : chartTable()) {
    if (chart.applies_when != ChartCondition::kRecorded) continue;
    SCOPED_TRACE(chart.id);
    EXPECT_FALSE(hasChart({}, chart.id));
    for (const ChartMetric& metric : chart.metrics)
      EXPECT_TRUE(hasChart({.metrics = {metric.key}}, chart.id)) << metric.key;
  }
  EXPECT_FALSE(hasChart({.metrics = kEngineMetrics}, "loss-scale"));
  EXPECT_TRUE(hasChart({.metrics = with(kEngineMetrics, {"loss_scale"})}, "loss-scale"));
  // A program job that logs no tokens: no tokens/s.
  EXPECT_FALSE(hasChart({.metrics = {"loss", "step_ms", "grad_norm"}}, "tokens-per-s"));
  EXPECT_TRUE(hasChart({.metrics = kEngineMetrics}, "tokens-per-s"));
  // grad_norm was stored but charted nowhere before issue 33.
  EXPECT_TRUE(hasChart({.metrics = kEngineMetrics}, "grad-norm"));
  // The others apply to every run, before any step (the desktop says "no data yet").
  std::vector<std::string> always;
  for (const ChartSpec& chart : chartTable())
    if (chart.applies_when == ChartCondition::kAlways) always.push_back(chart.id);
  EXPECT_EQ(idsFor({}), always);
}

TEST(ChartTable, EveryMetricOfItsOwnGetsAChartInItsPrefixsPanel) {
  const ChartRunFacts run{
      .metrics = with(kEngineMetrics, {"train/grad_norm", "eval/acc", "my_custom_thing",
                                       "eval/loss", "a/b/c", "/lead", "zz"})};
  std::vector<std::pair<std::string, std::string>> own;  // panel, title
  for (const ChartSpec& chart : chartsFor(run)) {
    if (!chart.id.starts_with("metric:")) {
      EXPECT_EQ(chart.panel, "") << chart.id;  // the table's charts: the default panel
      continue;
    }
    SCOPED_TRACE(chart.id);
    EXPECT_EQ(chart.id, "metric:" + chart.title);
    ASSERT_EQ(chart.metrics.size(), 1u);
    EXPECT_EQ(chart.metrics[0].key, chart.title);
    EXPECT_EQ(chart.source, ChartSource::kStepMetrics);
    own.emplace_back(chart.panel, chart.title);
  }
  // The default panel's first (after the table's charts), then each panel by name.
  const std::vector<std::pair<std::string, std::string>> expected = {{"", "/lead"},
                                                                     {"", "my_custom_thing"},
                                                                     {"", "zz"},
                                                                     {"a", "a/b/c"},
                                                                     {"eval", "eval/acc"},
                                                                     {"eval", "eval/loss"},
                                                                     {"train", "train/grad_norm"}};
  EXPECT_EQ(own, expected);
  // The table's charts come first, all of them that apply.
  const std::vector<ChartSpec> charts = chartsFor(run);
  EXPECT_EQ(charts.front().id, "loss");
  EXPECT_TRUE(hasChart(run, "grad-norm"));
}

TEST(ChartTable, EveryRecordedMetricIsDrawnByOneChartButTheStepsBookkeeping) {
  const ChartRunFacts run{.metrics = with(kEngineMetrics, {"loss_scale", "skipped", "mfu"})};
  std::set<std::string> drawn;
  for (const ChartSpec& chart : chartsFor(run))
    for (const ChartMetric& metric : chart.metrics) EXPECT_TRUE(drawn.insert(metric.key).second);
  for (const std::string& metric : run.metrics)
    EXPECT_EQ(drawn.contains(metric), !notChartedAlone(metric)) << metric;
  EXPECT_TRUE(notChartedAlone("wall_time_s"));
  EXPECT_FALSE(notChartedAlone("train/tokens"));
}

TEST(ChartTable, APanelIsTheNamesPrefixBeforeTheFirstSlash) {
  EXPECT_EQ(panelOf("train/grad_norm"), "train");
  EXPECT_EQ(panelOf("eval/top1/acc"), "eval");
  EXPECT_EQ(panelOf("my_custom_thing"), "");
  EXPECT_EQ(panelOf("/x"), "");
  EXPECT_EQ(panelOf(""), "");
}

TEST(ChartTable, CompareOffersTheUnionOfTheRunsMetrics) {
  EXPECT_EQ(comparableMetrics({{"loss", "wall_time_s", "eval/acc"}, {"loss", "my_thing"}, {}}),
            (std::vector<std::string>{"eval/acc", "loss", "my_thing"}));
  EXPECT_TRUE(comparableMetrics({}).empty());
  EXPECT_EQ(metricTitle("grad_norm"), "Gradient norm");
  EXPECT_EQ(metricTitle("step_ms"), "Step time");
  EXPECT_EQ(metricTitle("compute_ms"), "compute_ms");  // the step time's second line
  EXPECT_EQ(metricTitle("eval/acc"), "eval/acc");
}

TEST(ChartTable, IdsAreUniqueAndEachSourceHasWhatItDraws) {
  std::set<std::string_view> ids, titles;
  for (const ChartSpec& chart : chartTable()) {
    SCOPED_TRACE(chart.id);
    EXPECT_TRUE(ids.insert(chart.id).second);
    EXPECT_TRUE(titles.insert(chart.title).second);
    EXPECT_FALSE(chart.unit.empty());
    EXPECT_EQ(chart.metrics.empty(), chart.source == ChartSource::kCommByOp);
    // A chart of several metrics draws each as a band when every rank is chosen.
    if (chart.metrics.size() > 1) {
      EXPECT_EQ(chart.every_rank, EveryRank::kBand);
    }
    for (const ChartMetric& metric : chart.metrics) EXPECT_FALSE(metric.label.empty());
    EXPECT_FALSE(chart.id.starts_with("metric:"));  // a run's own metric's chart
  }
  // The charts both front ends showed before the table (issue 31: their lists disagreed), and
  // the gradient norm (issue 33).
  for (std::string_view id : {"loss", "step", "comm", "comm-ops", "memory", "device-memory", "lr",
                              "loss-scale", "grad-norm", "tokens-per-s"})
    EXPECT_TRUE(ids.contains(id)) << id;
}

TEST(ChartTable, OnlyTheLossChartDrawsTheEvaluations) {
  for (const ChartSpec& chart : chartTable())
    EXPECT_EQ(chart.validation_loss, chart.id == "loss") << chart.id;
}

}  // namespace
}  // namespace ringmaster::ui
