// The bounds on custom metric names, and adding one to a step event.
#include "telemetry/custom_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "telemetry/fields.h"

namespace ringmaster {

namespace {

bool isNameCharacter(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '/' || c == '-';
}

bool isStepFieldName(std::string_view name) {
  bool found = false;
  forEachField(kStepFields, [&](const auto& field) { found = found || field.name == name; });
  return found;
}

}  // namespace

std::optional<MetricNameProblem> customMetricNameProblem(std::string_view name) {
  if (name.empty()) return MetricNameProblem::kEmpty;
  if (name.size() > kMaxCustomMetricNameBytes) return MetricNameProblem::kTooLong;
  if (!std::all_of(name.begin(), name.end(), isNameCharacter)) return MetricNameProblem::kCharacter;
  if (name.front() == '/') return MetricNameProblem::kLeadingSlash;
  if (isStepFieldName(name)) return MetricNameProblem::kStepField;
  return std::nullopt;
}

std::string describe(MetricNameProblem problem) {
  switch (problem) {
    case MetricNameProblem::kEmpty:
      return "the name is empty";
    case MetricNameProblem::kTooLong:
      return fmt::format("the name is longer than {} bytes", kMaxCustomMetricNameBytes);
    case MetricNameProblem::kCharacter:
      return fmt::format("the name holds a character outside {}", kCustomMetricNameCharset);
    case MetricNameProblem::kLeadingSlash:
      return "the name starts with '/'";
    case MetricNameProblem::kStepField:
      return "the name is a step field's, which the step event carries itself";
  }
  return "the name is refused";
}

void addCustomMetric(StepEvent& event, std::string_view name, double value) {
  const auto problem = customMetricNameProblem(name);
  RM_CHECK_ARG(!problem, fmt::format("custom metric '{}': {}", name,
                                     problem ? describe(*problem) : std::string()));
  const bool storable = std::isfinite(value) && std::fabs(value) <= kMaxMagnitude;
  event.metrics[std::string(name)] = storable ? value : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace ringmaster
