// What a host offers a job, as `ringmaster hosts check` and the GUI's host list show it: the
// verified host key, the ringmaster-node found there, CPUs, memory, GPUs, and on a Slurm login
// node the Slurm version and partitions (issue 35).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "slurm/sinfo.h"
#include "ssh/ssh_session.h"
#include "ssh/ssh_target.h"

namespace ringmaster {

struct GpuInfo {
  std::string name;
  int64_t memory_mib = 0;
};

struct HostReport {
  SshTarget target;
  std::string fingerprint;
  std::string node_version;   // `ringmaster-node --version`, empty when not found
  bool node_matches = false;  // the version and telemetry protocol of this build
  int cpus = 0;
  int64_t memory_bytes = 0;
  std::vector<GpuInfo> gpus;  // from nvidia-smi, empty without it
  // From sinfo; nullopt when the host has no sinfo on its PATH.
  std::optional<slurm::SlurmClusterInfo> slurm;
  std::string error;  // why the host could not be checked; the rest is then empty
};

// Connects (host key verified as for a launch) and asks; never throws for the host's faults,
// which land in `error`.
HostReport checkHost(const SshTarget& target, const SshConnectOptions& options,
                     const std::string& node_binary);

// "alice@gpu1:2222" -> a launch.hosts entry; a bare name is an alias of ~/.ssh/config.
LaunchHostSpec parseHostArgument(const std::string& text);

}  // namespace ringmaster
