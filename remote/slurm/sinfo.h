// What `ringmaster hosts check` asks a host's Slurm client (issue 35): the version and each
// partition with its idle and total nodes, from sinfo's own counts. The commands are fixed
// argument vectors; the parsers read their output and never run anything.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "slurm/slurm_host.h"

namespace ringmaster::slurm {

struct SlurmPartition {
  std::string name;                                   // without sinfo's '*'
  bool is_default = false;                            // sinfo marks the default partition with '*'
  std::string availability;                           // "up", "down", "drain", "inact"
  int allocated = 0, idle = 0, other = 0, total = 0;  // nodes (sinfo's %F)
  bool operator==(const SlurmPartition&) const = default;
};

struct SlurmClusterInfo {
  std::string version;  // "22.05.8"; empty when sinfo could not say
  std::vector<SlurmPartition> partitions;
  // Why sinfo failed (no slurm.conf, the controller unreachable: its own words); empty when it
  // answered. What it did answer is kept.
  std::string error;
};

// `sinfo --noheader --format=%P|%a|%F`: one line per partition, "debug*|up|1/1/0/2".
std::vector<std::string> sinfoPartitionsCommand();

// "22.05.8" from `sinfo --version` ("slurm-wlm 22.05.8", "slurm 23.02.1"); "" for other text.
std::string parseSinfoVersion(std::string_view text);
// The partitions of sinfoPartitionsCommand()'s output, lines of one partition added up. Throws
// kFormat naming the line for one that is not NAME|AVAIL|A/I/O/T.
std::vector<SlurmPartition> parseSinfoPartitions(std::string_view text);

// Asks through `run` (a host's commands: SlurmHost::run, or an SSH session's): nullopt when sinfo
// is not on the host's PATH, else its version and partitions (with `error` when it failed).
using CommandRunner = std::function<CommandOutput(const std::vector<std::string>& argv)>;
std::optional<SlurmClusterInfo> querySlurmCluster(const CommandRunner& run);

}  // namespace ringmaster::slurm
