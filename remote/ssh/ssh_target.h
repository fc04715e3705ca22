// Where an entry of `launch.hosts` leads: the OpenSSH client configuration (~/.ssh/config) read
// explicitly, as `ssh` reads it (first value wins, IdentityFile accumulates), merged with the
// entry's own fields; and the checks that keep host and user names from ever reaching a shell
// as anything but a name.
#pragma once

#include <memory>
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
  bool password_auth = false;               // the host opted in to password authentication
  // The jump host this one is reached through (ProxyJump; issue 35), itself maybe through
  // another; null: connected to directly.
  std::shared_ptr<const SshTarget> via;
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
// none). Fields set on the entry win over the config, `proxy_jump` over its ProxyJump ("none":
// no jump). A jump is [user@]host[:port] (an IPv6 address in brackets), or such hops joined by
// commas, the first reached first; each hop is resolved through the config as a host is, its own
// ProxyJump applying to the first only (as OpenSSH's -J). Throws kInvalidArgument naming the host
// for a host or user name that is not a plain name, a port outside 1..65535, a malformed jump, or
// a chain of more than kMaxJumpHops hops (a loop in the config).
SshTarget resolveSshTarget(const LaunchHostSpec& host, const std::string& config_path);
inline constexpr int kMaxJumpHops = 8;

// `text` as one ProxyJump hop, [user@]host[:port]: the host, user and port it names, validated;
// kInvalidArgument naming `field` otherwise.
LaunchHostSpec parseJumpHop(const std::string& text, const std::string& field);

// "host 'login1' (alice@10.0.0.7:22) through host 'bastion' (...)" for a jumped host.
std::string describeRoute(const SshTarget& target);

// Host names: letters, digits, '.', '-', '_' and ':' (IPv6), not starting with '-'; user names:
// letters, digits, '.', '-', '_', not starting with '-'. Throw kInvalidArgument naming `field`.
void validateHostName(const std::string& name, const std::string& field);
void validateUserName(const std::string& name, const std::string& field);

// shellQuote and shellCommand: process/shell_quote.h (included above), without libssh.

}  // namespace ringmaster
