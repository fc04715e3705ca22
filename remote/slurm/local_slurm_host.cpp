// LocalSlurmHost: Slurm's commands on this machine, each an argument vector exec'd through
// ChildProcess (no shell), in a process group of its own so that a timeout or a kill reaches
// what it started too. No libssh here: the SSH side is remote/ssh/ssh_slurm_host.h.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "launcher/agent_lines.h"
#include "slurm/slurm_host.h"
#include "telemetry/codec.h"

namespace ringmaster::slurm {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The child for `argv`: its program found on $PATH as a shell would, its output piped, its stdin
// /dev/null, leading a process group of its own.
ChildOptions commandOptions(const std::vector<std::string>& argv) {
  RM_CHECK_ARG(!argv.empty(), "a Slurm command needs a program");
  const std::optional<std::string> program = findExecutable(argv.front());
  if (!program)
    RM_THROW(kUnavailable, fmt::format("{} is not on this machine's PATH", argv.front()));
  ChildOptions options;
  options.argv = argv;
  options.argv.front() = *program;
  options.stdin_mode = StreamMode::kNull;
  options.own_process_group = true;
  return options;
}

void setNonBlocking(int fd) {
  if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Appends what `fd` has to `text`; false at end of file (or a read error).
bool readAvailableText(int fd, std::string& text) {
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;
  }
}

// Waits at most `timeout` for the child's stdout or stderr (-1 for one closed); the poll flags.
std::pair<short, short> pollOutputs(int out, int err, std::chrono::milliseconds timeout) {
  pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
  const int ready = ::poll(fds, 2, static_cast<int>(std::max<int64_t>(timeout.count(), 0)));
  if (ready < 0 && errno != EINTR) RM_THROW(kIo, fmt::format("poll: {}", std::strerror(errno)));
  return {fds[0].revents, fds[1].revents};
}

constexpr short kReadable = POLLIN | POLLHUP | POLLERR;

// Creates the missing directories above `path`, each 0700.
void makeParentDirectories(const fs::path& path) {
  fs::path made;
  for (const fs::path& part : path.parent_path()) {
    made /= part;
    if (::mkdir(made.c_str(), 0700) != 0 && errno != EEXIST) {
      RM_THROW(kIo, fmt::format("cannot create the directory {}: {}", made.string(),
                                std::strerror(errno)));
    }
  }
}

// The spool follower (or any command) started here: its stdout lines are telemetry, its stderr
// lines log, as the local launcher reads an agent.
class LocalCommandLaunch final : public Launch {
 public:
  explicit LocalCommandLaunch(const std::vector<std::string>& argv)
      : child_(commandOptions(argv)),
        name_(fmt::format("{} on this machine", fs::path(argv.front()).filename().string())) {
    setNonBlocking(child_.stdoutFd());
    setNonBlocking(child_.stderrFd());
  }

  bool pump(std::chrono::milliseconds timeout, const LaunchSink& sink) override {
    const int out = child_.stdoutFd(), err = child_.stderrFd();
    if (out < 0 && err < 0) return false;
    const auto [out_events, err_events] = pollOutputs(out, err, timeout);
    if (out >= 0 && (out_events & kReadable) != 0 && !readAvailableLines(out, telemetry_))
      child_.closeOutput(out);
    if (err >= 0 && (err_events & kReadable) != 0 && !readAvailableLines(err, log_))
      child_.closeOutput(err);
    for (bool from_stdout : {true, false}) {
      LineSplitter& splitter = from_stdout ? telemetry_ : log_;
      while (auto line = splitter.next()) {
        deliverAgentLine(
            classifyAgentLine(from_stdout, std::move(*line), splitter.maxLineBytes(), name_), sink);
      }
    }
    return child_.stdoutFd() >= 0 || child_.stderrFd() >= 0;
  }

  void cancel() override { child_.signalGroup(SIGTERM); }
  void kill() override { child_.signalGroup(SIGKILL); }
  ExitStatus wait() override { return child_.wait(); }

 private:
  ChildProcess child_;
  std::string name_;
  LineSplitter telemetry_;
  LineSplitter log_{64 * 1024};
};

class LocalSlurmHost final : public SlurmHost {
 public:
  CommandOutput run(const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout) override {
    ChildProcess child(commandOptions(argv));
    setNonBlocking(child.stdoutFd());
    setNonBlocking(child.stderrFd());
    CommandOutput output;
    const auto deadline = Clock::now() + timeout;
    while (child.stdoutFd() >= 0 || child.stderrFd() >= 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      const int out = child.stdoutFd(), err = child.stderrFd();
      const auto [out_events, err_events] = pollOutputs(out, err, left);
      if (out >= 0 && (out_events & kReadable) != 0 && !readAvailableText(out, output.out))
        child.closeOutput(out);
      if (err >= 0 && (err_events & kReadable) != 0 && !readAvailableText(err, output.err))
        child.closeOutput(err);
    }
    // Whatever the group still runs (the command past its time, or what it left holding its
    // output) ends here; the command's own status is kept when it ended in time.
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const bool timed_out = !child.waitFor(std::max(left, std::chrono::milliseconds(0)));
    child.signalGroup(SIGKILL);
    output.status = child.wait();
    if (timed_out) {
      output.err += fmt::format("[ringmaster] {} did not end within {} ms: killed\n", argv.front(),
                                timeout.count());
    }
    return output;
  }

  void writeFile(const std::string& path, const std::string& text, bool executable) override {
    const fs::path target(path);
    makeParentDirectories(target);
    const mode_t mode = executable ? 0700 : 0600;
    const std::string temporary = fmt::format("{}.tmp.{}", path, ::getpid());
    const int fd =
        ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) RM_THROW(kIo, fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    bool written = ::fchmod(fd, mode) == 0;
    for (size_t done = 0; written && done < text.size();) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      written = n > 0;
      if (written) done += static_cast<size_t>(n);
    }
    const int error = errno;
    written = ::close(fd) == 0 && written;
    if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
      const int reason = written ? errno : error;
      ::unlink(temporary.c_str());
      RM_THROW(kIo, fmt::format("cannot write {}: {}", path, std::strerror(reason)));
    }
  }

  std::unique_ptr<Launch> start(const std::vector<std::string>& argv) override {
    return std::make_unique<LocalCommandLaunch>(argv);
  }

  std::string describe() const override { return "this machine"; }
};

}  // namespace

std::unique_ptr<SlurmHost> localSlurmHost() {
  return std::make_unique<LocalSlurmHost>();
}

}  // namespace ringmaster::slurm
