// `ringmaster hosts check HOST...`: connects to each host as a launch would (host key verified
// first) and shows its fingerprint, the ringmaster-node found there, CPUs, memory and GPUs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"

namespace ringmaster::cli {

struct HostsCheckOptions {
  std::vector<std::string> hosts;          // aliases of ~/.ssh/config or [user@]host[:port]
  std::optional<std::string> node_binary;  // default: this build's path
  std::optional<std::string> known_hosts;
  std::optional<std::string> ssh_config;
  bool accept_new_host_keys = false;
  bool json = false;
};

// 0 when every host answered, 1 otherwise.
int hostsCheckCommand(const HostsCheckOptions& options);

// `hosts check HOST...`.
void addHostsCommand(CLI::App& app, Commands& commands);

}  // namespace ringmaster::cli
