// The commands that change what a person wrote about recorded runs (issue 33): `tag RUN +a -b`,
// `note RUN TEXT` (or --file), `rename RUN NAME` and `delete RUN... --yes`, which prints the rows
// it deleted per table. Each is a call of recorder/run_edits.h; none reads telemetry.
#pragma once

#include "cli/command.h"

namespace ringmaster::cli {

void addOrganiseCommands(CLI::App& app, Commands& commands);

}  // namespace ringmaster::cli
