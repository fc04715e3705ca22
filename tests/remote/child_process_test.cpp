// ChildProcess and superviseGroup against real programs (/bin/sh): exit codes and signals, a failed
// exec, the environment, reaping on destruction, and a failing child stopping its siblings.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>

#include "common/captured_process.h"
#include "core/error.h"
#include "process/child_process.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using testing::CapturedProcess;

ChildOptions shell(const std::string& script) {
  ChildOptions o;
  o.argv = {"/bin/sh", "-c", script};
  o.stdout_mode = StreamMode::kNull;
  o.stderr_mode = StreamMode::kNull;
  return o;
}

bool processExists(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

TEST(ChildProcess, ReportsTheExitCode) {
  ChildProcess child(shell("exit 3"));
  ExitStatus status = child.wait();
  EXPECT_EQ(status.exit_code, 3);
  EXPECT_EQ(status.signal, 0);
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.describe(), "exit code 3");
}

TEST(ChildProcess, ReportsTheSignalThatKilledIt) {
  ChildProcess child(shell("sleep 30"));
  EXPECT_FALSE(child.poll());
  child.signal(SIGKILL);
  ExitStatus status = child.wait();
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_EQ(status.describe(), "killed by SIGKILL");
}

TEST(ChildProcess, AProgramThatCannotRunIsAnErrorNamingIt) {
  ChildOptions o;
  o.argv = {"/nonexistent/ringmaster-node"};
  try {
    ChildProcess child(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
    EXPECT_NE(e.message().find("/nonexistent/ringmaster-node"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("No such file"), std::string::npos) << e.message();
  }
}

TEST(ChildProcess, PassesAddedEnvironmentAndCapturesOutput) {
  CapturedProcess child("/bin/sh", {"-c", "echo \"$RANK/$WORLD_SIZE\"; echo oops >&2; exit 0"},
                        {{"RANK", "2"}, {"WORLD_SIZE", "4"}});
  ExitStatus status = child.wait(30s);
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(child.out(), "2/4\n");
  EXPECT_EQ(child.err(), "oops\n");
}

// Reads `fd` to its end.
std::string readToEnd(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

TEST(ChildProcess, TheTelemetryChannelIsAPipeOfItsOwnBesideStdoutAndStderr) {
  ChildOptions o;
  o.argv = {"/bin/sh", "-c", "echo printed; echo complained >&2; echo '{\"v\":1}' >&3"};
  o.telemetry_fd = 3;
  ChildProcess child(o);
  ASSERT_GE(child.telemetryFd(), 0);
  EXPECT_EQ(readToEnd(child.telemetryFd()), "{\"v\":1}\n");
  EXPECT_EQ(readToEnd(child.stdoutFd()), "printed\n");
  EXPECT_EQ(readToEnd(child.stderrFd()), "complained\n");
  EXPECT_TRUE(child.wait().ok());
}

TEST(ChildProcess, NoDescriptorOfTheParentBeyondTheStandardStreamsReachesTheChild) {
  // A descriptor of the parent's without close-on-exec, at 3 and far above.
  const int three = ::dup2(STDERR_FILENO, 3);
  const int high = ::dup2(STDERR_FILENO, 200);
  ASSERT_EQ(three, 3);
  ASSERT_EQ(high, 200);
  ChildOptions o = shell("for fd in 3 200; do (: >&$fd) 2>/dev/null && exit 9; done; exit 0");
  ChildProcess child(o);
  EXPECT_EQ(child.telemetryFd(), -1);
  EXPECT_EQ(child.wait().exit_code, 0) << "a descriptor of the parent's was open in the child";
  ::close(three);
  ::close(high);

  o.telemetry_fd = 3;  // only the channel is there
  o.argv = {"/bin/sh", "-c",
            "(: >&3) 2>/dev/null || exit 8; (: >&4) 2>/dev/null && exit 9; exit 0"};
  ChildProcess with_channel(o);
  EXPECT_EQ(with_channel.wait().exit_code, 0);
}

TEST(ChildProcess, StartsInItsWorkingDirectoryAndNamesOneItCannotEnter) {
  ChildOptions o;
  o.argv = {"/bin/pwd"};
  o.working_directory = "/usr/share";
  ChildProcess child(o);
  EXPECT_EQ(readToEnd(child.stdoutFd()), "/usr/share\n");
  EXPECT_TRUE(child.wait().ok());

  o.working_directory = "/nonexistent/workdir";
  try {
    ChildProcess missing(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
    EXPECT_NE(e.message().find("cannot enter its working directory /nonexistent/workdir"),
              std::string::npos)
        << e.message();
  }
}

TEST(ChildProcess, FindExecutableLooksThroughThePath) {
  const std::optional<std::string> sh = findExecutable("sh");
  ASSERT_TRUE(sh.has_value());
  EXPECT_EQ(sh->substr(sh->size() - 3), "/sh");
  EXPECT_EQ(findExecutable("/bin/true"), "/bin/true");
  EXPECT_FALSE(findExecutable("ringmaster-no-such-program").has_value());
  EXPECT_FALSE(findExecutable("").has_value());
}

TEST(ChildProcess, ClosingStdinEndsAProgramThatReadsIt) {
  CapturedProcess child("/bin/sh", {"-c", "cat >/dev/null; echo eof"});
  child.closeStdin();
  ExitStatus status = child.wait(30s);
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(child.out(), "eof\n");
}

TEST(ChildProcess, DestroyingTheHandleKillsAndReapsTheChild) {
  pid_t pid;
  {
    ChildProcess child(shell("sleep 30"));
    pid = child.pid();
    ASSERT_TRUE(processExists(pid));
  }
  EXPECT_FALSE(processExists(pid)) << "pid " << pid << " outlived its handle";
}

TEST(ChildProcess, StopEscalatesToSigkillWhenTermIsIgnored) {
  ChildOptions o = shell("trap '' TERM; echo ready; while :; do sleep 0.05; done");
  o.stdout_mode = StreamMode::kPipe;
  ChildProcess child(o);
  char buffer[8];
  ASSERT_GT(::read(child.stdoutFd(), buffer, sizeof buffer), 0);  // the trap is set
  auto start = std::chrono::steady_clock::now();
  ExitStatus status = child.stop(300ms);
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
}

TEST(SuperviseGroup, AllSucceeding) {
  std::vector<ChildProcess> children;
  for (int i = 0; i < 3; ++i) children.emplace_back(shell("exit 0"));
  EXPECT_FALSE(superviseGroup(children, 1s));
  for (auto& c : children) EXPECT_TRUE(c.status() && c.status()->ok());
}

TEST(SuperviseGroup, TheFirstFailureStopsTheOthers) {
  std::vector<ChildProcess> children;
  children.emplace_back(shell("sleep 30"));
  children.emplace_back(shell("sleep 0.2; exit 7"));
  children.emplace_back(shell("exec sleep 30"));
  auto start = std::chrono::steady_clock::now();
  auto failure = superviseGroup(children, 2s);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->index, 1u);
  EXPECT_EQ(failure->status.exit_code, 7);
  EXPECT_LT(elapsed, 10s);
  EXPECT_EQ(children[0].status()->signal, SIGTERM);
  EXPECT_EQ(children[2].status()->signal, SIGTERM);
  for (auto& c : children) EXPECT_FALSE(processExists(c.pid()));
}

}  // namespace
}  // namespace ringmaster
