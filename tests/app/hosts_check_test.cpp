// Issue 35: `ringmaster hosts check` on a real sshd, reached through a bastion sshd by the ssh
// config's ProxyJump: the host is checked through the jump, and its Slurm part is null where sinfo
// is not on the host's PATH and says why where sinfo has no cluster to ask, in --json and in the
// table. (A cluster's partitions are parsed from captured output in tests/remote/sinfo_test.cpp.)
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/sshd_server.h"
#include "common/test_paths.h"
#include "process/child_process.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::CapturedProcess;
using testing::SshdServer;

class HostsCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = testing::sshdUnavailable(); !why.empty()) GTEST_SKIP() << why;
    char pattern[] = "/tmp/rm-hosts-check-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    testing::makeKey(dir_ / "id_user");
    bastion_ = std::make_unique<SshdServer>(dir_ / "bastion", dir_ / "id_user.pub");
    login_ = std::make_unique<SshdServer>(dir_ / "login", dir_ / "id_user.pub");
    std::ofstream(dir_ / "known_hosts") << bastion_->knownHostsLine() << login_->knownHostsLine();
    std::ofstream(dir_ / "config") << fmt::format(
        "Host login\n  HostName 127.0.0.1\n  Port {}\n  ProxyJump bastion\n"
        "Host bastion\n  HostName 127.0.0.1\n  Port {}\n"
        "Host *\n  User {}\n  IdentityFile {}\n",
        login_->port(), bastion_->port(), ::getpwuid(::getuid())->pw_name,
        (dir_ / "id_user").string());
  }
  void TearDown() override {
    login_.reset();
    bastion_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // `ringmaster hosts check login` with `extra` arguments; its stdout, and its exit code in `code`.
  std::string check(const std::vector<std::string>& extra, int& code) {
    std::vector<std::string> args = {"hosts",
                                     "check",
                                     "login",
                                     "--ssh-config",
                                     (dir_ / "config").string(),
                                     "--known-hosts",
                                     (dir_ / "known_hosts").string(),
                                     "--node-binary",
                                     "/nonexistent/ringmaster-node"};
    args.insert(args.end(), extra.begin(), extra.end());
    CapturedProcess cli(std::string(testBinaryDir()) + "/app/ringmaster", args);
    code = cli.wait(60s).exit_code;
    EXPECT_EQ(cli.err(), "") << cli.err();
    return cli.out();
  }

  fs::path dir_;
  std::unique_ptr<SshdServer> bastion_, login_;
};

TEST_F(HostsCheck, ALoginNodeWithoutSinfoHasNoSlurmPart) {
  const fs::path bin = dir_ / "bin";
  fs::create_directories(bin);
  for (const char* tool : {"sh", "nproc", "grep", "cat"})
    fs::create_symlink(*findExecutable(tool), bin / tool);
  login_->restartWithConfig("SetEnv PATH=" + bin.string() + "\n");
  int code = -1;
  const nlohmann::json hosts = nlohmann::json::parse(check({"--json"}, code));
  EXPECT_EQ(code, 0);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(hosts[0]["error"], "");
  EXPECT_EQ(hosts[0]["port"], login_->port());
  EXPECT_TRUE(hosts[0]["slurm"].is_null()) << hosts.dump(2);
  EXPECT_EQ(check({}, code).find("Slurm"), std::string::npos);
  std::this_thread::sleep_for(200ms);
  EXPECT_NE(bastion_->log().find("Accepted publickey"), std::string::npos)
      << "the check did not go through the bastion";
}

TEST_F(HostsCheck, ASinfoWithoutAClusterIsShownWithItsReason) {
  if (!findExecutable("sinfo")) GTEST_SKIP() << "no sinfo here (apt-get install slurm-client)";
  if (fs::exists("/etc/slurm/slurm.conf")) GTEST_SKIP() << "this machine has a Slurm cluster";
  int code = -1;
  const nlohmann::json hosts = nlohmann::json::parse(check({"--json"}, code));
  EXPECT_EQ(code, 0) << "a sinfo that cannot answer does not fail the host check";
  ASSERT_EQ(hosts.size(), 1u);
  const nlohmann::json& slurm = hosts[0]["slurm"];
  ASSERT_TRUE(slurm.is_object()) << hosts.dump(2);
  EXPECT_EQ(slurm["partitions"], nlohmann::json::array());
  EXPECT_NE(slurm["error"].get<std::string>().find("sinfo failed"), std::string::npos) << slurm;
  const std::string table = check({}, code);
  EXPECT_NE(table.find("login: Slurm (version unknown)"), std::string::npos) << table;
  EXPECT_NE(table.find("sinfo failed"), std::string::npos) << table;
}

}  // namespace
}  // namespace ringmaster
