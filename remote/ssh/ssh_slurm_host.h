// SshSlurmHost (issue 35): Slurm's commands on a login node over one SSH connection (host keys
// verified as for every SSH host, a ProxyJump bastion's too). Each command's words are
// shell-quoted; files go by SFTP; a started command's output is read as an agent's is.
#pragma once

#include <memory>
#include <string>

#include "slurm/slurm_host.h"
#include "spec/job_spec.h"
#include "ssh/ssh_session.h"

namespace ringmaster::slurm {

// Connects to `login` (resolved through the ssh config at `config_path`, as a launch.hosts entry
// is) and authenticates; throws kComm / kTimeout naming the host as SshSession does. The host is
// safe to use from several threads: its commands and the started command's reads share the
// connection one at a time.
std::unique_ptr<SlurmHost> sshSlurmHost(const LaunchHostSpec& login,
                                        const SshConnectOptions& options,
                                        const std::string& config_path = defaultSshConfigPath());

}  // namespace ringmaster::slurm
