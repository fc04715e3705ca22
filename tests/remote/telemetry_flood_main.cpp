// A stand-in worker for the agent's multiplexing test: writes `count` telemetry events as fast as
// it can, log messages from a few bytes to 20 KB so that many lines exceed a pipe's atomic write
// size (PIPE_BUF, 4 KiB), then exits. Its rank comes from RANK, as the agent sets it.
#include <cstdlib>
#include <string>

#include "telemetry/writer.h"

int main(int argc, char** argv) {
  const int rank = std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "0");
  const int count = argc > 1 ? std::atoi(argv[1]) : 2000;
  ringmaster::TelemetryWriter writer(stdout, rank);
  for (int i = 0; i < count; ++i) {
    const size_t length =
        (static_cast<size_t>(i) * 7919u + static_cast<size_t>(rank) * 31u) % 20000u;
    std::string message(length, static_cast<char>('a' + (i + rank) % 26));
    if (!writer.emit(ringmaster::LogEvent{.level = ringmaster::LogLevel::kInfo,
                                          .message = std::move(message)}))
      return 1;
  }
  return 0;
}
