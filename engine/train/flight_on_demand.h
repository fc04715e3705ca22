// FlightDumpOnSignal: a worker's flight recorders on demand. A signal (SIGUSR1, which
// `ringmaster flight` sends) only writes a byte to a pipe; a thread of its own reads it and emits
// every live communicator's flight recorder as one telemetry `flight` event. Installs and restores
// the signal's disposition; one at a time per process.
#pragma once

#include <atomic>
#include <csignal>
#include <thread>

#include "telemetry/writer.h"

namespace ringmaster {

class FlightDumpOnSignal {
 public:
  // Emits on `writer` (which must outlive this) each time the process receives `signal`.
  FlightDumpOnSignal(TelemetryWriter& writer, int signal);
  ~FlightDumpOnSignal();
  FlightDumpOnSignal(const FlightDumpOnSignal&) = delete;
  FlightDumpOnSignal& operator=(const FlightDumpOnSignal&) = delete;

  // The most records one event carries (the newest are kept), so that its line stays far below
  // the telemetry line limit.
  static constexpr size_t kMaxRecords = 4000;

 private:
  void loop();

  TelemetryWriter& writer_;
  int signal_;
  int pipe_[2] = {-1, -1};
  struct sigaction previous_ {};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace ringmaster
