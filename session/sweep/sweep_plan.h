// A sweep's plan (issue 37): its axes over spec fields, read from `--axis FIELD=...` arguments and
// from a spec's `sweep` section, and their expansion into members, each a set of field overrides:
// the cartesian product of grid axes (first axis slowest), or `count` random draws reproducible
// from a seed. Bad input is refused naming the axis and the problem. Running the members is
// sweep_runner.h's; nothing here touches a database or a process.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringmaster::session {

// The random distributions an axis may draw from.
enum class AxisDistribution { kNone, kUniform, kLogUniform, kIntUniform };

// "uniform", "log_uniform", "int_uniform" ("" for kNone).
std::string_view toString(AxisDistribution distribution);

struct SweepAxis {
  std::string field;                   // a dotted spec path: "optimizer.lr"
  std::string source;                  // how messages name it: "--axis optimizer.lr"
  std::vector<nlohmann::json> values;  // a grid axis: its values, in order
  AxisDistribution distribution = AxisDistribution::kNone;  // a random axis
  double min = 0, max = 0;                                  // a random axis's bounds (inclusive)

  bool random() const { return distribution != AxisDistribution::kNone; }
};

// One member: each axis's field with its value, in the axes' order.
using MemberOverrides = std::vector<std::pair<std::string, nlohmann::json>>;

struct SweepPlan {
  bool random = false;  // random search; else the grid
  std::vector<SweepAxis> axes;
  int count = 0;                // random: the draws (a grid's is the product of its axes' sizes)
  uint64_t seed = 0;            // random: the generator's seed
  std::optional<int> parallel;  // the section's `parallel`, where it gave one

  // recorder/sweep_records.h NewSweep::plan_json: {"method", "axes": [...], "count", "seed"}.
  nlohmann::json toJson() const;
  // Every member in plan order.
  std::vector<MemberOverrides> members() const;
};

// What the command line says of a sweep, beside the spec's section.
struct SweepArguments {
  std::vector<std::string> axes;  // each --axis FIELD=SPEC
  std::optional<int> count;       // --count
  std::optional<uint64_t> seed;   // --seed
};

// One `--axis FIELD=V1,V2,...` (each value JSON where it parses, else a string; commas inside
// brackets, braces or quotes do not split) or `--axis FIELD=DIST(MIN,MAX)` with DIST one of
// uniform, log_uniform, int_uniform. Throws kInvalidArgument naming the axis.
SweepAxis parseAxisArgument(std::string_view argument);

// The plan of the spec's `sweep` section (its axes in the file's order; none without a section)
// and the command line's axes (after the section's), count and seed (which replace the
// section's). `spec_text` is the spec file as read. Throws kInvalidArgument, naming the axis or the
// section's key, for: an unknown distribution, min > max, log_uniform with min <= 0, int_uniform
// bounds that are not integers, an empty value list, the same field twice (or one inside
// another), a random axis in a `grid` sweep, random search without a count, a count or a seed
// for a grid, no axis at all.
// An unknown key in the section is refused with the nearest known one.
SweepPlan makeSweepPlan(std::string_view spec_text, const SweepArguments& arguments);

// The document without its `sweep` section: the spec each member starts from.
nlohmann::json withoutSweepSection(nlohmann::json document);

// Refuses (kInvalidArgument, naming the axis and the nearest field) an axis whose field no member
// could ever set: neither a spec field (engine/spec/spec_fields.h) nor a path already in
// `document`. A field that exists but that some values make invalid is the member's to refuse.
void checkAxisFields(const SweepPlan& plan, const nlohmann::json& document);

// "field=<value as JSON>" for each of a member's overrides, as session::applyOverrides reads them.
std::vector<std::string> overrideArguments(const MemberOverrides& member);
// A member's overrides as the JSON object recorded for it, in the axes' order.
std::string overridesJson(const MemberOverrides& member);
// "optimizer.lr=0.001 train.micro_batches=4", for a line about the member.
std::string describeMember(const MemberOverrides& member);

// A uniform double in [0, 1) from one draw of the generator: the top 53 bits, the same on every
// standard library (std::uniform_real_distribution's output is not).
double unitInterval(uint64_t bits);

}  // namespace ringmaster::session
