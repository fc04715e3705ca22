// The decoder's fast path for the events a run sends by the thousand (step, comm, sched): simdjson
// reads a well-formed line several times faster than nlohmann. It accepts only a line the full
// decoder accepts, with the same result; on anything else (another event type, a missing, odd or
// repeated field, malformed JSON) it returns nothing and the full decoder decides, with its
// message.
#include "telemetry/fast_decoder.h"

#include <simdjson.h>

#include <cmath>
#include <limits>
#include <string>

namespace ringmaster {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// Deep enough for every event this path reads (depth 2); deeper lines take the full decoder,
// which names the depth.
constexpr size_t kFastPathMaxDepth = 8;

bool readUnsigned(element value, uint64_t& out) {
  if (value.type() == element_type::UINT64) {
    out = value.get_uint64().value_unsafe();
    return true;
  }
  if (value.type() == element_type::INT64) {
    const int64_t i = value.get_int64().value_unsafe();
    if (i < 0) return false;
    out = static_cast<uint64_t>(i);
    return true;
  }
  return false;
}

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

template <typename Int>
bool readInteger(element value, Int& out) {
  int64_t i = 0;
  if (!readInteger(value, 0, std::numeric_limits<Int>::max(), i)) return false;
  out = static_cast<Int>(i);
  return true;
}

// A step (or a step-like count): an integer in [0, 2^53].
bool readStep(element value, int64_t& out) {
  return readInteger(value, 0, kMaxStep, out);
}

bool readOptionalStep(element value, std::optional<int64_t>& out) {
  if (value.is_null()) return true;  // null counts as absent
  int64_t i = 0;
  if (!readStep(value, i)) return false;
  out = i;
  return true;
}

// The closed interval a floating-point field must fall in, as the full decoder has it.
struct NumberRange {
  double min, max;
};
constexpr NumberRange kAnySign{-kMaxMagnitude, kMaxMagnitude};
constexpr NumberRange kNonNegative{0, kMaxMagnitude};
constexpr NumberRange kFraction{0, 1};

// A number in `range`; a negative zero where only non-negative numbers go is read as 0.
bool readNumber(element value, NumberRange range, double& out) {
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

bool readOptionalNumber(element value, NumberRange range, std::optional<double>& out) {
  if (value.is_null()) return true;  // null counts as absent
  double d = 0;
  if (!readNumber(value, range, d)) return false;
  out = d;
  return true;
}

// A number, or null read as NaN: loss only.
bool readNumberOrNull(element value, NumberRange range, double& out) {
  if (!value.is_null()) return readNumber(value, range, out);
  out = std::numeric_limits<double>::quiet_NaN();
  return true;
}

bool readString(element value, std::string& out) {
  if (value.type() != element_type::STRING) return false;
  out = std::string(value.get_string().value_unsafe());
  return true;
}

// Each body reader takes one field at a time and names it by a bit (the required fields are the
// low kRequired bits, then the optional ones), 0 for an unknown field; false rejects the line.
struct StepReader {
  StepEvent event;
  static constexpr uint32_t kRequired = (1u << 12) - 1;

  bool field(std::string_view key, element value, uint32_t& bit) {
    bit = 0;
    if (key == "step") return bit = 1u << 0, readStep(value, event.step);
    if (key == "loss") return bit = 1u << 1, readNumberOrNull(value, kAnySign, event.loss);
    if (key == "lr") return bit = 1u << 2, readNumber(value, kAnySign, event.lr);
    if (key == "samples") return bit = 1u << 3, readStep(value, event.samples);
    if (key == "step_ms") return bit = 1u << 4, readNumber(value, kNonNegative, event.step_ms);
    if (key == "compute_ms")
      return bit = 1u << 5, readNumber(value, kNonNegative, event.compute_ms);
    if (key == "comm_ms") return bit = 1u << 6, readNumber(value, kNonNegative, event.comm_ms);
    if (key == "exposed_comm_ms")
      return bit = 1u << 7, readNumber(value, kNonNegative, event.exposed_comm_ms);
    if (key == "mem_allocated") return bit = 1u << 8, readUnsigned(value, event.mem_allocated);
    if (key == "mem_peak") return bit = 1u << 9, readUnsigned(value, event.mem_peak);
    if (key == "mem_reserved") return bit = 1u << 10, readUnsigned(value, event.mem_reserved);
    if (key == "device_mem_used") return bit = 1u << 11, readUnsigned(value, event.device_mem_used);
    if (key == "grad_norm")
      return bit = 1u << 12, readOptionalNumber(value, kNonNegative, event.grad_norm);
    if (key == "accuracy")
      return bit = 1u << 13, readOptionalNumber(value, kFraction, event.accuracy);
    return true;
  }
  bool finish() const { return true; }
};

struct CommReader {
  CommEvent event;
  static constexpr uint32_t kRequired = (1u << 8) - 1;

  bool field(std::string_view key, element value, uint32_t& bit) {
    bit = 0;
    if (key == "seq_op") return bit = 1u << 0, readUnsigned(value, event.seq_op);
    if (key == "op") return bit = 1u << 1, readString(value, event.op);
    if (key == "group") return bit = 1u << 2, readString(value, event.group);
    if (key == "bytes") return bit = 1u << 3, readUnsigned(value, event.bytes);
    if (key == "dtype") return bit = 1u << 4, readString(value, event.dtype);
    if (key == "duration_ms")
      return bit = 1u << 5, readNumber(value, kNonNegative, event.duration_ms);
    if (key == "algbw_gbps")
      return bit = 1u << 6, readNumber(value, kNonNegative, event.algbw_gbps);
    if (key == "busbw_gbps")
      return bit = 1u << 7, readNumber(value, kNonNegative, event.busbw_gbps);
    if (key == "wait_ms")
      return bit = 1u << 8, readOptionalNumber(value, kNonNegative, event.wait_ms);
    if (key == "step") return bit = 1u << 9, readOptionalStep(value, event.step);
    return true;
  }
  bool finish() const { return true; }
};

struct SchedReader {
  SchedEvent event;
  static constexpr uint32_t kRequired = (1u << 6) - 1;

  bool field(std::string_view key, element value, uint32_t& bit) {
    bit = 0;
    if (key == "step") return bit = 1u << 0, readStep(value, event.step);
    if (key == "stage") return bit = 1u << 1, readInteger(value, event.stage);
    if (key == "micro_batch") return bit = 1u << 2, readInteger(value, event.micro_batch);
    if (key == "phase") {
      bit = 1u << 3;
      if (value.type() != element_type::STRING) return false;
      const auto phase = parseSchedPhase(value.get_string().value_unsafe());
      if (!phase) return false;
      event.phase = *phase;
      return true;
    }
    // Of magnitude at most 2^53, as the full decoder has them.
    if (key == "start_us")
      return bit = 1u << 4, readInteger(value, -kMaxStep, kMaxStep, event.start_us);
    if (key == "end_us")
      return bit = 1u << 5, readInteger(value, -kMaxStep, kMaxStep, event.end_us);
    if (key == "virtual_stage") {
      bit = 1u << 6;
      return value.is_null() || readInteger(value, event.virtual_stage);
    }
    if (key == "ready_us") {
      bit = 1u << 7;
      if (value.is_null()) return true;  // null counts as absent
      int64_t ready = 0;
      if (!readInteger(value, -kMaxStep, kMaxStep, ready)) return false;
      event.ready_us = ready;
      return true;
    }
    if (key == "transfer_us") return bit = 1u << 8, readOptionalStep(value, event.transfer_us);
    return true;
  }
  bool finish() const {
    return event.end_us >= event.start_us &&
           (!event.ready_us ||
            (*event.ready_us >= event.start_us && *event.ready_us <= event.end_us)) &&
           (!event.transfer_us ||
            *event.transfer_us <= event.ready_us.value_or(event.start_us) - event.start_us);
  }
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
      if (!readUnsigned(field.value, event.seq)) return std::nullopt;
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
  if (type == "step") return readEvent<StepReader>(object, {});
  if (type == "comm") return readEvent<CommReader>(object, {});
  if (type == "sched") return readEvent<SchedReader>(object, {});
  return std::nullopt;
}

}  // namespace ringmaster
