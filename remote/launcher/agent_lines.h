// How a launcher classifies the lines of an agent's output, the same for every launcher: telemetry
// (stdout) and log lines (stderr) as they are, and a telemetry line dropped for its size, by the
// agent (its report on stderr names the rank) or by the launcher itself, as a bad line.
#pragma once

#include <cstddef>
#include <string_view>

#include "launcher/launch.h"
#include "telemetry/codec.h"

namespace ringmaster {

// A line of an agent's stdout (`from_stdout`) or stderr, as its splitter of `limit` bytes gave it;
// `agent` names the agent in the launcher's own reports ("the agent", "host gpu1").
AgentLine classifyAgentLine(bool from_stdout, LineSplitter::Line line, std::size_t limit,
                            std::string_view agent);

// Reads what the non-blocking descriptor `fd` has into `splitter`; false at end of file (or a read
// error), after finishing the splitter's last line.
bool readAvailableLines(int fd, LineSplitter& splitter);

}  // namespace ringmaster
