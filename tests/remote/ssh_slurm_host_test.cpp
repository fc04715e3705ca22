// Issue 35: sshSlurmHost against a real sshd on 127.0.0.1: words reach the login node as data
// (an injection corpus through the remote shell), stdout, stderr and the exit status, the timeout
// (the remote command's whole process group killed), writeFile's modes by SFTP, start()'s lines,
// cancel and kill by group, and a login node with an unknown key refused before authentication.
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/proc_files.h"
#include "common/sshd_server.h"
#include "core/error.h"
#include "process/child_process.h"
#include "ssh/host_check.h"
#include "ssh/ssh_slurm_host.h"

namespace ringmaster::slurm {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::SshdServer;

bool endsSoon(pid_t pid) {
  for (int i = 0; i < 500 && testing::processRuns(pid); ++i) std::this_thread::sleep_for(10ms);
  return !testing::processRuns(pid);
}

mode_t modeOf(const fs::path& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
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

class SshSlurmHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = testing::sshdUnavailable(); !why.empty()) GTEST_SKIP() << why;
    char pattern[] = "/tmp/rm-ssh-slurm-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    testing::makeKey(dir_ / "id_user");
    server_ = std::make_unique<SshdServer>(dir_ / "sshd", dir_ / "id_user.pub");
    std::ofstream(dir_ / "known_hosts") << server_->knownHostsLine();
  }
  void TearDown() override {
    server_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  LaunchHostSpec login() const {
    return {.host = "127.0.0.1",
            .ranks = 1,
            .port = server_->port(),
            .user = ::getpwuid(::getuid())->pw_name,
            .identity_file = (dir_ / "id_user").string()};
  }
  SshConnectOptions options() const {
    SshConnectOptions options;
    options.connect_timeout = 5s;
    options.known_hosts_path = (dir_ / "known_hosts").string();
    options.use_agent = false;
    return options;
  }
  std::unique_ptr<SlurmHost> connect() const { return sshSlurmHost(login(), options(), ""); }

  fs::path dir_;
  std::unique_ptr<SshdServer> server_;
};

TEST_F(SshSlurmHostTest, RunsWordsAsDataAndKeepsOutputsAndStatusApart) {
  auto host = connect();
  EXPECT_EQ(host->describe(),
            fmt::format("{}@127.0.0.1:{}", ::getpwuid(::getuid())->pw_name, server_->port()));
  const fs::path marker = dir_ / "pwned";
  for (const std::string& word : std::vector<std::string>{
           "$(touch " + marker.string() + ")", "`touch " + marker.string() + "`",
           "; touch " + marker.string(), "' ; touch " + marker.string() + " ; '", "a'b\"c\\d", "*",
           "$HOME", "line\nbreak", "-n", ""}) {
    const CommandOutput output = host->run({"printf", "%s|", word}, 10s);
    EXPECT_TRUE(output.status.ok()) << output.status.describe() << output.err;
    EXPECT_EQ(output.out, word + "|");
  }
  EXPECT_FALSE(fs::exists(marker));
  const CommandOutput mixed = host->run({"/bin/sh", "-c", "echo x; echo y >&2; exit 3"}, 10s);
  EXPECT_EQ(mixed.status.exit_code, 3);
  EXPECT_EQ(mixed.status.signal, 0);
  EXPECT_EQ(mixed.out, "x\n");
  EXPECT_EQ(mixed.err, "y\n");
  EXPECT_EQ(host->run({"ringmaster-no-such-program-35"}, 10s).status.exit_code, 127);
}

TEST_F(SshSlurmHostTest, KillsTheRemoteCommandsGroupAtTheTimeout) {
  auto host = connect();
  const CommandOutput output = host->run({"/bin/sh", "-c", "sleep 60 & echo $!; wait"}, 1s);
  EXPECT_EQ(output.status.signal, SIGKILL);
  EXPECT_NE(output.err.find("did not end within 1000 ms"), std::string::npos) << output.err;
  const pid_t sleeper = std::atoi(output.out.c_str());
  ASSERT_GT(sleeper, 0) << output.out;
  EXPECT_TRUE(endsSoon(sleeper)) << "the remote sleep outlived the timeout";
  // The session goes on serving commands.
  EXPECT_EQ(host->run({"echo", "after"}, 10s).out, "after\n");
}

TEST_F(SshSlurmHostTest, WritesFilesOwnerOnlyAndTheirDirectoriesBySftp) {
  auto host = connect();
  const fs::path script = dir_ / "runs" / "run-1" / "job" / "slurm.sbatch";
  host->writeFile(script.string(), "#!/bin/sh\necho hi\n", true);
  EXPECT_EQ(testing::readText(script), "#!/bin/sh\necho hi\n");
  EXPECT_EQ(modeOf(script), 0700u);
  EXPECT_EQ(modeOf(dir_ / "runs"), 0700u);
  EXPECT_EQ(modeOf(dir_ / "runs" / "run-1" / "job"), 0700u);
  const fs::path plain = dir_ / "runs" / "notes";
  std::ofstream(plain) << "old text that is longer\n";
  fs::permissions(plain, fs::perms(0644));
  host->writeFile(plain.string(), "new\n");
  EXPECT_EQ(testing::readText(plain), "new\n");
  EXPECT_EQ(modeOf(plain), 0600u);
  try {
    host->writeFile((plain / "below").string(), "text");
    ADD_FAILURE() << "a file below a file was written";
  } catch (const Error& error) {
    EXPECT_NE(error.message().find(plain.string()), std::string::npos) << error.message();
  }
}

TEST_F(SshSlurmHostTest, StartedCommandsStdoutIsTelemetryAndStderrIsLog) {
  auto host = connect();
  auto launch =
      host->start({"/bin/sh", "-c", "echo t1; echo l1 >&2; echo t2; printf 'l2' >&2; exit 4"});
  const Pumped seen = pumpAll(*launch);
  EXPECT_EQ(seen.telemetry, (std::vector<std::string>{"t1", "t2"}));
  EXPECT_EQ(seen.log, (std::vector<std::string>{"l1", "l2"}));
  EXPECT_EQ(launch->wait().exit_code, 4);
  EXPECT_EQ(launch->failure(), "");
}

TEST_F(SshSlurmHostTest, KillEndsTheStartedCommandsWholeGroupWhileTheHostRunsCommands) {
  auto host = connect();
  auto launch = host->start({"/bin/sh", "-c", "sleep 60 & echo $!; echo ready; wait"});
  const Pumped seen = pumpAll(*launch, "ready");
  ASSERT_EQ(seen.telemetry.size(), 2u);
  const pid_t sleeper = std::atoi(seen.telemetry[0].c_str());
  ASSERT_GT(sleeper, 0);
  EXPECT_EQ(host->run({"echo", "between"}, 10s).out, "between\n");  // one connection, shared
  launch->kill();
  pumpAll(*launch);
  EXPECT_EQ(launch->wait().signal, SIGKILL);
  EXPECT_TRUE(endsSoon(sleeper)) << "the remote sleep outlived the kill";
}

TEST_F(SshSlurmHostTest, AStartedCommandNeverPumpedIsKilledWhenItsLaunchGoes) {
  auto host = connect();
  const fs::path pid_file = dir_ / "sleeper.pid";
  host->start({"/bin/sh", "-c",
               "sleep 60 & echo $! > " + pid_file.string() + "; wait"});  // dropped at once
  for (int i = 0; i < 500 && !fs::exists(pid_file); ++i) std::this_thread::sleep_for(10ms);
  const pid_t sleeper = std::atoi(testing::readText(pid_file).c_str());
  ASSERT_GT(sleeper, 0);
  EXPECT_TRUE(endsSoon(sleeper)) << "the remote sleep outlived its launch";
}

// The remote user's shell start-up files may write to stderr before the command says its group
// (a shell rc's warnings): the group is found all the same, and the noise stays in the output.
TEST_F(SshSlurmHostTest, ShellStartupNoiseOnStderrDoesNotHideTheCommandsGroup) {
  if (std::string(::getpwuid(::getuid())->pw_shell).find("bash") == std::string::npos)
    GTEST_SKIP() << "the user's shell is not bash (BASH_ENV makes the noise)";
  std::ofstream(dir_ / "noise.sh") << "echo 'noise from start-up' >&2\n";
  server_->restartWithConfig("SetEnv BASH_ENV=" + (dir_ / "noise.sh").string() + "\n");
  auto host = connect();
  const CommandOutput output = host->run({"/bin/sh", "-c", "sleep 60 & echo $!; wait"}, 1s);
  EXPECT_EQ(output.status.signal, SIGKILL);
  EXPECT_NE(output.err.find("noise from start-up"), std::string::npos) << output.err;
  EXPECT_EQ(output.err.find("ringmaster-pgid"), std::string::npos) << output.err;
  const pid_t sleeper = std::atoi(output.out.c_str());
  ASSERT_GT(sleeper, 0) << output.out;
  EXPECT_TRUE(endsSoon(sleeper)) << "the remote sleep outlived the timeout";

  auto launch = host->start({"/bin/sh", "-c", "sleep 60 & echo $!; echo ready; wait"});
  const Pumped seen = pumpAll(*launch, "ready");
  ASSERT_EQ(seen.telemetry.size(), 2u);
  launch->kill();
  const Pumped rest = pumpAll(*launch);
  std::vector<std::string> log = seen.log;
  log.insert(log.end(), rest.log.begin(), rest.log.end());
  // Once per bash the start-up files run (the user's rc may start more): noise, and nothing else.
  ASSERT_FALSE(log.empty());
  for (const std::string& line : log) EXPECT_EQ(line, "noise from start-up");
  EXPECT_TRUE(endsSoon(std::atoi(seen.telemetry[0].c_str()))) << "the sleep outlived the kill";
}

TEST_F(SshSlurmHostTest, CancelSendsTermToTheStartedCommand) {
  auto host = connect();
  auto launch =
      host->start({"/bin/sh", "-c",
                   "trap 'echo terminated; exit 5' TERM; echo ready; while :; do sleep 0.1; done"});
  pumpAll(*launch, "ready");
  launch->cancel();
  const Pumped rest = pumpAll(*launch);
  EXPECT_EQ(rest.telemetry, (std::vector<std::string>{"terminated"}));
  EXPECT_EQ(launch->wait().exit_code, 5);
}

TEST_F(SshSlurmHostTest, ALoginNodeWithAnUnknownKeyIsRefusedBeforeAuthentication) {
  std::ofstream(dir_ / "known_hosts", std::ios::trunc).close();
  try {
    connect();
    FAIL() << "an unknown login node was accepted";
  } catch (const Error& error) {
    EXPECT_NE(error.message().find("REFUSED, the host is not in"), std::string::npos)
        << error.message();
  }
  std::this_thread::sleep_for(200ms);  // let sshd write its log
  EXPECT_EQ(server_->log().find("Accepted publickey"), std::string::npos) << server_->log();
}

// `hosts check` on a login node asks its sinfo (issue 35): none on the PATH is no Slurm; this
// machine's sinfo, without a cluster to ask, is Slurm with the reason it could not answer.
TEST_F(SshSlurmHostTest, HostsCheckAsksSinfoWhereThereIsOne) {
  const SshTarget target = resolveSshTarget(login(), "");
  const fs::path no_slurm = dir_ / "bin";
  fs::create_directories(no_slurm);
  for (const char* tool : {"sh", "nproc", "grep", "cat"})
    fs::create_symlink(*findExecutable(tool), no_slurm / tool);
  server_->restartWithConfig("SetEnv PATH=" + no_slurm.string() + "\n");
  const HostReport without = checkHost(target, options(), "/nonexistent/ringmaster-node");
  EXPECT_EQ(without.error, "");
  EXPECT_GT(without.cpus, 0) << "the PATH lost the tools the check needs";
  EXPECT_FALSE(without.slurm) << without.slurm->error;

  if (!findExecutable("sinfo")) GTEST_SKIP() << "no sinfo here (apt-get install slurm-client)";
  server_->restartWithConfig("");
  const HostReport with = checkHost(target, options(), "/nonexistent/ringmaster-node");
  EXPECT_EQ(with.error, "");
  ASSERT_TRUE(with.slurm);
  if (!fs::exists("/etc/slurm/slurm.conf")) {
    EXPECT_NE(with.slurm->error.find("sinfo failed"), std::string::npos) << with.slurm->error;
    EXPECT_TRUE(with.slurm->partitions.empty());
  }
}

}  // namespace
}  // namespace ringmaster::slurm
