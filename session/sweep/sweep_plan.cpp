// Reading a sweep's axes (command line and spec section), checking them, and expanding them into
// members: the grid's cartesian product, or random draws from std::mt19937_64 mapped to values by
// our own arithmetic (unitInterval), so that a seed gives the same members everywhere.
#include "sweep/sweep_plan.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include <fmt/format.h>

#include "core/display_text.h"
#include "core/error.h"
#include "core/nearest_name.h"
#include "spec/job_spec.h"
#include "spec/spec_fields.h"

namespace ringmaster::session {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr int kMaxMembers = 10000;

std::string trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  const size_t last = text.find_last_not_of(" \t");
  return std::string(text.substr(first, last - first + 1));
}

// A value as the command line gives it: JSON where it parses (within the spec's bounds), else the
// text itself.
json valueOf(const std::string& text) {
  if (!checkSpecText(text)) return json::parse(text);
  return text;
}

// Splits "1,[2,3],\"a,b\"" at the commas outside brackets, braces and quotes.
std::vector<std::string> splitValues(std::string_view text) {
  std::vector<std::string> parts;
  int depth = 0;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      parts.push_back(trimmed(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  parts.push_back(trimmed(text.substr(start)));
  return parts;
}

std::optional<AxisDistribution> distributionNamed(std::string_view name) {
  for (AxisDistribution d :
       {AxisDistribution::kUniform, AxisDistribution::kLogUniform, AxisDistribution::kIntUniform})
    if (toString(d) == name) return d;
  return std::nullopt;
}

[[noreturn]] void refuse(const std::string& source, const std::string& problem) {
  RM_THROW(kInvalidArgument, fmt::format("{}: {}", displaySafeLine(source), problem));
}

// The bounds of a random axis, checked: min <= max, log_uniform above 0, int_uniform integers.
void checkBounds(const SweepAxis& axis) {
  if (!std::isfinite(axis.min) || !std::isfinite(axis.max))
    refuse(axis.source, "its bounds must be finite numbers");
  if (axis.min > axis.max)
    refuse(axis.source, fmt::format("min {} is above max {}", fmt::format("{:g}", axis.min),
                                    fmt::format("{:g}", axis.max)));
  if (axis.distribution == AxisDistribution::kLogUniform && axis.min <= 0)
    refuse(axis.source,
           fmt::format("log_uniform needs min > 0 (got {})", fmt::format("{:g}", axis.min)));
  if (axis.distribution == AxisDistribution::kIntUniform &&
      (axis.min != std::floor(axis.min) || axis.max != std::floor(axis.max) ||
       std::fabs(axis.min) > 9e15 || std::fabs(axis.max) > 9e15))
    refuse(axis.source, "int_uniform needs integer bounds");
}

AxisDistribution requireDistribution(const std::string& source, const std::string& name) {
  if (const std::optional<AxisDistribution> d = distributionNamed(name)) return *d;
  refuse(source, fmt::format("unknown distribution '{}' (uniform, log_uniform, int_uniform)",
                             displaySafeLine(name)));
}

double boundOf(const std::string& source, const std::string& which, const std::string& text) {
  const json value = valueOf(text);
  if (!value.is_number()) refuse(source, fmt::format("{} '{}' is not a number", which, text));
  return value.get<double>();
}

// A field path as a dotted spec path: non-empty parts.
void checkFieldPath(const std::string& source, const std::string& field) {
  if (field.empty()) refuse(source, "no field before '='");
  if (field.front() == '.' || field.back() == '.' || field.find("..") != std::string::npos)
    refuse(source, "the field is not a dotted spec path (optimizer.lr)");
}

SweepAxis axisFromSection(const std::string& field, const ordered_json& value) {
  SweepAxis axis{.field = field, .source = "sweep.axes." + field};
  checkFieldPath(axis.source, field);
  if (value.is_array()) {
    if (value.empty()) refuse(axis.source, "an empty list of values");
    for (const ordered_json& v : value) axis.values.push_back(json::parse(v.dump()));
    return axis;
  }
  if (!value.is_object())
    refuse(axis.source, "expected a list of values or {\"distribution\", \"min\", \"max\"}");
  for (const auto& [key, item] : value.items()) {
    if (key != "distribution" && key != "min" && key != "max") {
      const std::string_view near = closestName(key, {"distribution", "min", "max"});
      refuse(axis.source,
             fmt::format("unknown key '{}'{}", displaySafeLine(key),
                         near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
    }
  }
  if (!value.contains("distribution") || !value["distribution"].is_string())
    refuse(axis.source, "a random axis needs \"distribution\" (uniform, log_uniform, int_uniform)");
  axis.distribution = requireDistribution(axis.source, value["distribution"].get<std::string>());
  for (const char* bound : {"min", "max"})
    if (!value.contains(bound) || !value[bound].is_number())
      refuse(axis.source, fmt::format("\"{}\" must be a number", bound));
  axis.min = value["min"].get<double>();
  axis.max = value["max"].get<double>();
  checkBounds(axis);
  return axis;
}

// The section's settings other than its axes.
struct SectionSettings {
  std::optional<std::string> method;
  std::optional<int> count;
  std::optional<uint64_t> seed;
  std::optional<int> parallel;
};

int positiveInteger(const ordered_json& value, const std::string& key, int limit) {
  if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > limit)
    refuse("sweep." + key, fmt::format("expected an integer in 1..{}", limit));
  return static_cast<int>(value.get<int64_t>());
}

SectionSettings readSection(const ordered_json& section, std::vector<SweepAxis>& axes) {
  if (!section.is_object()) refuse("sweep", "expected an object with \"axes\"");
  static const std::vector<std::string_view> keys = {"method", "count", "seed", "parallel", "axes"};
  SectionSettings settings;
  for (const auto& [key, value] : section.items()) {
    if (key == "method") {
      if (!value.is_string() || (value != "grid" && value != "random"))
        refuse("sweep.method", "expected \"grid\" or \"random\"");
      settings.method = value.get<std::string>();
    } else if (key == "count") {
      settings.count = positiveInteger(value, key, kMaxMembers);
    } else if (key == "seed") {
      if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0))
        refuse("sweep.seed", "expected a non-negative integer");
      settings.seed = value.get<uint64_t>();
    } else if (key == "parallel") {
      settings.parallel = positiveInteger(value, key, 1024);
    } else if (key == "axes") {
      if (!value.is_object()) refuse("sweep.axes", "expected an object of field to values");
      for (const auto& [field, axis] : value.items()) axes.push_back(axisFromSection(field, axis));
    } else {
      const std::string_view near = closestName(key, keys);
      refuse("sweep", fmt::format("unknown key '{}'{}", displaySafeLine(key),
                                  near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
    }
  }
  return settings;
}

bool within(const std::string& inner, const std::string& outer) {
  return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
         inner[outer.size()] == '.';
}

// Two axes over one field, or over a field and one inside it, would overwrite each other.
void checkDistinctFields(const std::vector<SweepAxis>& axes) {
  for (size_t i = 0; i < axes.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (axes[i].field == axes[j].field)
        refuse(axes[i].source, fmt::format("the field is swept twice (also by {})",
                                           displaySafeLine(axes[j].source)));
      if (within(axes[i].field, axes[j].field) || within(axes[j].field, axes[i].field))
        refuse(axes[i].source, fmt::format("the field overlaps {}'s (one holds the other)",
                                           displaySafeLine(axes[j].source)));
    }
  }
}

int64_t gridSize(const std::vector<SweepAxis>& axes) {
  int64_t size = 1;
  for (const SweepAxis& axis : axes) {
    size *= static_cast<int64_t>(axis.values.size());
    if (size > kMaxMembers)
      refuse(axis.source, fmt::format("the grid grows past {} members here", kMaxMembers));
  }
  return size;
}

json drawValue(const SweepAxis& axis, double u) {
  switch (axis.distribution) {
    case AxisDistribution::kNone: {
      const size_t n = axis.values.size();
      return axis.values[std::min(n - 1, static_cast<size_t>(u * static_cast<double>(n)))];
    }
    case AxisDistribution::kUniform:
      return std::min(axis.max, axis.min + u * (axis.max - axis.min));
    case AxisDistribution::kLogUniform: {
      const double low = std::log(axis.min), high = std::log(axis.max);
      return std::clamp(std::exp(low + u * (high - low)), axis.min, axis.max);
    }
    case AxisDistribution::kIntUniform: {
      const double span = axis.max - axis.min + 1;
      const double value = std::min(axis.max, axis.min + std::floor(u * span));
      return static_cast<int64_t>(value);
    }
  }
  RM_ENFORCE(false, "unknown distribution");
}

}  // namespace

std::string_view toString(AxisDistribution distribution) {
  switch (distribution) {
    case AxisDistribution::kNone:
      return "";
    case AxisDistribution::kUniform:
      return "uniform";
    case AxisDistribution::kLogUniform:
      return "log_uniform";
    case AxisDistribution::kIntUniform:
      return "int_uniform";
  }
  return "";
}

double unitInterval(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

SweepAxis parseAxisArgument(std::string_view argument) {
  const size_t equals = argument.find('=');
  const std::string field = trimmed(argument.substr(0, equals));
  SweepAxis axis{.field = field, .source = "--axis " + field};
  if (equals == std::string_view::npos)
    refuse("--axis " + std::string(argument),
           "expected FIELD=V1,V2,... or FIELD=DIST(MIN,MAX), e.g. optimizer.lr=1e-3,3e-3");
  checkFieldPath(axis.source, field);
  const std::string spec = trimmed(argument.substr(equals + 1));
  if (spec.empty()) refuse(axis.source, "an empty list of values");
  const size_t open = spec.find('(');
  const bool call = open != std::string::npos && open > 0 && spec.back() == ')' &&
                    spec.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == open;
  if (call) {
    axis.distribution = requireDistribution(axis.source, spec.substr(0, open));
    const std::vector<std::string> bounds =
        splitValues(std::string_view(spec).substr(open + 1, spec.size() - open - 2));
    if (bounds.size() != 2)
      refuse(axis.source, fmt::format("{} takes two bounds, {}(MIN,MAX)",
                                      toString(axis.distribution), toString(axis.distribution)));
    axis.min = boundOf(axis.source, "min", bounds[0]);
    axis.max = boundOf(axis.source, "max", bounds[1]);
    checkBounds(axis);
    return axis;
  }
  for (const std::string& text : splitValues(spec)) {
    if (text.empty()) refuse(axis.source, "an empty value in the list");
    axis.values.push_back(valueOf(text));
  }
  return axis;
}

SweepPlan makeSweepPlan(std::string_view spec_text, const SweepArguments& arguments) {
  SweepPlan plan;
  SectionSettings settings;
  if (const std::optional<SpecProblem> problem = checkSpecText(spec_text); !problem) {
    const ordered_json document = ordered_json::parse(spec_text);
    if (document.is_object() && document.contains("sweep"))
      settings = readSection(document["sweep"], plan.axes);
  }
  for (const std::string& argument : arguments.axes)
    plan.axes.push_back(parseAxisArgument(argument));
  if (plan.axes.empty())
    RM_THROW(kInvalidArgument,
             "a sweep needs at least one axis (--axis FIELD=V1,V2 or the spec's sweep.axes)");
  checkDistinctFields(plan.axes);
  const bool any_random = std::any_of(plan.axes.begin(), plan.axes.end(),
                                      [](const SweepAxis& a) { return a.random(); });
  if (settings.method == "grid" && any_random) {
    const auto axis = std::find_if(plan.axes.begin(), plan.axes.end(),
                                   [](const SweepAxis& a) { return a.random(); });
    refuse(axis->source,
           "a random axis in a grid sweep (sweep.method \"grid\"): a grid needs "
           "lists of values");
  }
  plan.random = any_random || settings.method == "random";
  plan.parallel = settings.parallel;
  const std::optional<int> count = arguments.count ? arguments.count : settings.count;
  const std::optional<uint64_t> seed = arguments.seed ? arguments.seed : settings.seed;
  if (plan.random) {
    if (!count)
      RM_THROW(kInvalidArgument,
               "random search needs a count of draws (--count N, or the sweep section's count)");
    if (*count < 1 || *count > kMaxMembers)
      RM_THROW(kInvalidArgument, fmt::format("--count {}: expected 1..{}", *count, kMaxMembers));
    plan.count = *count;
    plan.seed = seed.value_or(0);
    return plan;
  }
  const int64_t size = gridSize(plan.axes);
  if (count)
    RM_THROW(kInvalidArgument,
             fmt::format("a count is for random search: this grid runs each of its {} "
                         "combinations once",
                         size));
  if (seed) RM_THROW(kInvalidArgument, "a seed is for random search: a grid draws nothing");
  plan.count = static_cast<int>(size);
  return plan;
}

nlohmann::json SweepPlan::toJson() const {
  json axes_json = json::array();
  for (const SweepAxis& axis : axes) {
    if (axis.random()) {
      axes_json.push_back({{"field", axis.field},
                           {"distribution", session::toString(axis.distribution)},
                           {"min", axis.min},
                           {"max", axis.max}});
    } else {
      axes_json.push_back({{"field", axis.field}, {"values", axis.values}});
    }
  }
  json plan_json = {{"method", random ? "random" : "grid"}, {"axes", axes_json}, {"count", count}};
  if (random) plan_json["seed"] = seed;
  return plan_json;
}

std::vector<MemberOverrides> SweepPlan::members() const {
  std::vector<MemberOverrides> result;
  if (random) {
    std::mt19937_64 generator(seed);
    for (int draw = 0; draw < count; ++draw) {
      MemberOverrides member;
      for (const SweepAxis& axis : axes)
        member.emplace_back(axis.field, drawValue(axis, unitInterval(generator())));
      result.push_back(std::move(member));
    }
    return result;
  }
  // The grid: an odometer whose last axis turns fastest.
  std::vector<size_t> at(axes.size(), 0);
  for (int index = 0; index < count; ++index) {
    MemberOverrides member;
    for (size_t a = 0; a < axes.size(); ++a)
      member.emplace_back(axes[a].field, axes[a].values[at[a]]);
    result.push_back(std::move(member));
    for (size_t a = axes.size(); a-- > 0;) {
      if (++at[a] < axes[a].values.size()) break;
      at[a] = 0;
    }
  }
  return result;
}

nlohmann::json withoutSweepSection(nlohmann::json document) {
  if (document.is_object()) document.erase("sweep");
  return document;
}

namespace {

// Whether `document` holds a value at the dotted `path`.
bool documentHas(const json& document, const std::string& path) {
  const json* node = &document;
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (!node->is_object() || !node->contains(key)) return false;
    node = &(*node)[key];
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

}  // namespace

void checkAxisFields(const SweepPlan& plan, const nlohmann::json& document) {
  std::vector<std::string_view> known;
  for (const SpecField& field : specFields()) known.push_back(field.path);
  for (const SweepAxis& axis : plan.axes) {
    if (findSpecField(axis.field) || documentHas(document, axis.field)) continue;
    const std::string_view near = closestName(axis.field, known);
    refuse(axis.source, fmt::format("no such spec field{} (`ringmaster spec fields` lists them)",
                                    near.empty() ? "" : fmt::format("; did you mean {}?", near)));
  }
}

std::vector<std::string> overrideArguments(const MemberOverrides& member) {
  std::vector<std::string> arguments;
  for (const auto& [field, value] : member) arguments.push_back(field + "=" + value.dump());
  return arguments;
}

std::string overridesJson(const MemberOverrides& member) {
  ordered_json object = ordered_json::object();
  for (const auto& [field, value] : member) object[field] = ordered_json::parse(value.dump());
  return object.dump();
}

std::string describeMember(const MemberOverrides& member) {
  std::string text;
  for (const auto& [field, value] : member)
    text += fmt::format("{}{}={}", text.empty() ? "" : " ", field,
                        value.is_string() ? value.get<std::string>() : value.dump());
  return displaySafeLine(text);
}

}  // namespace ringmaster::session
