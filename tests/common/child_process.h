// A child process for tests: runs a program with arguments and extra environment, captures stdout
// and stderr, can be signalled, and is always reaped (killed by PID after a time limit or when the
// handle goes out of scope), so no test leaves a process behind.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace ringmaster::testing {

class ChildProcess {
 public:
  ChildProcess(const std::string& program, const std::vector<std::string>& args,
               const std::map<std::string, std::string>& env = {}) {
    int out[2], err[2];
    if (pipe(out) != 0 || pipe(err) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      close(out[0]);
      close(out[1]);
      close(err[0]);
      close(err[1]);
      for (const auto& [key, value] : env) setenv(key.c_str(), value.c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(program.c_str())};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(program.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
  }

  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int signo) { kill(pid_, signo); }

  // Reads output until stdout holds `needle` or the time limit passes; returns whether it appeared.
  bool waitForOutput(const std::string& needle, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (stdout_.find(needle) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline || !pump(100)) return false;
    }
    return true;
  }

  // Reads everything until the child exits (killing it after `limit`); returns the wait status.
  int wait(std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (pump(100)) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        timed_out_ = true;
      }
    }
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }

  bool timedOut() const { return timed_out_; }
  const std::string& out() const { return stdout_; }
  const std::string& err() const { return stderr_; }

 private:
  // Polls both pipes once; false when both have reached end of file.
  bool pump(int timeout_ms) {
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    int open_count = (out_fd_ >= 0) + (err_fd_ >= 0);
    if (open_count == 0) return false;
    poll(fds, 2, timeout_ms);
    readInto(out_fd_, fds[0].revents, stdout_);
    readInto(err_fd_, fds[1].revents, stderr_);
    return out_fd_ >= 0 || err_fd_ >= 0;
  }

  static void readInto(int& fd, short revents, std::string& sink) {
    if (fd < 0 || (revents & (POLLIN | POLLHUP | POLLERR)) == 0) return;
    char buffer[65536];
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n > 0) {
      sink.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
      close(fd);
      fd = -1;
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  bool reaped_ = false;
  bool timed_out_ = false;
  std::string stdout_, stderr_;
};

}  // namespace ringmaster::testing
