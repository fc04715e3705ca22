// The job spec's fields described once, as plain data: path, type, choices, default, bounds, when
// it applies (the kind of job, the kinds of its choices) and a line of help. The job editor builds
// its form from it, the CLI prints it, and a test holds every default, choice list and job kind to
// what the parser does (docs/spec.md is the prose).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringmaster {

enum class FieldType {
  kInteger,
  kNumber,
  kBoolean,
  kText,
  kPath,             // a file (text)
  kDirectory,        // a directory (text)
  kTextList,         // ["--steps", "30"]: strings, each kept as it is
  kChoice,           // one of `choices`
  kIntegerList,      // [784, 256, 10]
  kNumberList,       // [0.9, 0.999]
  kIntegerListList,  // [[0, 1], [2]]
  kHostList,         // launch.hosts: objects described by the "launch.hosts[]." fields
  kTextMap,          // {"NCCL_DEBUG": "INFO"}: names to strings (the form: NAME=VALUE lines)
};

// "integer", "number", "boolean", "text", "path", "directory", "text list", "choice",
// "integer list", "number list", "list of integer lists", "host list", "text map".
std::string_view toString(FieldType type);

// The two kinds of job a spec describes: the engine's (its worker trains the model the spec's
// sections describe) or a program job (a document with a `program` section: every rank runs the
// user's script, spec/program.h; the engine's sections, kEngineOnlySections, are refused beside
// it).
enum class JobKind { kEngine, kProgram };

// "engine", "program".
std::string_view toString(JobKind kind);

// kProgram when the document has a `program` that is not null (the parser's rule), else kEngine.
JobKind jobKindOf(const nlohmann::json& document);

// The field belongs to some kinds only: it applies when the choice field `controller` holds one
// of `kinds` (its default when left out). For other kinds the parser calls it unknown.
struct FieldCondition {
  std::string controller;  // "strategy.kind"
  std::vector<std::string> kinds;
  bool operator==(const FieldCondition&) const = default;
};

// A default that differs for some kinds (optimizer.weight_decay: 0.01 for adamw).
struct ConditionalDefault {
  FieldCondition when;
  nlohmann::json value;
  bool operator==(const ConditionalDefault&) const = default;
};

// A value type that differs for some kinds (model.layers: a list of widths, one integer for gpt).
struct ConditionalType {
  FieldCondition when;
  FieldType type;
  bool operator==(const ConditionalType&) const = default;
};

struct SpecField {
  std::string path;     // JSON path: "strategy.bucket_cap_mb"; "launch.hosts[].ranks" per entry
  std::string section;  // the form's group: "Strategy"
  std::string label;    // the form's label: "Bucket cap (MiB)"
  FieldType type = FieldType::kText;
  std::vector<std::string> choices;  // kChoice: every spelling the parser accepts, in order
  nlohmann::json default_value;      // what the parser assumes when left out; null: none/required
  std::vector<ConditionalDefault> defaults_when;  // overrides default_value for some kinds
  std::vector<ConditionalType> types_when;        // overrides type for some kinds
  bool required = false;  // the parser insists on it (within its block, for an optional block)
  // A required field's value in a new spec (JobSpec{}), which the form assumes until the document
  // holds one (optimizer.kind: adamw); null otherwise.
  nlohmann::json initial_value;
  // The one kind of job the field belongs to; nullopt: both (name, description, strategy.kind,
  // launch). The parser refuses an engine field in a program job and reads a program field only
  // in one (it makes the job one).
  std::optional<JobKind> job;
  std::optional<FieldCondition> shown_when;  // nullopt: applies to every spec of its job kind
  std::optional<double> minimum;  // the bounds the parser accepts (integers, numbers, list items)
  std::optional<double> maximum;
  bool exclusive_minimum = false;  // lr: > 0
  bool exclusive_maximum = false;  // dropout: < 1
  std::string help;  // one line: "gradients are all-reduced in buckets of at most this size"
  bool operator==(const SpecField&) const = default;
};

// Every field of the spec, in form order (sections in order, fields in order within them).
const std::vector<SpecField>& specFields();

// The field at `path`, or nullptr.
const SpecField* findSpecField(std::string_view path);

// The default of `field` for a document: the conditional default whose condition holds there,
// else default_value.
nlohmann::json defaultFor(const SpecField& field, const nlohmann::json& document);
// The type of `field`'s value in a document: the conditional type whose condition holds there,
// else type (a form reads "12" as [12] for an mlp's model.layers and as 12 for a gpt's).
FieldType typeIn(const SpecField& field, const nlohmann::json& document);

// The value of choice field `path` in `document`, or its default when left out or not a string.
std::string choiceIn(const nlohmann::json& document, std::string_view path);

// Whether `field` applies to `document`: it belongs to the document's kind of job, and has no
// condition or its controller holds one of its kinds.
bool appliesTo(const SpecField& field, const nlohmann::json& document);

}  // namespace ringmaster
