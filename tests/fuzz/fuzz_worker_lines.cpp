// libFuzzer target for the program job's line reader (issue 32 acceptance): the node agent's
// reading of a worker's descriptor (agent/worker_lines.h), fed arbitrary bytes in pieces of
// arbitrary sizes, as a program's telemetry channel, its stdout (lines prefixed with the rank) or
// an engine worker's stderr. Nothing may crash, hang or trip a sanitizer, and what comes out is
// exactly what a plain split at '\n' says: each line whole (prefixed where it should be), a line
// over the limit one short report, an unfinished telemetry line at the end dropped and said, and
// the rank's progress (next seq, last step, done) that of the telemetry lines that decode.
// Input: byte 0 draws the stream and the limit, byte 1 the rank; the rest is the stream, and its
// bytes also draw the piece sizes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agent/worker_lines.h"

namespace {

using ringmaster::WorkerLine;
using ringmaster::WorkerStream;
using ringmaster::WorkerTelemetryState;

void require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_worker_lines: property violated: %s\n", what);
    std::abort();
  }
}

// The reference: what the agent should write for `stream`, and the rank's progress.
struct Reference {
  std::vector<WorkerLine> lines;
  WorkerTelemetryState state;
};

void observe(const std::string& text, WorkerTelemetryState& state) {
  const ringmaster::DecodeResult decoded = ringmaster::decodeEvent(text);
  if (!decoded.ok()) return;
  const ringmaster::TelemetryEvent& event = decoded.event();
  if (event.seq + 1 > state.next_seq) state.next_seq = event.seq + 1;
  if (const auto* step = std::get_if<ringmaster::StepEvent>(&event.body))
    state.last_step = step->step;
  if (const auto* done = std::get_if<ringmaster::DoneEvent>(&event.body)) {
    state.done_seen = true;
    state.last_step = done->final_step;
  }
}

Reference plainSplit(std::string_view bytes, WorkerStream stream, int rank, std::size_t limit) {
  Reference reference;
  const bool telemetry = stream == WorkerStream::kTelemetry;
  for (std::size_t start = 0; start < bytes.size();) {
    const std::size_t newline = bytes.find('\n', start);
    const bool last = newline == std::string_view::npos;
    const std::string text(bytes.substr(start, (last ? bytes.size() : newline) - start));
    start = last ? bytes.size() : newline + 1;
    if (text.size() > limit) {
      reference.lines.push_back({.kind = WorkerLine::Kind::kAgentMessage, .text = text});
    } else if (last && telemetry) {  // the remains of a write cut short
      reference.lines.push_back({.kind = WorkerLine::Kind::kAgentMessage,
                                 .text = "rank " + std::to_string(rank) +
                                         ": dropped an unfinished telemetry line of " +
                                         std::to_string(text.size()) + " bytes"});
    } else if (telemetry) {
      observe(text, reference.state);
      reference.lines.push_back({.kind = WorkerLine::Kind::kTelemetry, .text = text});
    } else {
      const std::string prefix =
          stream == WorkerStream::kPrefixedLog ? "[rank " + std::to_string(rank) + "] " : "";
      reference.lines.push_back({.kind = WorkerLine::Kind::kLog, .text = prefix + text});
    }
  }
  return reference;
}

void checkLine(const WorkerLine& got, const WorkerLine& expected, std::size_t limit) {
  require(got.kind == expected.kind, "each line is of the kind a plain split says");
  if (got.kind != WorkerLine::Kind::kAgentMessage || expected.text.starts_with("rank ")) {
    require(got.text == expected.text, "a line comes out whole, prefixed where it should be");
  } else {
    // An oversized line: one short report, never the line.
    require(got.text.size() < 1024, "an oversized line is one short report");
    require(got.text.find(std::to_string(expected.text.size())) != std::string::npos,
            "the report says the line's size");
  }
  if (got.kind == WorkerLine::Kind::kTelemetry) {
    const ringmaster::DecodeResult decoded = ringmaster::decodeEvent(got.text);
    require(got.rank.has_value() == decoded.ok(), "a line that decodes is tagged with its rank");
    if (decoded.ok())
      require(*got.rank == decoded.event().rank && got.seq == decoded.event().seq,
              "the tag is the line's own rank and seq");
  }
  (void)limit;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const WorkerStream stream = static_cast<WorkerStream>(data[0] % 3);
  // Mostly small limits, so that oversized lines are common; now and then the real one.
  const std::size_t limit = data[0] / 3 % 16 == 0 ? ringmaster::kMaxLineBytes : 1 + data[0] % 97;
  const int rank = data[1] % 4;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);

  ringmaster::LineSplitter splitter(limit);
  WorkerTelemetryState state;
  std::vector<WorkerLine> got;
  const auto write = [&](WorkerLine line) { got.push_back(std::move(line)); };
  for (std::size_t at = 0, i = 0; at < bytes.size(); ++i) {
    const std::size_t piece = 1 + static_cast<uint8_t>(bytes[i % bytes.size()]) % 29;
    splitter.feed(bytes.substr(at, piece));
    at += piece;
    ringmaster::takeWorkerLines(splitter, stream, rank, false, state, write);
  }
  ringmaster::takeWorkerLines(splitter, stream, rank, true, state, write);

  const Reference expected = plainSplit(bytes, stream, rank, limit);
  require(got.size() == expected.lines.size(), "as many lines as a plain split");
  for (std::size_t i = 0; i < got.size(); ++i) checkLine(got[i], expected.lines[i], limit);
  require(state.next_seq == expected.state.next_seq, "the next seq follows the highest sent");
  require(state.last_step == expected.state.last_step, "the last step is the latest reported");
  require(state.done_seen == expected.state.done_seen, "a done is seen exactly when one came");
  return 0;
}
