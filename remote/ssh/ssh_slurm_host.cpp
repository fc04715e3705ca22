// SshSlurmHost: every command runs as `echo ringmaster-pgid $$ >&2; exec WORDS...` (sshd makes
// the shell a session leader, so $$ is the command's process group), and is stopped by that group
// from a second channel, as the SSH launcher stops its agents. One mutex serialises the session
// between run(), writeFile() and the started command's pump.
#include "ssh/ssh_slurm_host.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "launcher/agent_lines.h"
#include "telemetry/codec.h"

namespace ringmaster::slurm {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::string_view kPgidPrefix = "ringmaster-pgid ";
constexpr std::chrono::milliseconds kSignalTimeout = 10s;
constexpr std::chrono::milliseconds kReadSlice = 50ms;  // the session's longest hold per read
// Stderr held back while waiting for the process-group line, at most (then passed on as log).
constexpr size_t kMaxPendingErr = 64 * 1024;

// The connection, shared by the host and the commands it started.
struct Connection {
  std::mutex mutex;
  SshSession session;
  Connection(SshTarget target, const SshConnectOptions& options)
      : session(std::move(target), options) {}

  // Sends `signo` to process group `pgid` on the host (the caller holds the mutex).
  void signalGroup(long pgid, int signo) {
    session.run(fmt::format("kill -{} -- -{}", signo == SIGKILL ? "KILL" : "TERM", pgid),
                kSignalTimeout);
  }
};

std::string groupedCommand(const std::vector<std::string>& argv) {
  RM_CHECK_ARG(!argv.empty(), "a Slurm command needs a program");
  return fmt::format("echo {}$$ >&2; exec {}", kPgidPrefix, shellCommand(argv));
}

// Takes the process-group line out of `err` once it is whole (the remote user's shell start-up
// files may have written before it); the group, 0 until then.
long takeProcessGroup(std::string& err) {
  size_t begin = err.rfind(kPgidPrefix, 0) == 0 ? 0 : err.find("\n" + std::string(kPgidPrefix));
  if (begin == std::string::npos) return 0;
  if (begin != 0) ++begin;  // past the '\n' that ends the line before
  const size_t end = err.find('\n', begin);
  if (end == std::string::npos) return 0;
  const long pgid = std::atol(err.c_str() + begin + kPgidPrefix.size());
  err.erase(begin, end + 1 - begin);
  return pgid;
}

// How the command on `channel` ended, waiting a little for the status that follows its output.
ExitStatus channelExit(SshChannel& channel) {
  for (int i = 0; i < 100; ++i) {
    if (std::optional<ExitStatus> status = channel.exit()) return *status;
    std::this_thread::sleep_for(10ms);
  }
  return ExitStatus{.exit_code = -1};
}

// A command started on the login node: stdout lines are telemetry, stderr lines log.
class SshCommandLaunch final : public Launch {
 public:
  SshCommandLaunch(std::shared_ptr<Connection> connection, const std::vector<std::string>& argv)
      : connection_(std::move(connection)),
        name_(describeTarget(connection_->session.target())),
        channel_(connection_->session.start(groupedCommand(argv))) {}

  // A command still running is killed, its group learnt first if it was never pumped (closing the
  // channel alone would leave it running on the host until it next writes).
  ~SshCommandLaunch() override {
    if (ended_) return;
    LaunchSink ignore;
    for (int turn = 0; turn < 40 && pgid_ == 0 && !ended_; ++turn) pump(kReadSlice, ignore);
    kill();
  }

  bool pump(std::chrono::milliseconds timeout, const LaunchSink& sink) override {
    if (ended_) return false;
    std::string out, err;
    bool open = true;
    {
      std::lock_guard lock(connection_->mutex);
      try {
        open = channel_->read(out, err, std::min(timeout, kReadSlice));
      } catch (const Error& error) {
        failure_ = error.message();
        open = false;
      }
    }
    feed(out, err, !open);
    deliver(sink);
    if (!open) ended_ = true;
    sendWantedSignal();
    return open;
  }

  void cancel() override { stop(SIGTERM); }
  void kill() override { stop(SIGKILL); }

  ExitStatus wait() override {
    std::lock_guard lock(connection_->mutex);
    return channelExit(*channel_);
  }

  std::string failure() const override { return failure_; }

 private:
  void feed(std::string& out, std::string& err, bool finished) {
    telemetry_.feed(out);
    if (pgid_ == 0) {
      pending_err_ += err;
      pgid_ = takeProcessGroup(pending_err_);
      if (pgid_ != 0 || finished || pending_err_.size() > kMaxPendingErr)
        log_.feed(std::exchange(pending_err_, {}));
    } else {
      log_.feed(err);
    }
    if (finished) {
      telemetry_.finish();
      log_.finish();
    }
  }

  void deliver(const LaunchSink& sink) {
    for (bool from_stdout : {true, false}) {
      LineSplitter& splitter = from_stdout ? telemetry_ : log_;
      while (auto line = splitter.next()) {
        deliverAgentLine(
            classifyAgentLine(from_stdout, std::move(*line), splitter.maxLineBytes(), name_), sink);
      }
    }
  }

  // Asked before the command said its group: sent once it has.
  void stop(int signo) {
    int wanted = wanted_signal_;
    while (wanted != SIGKILL && !wanted_signal_.compare_exchange_weak(wanted, signo)) {
    }
    sendWantedSignal();
  }

  void sendWantedSignal() {
    if (wanted_signal_ == 0 || wanted_signal_ == sent_signal_ || pgid_ == 0 || ended_) return;
    std::lock_guard lock(connection_->mutex);
    if (wanted_signal_ == sent_signal_) return;  // another thread sent it meanwhile
    try {
      const int signo = wanted_signal_;
      connection_->signalGroup(pgid_, signo);
      sent_signal_ = signo;
    } catch (const Error& error) {
      failure_ = error.message();
    }
  }

  std::shared_ptr<Connection> connection_;
  std::string name_;
  std::unique_ptr<SshChannel> channel_;
  LineSplitter telemetry_;
  LineSplitter log_{64 * 1024};
  std::string pending_err_;  // stderr before the process-group line is whole
  // Set by the pumping thread, read by cancel() and kill() on any.
  std::atomic<long> pgid_ = 0;
  std::atomic<int> wanted_signal_ = 0, sent_signal_ = 0;
  std::atomic<bool> ended_ = false;
  std::string failure_;
};

class SshSlurmHost final : public SlurmHost {
 public:
  explicit SshSlurmHost(std::shared_ptr<Connection> connection)
      : connection_(std::move(connection)) {}

  CommandOutput run(const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout) override {
    std::lock_guard lock(connection_->mutex);
    std::unique_ptr<SshChannel> channel = connection_->session.start(groupedCommand(argv));
    channel->closeInput();
    CommandOutput output;
    long pgid = 0;
    uint64_t dropped = 0;
    const auto deadline = Clock::now() + timeout;
    bool open = true;
    while (open && Clock::now() < deadline) {
      open = channel->read(output.out, output.err, kReadSlice);
      if (pgid == 0) pgid = takeProcessGroup(output.err);
      dropped += keepWithinBound(output.out) + keepWithinBound(output.err);
    }
    if (dropped > 0)
      output.err += fmt::format("[ringmaster] {} more bytes of output dropped\n", dropped);
    if (!open) {
      output.status = channelExit(*channel);
      return output;
    }
    if (pgid != 0) connection_->signalGroup(pgid, SIGKILL);
    output.status = ExitStatus{.exit_code = 0, .signal = SIGKILL};
    output.err += fmt::format("[ringmaster] {} did not end within {} ms on {}: killed\n",
                              argv.front(), timeout.count(), describe());
    return output;
  }

  void writeFile(const std::string& path, const std::string& text, bool executable) override {
    std::lock_guard lock(connection_->mutex);
    const std::string parent = std::filesystem::path(path).parent_path().string();
    if (!parent.empty()) connection_->session.makeDirectories(parent, 0700);
    connection_->session.upload(path, text, executable ? 0700 : 0600);
  }

  std::unique_ptr<Launch> start(const std::vector<std::string>& argv) override {
    std::lock_guard lock(connection_->mutex);
    return std::make_unique<SshCommandLaunch>(connection_, argv);
  }

  std::string describe() const override {
    const SshTarget& target = connection_->session.target();
    return fmt::format("{}@{}:{}", target.user, target.hostname, target.port);
  }

 private:
  // Cuts `text` to kMaxCommandOutputBytes; what it cut.
  static uint64_t keepWithinBound(std::string& text) {
    if (text.size() <= kMaxCommandOutputBytes) return 0;
    const uint64_t cut = text.size() - kMaxCommandOutputBytes;
    text.resize(kMaxCommandOutputBytes);
    return cut;
  }

  std::shared_ptr<Connection> connection_;
};

}  // namespace

std::unique_ptr<SlurmHost> sshSlurmHost(const LaunchHostSpec& login,
                                        const SshConnectOptions& options,
                                        const std::string& config_path) {
  return std::make_unique<SshSlurmHost>(
      std::make_shared<Connection>(resolveSshTarget(login, config_path), options));
}

}  // namespace ringmaster::slurm
