// The node agent, like torchrun's elastic agent for one host: starts the host's workers with the
// torchrun environment, each in a process group of its own, copies their telemetry lines onto one
// stream whole and in order, forwards SIGINT / SIGTERM to the groups, stops the siblings when a
// worker dies and reports that first failure as an `error` event, stops (and names in a warning)
// what a worker leaves running when its main process ends, and ends everything when its stdin
// closes (the launcher or its SSH link is gone) unless it runs detached: then its lines also go to
// a spool (agent/telemetry_spool.h) and no closed stream stops it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "spec/job_spec.h"

namespace ringmaster {
class TelemetrySpool;
}

namespace ringmaster {

struct AgentOptions {
  JobSpec spec;
  int node_rank = 0;  // this host's index in spec.launch.hosts
  int nnodes = 1;     // must equal spec.launch.hosts.size()
  // Rank 0's rendezvous store: MASTER_ADDR / MASTER_PORT of the workers. Node 0's agent hosts it
  // (TORCHELASTIC_USE_AGENT_STORE), so it outlives any worker; port 0 there takes the spec's
  // launch.master_port, whose 0 picks a free port.
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  // How a worker is started: `worker_command` then RANK etc. in its environment.
  std::vector<std::string> worker_command;
  // A program job's worker (the user's script): where it starts ("": the agent's directory), the
  // environment added beside torchrun's, and its telemetry channel, a pipe at this descriptor
  // number (-1: the engine's worker, whose stdout is its telemetry). With a channel, the worker's
  // stdout and stderr are both log lines, each prefixed "[rank N] " as the engine's are.
  std::string worker_directory;
  std::vector<std::pair<std::string, std::string>> worker_environment;
  int worker_telemetry_fd = -1;
  // The workers host their own rendezvous store (torch.distributed's TCPStore on rank 0, whose
  // protocol is not Ringmaster's): node 0's agent only chooses the port, when it is 0, and says
  // it as it would its own store's; TORCHELASTIC_USE_AGENT_STORE is left out.
  bool workers_host_store = false;
  std::string host;  // this host's name, for the error event
  std::chrono::milliseconds grace{std::chrono::seconds(5)};  // TERM to KILL
  int input_fd = 0;   // watched for end of file; -1: not watched
  int output_fd = 1;  // the workers' telemetry lines, and the agent's own events; -1: none
  int log_fd = 2;     // the workers' stderr lines, and the agent's own messages; -1: none
  // A detached run (ringmaster run --detach): every line also goes to this spool, and a broken
  // output no longer stops the workers (nobody reads it); null: not detached.
  TelemetrySpool* spool = nullptr;
  // When set, the PIDs of the workers are appended here, one per line, as they are started (each
  // attempt's), so that `ringmaster cancel` can check none is left.
  std::string workers_pid_file;
  // Make the agent the subreaper of the workers' descendants (PR_SET_CHILD_SUBREAPER), so that a
  // process that left its worker's process group (setsid, a daemon) comes back to it as an orphan
  // and is named and stopped when the workers end. Only for an agent that is a process of its own
  // (ringmaster-node agent): every child it did not start is then such an orphan.
  bool adopt_orphans = false;
};

// How the agent's run ended, also its exit code.
enum class AgentOutcome : int {
  kCompleted = 0,
  kFailed = 1,          // a worker failed; the others were stopped
  kLauncherGone = 129,  // stdin closed or stdout broken: everything was stopped
  kCancelled = 130,     // SIGINT / SIGTERM reached the agent and was forwarded
};

// The torchrun environment of the worker with local rank `local_rank` on `options.node_rank`.
std::vector<std::pair<std::string, std::string>> workerEnvironment(const AgentOptions& options,
                                                                   int master_port, int local_rank);

// What runs a program job's script on this host (the descriptor its telemetry goes to, the
// environment the `ringmaster` Python package reads, the working directory), given the spec's
// program section, the directory of the spec file the agent was given (an uploaded workdir lies
// there, in "program/"), and the reporter package's folder (put first on PYTHONPATH). Throws
// kUnavailable when the interpreter is not on this host.
struct ProgramWorker {
  std::vector<std::string> command;
  std::string directory;
  std::vector<std::pair<std::string, std::string>> environment;
  int telemetry_fd = 3;
  bool hosts_store = true;  // AgentOptions::workers_host_store
};
ProgramWorker programWorker(const JobSpec& spec, const std::string& spec_directory,
                            const std::string& package_directory);

// Runs the host's workers to the end. Returns only when every worker has been reaped, and what each
// left in its process group (or, with `adopt_orphans`, anywhere) has been stopped: SIGTERM when
// its main process ends, SIGKILL after the grace period, each process named (PID and command) in a
// `log` event of level warn of its rank; its pipes are read for the grace period at most. Throws
// kInvalidArgument for options that do not fit the spec, and kIo / kSpec for a launch.env_file
// that cannot be read or is malformed (agent/env_file.h), before anything is started. Every
// worker's environment: the agent's own, then `worker_environment`, then the job's (launch.env,
// then the env file's: a PYTHONPATH appended to the program's), then workerEnvironment()'s,
// whose defaults (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS) yield to the job's.
AgentOutcome runAgent(const AgentOptions& options);

}  // namespace ringmaster
