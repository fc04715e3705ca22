// SSH_ASKPASS read up to a bound (issue 32, point 6): the program's first line is the answer; a
// program that writes without end is stopped, its answer not used, and neither memory nor time
// grows with what it writes.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "cli/ssh_prompts.h"

namespace ringmaster::cli {
namespace {

namespace fs = std::filesystem;

class AskPass : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("rm_askpass_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override {
    ::unsetenv("SSH_ASKPASS");
    fs::remove_all(dir_);
  }
  // Makes SSH_ASKPASS a shell script of `body`.
  void useScript(const std::string& body) {
    const fs::path path = dir_ / "askpass.sh";
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
    ::setenv("SSH_ASKPASS", path.c_str(), 1);
  }
  fs::path dir_;
};

TEST_F(AskPass, TheFirstLineIsTheAnswerUpToTheBound) {
  useScript("echo 'secret words'; echo second");
  EXPECT_EQ(askPassProgram("passphrase: "), "secret words");
  const std::string longest(kMaxAskPassBytes - 1, 'p');
  useScript(fmt::format("echo '{}'", longest));
  EXPECT_EQ(askPassProgram("passphrase: "), longest);
}

TEST_F(AskPass, AProgramWritingPastTheBoundIsStoppedAndItsAnswerNotUsed) {
  for (const std::string body :
       {fmt::format("head -c {} /dev/zero | tr '\\0' p; echo", kMaxAskPassBytes + 1),
        std::string("yes"), std::string("trap '' TERM PIPE; exec cat /dev/zero")}) {
    useScript(body);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(askPassProgram("passphrase: "), std::nullopt) << body;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << body;
  }
}

}  // namespace
}  // namespace ringmaster::cli
