// A sweep's report (query/sweep_report.h): its members with their swept values and run figures,
// read from each run's own report, the comparison axes over those runs, and the best run by a
// figure with what its spec sets differently.
#include "query/sweep_report.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "query/compare_axes.h"
#include "query/figures.h"
#include "query/run_report.h"
#include "query/sweeps.h"

namespace ringmaster::storage {

namespace {

using json = nlohmann::json;

json parsedOr(const std::string& text, json fallback) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? fallback : parsed;
}

// The swept fields, in the plan's order.
std::vector<std::string> sweptFields(const json& plan) {
  std::vector<std::string> fields;
  if (!plan.contains("axes") || !plan["axes"].is_array()) return fields;
  for (const json& axis : plan["axes"])
    if (axis.is_object() && axis.contains("field") && axis["field"].is_string())
      fields.push_back(axis["field"].get<std::string>());
  return fields;
}

std::string requireRankingFigure(std::string_view rank_by) {
  const std::string id = rank_by.empty() ? "final_loss" : std::string(rank_by);
  const Figure* figure = findFigure(id);
  if (figure && isRunFigure(*figure)) return id;
  std::string names;
  for (const Figure& each : figureTable())
    if (isRunFigure(each)) names += (names.empty() ? "" : ", ") + std::string(each.id);
  RM_THROW(kInvalidArgument,
           fmt::format("'{}' is not a run figure to rank a sweep by; one of: {}", id, names));
}

json sweepJson(const SweepRecord& sweep, const json& plan, const std::vector<std::string>& fields) {
  return {{"id", sweep.id},
          {"name", sweep.name},
          {"spec_path", sweep.spec_path},
          {"status", sweep.status},
          {"parallel", sweep.parallel},
          {"created_at", sweep.created_at},
          {"ended_at", sweep.ended_at ? json(*sweep.ended_at) : json()},
          {"detached", sweep.detached},
          {"plan", plan},
          {"fields", fields},
          {"members", sweep.members.size()},
          {"ended", sweep.membersEnded()}};
}

// The best run's spec fields where another run's value differs: its value, and the other values
// the runs had (each once).
json specDifferences(const std::vector<json>& reports, size_t best) {
  std::vector<std::map<std::string, json>> fields;
  std::set<std::string> paths;
  for (const json& report : reports) {
    fields.push_back(specFields(report.contains("spec") ? report["spec"] : json()));
    for (const auto& [path, value] : fields.back()) paths.insert(path);
  }
  auto valueAt = [&](size_t run, const std::string& path) {
    const auto found = fields[run].find(path);
    return found == fields[run].end() ? json() : found->second;
  };
  json differences = json::array();
  for (const std::string& path : paths) {
    const json mine = valueAt(best, path);
    json others = json::array();
    std::set<std::string> seen;
    for (size_t run = 0; run < reports.size(); ++run) {
      const json theirs = valueAt(run, path);
      if (run != best && theirs != mine && seen.insert(theirs.dump()).second)
        others.push_back(theirs);
    }
    if (!others.empty())
      differences.push_back({{"field", path}, {"value", mine}, {"others", others}});
  }
  return differences;
}

// The member with the best value of `figure`: among completed runs where any completed, else
// among every run with a value.
json bestRun(const std::string& figure_id, const ComparisonAxis& axis,
             const std::vector<json>& reports, const std::vector<int64_t>& runs,
             const std::vector<int>& positions) {
  const bool higher = higherIsBetter(figure_id);
  auto status = [&](size_t i) {
    return reports[i].contains("run") ? reports[i]["run"].value("status", "") : "";
  };
  bool any_completed = false;
  for (size_t i = 0; i < reports.size(); ++i)
    any_completed = any_completed || (axis.points[i].number && status(i) == "completed");
  std::optional<size_t> best;
  for (size_t i = 0; i < reports.size(); ++i) {
    const std::optional<double> value = axis.points[i].number;
    if (!value || (any_completed && status(i) != "completed")) continue;
    const double held = best ? *axis.points[*best].number : 0;
    if (!best || (higher ? *value > held : *value < held)) best = i;
  }
  if (!best) return nullptr;
  return {{"figure", figure_id},
          {"higher_is_better", higher},
          {"run", runs[*best]},
          {"position", positions[*best]},
          {"value", *axis.points[*best].number},
          {"differences", specDifferences(reports, *best)}};
}

// A swept field's axis over the runs; before any run has it (none started yet), an axis of no
// values.
ComparisonAxis sweptAxis(const std::vector<json>& reports, const std::string& field) {
  bool any_has_it = false;
  for (const json& report : reports)
    any_has_it =
        any_has_it || specFields(report.contains("spec") ? report["spec"] : json()).contains(field);
  if (any_has_it) return comparisonAxis(reports, field);
  ComparisonAxis axis{.key = field, .name = field};
  axis.points.resize(reports.size());
  return axis;
}

}  // namespace

bool higherIsBetter(std::string_view figure_id) {
  const Figure* figure = findFigure(figure_id);
  if (figure_id == "mfu" || figure_id == "final_accuracy") return true;
  return figure && figure->kind == FigureKind::kRate;
}

json sweepReport(const Database& db, int64_t sweep_id, double now, std::string_view rank_by) {
  const std::string ranking = requireRankingFigure(rank_by);
  const SweepRecord sweep = loadSweep(db, sweep_id);
  const json plan = parsedOr(sweep.plan_json, json::object());
  const std::vector<std::string> fields = sweptFields(plan);

  std::vector<json> reports;
  std::vector<int64_t> runs;
  std::vector<int> positions;
  for (const SweepMember& member : sweep.members) {
    if (!member.run_id) continue;
    reports.push_back(toJson(buildRunReport(db, *member.run_id, now)));
    runs.push_back(*member.run_id);
    positions.push_back(member.position);
  }

  json axes = json::array();
  std::map<std::string, ComparisonAxis> figure_axes;
  for (const std::string& field : fields) axes.push_back(toJson(sweptAxis(reports, field)));
  for (const Figure& figure : figureTable()) {
    if (!isRunFigure(figure)) continue;
    ComparisonAxis axis = comparisonAxis(reports, figure.id);
    axes.push_back(toJson(axis));
    figure_axes.emplace(std::string(figure.id), std::move(axis));
  }

  json members = json::array();
  size_t with_run = 0;
  for (const SweepMember& member : sweep.members) {
    json figures = json::object();
    if (member.run_id) {
      for (const auto& [id, axis] : figure_axes) {
        const std::optional<double> value = axis.points[with_run].number;
        figures[id] = value && std::isfinite(*value) ? json(*value) : json();
      }
      ++with_run;
    }
    members.push_back({{"position", member.position},
                       {"values", parsedOr(member.overrides_json, json::object())},
                       {"state", member.state},
                       {"run", member.run_id ? json(*member.run_id) : json()},
                       {"status", member.run_status},
                       {"error", member.error ? json(*member.error) : json()},
                       {"figures", figures}});
  }

  return {{"sweep", sweepJson(sweep, plan, fields)},
          {"members", members},
          {"axes", axes},
          {"runs", runs},
          {"best", bestRun(ranking, figure_axes.at(ranking), reports, runs, positions)}};
}

}  // namespace ringmaster::storage
