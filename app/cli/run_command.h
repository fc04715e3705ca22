// `ringmaster run SPEC`: validates the spec, launches it through the node agents (here, or over SSH
// on the spec's hosts),
// records every telemetry and log line in the run database, shows live progress, and prints the
// run's summary. Ctrl-C cancels cleanly (status `cancelled`, workers gone).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringmaster::cli {

struct RunCommandOptions {
  std::string spec_path;
  std::string db_path;
  std::vector<std::string> overrides;         // "train.steps=40": a JSON value, else a string
  std::optional<std::string> save_telemetry;  // a copy of every telemetry line received
  bool json = false;                          // the final summary as JSON on stdout
  bool quiet = false;                         // no progress output
  bool verbose = false;                       // the workers' own output on stderr
  double grace_s = 5;                         // cancel: SIGTERM to SIGKILL
  // Over SSH (launch.hosts names other hosts):
  bool accept_new_host_keys = false;       // record unknown host keys (their fingerprint is shown)
  std::optional<std::string> known_hosts;  // default ~/.ssh/known_hosts
  std::optional<std::string> ssh_config;   // default ~/.ssh/config
  std::string master_addr;  // node 0's address as the other hosts reach it; default its HostName
};

// The exit code: 0 completed, 1 failed, 130 cancelled. Throws (before launching) for a bad spec,
// an unusable database or a missing ringmaster-node.
int runCommand(const RunCommandOptions& options);

// A run's own directory for the files it writes (its spec.json, a local run's relative
// checkpoint.dir: docs/spec.md), beside the database and named after it:
// DB_DIR/DB_FILE-runs/run-ID, so that two databases in one directory never share one. Created
// owner-only by the run, which refuses one left by an earlier database of the same name.
std::filesystem::path runDirectory(const std::string& db_path, int64_t run_id);

// Applies "a.b.c=VALUE" overrides to a spec document; VALUE is read as JSON when it parses,
// else taken as a string. Throws kInvalidArgument naming a malformed override.
void applyOverrides(nlohmann::json& document, const std::vector<std::string>& overrides);

}  // namespace ringmaster::cli
