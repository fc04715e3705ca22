// Reading, classifying and delivering an agent's output lines (agent_lines.h).
#include "launcher/agent_lines.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

#include <fmt/format.h>

namespace ringmaster {

AgentLine classifyAgentLine(bool from_stdout, LineSplitter::Line line, std::size_t limit,
                            std::string_view agent) {
  using Kind = AgentLine::Kind;
  if (from_stdout) {
    if (!line.oversized) return {Kind::kTelemetry, std::nullopt, std::move(line.text)};
    return {Kind::kBadLine, std::nullopt,
            fmt::format("[launcher] {} sent an {}", agent,
                        oversizedLineReport(std::nullopt, line, limit))};
  }
  if (line.oversized) {
    return {Kind::kLog, std::nullopt,
            fmt::format("[launcher] {} wrote a log line of {} bytes, over the limit of {}, "
                        "dropped; it began '{}'",
                        agent, line.bytes, limit, line.text)};
  }
  if (const std::optional<OversizedLineReport> report = parseOversizedLineReport(line.text))
    return {Kind::kBadLine, report->rank, std::move(line.text)};
  return {Kind::kLog, std::nullopt, std::move(line.text)};
}

void deliverAgentLine(const AgentLine& line, const LaunchSink& sink) {
  switch (line.kind) {
    case AgentLine::Kind::kTelemetry:
      if (sink.on_telemetry) sink.on_telemetry(line.text);
      break;
    case AgentLine::Kind::kBadLine:
      if (sink.on_bad_line) {
        sink.on_bad_line(line.rank, line.text);
        break;
      }
      [[fallthrough]];
    case AgentLine::Kind::kLog:
      if (sink.on_log) sink.on_log(line.text);
      break;
  }
}

bool readAvailableLines(int fd, LineSplitter& splitter) {
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      splitter.feed({buffer, static_cast<size_t>(n)});
      if (static_cast<size_t>(n) < sizeof buffer) return true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    splitter.finish();
    return false;
  }
}

}  // namespace ringmaster
