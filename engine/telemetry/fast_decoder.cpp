// The decoder's fast path for the events a run sends by the thousand (step, comm, sched; and eval,
// which the same tables read): simdjson reads a well-formed line several times faster than
// nlohmann. It accepts only a line the full decoder accepts, with the same result; on anything else
// (another event type, a missing, odd or repeated field, malformed JSON) it returns nothing and the
// full decoder decides, with its message.
#include "telemetry/fast_decoder.h"

#include <simdjson.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "telemetry/fields.h"

namespace ringmaster {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// Deep enough for every event this path reads (depth 2); deeper lines take the full decoder,
// which names the depth.
constexpr size_t kFastPathMaxDepth = 8;

bool readInteger(element value, int64_t min, int64_t max, int64_t& out) {
  if (value.type() == element_type::INT64) {
    const int64_t i = value.get_int64().value_unsafe();
    if (i < min || i > max) return false;
    out = i;
    return true;
  }
  if (value.type() == element_type::UINT64) {
    const uint64_t u = value.get_uint64().value_unsafe();
    if (u > static_cast<uint64_t>(max)) return false;
    out = static_cast<int64_t>(u);
    return true;
  }
  return false;
}

// An unsigned field, in [0, max] (at most 2^63 - 1: storage keeps it in a signed integer).
bool readUnsigned(element value, int64_t max, uint64_t& out) {
  int64_t i = 0;
  if (!readInteger(value, 0, max, i)) return false;
  out = static_cast<uint64_t>(i);
  return true;
}

template <typename Int>
bool readInteger(element value, Int& out) {
  int64_t i = 0;
  if (!readInteger(value, 0, std::numeric_limits<Int>::max(), i)) return false;
  out = static_cast<Int>(i);
  return true;
}

// A number in `range`; a negative zero where only non-negative numbers go is read as 0.
bool readNumber(element value, NumberDomain range, double& out) {
  switch (value.type()) {
    case element_type::DOUBLE:
      out = value.get_double().value_unsafe();
      break;
    case element_type::INT64:
      out = static_cast<double>(value.get_int64().value_unsafe());
      break;
    case element_type::UINT64:
      out = static_cast<double>(value.get_uint64().value_unsafe());
      break;
    default:
      return false;
  }
  if (!(out >= range.min && out <= range.max)) return false;
  if (range.min == 0) out += 0.0;
  return true;
}

bool readOptionalNumber(element value, NumberDomain range, std::optional<double>& out) {
  if (value.is_null()) return true;  // null counts as absent
  double d = 0;
  if (!readNumber(value, range, d)) return false;
  out = d;
  return true;
}

// A number, or null read as NaN: loss only.
bool readNumberOrNull(element value, NumberDomain range, double& out) {
  if (!value.is_null()) return readNumber(value, range, out);
  out = std::numeric_limits<double>::quiet_NaN();
  return true;
}

bool readString(element value, std::string& out) {
  if (value.type() != element_type::STRING) return false;
  out = std::string(value.get_string().value_unsafe());
  return true;
}

// One field of a table (fields.h) into its member; false rejects the line.
template <typename Field, typename Record>
bool readField(element value, const Field& field, Record& e) {
  using Member = typename Field::Value;
  Member& out = e.*field.member;
  if constexpr (std::is_same_v<Member, uint64_t>) {
    return readUnsigned(value, field.domain.max, out);
  } else if constexpr (std::is_same_v<Member, std::optional<int64_t>>) {
    if (value.is_null()) return true;  // null counts as absent
    int64_t i = 0;
    if (!readInteger(value, field.domain.min, field.domain.max, i)) return false;
    out = i;
    return true;
  } else if constexpr (std::is_integral_v<Member>) {
    if (field.presence == Presence::kOptional && value.is_null()) return true;  // the default
    int64_t i = 0;
    if (!readInteger(value, field.domain.min, field.domain.max, i)) return false;
    out = static_cast<Member>(i);
    return true;
  } else if constexpr (std::is_same_v<Member, double>) {
    return field.presence == Presence::kNullIsNaN ? readNumberOrNull(value, field.domain, out)
                                                  : readNumber(value, field.domain, out);
  } else if constexpr (std::is_same_v<Member, std::optional<double>>) {
    return readOptionalNumber(value, field.domain, out);
  } else if constexpr (std::is_same_v<Member, std::string>) {
    if (field.presence == Presence::kOptional && value.is_null()) return true;  // the default
    if (!readString(value, out)) return false;
    if constexpr (std::is_same_v<std::decay_t<decltype(field.domain)>, OneOf>)
      return field.domain.contains(out);
    return true;
  } else if constexpr (std::is_same_v<Member, std::optional<std::string>>) {
    if (value.is_null()) return true;  // null counts as absent
    std::string text;
    if (!readString(value, text)) return false;
    out = std::move(text);
    return true;
  } else {
    static_assert(std::is_same_v<Member, SchedPhase>);
    if (value.type() != element_type::STRING) return false;
    const auto phase = parseSchedPhase(value.get_string().value_unsafe());
    if (!phase) return false;
    out = *phase;
    return true;
  }
}

// The step's custom metrics: an object of names to numbers or null (NaN). A repeated name (which
// the full decoder reads as its last value) leaves the line to the full decoder.
bool readMetrics(element value, std::map<std::string, double>& out) {
  if (value.is_null()) return true;  // null counts as absent
  simdjson::dom::object object;
  if (value.get_object().get(object) != simdjson::SUCCESS) return false;
  for (const auto field : object) {
    double d = std::numeric_limits<double>::quiet_NaN();
    if (!field.value.is_null() && !readNumber(field.value, kAnySign, d)) return false;
    if (!out.emplace(std::string(field.key), d).second) return false;
  }
  return true;
}

// Cross-field rules the full decoder checks after the fields.
bool crossFieldsValid(const StepEvent&) {
  return true;
}
bool crossFieldsValid(const CommEvent&) {
  return true;
}
bool crossFieldsValid(const EvalEvent&) {
  return true;
}
bool crossFieldsValid(const ProgressEvent&) {
  return true;
}
bool crossFieldsValid(const SchedEvent& e) {
  return e.end_us >= e.start_us &&
         (!e.ready_us || (*e.ready_us >= e.start_us && *e.ready_us <= e.end_us)) &&
         (!e.transfer_us || *e.transfer_us <= e.ready_us.value_or(e.start_us) - e.start_us);
}

// Reads a record's fields one at a time through its table, naming each by a bit (its place in the
// table), 0 for an unknown field; false rejects the line.
template <typename Record>
struct TableReader {
  static constexpr const auto& kFields = fieldsOf<Record>();
  static constexpr std::size_t kCount = std::tuple_size_v<std::decay_t<decltype(kFields)>>;
  static_assert(kCount < 32, "a record's fields, and the step's metrics, are bits of a uint32_t");

  static constexpr uint32_t requiredBits() {
    uint32_t bits = 0, bit = 1;
    forEachField(kFields, [&](const auto& field) {
      if (field.presence != Presence::kOptional) bits |= bit;
      bit <<= 1;
    });
    return bits;
  }
  static constexpr uint32_t kRequired = requiredBits();

  Record event;

  bool field(std::string_view key, element value, uint32_t& bit) {
    if constexpr (std::is_same_v<Record, StepEvent>) {
      if (key == "metrics") {
        bit = 1u << kCount;
        return readMetrics(value, event.metrics);
      }
    }
    bit = 0;
    bool ok = true;
    // Compares the key with each name in turn, as a chain of ifs would, and reads the first match.
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (void)((key == std::get<I>(kFields).name
                  ? (bit = 1u << I, ok = readField(value, std::get<I>(kFields), event), true)
                  : false) ||
             ...);
    }
    (std::make_index_sequence<kCount>{});
    return ok;
  }
  bool finish() const { return crossFieldsValid(event); }
};

// The envelope's fields and then the body's, each key at most once (the full decoder keeps the
// last of repeated keys; this path leaves such lines to it).
template <typename Body>
std::optional<TelemetryEvent> readEvent(simdjson::dom::object object, TelemetryEvent event) {
  Body body;
  uint32_t envelope_seen = 0, body_seen = 0;
  for (const auto field : object) {
    const std::string_view key = field.key;
    uint32_t bit = 0;
    if (key == "v" || key == "type") {
      bit = key == "v" ? 1u : 2u;  // checked by the caller
    } else if (key == "rank") {
      bit = 4;
      if (!readInteger(field.value, event.rank)) return std::nullopt;
    } else if (key == "seq") {
      bit = 8;
      if (!readUnsigned(field.value, kUnsigned.max, event.seq)) return std::nullopt;
    } else if (key == "t") {
      bit = 16;
      if (!readNumber(field.value, {0, kMaxEpochSeconds}, event.time)) return std::nullopt;
    } else {
      if (!body.field(key, field.value, bit)) return std::nullopt;
      if (bit != 0) {
        if ((body_seen & bit) != 0) return std::nullopt;
        body_seen |= bit;
      }
      continue;
    }
    if ((envelope_seen & bit) != 0) return std::nullopt;
    envelope_seen |= bit;
  }
  if (envelope_seen != 31 || (body_seen & Body::kRequired) != Body::kRequired || !body.finish())
    return std::nullopt;
  event.body = std::move(body.event);
  return event;
}

// Whether the line may hold the integer -0, which simdjson reads as 0 but nlohmann as a negative
// integer, refused where only non-negative ones go. Rare enough to leave every such line (and
// strings such as "tp-0") to the full decoder.
bool mayHoldNegativeZero(std::string_view line) {
  for (size_t at = line.find("-0"); at != std::string_view::npos; at = line.find("-0", at + 2)) {
    const char next = at + 2 < line.size() ? line[at + 2] : '\0';
    // "-0." and "-0e5" are floats, "e-05" an exponent.
    const bool more_digits =
        next == '.' || next == 'e' || next == 'E' || (next >= '0' && next <= '9');
    if (!more_digits) return true;
  }
  return false;
}

}  // namespace

std::optional<TelemetryEvent> decodeCommonEvent(std::string_view line) {
  thread_local simdjson::dom::parser parser(kMaxLineBytes);
  thread_local std::string padded;
  if (line.size() > kMaxLineBytes || mayHoldNegativeZero(line)) return std::nullopt;
  padded.reserve(line.size() + simdjson::SIMDJSON_PADDING);
  padded.assign(line);
  if (parser.max_depth() != kFastPathMaxDepth &&
      parser.allocate(parser.capacity() > 0 ? parser.capacity() : 4096, kFastPathMaxDepth) !=
          simdjson::SUCCESS)
    return std::nullopt;
  simdjson::dom::element root;
  if (parser.parse(padded.data(), padded.size(), false).get(root) != simdjson::SUCCESS)
    return std::nullopt;
  simdjson::dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) return std::nullopt;

  int64_t version = 0;
  std::string_view type;
  if (object["v"].get_int64().get(version) != simdjson::SUCCESS || version != kTelemetryProtocol ||
      object["type"].get_string().get(type) != simdjson::SUCCESS)
    return std::nullopt;
  if (type == "step") return readEvent<TableReader<StepEvent>>(object, {});
  if (type == "comm") return readEvent<TableReader<CommEvent>>(object, {});
  if (type == "sched") return readEvent<TableReader<SchedEvent>>(object, {});
  if (type == "eval") return readEvent<TableReader<EvalEvent>>(object, {});
  if (type == "progress") return readEvent<TableReader<ProgressEvent>>(object, {});
  return std::nullopt;
}

}  // namespace ringmaster
