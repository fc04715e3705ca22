// LocalLauncher: runs a job on this machine through one `ringmaster-node agent`, started as a
// child process with its stdin on a pipe, so the agent (and with it every worker) stops when this
// process dies, however it dies. A detached run (issue 21) is the exception: its agent is started
// with --detach JOB_DIR and outlives this process, and attaching to it follows its spool through
// `ringmaster-node spool-follow JOB_DIR` instead.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "launcher/launch.h"
#include "process/child_process.h"
#include "process/detached_job.h"
#include "spec/job_spec.h"

namespace ringmaster {

struct LocalLaunchOptions {
  std::string node_binary;  // the ringmaster-node executable
  std::string spec_path;    // the job spec file the agent and its workers read
  std::chrono::milliseconds grace{std::chrono::seconds(5)};  // the agent's TERM-to-KILL time
  // A detached run's job directory on this machine: the agent is started detached there (its
  // launch ends once it runs), or, with `follow_from`, its spool is followed (attach): cancel and
  // kill then signal the detached agent by its PID file.
  std::string job_dir;
  bool detach = false;
  std::optional<std::string> follow_from;  // spool-follow's --from: RANK:ATTEMPT:SEQ,...
  // Following: the detached agent as its launch recorded it (issue 32). Cancel and kill signal it
  // by this identity, never a reused PID, and spool-follow knows it with its job directory gone.
  std::optional<DetachedAgent> detached_agent;
};

// Sends `signo` to the detached agent whose job directory is `job_dir` (by DIR/agent.pid, when that
// process is still a ringmaster-node); false when there is none.
bool signalDetachedAgent(const std::string& job_dir, int signo);

// The one rule for "is this host this machine": named localhost, 127.0.0.1 or ::1, with no SSH
// port, user or identity file (any of those asks for SSH, even to this machine).
bool isLocalHost(const LaunchHostSpec& host);
// A job that LocalLauncher runs: exactly one host, and that host local. Every other job goes over
// SSH to every one of its hosts (the CLI, the window and the run session all ask this), but a
// Slurm job (launch.slurm), which goes to the scheduler: never local.
bool runsLocally(const LaunchSpec& launch);

// The ringmaster-node beside this executable (the same build), or RINGMASTER_NODE when set.
// Throws kUnavailable naming the path when it is not there.
std::string defaultNodeBinary();

class LocalLauncher final : public Launch {
 public:
  // Starts the agent; throws kUnavailable when it cannot be executed.
  explicit LocalLauncher(const LocalLaunchOptions& options);
  // A still running agent is killed and reaped, with every process of its session (an error, a
  // window closed mid-run); a followed detached agent is left running.
  ~LocalLauncher() override;

  bool pump(std::chrono::milliseconds timeout, const LaunchSink& sink) override;
  void cancel() override;
  void kill() override;
  ExitStatus wait() override;

  pid_t agentPid() const { return agent_.pid(); }

 private:
  // SIGTERM to the followed detached agent: by its recorded identity, else by its PID file.
  void signalFollowedAgent();

  // SIGKILL to every process of the agent's session (it leads one), then to the agent.
  void killAgentSession();
  struct Streams;
  ChildProcess agent_;
  std::unique_ptr<Streams> streams_;
  std::string follow_dir_;  // attached to a detached run: its job directory
  std::optional<DetachedAgent> followed_agent_;
};

}  // namespace ringmaster
