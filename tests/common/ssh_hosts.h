// SSH "hosts" for a run's tests: real sshd servers (sshd_server.h) that let in one throwaway user
// key, with their keys in a known_hosts file and an ssh_config beside it in the test's directory;
// the launch.hosts entries that name them and the options that point `ringmaster` at both files.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/sshd_server.h"

namespace ringmaster::testing {

using SshdServers = std::vector<std::unique_ptr<SshdServer>>;

// Starts `count` servers in `dir` (sshd0, sshd1, ...) that accept dir/id_user, made here; each
// placed by `placement(i)` (127.0.0.1 on a free port without one). Writes dir/known_hosts with
// their keys and dir/ssh_config with `ssh_config`.
inline SshdServers startSshHosts(
    const std::filesystem::path& dir, int count,
    const std::function<SshdPlacement(int)>& placement = {},
    const std::string& ssh_config = "# empty: the hosts are given in full\n") {
  std::filesystem::create_directories(dir);
  makeKey(dir / "id_user");
  SshdServers servers;
  for (int i = 0; i < count; ++i) {
    servers.push_back(std::make_unique<SshdServer>(dir / ("sshd" + std::to_string(i)),
                                                   dir / "id_user.pub",
                                                   placement ? placement(i) : SshdPlacement{}));
    std::ofstream(dir / "known_hosts", std::ios::app) << servers.back()->knownHostsLine();
  }
  std::ofstream(dir / "ssh_config") << ssh_config;
  return servers;
}

// launch.hosts: each server at 127.0.0.1 and its port, `ranks` ranks, logging in with dir/id_user.
inline nlohmann::json loopbackLaunchHosts(const SshdServers& servers,
                                          const std::filesystem::path& dir, int ranks) {
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& server : servers) {
    hosts.push_back({{"host", "127.0.0.1"},
                     {"port", server->port()},
                     {"ranks", ranks},
                     {"identity_file", (dir / "id_user").string()}});
  }
  return hosts;
}

// `ringmaster`'s options that make it trust only these hosts' keys and read this ssh_config, and
// give a stopped worker 2 s before it is killed.
inline std::vector<std::string> sshOptions(const std::filesystem::path& dir) {
  return {"--known-hosts", (dir / "known_hosts").string(),
          "--ssh-config",  (dir / "ssh_config").string(),
          "--grace",       "2"};
}

}  // namespace ringmaster::testing
