// decodeCommonEvent: the decoder's fast path (simdjson) for step, comm, sched and eval lines, and
// the full decoder alone to check it against. Internal to the telemetry library and its tests:
// callers use decodeEvent, which tries the fast path first.
#pragma once

#include <optional>
#include <string_view>

#include "telemetry/codec.h"

namespace ringmaster {

// The event of a well-formed step, comm, sched or eval line, exactly as decodeEvent decodes it;
// nothing for any other line (decodeEvent's full decoder then accepts or rejects it with its
// message).
std::optional<TelemetryEvent> decodeCommonEvent(std::string_view line);

// decodeEvent without the fast path: the reference the fast path must agree with.
DecodeResult decodeEventFully(std::string_view line);

}  // namespace ringmaster
