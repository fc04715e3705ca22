// A program run by a test: ringmaster::ChildProcess with its stdout and stderr read into strings, a
// time limit after which it is killed by PID, and the reaping the real class guarantees, so no test
// leaves a process behind.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <map>
#include <string>
#include <vector>

#include "process/child_process.h"

namespace ringmaster::testing {

class CapturedProcess {
 public:
  CapturedProcess(const std::string& program, const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env = {})
      : child_(options(program, args, env)) {}

  pid_t pid() const { return child_.pid(); }
  void signal(int signo) { child_.signal(signo); }
  void closeStdin() { child_.closeStdin(); }
  // The status once the child was reaped by wait().
  const std::optional<ExitStatus>& status() const { return child_.status(); }

  // Reads output until stdout holds `needle` or the time limit passes; returns whether it appeared.
  bool waitForOutput(const std::string& needle, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (stdout_.find(needle) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline || !pump(50)) return false;
    }
    return true;
  }

  // Reads output for `duration` (less if both streams end).
  void readFor(std::chrono::milliseconds duration) {
    const auto deadline = std::chrono::steady_clock::now() + duration;
    while (std::chrono::steady_clock::now() < deadline && pump(10)) {
    }
  }

  // Reads everything until the child exits (killing it after `limit`); returns how it ended.
  ExitStatus wait(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (pump(50)) {
      if (std::chrono::steady_clock::now() > deadline && !timed_out_) {
        child_.signal(SIGKILL);
        timed_out_ = true;
      }
    }
    return child_.wait();
  }

  bool timedOut() const { return timed_out_; }
  const std::string& out() const { return stdout_; }
  const std::string& err() const { return stderr_; }

 private:
  static ChildOptions options(const std::string& program, const std::vector<std::string>& args,
                              const std::map<std::string, std::string>& env) {
    ChildOptions o;
    o.argv.push_back(program);
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.environment = env;
    o.stdin_mode = StreamMode::kPipe;
    return o;
  }

  // Polls both pipes once; false when both have reached end of file.
  bool pump(int timeout_ms) {
    int out_fd = child_.stdoutFd(), err_fd = child_.stderrFd();
    if (out_fd < 0 && err_fd < 0) return false;
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    ::poll(fds, 2, timeout_ms);
    readInto(out_fd, fds[0].revents, stdout_);
    readInto(err_fd, fds[1].revents, stderr_);
    return child_.stdoutFd() >= 0 || child_.stderrFd() >= 0;
  }

  void readInto(int fd, short revents, std::string& sink) {
    if (fd < 0 || (revents & (POLLIN | POLLHUP | POLLERR)) == 0) return;
    char buffer[65536];
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      sink.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      child_.closeOutput(fd);
    }
  }

  ChildProcess child_;
  bool timed_out_ = false;
  std::string stdout_, stderr_;
};

// Whether the child ended with `code` (not by a signal).
inline bool exitedWith(const ExitStatus& status, int code) {
  return status.signal == 0 && status.exit_code == code;
}

}  // namespace ringmaster::testing
