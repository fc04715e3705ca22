// Launch: one running job as the desktop side sees it, whatever started it (the local launcher
// here, the SSH launcher for remote hosts): telemetry lines and log lines as they arrive, cancel,
// and how it ended.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "process/child_process.h"

namespace ringmaster {

struct LaunchSink {
  // One whole telemetry line (without '\n') from an agent's stdout; an oversized line is not
  // passed here but to on_bad_line.
  std::function<void(std::string_view line)> on_telemetry;
  // One line of an agent's stderr: the workers' human-readable output and the agent's messages.
  std::function<void(std::string_view line)> on_log;
  // A telemetry line dropped for its size, by the agent reading a worker (`rank` is the worker's)
  // or by the launcher reading the agent: `report` names the rank, the size and how it began
  // (oversizedLineReport). Unset: the report goes to on_log.
  std::function<void(std::optional<int> rank, std::string_view report)> on_bad_line;
};

// One line of an agent's output as a launcher passes it on (classifyAgentLine in agent_lines.h).
struct AgentLine {
  enum class Kind { kTelemetry, kLog, kBadLine };
  Kind kind = Kind::kLog;
  std::optional<int> rank;  // for a bad line: the rank whose line it was, when known
  std::string text;         // for a bad line: the report
};

// Passes `line` to the sink's callback for its kind (a bad line to on_log when on_bad_line is
// unset).
void deliverAgentLine(const AgentLine& line, const LaunchSink& sink);

class Launch {
 public:
  virtual ~Launch() = default;
  // Waits at most `timeout` for output and passes every complete line to `sink`; false once all
  // output has ended (the agents have exited or closed their streams).
  virtual bool pump(std::chrono::milliseconds timeout, const LaunchSink& sink) = 0;
  // Asks the job to stop: the agents forward SIGTERM to the workers, which finish their step,
  // report `done` with status cancelled and exit.
  virtual void cancel() = 0;
  // Stops at once (SIGKILL to the agents; their workers die with them).
  virtual void kill() = 0;
  // Reaps the agents (after pump returned false, this does not block for long) and returns how
  // the first one to fail ended, else the common success.
  virtual ExitStatus wait() = 0;
  // Why the launch failed apart from how the agents exited (a host's connection was lost),
  // naming the host; empty when nothing did.
  virtual std::string failure() const { return {}; }
};

}  // namespace ringmaster
