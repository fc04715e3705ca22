// The chart table (chart_table.h) and when each chart applies.
#include "charts/chart_table.h"

#include <nlohmann/json.hpp>

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
       .metrics = {{step_field::kMemAllocated, "allocated"}, {step_field::kMemPeak, "peak"}},
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
      // fp16's dynamic loss scale at each step: a drop is a step skipped on an inf or NaN
      // gradient (fp32 and bf16 scale nothing).
      {.id = "loss-scale",
       .title = "Loss scale",
       .unit = "scale",
       .metrics = {{step_field::kLossScale, "loss scale"}},
       .applies_when = ChartCondition::kFp16},
  };
  return table;
}

ChartRunFacts chartRunFacts(std::string_view spec_json) {
  ChartRunFacts facts;
  const nlohmann::json spec = nlohmann::json::parse(spec_json, nullptr, false);
  if (!spec.is_object()) return facts;
  const nlohmann::json::json_pointer precision("/train/precision");
  if (spec.contains(precision) && spec.at(precision).is_string())
    facts.precision = spec.at(precision).get<std::string>();
  return facts;
}

bool chartApplies(const ChartSpec& chart, const ChartRunFacts& run) {
  switch (chart.applies_when) {
    case ChartCondition::kAlways:
      return true;
    case ChartCondition::kFp16:
      return run.precision == "fp16";
  }
  return false;
}

std::vector<const ChartSpec*> chartsFor(const ChartRunFacts& run) {
  std::vector<const ChartSpec*> charts;
  for (const ChartSpec& chart : chartTable())
    if (chartApplies(chart, run)) charts.push_back(&chart);
  return charts;
}

std::string_view conditionName(ChartCondition condition) {
  return condition == ChartCondition::kFp16 ? "fp16" : "always";
}

std::string_view everyRankName(EveryRank every_rank) {
  return every_rank == EveryRank::kBand ? "band" : "per_rank";
}

}  // namespace ringmaster::ui
