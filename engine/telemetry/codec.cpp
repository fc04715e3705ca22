// The JSON Lines codec of the telemetry protocol (docs/telemetry.md) and the stream LineSplitter.
// The decoder tries the simdjson fast path (fast_decoder.h) for the common events, then validates
// every field by hand and turns every problem, nlohmann's parse errors included, into a
// DecodeError; it never lets an exception out.
#include "telemetry/codec.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "telemetry/fast_decoder.h"

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

std::string_view eventTypeName(const EventBody& body) {
  struct Names {
    std::string_view operator()(const HelloEvent&) const { return "hello"; }
    std::string_view operator()(const StepEvent&) const { return "step"; }
    std::string_view operator()(const CommEvent&) const { return "comm"; }
    std::string_view operator()(const SchedEvent&) const { return "sched"; }
    std::string_view operator()(const LogEvent&) const { return "log"; }
    std::string_view operator()(const ErrorEvent&) const { return "error"; }
    std::string_view operator()(const DoneEvent&) const { return "done"; }
  };
  return std::visit(Names{}, body);
}

namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------
// Encoding. Fields are written in the order of docs/telemetry.md; absent optionals are omitted.

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
}

void putBody(OrderedJson& out, const StepEvent& e) {
  out["step"] = e.step;
  out["loss"] = e.loss;  // nlohmann writes a non-finite double as null
  out["lr"] = e.lr;
  out["samples"] = e.samples;
  out["step_ms"] = e.step_ms;
  out["compute_ms"] = e.compute_ms;
  out["comm_ms"] = e.comm_ms;
  out["exposed_comm_ms"] = e.exposed_comm_ms;
  out["mem_allocated"] = e.mem_allocated;
  out["mem_peak"] = e.mem_peak;
  out["mem_reserved"] = e.mem_reserved;
  out["device_mem_used"] = e.device_mem_used;
  putOptional(out, "grad_norm", e.grad_norm);
  putOptional(out, "accuracy", e.accuracy);
}

void putBody(OrderedJson& out, const CommEvent& e) {
  out["seq_op"] = e.seq_op;
  out["op"] = e.op;
  out["group"] = e.group;
  out["bytes"] = e.bytes;
  out["dtype"] = e.dtype;
  out["duration_ms"] = e.duration_ms;
  out["algbw_gbps"] = e.algbw_gbps;
  out["busbw_gbps"] = e.busbw_gbps;
  putOptional(out, "wait_ms", e.wait_ms);
  putOptional(out, "step", e.step);
}

void putBody(OrderedJson& out, const SchedEvent& e) {
  out["step"] = e.step;
  out["stage"] = e.stage;
  out["micro_batch"] = e.micro_batch;
  out["phase"] = std::string(toString(e.phase));
  out["start_us"] = e.start_us;
  out["end_us"] = e.end_us;
  putOptional(out, "ready_us", e.ready_us);
  putOptional(out, "transfer_us", e.transfer_us);
  out["virtual_stage"] = e.virtual_stage;
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

// "a non-negative integer", "an integer in [0, 2147483647]", "an integer in [0, 2^53]", ...
std::string integerRange(int64_t min, int64_t max) {
  if (max == kMaxStep) return min == 0 ? "an integer in [0, 2^53]" : "an integer in [-2^53, 2^53]";
  if (max == std::numeric_limits<int64_t>::max()) {
    if (min == 0) return "a non-negative integer";
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

// The closed interval a floating-point field must fall in (docs/telemetry.md, "Numeric domains").
struct NumberRange {
  double min, max;
};
constexpr NumberRange kAnySign{-kMaxMagnitude, kMaxMagnitude};
constexpr NumberRange kNonNegative{0, kMaxMagnitude};  // times, durations, rates, norms
constexpr NumberRange kFraction{0, 1};

// Reads the fields of one JSON object, remembering the first problem. Getters return a default
// after a problem, so a body can be read straight through and checked once at the end.
class FieldReader {
 public:
  FieldReader(const Json& object, std::string prefix)
      : object_(object), prefix_(std::move(prefix)) {}

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

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

  uint64_t unsignedInteger(const char* key) {
    const Json* value = required(key);
    if (!value) return 0;
    if (value->is_number_unsigned()) return value->get<uint64_t>();
    if (value->is_number_integer()) {  // negative: nlohmann stores non-negative ones as unsigned
      fail(key, fmt::format("expected a non-negative integer, got {}", describe(*value)));
    } else {
      fail(key, fmt::format("expected a non-negative integer, got {}{}", describe(*value),
                            floatHint(*value)));
    }
    return 0;
  }

  double number(const char* key, NumberRange range) {
    const Json* value = required(key);
    return value ? toNumber(key, *value, range).value_or(0.0) : 0.0;
  }

  // A number, or null read as NaN (JSON has no NaN): loss only.
  double numberOrNull(const char* key, NumberRange range) {
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

  std::optional<double> optionalNumber(const char* key, NumberRange range) {
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
  std::optional<double> toNumber(const char* key, const Json& value, NumberRange range) {
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

HelloEvent readHello(FieldReader& in, int rank) {
  HelloEvent e;
  e.world_size = static_cast<int>(in.integer("world_size", 1, kIntMax));
  e.local_rank = static_cast<int>(in.integer("local_rank", 0, kIntMax));
  e.host = in.string("host");
  e.pid = in.integer("pid", 0, kInt64Max);
  e.device = in.string("device");
  e.device_name = in.string("device_name");
  e.device_memory_total = in.unsignedInteger("device_memory_total");
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
  return e;
}

StepEvent readStep(FieldReader& in) {
  StepEvent e;
  e.step = in.integer("step", 0, kMaxStep);
  e.loss = in.numberOrNull("loss", kAnySign);
  e.lr = in.number("lr", kAnySign);
  e.samples = in.integer("samples", 0, kMaxStep);
  e.step_ms = in.number("step_ms", kNonNegative);
  e.compute_ms = in.number("compute_ms", kNonNegative);
  e.comm_ms = in.number("comm_ms", kNonNegative);
  e.exposed_comm_ms = in.number("exposed_comm_ms", kNonNegative);
  e.mem_allocated = in.unsignedInteger("mem_allocated");
  e.mem_peak = in.unsignedInteger("mem_peak");
  e.mem_reserved = in.unsignedInteger("mem_reserved");
  e.device_mem_used = in.unsignedInteger("device_mem_used");
  e.grad_norm = in.optionalNumber("grad_norm", kNonNegative);
  e.accuracy = in.optionalNumber("accuracy", kFraction);
  return e;
}

CommEvent readComm(FieldReader& in) {
  CommEvent e;
  e.seq_op = in.unsignedInteger("seq_op");
  e.op = in.string("op");
  e.group = in.string("group");
  e.bytes = in.unsignedInteger("bytes");
  e.dtype = in.string("dtype");
  e.duration_ms = in.number("duration_ms", kNonNegative);
  e.algbw_gbps = in.number("algbw_gbps", kNonNegative);
  e.busbw_gbps = in.number("busbw_gbps", kNonNegative);
  e.wait_ms = in.optionalNumber("wait_ms", kNonNegative);
  e.step = in.optionalInteger("step", 0, kMaxStep);
  return e;
}

SchedEvent readSched(FieldReader& in) {
  SchedEvent e;
  e.step = in.integer("step", 0, kMaxStep);
  e.stage = static_cast<int>(in.integer("stage", 0, kIntMax));
  e.micro_batch = static_cast<int>(in.integer("micro_batch", 0, kIntMax));
  e.phase = in.enumeration<SchedPhase>("phase", parseSchedPhase, "\"F\", \"B\", \"W\"");
  // Of magnitude at most 2^53, so that every difference of two fits an int64 and a double.
  e.start_us = in.integer("start_us", -kMaxStep, kMaxStep);
  e.end_us = in.integer("end_us", -kMaxStep, kMaxStep);
  e.ready_us = in.optionalInteger("ready_us", -kMaxStep, kMaxStep);
  e.transfer_us = in.optionalInteger("transfer_us", 0, kMaxStep);
  e.virtual_stage = static_cast<int>(in.optionalInteger("virtual_stage", 0, kIntMax).value_or(0));
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
  event.seq = envelope.unsignedInteger("seq");
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
    event.body = readComm(body);
  } else if (type == "sched") {
    event.body = readSched(body);
  } else if (type == "log") {
    event.body = readLog(body);
  } else if (type == "error") {
    event.body = readError(body);
  } else if (type == "done") {
    event.body = readDone(body);
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
