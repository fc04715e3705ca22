// Issue 31, one chart table (ui/charts/chart_table.h): which charts apply to which run, and the
// table's own consistency (ids unique, metrics where the source needs them).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "charts/chart_table.h"

namespace ringmaster::ui {
namespace {

std::vector<std::string> idsFor(const ChartRunFacts& run) {
  std::vector<std::string> ids;
  for (const ChartSpec* chart : chartsFor(run)) ids.emplace_back(chart->id);
  return ids;
}

bool hasChart(const ChartRunFacts& run, std::string_view id) {
  for (const ChartSpec* chart : chartsFor(run))
    if (chart->id == id) return true;
  return false;
}

TEST(ChartTable, TheLossScaleAppliesOnlyToFp16Runs) {
  EXPECT_TRUE(hasChart({.precision = "fp16"}, "loss-scale"));
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    EXPECT_FALSE(hasChart({.precision = precision}, "loss-scale"));
  }
  // Every other chart applies to every run, in the table's order.
  std::vector<std::string> without_scale;
  for (const ChartSpec& chart : chartTable())
    if (chart.id != "loss-scale") without_scale.emplace_back(chart.id);
  EXPECT_EQ(idsFor({.precision = "fp32"}), without_scale);
  EXPECT_EQ(idsFor({.precision = "fp16"}).size(), chartTable().size());
}

TEST(ChartTable, ARunsFactsComeFromItsSpec) {
  EXPECT_EQ(chartRunFacts(R"({"train": {"precision": "fp16"}})").precision, "fp16");
  EXPECT_EQ(chartRunFacts(R"({"train": {"precision": "bf16", "steps": 3}})").precision, "bf16");
  // fp32 by default: no train section (a program job), no precision, a spec that does not parse.
  for (const char* spec : {R"({"program": {"script": "train.py"}})", R"({"train": {}})",
                           R"({"train": {"precision": 16}})", "not json", ""}) {
    SCOPED_TRACE(spec);
    EXPECT_EQ(chartRunFacts(spec).precision, "fp32");
  }
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
  }
  // The charts both front ends showed before the table (issue 31: their lists disagreed).
  for (std::string_view id :
       {"loss", "step", "comm", "comm-ops", "memory", "device-memory", "lr", "loss-scale"})
    EXPECT_TRUE(ids.contains(id)) << id;
}

TEST(ChartTable, OnlyTheLossChartDrawsTheEvaluations) {
  for (const ChartSpec& chart : chartTable())
    EXPECT_EQ(chart.validation_loss, chart.id == "loss") << chart.id;
}

}  // namespace
}  // namespace ringmaster::ui
