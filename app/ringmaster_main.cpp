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
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/desktop_launch.h"
#include "cli/flight_command.h"
#include "cli/history_commands.h"
#if RINGMASTER_HAVE_LIBSSH
#include "cli/hosts_command.h"
#endif
#include "cli/run_command.h"
#if RINGMASTER_HAVE_WEB
#include "cli/serve_command.h"
#endif
#include "cli/spec_command.h"
#include "core/error.h"
#include "db/database.h"
#include "db/files.h"
#include "exit_codes.h"
#include "export/run_export.h"
#include "recorder/recorder.h"
#include "spec/job_spec.h"

namespace {

using namespace ringmaster;

// A locked database has its own code, so that a script can wait and retry.
int ringmasterExitCodeFor(ErrorKind kind) {
  return kind == ErrorKind::kTimeout ? kExitBusy : exitCodeFor(kind);
}

// Opens the database for a reading command; runs whose recorder died become `interrupted`. A
// reading command never creates a database: a path with no file is a clear error, so that a
// mistyped --db is not taken for an empty history. A database that cannot be written here (a
// read-only file system, no write permission) is opened read-only and read as it is.
std::unique_ptr<storage::Database> openDatabase(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    RM_THROW(kInvalidArgument,
             fmt::format("no run database at {}: the file does not exist (`ringmaster run SPEC` "
                         "creates it; --db names another)",
                         path));
  }
  auto db = std::make_unique<storage::Database>(path, storage::readingOptions(path));
  if (!db->readOnly()) storage::reconcileInterruptedRuns(*db);
  return db;
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

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);

  CLI::App app{"ringmaster: launch, record, inspect and compare distributed training runs"};
  app.set_version_flag("--version", fmt::format("ringmaster {} (telemetry protocol {})",
                                                RINGMASTER_VERSION, RINGMASTER_TELEMETRY_PROTOCOL));
#if RINGMASTER_HAVE_GUI
  // No subcommand: the desktop application, ringmaster-desktop (or, without a display or without
  // that program, the demo run headless).
  app.require_subcommand(0, 1);
  std::string gui_launch;
  app.add_option("--launch", gui_launch,
                 "with no subcommand: open the window and launch this job spec at once (without "
                 "a display: run it headless with `run`)");
  std::string askpass_prompt;
  CLI::App* askpass = app.add_subcommand(
      "askpass", "SSH_ASKPASS for launches from the window: ask for a passphrase in a dialog");
  askpass->add_option("prompt", askpass_prompt, "the question")->required();
  askpass->group("");  // internal: not listed in --help
#else
  app.require_subcommand(1);
#endif
  std::string db_path;
  app.add_option("--db", db_path,
                 "the run database (default: $XDG_DATA_HOME/ringmaster/runs.db, else "
                 "~/.local/share/ringmaster/runs.db)");
  bool json = false;

  cli::RunCommandOptions run_options;
  CLI::App* run = app.add_subcommand(
      "run", "validate a job spec, run it on this machine, record it and print its summary");
  run->add_option("spec", run_options.spec_path, "job spec (JSON)")->required();
  run->add_option("--set", run_options.overrides,
                  "override a spec field, FIELD=VALUE (VALUE as JSON, else a string); repeatable")
      ->allow_extra_args(false);
  run->add_option("--save-telemetry", run_options.save_telemetry,
                  "also write every telemetry line received to this file");
  run->add_option("--events", run_options.events_path,
                  "append the run's events to this file as JSON lines (created, progress, "
                  "finished: session/README.md), for a program that watches the run");
  run->add_option("--grace", run_options.grace_s, "seconds from SIGTERM to SIGKILL when cancelling")
      ->default_val(5.0)
      ->check(CLI::Range(0.0, 3600.0));
  run->add_flag("--accept-new-host-keys", run_options.accept_new_host_keys,
                "accept and record the key of a host not yet in known_hosts (its fingerprint is "
                "shown); a changed key is always refused");
  run->add_option("--known-hosts", run_options.known_hosts,
                  "known_hosts file (default ~/.ssh/known_hosts)");
  run->add_option("--ssh-config", run_options.ssh_config,
                  "ssh client config (default ~/.ssh/config)");
  run->add_option("--master-addr", run_options.master_addr,
                  "the first host's address as the other hosts reach it (default: its HostName)");
  run->add_flag("-q,--quiet", run_options.quiet, "no progress output");
  run->add_flag("-v,--verbose", run_options.verbose, "show the workers' own output");
  run->add_flag("--json", run_options.json, "print the final summary as JSON");
  run->add_flag("--detach", run_options.detach,
                "start the job detached: it goes on when this command, the window or the SSH "
                "connection goes away; prints the run id (`attach` follows it, `cancel` stops it)");
  int64_t detached_run = 0;
  CLI::App* attach = app.add_subcommand(
      "attach",
      "follow a detached run: replay what it spooled since the last stored event, "
      "then record it live to its end");
  attach->add_option("run", detached_run, "run id")->required();
  CLI::App* cancel = app.add_subcommand(
      "cancel",
      "stop a detached run on every host, record it to its end as cancelled and check "
      "that none of its processes is left");
  cancel->add_option("run", detached_run, "run id")->required();
  for (CLI::App* command : {attach, cancel}) {
    command->add_option("--grace", run_options.grace_s, "seconds from SIGTERM to SIGKILL")
        ->default_val(5.0)
        ->check(CLI::Range(0.0, 3600.0));
    command->add_option("--events", run_options.events_path,
                        "append the run's events to this file as JSON lines");
    command->add_flag("-q,--quiet", run_options.quiet, "no progress output");
    command->add_flag("-v,--verbose", run_options.verbose, "show the workers' own output");
    command->add_flag("--json", run_options.json, "print the final summary as JSON");
    command->add_option("--known-hosts", run_options.known_hosts,
                        "known_hosts file (default ~/.ssh/known_hosts)");
    command->add_option("--ssh-config", run_options.ssh_config,
                        "ssh client config (default ~/.ssh/config)");
  }

  storage::RunFilter filter;
  CLI::App* runs = app.add_subcommand("runs", "list past runs, newest first");
  runs->add_option("--name", filter.name_contains, "only names containing this text");
  std::vector<std::string> strategies;
  for (std::string_view name : enumNames<StrategyKind>()) strategies.emplace_back(name);
  runs->add_option("--strategy", filter.strategy, "only this strategy")
      ->check(CLI::IsMember(strategies));
  runs->add_option("--status", filter.status, "only this status")
      ->check(
          CLI::IsMember({"pending", "running", "completed", "failed", "cancelled", "interrupted"}));
  runs->add_option("--limit", filter.limit, "at most this many runs")
      ->default_val(50)
      ->check(CLI::PositiveNumber);
  runs->add_flag("--json", json, "JSON instead of a table");

  int64_t run_id = 0;
  CLI::App* show = app.add_subcommand("show", "a run's summary, ranks, communication and errors");
  show->add_option("run", run_id, "run id")->required();
  show->add_flag("--json", json, "JSON instead of tables");

  cli::FlightOptions flight_options;
  CLI::App* flight = app.add_subcommand(
      "flight",
      "dump a running run's flight recorders now: SIGUSR1 to its workers on this host, whose "
      "dumps are stored with the run and printed");
  flight->add_option("run", flight_options.run_id, "run id")->required();
  flight->add_option("--wait", flight_options.wait_s, "seconds to wait for the dumps")
      ->default_val(10.0)
      ->check(CLI::Range(0.0, 3600.0));
  flight->add_flag("--json", flight_options.json, "JSON instead of text");

  std::vector<int64_t> run_ids;
  CLI::App* compare =
      app.add_subcommand("compare", "compare runs: figures, loss, spec differences");
  compare->add_option("runs", run_ids, "two or more run ids")
      ->required()
      ->expected(-2)  // at least two, no upper bound
      ->type_name("RUN");
  compare->add_flag("--json", json, "JSON instead of tables");

  std::string csv_dir, trace_path;
  CLI::App* exporter = app.add_subcommand(
      "export", "write a run as CSV files, a Perfetto trace or both (at least one of the two)");
  exporter->add_option("run", run_id, "run id")->required();
  exporter->add_option("--csv", csv_dir, "directory for run.json and one CSV file per table");
  exporter->add_option("--trace", trace_path,
                       "Chrome trace JSON file (open in https://ui.perfetto.dev)");
  exporter->add_flag("--json", json, "print what was written as JSON");

#if RINGMASTER_HAVE_LIBSSH
  CLI::App* hosts = app.add_subcommand("hosts", "SSH hosts");
  hosts->require_subcommand(1);
  cli::HostsCheckOptions hosts_options;
  CLI::App* check = hosts->add_subcommand(
      "check", "connect to hosts (host key verified) and show what they offer a job");
  check->add_option("hosts", hosts_options.hosts, "aliases of ~/.ssh/config or [user@]host[:port]")
      ->required();
  check->add_option("--node-binary", hosts_options.node_binary,
                    "ringmaster-node's path on the hosts (default: this build's)");
  check->add_option("--known-hosts", hosts_options.known_hosts,
                    "known_hosts file (default ~/.ssh/known_hosts)");
  check->add_option("--ssh-config", hosts_options.ssh_config,
                    "ssh client config (default ~/.ssh/config)");
  check->add_flag("--accept-new-host-keys", hosts_options.accept_new_host_keys,
                  "accept and record the key of a host not yet in known_hosts");
  check->add_flag("--json", hosts_options.json, "JSON instead of a table");
#endif

  CLI::App* spec = app.add_subcommand("spec", "the job spec's description");
  spec->require_subcommand(1);
  bool spec_json = false;
  CLI::App* spec_fields = spec->add_subcommand(
      "fields",
      "every spec field: type, bounds, default, choices, when it applies, help (the "
      "job editor's form is built from the same description)");
  spec_fields->add_flag("--json", spec_json, "JSON instead of text");

#if RINGMASTER_HAVE_WEB
  cli::ServeCommandOptions serve_options;
  CLI::App* serve = app.add_subcommand(
      "serve", "the web dashboard: every run, live, in a browser (docs/web.md); Ctrl-C stops");
  serve
      ->add_option("--listen", serve_options.listen,
                   "HOST:PORT to listen on; any address but loopback needs a token")
      ->default_val("127.0.0.1:8765");
  serve->add_option("--token-file", serve_options.token_file,
                    "read the access token from this file (else one is generated where needed "
                    "and printed once)");
  serve->add_option("--assets", serve_options.assets_dir,
                    "the pages' directory (default: web/ beside the ringmaster binary)");
  serve
      ->add_option("--nice", serve_options.nice,
                   "the server's CPU priority (nice 0..19; default 10: below a run recording on "
                   "the same machine)")
      ->check(CLI::Range(0, 19));
#endif

  // --json anywhere asks for JSON errors too, a usage error included (parsing may stop before
  // the flag is read).
  const bool json_errors = std::any_of(argv + 1, argv + argc, [](const char* argument) {
    return std::string_view(argument) == "--json";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    if (code == 0) return kExitOk;
    if (json_errors) printJsonError("usage", e.what(), kExitUsage);
    return kExitUsage;
  }

  const bool db_given = !db_path.empty();
  const auto command = [&]() -> int {
    if (spec_fields->parsed()) return cli::specFieldsCommand(spec_json);
    if (db_path.empty()) db_path = storage::defaultDatabasePath();
    if (run->parsed()) {
      run_options.db_path = db_path;
      return cli::runCommand(run_options);
    }
    if (attach->parsed() || cancel->parsed()) {
      run_options.db_path = db_path;
      return cli::attachCommand(run_options, detached_run, cancel->parsed());
    }
#if RINGMASTER_HAVE_LIBSSH
    if (check->parsed()) return cli::hostsCheckCommand(hosts_options);
#endif
#if RINGMASTER_HAVE_GUI
    if (askpass->parsed()) {
      const std::optional<std::string> dialog = cli::besideThisProgram("ringmaster-askpass");
      if (!dialog) RM_THROW(kUnavailable, "askpass: no ringmaster-askpass beside this ringmaster");
      cli::execProgram(*dialog, {askpass_prompt});
    }
    if (app.get_subcommands().empty()) {
      // The window, its options passed on as they came; the same process (same pid) goes on as
      // ringmaster-desktop.
      std::string why = "no display (neither DISPLAY nor WAYLAND_DISPLAY is set)";
      if (cli::displayAvailable()) {
        const std::optional<std::string> desktop = cli::besideThisProgram("ringmaster-desktop");
        if (desktop) cli::execProgram(*desktop, std::vector<std::string>(argv + 1, argv + argc));
        why = "no ringmaster-desktop beside this ringmaster";
      }
      if (gui_launch.empty()) {
        fmt::print(stderr,
                   "{}: the window cannot open. Use a subcommand (ringmaster --help), or "
                   "--launch SPEC to run a job headless.\n",
                   why);
        return kExitUsage;
      }
      fmt::print(stderr,
                 "{}: running {} headless with `ringmaster run`; open the window later to watch "
                 "it recorded\n",
                 why, gui_launch);
      run_options.spec_path = gui_launch;
      run_options.db_path = db_path;
      return cli::runCommand(run_options);
    }
#endif
#if RINGMASTER_HAVE_WEB
    if (serve->parsed()) {
      serve_options.db_path = db_path;
      return cli::serveCommand(serve_options);
    }
#endif
    if (runs->parsed()) {
      std::error_code ec;
      if (!db_given && !std::filesystem::exists(db_path, ec)) {
        // The first start, before any run: an empty history rather than an error.
        if (json) fmt::print("[]\n");
        fmt::print(stderr, "no runs yet: {} does not exist (`ringmaster run SPEC` creates it)\n",
                   db_path);
        return kExitOk;
      }
      return cli::runsCommand(*openDatabase(db_path), filter, json);
    }
    if (show->parsed()) return cli::showCommand(*openDatabase(db_path), run_id, json);
    if (flight->parsed()) return cli::flightCommand(*openDatabase(db_path), flight_options);
    if (compare->parsed()) return cli::compareCommand(*openDatabase(db_path), run_ids, json);
    if (exporter->parsed()) {
      if (csv_dir.empty() && trace_path.empty()) {
        RM_THROW(kInvalidArgument,
                 "export needs --csv DIR, --trace FILE or both: nothing to write");
      }
      const std::unique_ptr<storage::Database> opened = openDatabase(db_path);
      const storage::Database& db = *opened;
      nlohmann::json written = nlohmann::json::object();
      if (!csv_dir.empty()) {
        const std::vector<std::string> files = storage::exportRunCsv(db, run_id, csv_dir);
        written["files"] = files;
        if (!json)
          for (const std::string& file : files) fmt::print("{}\n", file);
      }
      if (!trace_path.empty()) {
        const int64_t slices = storage::exportRunTrace(db, run_id, trace_path);
        written["file"] = trace_path;
        written["slices"] = slices;
        if (!json)
          fmt::print("{}: {} slices; open it in https://ui.perfetto.dev\n", trace_path, slices);
      }
      if (json) fmt::print("{}\n", written.dump(2));
      return kExitOk;
    }
    return kExitUsage;
  };
  if (!json_errors) return checkStdout(runReportingErrors(command, ringmasterExitCodeFor));
  return checkStdout(runReportingErrors(
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
      ringmasterExitCodeFor));
}
