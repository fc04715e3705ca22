// `ringmaster sweep SPEC --axis FIELD=...` (issue 37): the command-line front end of a sweep
// (session/sweep/: plan, run each member as an ordinary run, record), printing each member's start
// and outcome and the sweep's table at the end; `--detach` hands the sweep to a driver process of
// its own. Also `sweeps` (the list), `show --sweep ID` (the report), `attach --sweep ID` (follows
// a detached sweep through the database) and `cancel --sweep ID` (stops its driver, checks that
// no run's process is left).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "db/database.h"

namespace ringmaster::cli {

// A sweep's members over SSH: as `ringmaster run`'s options of the same names.
struct SweepSshOptions {
  std::optional<std::string> known_hosts;  // default ~/.ssh/known_hosts
  std::optional<std::string> ssh_config;   // default ~/.ssh/config
  bool accept_new_host_keys = false;
};

struct SweepCommandOptions {
  std::string spec_path;
  std::string db_path;
  std::vector<std::string> axes;       // each --axis FIELD=SPEC (session/sweep/sweep_plan.h)
  std::optional<int> count;            // --count: random search's draws
  std::optional<uint64_t> seed;        // --seed
  std::string parallel;                // --parallel N | auto; empty: the section's, else 1
  std::string name;                    // --name; empty: the spec file's stem
  std::vector<std::string> overrides;  // --set FIELD=VALUE, applied to every member
  bool detach = false;
  bool json = false;   // the final report as JSON on stdout
  bool quiet = false;  // no per-member lines
  double grace_s = 5;  // a cancelled run: SIGTERM to SIGKILL
  SweepSshOptions ssh;
};

// Exit codes: 0 every member's run completed, 1 a member failed or was refused, 130 cancelled;
// --detach: 0 once the driver runs (its sweep id on stdout). Throws before anything starts for
// bad axes, a field no spec has, or a sweep none of whose members has a valid spec.
int sweepCommand(const SweepCommandOptions& options);

// Runs a recorded sweep's members from this process, printing each member's start and end and
// at the end (unless !print_report) the sweep's table (as JSON with `json_report`); returns
// sweepCommand's exit code. Ctrl-C cancels the running runs (a second kills them) and records the
// rest not started.
int driveSweep(const std::string& db_path, int64_t sweep_id, double grace_s, bool quiet,
               bool json_report, bool print_report = true, const SweepSshOptions& ssh = {});

// `ringmaster show --sweep ID [--by FIGURE] [--json]`: the sweep's report
// (storage/query/sweep_report.h) as a table and its best run, or as JSON.
int showSweepCommand(const storage::Database& db, int64_t sweep_id, const std::string& rank_by,
                     bool json);

// `ringmaster attach --sweep ID`: prints the members as they start and end (polling the database)
// until the sweep ends, then its table; Ctrl-C leaves the sweep running (exit 0). Exit codes as
// sweepCommand's once it ended. `ringmaster cancel --sweep ID`: SIGTERM to the sweep's driver
// (found by its recorded PID, start time and boot id), followed to the sweep's end, then checks
// that no process of its runs is left: 0 when none is, 1 otherwise.
int attachSweepCommand(const std::string& db_path, int64_t sweep_id, bool cancel, double grace_s,
                       bool quiet);

// `sweep`, `sweeps` and the detached driver's internal `sweep-driver ID`.
void addSweepCommands(CLI::App& app, Commands& commands);

}  // namespace ringmaster::cli
