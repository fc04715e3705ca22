// Comparison axes (compare_axes.h): a figure's values from the reports' JSON keys (the figure's
// id), a spec field's from the flattened stored specs.
#include "query/compare_axes.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "query/figures.h"

namespace ringmaster::storage {

namespace {

using nlohmann::json;

void flattenInto(const json& value, const std::string& path, std::map<std::string, json>& out) {
  if (value.is_object()) {
    for (const auto& [key, child] : value.items())
      flattenInto(child, path.empty() ? key : path + "." + key, out);
    return;
  }
  if (value.is_array() &&
      !std::all_of(value.begin(), value.end(), [](const json& e) { return e.is_primitive(); })) {
    for (size_t i = 0; i < value.size(); ++i)
      flattenInto(value[i], fmt::format("{}[{}]", path, i), out);
    return;
  }
  if (!path.empty()) out[path] = value;
}

// A run figure's value in a report: its key at the top, or in "run" (duration_s).
json figureValue(const json& report, std::string_view id) {
  const std::string key(id);
  if (report.contains(key)) return report[key];
  if (report.contains("run") && report["run"].is_object() && report["run"].contains(key))
    return report["run"][key];
  return nullptr;
}

bool isNumber(const json& value) {
  return value.is_number() && std::isfinite(value.get<double>());
}

std::string textOf(const json& value) {
  if (value.is_null()) return "";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// The values of `key` in each report (null where a run has none), and its name and unit.
std::vector<json> valuesOf(const std::vector<json>& reports, std::string_view key,
                           ComparisonAxis& axis) {
  std::vector<json> values;
  const Figure* figure = findFigure(key);
  if (figure && isRunFigure(*figure)) {
    axis.is_figure = true;
    axis.name = figure->name;
    axis.unit = figure->unit;
    for (const json& report : reports) values.push_back(figureValue(report, key));
    return values;
  }
  bool known = false;
  for (const json& report : reports) {
    const std::map<std::string, json> fields =
        specFields(report.contains("spec") ? report["spec"] : json());
    const auto found = fields.find(std::string(key));
    known = known || found != fields.end();
    values.push_back(found == fields.end() ? json(nullptr) : found->second);
  }
  if (!known) {
    const AxisChoices choices = axisChoices(reports);
    std::vector<std::string> some(
        choices.spec_fields.begin(),
        choices.spec_fields.begin() +
            static_cast<long>(std::min<size_t>(choices.spec_fields.size(),
                                               std::max<size_t>(choices.differing_fields, 6))));
    RM_THROW(kInvalidArgument,
             fmt::format("'{}' is neither a figure nor a spec field of these runs; figures: {}; "
                         "spec fields: {}{}",
                         key, fmt::join(choices.figures, ", "), fmt::join(some, ", "),
                         some.size() < choices.spec_fields.size() ? ", ..." : ""));
  }
  axis.name = std::string(key);
  return values;
}

}  // namespace

std::map<std::string, json> specFields(const json& spec) {
  std::map<std::string, json> fields;
  if (spec.is_object()) flattenInto(spec, "", fields);
  return fields;
}

ComparisonAxis comparisonAxis(const std::vector<json>& reports, std::string_view key) {
  ComparisonAxis axis{.key = std::string(key)};
  const std::vector<json> values = valuesOf(reports, key, axis);
  axis.numeric = std::all_of(values.begin(), values.end(),
                             [](const json& v) { return v.is_null() || isNumber(v); });
  std::map<double, std::string> numbers;
  std::set<std::string> texts;
  for (const json& value : values) {
    AxisPoint point{.text = textOf(value)};
    if (axis.numeric && !value.is_null()) {
      point.number = value.get<double>();
      numbers.emplace(*point.number, point.text);
    } else if (!value.is_null()) {
      texts.insert(point.text);
    }
    axis.points.push_back(std::move(point));
  }
  for (const auto& [number, text] : numbers) axis.categories.push_back(text);
  axis.categories.insert(axis.categories.end(), texts.begin(), texts.end());
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].is_null()) continue;
    AxisPoint& point = axis.points[i];
    const auto at = std::find(axis.categories.begin(), axis.categories.end(),
                              axis.numeric ? numbers.at(*point.number) : point.text);
    point.category = static_cast<int>(at - axis.categories.begin());
  }
  return axis;
}

AxisChoices axisChoices(const std::vector<json>& reports) {
  AxisChoices choices;
  for (const Figure& figure : figureTable())
    if (isRunFigure(figure)) choices.figures.emplace_back(figure.id);
  std::map<std::string, std::vector<json>> by_path;
  for (size_t i = 0; i < reports.size(); ++i) {
    const json& report = reports[i];
    for (auto& [path, value] : specFields(report.contains("spec") ? report["spec"] : json())) {
      std::vector<json>& values = by_path[path];
      values.resize(reports.size());
      values[i] = std::move(value);
    }
  }
  std::vector<std::string> same;
  for (auto& [path, values] : by_path) {
    values.resize(reports.size());
    const bool differ =
        std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) != values.end();
    (differ ? choices.spec_fields : same).push_back(path);
  }
  choices.differing_fields = choices.spec_fields.size();
  choices.spec_fields.insert(choices.spec_fields.end(), same.begin(), same.end());
  return choices;
}

json specOnlyReport(std::string_view spec_json) {
  json spec = json::parse(spec_json, nullptr, /*allow_exceptions=*/false);
  return {{"spec", spec.is_discarded() ? json(nullptr) : spec}};
}

json toJson(const ComparisonAxis& axis) {
  json values = json::array(), groups = json::array();
  for (const AxisPoint& point : axis.points) {
    if (point.category < 0)
      values.push_back(nullptr);
    else
      values.push_back(point.number ? json(*point.number) : json(point.text));
    groups.push_back(point.category < 0 ? json(nullptr) : json(point.category));
  }
  return {{"key", axis.key},          {"name", axis.name},       {"unit", axis.unit},
          {"figure", axis.is_figure}, {"numeric", axis.numeric}, {"categories", axis.categories},
          {"values", values},        {"groups", groups}};
}

}  // namespace ringmaster::storage
