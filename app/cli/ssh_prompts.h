// How the command line answers the SSH layer's questions: unknown host keys (accepted only with
// --accept-new-host-keys, and always said), passphrases and passwords (typed on the terminal
// without echo, else from SSH_ASKPASS as OpenSSH does).
#pragma once

#include <optional>
#include <string>

#include "ssh/ssh_session.h"

namespace ringmaster::cli {

SshConnectOptions interactiveConnectOptions(bool accept_new_host_keys,
                                            const std::optional<std::string>& known_hosts);

}  // namespace ringmaster::cli
