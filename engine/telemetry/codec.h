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
// is reported once, when it ends (its newline, or finish()), with its length and a preview: its
// bytes past the preview are counted and dropped, so memory stays bounded by the limit whatever
// the stream sends.
//
//   splitter.feed({buffer, n});
//   while (auto line = splitter.next()) {
//     if (line->oversized) warn(oversizedLineReport(rank, *line, limit));
//     else handle(decodeEvent(line->text));
//   }
class LineSplitter {
 public:
  struct Line {
    // The line without its '\n' ('\r' is kept; the decoder treats it as whitespace). For an
    // oversized line, its first kPreviewBytes bytes, for a diagnostic.
    std::string text;
    bool oversized = false;
    std::size_t bytes = 0;  // the whole line's length without its '\n', whatever was kept
  };
  static constexpr std::size_t kPreviewBytes = 80;

  explicit LineSplitter(std::size_t max_line_bytes = kMaxLineBytes);

  void feed(std::string_view bytes);
  // At the end of the stream: a pending partial line (no '\n' came) becomes a line, oversized or
  // not. Empty remainders are dropped.
  void finish();
  // The next complete line, oldest first, or nullopt when none is ready.
  std::optional<Line> next();

  // Bytes of the unfinished line currently held (at most max_line_bytes).
  std::size_t pendingBytes() const { return pending_.size(); }
  std::size_t maxLineBytes() const { return max_line_bytes_; }

 private:
  void endOversized();  // the oversized line being skipped has ended: it is ready

  std::size_t max_line_bytes_;
  std::string pending_;          // the current unfinished line
  bool skipping_ = false;        // inside an oversized line: count and drop bytes up to its '\n'
  std::string skipped_preview_;  // the oversized line's first bytes
  std::size_t skipped_bytes_ = 0;
  std::deque<Line> ready_;
};

// ---------------------------------------------------------------------------------------------
// Reporting an oversized telemetry line.
//
// Every reader of a telemetry stream says the same of a line it dropped for its size, in one
// wording the readers after it recognise: the node agent writes the report on its stderr, and a
// launcher turns such a report, or an oversized line of its own, into a bad line of the run
// (counted, and logged under the rank). Untrusted bytes of the preview are escaped (\xNN).
//
//   oversized telemetry line from rank 3: 10485760 bytes, over the limit of 1048576, dropped;
//   it began '{"v":1,"type":"log",...'

std::string oversizedLineReport(std::optional<int> rank, const LineSplitter::Line& line,
                                std::size_t limit);

struct OversizedLineReport {
  std::optional<int> rank;  // the rank it names, when it names one
};
// `text` read as such a report, possibly behind one "[...] " tag (the agent's "[agent node 0] ");
// nullopt when it is not one.
std::optional<OversizedLineReport> parseOversizedLineReport(std::string_view text);

}  // namespace ringmaster
