// `ringmaster flight RUN`: a running run's flight recorders on demand. Sends SIGUSR1 to each
// worker of the run on this host (its PID from the ranks table, checked to be a Ringmaster worker),
// waits for the dumps the workers emit as telemetry (stored by the run's recorder in
// flight_recorder_dumps) and prints them. Workers on other hosts are named as not reachable.
#pragma once

#include <cstdint>

#include "cli/command.h"
#include "db/database.h"

namespace ringmaster::cli {

struct FlightOptions {
  int64_t run_id = 0;
  double wait_s = 10;  // how long to wait for the dumps
  bool json = false;
};

// 0 when every worker on this host sent its dump in time, 1 otherwise.
int flightCommand(const storage::Database& db, const FlightOptions& options);

// `flight RUN`.
void addFlightCommand(CLI::App& app, Commands& commands);

}  // namespace ringmaster::cli
