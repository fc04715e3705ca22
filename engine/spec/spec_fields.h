// The job spec's fields described once, as plain data: path, type, choices, default, bounds, when
// it applies (the kind of job, the kinds of its choices) and a line of help. The job editor builds
// its form from it, the CLI prints it, and a test holds every default, choice list and job kind to
// what the parser does (docs/spec.md is the prose).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
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
  std::string controller;  // "strategy.dp.kind"
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

struct JobSpec;
struct LaunchHostSpec;

// An enum member of the spec, its spelling read and written through the enum's toString and
// fromString (job_spec.h).
struct EnumValueRef {
  void* value = nullptr;
  std::string_view (*name)(const void* value) = nullptr;
  bool (*set)(void* value, std::string_view name) = nullptr;  // false: not one of its names
};

// A plain value of the spec (a number, a string, a boolean, an enum), by the type that holds it;
// monostate where there is none (the optional block that would hold it is unset).
using SpecValueRef =
    std::variant<std::monostate, std::string*, std::optional<std::string>*, bool*, int*, int64_t*,
                 uint64_t*, std::optional<int>*, std::optional<int64_t>*, double*,
                 std::optional<double>*, EnumValueRef>;

// Where a plain value field lives: in the JobSpec, or (a "launch.hosts[]." field) in one host's
// LaunchHostSpec. The parser reads the field into it and toJson writes it from it, by the field's
// description alone (job_spec.cpp: readValues, writeValues). `member` is the expression that
// names it ("train.steps"), which for a JobSpec field is its path.
struct SpecValueBinding {
  SpecValueRef (*in_spec)(JobSpec& spec) = nullptr;
  SpecValueRef (*in_host)(LaunchHostSpec& host) = nullptr;
  std::string_view member;
  bool operator==(const SpecValueBinding&) const = default;
};

struct SpecField {
  std::string path;     // JSON path: "strategy.dp.bucket_cap_mb"; "launch.hosts[].ranks" per entry
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
  // The one kind of job the field belongs to; nullopt: both (name, description, launch). The parser
  // refuses an engine field in a program job and reads a program field only in one (it makes the
  // job one).
  std::optional<JobKind> job;
  std::optional<FieldCondition> shown_when;  // nullopt: applies to every spec of its job kind
  std::optional<double> minimum;  // the bounds the parser accepts (integers, numbers, list items)
  std::optional<double> maximum;
  bool exclusive_minimum = false;  // lr: > 0
  bool exclusive_maximum = false;  // dropout: < 1
  std::string help;  // one line: "gradients are all-reduced in buckets of at most this size"
  // Set: a plain value the parser reads and toJson writes through it alone; unset: a list, a map,
  // a strategy's option (its plan reads it) or a value with rules of its own (name, model.layers,
  // a host's name and user).
  std::optional<SpecValueBinding> binding;
  // How the parser's message says a valid value when the type and bounds cannot ("a port number
  // in 1..65535", "a number in [0, 1)"); it then states every bound. Empty: said from them ("a
  // positive integer", "... no larger than 1024" above the maximum).
  std::string expected;
  std::string zero_means;      // said after the bounds' words: "never" (train.eval_every)
  bool empty_allowed = false;  // text: "" is a value (description, program.workdir)
  // shown_when is the form's alone: the parser reads the field for every kind (train.micro_batches
  // must be 1 unless pipeline, which the cross checks say).
  bool form_condition_only = false;
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
