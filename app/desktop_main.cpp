// ringmaster-desktop: Ringmaster's window (ui/, docs/gui.md), the only program that links Qt's GUI
// libraries; `ringmaster` with no subcommand becomes this program with the same options. Jobs it
// launches run as `ringmaster run`, the Qt-free command line beside it.
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/desktop_launch.h"
#include "db/database.h"
#include "exit_codes.h"
#include "gui_main.h"

int main(int argc, char** argv) {
  using namespace ringmaster;
  CLI::App app{"ringmaster-desktop: Ringmaster's window (the command line is `ringmaster`)"};
  app.set_version_flag("--version", fmt::format("ringmaster-desktop {} (telemetry protocol {})",
                                                RINGMASTER_VERSION, RINGMASTER_TELEMETRY_PROTOCOL));
  std::string db_path, launch;
  app.add_option("--db", db_path,
                 "the run database (default: $XDG_DATA_HOME/ringmaster/runs.db, else "
                 "~/.local/share/ringmaster/runs.db)");
  app.add_option("--launch", launch, "open the window and launch this job spec at once");
  CLI11_PARSE(app, argc, argv);

  return runReportingErrors([&]() -> int {
    if (!cli::displayAvailable()) {
      fmt::print(stderr,
                 "no display (neither DISPLAY nor WAYLAND_DISPLAY is set): the window cannot "
                 "open. `ringmaster` runs and reads jobs without one (ringmaster --help).\n");
      return kExitUsage;
    }
    ui::GuiOptions gui{db_path.empty() ? storage::defaultDatabasePath() : db_path, std::nullopt};
    if (!launch.empty()) gui.launch_spec = launch;
    return ui::runGui(argc, argv, gui);
  });
}
