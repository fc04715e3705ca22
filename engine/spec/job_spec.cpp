// Parsing, validation and the canonical JSON form of the job spec. The parser walks the document
// once, reporting every problem it meets with its path, then runs the cross-field checks whose
// inputs were all valid, so that one mistake is reported once and not again by every check after
// it. Plain values (numbers, text, booleans, choices) are read and written by their SpecField
// alone (spec_fields.h: the member, type, bounds, kinds); this file holds the rest: the blocks,
// lists, maps, names and hosts, and the checks across fields.
#include "spec/job_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <span>
#include <utility>
#include <variant>

#include "core/bounded_file.h"
#include "core/error.h"
#include "core/nearest_name.h"
#include "spec/spec_fields.h"
#include "spec/strategies/plan.h"

namespace ringmaster {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Kind names

namespace {

template <typename E>
struct NamedValue {
  E value;
  std::string_view name;
};

constexpr NamedValue<FsdpSharding> kFsdpShardings[] = {
    {FsdpSharding::kFullShard, "full_shard"},
    {FsdpSharding::kShardGradOp, "shard_grad_op"},
    {FsdpSharding::kNoShard, "no_shard"}};
constexpr NamedValue<FsdpUnits> kFsdpUnits[] = {{FsdpUnits::kLayer, "layer"},
                                                {FsdpUnits::kModel, "model"}};
constexpr NamedValue<PipelineSchedule> kPipelineSchedules[] = {
    {PipelineSchedule::kGpipe, "gpipe"},
    {PipelineSchedule::k1f1b, "1f1b"},
    {PipelineSchedule::kInterleaved1f1b, "interleaved_1f1b"},
    {PipelineSchedule::kZbH1, "zb_h1"}};
constexpr NamedValue<ActivationKind> kActivationKinds[] = {{ActivationKind::kRelu, "relu"},
                                                           {ActivationKind::kGelu, "gelu"}};
constexpr NamedValue<DataKind> kDataKinds[] = {{DataKind::kSynthetic, "synthetic"},
                                               {DataKind::kIdx, "idx"},
                                               {DataKind::kTokens, "tokens"},
                                               {DataKind::kText, "text"}};
constexpr NamedValue<OptimizerKind> kOptimizerKinds[] = {
    {OptimizerKind::kSgd, "sgd"}, {OptimizerKind::kAdam, "adam"}, {OptimizerKind::kAdamW, "adamw"}};
constexpr NamedValue<LrScheduleKind> kLrScheduleKinds[] = {{LrScheduleKind::kConstant, "constant"},
                                                           {LrScheduleKind::kCosine, "cosine"}};
constexpr NamedValue<BackendKind> kBackendKinds[] = {
    {BackendKind::kAuto, "auto"}, {BackendKind::kGloo, "gloo"}, {BackendKind::kNccl, "nccl"}};
constexpr NamedValue<DeviceKind> kDeviceKinds[] = {
    {DeviceKind::kAuto, "auto"}, {DeviceKind::kCpu, "cpu"}, {DeviceKind::kCuda, "cuda"}};
constexpr NamedValue<Precision> kPrecisions[] = {
    {Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}};

template <typename E>
std::span<const NamedValue<E>> table();

#define RM_SPEC_TABLE(E, array)               \
  template <>                                 \
  std::span<const NamedValue<E>> table<E>() { \
    return array;                             \
  }
RM_SPEC_TABLE(FsdpSharding, kFsdpShardings)
RM_SPEC_TABLE(FsdpUnits, kFsdpUnits)
RM_SPEC_TABLE(PipelineSchedule, kPipelineSchedules)
RM_SPEC_TABLE(ActivationKind, kActivationKinds)
RM_SPEC_TABLE(DataKind, kDataKinds)
RM_SPEC_TABLE(OptimizerKind, kOptimizerKinds)
RM_SPEC_TABLE(LrScheduleKind, kLrScheduleKinds)
RM_SPEC_TABLE(BackendKind, kBackendKinds)
RM_SPEC_TABLE(DeviceKind, kDeviceKinds)
RM_SPEC_TABLE(Precision, kPrecisions)
#undef RM_SPEC_TABLE

template <typename E>
std::string_view nameOf(E value) {
  for (const auto& entry : table<E>()) {
    if (entry.value == value) return entry.name;
  }
  RM_ENFORCE(false, fmt::format("enum value {} has no name", static_cast<int>(value)));
  return {};
}

template <typename E>
std::optional<E> valueOf(std::string_view name) {
  for (const auto& entry : table<E>()) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

template <typename E>
std::vector<std::string_view> namesOf() {
  std::vector<std::string_view> names;
  for (const auto& entry : table<E>()) names.push_back(entry.name);
  return names;
}

}  // namespace

#define RM_SPEC_ENUM(E)                                   \
  std::string_view toString(E value) {                    \
    return nameOf(value);                                 \
  }                                                       \
  template <>                                             \
  std::optional<E> fromString<E>(std::string_view name) { \
    return valueOf<E>(name);                              \
  }                                                       \
  template <>                                             \
  std::vector<std::string_view> enumNames<E>() {          \
    return namesOf<E>();                                  \
  }
RM_SPEC_ENUM(FsdpSharding)
RM_SPEC_ENUM(FsdpUnits)
RM_SPEC_ENUM(PipelineSchedule)
RM_SPEC_ENUM(ActivationKind)
RM_SPEC_ENUM(DataKind)
RM_SPEC_ENUM(OptimizerKind)
RM_SPEC_ENUM(LrScheduleKind)
RM_SPEC_ENUM(BackendKind)
RM_SPEC_ENUM(DeviceKind)
RM_SPEC_ENUM(Precision)
#undef RM_SPEC_ENUM

DType precisionDType(Precision value) {
  switch (value) {
    case Precision::kFp32:
      return DType::kF32;
    case Precision::kBf16:
      return DType::kBF16;
    case Precision::kFp16:
      return DType::kF16;
  }
  RM_ENFORCE(false, "unknown precision");
  return DType::kF32;
}

double defaultWeightDecay(OptimizerKind kind) {
  return kind == OptimizerKind::kAdamW ? 0.01 : 0.0;
}

// ---------------------------------------------------------------------------------------------
// Worker environment names

namespace {

// What the agent sets for every worker (agent/node_agent.cpp: workerEnvironment, programWorker):
// torchrun's variables by name, and whole families by prefix.
constexpr std::string_view kTorchrunNames[] = {"MASTER_ADDR", "MASTER_PORT", "RANK",
                                               "WORLD_SIZE",  "LOCAL_RANK",  "LOCAL_WORLD_SIZE",
                                               "NODE_RANK",   "GROUP_RANK",  "GROUP_WORLD_SIZE"};
constexpr std::string_view kSetPrefixes[] = {"TORCHELASTIC_", "ROLE_", "RINGMASTER_"};
// Substrings of a name that looks like it holds a secret, matched in upper case.
constexpr std::string_view kSecretWords[] = {"TOKEN",  "KEY",    "PASSWORD",
                                             "PASSWD", "SECRET", "CREDENTIAL"};

}  // namespace

std::optional<std::string> checkEnvName(std::string_view name, bool allow_secret) {
  const auto plain = [](char c, bool first) {
    return c == '_' || std::isalpha(static_cast<unsigned char>(c)) ||
           (!first && std::isdigit(static_cast<unsigned char>(c)));
  };
  if (name.empty()) return "expected a variable name, got an empty one";
  if (name.size() > static_cast<size_t>(kMaxEnvNameLength)) {
    return fmt::format("expected a variable name of at most {} characters, got {}",
                       kMaxEnvNameLength, name.size());
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!plain(name[i], i == 0)) {
      return "not an environment variable name (ASCII letters, digits and '_', not starting "
             "with a digit)";
    }
  }
  for (std::string_view set : kTorchrunNames) {
    if (name == set) {
      return fmt::format(
          "{} is set by Ringmaster for every worker (torchrun's environment) and cannot be "
          "overridden",
          name);
    }
  }
  for (std::string_view prefix : kSetPrefixes) {
    if (name.starts_with(prefix)) {
      return fmt::format(
          "{}* variables are set by Ringmaster for every worker and cannot be overridden", prefix);
    }
  }
  if (!allow_secret) {
    std::string upper(name);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (std::string_view word : kSecretWords) {
      if (upper.find(word) != std::string::npos) {
        return fmt::format(
            "looks like a secret (the name holds \"{}\"), and the spec is recorded with the "
            "run: put it in a NAME=VALUE file on each host and name that file in "
            "launch.env_file",
            word);
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> checkEnvValue(std::string_view value) {
  if (value.find('\0') != std::string_view::npos)
    return "expected a value without NUL characters (an environment cannot carry them)";
  if (value.size() > static_cast<size_t>(kMaxEnvValueBytes)) {
    return fmt::format("expected a value of at most {} bytes, got {}", kMaxEnvValueBytes,
                       value.size());
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Keys of every block, from the field descriptions (spec_fields.h)

namespace {

using Keys = std::vector<std::string_view>;

// The block a field is in ("train.loss_scale" for "train.loss_scale.init", "" for "backend") and
// its key there ("init").
std::string_view blockOf(std::string_view path) {
  const size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : path.substr(0, dot);
}
std::string_view keyOf(std::string_view path) {
  const size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

// The keys block `block` ("" for the document, "launch.hosts[]" for a host) may hold: its fields'
// and its inner blocks', in the table's order.
const Keys& keysOf(std::string_view block) {
  static const std::map<std::string, Keys, std::less<>> keys = [] {
    std::map<std::string, Keys, std::less<>> all;
    auto add = [&](std::string_view in, std::string_view key) {
      Keys& list = all[std::string(in)];
      if (std::find(list.begin(), list.end(), key) == list.end()) list.push_back(key);
    };
    for (const SpecField& f : specFields()) {
      const std::string_view path = f.path;
      add(blockOf(path), keyOf(path));
      for (size_t dot = path.find('.'); dot != std::string_view::npos;
           dot = path.find('.', dot + 1)) {
        const std::string_view outer = path.substr(0, dot);
        if (!outer.ends_with("[]")) add(blockOf(outer), keyOf(outer));
      }
    }
    return all;
  }();
  static const Keys none;
  const auto it = keys.find(block);
  return it == keys.end() ? none : it->second;
}

// The blocks whose keys a misplaced root key is looked up in ("steps" -> "train.steps"), in the
// order they are tried.
constexpr std::string_view kBlocks[] = {
    "strategy",   "strategy.mesh", "strategy.dp", "strategy.tp",     "strategy.pp",
    "model",      "data",          "train",       "optimizer",       "launch",
    "checkpoint", "telemetry",     "program",     "launch.scheduler"};

// The plans whose options the legacy form's strategy block holds beside its kind.
std::vector<const DimensionPlan*> legacyPlans() {
  std::vector<const DimensionPlan*> plans(dataParallelPlans().begin(), dataParallelPlans().end());
  plans.push_back(&pipelineParallelPlan());
  return plans;
}

// The strategy block's own keys besides the legacy form's: the mesh and the dimensions' blocks.
const Keys kMeshFormKeys = {"mesh", "dp", "tp", "pp"};
// What a mesh-form strategy block's unknown key is compared with: its keys and the legacy kind
// ("knd" -> "kind").
const Keys kStrategyKeys = {"mesh", "dp", "tp", "pp", "kind"};

// The model keys of gpt alone, and those of every other kind alone (their fields' shown_when).
const Keys kGptModelKeys = {"vocab_size", "context", "heads", "dim", "bias"};
const Keys kWidthsModelKeys = {"activation", "layer_norm"};

// ---------------------------------------------------------------------------------------------
// Small helpers

std::string join(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return fmt::format("{}.{}", path, key);
}

std::string indexed(std::string_view path, size_t index) {
  return fmt::format("{}[{}]", path, index);
}

// The value as JSON, shortened when long; never throws (invalid UTF-8 is replaced).
std::string shown(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMaxShown = 80;
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown - 3) + "...";
  return text;
}

// "1 stage", "2 stages".
std::string counted(int64_t n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

bool isIntegral(const json& value) {
  if (value.is_number_integer()) return true;
  if (!value.is_number_float()) return false;
  double x = value.get<double>();
  return std::isfinite(x) && std::trunc(x) == x && std::abs(x) < 9.2e18;
}

// The spelling of choice field `field`'s value in `spec` ("synthetic"; model.kind's own).
std::string valueName(const SpecField& field, JobSpec& spec) {
  const SpecValueRef ref = field.binding->in_spec(spec);
  if (const auto* e = std::get_if<EnumValueRef>(&ref)) return std::string(e->name(e->value));
  if (const auto* text = std::get_if<std::string*>(&ref)) return **text;
  RM_ENFORCE(false, fmt::format("{} is not a choice", field.path));
  return {};
}

// ---------------------------------------------------------------------------------------------
// Host, user and Slurm words: each one word of its kind, so that it reaches ssh or sbatch as data

bool isHostName(std::string_view host) {
  return !host.empty() && host.size() <= 255 && host.front() != '-' &&
         std::all_of(host.begin(), host.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) ||
                  (c != '\0' && std::strchr("._-:%[]", c));
         });
}

bool isUserName(std::string_view user) {
  return !user.empty() && user.front() != '-' && std::none_of(user.begin(), user.end(), [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) ||
           std::iscntrl(static_cast<unsigned char>(c)) || c == '@' || c == '\0';
  });
}

// Why `text` cannot be a ProxyJump, [user@]host[:port] (an IPv6 address with a port in
// brackets), or nullopt when it can.
std::optional<std::string> checkProxyJump(std::string_view text) {
  const std::string_view expected = "expected [user@]host[:port] (one bastion)";
  std::string_view rest = text;
  if (const size_t at = rest.find('@'); at != std::string_view::npos) {
    if (!isUserName(rest.substr(0, at)))
      return fmt::format("{}: the user before '@' is not a user name", expected);
    rest = rest.substr(at + 1);
  }
  std::string_view host = rest, port;
  bool has_port = false;
  if (rest.starts_with('[')) {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return fmt::format("{}: '[' without ']'", expected);
    host = rest.substr(1, close - 1);
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty() && after.front() != ':') return fmt::format("{}: text after ']'", expected);
    has_port = !after.empty();
    if (has_port) port = after.substr(1);
  } else if (std::count(rest.begin(), rest.end(), ':') == 1) {
    has_port = true;
    host = rest.substr(0, rest.find(':'));
    port = rest.substr(rest.find(':') + 1);
  }
  if (!isHostName(host) || host.find_first_of("[]") != std::string_view::npos)
    return fmt::format("{}: the host is not a host name or address", expected);
  if (has_port) {
    const bool digits =
        !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        });
    if (!digits || std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535)
      return fmt::format("{}: the port is not in 1..65535", expected);
  }
  return std::nullopt;
}

// Whether every character of `text` is an ASCII letter or digit or one of `others`.
bool onlyOf(std::string_view text, const char* others) {
  return std::all_of(text.begin(), text.end(), [&](char c) {
    return (std::isalnum(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 0x80) ||
           (c != '\0' && std::strchr(others, c));
  });
}

// Slurm's time limit forms: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or none (UNLIMITED,
// INFINITE, in any case).
bool isSlurmTime(std::string_view text) {
  std::string upper(text);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "UNLIMITED" || upper == "INFINITE") return true;
  static const std::regex kForms(R"(([0-9]{1,9}-)?[0-9]{1,9}(:[0-9]{1,9}){0,2})");
  return std::regex_match(std::string(text), kForms);
}

// Why `text` cannot be launch.scheduler's text value `key`, or nullopt when it can. Each is one
// word that sbatch reads from its own #SBATCH line: nothing a shell or sbatch's own parser would
// split, quote or expand.
std::optional<std::string> checkSlurmWord(std::string_view key, std::string_view text) {
  if (text.size() > static_cast<size_t>(key == "job_name" ? kMaxSlurmJobName : kMaxSlurmWordBytes))
    return fmt::format("expected at most {} characters, got {}",
                       key == "job_name" ? kMaxSlurmJobName : kMaxSlurmWordBytes, text.size());
  if (key == "mem") {
    const size_t digits = text.find_first_not_of("0123456789");
    if (text.empty() || digits == 0 ||
        (digits != std::string_view::npos &&
         (digits + 1 != text.size() || !std::strchr("KMGT", text[digits]))))
      return "expected a size in Slurm's form: digits with an optional unit K, M, G or T (16G, "
             "2000M; 0: all of the node's memory)";
    return std::nullopt;
  }
  if (key == "time") {
    if (!isSlurmTime(text))
      return "expected a time limit in Slurm's form: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S, "
             "or UNLIMITED";
    return std::nullopt;
  }
  const bool constraint = key == "constraint";
  if (text.starts_with('-') || !onlyOf(text, constraint ? "._&|*[]()!,:-" : "._@+-")) {
    return constraint ? "expected a node feature expression: letters, digits and . _ & | * [ ] ( ) "
                        "! , : - (no blank or quote), not starting with '-'"
                      : "expected one Slurm name: letters, digits and . _ @ + - (no blank or "
                        "quote), not starting with '-'";
  }
  return std::nullopt;
}

// The sbatch options refused in extra_sbatch, with every abbreviation sbatch would take for them:
// those the batch script sets itself (slurm_script.h), and those that make sbatch print instead of
// submit.
constexpr std::string_view kSbatchOptionsSet[] = {
    "nodes",    "ntasks", "ntasks-per-node", "output", "error",
    "parsable", "wrap",   "chdir",           "export", "array"};
constexpr std::string_view kSbatchOptionsPrinting[] = {"help", "usage", "version"};

// Why `item` cannot be an extra sbatch option, or nullopt when it can: one --name=value or
// --name word, the value printable ASCII without blank, quote, backslash, shell character or the
// '#' that starts a comment in an #SBATCH line.
std::optional<std::string> checkExtraSbatch(std::string_view item) {
  if (item.size() > static_cast<size_t>(kMaxSlurmWordBytes))
    return fmt::format("expected at most {} characters, got {}", kMaxSlurmWordBytes, item.size());
  if (!item.starts_with("--")) {
    return "expected one option --name=value or --name (a single-dash option is refused: write "
           "its long name)";
  }
  const size_t equals = item.find('=');
  const std::string_view name =
      item.substr(2, equals == std::string_view::npos ? item.npos : equals - 2);
  if (name.empty() || !std::islower(static_cast<unsigned char>(name.front())) ||
      !std::all_of(name.begin(), name.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) ||
               std::isdigit(static_cast<unsigned char>(c)) || c == '-';
      }))
    return "expected an option name of lower-case letters, digits and '-' after --";
  for (std::string_view set : kSbatchOptionsSet) {
    if (!set.starts_with(name)) continue;
    if (set == name)
      return fmt::format(
          "--{} is set by Ringmaster (launch.scheduler and the batch script); it "
          "cannot be given here",
          name);
    return fmt::format(
        "--{} abbreviates --{}, which Ringmaster sets (launch.scheduler and the "
        "batch script); it cannot be given here",
        name, set);
  }
  for (std::string_view printing : kSbatchOptionsPrinting) {
    if (printing.starts_with(name))
      return fmt::format("--{} makes sbatch print --{}'s text and submit nothing", name, printing);
  }
  if (equals == std::string_view::npos) return std::nullopt;
  const std::string_view value = item.substr(equals + 1);
  if (value.empty()) return "expected a value after '=' (or --name alone)";
  for (char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f || std::strchr("'\"\\$`;&|<>#", c)) {
      return "the value may hold printable ASCII but no blank, quote, backslash, $, `, ;, &, |, "
             "<, > or # (where sbatch's own reading of the line starts a comment)";
    }
  }
  return std::nullopt;
}

// How a key outside the kind's set is reported: "only valid when strategy.kind is fsdp".
using KindGate = std::function<std::optional<std::string>(std::string_view key)>;

// ---------------------------------------------------------------------------------------------
// The parser

class SpecParser {
 public:
  explicit SpecParser(std::vector<SpecProblem>* problems) : problems_(problems) {}

  JobSpec parse(const json& root) {
    JobSpec spec;
    if (!root.is_object()) {
      report("", "expected a JSON object, got " + shown(root));
      return spec;
    }
    job_kind_ = jobKindOf(root);
    checkKeys(root, "", keysOf(""), nullptr);
    if (const json* v = need(root, "", "name")) parseName(*v, spec.name);
    readValues(root, "", "", spec);
    if (const json* v = find(root, "program"); v && !v->is_null()) {
      parseProgramJob(root, *v, spec);
      return spec;
    }
    if (const json* v = need(root, "", "strategy")) parseStrategy(*v, spec);
    if (const json* v = need(root, "", "model")) parseModel(*v, spec);
    if (const json* v = need(root, "", "data")) parseKindBlock(*v, "data", spec);
    if (const json* v = need(root, "", "train")) parseTrain(*v, spec);
    if (const json* v = need(root, "", "optimizer")) parseOptimizer(*v, spec);
    if (const json* v = find(root, "launch")) {
      parseLaunch(*v, spec);
    } else {
      world_size_ = worldSize(spec);
    }
    if (const json* v = find(root, "checkpoint"); v && !v->is_null()) {
      spec.checkpoint.emplace();
      parseValueBlock(*v, "checkpoint", spec);
    }
    if (const json* v = find(root, "telemetry")) parseValueBlock(*v, "telemetry", spec);
    resolveMesh(spec);
    crossCheck(spec);
    // A pipeline of one stage is none: its options are read and checked, then dropped.
    if (stageCount(spec) == 1) spec.strategy.pipeline = PipelineSpec{};
    return spec;
  }

 private:
  // --- reporting -------------------------------------------------------------------------------

  void report(std::string path, std::string message) {
    problems_->push_back({writtenPath(std::move(path)), std::move(message)});
  }

  // Where the document has the value at canonical path `path`: in the legacy strategy form a
  // dimension's option is the strategy block's own ("strategy.pp.schedule" -> "strategy.schedule")
  // and the mesh is the strategy's kind with the world size ("strategy").
  std::string writtenPath(std::string path) const {
    if (!legacy_strategy_) return path;
    for (std::string_view block : {"strategy.dp.", "strategy.tp.", "strategy.pp."})
      if (path.starts_with(block)) return "strategy." + path.substr(block.size());
    if (path.starts_with("strategy.mesh.")) return "strategy";
    return path;
  }

  // True when nothing was reported at `path`, inside it or at a block containing it: the value
  // read there can be trusted by a cross-field check.
  bool okAt(std::string_view canonical) const {
    const std::string written = writtenPath(std::string(canonical));
    const std::string_view path = written;
    auto within = [](std::string_view inner, std::string_view outer) {
      if (outer.empty()) return true;
      if (inner.size() < outer.size() || inner.substr(0, outer.size()) != outer) return false;
      return inner.size() == outer.size() || inner[outer.size()] == '.' ||
             inner[outer.size()] == '[';
    };
    for (const SpecProblem& problem : *problems_) {
      if (within(path, problem.path) || within(problem.path, path)) return false;
    }
    return true;
  }

  template <typename... Paths>
  bool allOk(const Paths&... paths) const {
    return (okAt(paths) && ...);
  }

  // --- objects and keys ------------------------------------------------------------------------

  static const json* find(const json& object, std::string_view key) {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }

  const json* need(const json& object, std::string_view path, std::string_view key) {
    const json* value = find(object, key);
    if (!value) report(join(path, key), "required");
    return value;
  }

  bool expectObject(const json& value, std::string_view path) {
    if (value.is_object()) return true;
    report(std::string(path), "expected an object, got " + shown(value));
    return false;
  }

  // Reports every key outside `allowed` (with the nearest allowed key as a suggestion); `gate`
  // says when an allowed key belongs to another kind than the block's.
  void checkKeys(const json& object, std::string_view path, const Keys& allowed,
                 const KindGate& gate) {
    for (const auto& [key, value] : object.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) {
        if (gate) {
          if (auto why = gate(key)) report(join(path, key), *why);
        }
        continue;
      }
      std::string message = "unknown key";
      if (std::string_view near = closestName(key, allowed); !near.empty()) {
        message += fmt::format(" (did you mean \"{}\"?)", near);
      } else if (path.empty()) {
        for (std::string_view block : kBlocks) {
          const Keys& keys = keysOf(block);
          if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
            message += fmt::format(" (did you mean \"{}.{}\"?)", block, key);
            break;
          }
        }
      }
      report(join(path, key), message);
    }
  }

  // --- values ----------------------------------------------------------------------------------

  // An integer in [min, max]. `expected` describes the lower bound ("a positive integer"); above
  // `max` the message adds "no larger than max" unless `range_in_text` says `expected` has it.
  template <typename T>
  bool readInt(const json& value, const std::string& path, T& out, int64_t min, int64_t max,
               std::string_view expected, bool range_in_text = false) {
    if (!isIntegral(value)) {
      report(path, fmt::format("expected {}, got {}", expected, shown(value)));
      return false;
    }
    bool too_big = false;
    int64_t x = 0;
    if (value.is_number_unsigned() &&
        value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      too_big = true;
    } else {
      x = value.is_number_float() ? static_cast<int64_t>(value.get<double>())
                                  : value.get<int64_t>();
      too_big = x > max;
    }
    if (!too_big && x < min) {
      report(path, fmt::format("expected {}, got {}", expected, shown(value)));
      return false;
    }
    if (too_big) {
      if (range_in_text) {
        report(path, fmt::format("expected {}, got {}", expected, shown(value)));
      } else {
        report(path,
               fmt::format("expected {} no larger than {}, got {}", expected, max, shown(value)));
      }
      return false;
    }
    out = static_cast<T>(x);
    return true;
  }

  bool readSeed(const json& value, const std::string& path, uint64_t& out) {
    if (value.is_number_unsigned()) {
      out = value.get<uint64_t>();
      return true;
    }
    if (value.is_number_integer() && value.get<int64_t>() >= 0) {
      out = static_cast<uint64_t>(value.get<int64_t>());
      return true;
    }
    if (isIntegral(value) && value.get<double>() >= 0) {
      out = static_cast<uint64_t>(value.get<double>());
      return true;
    }
    report(path, "expected a non-negative integer, got " + shown(value));
    return false;
  }

  // A finite number for which `fits` holds; above `max` the message adds "no larger than max".
  bool readNumber(const json& value, const std::string& path, double& out,
                  std::string_view expected, const std::function<bool(double)>& fits,
                  double max = std::numeric_limits<double>::infinity()) {
    if (!value.is_number() || !std::isfinite(value.get<double>()) || !fits(value.get<double>())) {
      report(path, fmt::format("expected {}, got {}", expected, shown(value)));
      return false;
    }
    if (value.get<double>() > max) {
      report(path,
             fmt::format("expected {} no larger than {}, got {}", expected, max, shown(value)));
      return false;
    }
    out = value.get<double>();
    return true;
  }

  bool readPositive(const json& value, const std::string& path, double& out,
                    double max = std::numeric_limits<double>::infinity()) {
    return readNumber(
        value, path, out, "a positive number", [](double x) { return x > 0; }, max);
  }

  bool readBool(const json& value, const std::string& path, bool& out) {
    if (!value.is_boolean()) {
      report(path, "expected true or false, got " + shown(value));
      return false;
    }
    out = value.get<bool>();
    return true;
  }

  // A non-empty string without NUL characters (a path, a user name).
  bool readText(const json& value, const std::string& path, std::string& out) {
    if (!value.is_string() || value.get_ref<const std::string&>().empty() ||
        value.get_ref<const std::string&>().find('\0') != std::string::npos) {
      report(path, "expected a non-empty string, got " + shown(value));
      return false;
    }
    out = value.get<std::string>();
    return true;
  }

  // As readText, into an optional; null leaves it unset.
  bool readOptionalText(const json& value, const std::string& path,
                        std::optional<std::string>& out) {
    if (value.is_null()) return true;
    std::string text;
    if (!readText(value, path, text)) return false;
    out = std::move(text);
    return true;
  }

  // "expected one of "a", "b", got X".
  template <typename Names>
  void reportChoice(const json& value, const std::string& path, const Names& choices) {
    std::string names;
    for (std::string_view name : choices) {
      names += fmt::format("{}\"{}\"", names.empty() ? "" : ", ", name);
    }
    report(path, fmt::format("expected one of {}, got {}", names, shown(value)));
  }

  // --- plain values, read as their SpecField describes them ------------------------------------

  // The value of choice field `controller` ("data.kind") as read, or nullopt while it is unknown
  // (left out while required, or invalid).
  std::optional<std::string> kindRead(const std::string& controller, JobSpec& spec) const {
    if (!okAt(controller)) return std::nullopt;
    return valueName(*findSpecField(controller), spec);
  }

  // Whether `field` belongs to the kinds read so far; nullopt while its controller is unknown, when
  // it is read if present but not required.
  std::optional<bool> belongs(const SpecField& field, JobSpec& spec) const {
    if (!field.shown_when || field.form_condition_only) return true;
    const std::optional<std::string> kind = kindRead(field.shown_when->controller, spec);
    if (!kind) return std::nullopt;
    const std::vector<std::string>& kinds = field.shown_when->kinds;
    return std::find(kinds.begin(), kinds.end(), *kind) != kinds.end();
  }

  // Reads field `path` of block `object` (at `object_path`: "launch.hosts[0]" for a host's), when
  // it belongs to the kinds read so far: a required one must be there.
  void readField(const json& object, const std::string& object_path, const SpecField& field,
                 JobSpec& spec, LaunchHostSpec* host = nullptr) {
    const std::optional<bool> in_kind = belongs(field, spec);
    if (in_kind == false) return;
    const std::string_view key = keyOf(field.path);
    const json* value =
        field.required && in_kind == true ? need(object, object_path, key) : find(object, key);
    if (!value) return;
    const SpecValueRef ref = host ? field.binding->in_host(*host) : field.binding->in_spec(spec);
    readValue(field, *value, join(object_path, key), ref);
  }

  // Reads every plain value field of block `block` ("data"; "" for the document's own,
  // "launch.hosts[]" for a host's) but its kind, which the block reads first.
  void readValues(const json& object, std::string_view block, const std::string& object_path,
                  JobSpec& spec, LaunchHostSpec* host = nullptr) {
    for (const SpecField& field : specFields()) {
      if (field.binding && blockOf(field.path) == block && keyOf(field.path) != "kind" &&
          (!field.job || *field.job == job_kind_))
        readField(object, object_path, field, spec, host);
    }
  }

  // Reads block `block`'s kind ("data.kind"); its name, or nullopt when it is unknown.
  std::optional<std::string> readKind(const json& object, const std::string& block, JobSpec& spec) {
    const std::string kind_path = join(block, "kind");
    readField(object, block, *findSpecField(kind_path), spec);
    return kindRead(kind_path, spec);
  }

  // One value into the member `ref` names, checked against the field's type and bounds.
  bool readValue(const SpecField& field, const json& value, const std::string& path,
                 const SpecValueRef& ref) {
    if (const auto* e = std::get_if<EnumValueRef>(&ref)) {
      if (value.is_string() && e->set(e->value, value.get_ref<const std::string&>())) return true;
      reportChoice(value, path, field.choices);
      return false;
    }
    if (auto* out = std::get_if<std::string*>(&ref)) return readString(field, value, path, **out);
    if (auto* out = std::get_if<std::optional<std::string>*>(&ref))
      return readOptionalText(value, path, **out);
    if (auto* out = std::get_if<bool*>(&ref)) return readBool(value, path, **out);
    if (auto* out = std::get_if<uint64_t*>(&ref)) return readSeed(value, path, **out);
    if (auto* out = std::get_if<int*>(&ref)) return readBoundedInt(field, value, path, **out);
    if (auto* out = std::get_if<int64_t*>(&ref)) return readBoundedInt(field, value, path, **out);
    if (auto* out = std::get_if<std::optional<int>*>(&ref))
      return readOptional(value, **out,
                          [&](int& x) { return readBoundedInt(field, value, path, x); });
    if (auto* out = std::get_if<std::optional<int64_t>*>(&ref)) {
      return readOptional(value, **out,
                          [&](int64_t& x) { return readBoundedInt(field, value, path, x); });
    }
    if (auto* out = std::get_if<double*>(&ref)) return readBoundedNumber(field, value, path, **out);
    if (auto* out = std::get_if<std::optional<double>*>(&ref)) {
      return readOptional(value, **out,
                          [&](double& x) { return readBoundedNumber(field, value, path, x); });
    }
    RM_ENFORCE(false, fmt::format("{} has no member to read into", field.path));
    return false;
  }

  // A value that null leaves unset.
  template <typename T, typename Read>
  static bool readOptional(const json& value, std::optional<T>& out, const Read& read) {
    if (value.is_null()) return true;
    T x{};
    if (!read(x)) return false;
    out = x;
    return true;
  }

  // A choice among the field's own (model.kind: the registered models), or text.
  bool readString(const SpecField& field, const json& value, const std::string& path,
                  std::string& out) {
    const std::vector<std::string>& choices = field.choices;
    if (field.type == FieldType::kChoice) {
      if (value.is_string() && std::find(choices.begin(), choices.end(),
                                         value.get_ref<const std::string&>()) != choices.end()) {
        out = value.get<std::string>();
        return true;
      }
      reportChoice(value, path, choices);
      return false;
    }
    // Any string is a description; a path may be empty where that means "none".
    if (field.empty_allowed && value.is_string() &&
        (field.type == FieldType::kText || value.get_ref<const std::string&>().empty())) {
      out = value.get<std::string>();
      return true;
    }
    if (field.empty_allowed && field.type == FieldType::kText) {
      report(path, "expected a string, got " + shown(value));
      return false;
    }
    return readText(value, path, out);
  }

  // An integer within the field's bounds, the message in its words.
  template <typename T>
  bool readBoundedInt(const SpecField& field, const json& value, const std::string& path, T& out) {
    const int64_t min =
        field.minimum ? static_cast<int64_t>(*field.minimum) : std::numeric_limits<int64_t>::min();
    const int64_t max =
        field.maximum ? static_cast<int64_t>(*field.maximum) : std::numeric_limits<int64_t>::max();
    if (!field.expected.empty()) return readInt(value, path, out, min, max, field.expected, true);
    std::string words = min == 0   ? "a non-negative integer"
                        : min == 1 ? "a positive integer"
                                   : fmt::format("an integer of at least {}", min);
    if (!field.zero_means.empty()) words += fmt::format(" (0: {})", field.zero_means);
    return readInt(value, path, out, min, max, words);
  }

  // A number within the field's bounds, the message in its words.
  bool readBoundedNumber(const SpecField& field, const json& value, const std::string& path,
                         double& out) {
    const auto above_minimum = [&](double x) {
      return !field.minimum || (field.exclusive_minimum ? x > *field.minimum : x >= *field.minimum);
    };
    const auto below_maximum = [&](double x) {
      return !field.maximum || (field.exclusive_maximum ? x < *field.maximum : x <= *field.maximum);
    };
    if (!field.expected.empty()) {
      return readNumber(value, path, out, field.expected,
                        [&](double x) { return above_minimum(x) && below_maximum(x); });
    }
    const std::string words = field.minimum != 0.0      ? "a number"
                              : field.exclusive_minimum ? "a positive number"
                                                        : "a non-negative number";
    return readNumber(value, path, out, words, above_minimum,
                      field.maximum.value_or(std::numeric_limits<double>::infinity()));
  }

  // --- blocks ----------------------------------------------------------------------------------

  void parseName(const json& value, std::string& out) {
    if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
      report("name", "expected a non-empty string, got " + shown(value));
      return;
    }
    const std::string& name = value.get_ref<const std::string&>();
    if (name.size() > static_cast<size_t>(kMaxNameLength)) {
      report("name",
             fmt::format("expected at most {} characters, got {}", kMaxNameLength, name.size()));
      return;
    }
    bool plain = std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
    if (!plain) {
      report("name", "expected only letters, digits, '.', '_' and '-', got " + shown(value));
      return;
    }
    out = name;
  }

  // The options of a block's kind, from the fields' conditions: a key whose field belongs to other
  // kinds of `kind_path` than `kind` is misplaced. While the kind is unknown every option is read
  // (so its value is still checked) and none is misplaced.
  static KindGate kindGate(std::string kind_path, std::optional<std::string> kind) {
    return [kind_path, kind](std::string_view key) -> std::optional<std::string> {
      if (!kind) return std::nullopt;
      const SpecField* field = findSpecField(join(blockOf(kind_path), key));
      if (!field || !field->shown_when || field->form_condition_only ||
          field->shown_when->controller != kind_path)
        return std::nullopt;
      const std::vector<std::string>& kinds = field->shown_when->kinds;
      if (std::find(kinds.begin(), kinds.end(), *kind) != kinds.end()) return std::nullopt;
      std::string names;
      for (size_t i = 0; i < kinds.size(); ++i) {
        names += (i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ");
        names += kinds[i];
      }
      return fmt::format("only valid when {} is {}", kind_path, names);
    };
  }

  // A block of plain values with a kind: the kind, then its keys, then its values.
  std::optional<std::string> parseKindBlock(const json& value, const std::string& path,
                                            JobSpec& spec) {
    if (!expectObject(value, path)) return std::nullopt;
    std::optional<std::string> kind = readKind(value, path, spec);
    checkKeys(value, path, keysOf(path), kindGate(join(path, "kind"), kind));
    readValues(value, path, path, spec);
    return kind;
  }

  // A block of plain values alone.
  bool parseValueBlock(const json& value, const std::string& path, JobSpec& spec) {
    if (!expectObject(value, path)) return false;
    checkKeys(value, path, keysOf(path), nullptr);
    readValues(value, path, path, spec);
    return true;
  }

  // --- the strategy ----------------------------------------------------------------------------

  // The mesh form ({"mesh": ..., "dp": ..., "tp": ..., "pp": ...}) or the legacy flat form
  // ({"kind": "ddp", ...}), which is read into the same members. A mesh size left out is resolved
  // once the world size is known (resolveMesh).
  void parseStrategy(const json& value, JobSpec& spec) {
    const std::string path = "strategy";
    if (!expectObject(value, path)) return;
    if (value.contains("kind")) {
      legacy_strategy_ = true;
      parseLegacyStrategy(value, spec);
      return;
    }
    checkKeys(value, path, kStrategyKeys, nullptr);
    if (const json* mesh = find(value, "mesh");
        mesh && parseValueBlock(*mesh, "strategy.mesh", spec))
      mesh_dp_given_ = mesh->contains("dp");
    if (const json* dp = find(value, "dp")) parseDataParallel(*dp, spec);
    if (const json* tp = find(value, "tp")) parseDimension(*tp, tensorParallelPlan(), spec);
    if (const json* pp = find(value, "pp")) parseDimension(*pp, pipelineParallelPlan(), spec);
  }

  // strategy.dp: a registered data-parallel plan's name and its options.
  void parseDataParallel(const json& value, JobSpec& spec) {
    const std::string path = "strategy.dp";
    if (!expectObject(value, path)) return;
    const DimensionPlan* plan = findDataParallelPlan(spec.strategy.data_parallel);
    if (const json* kind = find(value, "kind")) plan = readDataParallelKind(*kind, spec);
    checkKeys(value, path, keysOf(path), optionGate("strategy.dp.kind", plan, plan != nullptr));
    BlockReader reader(*this, value, path);
    // Every plan reads its options while the kind is unknown, so that each value is still checked.
    for (const DimensionPlan* candidate : dataParallelPlans())
      if (!plan || plan == candidate) candidate->readOptions(reader, spec.strategy);
  }

  // strategy.dp.kind: the plan, or nullptr (reported, with the nearest name).
  const DimensionPlan* readDataParallelKind(const json& value, JobSpec& spec) {
    const std::string path = "strategy.dp.kind";
    const std::vector<std::string_view> names = dataParallelPlanNames();
    if (value.is_string()) {
      const std::string& name = value.get_ref<const std::string&>();
      if (const DimensionPlan* plan = findDataParallelPlan(name)) {
        spec.strategy.data_parallel = name;
        return plan;
      }
      if (std::string_view near = closestName(name, names); !near.empty()) {
        report(path, fmt::format("unknown data-parallel plan {} (did you mean \"{}\"?)",
                                 shown(value), near));
        return nullptr;
      }
    }
    reportChoice(value, path, names);
    return nullptr;
  }

  // strategy.tp or strategy.pp: its plan's options.
  void parseDimension(const json& value, const DimensionPlan& plan, JobSpec& spec) {
    const std::string path = join("strategy", toString(plan.dim()));
    if (!expectObject(value, path)) return;
    checkKeys(value, path, keysOf(path), nullptr);
    BlockReader reader(*this, value, path);
    plan.readOptions(reader, spec.strategy);
  }

  // How an option of another plan than `plan` (chosen at `controller`; nullptr: none, the legacy
  // single) is refused: "only valid when strategy.dp.kind is fsdp". No gate while the choice is
  // unknown.
  static KindGate optionGate(std::string controller, const DimensionPlan* plan, bool known) {
    if (!known) return nullptr;
    const std::vector<const DimensionPlan*> plans =
        controller == "strategy.kind" ? legacyPlans()
                                      : std::vector<const DimensionPlan*>(
                                            dataParallelPlans().begin(), dataParallelPlans().end());
    return [controller, plan, plans](std::string_view key) -> std::optional<std::string> {
      const auto reads = [&](const DimensionPlan* p) {
        const std::vector<std::string_view> keys = p->optionKeys();
        return std::find(keys.begin(), keys.end(), key) != keys.end();
      };
      if (key == "kind" || (plan && reads(plan))) return std::nullopt;
      std::vector<std::string_view> owners;
      for (const DimensionPlan* other : plans)
        if (reads(other)) owners.push_back(other->name());
      if (owners.empty()) return std::nullopt;
      return fmt::format("only valid when {} is {}", controller, fmt::join(owners, " or "));
    };
  }

  // {"kind": "ddp", "bucket_cap_mb": 25}: the kind's options beside it, the mesh it means made
  // once the world size is known (resolveMesh). Mesh-form keys beside it are refused.
  void parseLegacyStrategy(const json& value, JobSpec& spec) {
    const std::string path = "strategy";
    const std::vector<std::string_view> kinds = legacyStrategyKinds();
    const json& kind = value["kind"];
    const DimensionPlan* plan = nullptr;
    if (kind.is_null()) {
      report("strategy.kind", "required");
    } else if (!kind.is_string() || std::find(kinds.begin(), kinds.end(),
                                              kind.get_ref<const std::string&>()) == kinds.end()) {
      reportChoice(kind, "strategy.kind", kinds);
    } else {
      legacy_kind_ = kind.get<std::string>();
      plan = *legacy_kind_ == "pipeline" ? &pipelineParallelPlan()
                                         : findDataParallelPlan(*legacy_kind_);
      if (plan && plan->dim() == MeshDim::kDp) spec.strategy.data_parallel = *legacy_kind_;
    }
    Keys allowed = {"kind"};
    for (const DimensionPlan* each : legacyPlans())
      for (std::string_view key : each->optionKeys())
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) allowed.push_back(key);
    allowed.insert(allowed.end(), kMeshFormKeys.begin(), kMeshFormKeys.end());
    const KindGate options = optionGate("strategy.kind", plan, legacy_kind_.has_value());
    checkKeys(value, path, allowed, [&](std::string_view key) -> std::optional<std::string> {
      if (std::find(kMeshFormKeys.begin(), kMeshFormKeys.end(), key) != kMeshFormKeys.end()) {
        return "not valid beside strategy.kind (the legacy form); write the strategy as "
               "strategy.mesh and strategy.dp.kind without strategy.kind";
      }
      return options ? options(key) : std::nullopt;
    });
    BlockReader reader(*this, value, path);
    for (const DimensionPlan* each : legacyPlans())
      if (!legacy_kind_ || each == plan) each->readOptions(reader, spec.strategy);
  }

  // A strategy block as its plan reads it: present options through the parser's readers.
  class BlockReader final : public OptionReader {
   public:
    BlockReader(SpecParser& parser, const json& block, std::string path)
        : parser_(parser), block_(block), path_(std::move(path)) {}
    void boolean(std::string_view key, bool& out) override {
      if (const json* v = find(block_, key)) parser_.readBool(*v, join(path_, key), out);
    }
    void positive(std::string_view key, double& out, double max) override {
      if (const json* v = find(block_, key)) parser_.readPositive(*v, join(path_, key), out, max);
    }
    void integer(std::string_view key, int& out, int64_t min, int64_t max,
                 std::string_view expected) override {
      if (const json* v = find(block_, key))
        parser_.readInt(*v, join(path_, key), out, min, max, expected);
    }
    std::optional<std::string> choice(std::string_view key,
                                      const std::vector<std::string_view>& names) override {
      const json* v = find(block_, key);
      if (!v) return std::nullopt;
      if (v->is_string() &&
          std::find(names.begin(), names.end(), v->get_ref<const std::string&>()) != names.end()) {
        return v->get<std::string>();
      }
      parser_.reportChoice(*v, join(path_, key), names);
      return std::nullopt;
    }
    void indexLists(std::string_view key, std::vector<std::vector<int>>& out,
                    int64_t max) override {
      if (const json* v = find(block_, key)) parser_.parseStages(*v, join(path_, key), out, max);
    }

   private:
    SpecParser& parser_;
    const json& block_;
    std::string path_;
  };

  void parseStages(const json& value, const std::string& path, std::vector<std::vector<int>>& out,
                   int64_t max) {
    if (!value.is_array() || value.empty()) {
      report(path,
             "expected a non-empty array of stages (arrays of layer indices), got " + shown(value));
      return;
    }
    std::vector<std::vector<int>> stages;
    bool ok = true;
    for (size_t s = 0; s < value.size(); ++s) {
      const json& stage = value[s];
      std::string stage_path = indexed(path, s);
      if (!stage.is_array() || stage.empty()) {
        report(stage_path, "expected a non-empty array of layer indices, got " + shown(stage));
        ok = false;
        continue;
      }
      std::vector<int> layers;
      for (size_t i = 0; i < stage.size(); ++i) {
        int layer = 0;
        if (readInt(stage[i], indexed(stage_path, i), layer, 0, max, "a non-negative integer")) {
          layers.push_back(layer);
        } else {
          ok = false;
        }
      }
      stages.push_back(std::move(layers));
    }
    if (ok) out = std::move(stages);
  }

  void parseModel(const json& value, JobSpec& spec) {
    const std::string path = "model";
    if (!expectObject(value, path)) return;
    ModelSpec& out = spec.model;
    std::optional<bool> gpt;  // unknown until the kind is read
    if (const std::optional<std::string> kind = readKind(value, path, spec)) gpt = *kind == "gpt";
    auto contains = [](const Keys& keys, std::string_view key) {
      return std::find(keys.begin(), keys.end(), key) != keys.end();
    };
    checkKeys(value, path, keysOf(path), [&](std::string_view key) -> std::optional<std::string> {
      if (!gpt) return std::nullopt;
      if (*gpt && contains(kWidthsModelKeys, key)) return "not valid when model.kind is gpt";
      if (!*gpt && contains(kGptModelKeys, key)) return "only valid when model.kind is gpt";
      return std::nullopt;
    });
    if (const json* v = need(value, path, "layers")) {
      // gpt: the number of transformer blocks; the other kinds: the widths.
      if (gpt == true || (!gpt && v->is_number())) {
        readInt(*v, join(path, "layers"), out.block_count, 1, kMaxLayerCount,
                "a positive integer (gpt: the number of transformer blocks)");
      } else {
        parseLayers(*v, join(path, "layers"), out.layers);
      }
    }
    readValues(value, path, path, spec);
  }

  void parseLayers(const json& value, const std::string& path, std::vector<int64_t>& out) {
    if (!value.is_array() || value.size() < 2) {
      report(path, "expected an array of at least 2 layer widths, got " + shown(value));
      return;
    }
    if (value.size() > static_cast<size_t>(kMaxLayerCount)) {
      report(path,
             fmt::format("expected at most {} layer widths, got {}", kMaxLayerCount, value.size()));
      return;
    }
    std::vector<int64_t> layers;
    bool ok = true;
    for (size_t i = 0; i < value.size(); ++i) {
      int64_t width = 0;
      if (readInt(value[i], indexed(path, i), width, 1, kMaxLayerWidth, "a positive integer")) {
        layers.push_back(width);
      } else {
        ok = false;
      }
    }
    if (!ok) return;
    // Weights and biases of every Linear layer; widths are <= 2^20, so no overflow.
    int64_t parameters = 0;
    for (size_t i = 0; i + 1 < layers.size(); ++i) {
      parameters += layers[i] * layers[i + 1] + layers[i + 1];
    }
    if (parameters > kMaxParameters) {
      report(path, fmt::format("{} parameters is more than the {} supported", parameters,
                               kMaxParameters));
      return;
    }
    out = std::move(layers);
  }

  void parseTrain(const json& value, JobSpec& spec) {
    const std::string path = "train";
    if (!parseValueBlock(value, path, spec)) return;
    if (const json* v = find(value, "loss_scale")) {
      if (spec.train.precision != Precision::kFp16) {
        report(join(path, "loss_scale"),
               fmt::format("applies to train.precision \"fp16\" only (this job's is \"{}\")",
                           toString(spec.train.precision)));
      } else {
        parseValueBlock(*v, "train.loss_scale", spec);
      }
    }
  }

  void parseOptimizer(const json& value, JobSpec& spec) {
    const std::string path = "optimizer";
    if (!expectObject(value, path)) return;
    OptimizerSpec& out = spec.optimizer;
    const std::optional<std::string> kind_name = readKind(value, path, spec);
    if (kind_name) out.weight_decay = defaultWeightDecay(out.kind);
    checkKeys(value, path, keysOf(path), kindGate(join(path, "kind"), kind_name));
    readValues(value, path, path, spec);
    const SpecField& betas = *findSpecField("optimizer.betas");
    if (const json* v = find(value, "betas"); v && belongs(betas, spec) != false) {
      std::string betas_path = join(path, "betas");
      if (!v->is_array() || v->size() != 2) {
        report(betas_path, "expected an array of two numbers in [0, 1), got " + shown(*v));
      } else {
        readBoundedNumber(betas, (*v)[0], indexed(betas_path, 0), out.betas[0]);
        readBoundedNumber(betas, (*v)[1], indexed(betas_path, 1), out.betas[1]);
      }
    }
    if (const json* v = find(value, "schedule")) parseKindBlock(*v, "optimizer.schedule", spec);
    if (kind_name == "sgd" && out.nesterov &&
        allOk("optimizer.momentum", "optimizer.dampening", "optimizer.nesterov") &&
        (out.momentum <= 0 || out.dampening != 0)) {
      report("optimizer.nesterov",
             fmt::format("requires momentum > 0 and dampening 0 (as in PyTorch), got momentum {} "
                         "and dampening {}",
                         out.momentum, out.dampening));
    }
  }

  bool readHostName(const json& value, const std::string& path, std::string& out) {
    if (!value.is_string() || !isHostName(value.get_ref<const std::string&>())) {
      report(path, "expected a host name or address, got " + shown(value));
      return false;
    }
    out = value.get<std::string>();
    return true;
  }

  // A host's (or the login node's) user and proxy_jump, each in `object` at `path` when there.
  void readUserAndProxyJump(const json& object, const std::string& path, LaunchHostSpec& host) {
    if (const json* v = find(object, "user")) {
      if (readOptionalText(*v, join(path, "user"), host.user) && host.user &&
          !isUserName(*host.user))
        report(join(path, "user"), "expected a user name, got " + shown(*v));
    }
    if (const json* v = find(object, "proxy_jump")) {
      if (readOptionalText(*v, join(path, "proxy_jump"), host.proxy_jump) && host.proxy_jump) {
        if (std::optional<std::string> why = checkProxyJump(*host.proxy_jump))
          report(join(path, "proxy_jump"), *why + ", got " + shown(*v));
      }
    }
  }

  void parseLaunch(const json& value, JobSpec& spec) {
    const std::string path = "launch";
    if (!expectObject(value, path)) return;
    checkKeys(value, path, keysOf(path), nullptr);
    const json* scheduler = find(value, "scheduler");
    if (scheduler && scheduler->is_null()) scheduler = nullptr;
    if (const json* v = find(value, "hosts")) {
      if (scheduler) {
        report(join(path, "hosts"),
               "not valid beside launch.scheduler, which allocates the nodes: use one or the "
               "other");
      } else {
        parseHosts(*v, join(path, "hosts"), spec);
      }
    } else if (!scheduler) {
      world_size_ = 1;
    }
    if (scheduler) parseScheduler(*scheduler, spec);
    readValues(value, path, path, spec);
    if (const json* v = find(value, "env")) parseEnv(*v, join(path, "env"), spec.launch.env);
  }

  // launch.scheduler {"kind": "slurm", ...} (issue 35): the allocation, the words sbatch is given
  // (each one word of its kind, so that it reaches sbatch as data, never as shell), and where
  // sbatch runs. The world is nodes × ranks_per_node; the spec has no launch.hosts.
  void parseScheduler(const json& value, JobSpec& spec) {
    const std::string path = "launch.scheduler";
    spec.launch.hosts.clear();
    spec.launch.slurm.emplace();
    scheduled_ = true;
    if (!expectObject(value, path)) return;
    if (const json* kind = need(value, path, "kind")) {
      const std::vector<std::string>& kinds = findSpecField(join(path, "kind"))->choices;
      if (!kind->is_string() ||
          std::find(kinds.begin(), kinds.end(), kind->get_ref<const std::string&>()) == kinds.end())
        reportChoice(*kind, join(path, "kind"), kinds);
    }
    checkKeys(value, path, keysOf(path), nullptr);
    readValues(value, path, path, spec);
    SlurmSpec& slurm = *spec.launch.slurm;
    for (auto [key, text] : {std::pair{"mem", &slurm.mem},
                             {"partition", &slurm.partition},
                             {"account", &slurm.account},
                             {"qos", &slurm.qos},
                             {"time", &slurm.time},
                             {"constraint", &slurm.constraint},
                             {"reservation", &slurm.reservation},
                             {"job_name", &slurm.job_name}}) {
      if (!*text || !okAt(join(path, key))) continue;
      if (std::optional<std::string> why = checkSlurmWord(key, **text))
        report(join(path, key), *why + ", got " + shown(**text));
    }
    if (const json* v = find(value, "extra_sbatch"))
      parseExtraSbatch(*v, join(path, "extra_sbatch"), slurm.extra_sbatch);
    if (const json* v = find(value, "submit_from"); v && !v->is_null()) parseSubmitFrom(*v, spec);
    if (!allOk(join(path, "nodes"), join(path, "ranks_per_node"))) return;
    const int64_t world = int64_t{slurm.nodes} * slurm.ranks_per_node;
    if (world > kMaxWorldSize) {
      report(path,
             fmt::format("nodes {} × ranks_per_node {} = a world size of {}, more than the {} "
                         "supported",
                         slurm.nodes, slurm.ranks_per_node, world, kMaxWorldSize));
      return;
    }
    world_size_ = static_cast<int>(world);
  }

  // launch.scheduler.extra_sbatch: each item one --name=value or --name word (checkExtraSbatch).
  void parseExtraSbatch(const json& value, const std::string& path, std::vector<std::string>& out) {
    if (!value.is_array()) {
      report(path, "expected an array of \"--name=value\" strings, got " + shown(value));
      return;
    }
    if (value.size() > static_cast<size_t>(kMaxExtraSbatch)) {
      report(path,
             fmt::format("expected at most {} options, got {}", kMaxExtraSbatch, value.size()));
      return;
    }
    for (size_t i = 0; i < value.size(); ++i) {
      const json& item = value[i];
      if (!item.is_string()) {
        report(indexed(path, i), "expected a \"--name=value\" string, got " + shown(item));
        continue;
      }
      if (std::optional<std::string> why = checkExtraSbatch(item.get_ref<const std::string&>())) {
        report(indexed(path, i), *why + ", got " + shown(item));
        continue;
      }
      out.push_back(item.get<std::string>());
    }
  }

  // launch.scheduler.submit_from: a login node, as a launch.hosts entry without ranks.
  void parseSubmitFrom(const json& value, JobSpec& spec) {
    const std::string path = "launch.scheduler.submit_from";
    if (!expectObject(value, path)) return;
    LaunchHostSpec& host = spec.launch.slurm->submit_from.emplace();
    checkKeys(value, path, keysOf(path), nullptr);
    if (const json* v = need(value, path, "host")) readHostName(*v, join(path, "host"), host.host);
    readValues(value, path, path, spec);
    readUserAndProxyJump(value, path, host);
  }

  // launch.env: {"NAME": "value"}, each name one the workers may be given (checkEnvName).
  void parseEnv(const json& value, const std::string& path,
                std::map<std::string, std::string>& out) {
    if (!value.is_object()) {
      report(path, "expected an object of NAME: \"value\" strings, got " + shown(value));
      return;
    }
    if (value.size() > static_cast<size_t>(kMaxEnvVariables)) {
      report(path,
             fmt::format("expected at most {} variables, got {}", kMaxEnvVariables, value.size()));
      return;
    }
    for (const auto& [name, item] : value.items()) {
      // A name too long to be one is shown shortened in its path.
      const std::string item_path = join(path, name.size() > static_cast<size_t>(kMaxEnvNameLength)
                                                   ? name.substr(0, 64) + "..."
                                                   : name);
      if (std::optional<std::string> why = checkEnvName(name, false)) {
        report(item_path, *why);
        continue;
      }
      if (!item.is_string()) {
        report(item_path, "expected a string, got " + shown(item));
        continue;
      }
      if (std::optional<std::string> why = checkEnvValue(item.get_ref<const std::string&>())) {
        report(item_path, *why);
        continue;
      }
      out[name] = item.get<std::string>();
    }
  }

  void parseHosts(const json& value, const std::string& path, JobSpec& spec) {
    if (!value.is_array() || value.empty()) {
      report(path, "expected a non-empty array of hosts, got " + shown(value));
      return;
    }
    if (value.size() > static_cast<size_t>(kMaxWorldSize)) {
      report(path, fmt::format("expected at most {} hosts, got {}", kMaxWorldSize, value.size()));
      return;
    }
    std::vector<LaunchHostSpec> hosts(value.size());
    bool ranks_ok = true;
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string host_path = indexed(path, i);
      LaunchHostSpec& host = hosts[i];
      if (!expectObject(value[i], host_path)) {
        ranks_ok = false;
        continue;
      }
      const json& object = value[i];
      checkKeys(object, host_path, keysOf("launch.hosts[]"), nullptr);
      if (const json* v = find(object, "host"))
        readHostName(*v, join(host_path, "host"), host.host);
      readValues(object, "launch.hosts[]", host_path, spec, &host);
      ranks_ok &= find(object, "ranks") && okAt(join(host_path, "ranks"));
      readUserAndProxyJump(object, host_path, host);
    }
    spec.launch.hosts = std::move(hosts);
    if (!ranks_ok) return;
    int64_t world = 0;
    for (const LaunchHostSpec& host : spec.launch.hosts) world += host.ranks;
    if (world > kMaxWorldSize) {
      report(path,
             fmt::format("a world size of {} is more than the {} supported", world, kMaxWorldSize));
      return;
    }
    world_size_ = static_cast<int>(world);
  }

  // --- a program job ---------------------------------------------------------------------------

  // A job whose ranks run the user's script: launch and a strategy kind for the history are read,
  // the engine's sections refused (the script has its own model, data and loop).
  void parseProgramJob(const json& root, const json& value, JobSpec& spec) {
    for (std::string_view section : kEngineOnlySections) {
      if (find(root, section)) {
        report(std::string(section),
               "not read by a program job (program.script defines its own model, data and "
               "training loop); remove it");
      }
    }
    spec.program.emplace();
    parseProgram(value, spec);
    if (const json* v = find(root, "launch")) {
      parseLaunch(*v, spec);
    } else {
      world_size_ = worldSize(spec);
    }
    if (spec.launch.max_restarts > 0 && nodeCount(spec) > 1) {
      report("launch.max_restarts",
             "a program job restarts on one host only: its workers host their own "
             "torch.distributed store, which agents on several hosts cannot coordinate a restart "
             "through; use one host (one node) or remove it");
    }
    const int world = world_size_.value_or(1);
    std::string kind = world > 1 ? "ddp" : "single";
    if (const json* v = find(root, "strategy")) {
      if (!expectObject(*v, "strategy")) return;
      for (const auto& [key, option] : v->items()) {
        if (key != "kind")
          report(join("strategy", key),
                 "a program job's strategy is only its kind (what the script does, shown in "
                 "the history); the script sets its own options");
      }
      const std::vector<std::string_view> kinds = legacyStrategyKinds();
      if (const json* k = find(*v, "kind")) {
        if (k->is_string() &&
            std::find(kinds.begin(), kinds.end(), k->get_ref<const std::string&>()) != kinds.end())
          kind = k->get<std::string>();
        else
          reportChoice(*k, "strategy.kind", kinds);
      }
    }
    applyLegacyStrategyKind(kind, world, spec.strategy);
  }

  void parseProgram(const json& value, JobSpec& spec) {
    const std::string path = "program";
    if (!parseValueBlock(value, path, spec)) return;
    if (const json* v = find(value, "args")) {
      const std::string args_path = join(path, "args");
      if (!v->is_array()) {
        report(args_path, "expected an array of strings, got " + shown(*v));
      } else if (v->size() > static_cast<size_t>(kMaxProgramArgs)) {
        report(args_path,
               fmt::format("expected at most {} arguments, got {}", kMaxProgramArgs, v->size()));
      } else {
        for (size_t i = 0; i < v->size(); ++i) {
          const json& arg = (*v)[i];
          if (!arg.is_string() ||
              arg.get_ref<const std::string&>().find('\0') != std::string::npos) {
            report(indexed(args_path, i),
                   "expected a string without NUL characters, got " + shown(arg));
            continue;
          }
          spec.program->args.push_back(arg.get<std::string>());
        }
      }
    }
  }

  // --- checks across blocks --------------------------------------------------------------------

  // The checks across blocks, each once the values it reads are sound.
  void crossCheck(const JobSpec& spec) {
    checkModel(spec);
    checkDataAgainstModel(spec);
    checkSchedule(spec);
    checkTokensAgainstModel(spec);
    checkBackendAgainstDevice(spec);
    checkStrategy(spec);
    checkEvaluation(spec);
    checkDropLast(spec);
  }

  // The mesh against the world size: a legacy kind's one dimension spans the world, a mesh.dp
  // left out is what tp and pp leave of it, and dp × tp × pp must be it.
  void resolveMesh(JobSpec& spec) {
    if (!world_size_) return;
    const int world = *world_size_;
    MeshSpec& mesh = spec.strategy.mesh;
    if (legacy_strategy_) {
      if (legacy_kind_) applyLegacyStrategyKind(*legacy_kind_, world, spec.strategy);
      if (legacy_kind_ == "single" && world != 1) {
        report("strategy.kind", fmt::format("single runs exactly 1 rank, but {} a world size of {}",
                                            worldGivenBy(), world));
      }
      return;
    }
    if (!okAt("strategy.mesh")) return;
    const int64_t per_replica = int64_t{mesh.tp} * mesh.pp;
    if (!mesh_dp_given_) {
      if (world % per_replica == 0) {
        mesh.dp = static_cast<int>(world / per_replica);
        return;
      }
      report("strategy.mesh",
             fmt::format("tp {} × pp {} = {} ranks per replica do not divide the world size {} "
                         "({}), so strategy.mesh.dp cannot be inferred; change tp or pp, or {}",
                         mesh.tp, mesh.pp, per_replica, world,
                         scheduled_ ? "launch.scheduler" : "launch.hosts", worldFields()));
      return;
    }
    const int64_t product = mesh.dp * per_replica;
    if (product != world) {
      report("strategy.mesh",
             fmt::format("dp {} × tp {} × pp {} = {} ranks, but {} a world size of {}; change the "
                         "mesh or {} so that they agree (left out, strategy.mesh.dp is the world "
                         "size / (tp × pp))",
                         mesh.dp, mesh.tp, mesh.pp, product, worldGivenBy(), world, worldFields()));
    }
  }

  // What the messages say gives the world size, and the fields that change it.
  std::string_view worldGivenBy() const {
    return scheduled_ ? "launch.scheduler gives" : "launch.hosts give";
  }
  std::string_view worldFields() const {
    return scheduled_ ? "launch.scheduler.nodes or ranks_per_node" : "launch.hosts[].ranks";
  }

  // The model kind's own rules (nn/models.cpp), once its generic fields are sound.
  void checkModel(const JobSpec& spec) {
    if (okAt("model")) {
      const std::vector<ModelProblem> problems = validateModel(spec.model);
      for (const ModelProblem& problem : problems) report(problem.path, problem.message);
      if (problems.empty()) {
        const int64_t parameters = describeModel(spec.model).parameterCount();
        if (parameters > kMaxParameters) {
          report("model", fmt::format("{} parameters, more than the limit of {}", parameters,
                                      kMaxParameters));
        }
      }
    }
  }

  // Synthetic data's features and classes against the model's widths.
  void checkDataAgainstModel(const JobSpec& spec) {
    if (okAt("data.kind") && spec.data.kind == DataKind::kSynthetic && okAt("model.layers") &&
        !spec.model.layers.empty()) {
      const auto& layers = spec.model.layers;
      if (okAt("data.features") && spec.data.features != layers.front()) {
        report("data.features", fmt::format("must equal model.layers[0] ({}), got {}",
                                            layers.front(), spec.data.features));
      }
      if (okAt("data.classes") && spec.data.classes != layers.back()) {
        report("data.classes", fmt::format("must equal model.layers[{}] ({}), got {}",
                                           layers.size() - 1, layers.back(), spec.data.classes));
      }
    }
  }

  // The schedule against the peak learning rate and the run's length.
  void checkSchedule(const JobSpec& spec) {
    if (spec.optimizer.schedule.kind == LrScheduleKind::kCosine && okAt("optimizer.schedule")) {
      const LrSchedule& schedule = spec.optimizer.schedule;
      if (okAt("optimizer.lr") && schedule.min_lr > spec.optimizer.lr) {
        report("optimizer.schedule.min_lr", fmt::format("must be at most optimizer.lr ({}), got {}",
                                                        spec.optimizer.lr, schedule.min_lr));
      }
      if (schedule.decay_steps && schedule.warmup_steps >= *schedule.decay_steps) {
        report("optimizer.schedule.warmup_steps",
               fmt::format("must be less than optimizer.schedule.decay_steps ({}), got {}",
                           *schedule.decay_steps, schedule.warmup_steps));
      } else if (!schedule.decay_steps && okAt("train.steps") &&
                 schedule.warmup_steps >= spec.train.steps) {
        report("optimizer.schedule.warmup_steps",
               fmt::format("must be less than train.steps ({}), got {}", spec.train.steps,
                           schedule.warmup_steps));
      }
    }
  }

  // Token data against the model: token ids need a model that reads them, and byte-level text
  // needs a vocabulary of every byte (data/text_dataset.h).
  void checkTokensAgainstModel(const JobSpec& spec) {
    if (okAt("data.kind") && okAt("model")) {
      const DataKind data = spec.data.kind;
      const bool token_data = data == DataKind::kTokens || data == DataKind::kText;
      const bool token_model = describeModel(spec.model).input_dtype == DType::kI32;
      if (token_data && !token_model) {
        report("data.kind", fmt::format("{} data are token ids, but model.kind {} reads float "
                                        "features (use a model of token ids: gpt)",
                                        toString(data), spec.model.kind));
      } else if (!token_data && token_model) {
        report("data.kind", fmt::format("model.kind {} reads token ids, but {} data are float "
                                        "features (use data.kind tokens or text)",
                                        spec.model.kind, toString(data)));
      } else if (data == DataKind::kText && spec.model.vocab_size < 256) {
        report("model.vocab_size",
               fmt::format("must be at least 256 for data.kind text (one token per byte), got {}",
                           spec.model.vocab_size));
      }
    }
  }

  void checkBackendAgainstDevice(const JobSpec& spec) {
    if (allOk("backend", "device") && spec.backend == BackendKind::kNccl &&
        spec.device == DeviceKind::kCpu) {
      report("backend", "nccl needs CUDA devices, but device is \"cpu\"");
    }
  }

  // The dimension plans' own checks (spec/strategies/): the chosen data-parallel plan's, and tp's
  // and pp's, which also say what their options need of a dimension of 1. They need the mesh,
  // which needs the world size.
  void checkStrategy(const JobSpec& spec) {
    if (!world_size_ || (legacy_strategy_ && !legacy_kind_)) return;
    StrategyCheck check{
        .ok_at = [this](std::string_view path) { return okAt(path); },
        .world_size = world_size_,
        .report = [this](std::string path,
                         std::string message) { report(std::move(path), std::move(message)); }};
    if (okAt("strategy.dp.kind"))
      if (const DimensionPlan* plan = findDataParallelPlan(spec.strategy.data_parallel))
        plan->check(spec, check);
    tensorParallelPlan().check(spec, check);
    pipelineParallelPlan().check(spec, check);
  }

  // Evaluation needs a validation set.
  void checkEvaluation(const JobSpec& spec) {
    if (allOk("train.eval_every", "data.kind") && spec.train.eval_every > 0) {
      if (spec.data.kind == DataKind::kSynthetic || spec.data.kind == DataKind::kIdx) {
        report("train.eval_every",
               fmt::format("data.kind \"{}\" has no validation set to evaluate on; set "
                           "train.eval_every to 0 or use a data kind with one (tokens, text)",
                           toString(spec.data.kind)));
      } else if (spec.data.kind == DataKind::kTokens && spec.data.val.empty()) {
        report("train.eval_every",
               "data.kind \"tokens\" without data.val has no validation set to evaluate on; "
               "set data.val or train.eval_every to 0");
      }
    }
  }

  // Every data-parallel rank needs a full batch when incomplete ones are dropped.
  void checkDropLast(const JobSpec& spec) {
    if (okAt("data.kind") && spec.data.kind == DataKind::kSynthetic && spec.data.drop_last &&
        allOk("data.samples", "data.drop_last", "train.batch_size", "strategy.mesh") &&
        world_size_) {
      const int64_t ranks = dataParallelSize(spec);
      int64_t needed = ranks * spec.train.batch_size;
      if (spec.data.samples < needed) {
        report("data.samples",
               fmt::format("with drop_last, {} × batch_size {} need at least {} samples, got {}",
                           counted(ranks, "data-parallel rank"), spec.train.batch_size, needed,
                           spec.data.samples));
      }
    }
  }

  std::vector<SpecProblem>* problems_;
  JobKind job_kind_ = JobKind::kEngine;
  std::optional<int> world_size_;  // set when every launch.hosts[].ranks (or nodes × ...) is valid
  bool scheduled_ = false;         // the document has a launch.scheduler
  bool legacy_strategy_ = false;   // the strategy block has the legacy flat form (a kind)
  std::optional<std::string> legacy_kind_;  // its kind, when valid
  bool mesh_dp_given_ = false;              // strategy.mesh.dp is in the document
};

// ---------------------------------------------------------------------------------------------
// The text's own checks, in one pass before a document is built: JSON syntax, the nesting bound,
// and duplicate keys (which nlohmann::json keeps only the last of). Memory and time are linear in
// the text: a level keeps its keys and its position, and a path is spelled only when reported.

// The path shown in a message, shortened: a path can be as long as the text.
std::string shownPath(std::string path) {
  constexpr size_t kMaxShown = 120;
  if (path.size() > kMaxShown) path = path.substr(0, kMaxShown - 3) + "...";
  return path;
}

// A problem of the JSON parser's: "parse error at line 1, column 2: ..." without its tag.
std::string jsonErrorMessage(const std::exception& e) {
  std::string message = e.what();
  if (auto tag_end = message.find("] ");
      message.starts_with("[json.") && tag_end != std::string::npos) {
    message = message.substr(tag_end + 2);
  }
  return "invalid JSON: " + message;
}

class SpecTextChecker : public nlohmann::json_sax<json> {
 public:
  explicit SpecTextChecker(std::vector<SpecProblem>* problems) : problems_(problems) {}

  // Whether the pass stopped at a problem after which the text must not be parsed further.
  bool stopped() const { return stopped_; }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override { return close(); }
  bool key(string_t& key) override {
    Level& level = stack_.back();
    auto [known, inserted] = level.keys.insert(key);
    if (!inserted) {
      problems_->push_back(
          {shownPath(join(pathOfTop(), key)), "duplicate key (only the last one would be used)"});
    }
    level.key = &*known;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    problems_->clear();
    problems_->push_back({"", jsonErrorMessage(e)});
    stopped_ = true;
    return false;
  }

 private:
  struct Level {
    bool is_array = false;
    size_t next_index = 0;             // of an array: the index of the next element
    const std::string* key = nullptr;  // of an object: the key of the current member, in keys
    std::set<std::string> keys;
  };

  // The path of the value the innermost level is at now.
  std::string pathOfTop() const {
    std::string path;
    for (size_t i = 0; i + 1 < stack_.size(); ++i) {
      const Level& level = stack_[i];
      path = level.is_array ? indexed(path, level.next_index - 1) : join(path, *level.key);
    }
    return path;
  }
  bool value() {
    if (!stack_.empty() && stack_.back().is_array) ++stack_.back().next_index;
    return true;
  }
  bool open(bool is_array) {
    value();
    if (stack_.size() >= static_cast<size_t>(kMaxSpecDepth)) {
      std::string at = pathOfTop();
      const Level& top = stack_.back();
      at = top.is_array ? indexed(at, top.next_index - 1) : join(at, *top.key);
      problems_->clear();
      problems_->push_back({"", fmt::format("the document nests deeper than the {} levels a job "
                                            "spec may have (at {})",
                                            kMaxSpecDepth, shownPath(at))});
      stopped_ = true;
      return false;
    }
    stack_.push_back(Level{.is_array = is_array});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  std::vector<SpecProblem>* problems_;
  std::vector<Level> stack_;
  bool stopped_ = false;
};

// The nesting depth of a document, counted without recursion: 0 for a scalar, 1 for {} or [].
// Stops counting past `limit`.
int nestingDepth(const json& document, int limit) {
  std::vector<std::pair<const json*, int>> pending{{&document, 0}};
  int deepest = 0;
  while (!pending.empty()) {
    auto [value, depth] = pending.back();
    pending.pop_back();
    if (!value->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    if (deepest > limit) break;
    for (const json& child : *value) pending.push_back({&child, depth + 1});
  }
  return deepest;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public functions

std::string SpecParseResult::describe() const {
  std::string text;
  for (const SpecProblem& problem : problems) {
    if (!text.empty()) text += '\n';
    text += problem.path.empty() ? problem.message : problem.path + ": " + problem.message;
  }
  return text;
}

SpecParseResult parseJobSpec(const json& document) {
  SpecParseResult result;
  if (nestingDepth(document, kMaxSpecDepth) > kMaxSpecDepth) {
    result.problems.push_back(
        {"", fmt::format("the document nests deeper than the {} levels a job spec may have",
                         kMaxSpecDepth)});
    return result;
  }
  try {
    SpecParser parser(&result.problems);
    JobSpec spec = parser.parse(document);
    if (result.problems.empty()) result.spec = std::move(spec);
  } catch (const std::exception& e) {
    // Only a bug of ours can get here; report it rather than break the never-throws promise.
    result.spec.reset();
    result.problems.push_back(
        {"", fmt::format("internal error while checking the spec: {}", e.what())});
  }
  return result;
}

std::optional<SpecProblem> checkSpecText(std::string_view json_text) {
  if (json_text.size() > kMaxSpecBytes) {
    return SpecProblem{"", fmt::format("the document is {} bytes, more than the {} a job spec "
                                       "may have",
                                       json_text.size(), describeBytes(kMaxSpecBytes))};
  }
  std::vector<SpecProblem> problems;
  SpecTextChecker checker(&problems);
  json::sax_parse(json_text.begin(), json_text.end(), &checker);
  if (checker.stopped()) return problems.front();
  return std::nullopt;
}

SpecParseResult parseJobSpec(std::string_view json_text) {
  SpecParseResult result;
  if (json_text.size() > kMaxSpecBytes) {
    result.problems.push_back(*checkSpecText(json_text));
    return result;
  }
  std::vector<SpecProblem> duplicates;
  SpecTextChecker checker(&duplicates);
  json::sax_parse(json_text.begin(), json_text.end(), &checker);
  if (checker.stopped()) {
    result.problems = std::move(duplicates);
    return result;
  }
  json document;
  try {
    document = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    // The checker has already read the same text; only a bug of ours can get here.
    result.problems.push_back({"", jsonErrorMessage(e)});
    return result;
  }
  result = parseJobSpec(document);
  if (!duplicates.empty()) {
    result.spec.reset();
    result.problems.insert(result.problems.begin(), duplicates.begin(), duplicates.end());
  }
  return result;
}

std::string readJobSpecText(const std::string& path) {
  try {
    return readBoundedFile(path, kMaxSpecBytes, "job spec");
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kFormat) throw;
    RM_THROW(kSpec, e.message());
  }
}

JobSpec loadJobSpecFile(const std::string& path) {
  SpecParseResult result = parseJobSpec(readJobSpecText(path));
  if (!result.ok()) {
    RM_THROW(kSpec, fmt::format("{} is not a valid job spec:\n{}", path, result.describe()));
  }
  return std::move(*result.spec);
}

namespace {

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

// The JSON of the value `ref` names; discarded where nothing is written: no member (its optional
// block is unset), an unset optional, an empty text that means none (data.val, program.workdir).
json valueJson(const SpecField& field, const SpecValueRef& ref) {
  const json nothing(json::value_t::discarded);
  return std::visit(
      [&](const auto& member) -> json {
        using Member = std::decay_t<decltype(member)>;
        if constexpr (std::is_same_v<Member, std::monostate>) {
          return nothing;
        } else if constexpr (std::is_same_v<Member, EnumValueRef>) {
          return member.name(member.value);
        } else if constexpr (std::is_same_v<Member, std::string*>) {
          const bool none = member->empty() && !field.required && !field.default_value.is_string();
          return none ? nothing : json(*member);
        } else if constexpr (IsOptional<std::remove_pointer_t<Member>>::value) {
          return *member ? json(**member) : nothing;
        } else {
          return json(*member);
        }
      },
      ref);
}

// Whether the choice `condition` names holds in `spec`.
bool holdsIn(const FieldCondition& condition, JobSpec& spec) {
  const std::string kind = valueName(*findSpecField(condition.controller), spec);
  return std::find(condition.kinds.begin(), condition.kinds.end(), kind) != condition.kinds.end();
}

// "/train/loss_scale/init" for "train.loss_scale.init".
json::json_pointer pointerTo(std::string path) {
  std::replace(path.begin(), path.end(), '.', '/');
  return json::json_pointer("/" + path);
}

// Writes every plain value field that applies to `spec` (its kind of job, the kinds it chose) at
// its path in `document`.
void writeValues(JobSpec& spec, json& document) {
  const JobKind job = spec.program ? JobKind::kProgram : JobKind::kEngine;
  for (const SpecField& field : specFields()) {
    if (!field.binding || !field.binding->in_spec || (field.job && *field.job != job)) continue;
    if (field.shown_when && !field.form_condition_only && !holdsIn(*field.shown_when, spec))
      continue;
    json value = valueJson(field, field.binding->in_spec(spec));
    if (!value.is_discarded()) document[pointerTo(field.path)] = std::move(value);
  }
}

// launch.hosts: a host's plain values where they differ from their defaults, and its name and
// user.
json hostsJson(std::vector<LaunchHostSpec> hosts) {
  json list = json::array();
  for (LaunchHostSpec& host : hosts) {
    json entry = {{"host", host.host}};
    if (host.user) entry["user"] = *host.user;
    if (host.proxy_jump) entry["proxy_jump"] = *host.proxy_jump;
    for (const SpecField& field : specFields()) {
      if (!field.binding || !field.binding->in_host) continue;
      json value = valueJson(field, field.binding->in_host(host));
      if (!value.is_discarded() && value != field.default_value)
        entry[std::string(keyOf(field.path))] = std::move(value);
    }
    list.push_back(std::move(entry));
  }
  return list;
}

// launch.scheduler's values that are not plain (writeValues has written those): its kind, the
// extra options, and the login node's name, user and bastion.
void writeScheduler(const SlurmSpec& slurm, json& scheduler) {
  scheduler["kind"] = "slurm";
  if (!slurm.extra_sbatch.empty()) scheduler["extra_sbatch"] = slurm.extra_sbatch;
  if (!slurm.submit_from) return;
  const LaunchHostSpec& login = *slurm.submit_from;
  json& entry = scheduler["submit_from"];
  entry["host"] = login.host;
  if (login.user) entry["user"] = *login.user;
  if (login.proxy_jump) entry["proxy_jump"] = *login.proxy_jump;
}

// The options of the chosen data-parallel plan (always), and of tp and pp where their dimension is
// used (docs/spec.md: a pipeline of one stage is none).
void writeDimensionOptions(const JobSpec& spec, json& strategy) {
  const DimensionPlan* data_parallel = findDataParallelPlan(spec.strategy.data_parallel);
  RM_ENFORCE(data_parallel != nullptr,
             fmt::format("strategy.dp.kind \"{}\" is no registered data-parallel plan",
                         spec.strategy.data_parallel));
  strategy["dp"]["kind"] = spec.strategy.data_parallel;
  data_parallel->writeOptions(spec.strategy, strategy["dp"]);
  if (spec.strategy.mesh.tp > 1) tensorParallelPlan().writeOptions(spec.strategy, strategy["tp"]);
  if (stageCount(spec) > 1) pipelineParallelPlan().writeOptions(spec.strategy, strategy["pp"]);
}

}  // namespace

json toJson(const ProgramSpec& program) {
  JobSpec job;
  job.program = program;
  return toJson(job)["program"];
}

json toJson(const JobSpec& spec) {
  JobSpec values = spec;  // the fields' bindings reach the values through a JobSpec&
  json document = {{"name", spec.name}};
  writeValues(values, document);
  if (spec.launch.slurm)
    writeScheduler(*spec.launch.slurm, document["launch"]["scheduler"]);
  else
    document["launch"]["hosts"] = hostsJson(spec.launch.hosts);
  if (!spec.launch.env.empty()) document["launch"]["env"] = spec.launch.env;
  if (spec.program) {
    document["program"]["args"] = spec.program->args;
    document["strategy"] = {{"kind", strategyLabel(spec)}};
    return document;
  }
  // What the plain values are not: the dimensions' options (their plans'), the model's layers
  // (gpt: a count, the other kinds: widths) and Adam's betas.
  writeDimensionOptions(spec, document["strategy"]);
  if (spec.model.kind == "gpt") {
    document["model"]["layers"] = spec.model.block_count;
  } else {
    document["model"]["layers"] = spec.model.layers;
  }
  if (holdsIn(*findSpecField("optimizer.betas")->shown_when, values))
    document["optimizer"]["betas"] = spec.optimizer.betas;
  return document;
}

std::vector<SpecProblem> validateJobSpec(const JobSpec& spec) {
  return parseJobSpec(toJson(spec)).problems;
}

int64_t expectedSteps(const JobSpec& spec) {
  return spec.program ? spec.program->steps : spec.train.steps;
}

int worldSize(const JobSpec& spec) {
  int64_t world = 0;
  for (int node = 0; node < nodeCount(spec); ++node) world += ranksOnNode(spec, node);
  return static_cast<int>(world);
}

int nodeCount(const JobSpec& spec) {
  return spec.launch.slurm ? spec.launch.slurm->nodes : static_cast<int>(spec.launch.hosts.size());
}

int ranksOnNode(const JobSpec& spec, int node) {
  RM_ENFORCE(node >= 0 && node < nodeCount(spec),
             fmt::format("node {} is outside the job's {} nodes", node, nodeCount(spec)));
  return spec.launch.slurm ? spec.launch.slurm->ranks_per_node
                           : spec.launch.hosts[static_cast<size_t>(node)].ranks;
}

int firstRankOnNode(const JobSpec& spec, int node) {
  int rank = 0;
  for (int n = 0; n < node; ++n) rank += ranksOnNode(spec, n);
  return rank;
}

int stageCount(const JobSpec& spec) {
  return spec.strategy.mesh.pp * spec.strategy.pipeline.virtual_stages;
}

int dataParallelSize(const JobSpec& spec) {
  return spec.strategy.mesh.dp;
}

namespace {

// strategyLabel's parts: the data-parallel plan's name or "", "tp" or "", "pipeline" or "".
std::string joinLabel(std::string_view dp, bool tp, bool pp) {
  std::vector<std::string_view> parts;
  if (!dp.empty()) parts.push_back(dp);
  if (tp) parts.push_back("tp");
  if (pp) parts.push_back("pipeline");
  return parts.empty() ? std::string("single") : fmt::format("{}", fmt::join(parts, "+"));
}

}  // namespace

std::string strategyLabel(const JobSpec& spec) {
  const StrategySpec& strategy = spec.strategy;
  const bool data_parallel = strategy.mesh.dp > 1 || strategy.data_parallel != "ddp";
  return joinLabel(data_parallel ? std::string_view(strategy.data_parallel) : "",
                   strategy.mesh.tp > 1, stageCount(spec) > 1);
}

std::vector<std::string> strategyLabels() {
  std::vector<std::string> labels = {"single"};
  for (std::string_view name : dataParallelPlanNames()) labels.emplace_back(name);
  labels.push_back("pipeline");
  labels.push_back("tp");
  std::vector<std::string_view> dps = {""};
  for (std::string_view name : dataParallelPlanNames()) dps.push_back(name);
  for (std::string_view dp : dps) {
    for (bool tp : {false, true}) {
      for (bool pp : {false, true}) {
        if ((dp.empty() ? 0 : 1) + (tp ? 1 : 0) + (pp ? 1 : 0) >= 2)
          labels.push_back(joinLabel(dp, tp, pp));
      }
    }
  }
  return labels;
}

bool needsWorldCommunicator(const JobSpec& spec) {
  return strategyLabel(spec) != "single";
}

std::vector<std::string_view> legacyStrategyKinds() {
  std::vector<std::string_view> kinds = {"single"};
  for (std::string_view name : dataParallelPlanNames()) kinds.push_back(name);
  kinds.push_back("pipeline");
  return kinds;
}

bool applyLegacyStrategyKind(std::string_view kind, int world, StrategySpec& out) {
  const std::vector<std::string_view> kinds = legacyStrategyKinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) return false;
  out.tp = TensorParallelSpec{};                          // the legacy form has no tp
  if (kind != "pipeline") out.pipeline = PipelineSpec{};  // nor pipeline stages beside its kind
  if (kind == "single") {
    out.mesh = MeshSpec{};
    out.data_parallel = "ddp";
  } else if (kind == "pipeline") {
    out.mesh = {.dp = 1, .tp = 1, .pp = world};
    out.data_parallel = "ddp";
  } else {
    out.mesh = {.dp = world, .tp = 1, .pp = 1};
    out.data_parallel = std::string(kind);
  }
  return true;
}

}  // namespace ringmaster
