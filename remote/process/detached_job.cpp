// A detached job's processes found by the recorded agent's session and stopped by identity.
#include "process/detached_job.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <thread>

#include <fmt/format.h>

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;

// Whether `session` is still the detached job's: the agent runs in it, or no process has the
// session's id as its PID (the agent's parent made the session and exited at once; the id stays
// taken while a process is in the session, so a process with that PID is someone else's).
bool sessionIsTheJobs(const DetachedAgent& agent) {
  if (agent.session <= 0 || agent.process.boot_id != bootId()) return false;
  if (identityRuns(agent.process)) return true;
  return !readProcessStat(agent.session).has_value();
}

void addOnce(std::vector<ProcessIdentity>& processes, const ProcessIdentity& process) {
  const bool known = std::any_of(processes.begin(), processes.end(),
                                 [&](const auto& known) { return known.pid == process.pid; });
  if (!known) processes.push_back(process);
}

}  // namespace

std::string detachedAgentLine(const DetachedAgent& agent, const std::string& job_dir) {
  return fmt::format(
      "[agent node {}] detached: pid {}, start time {}, session {}, boot {}, job directory {}",
      agent.node_rank, agent.process.pid, agent.process.start_time, agent.session,
      agent.process.boot_id.empty() ? "-" : agent.process.boot_id, job_dir);
}

std::optional<DetachedAgent> parseDetachedAgentLine(std::string_view line) {
  const std::string text(line.substr(0, 256));
  int node = 0, consumed = 0;
  long long pid = 0, session = 0;
  unsigned long long start = 0;
  char boot[65] = {};
  if (std::sscanf(text.c_str(),
                  "[agent node %d] detached: pid %lld, start time %llu, session %lld, boot "
                  "%64[0-9a-f-], job directory %n",
                  &node, &pid, &start, &session, boot, &consumed) != 5 ||
      consumed == 0 || pid <= 0 || session <= 0 || node < 0)
    return std::nullopt;
  return DetachedAgent{.node_rank = node,
                       .process = {.pid = static_cast<pid_t>(pid),
                                   .start_time = start,
                                   .boot_id = std::string(boot) == "-" ? "" : std::string(boot)},
                       .session = static_cast<pid_t>(session)};
}

std::optional<DetachedAgent> detachedAgentOf(const std::string& job_dir, int node_rank) {
  std::ifstream file(job_dir + "/agent.pid");
  long long pid = 0;
  if (!(file >> pid) || pid <= 0) return std::nullopt;
  const std::optional<ProcessStat> stat = readProcessStat(static_cast<pid_t>(pid));
  if (!stat || stat->state == 'Z') return std::nullopt;
  return DetachedAgent{.node_rank = node_rank,
                       .process = {.pid = static_cast<pid_t>(pid),
                                   .start_time = stat->start_time,
                                   .boot_id = bootId()},
                       .session = stat->session};
}

std::vector<ProcessIdentity> detachedJobProcesses(const DetachedAgent& agent,
                                                  const std::string& job_dir) {
  std::vector<ProcessIdentity> processes;
  if (identityRuns(agent.process)) processes.push_back(agent.process);
  if (!sessionIsTheJobs(agent)) return processes;
  // Every process of the job started after its agent.
  for (const ProcessIdentity& member : sessionIdentities(agent.session))
    if (member.start_time >= agent.process.start_time) addOnce(processes, member);
  std::ifstream workers(job_dir + "/workers.pid");
  for (long long pid = 0; workers >> pid;) {
    const std::optional<ProcessStat> stat = readProcessStat(static_cast<pid_t>(pid));
    if (stat && stat->state != 'Z' && stat->session == agent.session &&
        stat->start_time >= agent.process.start_time)
      addOnce(
          processes,
          {.pid = static_cast<pid_t>(pid), .start_time = stat->start_time, .boot_id = bootId()});
  }
  return processes;
}

std::vector<ProcessIdentity> stopDetachedJob(const DetachedAgent& agent, const std::string& job_dir,
                                             std::chrono::milliseconds grace) {
  const auto waitUntilGone = [&](Clock::time_point deadline) {
    std::vector<ProcessIdentity> left = detachedJobProcesses(agent, job_dir);
    while (!left.empty() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      left = detachedJobProcesses(agent, job_dir);
    }
    return left;
  };
  // The agent stops its workers as a cancel asks; without it, each process is asked itself.
  if (!signalIdentity(agent.process, SIGTERM))
    for (const ProcessIdentity& process : detachedJobProcesses(agent, job_dir))
      signalIdentity(process, SIGTERM);
  std::vector<ProcessIdentity> left = waitUntilGone(Clock::now() + grace + std::chrono::seconds(5));
  if (left.empty()) return left;
  for (const ProcessIdentity& process : left) signalIdentity(process, SIGKILL);
  return waitUntilGone(Clock::now() + std::chrono::seconds(10));
}

}  // namespace ringmaster
