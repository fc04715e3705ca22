// A worker's lines, one descriptor at a time.
#include "agent/worker_lines.h"

#include <algorithm>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace ringmaster {

namespace {

// A telemetry line passed on whole; what it says of the rank's progress, when it decodes.
WorkerLine telemetryLine(std::string text, WorkerTelemetryState& state) {
  WorkerLine line{.kind = WorkerLine::Kind::kTelemetry};
  const DecodeResult decoded = decodeEvent(text);
  if (decoded.ok()) {
    const TelemetryEvent& event = decoded.event();
    line.rank = event.rank;
    line.seq = event.seq;
    state.next_seq = std::max(state.next_seq, event.seq + 1);
    if (const auto* step = std::get_if<StepEvent>(&event.body)) state.last_step = step->step;
    if (const auto* done = std::get_if<DoneEvent>(&event.body)) {
      state.done_seen = true;
      state.last_step = done->final_step;
    }
  }
  line.text = std::move(text);
  return line;
}

WorkerLine agentMessage(std::string text) {
  return {.kind = WorkerLine::Kind::kAgentMessage, .text = std::move(text)};
}

}  // namespace

void takeWorkerLines(LineSplitter& splitter, WorkerStream stream, int rank, bool ended,
                     WorkerTelemetryState& state, const std::function<void(WorkerLine)>& write) {
  const bool telemetry = stream == WorkerStream::kTelemetry;
  if (ended && telemetry && splitter.pendingBytes() > 0) {
    write(agentMessage(fmt::format("rank {}: dropped an unfinished telemetry line of {} bytes",
                                   rank, splitter.pendingBytes())));
  } else if (ended) {
    splitter.finish();
  }
  while (auto line = splitter.next()) {
    if (line->oversized && telemetry) {
      // In the one wording the launchers recognise: they count it as a bad line of this rank.
      write(agentMessage(oversizedLineReport(rank, *line, splitter.maxLineBytes())));
    } else if (line->oversized) {
      write(agentMessage(fmt::format(
          "rank {}: dropped a log line of {} bytes, over the limit of {}; it began '{}'", rank,
          line->bytes, splitter.maxLineBytes(), line->text)));
    } else if (telemetry) {
      write(telemetryLine(std::move(line->text), state));
    } else if (stream == WorkerStream::kPrefixedLog) {
      write(
          {.kind = WorkerLine::Kind::kLog, .text = fmt::format("[rank {}] {}", rank, line->text)});
    } else {
      write({.kind = WorkerLine::Kind::kLog, .text = std::move(line->text)});
    }
  }
}

}  // namespace ringmaster
