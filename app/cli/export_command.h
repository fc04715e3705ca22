// `ringmaster export RUN`: a run as CSV files, a Perfetto trace or both.
#pragma once

#include "cli/command.h"

namespace ringmaster::cli {

void addExportCommand(CLI::App& app, Commands& commands);

}  // namespace ringmaster::cli
