// The node agent's event loop: one poll() over its stdin, a self-pipe for signals, and each
// worker's stdout and stderr; workers are reaped by PID as they end.
#include "agent/node_agent.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "agent/env_file.h"
#include "agent/telemetry_spool.h"
#include "agent/worker_lines.h"
#include "comm/tcp_store.h"
#include "core/error.h"
#include "process/child_process.h"
#include "process/process_tree.h"
#include "telemetry/codec.h"

namespace ringmaster {

namespace {

// Whether process `pid` is stopped (state T or t in /proc/<pid>/stat: SIGSTOP, a debugger).
bool processIsStopped(pid_t pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t name_end = text.rfind(')');  // the command name may hold spaces and parentheses
  if (name_end == std::string::npos || name_end + 2 >= text.size()) return false;
  const char state = text[name_end + 2];
  return state == 'T' || state == 't';
}

using Clock = std::chrono::steady_clock;
constexpr auto kPollPeriod = std::chrono::milliseconds(20);
// After a worker's grace period, how long its pipes are still read (what SIGKILL ended closes
// them meanwhile); then a process that left its group holds them, and they are given up.
constexpr auto kPipeMargin = std::chrono::milliseconds(200);

// Signals reach the loop through this pipe (the handler only writes the signal number).
int g_signal_pipe[2] = {-1, -1};

void onSignal(int signo) {
  const int saved = errno;
  const char byte = static_cast<char>(signo);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

// Installs the handlers for the agent's lifetime and restores the previous ones after.
class SignalForwarding {
 public:
  SignalForwarding() {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
      RM_THROW(kIo, fmt::format("agent: cannot make the signal pipe: {}", std::strerror(errno)));
    struct sigaction action = {};
    action.sa_handler = onSignal;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &action, &previous_[i]);
  }
  ~SignalForwarding() {
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  int fd() const { return g_signal_pipe[0]; }

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction previous_[3];
};

// Writes all of `data`; false when the reader has gone or the descriptor failed.
bool writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 100);
        continue;
      }
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void setNonBlocking(int fd) {
  if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

double unixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A worker process, its descriptors' lines, and what its telemetry said (WorkerTelemetryState).
struct Worker : WorkerTelemetryState {
  int rank = 0;
  int local_rank = 0;
  std::unique_ptr<ChildProcess> process;
  LineSplitter out;
  LineSplitter err;
  LineSplitter telemetry;  // a program worker's own channel
  bool stopped_by_agent = false;
  bool killed_after_grace = false;   // SIGTERM went unheeded for the grace period: hung or stopped
  bool stopped_when_killed = false;  // and it was stopped (SIGSTOP, a debugger), by /proc
  bool reported = false;             // the agent's closing events for it were written
  // Once its main process has ended, what it left in its process group is stopped (SIGTERM, then
  // SIGKILL after the grace period), and its pipes are read until then at most.
  std::optional<Clock::time_point> ended_at;
  bool group_pending = false;  // SIGTERM went to processes it left in its group
};

class Agent {
 public:
  Agent(const AgentOptions& options, std::map<std::string, std::string> job_environment)
      : options_(options), job_environment_(std::move(job_environment)) {}

  AgentOutcome run();

 private:
  void startStore();
  void startWorkers();
  void message(const std::string& text);
  // One line out: to the output (telemetry) or log descriptor, and to the spool when detached.
  void writeTelemetry(const std::string& line, std::optional<int> rank, uint64_t seq);
  void writeLog(const std::string& line);
  void emit(Worker& worker, EventBody body);
  // What a worker's descriptor carries (agent/worker_lines.h).
  using Stream = WorkerStream;
  void readFrom(Worker& worker, int fd, LineSplitter& splitter, Stream stream);
  void readAll(Worker& worker);
  void stopAll(int signo, const char* reason);
  void reap();
  // What a worker leaves when its main process ends: the rest of its process group is stopped,
  // its pipes are given up after the grace period, and each process found is named in a warning
  // of its rank. With the subreaper flag, the orphans that left the group (setsid, a daemon) come
  // to the agent and are stopped once every worker has ended.
  void warn(Worker& worker, const std::string& text);
  void stopWhatWorkersLeft();
  void stopGroupLeftovers(Worker& worker, int signo);
  void abandonPipes(Worker& worker);
  void stopAdoptedOrphans();
  Worker& workerOfRank(std::optional<int> rank);
  void report(Worker& worker);
  // Restarts (launch.max_restarts), coordinated through node 0's store as torchrun's agents do:
  // the first agent to see a worker fail in attempt n sets that attempt's failure key, every
  // agent watching it stops its workers, and once all have stopped (a barrier per attempt) each
  // starts its workers again as attempt n + 1. A program job runs on one host (its workers host
  // their own store): its agent restarts on its own failures, with nothing to coordinate.
  void connectRestartStore();
  std::string attemptKey(const char* what) const;
  void announceFailure();
  void watchForFailureElsewhere();
  // Whether the attempt failed on some host and every host has stopped it (the barrier).
  bool everyHostStoppedAFailedAttempt(int signal_fd, bool& input_open);
  // After every worker of the attempt has been reaped: true when they were started again.
  bool restartAfterAttempt(int signal_fd, bool& input_open);

  const AgentOptions& options_;
  std::map<std::string, std::string> job_environment_;  // launch.env, then launch.env_file
  std::unique_ptr<TcpStore> store_;
  int master_port_ = 0;
  std::vector<Worker> workers_;
  bool output_broken_ = false;
  bool launcher_gone_ = false;
  bool cancelled_ = false;
  std::optional<size_t> first_failure_;
  std::optional<Clock::time_point> kill_deadline_;
  std::unique_ptr<TcpStore> restart_client_;  // nodes other than 0: a client of node 0's store
  bool restarts_ = false;                     // max_restarts > 0, and the store (if any) answers
  Store* restart_store_ = nullptr;            // null: no restarts, or nothing to coordinate
  int attempt_ = 0;                           // TORCHELASTIC_RESTART_COUNT of the workers
  bool failed_elsewhere_ = false;             // another host's worker failed in this attempt
  int store_ticks_ = 0;                       // the failure key is looked at every few loop turns
  bool subreaper_ = false;                    // orphans of the workers' descendants come here
};

void Agent::message(const std::string& text) {
  writeLog(fmt::format("[agent node {}] {}", options_.node_rank, text));
}

void Agent::writeLog(const std::string& line) {
  if (options_.log_fd >= 0) writeAll(options_.log_fd, line + "\n");
  if (options_.spool == nullptr) return;
  if (const std::string report = options_.spool->appendLog(line); !report.empty()) {
    if (options_.log_fd >= 0) writeAll(options_.log_fd, report + "\n");
    options_.spool->appendLog(report);
  }
}

void Agent::writeTelemetry(const std::string& line, std::optional<int> rank, uint64_t seq) {
  if (options_.spool != nullptr) {
    if (const std::string report = options_.spool->appendTelemetry(line, rank, seq);
        !report.empty())
      writeLog(report);
  }
  if (options_.output_fd < 0 || output_broken_) return;
  // Nobody may read a detached agent's output any more: that stops nothing.
  if (!writeAll(options_.output_fd, line + "\n") && options_.spool == nullptr)
    output_broken_ = true;
}

// A TCP port free on `address` now (bound and released: the workers' rank 0 binds it moments
// later, as torchrun's own free-port choice does).
int freePort(const std::string& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.c_str(), "0", &hints, &found) != 0 || found == nullptr)
    RM_THROW(kComm, fmt::format("agent: cannot resolve {} to choose a port", address));
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool bound = fd >= 0 && ::bind(fd, found->ai_addr, found->ai_addrlen) == 0;
  ::freeaddrinfo(found);
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  const bool named = bound && ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (!named)
    RM_THROW(kComm, fmt::format("agent: cannot choose a free port on {}: {}", address,
                                std::strerror(error)));
  return ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
}

void Agent::startStore() {
  master_port_ = options_.master_port;
  if (options_.node_rank != 0) return;
  if (options_.workers_host_store) {
    master_port_ = options_.master_port != 0               ? options_.master_port
                   : options_.spec.launch.master_port != 0 ? options_.spec.launch.master_port
                                                           : freePort(options_.master_addr);
    // In the words the launchers read the port from; the store itself is rank 0's.
    message(fmt::format("rendezvous store on {}:{}", options_.master_addr, master_port_));
    message("(hosted by rank 0's torch.distributed: a program job's workers bring their own)");
    return;
  }
  TcpStoreOptions store;
  store.host = options_.master_addr;
  // A port given on the command line (--master) wins; else the spec's launch.master_port, whose
  // 0 lets the system pick a free one.
  store.port = options_.master_port != 0 ? options_.master_port : options_.spec.launch.master_port;
  store.is_server = true;
  store.timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options_.spec.launch.timeout_s * 1000));
  store_ = std::make_unique<TcpStore>(store);
  master_port_ = store_->port();
  message(fmt::format("rendezvous store on {}:{}", options_.master_addr, master_port_));
}

void Agent::startWorkers() {
  const int local_ranks = ranksOnNode(options_.spec, options_.node_rank);
  for (int local = 0; local < local_ranks; ++local) {
    ChildOptions child;
    child.argv = options_.worker_command;
    for (const auto& [name, value] : options_.worker_environment) child.environment[name] = value;
    // The job's variables win over the program's (a PYTHONPATH is put after the reporter
    // package's) and over the agent's defaults (OMP_NUM_THREADS); the names Ringmaster sets are
    // refused in them (checkEnvName), so torchrun's always hold.
    for (const auto& [name, value] : job_environment_) {
      auto program = child.environment.find(name);
      if (name == "PYTHONPATH" && program != child.environment.end())
        program->second += ":" + value;
      else
        child.environment[name] = value;
    }
    for (auto& [name, value] : workerEnvironment(options_, master_port_, local)) {
      if (!job_environment_.contains(name)) child.environment[name] = value;
    }
    child.environment["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt_);
    child.stdin_mode = StreamMode::kNull;
    child.working_directory = options_.worker_directory;
    child.telemetry_fd = options_.worker_telemetry_fd;
    child.own_process_group = true;
    Worker worker;
    worker.local_rank = local;
    worker.rank = firstRankOnNode(options_.spec, options_.node_rank) + local;
    worker.process = std::make_unique<ChildProcess>(child);
    setNonBlocking(worker.process->stdoutFd());
    setNonBlocking(worker.process->stderrFd());
    setNonBlocking(worker.process->telemetryFd());
    workers_.push_back(std::move(worker));
  }
  message(fmt::format("started {} workers, ranks {}..{}", workers_.size(), workers_.front().rank,
                      workers_.back().rank));
  if (!options_.workers_pid_file.empty()) {
    // Owner-only, as every file holding PIDs (a failed write loses only what `cancel` finds by
    // the agent's session anyway).
    std::string pids;
    for (const Worker& worker : workers_) pids += fmt::format("{}\n", worker.process->pid());
    const int fd =
        ::open(options_.workers_pid_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::fchmod(fd, 0600);
      [[maybe_unused]] const ssize_t written = ::write(fd, pids.data(), pids.size());
      ::close(fd);
    }
  }
}

void Agent::emit(Worker& worker, EventBody body) {
  TelemetryEvent event{worker.rank, worker.next_seq++, unixSeconds(), std::move(body)};
  writeTelemetry(encodeEvent(event), event.rank, event.seq);
}

void Agent::readFrom(Worker& worker, int fd, LineSplitter& splitter, Stream stream) {
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // At the end of the stream the worker has exited (or closed it).
    if (n > 0) splitter.feed({buffer, static_cast<size_t>(n)});
    takeWorkerLines(splitter, stream, worker.rank, n <= 0, worker, [&](WorkerLine line) {
      switch (line.kind) {
        case WorkerLine::Kind::kTelemetry:
          // Each line goes out in one piece: the agent is the stream's only writer.
          writeTelemetry(line.text, line.rank, line.seq);
          break;
        case WorkerLine::Kind::kLog:
          writeLog(line.text);
          break;
        case WorkerLine::Kind::kAgentMessage:
          message(line.text);
          break;
      }
    });
    if (n <= 0) {
      worker.process->closeOutput(fd);
      return;
    }
  }
}

void Agent::readAll(Worker& worker) {
  ChildProcess& process = *worker.process;
  const bool own_channel = options_.worker_telemetry_fd >= 0;
  if (process.stdoutFd() >= 0) {
    readFrom(worker, process.stdoutFd(), worker.out,
             own_channel ? Stream::kPrefixedLog : Stream::kTelemetry);
  }
  if (process.stderrFd() >= 0) {
    readFrom(worker, process.stderrFd(), worker.err,
             own_channel ? Stream::kPrefixedLog : Stream::kLog);
  }
  if (process.telemetryFd() >= 0)
    readFrom(worker, process.telemetryFd(), worker.telemetry, Stream::kTelemetry);
}

void Agent::stopAll(int signo, const char* reason) {
  message(fmt::format("{}: sending {} to the workers", reason, signalName(signo)));
  for (Worker& worker : workers_) {
    if (worker.process->status()) {
      // Its script has ended; what it left is being stopped, at once on a second stop signal.
      if (worker.group_pending && signo == SIGKILL) {
        worker.process->signalGroup(SIGKILL);
        worker.group_pending = false;
      }
      continue;
    }
    worker.stopped_by_agent = true;
    worker.process->signalGroup(signo);
  }
  if (!kill_deadline_) kill_deadline_ = Clock::now() + options_.grace;
}

void Agent::warn(Worker& worker, const std::string& text) {
  message("warning: " + text);
  emit(worker, LogEvent{.level = LogLevel::kWarn, .message = text});
}

void Agent::stopWhatWorkersLeft() {
  const auto now = Clock::now();
  for (Worker& worker : workers_) {
    if (!worker.process->status()) continue;
    if (!worker.ended_at) {
      worker.ended_at = now;
      stopGroupLeftovers(worker, SIGTERM);
      continue;
    }
    const bool grace_over = now >= *worker.ended_at + options_.grace;
    if (worker.group_pending) {
      if (processGroupMembers(worker.process->pid()).empty())
        worker.group_pending = false;
      else if (grace_over)
        stopGroupLeftovers(worker, SIGKILL);
    }
    // A moment more for what SIGKILL just ended to close them.
    if (now >= *worker.ended_at + options_.grace + kPipeMargin) abandonPipes(worker);
  }
}

void Agent::stopGroupLeftovers(Worker& worker, int signo) {
  const std::vector<ProcessInfo> left = processGroupMembers(worker.process->pid());
  worker.group_pending = !left.empty() && signo == SIGTERM;
  if (left.empty()) return;
  if (signo == SIGTERM) {
    warn(worker, fmt::format("rank {}'s script (pid {}) on {} ended, leaving {} process{} in its "
                             "process group: {}; sending SIGTERM",
                             worker.rank, worker.process->pid(), options_.host, left.size(),
                             left.size() == 1 ? "" : "es", describeProcesses(left)));
  } else {
    warn(worker, fmt::format("rank {}: still running {} ms after SIGTERM, killed with SIGKILL: {}",
                             worker.rank, options_.grace.count(), describeProcesses(left)));
  }
  worker.process->signalGroup(signo);
}

void Agent::abandonPipes(Worker& worker) {
  ChildProcess& process = *worker.process;
  const std::pair<int, const char*> pipes[] = {{process.stdoutFd(), "stdout"},
                                               {process.stderrFd(), "stderr"},
                                               {process.telemetryFd(), "telemetry channel"}};
  for (const auto& [fd, name] : pipes) {
    if (fd < 0) continue;
    warn(worker, fmt::format("rank {}: its {} is still held open {} ms after its script ended "
                             "(by a process it started that left its process group); no longer "
                             "read",
                             worker.rank, name, (options_.grace + kPipeMargin).count()));
    process.closeOutput(fd);
  }
}

Worker& Agent::workerOfRank(std::optional<int> rank) {
  for (Worker& worker : workers_) {
    if (rank && worker.rank == *rank) return worker;
  }
  return workers_.front();
}

void Agent::stopAdoptedOrphans() {
  if (!subreaper_) return;
  // Every worker has been reaped: each child of the agent now is an orphan it adopted. They are
  // its own children, so their PIDs cannot be reused until it reaps them.
  const auto kill_at = Clock::now() + options_.grace;
  std::set<pid_t> terminated, killed;
  for (;;) {
    std::vector<ProcessInfo> live;
    for (const ProcessInfo& child : adoptedChildren({})) {
      if (child.zombie)
        ::waitpid(child.pid, nullptr, WNOHANG);
      else
        live.push_back(child);
    }
    if (live.empty()) return;
    const bool grace_over = Clock::now() >= kill_at;
    for (const ProcessInfo& child : live) {
      if (terminated.insert(child.pid).second) {
        const std::optional<int> rank = rankInEnvironment(child.pid);
        warn(workerOfRank(rank),
             fmt::format("{} left process {} ({}) on {} running outside its process group (a "
                         "daemon, or setsid); sending SIGTERM",
                         rank ? fmt::format("rank {}'s script", *rank) : "a worker", child.pid,
                         child.command, options_.host));
        ::kill(child.pid, SIGTERM);
      } else if (grace_over && killed.insert(child.pid).second) {
        message(fmt::format("process {} still running {} ms after SIGTERM: SIGKILL", child.pid,
                            options_.grace.count()));
        ::kill(child.pid, SIGKILL);
      }
    }
    // Bounded: a process that even SIGKILL does not end (uninterruptible sleep) is left named.
    if (Clock::now() >= kill_at + options_.grace) return;
    std::this_thread::sleep_for(kPollPeriod);
  }
}

void Agent::reap() {
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& worker = workers_[i];
    if (worker.process->status()) continue;
    std::optional<ExitStatus> status = worker.process->poll();
    if (!status || status->ok()) continue;
    const bool expected = worker.stopped_by_agent && (status->exit_code == 130 || status->signal);
    if (!expected && !cancelled_ && !launcher_gone_ && !first_failure_ && !failed_elsewhere_) {
      first_failure_ = i;
      message(fmt::format("rank {} {}", worker.rank, status->describe()));
      announceFailure();
      stopAll(SIGTERM, "a worker failed");
    }
  }
}

void Agent::report(Worker& worker) {
  worker.reported = true;
  const ExitStatus status = *worker.process->status();
  const bool is_first_failure = first_failure_ && &workers_[*first_failure_] == &worker;
  if (is_first_failure) {
    ErrorEvent error;
    error.message =
        fmt::format("rank {} (pid {}) on {} {} after step {}", worker.rank, worker.process->pid(),
                    options_.host, status.describe(), worker.last_step);
    error.kind = "worker failed";
    error.where = "agent";
    error.step = worker.last_step;
    error.fatal = true;
    error.host = options_.host;
    if (status.signal)
      error.signal = signalName(status.signal);
    else
      error.exit_code = status.exit_code;
    emit(worker, error);
  }
  // Stopped because another rank failed, it did not stop when asked: it hung (or was stopped,
  // SIGSTOP), which is what the others' collectives timed out waiting for.
  const bool hung = worker.killed_after_grace && !worker.done_seen && !cancelled_ &&
                    !launcher_gone_ && !is_first_failure;
  if (hung) {
    emit(worker,
         ErrorEvent{.message = fmt::format(
                        "rank {} (pid {}) on {} hung{}: still running {} ms after "
                        "SIGTERM, killed with SIGKILL after step {}",
                        worker.rank, worker.process->pid(), options_.host,
                        worker.stopped_when_killed ? " (stopped: SIGSTOP or a debugger)" : "",
                        options_.grace.count(), worker.last_step),
                    .kind = "worker hung",
                    .where = "agent",
                    .step = worker.last_step,
                    .fatal = true,
                    .host = options_.host,
                    .signal = std::string("SIGKILL")});
  }
  if (!worker.done_seen && (is_first_failure || !status.ok())) {
    emit(worker, DoneEvent{.status = hung               ? DoneStatus::kHung
                                     : is_first_failure ? DoneStatus::kFailed
                                                        : DoneStatus::kCancelled,
                           .final_step = worker.last_step,
                           .wall_s = 0});
  }
}

void Agent::connectRestartStore() {
  if (options_.spec.launch.max_restarts == 0) return;
  restarts_ = true;
  if (options_.workers_host_store) return;  // a program job's one host (runAgent checks)
  if (options_.node_rank == 0) {
    restart_store_ = store_.get();
    return;
  }
  TcpStoreOptions client;
  client.host = options_.master_addr;
  client.port = master_port_;
  client.timeout =
      std::chrono::milliseconds(static_cast<int64_t>(options_.spec.launch.timeout_s * 1000));
  restart_client_ = std::make_unique<TcpStore>(client);
  restart_store_ = restart_client_.get();
}

std::string Agent::attemptKey(const char* what) const {
  return fmt::format("ringmaster/agent/attempt_{}/{}", attempt_, what);
}

void Agent::announceFailure() {
  if (restart_store_ == nullptr) return;
  try {
    const std::string node = std::to_string(options_.node_rank);
    restart_store_->set(attemptKey("failed"), Bytes(node.begin(), node.end()));
  } catch (const Error& e) {
    message(
        fmt::format("cannot tell the other hosts of the failure (no restart): {}", e.message()));
    restart_store_ = nullptr;
    restarts_ = false;
  }
}

void Agent::watchForFailureElsewhere() {
  if (restart_store_ == nullptr || first_failure_ || failed_elsewhere_ || cancelled_ ||
      launcher_gone_ || ++store_ticks_ % 5 != 0) {
    return;
  }
  try {
    if (!restart_store_->check({attemptKey("failed")})) return;
  } catch (const Error& e) {
    message(fmt::format("node 0's store is unreachable (no restart): {}", e.message()));
    restart_store_ = nullptr;
    restarts_ = false;
    return;
  }
  failed_elsewhere_ = true;
  stopAll(SIGTERM, fmt::format("a worker failed on another host in attempt {}", attempt_).c_str());
}

bool Agent::everyHostStoppedAFailedAttempt(int signal_fd, bool& input_open) {
  try {
    // Completed here, it may still have failed on another host (after the last collective).
    if (!first_failure_ && !failed_elsewhere_ && !restart_store_->check({attemptKey("failed")}))
      return false;
    if (attempt_ >= options_.spec.launch.max_restarts) return true;  // no barrier: no restart
    // Every host's workers have stopped before any starts again: no worker of attempt n + 1
    // meets one of attempt n in a collective.
    const std::string stopped = attemptKey("stopped");
    restart_store_->add(stopped, 1);
    const auto deadline =
        Clock::now() +
        std::chrono::milliseconds(static_cast<int64_t>(options_.spec.launch.timeout_s * 1000));
    while (restart_store_->add(stopped, 0) < options_.nnodes) {
      char signal_bytes[16];
      if (::read(signal_fd, signal_bytes, sizeof signal_bytes) > 0) {
        cancelled_ = true;
        message("stop requested while waiting to restart");
        return false;
      }
      pollfd input{options_.input_fd, POLLIN, 0};
      if (input_open && ::poll(&input, 1, 0) > 0) {
        char discard[256];
        const ssize_t n = ::read(options_.input_fd, discard, sizeof discard);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
          input_open = false;
          launcher_gone_ = true;
          message("stdin closed (the launcher has gone) while waiting to restart");
          return false;
        }
      }
      if (Clock::now() >= deadline) {
        message(fmt::format("not every host stopped attempt {} within {} s: no restart", attempt_,
                            options_.spec.launch.timeout_s));
        return false;
      }
      std::this_thread::sleep_for(kPollPeriod);
    }
  } catch (const Error& e) {
    message(fmt::format("node 0's store is unreachable (no restart): {}", e.message()));
    return false;
  }
  return true;
}

bool Agent::restartAfterAttempt(int signal_fd, bool& input_open) {
  if (!restarts_ || cancelled_ || launcher_gone_) return false;
  const bool failed = restart_store_ != nullptr
                          ? everyHostStoppedAFailedAttempt(signal_fd, input_open)
                          : first_failure_.has_value();
  if (!failed) return false;
  const int max_restarts = options_.spec.launch.max_restarts;
  if (attempt_ >= max_restarts) {
    message(fmt::format("attempt {} failed; no restart left (launch.max_restarts {})", attempt_,
                        max_restarts));
    return false;
  }
  ++attempt_;
  message(fmt::format("restarting every worker as attempt {} (of at most {} restarts)", attempt_,
                      max_restarts));
  workers_.clear();
  first_failure_.reset();
  kill_deadline_.reset();
  failed_elsewhere_ = false;
  startWorkers();
  return true;
}

AgentOutcome Agent::run() {
  SignalForwarding signals;
  subreaper_ = options_.adopt_orphans && becomeSubreaper();
  startStore();
  connectRestartStore();
  startWorkers();
  bool input_open = options_.input_fd >= 0;
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({signals.fd(), POLLIN, 0});
    if (input_open) fds.push_back({options_.input_fd, POLLIN, 0});
    for (Worker& worker : workers_) {
      for (int fd : {worker.process->stdoutFd(), worker.process->stderrFd(),
                     worker.process->telemetryFd()}) {
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
      }
    }
    ::poll(fds.data(), fds.size(), static_cast<int>(kPollPeriod.count()));

    char signal_bytes[16];
    ssize_t got;
    while ((got = ::read(signals.fd(), signal_bytes, sizeof signal_bytes)) > 0) {
      for (ssize_t i = 0; i < got; ++i) {
        const int signo = signal_bytes[i] == SIGHUP ? SIGTERM : signal_bytes[i];
        if (cancelled_) {
          stopAll(SIGKILL, "a second stop signal");
        } else {
          cancelled_ = true;
          stopAll(signo, "stop requested");
        }
      }
    }
    if (input_open) {
      for (const pollfd& p : fds) {
        if (p.fd != options_.input_fd || p.revents == 0) continue;
        char discard[256];
        ssize_t n = ::read(options_.input_fd, discard, sizeof discard);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
          input_open = false;
          if (!launcher_gone_) {
            launcher_gone_ = true;
            stopAll(SIGTERM, "stdin closed (the launcher has gone)");
          }
        }
      }
    }
    for (Worker& worker : workers_) readAll(worker);
    if (output_broken_ && !launcher_gone_) {
      launcher_gone_ = true;
      stopAll(SIGTERM, "stdout closed (the launcher has gone)");
    }
    reap();
    stopWhatWorkersLeft();
    watchForFailureElsewhere();
    if (kill_deadline_ && Clock::now() >= *kill_deadline_) {
      for (Worker& worker : workers_) {
        if (worker.process->status()) continue;
        const bool stopped = processIsStopped(worker.process->pid());
        if (worker.process->signalGroup(SIGKILL)) {
          worker.stopped_by_agent = true;
          worker.killed_after_grace = true;
          worker.stopped_when_killed = stopped;
          message(fmt::format("rank {} still running after {} ms: SIGKILL", worker.rank,
                              options_.grace.count()));
        }
      }
      kill_deadline_ = Clock::time_point::max();
    }
    bool all_finished = true;
    for (Worker& worker : workers_) {
      const bool drained = worker.process->stdoutFd() < 0 && worker.process->stderrFd() < 0 &&
                           worker.process->telemetryFd() < 0;
      if (worker.process->status() && drained && !worker.group_pending) {
        if (!worker.reported) report(worker);
      } else {
        all_finished = false;
      }
    }
    if (!all_finished) continue;
    stopAdoptedOrphans();
    if (!restartAfterAttempt(signals.fd(), input_open)) break;
  }
  if (first_failure_ || failed_elsewhere_) return AgentOutcome::kFailed;
  if (launcher_gone_) return AgentOutcome::kLauncherGone;
  if (cancelled_) return AgentOutcome::kCancelled;
  message("all workers completed");
  return AgentOutcome::kCompleted;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> workerEnvironment(const AgentOptions& options,
                                                                   int master_port,
                                                                   int local_rank) {
  const int first_rank = firstRankOnNode(options.spec, options.node_rank);
  const int local_world = ranksOnNode(options.spec, options.node_rank);
  std::vector<std::pair<std::string, std::string>> env = {
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
      {"RANK", std::to_string(first_rank + local_rank)},
      {"WORLD_SIZE", std::to_string(worldSize(options.spec))},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(local_world)},
      {"NODE_RANK", std::to_string(options.node_rank)},
      {"GROUP_RANK", std::to_string(options.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(options.nnodes)},
      {"ROLE_RANK", std::to_string(first_rank + local_rank)},
      {"ROLE_WORLD_SIZE", std::to_string(worldSize(options.spec))},
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(options.spec.launch.max_restarts)},
  };
  if (!options.workers_host_store) env.emplace_back("TORCHELASTIC_USE_AGENT_STORE", "True");
  // As torchrun does: several ranks on one host must not each start a thread per core.
  for (const char* name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    if (std::getenv(name) == nullptr && local_world > 1) env.emplace_back(name, "1");
  }
  return env;
}

ProgramWorker programWorker(const JobSpec& spec, const std::string& spec_directory,
                            const std::string& package_directory) {
  RM_CHECK_ARG(spec.program.has_value(), "programWorker: the spec has no program section");
  const ProgramSpec& program = *spec.program;
  ProgramWorker worker;
  const std::optional<std::string> python = findExecutable(program.python);
  if (!python) {
    RM_THROW(kUnavailable,
             fmt::format("program.python: {} is not on this host's PATH ({})", program.python,
                         std::getenv("PATH") ? std::getenv("PATH") : ""));
  }
  worker.directory = program.upload ? spec_directory + "/program" : program.workdir;
  // The script by its full path where it has one, so that `ps` names the job's processes.
  const std::string script = worker.directory.empty() || program.script.front() == '/'
                                 ? program.script
                                 : worker.directory + "/" + program.script;
  worker.command = {*python, script};
  worker.command.insert(worker.command.end(), program.args.begin(), program.args.end());
  const char* python_path = std::getenv("PYTHONPATH");
  worker.environment = {
      {"RINGMASTER_TELEMETRY_FD", std::to_string(worker.telemetry_fd)},
      {"RINGMASTER_VERSION", std::string(kRingmasterVersion)},
      {"RINGMASTER_STRATEGY", strategyLabel(spec)},
      {"PYTHONPATH", python_path != nullptr && *python_path != '\0'
                         ? package_directory + ":" + python_path
                         : package_directory},
      // The script's prints reach the run's log as they are made, not when a buffer fills.
      {"PYTHONUNBUFFERED", "1"},
  };
  return worker;
}

AgentOutcome runAgent(const AgentOptions& options) {
  const int hosts = nodeCount(options.spec);
  RM_CHECK_ARG(options.nnodes == hosts,
               fmt::format("--nnodes {} does not match the spec's {} {}", options.nnodes, hosts,
                           options.spec.launch.slurm ? "launch.scheduler.nodes" : "launch.hosts"));
  RM_CHECK_ARG(options.node_rank >= 0 && options.node_rank < hosts,
               fmt::format("--node-rank {} is outside 0..{}", options.node_rank, hosts - 1));
  RM_CHECK_ARG(!options.worker_command.empty(), "agent: no worker command");
  RM_CHECK_ARG(options.master_port >= 0 && options.master_port <= 65535,
               fmt::format("--master port {} is outside 0..65535", options.master_port));
  RM_CHECK_ARG(options.node_rank == 0 || options.master_port != 0,
               "--master: only node 0 may leave the port to be chosen (0)");
  RM_CHECK_ARG(
      options.spec.launch.max_restarts == 0 || !options.workers_host_store || options.nnodes == 1,
      "launch.max_restarts: a program job restarts on one host only: its workers host "
      "their own store, which agents on several hosts cannot coordinate a restart "
      "through");
  // Read before anything starts: a bad env_file fails the agent with no worker started.
  return Agent(options, jobEnvironment(options.spec.launch)).run();
}

}  // namespace ringmaster
