// The local launcher: the agent's stdout and stderr are read with poll and cut into lines; its
// stdin stays open and unused, the link whose end stops the agent.
#include "launcher/local_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"
#include "launcher/agent_lines.h"
#include "process/process_tree.h"
#include "telemetry/codec.h"

namespace ringmaster {

namespace fs = std::filesystem;

struct LocalLauncher::Streams {
  LineSplitter telemetry;
  LineSplitter log{64 * 1024};
};

bool isLocalHost(const LaunchHostSpec& host) {
  const bool local_name =
      host.host == "localhost" || host.host == "127.0.0.1" || host.host == "::1";
  return local_name && !host.port && !host.user && !host.identity_file;
}

bool runsLocally(const LaunchSpec& launch) {
  return !launch.slurm && launch.hosts.size() == 1 && isLocalHost(launch.hosts[0]);
}

std::string defaultNodeBinary() {
  if (const char* configured = std::getenv("RINGMASTER_NODE"); configured && *configured) {
    if (!fs::exists(configured))
      RM_THROW(kUnavailable, fmt::format("RINGMASTER_NODE={} does not exist", configured));
    return configured;
  }
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  const fs::path beside = self.parent_path() / "ringmaster-node";
  if (error || !fs::exists(beside)) {
    RM_THROW(kUnavailable, fmt::format("ringmaster-node is not beside this executable ({}); "
                                       "build it or set RINGMASTER_NODE",
                                       beside.string()));
  }
  return beside.string();
}

namespace {

ChildOptions agentOptions(const LocalLaunchOptions& options) {
  ChildOptions child;
  if (options.follow_from) {
    RM_CHECK_ARG(!options.job_dir.empty(), "attach: no job directory to follow");
    child.argv = {options.node_binary, "spool-follow", options.job_dir, "--from",
                  *options.follow_from};
    if (const std::optional<DetachedAgent>& agent = options.detached_agent) {
      const std::string& boot = agent->process.boot_id;
      child.argv.insert(
          child.argv.end(),
          {"--agent", fmt::format("{}:{}:{}:{}", agent->process.pid, agent->process.start_time,
                                  agent->session, boot.empty() ? "-" : boot)});
    }
  } else {
    child.argv = {options.node_binary,
                  "agent",
                  "--spec",
                  fs::absolute(options.spec_path).string(),
                  "--grace",
                  fmt::format("{:.3f}", options.grace.count() / 1000.0)};
    if (options.detach) {
      RM_CHECK_ARG(!options.job_dir.empty(), "--detach: no job directory");
      child.argv.insert(child.argv.end(), {"--detach", options.job_dir});
    }
  }
  child.stdin_mode = StreamMode::kPipe;  // its end of file tells the agent to stop everything
  child.stdout_mode = StreamMode::kPipe;
  child.stderr_mode = StreamMode::kPipe;
  // A session of its own: a terminal's Ctrl-C reaches the launcher alone, which cancels, and a
  // kill finds every process of the job there, the workers' own process groups included.
  child.new_session = true;
  return child;
}

}  // namespace

bool signalDetachedAgent(const std::string& job_dir, int signo) {
  std::ifstream file(job_dir + "/agent.pid");
  pid_t pid = 0;
  if (!(file >> pid) || pid <= 0) return false;
  // The PID is the agent's only while that process is a ringmaster-node (not a reused PID).
  std::error_code error;
  const fs::path exe = fs::read_symlink(fmt::format("/proc/{}/exe", pid), error);
  if (error || exe.filename().string().find("ringmaster-node") == std::string::npos) return false;
  return ::kill(pid, signo) == 0;
}

LocalLauncher::LocalLauncher(const LocalLaunchOptions& options)
    : agent_(agentOptions(options)),
      streams_(std::make_unique<Streams>()),
      follow_dir_(options.follow_from ? options.job_dir : std::string()),
      followed_agent_(options.follow_from ? options.detached_agent : std::nullopt) {
  for (int fd : {agent_.stdoutFd(), agent_.stderrFd()})
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

LocalLauncher::~LocalLauncher() {
  if (follow_dir_.empty() && !agent_.poll()) killAgentSession();
}

bool LocalLauncher::pump(std::chrono::milliseconds timeout, const LaunchSink& sink) {
  const int out = agent_.stdoutFd(), err = agent_.stderrFd();
  if (out < 0 && err < 0) return false;
  pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
  const int ready = ::poll(fds, 2, static_cast<int>(timeout.count()));
  if (ready < 0 && errno != EINTR) RM_THROW(kIo, fmt::format("poll: {}", std::strerror(errno)));
  if (out >= 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
      !readAvailableLines(out, streams_->telemetry))
    agent_.closeOutput(out);
  if (err >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
      !readAvailableLines(err, streams_->log))
    agent_.closeOutput(err);
  for (bool from_stdout : {true, false}) {
    LineSplitter& splitter = from_stdout ? streams_->telemetry : streams_->log;
    while (auto line = splitter.next()) {
      deliverAgentLine(
          classifyAgentLine(from_stdout, std::move(*line), splitter.maxLineBytes(), "the agent"),
          sink);
    }
  }
  return agent_.stdoutFd() >= 0 || agent_.stderrFd() >= 0;
}

void LocalLauncher::signalFollowedAgent() {
  if (followed_agent_)
    signalIdentity(followed_agent_->process, SIGTERM);
  else
    signalDetachedAgent(follow_dir_, SIGTERM);  // a run recorded before agents were (issue 32)
}

void LocalLauncher::cancel() {
  if (!follow_dir_.empty()) {
    signalFollowedAgent();  // spool-follow then ends with the agent
    return;
  }
  agent_.signal(SIGTERM);
}

void LocalLauncher::kill() {
  if (!follow_dir_.empty()) {
    signalFollowedAgent();  // its second stop signal: SIGKILL to the workers
    return;
  }
  killAgentSession();
}

void LocalLauncher::killAgentSession() {
  // The agent, its workers and what they started (each worker leads a process group of its own,
  // which the agent's death does not reach), not the agent alone.
  if (!agent_.status()) {
    for (const ProcessInfo& process : sessionMembers(agent_.pid())) ::kill(process.pid, SIGKILL);
  }
  agent_.signal(SIGKILL);
}

ExitStatus LocalLauncher::wait() {
  return agent_.wait();
}

}  // namespace ringmaster
