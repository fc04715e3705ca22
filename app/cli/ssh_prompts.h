// How the command line answers the SSH layer's questions: unknown host keys (accepted only with
// --accept-new-host-keys, and always said), passphrases and passwords (typed on the terminal
// without echo, else from SSH_ASKPASS as OpenSSH does).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "ssh/ssh_session.h"

namespace ringmaster::cli {

// OpenSSH's SSH_ASKPASS: the program's first line of output, when SSH_ASKPASS_REQUIRE=force or
// there is no terminal to ask on; none when SSH_ASKPASS is unset or the program failed. Its output
// is read up to kMaxAskPassBytes (four times OpenSSH's own buffer): a program that writes more is
// stopped and its answer not used, so an endless writer neither hangs the prompt nor fills memory.
inline constexpr std::size_t kMaxAskPassBytes = 4096;
std::optional<std::string> askPassProgram(const std::string& prompt);

SshConnectOptions interactiveConnectOptions(bool accept_new_host_keys,
                                            const std::optional<std::string>& known_hosts);

}  // namespace ringmaster::cli
