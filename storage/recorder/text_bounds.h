// The bounds on the text of a stored telemetry event (issue 32): a name (a host, a device, an op,
// a group) is kept up to kMaxStoredNameBytes and a message (a log line, an error) up to
// kMaxStoredMessageBytes, so that no reader of the database (the command line, the window, the
// web view's JSON) meets a name of half a megabyte. Longer text is cut at a UTF-8 boundary and
// marked; the recorder counts and logs each cut. The flight recorder's JSON is not text here.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "telemetry/events.h"

namespace ringmaster::storage {

inline constexpr std::size_t kMaxStoredNameBytes = 256;           // a DNS name's 253, and then some
inline constexpr std::size_t kMaxStoredMessageBytes = 64 * 1024;  // the writer's own cut

// `event` with each text over its bound cut to it (ending "..."), and in `cut` what was cut
// ("hello.host (500000 bytes)", comma-separated); nullopt, `cut` untouched, when none is over.
std::optional<TelemetryEvent> withTextsBounded(const TelemetryEvent& event, std::string& cut);

// `text` cut to at most `max_bytes` (at least 4) at a UTF-8 character's boundary, "..." appended.
std::string cutText(const std::string& text, std::size_t max_bytes);

}  // namespace ringmaster::storage
