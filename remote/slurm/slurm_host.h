// Where Slurm's commands run for a job: this machine (LocalSlurmHost), or a login node over SSH
// (SshSlurmHost, remote/ssh/ssh_slurm_host.h). The commands are argument vectors, never shell
// text: here they are exec'd as they are; over SSH each word is shell-quoted.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "launcher/launch.h"
#include "process/child_process.h"

namespace ringmaster::slurm {

struct CommandOutput {
  ExitStatus status;
  std::string out, err;
};

class SlurmHost {
 public:
  virtual ~SlurmHost() = default;
  // Runs `argv` to its end, at most `timeout` (then killed; status says so).
  virtual CommandOutput run(const std::vector<std::string>& argv,
                            std::chrono::milliseconds timeout) = 0;
  // Writes `text` to `path` (owner-only, 0600; `executable`: 0700), creating its directories
  // (0700).
  virtual void writeFile(const std::string& path, const std::string& text,
                         bool executable = false) = 0;
  // Starts `argv` (a `ringmaster-node spool-follow`), its stdout telemetry lines and stderr log
  // lines read by the returned Launch's pump; cancel() and kill() stop it (TERM, KILL).
  virtual std::unique_ptr<Launch> start(const std::vector<std::string>& argv) = 0;
  // "this machine", or the login node as "user@host:port".
  virtual std::string describe() const = 0;
};

// Runs everything here through ChildProcess (no shell).
std::unique_ptr<SlurmHost> localSlurmHost();

}  // namespace ringmaster::slurm
