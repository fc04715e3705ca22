// Exports of a recorded run: CSV files (one per table, for pandas or a spreadsheet) and a Chrome
// trace (JSON, opened by Perfetto's UI or chrome://tracing) with a process per rank and tracks for
// its steps, its collectives and its pipeline actions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "db/database.h"

namespace ringmaster::storage {

// Writes run.json (the run record and its spec), ranks.csv, scalars.csv (rank, metric, step,
// value), comm_events.csv, sched_events.csv, evals.csv (the validation loss) and logs.csv into
// `directory` (created); returns the paths written. Throws kIo naming a file that cannot be
// written.
std::vector<std::string> exportRunCsv(const Database& db, int64_t run_id,
                                      const std::string& directory);

// Writes the run as a Chrome trace event file; returns the number of slices written. Times are
// microseconds from the run's first event; steps are placed by their end time and duration.
int64_t exportRunTrace(const Database& db, int64_t run_id, const std::string& path);

// A CSV field quoted as RFC 4180 asks when it holds a comma, quote or line break.
std::string csvField(const std::string& text);

}  // namespace ringmaster::storage
