// A child in a process group or a session of its own (issue 32, point 2): what it starts is found
// through /proc by its group and its session, named on one line, and ended with the group; a
// process that left with setsid is in neither. Real /bin/sh children; every process is killed by
// PID before the test ends.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "process/child_process.h"
#include "process/process_tree.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A shell that starts `sleep 600` (its command line holding a line break) in its own group, and
// a second one that leaves with setsid; each writes its PID into `dir`, then the shell waits.
ChildOptions parentOfTwo(const fs::path& dir, bool new_session) {
  ChildOptions o;
  o.argv = {"/bin/sh", "-c",
            fmt::format("sh -c 'echo $$ > {0}/stays; exec sleep 600' & "
                        "setsid sh -c 'echo $$ > {0}/left; exec sleep 600' & wait",
                        dir.string())};
  o.stdout_mode = StreamMode::kNull;
  o.stderr_mode = StreamMode::kNull;
  o.own_process_group = !new_session;
  o.new_session = new_session;
  return o;
}

pid_t pidWritten(const fs::path& file) {
  for (int tries = 0; tries < 500; ++tries) {
    std::ifstream in(file);
    pid_t pid = 0;
    if (in >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(10ms);
  }
  return 0;
}

bool named(const std::vector<ProcessInfo>& processes, pid_t pid) {
  return std::any_of(processes.begin(), processes.end(),
                     [pid](const ProcessInfo& p) { return p.pid == pid; });
}

bool endsWithin(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    // Gone, or a zombie no longer in any group listing.
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::ifstream stat(fmt::format("/proc/{}/stat", pid));
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t end = text.rfind(')');
    if (end != std::string::npos && end + 2 < text.size() && text[end + 2] == 'Z') return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

class ProcessTree : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("ringmaster_tree_{}_{}", ::getpid(), count_++);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (pid_t pid : {stays_, left_})
      if (pid > 0) ::kill(pid, SIGKILL);
    fs::remove_all(dir_);
  }
  static inline int count_ = 0;
  fs::path dir_;
  pid_t stays_ = 0, left_ = 0;
};

TEST_P(ProcessTree, WhatAChildStartsIsFoundByItsGroupAndSessionAndEndsWithTheGroup) {
  const bool new_session = GetParam();
  ChildProcess parent(parentOfTwo(dir_, new_session));
  stays_ = pidWritten(dir_ / "stays");
  left_ = pidWritten(dir_ / "left");
  ASSERT_GT(stays_, 0);
  ASSERT_GT(left_, 0);

  const std::vector<ProcessInfo> group = processGroupMembers(parent.pid());
  EXPECT_TRUE(named(group, parent.pid()));
  EXPECT_TRUE(named(group, stays_));
  EXPECT_FALSE(named(group, left_)) << "setsid leaves the group";
  if (new_session) {
    const std::vector<ProcessInfo> session = sessionMembers(parent.pid());
    EXPECT_TRUE(named(session, stays_));
    EXPECT_FALSE(named(session, left_)) << "setsid leaves the session";
  }
  const std::string described = describeProcesses(group);
  EXPECT_NE(described.find(fmt::format("{} (sleep 600)", stays_)), std::string::npos) << described;
  EXPECT_EQ(described.find('\n'), std::string::npos) << described;

  EXPECT_TRUE(parent.signalGroup(SIGKILL));
  EXPECT_TRUE(endsWithin(stays_, 10s)) << "the group's member was left running";
  parent.wait();
  EXPECT_TRUE(processGroupMembers(parent.pid()).empty());
  EXPECT_FALSE(endsWithin(left_, 100ms)) << "the process that left was signalled with the group";
}

INSTANTIATE_TEST_SUITE_P(GroupOrSession, ProcessTree, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Session" : "Group"; });

// A command line's line breaks and other controls are spaces: a warning naming it is one line.
TEST(ProcessTreeNames, ACommandLineIsOneLine) {
  ChildOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 600\nexit 0\n#\tsecond line", "name"};
  o.stdout_mode = StreamMode::kNull;
  o.own_process_group = true;
  ChildProcess child(o);
  std::string command;
  for (int tries = 0; tries < 500 && command.find("name") == std::string::npos; ++tries) {
    for (const ProcessInfo& process : processGroupMembers(child.pid()))
      if (process.pid == child.pid()) command = process.command;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(command, "/bin/sh -c sleep 600 exit 0 # second line name");
  EXPECT_EQ(rankInEnvironment(child.pid()), std::nullopt);
  child.signalGroup(SIGKILL);
}

}  // namespace
}  // namespace ringmaster
