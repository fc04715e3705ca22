// The JSON Lines codec of the telemetry protocol (docs/telemetry.md) and the stream LineSplitter.
// The decoder tries the simdjson fast path (fast_decoder.h) for the common events, then validates
// every field by hand and turns every problem, nlohmann's parse errors included, into a
// DecodeError; it never lets an exception out.
#include "telemetry/codec.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <type_traits>

#include <fmt/format.h>

#include "core/error.h"
#include "telemetry/fast_decoder.h"
#include "telemetry/fields.h"

namespace ringmaster {

// ---------------------------------------------------------------------------------------------
// Enumerations.

std::string_view toString(SchedPhase value) {
  switch (value) {
    case SchedPhase::kForward:
      return "F";
    case SchedPhase::kBackward:
      return "B";
    case SchedPhase::kWeight:
      return "W";
  }
  return "?";
}

std::string_view toString(LogLevel value) {
  switch (value) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

std::string_view toString(DoneStatus value) {
  switch (value) {
    case DoneStatus::kCompleted:
      return "completed";
    case DoneStatus::kFailed:
      return "failed";
    case DoneStatus::kCancelled:
      return "cancelled";
    case DoneStatus::kHung:
      return "hung";
  }
  return "?";
}

std::optional<SchedPhase> parseSchedPhase(std::string_view name) {
  if (name == "F") return SchedPhase::kForward;
  if (name == "B") return SchedPhase::kBackward;
  if (name == "W") return SchedPhase::kWeight;
  return std::nullopt;
}

std::optional<LogLevel> parseLogLevel(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  return std::nullopt;
}

std::optional<DoneStatus> parseDoneStatus(std::string_view name) {
  if (name == "completed") return DoneStatus::kCompleted;
  if (name == "failed") return DoneStatus::kFailed;
  if (name == "cancelled") return DoneStatus::kCancelled;
  if (name == "hung") return DoneStatus::kHung;
  return std::nullopt;
}

bool isCommDim(std::string_view name) {
  for (const std::string_view dim : kCommDims)
    if (dim == name) return true;
  return false;
}

std::string_view eventTypeName(const EventBody& body) {
  struct Names {
    std::string_view operator()(const HelloEvent&) const { return "hello"; }
    std::string_view operator()(const StepEvent&) const { return "step"; }
    std::string_view operator()(const CommEvent&) const { return "comm"; }
    std::string_view operator()(const SchedEvent&) const { return "sched"; }
    std::string_view operator()(const LogEvent&) const { return "log"; }
    std::string_view operator()(const ErrorEvent&) const { return "error"; }
    std::string_view operator()(const DoneEvent&) const { return "done"; }
    std::string_view operator()(const EvalEvent&) const { return "eval"; }
    std::string_view operator()(const ProgressEvent&) const { return "progress"; }
    std::string_view operator()(const FlightEvent&) const { return "flight"; }
  };
  return std::visit(Names{}, body);
}

namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------
// Encoding. Fields are written in the order of docs/telemetry.md; absent optionals are omitted.

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <typename T>
void putOptional(OrderedJson& out, const char* key, const std::optional<T>& value) {
  if (value) out[key] = *value;
}

void putBody(OrderedJson& out, const HelloEvent& e) {
  out["world_size"] = e.world_size;
  out["local_rank"] = e.local_rank;
  out["host"] = e.host;
  out["pid"] = e.pid;
  out["device"] = e.device;
  out["device_name"] = e.device_name;
  out["device_memory_total"] = e.device_memory_total;
  out["version"] = e.version;
  putOptional(out, "run_id", e.run_id);
  out["strategy"] = e.strategy;
  out["attempt"] = e.attempt;
  const auto axes = [](const MeshAxes& a) {
    return OrderedJson{{"dp", a.dp}, {"tp", a.tp}, {"pp", a.pp}};
  };
  if (e.mesh) out["mesh"] = axes(*e.mesh);
  if (e.coords) out["coords"] = axes(*e.coords);
}

// The value of one field of a table (fields.h) as JSON; nlohmann writes a non-finite double as
// null.
template <typename T>
OrderedJson fieldJson(const T& value) {
  if constexpr (std::is_same_v<T, SchedPhase>) {
    return std::string(toString(value));
  } else {
    return value;
  }
}

// The step's custom metrics, after its fields; absent when there are none. A non-finite value is
// written as null.
void putMetrics(OrderedJson& out, const std::map<std::string, double>& metrics) {
  if (metrics.empty()) return;
  OrderedJson& object = out["metrics"] = OrderedJson::object();
  for (const auto& [name, value] : metrics) object[name] = value;
}

// The step, comm, sched and eval records: their field tables, absent optionals omitted.
template <typename Record>
requires kHasFieldTable<Record>
void putBody(OrderedJson& out, const Record& e) {
  forEachField(fieldsOf<Record>(), [&](const auto& field) {
    const auto& value = e.*field.member;
    if constexpr (IsOptional<std::decay_t<decltype(value)>>::value) {
      if (value) out[std::string(field.name)] = fieldJson(*value);
    } else {
      out[std::string(field.name)] = fieldJson(value);
    }
  });
  if constexpr (std::is_same_v<Record, StepEvent>) putMetrics(out, e.metrics);
}

void putBody(OrderedJson& out, const LogEvent& e) {
  out["level"] = std::string(toString(e.level));
  out["message"] = e.message;
}

void putBody(OrderedJson& out, const ErrorEvent& e) {
  out["message"] = e.message;
  out["kind"] = e.kind;
  out["where"] = e.where;
  putOptional(out, "step", e.step);
  out["fatal"] = e.fatal;
  putOptional(out, "host", e.host);
  putOptional(out, "exit_code", e.exit_code);
  putOptional(out, "signal", e.signal);
  // flight_recorder is spliced in by encodeEvent: it is an nlohmann::json, not an ordered_json.
}

void putBody(OrderedJson& out, const FlightEvent& e) {
  out["reason"] = e.reason;
  // flight_recorder is spliced in by encodeEvent, as the error event's.
}

void putBody(OrderedJson& out, const DoneEvent& e) {
  out["status"] = std::string(toString(e.status));
  out["final_step"] = e.final_step;
  out["wall_s"] = e.wall_s;
}

std::string dumpCompact(const OrderedJson& value) {
  return value.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

std::string dumpCompact(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// ---------------------------------------------------------------------------------------------
// Decoding helpers.

// A string as an error message shows it: JSON-quoted, cut after 40 bytes.
std::string quoteShort(std::string_view text) {
  constexpr std::size_t kShown = 40;
  if (text.size() <= kShown) return dumpCompact(Json(text));
  return dumpCompact(Json(text.substr(0, kShown))) + "...";
}

// A value as an error message shows it: numbers and short strings in full, containers by kind.
std::string describe(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return value.dump();
    case Json::value_t::string:
      return "string " + quoteShort(value.get_ref<const std::string&>());
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    default:
      return "an unexpected value";
  }
}

// "an integer in [0, 2^63-1]", "an integer in [0, 2147483647]", "an integer in [0, 2^53]", ...
std::string integerRange(int64_t min, int64_t max) {
  if (max == kMaxStep) return min == 0 ? "an integer in [0, 2^53]" : "an integer in [-2^53, 2^53]";
  if (max == std::numeric_limits<int64_t>::max()) {
    if (min == 0) return "an integer in [0, 2^63-1]";
    if (min == 1) return "a positive integer";
    if (min == std::numeric_limits<int64_t>::min()) return "an integer";
    return fmt::format("an integer >= {}", min);
  }
  return fmt::format("an integer in [{}, {}]", min, max);
}

// " (out of range)" for a float that is a whole number too large for any integer field.
std::string floatHint(const Json& value) {
  if (!value.is_number_float()) return "";
  double d = value.get<double>();
  if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) >= 9.2e18) return " (out of range)";
  return "";
}

constexpr int kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Reads the fields of one JSON object, remembering the first problem. Getters return a default
// after a problem, so a body can be read straight through and checked once at the end.
class FieldReader {
 public:
  FieldReader(const Json& object, std::string prefix)
      : object_(object), prefix_(std::move(prefix)) {}

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& prefix() const { return prefix_; }
  // Takes the first problem of a reader of one of this object's values (its own prefix).
  void failAs(const FieldReader& inner) {
    if (error_.empty()) error_ = inner.error_;
  }

  void fail(std::string_view key, std::string_view problem) {
    if (error_.empty()) error_ = fmt::format("{}{}: {}", prefix_, key, problem);
  }

  int64_t integer(const char* key, int64_t min, int64_t max) {
    const Json* value = required(key);
    return value ? toInteger(key, *value, min, max).value_or(0) : 0;
  }

  std::optional<int64_t> optionalInteger(const char* key, int64_t min, int64_t max) {
    const Json* value = optional(key);
    return value ? toInteger(key, *value, min, max) : std::nullopt;
  }

  // An unsigned field, in [0, max] (at most 2^63 - 1: storage keeps it in a signed integer).
  uint64_t unsignedInteger(const char* key, int64_t max) {
    const Json* value = required(key);
    return value ? static_cast<uint64_t>(toInteger(key, *value, 0, max).value_or(0)) : 0;
  }

  double number(const char* key, NumberDomain range) {
    const Json* value = required(key);
    return value ? toNumber(key, *value, range).value_or(0.0) : 0.0;
  }

  // A number, or null read as NaN (JSON has no NaN): loss only.
  double numberOrNull(const char* key, NumberDomain range) {
    auto it = object_.find(key);
    if (it != object_.end() && it->is_null()) return std::numeric_limits<double>::quiet_NaN();
    const Json* value = required(key);
    if (!value) return 0.0;
    if (!value->is_number()) {
      fail(key, fmt::format("expected a number or null, got {}", describe(*value)));
      return 0.0;
    }
    return toNumber(key, *value, range).value_or(0.0);
  }

  std::optional<double> optionalNumber(const char* key, NumberDomain range) {
    const Json* value = optional(key);
    return value ? toNumber(key, *value, range) : std::nullopt;
  }

  std::string string(const char* key) {
    const Json* value = required(key);
    return value ? toString(key, *value).value_or("") : "";
  }

  std::optional<std::string> optionalString(const char* key) {
    const Json* value = optional(key);
    return value ? toString(key, *value) : std::nullopt;
  }

  bool boolean(const char* key) {
    const Json* value = required(key);
    if (!value) return false;
    if (!value->is_boolean()) {
      fail(key, fmt::format("expected true or false, got {}", describe(*value)));
      return false;
    }
    return value->get<bool>();
  }

  // A string spelling one of an enumeration's values; `expected` lists them for the message.
  template <typename E>
  E enumeration(const char* key, std::optional<E> (*parse)(std::string_view),
                std::string_view expected) {
    const Json* value = required(key);
    if (!value) return E{};
    if (value->is_string()) {
      if (auto parsed = parse(value->get_ref<const std::string&>())) return *parsed;
    }
    fail(key, fmt::format("expected one of {}, got {}", expected, describe(*value)));
    return E{};
  }

  // The raw value of an optional field (null counts as absent).
  const Json* optional(const char* key) {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

 private:
  const Json* required(const char* key) {
    auto it = object_.find(key);
    if (it == object_.end()) {
      fail(key, "missing");
      return nullptr;
    }
    return &*it;
  }

  std::optional<int64_t> toInteger(const char* key, const Json& value, int64_t min, int64_t max) {
    if (value.is_number_unsigned()) {
      uint64_t u = value.get<uint64_t>();
      if (u <= static_cast<uint64_t>(max) && static_cast<int64_t>(u) >= min) {
        return static_cast<int64_t>(u);
      }
    } else if (value.is_number_integer()) {
      int64_t i = value.get<int64_t>();
      if (i >= min && i <= max) return i;
    }
    fail(key, fmt::format("expected {}, got {}{}", integerRange(min, max), describe(value),
                          floatHint(value)));
    return std::nullopt;
  }

  // A number in `range`; a negative zero where only non-negative numbers go is read as 0.
  std::optional<double> toNumber(const char* key, const Json& value, NumberDomain range) {
    if (!value.is_number()) {
      fail(key, fmt::format("expected a finite number, got {}", describe(value)));
      return std::nullopt;
    }
    const double d = value.get<double>();
    if (d >= range.min && d <= range.max) return range.min == 0 ? d + 0.0 : d;
    fail(key, fmt::format("expected a number in [{:g}, {:g}], got {}", range.min, range.max,
                          describe(value)));
    return std::nullopt;
  }

  std::optional<std::string> toString(const char* key, const Json& value) {
    if (value.is_string()) return value.get<std::string>();
    fail(key, fmt::format("expected a string, got {}", describe(value)));
    return std::nullopt;
  }

  const Json& object_;
  std::string prefix_;
  std::string error_;
};

// hello.mesh or hello.coords: an object of the three dimensions' integers, each at least `min`.
std::optional<MeshAxes> readMeshAxes(FieldReader& in, const char* key, int min) {
  const Json* value = in.optional(key);
  if (value == nullptr || in.failed()) return std::nullopt;
  if (!value->is_object()) {
    in.fail(key, fmt::format("expected an object of \"dp\", \"tp\" and \"pp\", got {}",
                             describe(*value)));
    return std::nullopt;
  }
  FieldReader axes(*value, in.prefix() + key + ".");
  MeshAxes out{.dp = static_cast<int>(axes.integer("dp", min, kIntMax)),
               .tp = static_cast<int>(axes.integer("tp", min, kIntMax)),
               .pp = static_cast<int>(axes.integer("pp", min, kIntMax))};
  in.failAs(axes);
  return in.failed() ? std::nullopt : std::optional(out);
}

// The mesh's product is the world size; the coordinates lie inside the mesh, which they need.
void checkMesh(FieldReader& in, const HelloEvent& e) {
  if (in.failed()) return;
  if (e.mesh) {
    const int64_t product = int64_t{e.mesh->dp} * e.mesh->tp * e.mesh->pp;
    if (product != e.world_size) {
      in.fail("mesh", fmt::format("dp {} x tp {} x pp {} = {} is not world_size {}", e.mesh->dp,
                                  e.mesh->tp, e.mesh->pp, product, e.world_size));
      return;
    }
  }
  if (!e.coords) return;
  if (!e.mesh) {
    in.fail("coords", "given without mesh");
  } else if (e.coords->dp >= e.mesh->dp || e.coords->tp >= e.mesh->tp ||
             e.coords->pp >= e.mesh->pp) {
    in.fail("coords",
            fmt::format("(dp {}, tp {}, pp {}) is outside the mesh {} x {} x {}", e.coords->dp,
                        e.coords->tp, e.coords->pp, e.mesh->dp, e.mesh->tp, e.mesh->pp));
  }
}

HelloEvent readHello(FieldReader& in, int rank) {
  HelloEvent e;
  e.world_size = static_cast<int>(in.integer("world_size", 1, kIntMax));
  e.local_rank = static_cast<int>(in.integer("local_rank", 0, kIntMax));
  e.host = in.string("host");
  e.pid = in.integer("pid", 0, kInt64Max);
  e.device = in.string("device");
  e.device_name = in.string("device_name");
  e.device_memory_total = in.unsignedInteger("device_memory_total", kUnsigned.max);
  e.version = in.string("version");
  e.run_id = in.optionalString("run_id");
  e.strategy = in.string("strategy");
  e.attempt = static_cast<int>(in.optionalInteger("attempt", 0, kIntMax).value_or(0));
  if (!in.failed() && rank >= e.world_size) {
    in.fail("world_size", fmt::format("{} is not greater than the rank {}", e.world_size, rank));
  }
  if (!in.failed() && e.local_rank >= e.world_size) {
    in.fail("local_rank",
            fmt::format("{} is not less than world_size {}", e.local_rank, e.world_size));
  }
  e.mesh = readMeshAxes(in, "mesh", 1);
  e.coords = readMeshAxes(in, "coords", 0);
  checkMesh(in, e);
  return e;
}

// The wire spellings of an enumeration's values, for a decoder's message.
std::string_view choices(SchedPhase) {
  return "\"F\", \"B\", \"W\"";
}

std::string choices(const OneOf& domain) {
  std::string out;
  for (std::size_t i = 0; i < domain.count; ++i)
    out += fmt::format("{}\"{}\"", i == 0 ? "" : ", ", domain.names[i]);
  return out;
}

// A string field: an optional one keeps its member's default when absent; one whose domain lists
// its spellings must be one of them.
template <typename Field>
void readStringField(FieldReader& in, const Field& field, std::string& out) {
  const char* key = field.name.data();
  if (field.presence == Presence::kOptional) {
    if (std::optional<std::string> text = in.optionalString(key)) out = std::move(*text);
  } else {
    out = in.string(key);
  }
  if constexpr (std::is_same_v<std::decay_t<decltype(field.domain)>, OneOf>) {
    if (!in.failed() && !field.domain.contains(out)) {
      in.fail(key, fmt::format("expected one of {}, got {}", choices(field.domain),
                               describe(Json(out))));
    }
  }
}

// One field of a table (fields.h) into its member.
template <typename Field, typename Record>
void readField(FieldReader& in, const Field& field, Record& e) {
  using Member = typename Field::Value;
  const char* key = field.name.data();  // a string literal's: null-terminated
  Member& out = e.*field.member;
  if constexpr (std::is_same_v<Member, uint64_t>) {
    out = in.unsignedInteger(key, field.domain.max);
  } else if constexpr (std::is_same_v<Member, std::optional<int64_t>>) {
    out = in.optionalInteger(key, field.domain.min, field.domain.max);
  } else if constexpr (std::is_integral_v<Member>) {
    if (field.presence == Presence::kOptional) {
      out = static_cast<Member>(
          in.optionalInteger(key, field.domain.min, field.domain.max).value_or(out));
    } else {
      out = static_cast<Member>(in.integer(key, field.domain.min, field.domain.max));
    }
  } else if constexpr (std::is_same_v<Member, double>) {
    out = field.presence == Presence::kNullIsNaN ? in.numberOrNull(key, field.domain)
                                                 : in.number(key, field.domain);
  } else if constexpr (std::is_same_v<Member, std::optional<double>>) {
    out = in.optionalNumber(key, field.domain);
  } else if constexpr (std::is_same_v<Member, std::string>) {
    readStringField(in, field, out);
  } else if constexpr (std::is_same_v<Member, std::optional<std::string>>) {
    out = in.optionalString(key);
  } else {
    out = in.enumeration<Member>(key, parseSchedPhase, choices(Member{}));
  }
}

template <typename Record>
Record readFields(FieldReader& in) {
  Record e;
  forEachField(fieldsOf<Record>(), [&](const auto& field) { readField(in, field, e); });
  return e;
}

// The step's fields and its custom metrics: an object of names to numbers (in the domain of any
// signed field) or null (read as NaN). Names are not checked here: the recorder refuses the ones
// outside the bounds (custom_metrics.h) one by one, and keeps the rest of the step.
StepEvent readStep(FieldReader& in) {
  StepEvent e = readFields<StepEvent>(in);
  const Json* metrics = in.optional("metrics");
  if (metrics == nullptr || in.failed()) return e;
  if (!metrics->is_object()) {
    in.fail("metrics",
            fmt::format("expected an object of names to numbers, got {}", describe(*metrics)));
    return e;
  }
  for (const auto& [name, value] : metrics->items()) {
    if (value.is_null()) {
      e.metrics[name] = std::numeric_limits<double>::quiet_NaN();
    } else if (value.is_number() && value.get<double>() >= kAnySign.min &&
               value.get<double>() <= kAnySign.max) {
      e.metrics[name] = value.get<double>();
    } else {
      in.fail(fmt::format("metrics[{}]", quoteShort(name)),
              fmt::format("expected a number in [{:g}, {:g}] or null, got {}", kAnySign.min,
                          kAnySign.max, describe(value)));
      return e;
    }
  }
  return e;
}

SchedEvent readSched(FieldReader& in) {
  SchedEvent e = readFields<SchedEvent>(in);
  if (!in.failed() && e.end_us < e.start_us) {
    in.fail("end_us", fmt::format("{} is before start_us {}", e.end_us, e.start_us));
  } else if (!in.failed() && e.ready_us && (*e.ready_us < e.start_us || *e.ready_us > e.end_us)) {
    in.fail("ready_us", fmt::format("{} is outside [start_us {}, end_us {}]", *e.ready_us,
                                    e.start_us, e.end_us));
  } else if (!in.failed() && e.transfer_us &&
             *e.transfer_us > e.ready_us.value_or(e.start_us) - e.start_us) {
    in.fail("transfer_us",
            fmt::format("{} is longer than the wait from start_us to ready_us ({})", *e.transfer_us,
                        e.ready_us.value_or(e.start_us) - e.start_us));
  }
  return e;
}

LogEvent readLog(FieldReader& in) {
  LogEvent e;
  e.level =
      in.enumeration<LogLevel>("level", parseLogLevel, "\"debug\", \"info\", \"warn\", \"error\"");
  e.message = in.string("message");
  return e;
}

ErrorEvent readError(FieldReader& in) {
  ErrorEvent e;
  e.message = in.string("message");
  e.kind = in.string("kind");
  e.where = in.string("where");
  e.step = in.optionalInteger("step", 0, kMaxStep);
  e.fatal = in.boolean("fatal");
  e.host = in.optionalString("host");
  if (auto code = in.optionalInteger("exit_code", 0, 255)) e.exit_code = static_cast<int>(*code);
  e.signal = in.optionalString("signal");
  if (const Json* records = in.optional("flight_recorder")) {
    if (records->is_array()) {
      e.flight_recorder = *records;
    } else {
      in.fail("flight_recorder", fmt::format("expected an array, got {}", describe(*records)));
    }
  }
  return e;
}

FlightEvent readFlight(FieldReader& in) {
  FlightEvent e;
  e.reason = in.string("reason");
  if (const Json* records = in.optional("flight_recorder")) {
    if (records->is_array()) {
      e.flight_recorder = *records;
    } else {
      in.fail("flight_recorder", fmt::format("expected an array, got {}", describe(*records)));
    }
  } else {
    in.fail("flight_recorder", "missing");
  }
  return e;
}

DoneEvent readDone(FieldReader& in) {
  DoneEvent e;
  e.status = in.enumeration<DoneStatus>("status", parseDoneStatus,
                                        "\"completed\", \"failed\", \"cancelled\", \"hung\"");
  e.final_step = in.integer("final_step", 0, kMaxStep);
  e.wall_s = in.number("wall_s", kNonNegative);
  return e;
}

// The deepest nesting of arrays and objects in `text`, counted outside strings; stops counting
// once past `limit`. Exact for any prefix the JSON parser accepts, which is all that matters.
int nestingDepth(std::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// nlohmann's parse_error text without its "[json.exception.parse_error.101] " tag, bytes outside
// printable ASCII replaced so that the message is always valid UTF-8.
std::string cleanParseError(const char* what) {
  std::string_view text(what);
  if (!text.empty() && text.front() == '[') {
    if (auto end = text.find("] "); end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return out;
}

DecodeResult fail(std::string message) {
  return DecodeError{std::move(message)};
}

DecodeResult decodeUnchecked(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (line.size() > kMaxLineBytes) {
    return fail(
        fmt::format("line is {} bytes, longer than the limit of {}", line.size(), kMaxLineBytes));
  }
  if (line.find_first_not_of(" \t\r\n") == std::string_view::npos) return fail("empty line");
  if (nestingDepth(line, kMaxJsonDepth) > kMaxJsonDepth) {
    return fail(fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth));
  }

  Json root;
  try {
    root = Json::parse(line.begin(), line.end());
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number overflow
    return fail("malformed JSON: " + cleanParseError(e.what()));
  }
  if (!root.is_object()) return fail("expected a JSON object, got " + describe(root));

  // The envelope. "v" first, so that a newer stream is named as such whatever else it changed.
  auto version = root.find("v");
  if (version == root.end()) return fail("v: missing (not a Ringmaster telemetry line?)");
  if (!version->is_number_integer()) {
    return fail(fmt::format("v: expected an integer, got {}", describe(*version)));
  }
  if (version->is_number_unsigned()
          ? version->get<uint64_t>() > static_cast<uint64_t>(kTelemetryProtocol)
          : version->get<int64_t>() > kTelemetryProtocol) {
    return fail(fmt::format("protocol version {} is newer than this build's {}", version->dump(),
                            kTelemetryProtocol));
  }
  if (version->get<int64_t>() < kTelemetryProtocol) {
    return fail(fmt::format("protocol version {} is older than this build's {}", version->dump(),
                            kTelemetryProtocol));
  }
  FieldReader envelope(root, "");
  std::string type = envelope.string("type");
  if (envelope.failed()) return fail(envelope.error());

  TelemetryEvent event;
  event.rank = static_cast<int>(envelope.integer("rank", 0, kIntMax));
  event.seq = envelope.unsignedInteger("seq", kUnsigned.max);
  if (const Json* t = envelope.optional("t"); t && t->is_number() && t->get<double>() < 0) {
    envelope.fail("t", fmt::format("expected seconds since 1970, got {}", describe(*t)));
  }
  event.time = envelope.number("t", {0, kMaxEpochSeconds});
  if (envelope.failed()) return fail(envelope.error());

  FieldReader body(root, type + ".");
  if (type == "hello") {
    event.body = readHello(body, event.rank);
  } else if (type == "step") {
    event.body = readStep(body);
  } else if (type == "comm") {
    event.body = readFields<CommEvent>(body);
  } else if (type == "sched") {
    event.body = readSched(body);
  } else if (type == "log") {
    event.body = readLog(body);
  } else if (type == "error") {
    event.body = readError(body);
  } else if (type == "done") {
    event.body = readDone(body);
  } else if (type == "eval") {
    event.body = readFields<EvalEvent>(body);
  } else if (type == "progress") {
    event.body = readFields<ProgressEvent>(body);
  } else if (type == "flight") {
    event.body = readFlight(body);
  } else {
    return fail(fmt::format("type: unknown event type {}", quoteShort(type)));
  }
  if (body.failed()) return fail(body.error());
  return event;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public entry points.

std::string encodeEvent(const TelemetryEvent& event) {
  OrderedJson out;
  out["v"] = kTelemetryProtocol;
  out["type"] = std::string(eventTypeName(event.body));
  out["rank"] = event.rank;
  out["seq"] = event.seq;
  out["t"] = event.time;
  std::visit([&](const auto& body) { putBody(out, body); }, event.body);
  std::string line = dumpCompact(out);

  if (const auto* error = std::get_if<ErrorEvent>(&event.body); error && error->flight_recorder) {
    line.pop_back();  // the closing '}'
    line += ",\"flight_recorder\":";
    line += dumpCompact(*error->flight_recorder);
    line += '}';
  } else if (const auto* flight = std::get_if<FlightEvent>(&event.body)) {
    line.pop_back();
    line += ",\"flight_recorder\":";
    line += dumpCompact(flight->flight_recorder);
    line += '}';
  }
  return line;
}

const TelemetryEvent& DecodeResult::event() const {
  RM_ENFORCE(ok(), "DecodeResult::event() on an error: " + std::get<DecodeError>(value_).message);
  return std::get<TelemetryEvent>(value_);
}

TelemetryEvent& DecodeResult::event() {
  RM_ENFORCE(ok(), "DecodeResult::event() on an error: " + std::get<DecodeError>(value_).message);
  return std::get<TelemetryEvent>(value_);
}

const DecodeError& DecodeResult::error() const {
  RM_ENFORCE(!ok(), "DecodeResult::error() on a decoded event");
  return std::get<DecodeError>(value_);
}

DecodeResult decodeEventFully(std::string_view line) {
  try {
    return decodeUnchecked(line);
  } catch (const std::exception& e) {  // a bug or out of memory: still a value, never a throw
    return DecodeError{std::string("internal decoder error: ") + e.what()};
  }
}

DecodeResult decodeEvent(std::string_view line) {
  try {
    if (auto event = decodeCommonEvent(line)) return std::move(*event);
  } catch (const std::exception&) {  // out of memory: the full decoder reports it
  }
  return decodeEventFully(line);
}

// ---------------------------------------------------------------------------------------------
// LineSplitter.

LineSplitter::LineSplitter(std::size_t max_line_bytes) : max_line_bytes_(max_line_bytes) {}

void LineSplitter::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    const auto* newline = static_cast<const char*>(std::memchr(bytes.data(), '\n', bytes.size()));
    const std::size_t take =
        newline ? static_cast<std::size_t>(newline - bytes.data()) : bytes.size();
    if (!skipping_ && take > max_line_bytes_ - pending_.size()) {
      skipping_ = true;
      skipped_preview_ = pending_.substr(0, kPreviewBytes);
      skipped_bytes_ = pending_.size();
      pending_.clear();
    }
    if (skipping_) {
      if (skipped_preview_.size() < kPreviewBytes) {
        skipped_preview_.append(
            bytes.substr(0, std::min(take, kPreviewBytes - skipped_preview_.size())));
      }
      skipped_bytes_ += take;
      if (newline) endOversized();
    } else {
      pending_.append(bytes.data(), take);
      if (newline) {
        const std::size_t length = pending_.size();
        ready_.push_back(Line{std::move(pending_), false, length});
        pending_.clear();
      }
    }
    bytes.remove_prefix(newline ? take + 1 : take);
  }
}

void LineSplitter::endOversized() {
  ready_.push_back(Line{std::move(skipped_preview_), true, skipped_bytes_});
  skipped_preview_.clear();
  skipped_bytes_ = 0;
  skipping_ = false;
}

void LineSplitter::finish() {
  if (skipping_) {
    endOversized();
  } else if (!pending_.empty()) {
    const std::size_t length = pending_.size();
    ready_.push_back(Line{std::move(pending_), false, length});
    pending_.clear();
  }
}

std::optional<LineSplitter::Line> LineSplitter::next() {
  if (ready_.empty()) return std::nullopt;
  Line line = std::move(ready_.front());
  ready_.pop_front();
  return line;
}

// ---------------------------------------------------------------------------------------------
// Reporting an oversized telemetry line.

namespace {

constexpr std::string_view kOversizedReport = "oversized telemetry line";

}  // namespace

std::string oversizedLineReport(std::optional<int> rank, const LineSplitter::Line& line,
                                std::size_t limit) {
  std::string preview;
  for (const char c : line.text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f || c == '\\' || c == '\'')
      preview += fmt::format("\\x{:02x}", byte);
    else
      preview += c;
  }
  return fmt::format("{}{}: {} bytes, over the limit of {}, dropped; it began '{}'",
                     kOversizedReport, rank ? fmt::format(" from rank {}", *rank) : "", line.bytes,
                     limit, preview);
}

std::optional<OversizedLineReport> parseOversizedLineReport(std::string_view text) {
  if (text.starts_with('[')) {
    const std::size_t tag_end = text.find("] ");
    if (tag_end == std::string_view::npos) return std::nullopt;
    text.remove_prefix(tag_end + 2);
  }
  if (!text.starts_with(kOversizedReport)) return std::nullopt;
  text.remove_prefix(kOversizedReport.size());
  if (text.starts_with(':')) return OversizedLineReport{};
  constexpr std::string_view kFromRank = " from rank ";
  if (!text.starts_with(kFromRank)) return std::nullopt;
  text.remove_prefix(kFromRank.size());
  int rank = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), rank);
  if (error != std::errc() || end == text.data() + text.size() || *end != ':') return std::nullopt;
  return OversizedLineReport{rank};
}

}  // namespace ringmaster
