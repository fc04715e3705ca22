// `ringmaster logs RUN [--rank R] [--grep TEXT] [--follow] [--json]` (issue 33): a run's log
// lines (the recorder's, the agents' and each rank's stderr and log events) as the Logs tab shows
// them, and with --follow the new ones as they are recorded, until the run ends.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "cli/command.h"
#include "query/runs.h"

namespace CLI {
class App;
}

namespace ringmaster::cli {

struct LogsOptions {
  int64_t run_id = 0;
  storage::LogQuery query;  // --rank, --grep
  bool follow = false;
  bool json = false;  // one JSON object per line: {"rank", "t", "level", "message"}
};

// Prints the run's lines matching the options on `out`; with follow, polls the database for new
// ones until the run is no longer pending or running (then prints what came last) or the process
// is interrupted. A run that does not exist is kInvalidArgument.
int logsCommand(storage::Database& db, const LogsOptions& options, std::FILE* out);

void addLogsCommand(CLI::App& app, Commands& commands);

}  // namespace ringmaster::cli
