// fork/exec with an error pipe (so a failed exec is an exception in the parent, not a silent exit
// 127), PR_SET_PDEATHSIG, and reaping by PID with waitpid.
#include "process/child_process.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

extern char** environ;

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(5);

ExitStatus fromWaitStatus(int status) {
  ExitStatus out;
  if (WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
  } else {
    out.exit_code = WEXITSTATUS(status);
  }
  return out;
}

void closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The parent's environment with `extra` added, names in `extra` replacing the parent's.
std::vector<std::string> mergedEnvironment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> out;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    auto name = text.substr(0, text.find('='));
    if (!extra.contains(std::string(name))) out.emplace_back(text);
  }
  for (const auto& [name, value] : extra) out.push_back(name + "=" + value);
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Makes a pipe for a child's stream; `child_end` is the index the child keeps (0 read, 1 write).
void makePipe(StreamMode mode, int fds[2]) {
  fds[0] = fds[1] = -1;
  if (mode != StreamMode::kPipe) return;
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    RM_THROW(kIo, fmt::format("cannot make a pipe for a child process: {}", std::strerror(errno)));
  }
}

// In the child, between fork and exec: only async-signal-safe calls.
void setUpStream(StreamMode mode, int pipe_fds[2], int child_end, int target) {
  if (mode == StreamMode::kPipe) {
    ::dup2(pipe_fds[child_end], target);
  } else if (mode == StreamMode::kNull) {
    int null_fd = ::open("/dev/null", target == STDIN_FILENO ? O_RDONLY : O_WRONLY);
    if (null_fd >= 0) {
      ::dup2(null_fd, target);
      ::close(null_fd);
    }
  }
}

}  // namespace

std::string signalName(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signo);
}

std::string ExitStatus::describe() const {
  if (signal != 0) return "killed by " + signalName(signal);
  return fmt::format("exit code {}", exit_code);
}

ChildProcess::ChildProcess(const ChildOptions& options) {
  RM_CHECK_ARG(!options.argv.empty(), "a child process needs a program");
  program_ = options.argv.front();
  std::vector<std::string> args = options.argv;
  std::vector<std::string> env = mergedEnvironment(options.environment);
  std::vector<char*> argv = pointers(args);
  std::vector<char*> envp = pointers(env);

  RM_CHECK_ARG(options.telemetry_fd == -1 || options.telemetry_fd >= 3,
               fmt::format("a child's telemetry descriptor must be at least 3, got {}",
                           options.telemetry_fd));
  const char* workdir =
      options.working_directory.empty() ? nullptr : options.working_directory.c_str();
  int in[2], out[2], err[2], telemetry[2], exec_error[2];
  makePipe(options.stdin_mode, in);
  makePipe(options.stdout_mode, out);
  makePipe(options.stderr_mode, err);
  makePipe(options.telemetry_fd >= 0 ? StreamMode::kPipe : StreamMode::kNull, telemetry);
  if (::pipe2(exec_error, O_CLOEXEC) != 0) {
    RM_THROW(kIo, fmt::format("cannot make a pipe for a child process: {}", std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    int error = errno;
    for (int* fds : {in, out, err, telemetry, exec_error}) {
      closeFd(fds[0]);
      closeFd(fds[1]);
    }
    RM_THROW(kUnavailable,
             fmt::format("cannot start {}: fork: {}", program_, std::strerror(error)));
  }
  if (pid_ == 0) {
    if (options.new_session)
      ::setsid();
    else if (options.own_process_group)
      ::setpgid(0, 0);
    if (options.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    }
    setUpStream(options.stdin_mode, in, 0, STDIN_FILENO);
    setUpStream(options.stdout_mode, out, 1, STDOUT_FILENO);
    setUpStream(options.stderr_mode, err, 1, STDERR_FILENO);
    // Nothing the parent left open beyond the standard streams reaches the program (a log file,
    // a socket, a database): every descriptor from 3 up closes at exec. Then the telemetry
    // channel's, which dup2 leaves open across it.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    if (options.telemetry_fd >= 0) ::dup2(telemetry[1], options.telemetry_fd);
    if (workdir != nullptr && ::chdir(workdir) != 0) {
      int error = -errno;  // negative: the directory, not the program
      [[maybe_unused]] auto written = ::write(exec_error[1], &error, sizeof error);
      ::_exit(127);
    }
    // The parent may ignore SIGPIPE or block signals; the program starts with the defaults.
    ::signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    int error = errno;
    [[maybe_unused]] auto written = ::write(exec_error[1], &error, sizeof error);
    ::_exit(127);
  }
  // Set on both sides of the fork, so that the group exists before either signals it.
  own_group_ = options.own_process_group || options.new_session;
  if (options.own_process_group && !options.new_session) ::setpgid(pid_, pid_);
  closeFd(in[0]);
  closeFd(out[1]);
  closeFd(err[1]);
  closeFd(telemetry[1]);
  closeFd(exec_error[1]);
  stdin_fd_ = in[1];
  stdout_fd_ = out[0];
  stderr_fd_ = err[0];
  telemetry_fd_ = telemetry[0];

  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_error[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  closeFd(exec_error[0]);
  if (n == sizeof exec_errno) {
    wait();
    release();
    RM_THROW(kUnavailable,
             exec_errno < 0
                 ? fmt::format("cannot run {}: cannot enter its working directory {}: {}", program_,
                               options.working_directory, std::strerror(-exec_errno))
                 : fmt::format("cannot run {}: {}", program_, std::strerror(exec_errno)));
  }
}

std::optional<std::string> findExecutable(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) {
      struct stat info;
      if (::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode)) return candidate;
    }
    if (colon == std::string_view::npos) return std::nullopt;
    dirs.remove_prefix(colon + 1);
  }
}

ChildProcess::~ChildProcess() {
  release();
}

void ChildProcess::release() {
  if (pid_ > 0 && !status_) {
    if (own_group_) ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    wait();
  }
  closeFd(stdin_fd_);
  closeFd(stdout_fd_);
  closeFd(stderr_fd_);
  closeFd(telemetry_fd_);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept {
  *this = std::move(other);
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = std::exchange(other.pid_, -1);
    program_ = std::move(other.program_);
    own_group_ = std::exchange(other.own_group_, false);
    stdin_fd_ = std::exchange(other.stdin_fd_, -1);
    stdout_fd_ = std::exchange(other.stdout_fd_, -1);
    stderr_fd_ = std::exchange(other.stderr_fd_, -1);
    telemetry_fd_ = std::exchange(other.telemetry_fd_, -1);
    status_ = std::exchange(other.status_, std::nullopt);
  }
  return *this;
}

void ChildProcess::closeStdin() {
  closeFd(stdin_fd_);
}

void ChildProcess::closeOutput(int fd) {
  if (fd >= 0 && fd == stdout_fd_) closeFd(stdout_fd_);
  if (fd >= 0 && fd == stderr_fd_) closeFd(stderr_fd_);
  if (fd >= 0 && fd == telemetry_fd_) closeFd(telemetry_fd_);
}

bool ChildProcess::signal(int signo) {
  if (pid_ <= 0 || status_) return false;
  return ::kill(pid_, signo) == 0;
}

bool ChildProcess::signalGroup(int signo) {
  if (pid_ <= 0 || !own_group_) return false;
  return ::kill(-pid_, signo) == 0;
}

std::optional<ExitStatus> ChildProcess::poll() {
  if (status_ || pid_ <= 0) return status_;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) status_ = fromWaitStatus(status);
  return status_;
}

ExitStatus ChildProcess::wait() {
  if (status_ || pid_ <= 0) return status_.value_or(ExitStatus{});
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  status_ = r == pid_ ? fromWaitStatus(status) : ExitStatus{.exit_code = -1};
  return *status_;
}

std::optional<ExitStatus> ChildProcess::waitFor(std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!poll()) {
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(kPollInterval);
  }
  return status_;
}

ExitStatus ChildProcess::stop(std::chrono::milliseconds grace) {
  if (poll()) return *status_;
  signal(SIGTERM);
  if (auto status = waitFor(grace)) return *status;
  signal(SIGKILL);
  return wait();
}

std::optional<GroupFailure> superviseGroup(std::vector<ChildProcess>& children,
                                           std::chrono::milliseconds grace) {
  std::optional<GroupFailure> failure;
  for (;;) {
    bool all_ended = true;
    for (size_t i = 0; i < children.size(); ++i) {
      auto status = children[i].poll();
      if (!status) {
        all_ended = false;
      } else if (!status->ok() && !failure) {
        failure = GroupFailure{i, *status};
      }
    }
    if (all_ended) return failure;
    if (failure) break;
    std::this_thread::sleep_for(kPollInterval);
  }
  for (auto& child : children) child.signal(SIGTERM);
  const auto deadline = Clock::now() + grace;
  for (auto& child : children) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (!child.waitFor(std::max(left, std::chrono::milliseconds(0)))) {
      child.signal(SIGKILL);
      child.wait();
    }
  }
  return failure;
}

}  // namespace ringmaster
