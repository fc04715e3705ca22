// SweepData: sweepReport read through its own connection, and its axes parsed back.
#include "data/sweep_data.h"

#include "db/database.h"
#include "query/sweep_report.h"
#include "recorder/sweep_records.h"
#include "sweep/sweep_runner.h"

namespace ringmaster::ui {

const storage::ComparisonAxis* SweepData::axis(std::string_view key) const {
  for (const storage::ComparisonAxis& axis : axes)
    if (axis.key == key) return &axis;
  return nullptr;
}

bool SweepData::live() const {
  const nlohmann::json& sweep = report.value("sweep", nlohmann::json::object());
  return sweep.value("status", "") == "running" ||
         sweep.value("ended", 0) < sweep.value("members", 0);
}

storage::ComparisonAxis axisFromJson(const nlohmann::json& json) {
  storage::ComparisonAxis axis{.key = json.value("key", ""),
                               .name = json.value("name", ""),
                               .unit = json.value("unit", ""),
                               .is_figure = json.value("figure", false),
                               .numeric = json.value("numeric", false),
                               .categories = json.value("categories", std::vector<std::string>{})};
  const nlohmann::json& values = json.value("values", nlohmann::json::array());
  const nlohmann::json& groups = json.value("groups", nlohmann::json::array());
  for (size_t i = 0; i < values.size(); ++i) {
    storage::AxisPoint point;
    const nlohmann::json& value = values[i];
    if (value.is_number()) point.number = value.get<double>();
    if (!value.is_null()) point.text = value.is_string() ? value.get<std::string>() : value.dump();
    if (i < groups.size() && groups[i].is_number_integer()) point.category = groups[i].get<int>();
    axis.points.push_back(std::move(point));
  }
  return axis;
}

SweepData sweepDataFromReport(nlohmann::json report, std::string rank_by) {
  SweepData data{.report = std::move(report), .rank_by = std::move(rank_by)};
  if (data.rank_by.empty()) data.rank_by = "final_loss";
  const nlohmann::json& sweep = data.report.value("sweep", nlohmann::json::object());
  data.fields = sweep.value("fields", std::vector<std::string>{});
  data.runs = data.report.value("runs", std::vector<int64_t>{});
  for (const nlohmann::json& axis : data.report.value("axes", nlohmann::json::array()))
    data.axes.push_back(axisFromJson(axis));
  return data;
}

SweepData loadSweepData(const std::string& db_path, int64_t sweep_id, const std::string& rank_by,
                        double now, bool reconcile) {
  storage::Database db(db_path, storage::readingOptions(db_path));
  if (reconcile) storage::reconcileInterruptedSweeps(db, now, session::sweepDriverRuns);
  return sweepDataFromReport(storage::sweepReport(db, sweep_id, now, rank_by), rank_by);
}

}  // namespace ringmaster::ui
