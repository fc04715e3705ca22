// A detached job's processes on one machine (ringmaster run --detach, issue 21; issue 32): its
// agent as recorded at launch (PID, start time, session), the line its launch says it in, and
// finding and stopping every process of the job whether or not its job directory still exists.
// The agent runs in a session of its own (setsid), and its workers and their children in it, so
// the session finds them all; a PID whose start time is not the recorded one is never taken for
// the agent nor signalled.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "process/process_identity.h"

namespace ringmaster {

// A detached agent as its launch recorded it.
struct DetachedAgent {
  int node_rank = 0;
  ProcessIdentity process;
  pid_t session = 0;  // the session it made; its workers are in it
};

// What `ringmaster-node agent --detach` says once its agent runs:
// "[agent node N] detached: pid P, start time T, session S, boot B, job directory DIR".
std::string detachedAgentLine(const DetachedAgent& agent, const std::string& job_dir);
// The agent a detachedAgentLine names; nullopt for any other line.
std::optional<DetachedAgent> parseDetachedAgentLine(std::string_view line);
// The agent of this machine's detached job whose agent wrote its PID in `job_dir`/agent.pid, as it
// runs now; nullopt when that file or that process is gone.
std::optional<DetachedAgent> detachedAgentOf(const std::string& job_dir, int node_rank);

// The processes of the job that run now: the agent while its PID has its start time, every
// process of its session while that session is still the job's (the agent runs in it, or its
// leader, the agent's parent that exited at once, has no successor: a session id is not reused
// while a process is in it) and the process started after the agent, and the PIDs in
// `job_dir`/workers.pid that are in that session.
std::vector<ProcessIdentity> detachedJobProcesses(const DetachedAgent& agent,
                                                  const std::string& job_dir);

// Stops the job's processes: SIGTERM to the agent (it stops its workers, SIGKILL after its grace;
// with the agent gone, to each process of the job), then, `grace` plus 5 s later, SIGKILL to every
// process of the job still running; returns those still running after that (empty: none is left).
// Bounded: at most `grace` plus 15 s.
std::vector<ProcessIdentity> stopDetachedJob(const DetachedAgent& agent, const std::string& job_dir,
                                             std::chrono::milliseconds grace);

}  // namespace ringmaster
