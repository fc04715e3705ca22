// The axes of a comparison (issue 33): any run figure of the table of figures (figures.h) or any
// spec field ("optimizer.lr", "strategy.kind"), read from the runs' reports, one value per run.
// A scatter of runs puts one axis on X and one on Y (`ringmaster compare --x --y`, the desktop's
// and the web's compare views); colouring runs by a spec field groups them by its categories.
// A numeric axis is placed by value; any other by category (its distinct values, sorted).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringmaster::storage {

// The spec's fields by path, as spec differences name them: objects by key ("optimizer.lr"),
// arrays of scalars as one field, other arrays by index ("launch.hosts[0].ranks").
std::map<std::string, nlohmann::json> specFields(const nlohmann::json& spec);

struct AxisPoint {
  std::optional<double> number;  // a numeric axis's value; none where the run has none
  std::string text;              // the value as written ("0.001", "adamw"); "" where none
  int category = -1;             // its index in the axis's categories; -1 where none
};

struct ComparisonAxis {
  std::string key;   // "final_loss", "optimizer.lr"
  std::string name;  // the figure's name, or the field's path
  std::string unit;  // the figure's unit; "" for a spec field
  bool is_figure = false;
  bool numeric = false;  // every value a run has is a number
  // The distinct values, numbers by value, others by text.
  std::vector<std::string> categories;
  std::vector<AxisPoint> points;  // one per run, in the runs' order
};

// `reports`: the runs' reports as JSON (toJson(RunReport)); for a spec field only "spec" is read.
// `key`: a run figure's id or a spec field's path; anything else is kInvalidArgument naming the
// figures and some of the fields.
ComparisonAxis comparisonAxis(const std::vector<nlohmann::json>& reports, std::string_view key);

// What an axis can be for these runs: every run figure's id, and every spec field any run has
// (those whose values differ between the runs first, each part sorted by path).
struct AxisChoices {
  std::vector<std::string> figures;
  std::vector<std::string> spec_fields;
  size_t differing_fields = 0;  // spec_fields' first ones, whose values differ
};
AxisChoices axisChoices(const std::vector<nlohmann::json>& reports);

// A report with only the run's stored spec in it (a spec that is not JSON: none), for runs known
// by their records alone (the history list colours them by a spec field).
nlohmann::json specOnlyReport(std::string_view spec_json);

// {"key", "name", "unit", "figure", "numeric", "categories", "values": [number | text | null],
//  "groups": [each run's index in categories | null]}.
nlohmann::json toJson(const ComparisonAxis& axis);

}  // namespace ringmaster::storage
