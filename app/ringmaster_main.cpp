// ringmaster: the desktop side's command line, linking no Qt. Subcommands give the whole product
// headless: `run` launches a job locally and records it, `runs` / `show` / `compare` read the run
// database, `export` writes a run as CSV or as a Perfetto trace, `serve` the web dashboard. With no
// subcommand it becomes ringmaster-desktop (the window), built beside it. Errors become exit codes
// here and nowhere else (docs/errors.md).
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/command_line.h"
#include "cli/desktop_launch.h"
#include "cli/export_command.h"
#include "cli/flight_command.h"
#include "cli/history_commands.h"
#include "cli/logs_command.h"
#include "cli/organise_commands.h"
#if RINGMASTER_HAVE_LIBSSH
#include "cli/hosts_command.h"
#endif
#include "cli/run_command.h"
#if RINGMASTER_HAVE_WEB
#include "cli/serve_command.h"
#endif
#include "cli/spec_command.h"
#include "cli/sweep_command.h"
#include "core/error.h"
#include "exit_codes.h"

namespace {

using namespace ringmaster;

// A locked database has its own code, so that a script can wait and retry.
int ringmasterExitCodeFor(ErrorKind kind) {
  return kind == ErrorKind::kTimeout ? kExitBusy : exitCodeFor(kind);
}

// What a command printed on stdout must reach it: a full disk behind stdout
// (`ringmaster runs --json > /dev/full`) is an error, not a silent exit 0. A reader that stopped
// reading (`| head -1`) is not.
int checkStdout(int code) {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return code;
  const int error = errno;
  if (error == EPIPE) return code;
  fmt::print(stderr, "error: writing the standard output failed: {}\n",
             error != 0 ? std::strerror(error) : "a write was refused");
  return code == kExitOk ? kExitFailed : code;
}

// With --json an error is also one JSON document on stdout, {"error": {"kind", "message",
// "exit_code"}}, so that a script reading stdout always gets JSON; stderr keeps the plain line.
void printJsonError(std::string_view kind, std::string_view message, int exit_code) {
  const nlohmann::json document = {
      {"error", {{"kind", kind}, {"message", message}, {"exit_code", exit_code}}}};
  fmt::print("{}\n", document.dump(2));
  std::fflush(stdout);
}

// Runs the command, its errors reported on stderr (and as JSON on stdout with --json), their kind
// turned into the exit code.
int runReportingErrorsAs(const std::function<int()>& command, bool json_errors) {
  if (!json_errors) return runReportingErrors(command, ringmasterExitCodeFor);
  return runReportingErrors(
      [&]() -> int {
        try {
          return command();
        } catch (const Error& e) {
          printJsonError(errorKindName(e.kind()), e.message(), ringmasterExitCodeFor(e.kind()));
          throw;
        } catch (const std::exception& e) {
          printJsonError("error", e.what(), kExitFailed);
          throw;
        }
      },
      ringmasterExitCodeFor);
}

#if RINGMASTER_HAVE_GUI
// `ringmaster` with no subcommand: the desktop application, ringmaster-desktop, beside this
// program (or, without a display or without that program, --launch's job run headless), and the
// internal `askpass` the window's SSH launches use.
class DesktopHandOver {
 public:
  explicit DesktopHandOver(CLI::App& app) {
    app.require_subcommand(0, 1);
    app.add_option("--launch", launch_,
                   "with no subcommand: open the window and launch this job spec at once "
                   "(without a display: run it headless with `run`)");
    askpass_ = app.add_subcommand(
        "askpass", "SSH_ASKPASS for launches from the window: ask for a passphrase in a dialog");
    askpass_->add_option("prompt", askpass_prompt_, "the question")->required();
    askpass_->group("");  // internal: not listed in --help
  }

  // Whether this command line is the window's (no subcommand) or askpass.
  bool applies(const CLI::App& app) const {
    return askpass_->parsed() || app.get_subcommands().empty();
  }

  // Execs ringmaster-desktop (or ringmaster-askpass) with the arguments as they came, the same
  // process going on; returns only where it cannot, running --launch's job headless.
  int run(const cli::CommonOptions& common, int argc, char** argv) const {
    if (askpass_->parsed()) {
      const std::optional<std::string> dialog = cli::besideThisProgram("ringmaster-askpass");
      if (!dialog) RM_THROW(kUnavailable, "askpass: no ringmaster-askpass beside this ringmaster");
      cli::execProgram(*dialog, {askpass_prompt_});
    }
    std::string why = "no display (neither DISPLAY nor WAYLAND_DISPLAY is set)";
    if (cli::displayAvailable()) {
      const std::optional<std::string> desktop = cli::besideThisProgram("ringmaster-desktop");
      if (desktop) cli::execProgram(*desktop, std::vector<std::string>(argv + 1, argv + argc));
      why = "no ringmaster-desktop beside this ringmaster";
    }
    if (launch_.empty()) {
      fmt::print(stderr,
                 "{}: the window cannot open. Use a subcommand (ringmaster --help), or "
                 "--launch SPEC to run a job headless.\n",
                 why);
      return kExitUsage;
    }
    fmt::print(stderr,
               "{}: running {} headless with `ringmaster run`; open the window later to watch "
               "it recorded\n",
               why, launch_);
    cli::RunCommandOptions options;
    options.spec_path = launch_;
    options.db_path = common.databasePath();
    return cli::runCommand(options);
  }

 private:
  std::string launch_;
  CLI::App* askpass_ = nullptr;
  std::string askpass_prompt_;
};
#endif

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"ringmaster: launch, record, inspect and compare distributed training runs"};
  app.set_version_flag("--version", fmt::format("ringmaster {} (telemetry protocol {})",
                                                RINGMASTER_VERSION, RINGMASTER_TELEMETRY_PROTOCOL));
#if RINGMASTER_HAVE_GUI
  DesktopHandOver desktop(app);
#else
  app.require_subcommand(1);
#endif
  cli::CommonOptions common;
  app.add_option("--db", common.db_path,
                 "the run database (default: $XDG_DATA_HOME/ringmaster/runs.db, else "
                 "~/.local/share/ringmaster/runs.db); before or after the subcommand");
  cli::takeGlobalOptionsAnywhere(app);

  cli::Commands commands;
  cli::addRunCommands(app, commands);
  cli::addHistoryCommands(app, commands);
  cli::addLogsCommand(app, commands);
  cli::addOrganiseCommands(app, commands);
  cli::addFlightCommand(app, commands);
  cli::addExportCommand(app, commands);
#if RINGMASTER_HAVE_LIBSSH
  cli::addHostsCommand(app, commands);
#endif
  cli::addSpecCommand(app, commands);
  cli::addSweepCommands(app, commands);
#if RINGMASTER_HAVE_WEB
  cli::addServeCommand(app, commands);
#endif

  // --json anywhere asks for JSON errors too, a usage error included (parsing may stop before
  // the flag is read).
  const bool json_errors = std::any_of(argv + 1, argv + argc, [](const char* argument) {
    return std::string_view(argument) == "--json";
  });
  // `ringmaster --json show 3` as `ringmaster show --json 3` (issue 33).
  std::vector<std::string> args =
      cli::withGlobalFlagsAfterSubcommand(app, std::vector<std::string>(argv + 1, argv + argc));
  std::vector<char*> parsed_argv = {argv[0]};
  for (std::string& arg : args) parsed_argv.push_back(arg.data());
  try {
    app.parse(static_cast<int>(parsed_argv.size()), parsed_argv.data());
  } catch (const CLI::ParseError& e) {
    if (const std::optional<std::string> unknown = cli::unknownSubcommandMessage(app, args)) {
      fmt::print(stderr, "error: {}\n", *unknown);
      if (json_errors) printJsonError("usage", *unknown, kExitUsage);
      return kExitUsage;
    }
    const int code = app.exit(e);
    if (code == 0) return kExitOk;
    if (json_errors) printJsonError("usage", e.what(), kExitUsage);
    return kExitUsage;
  }

  return checkStdout(runReportingErrorsAs(
      [&]() -> int {
        int exit_code = kExitUsage;
        if (commands.runParsed(common, exit_code)) return exit_code;
#if RINGMASTER_HAVE_GUI
        if (desktop.applies(app)) return desktop.run(common, argc, argv);
#endif
        return exit_code;
      },
      json_errors));
}
