// Encoding telemetry events to JSON lines and decoding them back, plus a LineSplitter that cuts a
// byte stream (a pipe, an SSH channel) into lines. Decoding never throws on bad input: it returns
// a DecodeError naming the field. Nothing here does I/O.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "telemetry/events.h"

namespace ringmaster {

// ---------------------------------------------------------------------------------------------
// Encoding and decoding.

// One compact JSON object without a trailing newline, fields in the order of docs/telemetry.md.
// Never throws on odd values: a non-finite loss is written as null, invalid UTF-8 in strings is
// replaced by U+FFFD. Does not check that the line fits kMaxLineBytes (TelemetryWriter does).
std::string encodeEvent(const TelemetryEvent& event);

struct DecodeError {
  std::string message;  // "step.lr: expected a number, got string \"fast\""
};

// Either a decoded event or the reason the line was rejected.
class DecodeResult {
 public:
  DecodeResult(TelemetryEvent event) : value_(std::move(event)) {}
  DecodeResult(DecodeError error) : value_(std::move(error)) {}

  bool ok() const { return value_.index() == 0; }
  // Precondition: ok() (event) or !ok() (error); a wrong call is an enforce failure.
  const TelemetryEvent& event() const;
  TelemetryEvent& event();
  const DecodeError& error() const;

 private:
  std::variant<TelemetryEvent, DecodeError> value_;
};

// Decodes one line (with or without its '\n'). Rejects, with a message naming the field: lines
// longer than kMaxLineBytes (before parsing), nesting deeper than kMaxJsonDepth, malformed JSON,
// a protocol version other than kTelemetryProtocol, an unknown type, missing required fields,
// wrong types, out-of-range integers. Unknown extra fields are ignored.
DecodeResult decodeEvent(std::string_view line);

// ---------------------------------------------------------------------------------------------
// Splitting a stream into lines.

// Accumulates bytes in arbitrary chunks and yields complete lines. A line longer than the limit
// is reported once, as soon as it passes the limit, and its remaining bytes are dropped up to its
// newline, so memory stays bounded by the limit whatever the stream sends.
//
//   splitter.feed({buffer, n});
//   while (auto line = splitter.next()) {
//     if (line->oversized) warn(...); else handle(decodeEvent(line->text));
//   }
class LineSplitter {
 public:
  struct Line {
    // The line without its '\n' ('\r' is kept; the decoder treats it as whitespace). For an
    // oversized line, its first kPreviewBytes bytes, for a diagnostic.
    std::string text;
    bool oversized = false;
  };
  static constexpr std::size_t kPreviewBytes = 80;

  explicit LineSplitter(std::size_t max_line_bytes = kMaxLineBytes);

  void feed(std::string_view bytes);
  // At the end of the stream: a pending partial line (no '\n' came) becomes a line. Empty
  // remainders are dropped; an oversized one was already reported.
  void finish();
  // The next complete line, oldest first, or nullopt when none is ready.
  std::optional<Line> next();

  // Bytes of the unfinished line currently held (at most max_line_bytes).
  std::size_t pendingBytes() const { return pending_.size(); }
  std::size_t maxLineBytes() const { return max_line_bytes_; }

 private:
  std::size_t max_line_bytes_;
  std::string pending_;    // the current unfinished line
  bool skipping_ = false;  // inside an oversized line: drop bytes up to its '\n'
  std::deque<Line> ready_;
};

}  // namespace ringmaster
