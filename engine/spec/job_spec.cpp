// Parsing, validation and the canonical JSON form of the job spec. The parser walks the document
// once, reporting every problem it meets with its path, then runs the cross-field checks whose
// inputs were all valid, so that one mistake is reported once and not again by every check after
// it.
#include "spec/job_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <span>
#include <utility>

#include "core/bounded_file.h"
#include "core/error.h"
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

constexpr NamedValue<StrategyKind> kStrategyKinds[] = {{StrategyKind::kSingle, "single"},
                                                       {StrategyKind::kDdp, "ddp"},
                                                       {StrategyKind::kFsdp, "fsdp"},
                                                       {StrategyKind::kPipeline, "pipeline"}};
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
RM_SPEC_TABLE(StrategyKind, kStrategyKinds)
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
RM_SPEC_ENUM(StrategyKind)
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
// Keys of every block

namespace {

using Keys = std::vector<std::string_view>;

const Keys kRootKeys = {"name",       "description", "strategy", "model",  "data",
                        "train",      "optimizer",   "backend",  "device", "launch",
                        "checkpoint", "telemetry",   "program"};
const Keys kProgramKeys = {"python", "script", "args", "workdir", "upload", "steps"};
// "kind" and every strategy's options, in the order of the plans' table (spec/strategies/).
const Keys kStrategyKeys = [] {
  Keys keys = {"kind"};
  for (const StrategyPlan* plan : strategyPlans())
    for (std::string_view key : plan->optionKeys()) keys.push_back(key);
  return keys;
}();
const Keys kModelKeys = {
    "kind",       "layers",  "activation", "dropout", "layer_norm", "seed", "init_checkpoint",
    "vocab_size", "context", "heads",      "dim",     "bias"};
// The model keys of gpt alone, and those of every other kind alone.
const Keys kGptModelKeys = {"vocab_size", "context", "heads", "dim", "bias"};
const Keys kWidthsModelKeys = {"activation", "layer_norm"};
const Keys kDataKeys = {"kind",         "samples", "features", "classes", "seed",
                        "images",       "labels",  "train",    "val",     "path",
                        "val_fraction", "shuffle", "drop_last"};
const Keys kTrainKeys = {
    "steps",       "batch_size", "grad_accum_steps", "micro_batches",
    "seed",        "eval_every", "eval_batches",     "activation_checkpointing",
    "peak_tflops", "precision",  "loss_scale"};
const Keys kLossScaleKeys = {"init", "growth_interval"};
const Keys kOptimizerKeys = {"kind",  "lr",  "momentum",     "dampening",      "nesterov",
                             "betas", "eps", "weight_decay", "clip_grad_norm", "schedule"};
const Keys kScheduleKeys = {"kind", "warmup_steps", "min_lr", "decay_steps"};
const Keys kLaunchKeys = {"hosts",        "node_binary", "master_port", "timeout_s",
                          "max_restarts", "env",         "env_file"};
const Keys kHostKeys = {"host", "ranks", "port", "user", "identity_file", "password_auth"};
const Keys kCheckpointKeys = {"consolidate", "dir", "every_steps", "resume"};
const Keys kTelemetryKeys = {"every_steps"};

// The blocks whose keys a misplaced root key is looked up in ("steps" -> "train.steps").
const std::vector<std::pair<std::string_view, const Keys*>> kBlocks = {
    {"strategy", &kStrategyKeys},     {"model", &kModelKeys},         {"data", &kDataKeys},
    {"train", &kTrainKeys},           {"optimizer", &kOptimizerKeys}, {"launch", &kLaunchKeys},
    {"checkpoint", &kCheckpointKeys}, {"telemetry", &kTelemetryKeys}, {"program", &kProgramKeys}};

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

// Optimal string alignment distance, ignoring case.
size_t editDistance(std::string_view a, std::string_view b) {
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The closest candidate within a distance that still reads as a typo of `key`, or "".
std::string_view closest(std::string_view key, const Keys& candidates) {
  size_t allowed = key.size() <= 3 ? 1 : key.size() <= 8 ? 2 : 3;
  std::string_view best;
  size_t best_distance = allowed + 1;
  for (std::string_view candidate : candidates) {
    size_t distance = editDistance(key, candidate);
    if (distance < best_distance && distance < std::max(key.size(), candidate.size())) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
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
    checkKeys(root, "", kRootKeys, nullptr);
    if (const json* v = need(root, "", "name")) parseName(*v, spec.name);
    if (const json* v = find(root, "description")) {
      if (v->is_string()) {
        spec.description = v->get<std::string>();
      } else {
        report("description", "expected a string, got " + shown(*v));
      }
    }
    if (const json* v = find(root, "program"); v && !v->is_null()) {
      parseProgramJob(root, *v, spec);
      return spec;
    }
    if (const json* v = need(root, "", "strategy")) parseStrategy(*v, spec.strategy);
    if (const json* v = need(root, "", "model")) parseModel(*v, spec.model);
    if (const json* v = need(root, "", "data")) parseData(*v, spec.data);
    if (const json* v = need(root, "", "train")) parseTrain(*v, spec.train);
    if (const json* v = need(root, "", "optimizer")) parseOptimizer(*v, spec.optimizer);
    if (const json* v = find(root, "backend")) readEnum(*v, "backend", spec.backend);
    if (const json* v = find(root, "device")) readEnum(*v, "device", spec.device);
    if (const json* v = find(root, "launch")) {
      parseLaunch(*v, spec.launch);
    } else {
      world_size_ = worldSize(spec);
    }
    if (const json* v = find(root, "checkpoint"); v && !v->is_null()) {
      spec.checkpoint.emplace();
      parseCheckpoint(*v, *spec.checkpoint);
    }
    if (const json* v = find(root, "telemetry")) parseTelemetry(*v, spec.telemetry);
    crossCheck(spec);
    return spec;
  }

 private:
  // --- reporting -------------------------------------------------------------------------------

  void report(std::string path, std::string message) {
    problems_->push_back({std::move(path), std::move(message)});
  }

  // True when nothing was reported at `path`, inside it or at a block containing it: the value
  // read there can be trusted by a cross-field check.
  bool okAt(std::string_view path) const {
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
      if (std::string_view near = closest(key, allowed); !near.empty()) {
        message += fmt::format(" (did you mean \"{}\"?)", near);
      } else if (path.empty()) {
        for (const auto& [block, keys] : kBlocks) {
          if (std::find(keys->begin(), keys->end(), key) != keys->end()) {
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

  template <typename E>
  bool readEnum(const json& value, const std::string& path, E& out) {
    if (value.is_string()) {
      if (auto parsed = fromString<E>(value.get_ref<const std::string&>())) {
        out = *parsed;
        return true;
      }
    }
    reportChoice(value, path, enumNames<E>());
    return false;
  }

  // "expected one of "a", "b", got X".
  void reportChoice(const json& value, const std::string& path,
                    const std::vector<std::string_view>& choices) {
    std::string names;
    for (std::string_view name : choices) {
      names += fmt::format("{}\"{}\"", names.empty() ? "" : ", ", name);
    }
    report(path, fmt::format("expected one of {}, got {}", names, shown(value)));
  }

  // A registered model kind (nn/models.cpp); the message lists them like readEnum's.
  bool readModelKind(const json& value, const std::string& path, std::string& out) {
    if (value.is_string() && findModel(value.get_ref<const std::string&>()) != nullptr) {
      out = value.get<std::string>();
      return true;
    }
    std::string names;
    for (std::string_view name : modelKinds()) {
      names += fmt::format("{}\"{}\"", names.empty() ? "" : ", ", name);
    }
    report(path, fmt::format("expected one of {}, got {}", names, shown(value)));
    return false;
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

  // Options of a kind: `owners` maps each option key to the kinds it belongs to. While the kind
  // is unknown every option is read (so its value is still checked) and none is misplaced.
  template <typename E>
  KindGate kindGate(std::string_view kind_path, std::optional<E> kind,
                    std::vector<std::pair<std::string_view, std::vector<E>>> owners) {
    return [kind_path, kind, owners](std::string_view key) -> std::optional<std::string> {
      if (!kind) return std::nullopt;
      for (const auto& [option, kinds] : owners) {
        if (option != key) continue;
        if (std::find(kinds.begin(), kinds.end(), *kind) != kinds.end()) return std::nullopt;
        std::string names;
        for (size_t i = 0; i < kinds.size(); ++i) {
          names += (i == 0 ? "" : i + 1 == kinds.size() ? " or " : ", ");
          names += toString(kinds[i]);
        }
        return fmt::format("only valid when {} is {}", kind_path, names);
      }
      return std::nullopt;
    };
  }

  // Whether an option of a kind block is to be read: present, and the kind is unknown or its own.
  template <typename E>
  const json* option(const json& object, std::string_view key, std::optional<E> kind,
                     std::initializer_list<E> kinds) {
    const json* value = find(object, key);
    if (!value) return nullptr;
    if (kind && std::find(kinds.begin(), kinds.end(), *kind) == kinds.end()) return nullptr;
    return value;
  }

  void parseStrategy(const json& value, StrategySpec& out) {
    const std::string path = "strategy";
    if (!expectObject(value, path)) return;
    std::optional<StrategyKind> kind;
    if (const json* v = need(value, path, "kind")) {
      StrategyKind parsed{};
      if (readEnum(*v, join(path, "kind"), parsed)) kind = parsed;
    }
    if (kind) out.kind = *kind;
    using K = StrategyKind;
    // Each option belongs to the strategy whose plan lists it (spec/strategies/).
    std::vector<std::pair<std::string_view, std::vector<K>>> owners;
    for (const StrategyPlan* plan : strategyPlans()) {
      for (std::string_view key : plan->optionKeys()) {
        auto owner = std::find_if(owners.begin(), owners.end(),
                                  [&](const auto& entry) { return entry.first == key; });
        if (owner != owners.end())
          owner->second.push_back(plan->kind());  // shared: strategy.reduce_dtype
        else
          owners.push_back({key, {plan->kind()}});
      }
    }
    checkKeys(value, path, kStrategyKeys, kindGate<K>("strategy.kind", kind, std::move(owners)));
    // Each strategy reads its own options (spec/strategies/); every one while the kind is unknown.
    BlockReader reader(*this, value, path);
    for (const StrategyPlan* plan : strategyPlans())
      if (!kind || *kind == plan->kind()) plan->readOptions(reader, out);
  }

  // A strategy block as its plan reads it: present options through the parser's readers.
  class BlockReader final : public OptionReader {
   public:
    BlockReader(SpecParser& parser, const json& block, std::string path)
        : parser_(parser), block_(block), path_(std::move(path)) {}
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

  void parseModel(const json& value, ModelSpec& out) {
    const std::string path = "model";
    if (!expectObject(value, path)) return;
    std::optional<bool> gpt;  // unknown until the kind is read
    if (const json* v = need(value, path, "kind")) {
      if (readModelKind(*v, join(path, "kind"), out.kind)) gpt = out.kind == "gpt";
    }
    auto contains = [](const Keys& keys, std::string_view key) {
      return std::find(keys.begin(), keys.end(), key) != keys.end();
    };
    checkKeys(value, path, kModelKeys, [&](std::string_view key) -> std::optional<std::string> {
      if (!gpt) return std::nullopt;
      if (*gpt && contains(kWidthsModelKeys, key)) return "not valid when model.kind is gpt";
      if (!*gpt && contains(kGptModelKeys, key)) return "only valid when model.kind is gpt";
      return std::nullopt;
    });
    // A gpt key is read while the kind is unknown or gpt; a widths key while it is not gpt.
    auto gptKey = [&](std::string_view key) -> const json* {
      if (gpt == true) return need(value, path, key);
      return gpt == false ? nullptr : find(value, key);
    };
    if (const json* v = need(value, path, "layers")) {
      // gpt: the number of transformer blocks; the other kinds: the widths.
      if (gpt == true || (!gpt && v->is_number())) {
        readInt(*v, join(path, "layers"), out.block_count, 1, kMaxLayerCount,
                "a positive integer (gpt: the number of transformer blocks)");
      } else {
        parseLayers(*v, join(path, "layers"), out.layers);
      }
    }
    if (const json* v = gptKey("vocab_size")) {
      readInt(*v, join(path, "vocab_size"), out.vocab_size, 1, kMaxVocabSize, "a positive integer");
    }
    if (const json* v = gptKey("context")) {
      readInt(*v, join(path, "context"), out.context, 1, kMaxContext, "a positive integer");
    }
    if (const json* v = gptKey("heads")) {
      readInt(*v, join(path, "heads"), out.heads, 1, kMaxHeads, "a positive integer");
    }
    if (const json* v = gptKey("dim")) {
      readInt(*v, join(path, "dim"), out.dim, 1, kMaxLayerWidth, "a positive integer");
    }
    if (const json* v = gpt == false ? nullptr : find(value, "bias")) {
      readBool(*v, join(path, "bias"), out.bias);
    }
    if (const json* v = gpt == true ? nullptr : find(value, "activation")) {
      readEnum(*v, join(path, "activation"), out.activation);
    }
    if (const json* v = find(value, "dropout")) {
      readNumber(*v, join(path, "dropout"), out.dropout, "a number in [0, 1)",
                 [](double x) { return x >= 0 && x < 1; });
    }
    if (const json* v = gpt == true ? nullptr : find(value, "layer_norm")) {
      readBool(*v, join(path, "layer_norm"), out.layer_norm);
    }
    if (const json* v = find(value, "seed")) readSeed(*v, join(path, "seed"), out.seed);
    if (const json* v = find(value, "init_checkpoint")) {
      readOptionalText(*v, join(path, "init_checkpoint"), out.init_checkpoint);
    }
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

  void parseData(const json& value, DataSpec& out) {
    const std::string path = "data";
    if (!expectObject(value, path)) return;
    std::optional<DataKind> kind;
    if (const json* v = need(value, path, "kind")) {
      DataKind parsed{};
      if (readEnum(*v, join(path, "kind"), parsed)) kind = parsed;
    }
    if (kind) out.kind = *kind;
    using K = DataKind;
    checkKeys(value, path, kDataKeys,
              kindGate<K>("data.kind", kind,
                          {{"samples", {K::kSynthetic}},
                           {"features", {K::kSynthetic}},
                           {"classes", {K::kSynthetic}},
                           {"seed", {K::kSynthetic}},
                           {"images", {K::kIdx}},
                           {"labels", {K::kIdx}},
                           {"train", {K::kTokens}},
                           {"val", {K::kTokens}},
                           {"path", {K::kText}},
                           {"val_fraction", {K::kText}}}));
    // Required per kind: only once the kind is known.
    auto synthetic = [&](std::string_view key) -> const json* {
      if (kind == K::kSynthetic) return need(value, path, key);
      return option(value, key, kind, {K::kSynthetic});
    };
    auto idx = [&](std::string_view key) -> const json* {
      if (kind == K::kIdx) return need(value, path, key);
      return option(value, key, kind, {K::kIdx});
    };
    if (const json* v = synthetic("samples")) {
      readInt(*v, join(path, "samples"), out.samples, 1, kMaxSamples, "a positive integer");
    }
    if (const json* v = synthetic("features")) {
      readInt(*v, join(path, "features"), out.features, 1, kMaxLayerWidth, "a positive integer");
    }
    if (const json* v = synthetic("classes")) {
      readInt(*v, join(path, "classes"), out.classes, 2, kMaxLayerWidth,
              "an integer of at least 2");
    }
    if (const json* v = option(value, "seed", kind, {K::kSynthetic})) {
      readSeed(*v, join(path, "seed"), out.seed);
    }
    if (const json* v = idx("images")) readText(*v, join(path, "images"), out.images);
    if (const json* v = idx("labels")) readText(*v, join(path, "labels"), out.labels);
    if (const json* v = kind == K::kTokens ? need(value, path, "train")
                                           : option(value, "train", kind, {K::kTokens})) {
      readText(*v, join(path, "train"), out.train);
    }
    if (const json* v = option(value, "val", kind, {K::kTokens})) {
      readText(*v, join(path, "val"), out.val);
    }
    if (const json* v = kind == K::kText ? need(value, path, "path")
                                         : option(value, "path", kind, {K::kText})) {
      readText(*v, join(path, "path"), out.path);
    }
    if (const json* v = option(value, "val_fraction", kind, {K::kText})) {
      readNumber(*v, join(path, "val_fraction"), out.val_fraction, "a number in (0, 1)",
                 [](double x) { return x > 0 && x < 1; });
    }
    if (const json* v = find(value, "shuffle")) readBool(*v, join(path, "shuffle"), out.shuffle);
    if (const json* v = find(value, "drop_last")) {
      readBool(*v, join(path, "drop_last"), out.drop_last);
    }
  }

  void parseTrain(const json& value, TrainSpec& out) {
    const std::string path = "train";
    if (!expectObject(value, path)) return;
    checkKeys(value, path, kTrainKeys, nullptr);
    if (const json* v = need(value, path, "steps")) {
      readInt(*v, join(path, "steps"), out.steps, 1, kMaxSteps, "a positive integer");
    }
    if (const json* v = need(value, path, "batch_size")) {
      readInt(*v, join(path, "batch_size"), out.batch_size, 1, kMaxBatchSize, "a positive integer");
    }
    if (const json* v = find(value, "grad_accum_steps")) {
      readInt(*v, join(path, "grad_accum_steps"), out.grad_accum_steps, 1, kMaxBatchSize,
              "a positive integer");
    }
    if (const json* v = find(value, "micro_batches")) {
      readInt(*v, join(path, "micro_batches"), out.micro_batches, 1, kMaxBatchSize,
              "a positive integer");
    }
    if (const json* v = find(value, "seed")) readSeed(*v, join(path, "seed"), out.seed);
    if (const json* v = find(value, "eval_every")) {
      readInt(*v, join(path, "eval_every"), out.eval_every, 0, kMaxSteps,
              "a non-negative integer (0: never)");
    }
    if (const json* v = find(value, "eval_batches")) {
      readInt(*v, join(path, "eval_batches"), out.eval_batches, 1, kMaxSteps, "a positive integer");
    }
    if (const json* v = find(value, "activation_checkpointing")) {
      readBool(*v, join(path, "activation_checkpointing"), out.activation_checkpointing);
    }
    if (const json* v = find(value, "peak_tflops"); v && !v->is_null()) {
      double peak = 0;
      if (readPositive(*v, join(path, "peak_tflops"), peak, kMaxPeakTflops)) out.peak_tflops = peak;
    }
    if (const json* v = find(value, "precision"))
      readEnum(*v, join(path, "precision"), out.precision);
    if (const json* v = find(value, "loss_scale")) {
      if (out.precision != Precision::kFp16) {
        report(join(path, "loss_scale"),
               fmt::format("applies to train.precision \"fp16\" only (this job's is \"{}\")",
                           toString(out.precision)));
      } else {
        parseLossScale(*v, out.loss_scale);
      }
    }
  }

  // train.loss_scale (fp16): GradScaler's init_scale and growth_interval.
  void parseLossScale(const json& value, LossScaleSpec& out) {
    const std::string path = "train.loss_scale";
    if (!expectObject(value, path)) return;
    checkKeys(value, path, kLossScaleKeys, nullptr);
    if (const json* v = find(value, "init")) {
      // Below 1 the scale would shrink gradients towards fp16's underflow; above 2^64 every
      // gradient overflows.
      readNumber(*v, join(path, "init"), out.init, "a number in [1, 2^64]",
                 [](double x) { return x >= 1 && x <= 18446744073709551616.0; });
    }
    if (const json* v = find(value, "growth_interval")) {
      readInt(*v, join(path, "growth_interval"), out.growth_interval, 1, kMaxSteps,
              "a positive integer");
    }
  }

  void parseOptimizer(const json& value, OptimizerSpec& out) {
    const std::string path = "optimizer";
    if (!expectObject(value, path)) return;
    std::optional<OptimizerKind> kind;
    if (const json* v = need(value, path, "kind")) {
      OptimizerKind parsed{};
      if (readEnum(*v, join(path, "kind"), parsed)) kind = parsed;
    }
    if (kind) out.kind = *kind;
    using K = OptimizerKind;
    checkKeys(value, path, kOptimizerKeys,
              kindGate<K>("optimizer.kind", kind,
                          {{"momentum", {K::kSgd}},
                           {"dampening", {K::kSgd}},
                           {"nesterov", {K::kSgd}},
                           {"betas", {K::kAdam, K::kAdamW}},
                           {"eps", {K::kAdam, K::kAdamW}}}));
    if (const json* v = need(value, path, "lr")) readPositive(*v, join(path, "lr"), out.lr);
    auto unit = [](double x) { return x >= 0 && x < 1; };
    if (const json* v = option(value, "momentum", kind, {K::kSgd})) {
      readNumber(*v, join(path, "momentum"), out.momentum, "a number in [0, 1)", unit);
    }
    if (const json* v = option(value, "dampening", kind, {K::kSgd})) {
      readNumber(*v, join(path, "dampening"), out.dampening, "a number in [0, 1]",
                 [](double x) { return x >= 0 && x <= 1; });
    }
    if (const json* v = option(value, "nesterov", kind, {K::kSgd})) {
      readBool(*v, join(path, "nesterov"), out.nesterov);
    }
    if (const json* v = option(value, "betas", kind, {K::kAdam, K::kAdamW})) {
      std::string betas_path = join(path, "betas");
      if (!v->is_array() || v->size() != 2) {
        report(betas_path, "expected an array of two numbers in [0, 1), got " + shown(*v));
      } else {
        readNumber((*v)[0], indexed(betas_path, 0), out.betas[0], "a number in [0, 1)", unit);
        readNumber((*v)[1], indexed(betas_path, 1), out.betas[1], "a number in [0, 1)", unit);
      }
    }
    if (const json* v = option(value, "eps", kind, {K::kAdam, K::kAdamW})) {
      readPositive(*v, join(path, "eps"), out.eps);
    }
    if (kind) out.weight_decay = defaultWeightDecay(*kind);
    if (const json* v = find(value, "weight_decay")) {
      readNumber(*v, join(path, "weight_decay"), out.weight_decay, "a non-negative number",
                 [](double x) { return x >= 0; });
    }
    if (const json* v = find(value, "clip_grad_norm"); v && !v->is_null()) {
      double norm = 0;
      if (readPositive(*v, join(path, "clip_grad_norm"), norm)) out.clip_grad_norm = norm;
    }
    if (const json* v = find(value, "schedule")) parseSchedule(*v, out.schedule);
    if (kind == K::kSgd && out.nesterov &&
        allOk("optimizer.momentum", "optimizer.dampening", "optimizer.nesterov") &&
        (out.momentum <= 0 || out.dampening != 0)) {
      report("optimizer.nesterov",
             fmt::format("requires momentum > 0 and dampening 0 (as in PyTorch), got momentum {} "
                         "and dampening {}",
                         out.momentum, out.dampening));
    }
  }

  // optimizer.schedule; its bounds against optimizer.lr and train.steps are crossCheck's.
  void parseSchedule(const json& value, LrSchedule& out) {
    const std::string path = "optimizer.schedule";
    if (!expectObject(value, path)) return;
    // Left out: constant.
    std::optional<LrScheduleKind> kind = LrScheduleKind::kConstant;
    if (const json* v = find(value, "kind")) {
      LrScheduleKind parsed{};
      kind = readEnum(*v, join(path, "kind"), parsed) ? std::optional(parsed) : std::nullopt;
    }
    if (kind) out.kind = *kind;
    using K = LrScheduleKind;
    checkKeys(value, path, kScheduleKeys,
              kindGate<K>("optimizer.schedule.kind", kind,
                          {{"warmup_steps", {K::kCosine}},
                           {"min_lr", {K::kCosine}},
                           {"decay_steps", {K::kCosine}}}));
    if (const json* v = option(value, "warmup_steps", kind, {K::kCosine})) {
      readInt(*v, join(path, "warmup_steps"), out.warmup_steps, 0, kMaxSteps,
              "a non-negative integer");
    }
    if (const json* v = option(value, "min_lr", kind, {K::kCosine})) {
      readNumber(*v, join(path, "min_lr"), out.min_lr, "a non-negative number",
                 [](double x) { return x >= 0; });
    }
    if (const json* v = option(value, "decay_steps", kind, {K::kCosine}); v && !v->is_null()) {
      int64_t steps = 0;
      if (readInt(*v, join(path, "decay_steps"), steps, 1, kMaxSteps, "a positive integer"))
        out.decay_steps = steps;
    }
  }

  bool readHostName(const json& value, const std::string& path, std::string& out) {
    bool ok = value.is_string() && !value.get_ref<const std::string&>().empty() &&
              value.get_ref<const std::string&>().size() <= 255 &&
              value.get_ref<const std::string&>()[0] != '-';
    if (ok) {
      const std::string& host = value.get_ref<const std::string&>();
      ok = std::all_of(host.begin(), host.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("._-:%[]", c);
      });
    }
    if (!ok) {
      report(path, "expected a host name or address, got " + shown(value));
      return false;
    }
    out = value.get<std::string>();
    return true;
  }

  void parseLaunch(const json& value, LaunchSpec& out) {
    const std::string path = "launch";
    if (!expectObject(value, path)) return;
    checkKeys(value, path, kLaunchKeys, nullptr);
    if (const json* v = find(value, "hosts")) {
      parseHosts(*v, join(path, "hosts"), out.hosts);
    } else {
      world_size_ = 1;
    }
    if (const json* v = find(value, "node_binary")) {
      readOptionalText(*v, join(path, "node_binary"), out.node_binary);
    }
    if (const json* v = find(value, "master_port")) {
      readInt(*v, join(path, "master_port"), out.master_port, 0, 65535,
              "a port number in 0..65535 (0 picks a free port)", true);
    }
    if (const json* v = find(value, "timeout_s")) {
      readPositive(*v, join(path, "timeout_s"), out.timeout_s, kMaxTimeoutSeconds);
    }
    if (const json* v = find(value, "env")) parseEnv(*v, join(path, "env"), out.env);
    if (const json* v = find(value, "env_file")) {
      readOptionalText(*v, join(path, "env_file"), out.env_file);
    }
    if (const json* v = find(value, "max_restarts")) {
      readInt(*v, join(path, "max_restarts"), out.max_restarts, 0, kMaxRestarts,
              fmt::format("an integer in 0..{}", kMaxRestarts), true);
    }
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

  void parseHosts(const json& value, const std::string& path, std::vector<LaunchHostSpec>& out) {
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
      std::string host_path = indexed(path, i);
      LaunchHostSpec& host = hosts[i];
      if (!expectObject(value[i], host_path)) {
        ranks_ok = false;
        continue;
      }
      const json& object = value[i];
      checkKeys(object, host_path, kHostKeys, nullptr);
      if (const json* v = find(object, "host"))
        readHostName(*v, join(host_path, "host"), host.host);
      if (const json* v = need(object, host_path, "ranks")) {
        ranks_ok &= readInt(*v, join(host_path, "ranks"), host.ranks, 1, kMaxRanksPerHost,
                            "a positive integer");
      } else {
        ranks_ok = false;
      }
      if (const json* v = find(object, "port"); v && !v->is_null()) {
        int port = 0;
        if (readInt(*v, join(host_path, "port"), port, 1, 65535, "a port number in 1..65535",
                    true)) {
          host.port = port;
        }
      }
      if (const json* v = find(object, "user")) {
        if (readOptionalText(*v, join(host_path, "user"), host.user) && host.user &&
            (host.user->front() == '-' ||
             std::any_of(host.user->begin(), host.user->end(), [](char c) {
               return std::isspace(static_cast<unsigned char>(c)) ||
                      std::iscntrl(static_cast<unsigned char>(c)) || c == '@';
             }))) {
          report(join(host_path, "user"), "expected a user name, got " + shown(*v));
        }
      }
      if (const json* v = find(object, "identity_file")) {
        readOptionalText(*v, join(host_path, "identity_file"), host.identity_file);
      }
      if (const json* v = find(object, "password_auth"))
        readBool(*v, join(host_path, "password_auth"), host.password_auth);
    }
    out = std::move(hosts);
    if (!ranks_ok) return;
    int64_t world = 0;
    for (const LaunchHostSpec& host : out) world += host.ranks;
    if (world > kMaxWorldSize) {
      report(path,
             fmt::format("a world size of {} is more than the {} supported", world, kMaxWorldSize));
      return;
    }
    world_size_ = static_cast<int>(world);
  }

  void parseCheckpoint(const json& value, CheckpointSpec& out) {
    const std::string path = "checkpoint";
    if (!expectObject(value, path)) return;
    checkKeys(value, path, kCheckpointKeys, nullptr);
    if (const json* v = need(value, path, "dir")) readText(*v, join(path, "dir"), out.dir);
    if (const json* v = find(value, "every_steps")) {
      readInt(*v, join(path, "every_steps"), out.every_steps, 0, kMaxSteps,
              "a non-negative integer");
    }
    if (const json* v = find(value, "resume")) readBool(*v, join(path, "resume"), out.resume);
    if (const json* v = find(value, "consolidate"))
      readBool(*v, join(path, "consolidate"), out.consolidate);
  }

  void parseTelemetry(const json& value, TelemetrySpec& out) {
    const std::string path = "telemetry";
    if (!expectObject(value, path)) return;
    checkKeys(value, path, kTelemetryKeys, nullptr);
    if (const json* v = find(value, "every_steps")) {
      readInt(*v, join(path, "every_steps"), out.every_steps, 1, kMaxSteps, "a positive integer");
    }
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
    parseProgram(value, *spec.program);
    if (const json* v = find(root, "launch")) {
      parseLaunch(*v, spec.launch);
    } else {
      world_size_ = worldSize(spec);
    }
    if (const json* launch = find(root, "launch");
        launch && launch->is_object() && find(*launch, "max_restarts")) {
      report("launch.max_restarts",
             "not read by a program job: its workers host their own torch.distributed store, "
             "which the agents cannot coordinate a restart through; remove it");
    }
    spec.strategy.kind = world_size_.value_or(1) > 1 ? StrategyKind::kDdp : StrategyKind::kSingle;
    if (const json* v = find(root, "strategy")) {
      if (!expectObject(*v, "strategy")) return;
      for (const auto& [key, option] : v->items()) {
        if (key != "kind")
          report(join("strategy", key),
                 "a program job's strategy is only its kind (what the script does, shown in "
                 "the history); the script sets its own options");
      }
      if (const json* kind = find(*v, "kind")) readEnum(*kind, "strategy.kind", spec.strategy.kind);
    }
  }

  void parseProgram(const json& value, ProgramSpec& out) {
    const std::string path = "program";
    if (!expectObject(value, path)) return;
    checkKeys(value, path, kProgramKeys, nullptr);
    if (const json* v = find(value, "python")) readText(*v, join(path, "python"), out.python);
    if (const json* v = need(value, path, "script")) readText(*v, join(path, "script"), out.script);
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
          out.args.push_back(arg.get<std::string>());
        }
      }
    }
    if (const json* v = find(value, "workdir")) {
      if (v->is_string() && v->get_ref<const std::string&>().empty()) {
        out.workdir.clear();
      } else {
        readText(*v, join(path, "workdir"), out.workdir);
      }
    }
    if (const json* v = find(value, "upload")) readBool(*v, join(path, "upload"), out.upload);
    if (const json* v = find(value, "steps"))
      readInt(*v, join(path, "steps"), out.steps, 0, kMaxSteps, "a non-negative integer");
  }

  // --- checks across blocks --------------------------------------------------------------------

  void crossCheck(const JobSpec& spec) {
    const bool strategy_known = okAt("strategy.kind");
    const bool layers_known = okAt("model.layers");
    const StrategyKind strategy = spec.strategy.kind;

    // The model kind's own rules (nn/models.cpp), once its generic fields are sound.
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

    // Data against model.
    if (okAt("data.kind") && spec.data.kind == DataKind::kSynthetic && layers_known &&
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

    // The schedule against the peak learning rate and the run's length.
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

    // Token data against the model: token ids need a model that reads them, and byte-level
    // text needs a vocabulary of every byte (data/text_dataset.h).
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

    // Backend against device.
    if (allOk("backend", "device") && spec.backend == BackendKind::kNccl &&
        spec.device == DeviceKind::kCpu) {
      report("backend", "nccl needs CUDA devices, but device is \"cpu\"");
    }

    if (!strategy_known) return;

    const StrategyPlan& plan = strategyPlan(strategy);
    // The strategy's own checks (spec/strategies/), then what every strategy shares.
    StrategyCheck check{
        .ok_at = [this](std::string_view path) { return okAt(path); },
        .world_size = world_size_,
        .report = [this](std::string path,
                         std::string message) { report(std::move(path), std::move(message)); }};
    plan.check(spec, check);
    const bool micro_ok = okAt("train.micro_batches");
    if (!plan.takesMicroBatches() && micro_ok && spec.train.micro_batches != 1) {
      std::string takers;
      for (const StrategyPlan* other : strategyPlans()) {
        if (!other->takesMicroBatches()) continue;
        takers += fmt::format("{}{}", takers.empty() ? "" : " or ", toString(other->kind()));
      }
      report("train.micro_batches", fmt::format("must be 1 unless strategy.kind is {}, got {}",
                                                takers, spec.train.micro_batches));
    }

    // Evaluation needs a validation set.
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

    // Every data-parallel rank needs a full batch when incomplete ones are dropped.
    if (okAt("data.kind") && spec.data.kind == DataKind::kSynthetic && spec.data.drop_last &&
        allOk("data.samples", "data.drop_last", "train.batch_size") && world_size_) {
      int64_t ranks = plan.ranksShareSamples() ? 1 : *world_size_;
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
  std::optional<int> world_size_;  // set when every launch.hosts[].ranks is valid
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

json launchToJson(const LaunchSpec& spec) {
  json hosts = json::array();
  for (const LaunchHostSpec& h : spec.hosts) {
    json host = {{"host", h.host}, {"ranks", h.ranks}};
    if (h.port) host["port"] = *h.port;
    if (h.user) host["user"] = *h.user;
    if (h.identity_file) host["identity_file"] = *h.identity_file;
    if (h.password_auth) host["password_auth"] = true;
    hosts.push_back(std::move(host));
  }
  json launch = {{"hosts", std::move(hosts)},
                 {"master_port", spec.master_port},
                 {"timeout_s", spec.timeout_s}};
  if (spec.node_binary) launch["node_binary"] = *spec.node_binary;
  if (!spec.env.empty()) launch["env"] = spec.env;
  if (spec.env_file) launch["env_file"] = *spec.env_file;
  launch["max_restarts"] = spec.max_restarts;
  return launch;
}

json programJobToJson(const JobSpec& spec) {
  // Restarts are the engine's (launch.max_restarts): a program job's launch has none.
  json launch = launchToJson(spec.launch);
  launch.erase("max_restarts");
  return {{"name", spec.name},
          {"description", spec.description},
          {"strategy", {{"kind", toString(spec.strategy.kind)}}},
          {"program", toJson(*spec.program)},
          {"launch", std::move(launch)}};
}

}  // namespace

json toJson(const ProgramSpec& program) {
  json out = {{"python", program.python},
              {"script", program.script},
              {"args", program.args},
              {"upload", program.upload},
              {"steps", program.steps}};
  if (!program.workdir.empty()) out["workdir"] = program.workdir;
  return out;
}

json toJson(const JobSpec& spec) {
  if (spec.program) return programJobToJson(spec);
  json strategy = {{"kind", toString(spec.strategy.kind)}};
  strategyPlan(spec.strategy.kind).writeOptions(spec.strategy, strategy);

  const ModelSpec& m = spec.model;
  json model;
  if (m.kind == "gpt") {
    model = {{"kind", m.kind},       {"vocab_size", m.vocab_size},
             {"context", m.context}, {"layers", m.block_count},
             {"heads", m.heads},     {"dim", m.dim},
             {"dropout", m.dropout}, {"bias", m.bias},
             {"seed", m.seed}};
  } else {
    model = {{"kind", m.kind},
             {"layers", m.layers},
             {"activation", toString(m.activation)},
             {"dropout", m.dropout},
             {"layer_norm", m.layer_norm},
             {"seed", m.seed}};
  }
  if (m.init_checkpoint) model["init_checkpoint"] = *m.init_checkpoint;

  const DataSpec& d = spec.data;
  json data = {{"kind", toString(d.kind)}, {"shuffle", d.shuffle}, {"drop_last", d.drop_last}};
  if (d.kind == DataKind::kSynthetic) {
    data["samples"] = d.samples;
    data["features"] = d.features;
    data["classes"] = d.classes;
    data["seed"] = d.seed;
  } else if (d.kind == DataKind::kIdx) {
    data["images"] = d.images;
    data["labels"] = d.labels;
  } else if (d.kind == DataKind::kTokens) {
    data["train"] = d.train;
    if (!d.val.empty()) data["val"] = d.val;
  } else {
    data["path"] = d.path;
    data["val_fraction"] = d.val_fraction;
  }

  const TrainSpec& t = spec.train;
  json train = {{"steps", t.steps},
                {"batch_size", t.batch_size},
                {"grad_accum_steps", t.grad_accum_steps},
                {"micro_batches", t.micro_batches},
                {"seed", t.seed},
                {"eval_every", t.eval_every},
                {"eval_batches", t.eval_batches},
                {"activation_checkpointing", t.activation_checkpointing}};
  if (t.peak_tflops) train["peak_tflops"] = *t.peak_tflops;
  train["precision"] = toString(t.precision);
  if (t.precision == Precision::kFp16) {
    train["loss_scale"] = {{"init", t.loss_scale.init},
                           {"growth_interval", t.loss_scale.growth_interval}};
  }

  const OptimizerSpec& o = spec.optimizer;
  json optimizer = {{"kind", toString(o.kind)}, {"lr", o.lr}, {"weight_decay", o.weight_decay}};
  if (o.kind == OptimizerKind::kSgd) {
    optimizer["momentum"] = o.momentum;
    optimizer["dampening"] = o.dampening;
    optimizer["nesterov"] = o.nesterov;
  } else {
    optimizer["betas"] = o.betas;
    optimizer["eps"] = o.eps;
  }
  if (o.clip_grad_norm) optimizer["clip_grad_norm"] = *o.clip_grad_norm;
  json schedule = {{"kind", toString(o.schedule.kind)}};
  if (o.schedule.kind == LrScheduleKind::kCosine) {
    schedule["warmup_steps"] = o.schedule.warmup_steps;
    schedule["min_lr"] = o.schedule.min_lr;
    if (o.schedule.decay_steps) schedule["decay_steps"] = *o.schedule.decay_steps;
  }
  optimizer["schedule"] = std::move(schedule);

  json document = {{"name", spec.name},
                   {"description", spec.description},
                   {"strategy", std::move(strategy)},
                   {"model", std::move(model)},
                   {"data", std::move(data)},
                   {"train", std::move(train)},
                   {"optimizer", std::move(optimizer)},
                   {"backend", toString(spec.backend)},
                   {"device", toString(spec.device)},
                   {"launch", launchToJson(spec.launch)},
                   {"telemetry", {{"every_steps", spec.telemetry.every_steps}}}};
  if (spec.checkpoint) {
    document["checkpoint"] = {{"dir", spec.checkpoint->dir},
                              {"every_steps", spec.checkpoint->every_steps},
                              {"resume", spec.checkpoint->resume},
                              {"consolidate", spec.checkpoint->consolidate}};
  }
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
  for (const LaunchHostSpec& host : spec.launch.hosts) world += host.ranks;
  return static_cast<int>(world);
}

int stageCount(const JobSpec& spec) {
  if (spec.strategy.kind != StrategyKind::kPipeline) return 1;
  return worldSize(spec) * spec.strategy.pipeline.virtual_stages;
}

int dataParallelSize(const JobSpec& spec) {
  return strategyPlan(spec.strategy.kind).ranksShareSamples() ? 1 : worldSize(spec);
}

}  // namespace ringmaster
