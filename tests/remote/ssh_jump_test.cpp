// Issue 35: ProxyJump against two real sshd on 127.0.0.1, the login node reached through the
// bastion: the jump is used (a bastion that refuses forwarding fails the connection, naming it),
// the bastion's host key is verified before any authentication (unknown and changed keys refused,
// naming the bastion), `proxy_jump` and ~/.ssh/config's ProxyJump both lead there, and the jump's
// text is validated as [user@]host[:port] hops, never handed to a shell.
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/sshd_server.h"
#include "common/test_paths.h"
#include "core/error.h"
#include "ssh/host_check.h"
#include "ssh/ssh_launcher.h"
#include "ssh/ssh_session.h"
#include "ssh/ssh_slurm_host.h"
#include "ssh/ssh_target.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::SshdServer;

std::string localUser() {
  return ::getpwuid(::getuid())->pw_name;
}

class SshJumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = testing::sshdUnavailable(); !why.empty()) GTEST_SKIP() << why;
    char pattern[] = "/tmp/rm-ssh-jump-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    testing::makeKey(dir_ / "id_user");
    bastion_ = std::make_unique<SshdServer>(dir_ / "bastion", dir_ / "id_user.pub");
    login_ = std::make_unique<SshdServer>(dir_ / "login", dir_ / "id_user.pub");
    trustBoth();
    std::ofstream(dir_ / "config") << fmt::format(
        "Host login\n  HostName 127.0.0.1\n  Port {}\n  ProxyJump bastion\n"
        "Host bastion\n  HostName 127.0.0.1\n  Port {}\n"
        "Host *\n  User {}\n  IdentityFile {}\n",
        login_->port(), bastion_->port(), localUser(), (dir_ / "id_user").string());
  }
  void TearDown() override {
    login_.reset();
    bastion_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  void trustBoth() { trust({login_.get(), bastion_.get()}); }
  void trust(const std::vector<const SshdServer*>& servers) {
    std::ofstream known(dir_ / "known_hosts", std::ios::trunc);
    for (const SshdServer* server : servers) known << server->knownHostsLine();
  }
  SshConnectOptions options() const {
    SshConnectOptions options;
    options.connect_timeout = 5s;
    options.known_hosts_path = (dir_ / "known_hosts").string();
    options.use_agent = false;
    return options;
  }
  // The login node as a spec entry naming the bastion itself (no config).
  LaunchHostSpec loginEntry() const {
    return {.host = "127.0.0.1",
            .ranks = 1,
            .port = login_->port(),
            .user = localUser(),
            .identity_file = (dir_ / "id_user").string(),
            .proxy_jump = fmt::format("{}@127.0.0.1:{}", localUser(), bastion_->port())};
  }
  // The bastion, named inline, takes its key from the config (Host *), as ssh -J would.
  SshTarget jumpedTarget() const {
    return resolveSshTarget(loginEntry(), (dir_ / "config").string());
  }
  std::string refusal(const SshTarget& target) {
    try {
      SshSession session(target, options());
    } catch (const Error& e) {
      return e.message();
    }
    ADD_FAILURE() << "the connection was not refused";
    return "";
  }
  bool bastionAuthenticated() {
    std::this_thread::sleep_for(200ms);  // let sshd write its log
    return bastion_->log().find("Accepted publickey") != std::string::npos;
  }

  fs::path dir_;
  std::unique_ptr<SshdServer> bastion_, login_;
};

size_t openDescriptors() {
  return static_cast<size_t>(
      std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator()));
}

TEST_F(SshJumpTest, AHostBehindAJumpHostRunsCommandsThroughIt) {
  const SshTarget target = jumpedTarget();
  ASSERT_NE(target.via, nullptr);
  { SshSession first(*target.via, options()); }  // libssh's first use opens what it keeps
  const size_t descriptors = openDescriptors();
  {
    SshSession once(target, options());  // connected and closed: nothing is left open
  }
  EXPECT_EQ(openDescriptors(), descriptors);
  SshSession session(target, options());
  const CommandResult result = session.run("echo through; echo err >&2; exit 3", 10s);
  EXPECT_EQ(result.exit_status, 3);
  EXPECT_EQ(result.out, "through\n");
  EXPECT_EQ(result.err, "err\n");
  session.upload((dir_ / "uploaded").string(), std::string(300000, 'x'), 0600);  // > one chunk
  EXPECT_EQ(fs::file_size(dir_ / "uploaded"), 300000u);
  EXPECT_TRUE(bastionAuthenticated());
}

// The bastion going away mid-session (its sshd and every connection it served killed) ends the
// session behind it with an error, within the command's timeout, instead of leaving it hanging.
TEST_F(SshJumpTest, ABastionThatGoesAwayFailsTheSessionBehindIt) {
  SshSession session(jumpedTarget(), options());
  EXPECT_EQ(session.run("echo before", 10s).out, "before\n");
  bastion_->stop();
  try {
    session.run("sleep 1; echo after", 10s);
    ADD_FAILURE() << "a command ran with the bastion gone";
  } catch (const Error& e) {
    EXPECT_TRUE(e.kind() == ErrorKind::kComm || e.kind() == ErrorKind::kTimeout) << e.message();
  }
}

// Two hops (the bastion twice: each relay runs over the one before it).
TEST_F(SshJumpTest, AChainOfJumpHostsIsFollowedHopByHop) {
  LaunchHostSpec entry = loginEntry();
  entry.proxy_jump = *entry.proxy_jump + "," + *entry.proxy_jump;
  const SshTarget target = resolveSshTarget(entry, (dir_ / "config").string());
  ASSERT_NE(target.via, nullptr);
  ASSERT_NE(target.via->via, nullptr);
  SshSession session(target, options());
  EXPECT_EQ(session.run("echo two hops", 10s).out, "two hops\n");
  std::this_thread::sleep_for(200ms);
  const std::string log = bastion_->log();
  size_t accepted = 0;
  for (size_t at = log.find("Accepted publickey"); at != std::string::npos;
       at = log.find("Accepted publickey", at + 1))
    ++accepted;
  EXPECT_EQ(accepted, 2u) << log;
}

TEST_F(SshJumpTest, TheJumpIsUsedABastionRefusingForwardingFailsTheConnection) {
  bastion_->restartWithConfig("AllowTcpForwarding no\n");
  const std::string message = refusal(jumpedTarget());
  EXPECT_NE(message.find("refused to forward"), std::string::npos) << message;
  EXPECT_NE(message.find(fmt::format("127.0.0.1:{}", bastion_->port())), std::string::npos)
      << message;
}

TEST_F(SshJumpTest, ABastionWithAnUnknownKeyIsRefusedBeforeAuthenticationNamingIt) {
  trust({login_.get()});
  const std::string message = refusal(jumpedTarget());
  EXPECT_NE(message.find("REFUSED, the host is not in"), std::string::npos) << message;
  EXPECT_NE(message.find("through its jump host"), std::string::npos) << message;
  EXPECT_NE(message.find(fmt::format("127.0.0.1:{}", bastion_->port())), std::string::npos)
      << message;
  EXPECT_FALSE(bastionAuthenticated()) << bastion_->log();
}

TEST_F(SshJumpTest, ABastionWithAChangedKeyIsRefusedBeforeAuthenticationNamingIt) {
  bastion_->replaceHostKey();
  const std::string message = refusal(jumpedTarget());
  EXPECT_NE(message.find("REFUSED, the host key has changed"), std::string::npos) << message;
  EXPECT_NE(message.find(bastion_->hostKeyFingerprint()), std::string::npos) << message;
  EXPECT_FALSE(bastionAuthenticated()) << bastion_->log();
}

TEST_F(SshJumpTest, TheHostBehindTheBastionHasItsKeyVerifiedToo) {
  trust({bastion_.get()});
  { SshSession first(*jumpedTarget().via, options()); }  // libssh's first use opens what it keeps
  const size_t descriptors = openDescriptors();
  const std::string message = refusal(jumpedTarget());
  EXPECT_EQ(openDescriptors(), descriptors) << "the refused session left a descriptor open";
  EXPECT_NE(message.find("REFUSED, the host is not in"), std::string::npos) << message;
  EXPECT_NE(message.find(fmt::format("127.0.0.1:{}", login_->port())), std::string::npos)
      << message;
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(login_->log().find("Accepted publickey"), std::string::npos) << login_->log();
}

TEST_F(SshJumpTest, TheSshConfigsProxyJumpLeadsTheSlurmLoginNodeAndHostsCheckThere) {
  const std::string config = (dir_ / "config").string();
  auto host = slurm::sshSlurmHost({.host = "login", .ranks = 1}, options(), config);
  const slurm::CommandOutput output = host->run({"echo", "on the login node"}, 10s);
  EXPECT_TRUE(output.status.ok()) << output.err;
  EXPECT_EQ(output.out, "on the login node\n");
  EXPECT_TRUE(bastionAuthenticated());

  const HostReport report = checkHost(resolveSshTarget({.host = "login", .ranks = 1}, config),
                                      options(), (dir_ / "no-node-binary").string());
  EXPECT_EQ(report.error, "");
  EXPECT_GT(report.cpus, 0);

  // "none" in the entry overrides the config's ProxyJump.
  const SshTarget direct =
      resolveSshTarget({.host = "login", .ranks = 1, .proxy_jump = "none"}, config);
  EXPECT_EQ(direct.via, nullptr);
}

// The SSH launcher reaches its hosts the same way: a program job's two workers on the login
// node, started, read and ended through the bastion.
TEST_F(SshJumpTest, TheSshLauncherRunsAJobOnAHostBehindTheBastion) {
  const fs::path out = dir_ / "out";
  fs::create_directories(out);
  std::ofstream(dir_ / "worker.sh")
      << fmt::format("printf '%s' \"$RANK/$WORLD_SIZE\" > '{}/RANK.'$RANK\n", out.string());
  const nlohmann::json spec = {
      {"name", "ssh-jump"},
      {"program", {{"python", "sh"}, {"script", "worker.sh"}, {"workdir", dir_.string()}}},
      {"launch", {{"hosts", {{{"host", "login"}, {"ranks", 2}}}}, {"timeout_s", 30}}}};
  SshLaunchOptions options;
  options.hosts = {LaunchHostSpec{.host = "login", .ranks = 2}};
  options.spec_json = spec.dump();
  options.node_binary = std::string(testBinaryDir()) + "/app/ringmaster-node";
  options.local_node_binary = options.node_binary;
  options.ssh_config_path = (dir_ / "config").string();
  options.connect = this->options();
  options.grace = 2s;
  SshLauncher launch(options);
  LaunchSink sink{.on_telemetry = [](std::string_view) {}, .on_log = [](std::string_view) {}};
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (launch.pump(100ms, sink) && std::chrono::steady_clock::now() < deadline) {
  }
  EXPECT_TRUE(launch.wait().ok()) << launch.failure();
  EXPECT_EQ(testing::readText(out / "RANK.0"), "0/2");
  EXPECT_EQ(testing::readText(out / "RANK.1"), "1/2");
  EXPECT_TRUE(bastionAuthenticated());
}

TEST(SshJumpHops, AreParsedAsUserHostAndPort) {
  const LaunchHostSpec plain = parseJumpHop("bastion", "f");
  EXPECT_EQ(plain.host, "bastion");
  EXPECT_FALSE(plain.user);
  EXPECT_FALSE(plain.port);
  const LaunchHostSpec full = parseJumpHop("alice@bastion.example.org:2222", "f");
  EXPECT_EQ(full.host, "bastion.example.org");
  EXPECT_EQ(full.user, "alice");
  EXPECT_EQ(full.port, 2222);
  EXPECT_EQ(parseJumpHop("[::1]:22", "f").host, "::1");
  EXPECT_EQ(parseJumpHop("[::1]:22", "f").port, 22);
  EXPECT_EQ(parseJumpHop("fe80::1", "f").host, "fe80::1");

  const SshTarget chain =
      resolveSshTarget({.host = "login", .ranks = 1, .proxy_jump = "a@first:2201,second"}, "");
  ASSERT_NE(chain.via, nullptr);
  EXPECT_EQ(chain.via->hostname, "second");
  ASSERT_NE(chain.via->via, nullptr);
  EXPECT_EQ(chain.via->via->hostname, "first");
  EXPECT_EQ(chain.via->via->user, "a");
  EXPECT_EQ(chain.via->via->port, 2201);
  EXPECT_EQ(describeRoute(chain).find("through host 'second'") != std::string::npos, true)
      << describeRoute(chain);
}

TEST(SshJumpHops, EveryMalformedOrHostileJumpIsRefusedNamingTheHost) {
  for (const std::string& jump : std::vector<std::string>{"",
                                                          ",",
                                                          "a,",
                                                          ",a",
                                                          "a,,b",
                                                          "-oProxyCommand=touch /tmp/x",
                                                          "host;touch /tmp/x",
                                                          "$(touch /tmp/x)",
                                                          "`id`",
                                                          "a b",
                                                          "host\nother",
                                                          "user@@host",
                                                          "@host",
                                                          "us er@host",
                                                          "host:0",
                                                          "host:65536",
                                                          "host:22x",
                                                          "host:",
                                                          "[::1",
                                                          "[::1]x",
                                                          "[::1]:",
                                                          "ssh://host",
                                                          "host:-1",
                                                          "'host'",
                                                          "host|id"}) {
    SCOPED_TRACE(jump);
    try {
      resolveSshTarget({.host = "login", .ranks = 1, .proxy_jump = jump}, "");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(e.message().find("host 'login'"), std::string::npos) << e.message();
    }
  }
}

TEST(SshJumpHops, AJumpLoopInTheConfigIsRefused) {
  char pattern[] = "/tmp/rm-ssh-jump-loop-XXXXXX";
  const fs::path dir = ::mkdtemp(pattern);
  std::ofstream(dir / "config") << "Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n";
  try {
    resolveSshTarget({.host = "a", .ranks = 1}, (dir / "config").string());
    ADD_FAILURE() << "a loop was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("more than 8 jump hosts"), std::string::npos) << e.message();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ringmaster
