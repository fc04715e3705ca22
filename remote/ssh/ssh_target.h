// Where an entry of `launch.hosts` leads: the OpenSSH client configuration (~/.ssh/config) read
// explicitly, as `ssh` reads it (first value wins, IdentityFile accumulates), merged with the
// entry's own fields; and the checks that keep host and user names from ever reaching a shell
// as anything but a name.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "process/shell_quote.h"  // shellQuote, shellCommand (kept reachable from here)
#include "spec/job_spec.h"

namespace ringmaster {

struct SshTarget {
  std::string alias;     // as written in launch.hosts (what errors name)
  std::string hostname;  // what is connected to
  int port = 22;
  std::string user;
  std::vector<std::string> identity_files;  // tried in order after the agent
  std::optional<std::string> proxy_jump;    // recorded; jumping is not supported (an error)
  bool password_auth = false;               // the host opted in to password authentication
};

// "host 'gpu1' (alice@10.0.0.7:22)": how errors name a host.
std::string describeTarget(const SshTarget& target);

// The current user's ~/.ssh/config ("" when HOME is unset).
std::string defaultSshConfigPath();
// The current user's ~/.ssh/known_hosts.
std::string defaultKnownHostsPath();

// The concrete host aliases an ssh config names on its Host lines (patterns with *, ? or ! are
// left out), in file order, each once; none when the file is missing.
std::vector<std::string> sshConfigAliases(const std::string& config_path);

// Resolves `host` through the config at `config_path` (a missing file is an empty config; "" reads
// none). Fields set on the entry win over the config. Throws kInvalidArgument naming the host for
// a host or user name that is not a plain name, a port outside 1..65535, or a ProxyJump.
SshTarget resolveSshTarget(const LaunchHostSpec& host, const std::string& config_path);

// Host names: letters, digits, '.', '-', '_' and ':' (IPv6), not starting with '-'; user names:
// letters, digits, '.', '-', '_', not starting with '-'. Throw kInvalidArgument naming `field`.
void validateHostName(const std::string& name, const std::string& field);
void validateUserName(const std::string& name, const std::string& field);

// shellQuote and shellCommand: process/shell_quote.h (included above), without libssh.

}  // namespace ringmaster
