// What the node agent makes of the bytes a worker writes on one descriptor (issue 19; fuzzed,
// issue 32). On a telemetry descriptor (a program job's own channel, an engine worker's stdout)
// each line is passed on whole and read for the rank's progress: the next sequence number, the
// last step, whether its done came. On a log descriptor (stderr, a program's stdout) each line is
// a log line, under "[rank N] " where the worker writes no prefix of its own. A line over the
// limit is never passed on: it becomes one short report. Bytes go in as they are read, in pieces
// of any size; nothing here reads a descriptor or writes one (node_agent.cpp does).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "telemetry/codec.h"

namespace ringmaster {

enum class WorkerStream {
  kTelemetry,
  kLog,          // lines the worker prefixes itself (an engine worker's stderr)
  kPrefixedLog,  // lines the agent prefixes with the rank (a program worker's stdout and stderr)
};

// What a worker's telemetry has said so far: the agent's own events for the rank (its failure,
// its done after it died) go on from here.
struct WorkerTelemetryState {
  uint64_t next_seq = 0;  // one past the highest seq it sent
  int64_t last_step = 0;  // its latest step, or its done's final step
  bool done_seen = false;
};

// One line for the agent to write: a telemetry line (its decoded rank and seq, for the spool's
// tag, when it decodes), a log line, or a message of the agent's own (a report of a dropped line).
struct WorkerLine {
  enum class Kind { kTelemetry, kLog, kAgentMessage };
  Kind kind = Kind::kLog;
  std::string text;
  std::optional<int> rank;
  uint64_t seq = 0;
};

// Writes the lines `splitter` holds ready, as the agent writes them, through `write`; `ended`
// once the descriptor reached its end: a pending telemetry line is then the remains of a write
// cut short by the worker's death (dropped, and said so), a pending log line a last line. Each
// telemetry line that decodes updates `state`.
void takeWorkerLines(LineSplitter& splitter, WorkerStream stream, int rank, bool ended,
                     WorkerTelemetryState& state, const std::function<void(WorkerLine)>& write);

}  // namespace ringmaster
