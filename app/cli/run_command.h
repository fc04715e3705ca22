// `ringmaster run SPEC`: the command-line front end of a run session (session/run/run_session.h:
// validate, launch here or over SSH, record) that shows live progress, answers SSH's questions on
// the terminal, writes the machine-readable events (--events) and prints the run's summary.
// Ctrl-C cancels cleanly (status `cancelled`, workers gone); a second Ctrl-C kills.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"

namespace ringmaster::cli {

struct RunCommandOptions {
  std::string spec_path;
  std::string db_path;
  std::vector<std::string> overrides;         // "train.steps=40": a JSON value, else a string
  std::optional<std::string> save_telemetry;  // a copy of every telemetry line received
  std::optional<std::string> events_path;     // the run's events as JSON lines (run_events.h)
  bool json = false;                          // the final summary as JSON on stdout
  bool quiet = false;                         // no progress output
  bool verbose = false;                       // the workers' own output on stderr
  bool report_on_stderr = false;  // the final report on stderr (`plan --json --launch`'s stdout is
                                  // its own JSON)
  double grace_s = 5;             // cancel: SIGTERM to SIGKILL
  // Over SSH (launch.hosts names other hosts):
  bool accept_new_host_keys = false;       // record unknown host keys (their fingerprint is shown)
  std::optional<std::string> known_hosts;  // default ~/.ssh/known_hosts
  std::optional<std::string> ssh_config;   // default ~/.ssh/config
  std::string master_addr;  // node 0's address as the other hosts reach it; default its HostName
  // --detach (issue 21): start the agents detached and return once they run, printing the run id.
  bool detach = false;
};

// The exit code: 0 completed, 1 failed, 130 cancelled. Throws (before launching) for a bad spec,
// an unusable database or a missing ringmaster-node.
int runCommand(const RunCommandOptions& options);

// `ringmaster attach RUN` and `ringmaster cancel RUN` (issue 21): record a detached run from the
// last event stored per rank to its end (the same display and report as `run`); cancel first asks
// every host's agent to stop (SIGTERM, forwarded to the workers) and then checks that none of the
// agents' and workers' processes is left. Uses db_path, grace_s, quiet, verbose, json, events_path
// of `options`. Exit codes as runCommand's; cancel exits 1 when a process is left. Ctrl-C (SIGINT
// / SIGTERM) on an attach leaves the run going, detached (exit 0); `cancel` is what stops it.
int attachCommand(const RunCommandOptions& options, int64_t run_id, bool cancel);

// `run SPEC`, and `attach RUN` / `cancel RUN` of a detached run.
void addRunCommands(CLI::App& app, Commands& commands);

}  // namespace ringmaster::cli
