// Issue 35: localSlurmHost against real programs (/bin/echo, /bin/sh): output, exit status and
// signal, words passed as data (never through a shell), the timeout (the command's whole process
// group killed), writeFile's modes, and start()'s telemetry and log lines, cancel and kill.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/proc_files.h"
#include "core/error.h"
#include "slurm/slurm_host.h"

namespace ringmaster::slurm {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Whether `pid` has stopped running (a zombie runs nothing) within a few seconds.
bool endsSoon(pid_t pid) {
  for (int i = 0; i < 500 && testing::processRuns(pid); ++i) std::this_thread::sleep_for(10ms);
  return !testing::processRuns(pid);
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "rm-slurm-host-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

mode_t modeOf(const fs::path& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

std::string readText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Pumped {
  std::vector<std::string> telemetry, log;
};

// Pumps `launch` until its output ends (bounded: 20 s), or until `stop_at` is seen on stdout.
Pumped pumpAll(Launch& launch, const std::string& stop_at = "") {
  Pumped seen;
  LaunchSink sink;
  bool stop = false;
  sink.on_telemetry = [&](std::string_view line) {
    seen.telemetry.emplace_back(line);
    stop = stop || (!stop_at.empty() && line == stop_at);
  };
  sink.on_log = [&](std::string_view line) { seen.log.emplace_back(line); };
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!stop && std::chrono::steady_clock::now() < deadline && launch.pump(100ms, sink)) {
  }
  return seen;
}

TEST(LocalSlurmHost, RunsAProgramAndReturnsItsOutput) {
  auto host = localSlurmHost();
  EXPECT_EQ(host->describe(), "this machine");
  const CommandOutput output = host->run({"/bin/echo", "hello", "world"}, 10s);
  EXPECT_TRUE(output.status.ok()) << output.status.describe();
  EXPECT_EQ(output.out, "hello world\n");
  EXPECT_EQ(output.err, "");
}

TEST(LocalSlurmHost, FindsAProgramOnThePathAsAShellWould) {
  const CommandOutput output = localSlurmHost()->run({"echo", "found"}, 10s);
  EXPECT_TRUE(output.status.ok()) << output.status.describe();
  EXPECT_EQ(output.out, "found\n");
}

TEST(LocalSlurmHost, KeepsStdoutStderrAndTheExitCodeApart) {
  const CommandOutput output =
      localSlurmHost()->run({"/bin/sh", "-c", "echo x; echo y >&2; exit 3"}, 10s);
  EXPECT_EQ(output.status.exit_code, 3);
  EXPECT_EQ(output.status.signal, 0);
  EXPECT_EQ(output.out, "x\n");
  EXPECT_EQ(output.err, "y\n");
}

TEST(LocalSlurmHost, ReportsACommandKilledByASignal) {
  const CommandOutput output = localSlurmHost()->run({"/bin/sh", "-c", "kill -9 $$"}, 10s);
  EXPECT_EQ(output.status.signal, SIGKILL);
}

TEST(LocalSlurmHost, PassesEveryWordAsDataNeverThroughAShell) {
  TempDir dir;
  const fs::path marker = dir.path() / "pwned";
  for (const std::string& word : std::vector<std::string>{
           "$(touch " + marker.string() + ")", "`touch " + marker.string() + "`",
           "; touch " + marker.string(), "| touch " + marker.string(), "a'b\"c", "*", "$HOME",
           "line\nbreak", ""}) {
    const CommandOutput output = localSlurmHost()->run({"/bin/echo", word}, 10s);
    EXPECT_EQ(output.out, word + "\n");
    EXPECT_FALSE(fs::exists(marker)) << word;
  }
}

TEST(LocalSlurmHost, RefusesAProgramThatIsNotThere) {
  try {
    localSlurmHost()->run({"ringmaster-no-such-program-35"}, 10s);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kUnavailable);
    EXPECT_NE(std::string(error.what()).find("ringmaster-no-such-program-35"), std::string::npos);
  }
}

TEST(LocalSlurmHost, KillsACommandAndWhatItStartedAtTheTimeout) {
  // The shell prints the PID of a sleep it started in the background, then waits past the limit.
  const CommandOutput output =
      localSlurmHost()->run({"/bin/sh", "-c", "sleep 60 & echo $!; wait"}, 500ms);
  EXPECT_EQ(output.status.signal, SIGKILL);
  EXPECT_NE(output.err.find("did not end within 500 ms"), std::string::npos) << output.err;
  const pid_t sleeper = std::atoi(output.out.c_str());
  ASSERT_GT(sleeper, 0) << output.out;
  EXPECT_TRUE(endsSoon(sleeper)) << "the background sleep outlived the timeout";
}

TEST(LocalSlurmHost, WritesFilesOwnerOnlyAndTheirDirectories) {
  TempDir dir;
  auto host = localSlurmHost();
  const fs::path script = dir.path() / "run-1" / "job" / "slurm.sbatch";
  host->writeFile(script.string(), "#!/bin/sh\necho hi\n", true);
  EXPECT_EQ(readText(script), "#!/bin/sh\necho hi\n");
  EXPECT_EQ(modeOf(script), 0700u);
  EXPECT_EQ(modeOf(dir.path() / "run-1"), 0700u);
  EXPECT_EQ(modeOf(dir.path() / "run-1" / "job"), 0700u);

  // An existing file, readable by all, is replaced owner-only.
  const fs::path plain = dir.path() / "run-1" / "job" / "notes";
  std::ofstream(plain) << "old text that is longer\n";
  fs::permissions(plain, fs::perms(0644));
  host->writeFile(plain.string(), "new\n");
  EXPECT_EQ(readText(plain), "new\n");
  EXPECT_EQ(modeOf(plain), 0600u);
  host->writeFile(plain.string(), "");
  EXPECT_EQ(readText(plain), "");
  EXPECT_EQ(std::distance(fs::directory_iterator(plain.parent_path()), fs::directory_iterator()), 2)
      << "a temporary file was left behind";
}

TEST(LocalSlurmHost, RefusesAFileItCannotWriteNamingIt) {
  TempDir dir;
  const fs::path blocker = dir.path() / "file";
  std::ofstream(blocker) << "x";
  try {
    localSlurmHost()->writeFile((blocker / "below").string(), "text");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kIo);
    EXPECT_NE(std::string(error.what()).find(blocker.string()), std::string::npos) << error.what();
  }
}

TEST(LocalSlurmHost, StartedCommandsStdoutIsTelemetryAndStderrIsLog) {
  auto launch = localSlurmHost()->start(
      {"/bin/sh", "-c", "echo t1; echo l1 >&2; echo t2; printf 'l2' >&2; exit 4"});
  const Pumped seen = pumpAll(*launch);
  EXPECT_EQ(seen.telemetry, (std::vector<std::string>{"t1", "t2"}));
  EXPECT_EQ(seen.log, (std::vector<std::string>{"l1", "l2"}));
  EXPECT_EQ(launch->wait().exit_code, 4);
}

TEST(LocalSlurmHost, KillEndsTheStartedCommandsWholeGroup) {
  auto launch = localSlurmHost()->start({"/bin/sh", "-c", "sleep 60 & echo $!; echo ready; wait"});
  const Pumped seen = pumpAll(*launch, "ready");
  ASSERT_EQ(seen.telemetry.size(), 2u);
  const pid_t sleeper = std::atoi(seen.telemetry[0].c_str());
  ASSERT_GT(sleeper, 0);
  launch->kill();
  pumpAll(*launch);
  EXPECT_EQ(launch->wait().signal, SIGKILL);
  EXPECT_TRUE(endsSoon(sleeper)) << "the background sleep outlived the kill";
}

TEST(LocalSlurmHost, CancelSendsTermToTheStartedCommand) {
  auto launch = localSlurmHost()->start(
      {"/bin/sh", "-c",
       "trap 'echo terminated; exit 5' TERM; echo ready; while :; do sleep 0.1; done"});
  pumpAll(*launch, "ready");
  launch->cancel();
  const Pumped rest = pumpAll(*launch);
  EXPECT_EQ(rest.telemetry, (std::vector<std::string>{"terminated"}));
  EXPECT_EQ(launch->wait().exit_code, 5);
}

}  // namespace
}  // namespace ringmaster::slurm
