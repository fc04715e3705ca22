// `ringmaster spec fields`: the spec's field description (spec/spec_fields.h) as text or JSON.
#include "cli/spec_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "spec/spec_fields.h"

namespace ringmaster::cli {

namespace {

using json = nlohmann::json;

// A bound as written: integers without a fraction; none beyond 2^53 (a seed's 2^64 - 1 says
// nothing a reader needs).
std::optional<std::string> bound(std::optional<double> value) {
  if (!value || *value > 9007199254740992.0) return std::nullopt;
  return fmt::format("{}", *value);
}

// "integer in [1, 1024]", "number > 0", "number in [0, 1)", "integer list, each in [1, 1048576]".
std::string typeText(const SpecField& field) {
  std::string text(toString(field.type));
  const auto low = bound(field.minimum), high = bound(field.maximum);
  if (low && high) {
    text += fmt::format(
        "{} {}{}, {}{}",
        field.type == FieldType::kInteger || field.type == FieldType::kNumber ? " in" : ", each in",
        field.exclusive_minimum ? "(" : "[", *low, *high, field.exclusive_maximum ? ")" : "]");
  } else if (low) {
    text += fmt::format(" {} {}", field.exclusive_minimum ? ">" : ">=", *low);
  } else if (high) {
    text += fmt::format(" {} {}", field.exclusive_maximum ? "<" : "<=", *high);
  }
  return text;
}

// A default as a reader writes it: 25 not 25.0, full_shard not "full_shard" (but "" for empty).
std::string valueText(const json& value) {
  if (value.is_number_float() && std::abs(value.get<double>()) < 1e15 &&
      value.get<double>() == std::floor(value.get<double>()))
    return fmt::format("{}", static_cast<int64_t>(value.get<double>()));
  if (value.is_string() && !value.get_ref<const std::string&>().empty())
    return value.get<std::string>();
  return value.dump();
}

std::string conditionText(const FieldCondition& condition) {
  return fmt::format("{} is {}", condition.controller, fmt::join(condition.kinds, " or "));
}

}  // namespace

std::string specFieldsText() {
  std::string out;
  std::string section;
  for (const SpecField& field : specFields()) {
    if (field.section != section) {
      section = field.section;
      out += fmt::format("{}{}\n", out.empty() ? "" : "\n", section);
    }
    std::vector<std::string> facts = {typeText(field)};
    for (const ConditionalType& t : field.types_when)
      facts.front() += fmt::format(" ({} when {})", toString(t.type), conditionText(t.when));
    if (field.required) facts.push_back("required");
    if (!field.default_value.is_null()) {
      std::string text = "default " + valueText(field.default_value);
      for (const ConditionalDefault& d : field.defaults_when)
        text += fmt::format(" ({} when {})", valueText(d.value), conditionText(d.when));
      facts.push_back(text);
    }
    if (!field.choices.empty()) facts.push_back(fmt::format("{}", fmt::join(field.choices, " | ")));
    if (field.shown_when) facts.push_back("only when " + conditionText(*field.shown_when));
    if (field.job) facts.push_back(fmt::format("{} jobs only", toString(*field.job)));
    out += fmt::format("  {}  {}: {}\n", field.path, field.label, fmt::join(facts, "; "));
    if (!field.help.empty()) out += fmt::format("      {}\n", field.help);
  }
  return out;
}

json specFieldsJson() {
  json fields = json::array();
  for (const SpecField& field : specFields()) {
    json entry = {{"path", field.path},
                  {"section", field.section},
                  {"label", field.label},
                  {"type", toString(field.type)},
                  {"required", field.required}};
    if (!field.default_value.is_null()) entry["default"] = field.default_value;
    if (!field.initial_value.is_null()) entry["initial"] = field.initial_value;
    if (!field.choices.empty()) entry["choices"] = field.choices;
    if (field.minimum) entry["minimum"] = *field.minimum;
    if (field.maximum) entry["maximum"] = *field.maximum;
    if (field.exclusive_minimum) entry["exclusive_minimum"] = true;
    if (field.exclusive_maximum) entry["exclusive_maximum"] = true;
    auto condition = [](const FieldCondition& c) {
      return json{{"controller", c.controller}, {"kinds", c.kinds}};
    };
    if (field.job) entry["job"] = toString(*field.job);
    if (field.shown_when) entry["when"] = condition(*field.shown_when);
    for (const ConditionalDefault& d : field.defaults_when)
      entry["defaults_when"].push_back({{"when", condition(d.when)}, {"value", d.value}});
    for (const ConditionalType& t : field.types_when)
      entry["types_when"].push_back({{"when", condition(t.when)}, {"type", toString(t.type)}});
    if (!field.help.empty()) entry["help"] = field.help;
    fields.push_back(std::move(entry));
  }
  return fields;
}

int specFieldsCommand(bool as_json) {
  if (as_json)
    fmt::print("{}\n", specFieldsJson().dump(2));
  else
    fmt::print("{}", specFieldsText());
  return 0;
}

void addSpecCommand(CLI::App& app, Commands& commands) {
  auto json = std::make_shared<bool>(false);
  CLI::App* spec = app.add_subcommand("spec", "the job spec's description");
  spec->require_subcommand(1);
  CLI::App* fields = spec->add_subcommand(
      "fields",
      "every spec field: type, bounds, default, choices, when it applies, help (the "
      "job editor's form is built from the same description)");
  fields->add_flag("--json", *json, "JSON instead of text");
  commands.add(fields, [json](const CommonOptions&) { return specFieldsCommand(*json); });
}

}  // namespace ringmaster::cli
