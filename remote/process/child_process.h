// ChildProcess: one program started with fork/exec (arguments, added environment, each standard
// stream inherited, piped or /dev/null, optionally in a process group of its own), signalled and
// reaped by its PID. A child still running when its handle is destroyed is killed (with its group)
// and reaped, and a child dies with its parent, so neither a launcher nor a test can leave an
// orphan behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ringmaster {

// How a child ended: its exit code, or the signal that killed it.
struct ExitStatus {
  int exit_code = 0;
  int signal = 0;  // non-zero: killed by this signal (exit_code is then meaningless)

  bool ok() const { return signal == 0 && exit_code == 0; }
  // "exit code 3", "killed by SIGKILL".
  std::string describe() const;
};

// "SIGKILL", "SIGTERM", ... ("signal 42" for one without a name).
std::string signalName(int signo);

enum class StreamMode { kInherit, kPipe, kNull };

struct ChildOptions {
  std::vector<std::string> argv;                   // argv[0]: the program's path
  std::map<std::string, std::string> environment;  // added to the parent's, replacing equal names
  StreamMode stdin_mode = StreamMode::kNull;
  StreamMode stdout_mode = StreamMode::kPipe;
  StreamMode stderr_mode = StreamMode::kPipe;
  bool die_with_parent = true;  // PR_SET_PDEATHSIG: SIGKILL when the parent thread dies
  // Where the program starts; empty: the parent's working directory. One that cannot be entered
  // fails the start (kUnavailable, naming it).
  std::string working_directory;
  // At least 3: the child also gets a pipe's write end at this descriptor number (a channel of its
  // own beside stdout and stderr, e.g. telemetry), whose read end is telemetryFd(); -1: none.
  int telemetry_fd = -1;
  // The child leads a process group of its own (setpgid), so that it and what it starts can be
  // signalled together (signalGroup) and a terminal's Ctrl-C reaches it only through the parent.
  bool own_process_group = false;
  // The child leads a session of its own (setsid; so a process group too): what it and its
  // descendants run there, each group included, is found by sessionMembers (process_tree.h).
  bool new_session = false;
};

// The program `name` names: itself when it contains a '/', else the first executable file of that
// name in the directories of $PATH (the parent's); nullopt when there is none.
std::optional<std::string> findExecutable(const std::string& name);

class ChildProcess {
 public:
  // Starts the program; throws kUnavailable naming the program when it cannot be executed.
  explicit ChildProcess(const ChildOptions& options);
  ~ChildProcess();  // kills (SIGKILL) and reaps a child still running; closes the pipes
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& program() const { return program_; }

  // The parent's ends of piped streams (-1 for streams not piped, or once closed).
  int stdinFd() const { return stdin_fd_; }
  int stdoutFd() const { return stdout_fd_; }
  int stderrFd() const { return stderr_fd_; }
  int telemetryFd() const { return telemetry_fd_; }  // ChildOptions::telemetry_fd's read end
  void closeStdin();
  // Closes the parent's end of stdout, stderr or the telemetry pipe (after reading end of file).
  void closeOutput(int fd);

  // Sends `signo` unless the child was already reaped; returns whether it was sent.
  bool signal(int signo);
  // Sends `signo` to the child's process group (own_process_group), also after the child was
  // reaped: the caller makes sure the group still has members (a group's ID is not given to a new
  // process while it has any). Returns whether it reached one.
  bool signalGroup(int signo);
  // Reaps the child if it has ended; never blocks.
  std::optional<ExitStatus> poll();
  // Blocks until the child ends.
  ExitStatus wait();
  // Waits at most `limit`; std::nullopt when the child is still running.
  std::optional<ExitStatus> waitFor(std::chrono::milliseconds limit);
  // SIGTERM, then SIGKILL if it is still running after `grace`; returns how it ended.
  ExitStatus stop(std::chrono::milliseconds grace);
  // The status once reaped.
  const std::optional<ExitStatus>& status() const { return status_; }

 private:
  void release();

  pid_t pid_ = -1;
  std::string program_;
  bool own_group_ = false;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  int telemetry_fd_ = -1;
  std::optional<ExitStatus> status_;
};

// The first child of a group to fail, and how.
struct GroupFailure {
  size_t index = 0;
  ExitStatus status;
};

// Waits until every child of `children` has ended. When one fails (non-zero exit or a signal), the
// others are stopped (SIGTERM, SIGKILL after `grace`), as torchrun's agent does; returns that first
// failure, or std::nullopt when all succeeded. Every child is reaped on return.
std::optional<GroupFailure> superviseGroup(std::vector<ChildProcess>& children,
                                           std::chrono::milliseconds grace);

}  // namespace ringmaster
