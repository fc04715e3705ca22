// SSH against a real OpenSSH sshd on 127.0.0.1: host-key verification before authentication
// (known, unknown, accepted, changed, and a hostile ~/.ssh/config), wrong keys, unreachable and
// silent ports, the ssh_config reader, name validation, shell quoting against an injection corpus
// (run by a real shell, here and through sshd), ringmaster-node uploaded to a host lacking it,
// launches to many hosts on a bounded number of threads, a refused thread included, and (issue 36)
// the one launch shell per host: the spec and the store's address passed exactly, every other node
// version and a job directory that cannot be made refused naming the host, no agent started.
#include <gtest/gtest.h>
#include <pwd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/injection_corpus.h"
#include "common/sshd_server.h"
#include "common/test_paths.h"
#include "core/error.h"
#include "spec/job_spec.h"
#include "ssh/ssh_launcher.h"
#include "ssh/ssh_session.h"
#include "ssh/ssh_target.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::CapturedProcess;
using testing::SshdServer;

std::string localUser() {
  return ::getpwuid(::getuid())->pw_name;
}

fs::path freshDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / fmt::format("ringmaster-{}-{}", name, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

class SshTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = testing::sshdUnavailable(); !why.empty()) GTEST_SKIP() << why;
    dir_ = freshDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    testing::makeKey(dir_ / "id_user");
    server_ = std::make_unique<SshdServer>(dir_ / "sshd", dir_ / "id_user.pub");
    known_hosts_ = dir_ / "known_hosts";
    std::ofstream(known_hosts_).close();
  }
  void TearDown() override {
    server_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  void trustServer() { std::ofstream(known_hosts_, std::ios::app) << server_->knownHostsLine(); }
  SshTarget target() const {
    return {.alias = "test-host",
            .hostname = "127.0.0.1",
            .port = server_->port(),
            .user = localUser(),
            .identity_files = {(dir_ / "id_user").string()}};
  }
  SshConnectOptions connectOptions() const {
    SshConnectOptions options;
    options.connect_timeout = 5s;
    options.known_hosts_path = known_hosts_.string();
    options.use_agent = false;
    return options;
  }
  std::string expectRefused(const SshTarget& target, const SshConnectOptions& options) {
    try {
      SshSession session(target, options);
    } catch (const Error& e) {
      return e.message();
    }
    ADD_FAILURE() << "the connection was not refused";
    return "";
  }

  fs::path dir_, known_hosts_;
  std::unique_ptr<SshdServer> server_;
};

TEST_F(SshTest, AKnownHostRunsCommandsAndTakesFilesBySftp) {
  trustServer();
  SshSession session(target(), connectOptions());
  EXPECT_EQ(session.fingerprint().rfind("SHA256:", 0), 0u) << session.fingerprint();
  CommandResult result = session.run("echo out; echo err >&2; cat; exit 3", 10s, "from stdin");
  EXPECT_EQ(result.exit_status, 3);
  EXPECT_EQ(result.out, "out\nfrom stdin");
  EXPECT_EQ(result.err, "err\n");
  session.upload((dir_ / "uploaded").string(), "content\n", 0640);
  EXPECT_EQ(testing::readText(dir_ / "uploaded"), "content\n");
  EXPECT_EQ(fs::status(dir_ / "uploaded").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
}

// Issue 32, point 6: a host's output is kept up to a bound, whatever it sends; the rest is read
// (the command runs to its end) and counted.
TEST_F(SshTest, ACommandsOutputIsKeptUpToItsBoundAndTheRestCounted) {
  trustServer();
  SshSession session(target(), connectOptions());
  const size_t sent = 3 * kMaxCommandOutputBytes + 7;
  CommandResult result =
      session.run(fmt::format("head -c {} /dev/zero; head -c {} /dev/zero | tr '\\0' e >&2; exit 4",
                              sent, kMaxCommandOutputBytes + 1),
                  30s);
  EXPECT_EQ(result.exit_status, 4);
  EXPECT_EQ(result.out, std::string(kMaxCommandOutputBytes, '\0'));
  EXPECT_EQ(result.err, std::string(kMaxCommandOutputBytes, 'e'));
  EXPECT_EQ(result.dropped_bytes, sent - kMaxCommandOutputBytes + 1);
}

TEST_F(SshTest, AnUnknownHostIsRefusedBeforeAnyAuthentication) {
  const std::string message = expectRefused(target(), connectOptions());
  EXPECT_NE(message.find("REFUSED, the host is not in"), std::string::npos) << message;
  EXPECT_NE(message.find("SHA256:"), std::string::npos) << message;
  EXPECT_NE(message.find("test-host"), std::string::npos) << message;
  std::this_thread::sleep_for(200ms);  // let sshd write its log
  const std::string log = server_->log();
  EXPECT_EQ(log.find("publickey"), std::string::npos) << log;
  EXPECT_EQ(log.find("Accepted"), std::string::npos) << log;
  EXPECT_EQ(testing::readText(known_hosts_), "");
}

TEST_F(SshTest, AHostileSshConfigCannotTurnStrictHostKeyCheckingOff) {
  const fs::path config = dir_ / "config";
  std::ofstream(config) << "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
                           "  GlobalKnownHostsFile /dev/null\n";
  LaunchHostSpec host{.host = "127.0.0.1",
                      .ranks = 1,
                      .port = server_->port(),
                      .identity_file = (dir_ / "id_user").string()};
  SshTarget resolved = resolveSshTarget(host, config.string());
  const std::string message = expectRefused(resolved, connectOptions());
  EXPECT_NE(message.find("REFUSED"), std::string::npos) << message;
}

TEST_F(SshTest, AnUnknownKeyAcceptedByTheCallbackIsRecordedAndKnownFromThenOn) {
  SshConnectOptions options = connectOptions();
  std::string shown;
  options.accept_unknown_key = [&](const SshTarget&, const std::string& fingerprint) {
    shown = fingerprint;
    return true;
  };
  std::string fingerprint;
  {
    SshSession session(target(), options);
    fingerprint = session.fingerprint();
  }
  EXPECT_EQ(shown, fingerprint);
  EXPECT_NE(testing::readText(known_hosts_).find("[127.0.0.1]:"), std::string::npos);
  SshSession again(target(), connectOptions());  // no callback now: the key is known
  EXPECT_EQ(again.fingerprint(), fingerprint);
}

TEST_F(SshTest, AChangedHostKeyIsRefusedWithBothFingerprintsWhateverTheCallbackSays) {
  trustServer();
  std::string old_fingerprint;
  {
    SshSession session(target(), connectOptions());
    old_fingerprint = session.fingerprint();
  }
  server_->replaceHostKey();
  const std::string new_fingerprint = server_->hostKeyFingerprint();
  ASSERT_NE(new_fingerprint, old_fingerprint);
  SshConnectOptions options = connectOptions();
  bool asked = false;
  options.accept_unknown_key = [&](const SshTarget&, const std::string&) {
    asked = true;
    return true;
  };
  const std::string message = expectRefused(target(), options);
  EXPECT_NE(message.find("the host key has changed"), std::string::npos) << message;
  EXPECT_NE(message.find("known: " + old_fingerprint), std::string::npos) << message;
  EXPECT_NE(message.find("offered now: " + new_fingerprint), std::string::npos) << message;
  EXPECT_FALSE(asked);
}

TEST_F(SshTest, AWrongUserKeyIsRefused) {
  trustServer();
  testing::makeKey(dir_ / "id_other");
  SshTarget other = target();
  other.identity_files = {(dir_ / "id_other").string()};
  const std::string message = expectRefused(other, connectOptions());
  EXPECT_NE(message.find("authentication refused"), std::string::npos) << message;
  EXPECT_NE(message.find("id_other"), std::string::npos) << message;
}

TEST_F(SshTest, TheAgentAuthenticatesWithNoIdentityFileGiven) {
  trustServer();
  const fs::path socket = dir_ / "agent.sock";
  CapturedProcess agent("/usr/bin/ssh-agent", {"-D", "-a", socket.string()});
  for (int i = 0; i < 200 && !fs::exists(socket); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(fs::exists(socket)) << agent.err();
  CapturedProcess add("/usr/bin/ssh-add", {(dir_ / "id_user").string()},
                      {{"SSH_AUTH_SOCK", socket.string()}});
  ASSERT_TRUE(add.wait(10s).ok()) << add.err();
  ::setenv("SSH_AUTH_SOCK", socket.string().c_str(), 1);
  SshTarget keyless = target();
  keyless.identity_files = {(dir_ / "absent_key").string()};
  SshConnectOptions options = connectOptions();
  options.use_agent = true;
  SshSession session(keyless, options);
  EXPECT_EQ(session.run("echo agent", 10s).out, "agent\n");
  ::unsetenv("SSH_AUTH_SOCK");
  agent.signal(SIGTERM);
  agent.wait(5s);
}

TEST_F(SshTest, APasswordIsAskedOnlyForAHostThatOptedIn) {
  trustServer();
  server_->allowPasswords();
  testing::makeKey(dir_ / "id_other");
  SshTarget target_without = target();
  target_without.identity_files = {(dir_ / "id_other").string()};
  SshConnectOptions options = connectOptions();
  int asked = 0;
  options.password = [&](const SshTarget&) -> std::optional<std::string> {
    ++asked;
    return std::string("not-the-password");
  };
  std::string message = expectRefused(target_without, options);
  EXPECT_EQ(asked, 0) << "asked for a password without the host's opt-in";
  EXPECT_EQ(message.find("password"), std::string::npos) << message;

  SshTarget opted_in = target_without;
  opted_in.password_auth = true;
  message = expectRefused(opted_in, options);
  EXPECT_EQ(asked, 1);
  EXPECT_NE(message.find("tried: " + (dir_ / "id_other").string() + ", password"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("not-the-password"), std::string::npos) << message;
}

TEST_F(SshTest, AnEncryptedKeyIsUnlockedThroughThePassphraseCallback) {
  trustServer();
  testing::makeKey(dir_ / "id_locked", "planted-passphrase-4711");
  std::ofstream(dir_ / "sshd" / "authorized_keys", std::ios::app)
      << testing::readText(dir_ / "id_locked.pub");
  SshTarget locked = target();
  locked.identity_files = {(dir_ / "id_locked").string()};
  SshConnectOptions options = connectOptions();
  int asked = 0;
  options.passphrase = [&](const std::string& file) -> std::optional<std::string> {
    ++asked;
    EXPECT_EQ(file, (dir_ / "id_locked").string());
    return std::string("planted-passphrase-4711");
  };
  SshSession session(locked, options);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(session.run("echo in", 10s).out, "in\n");
}

TEST_F(SshTest, AClosedPortFailsAtOnceAndASilentOneWithinTheConnectTimeout) {
  SshTarget closed = target();
  closed.port = testing::freeLoopbackPort();
  const auto start = std::chrono::steady_clock::now();
  std::string message = expectRefused(closed, connectOptions());
  EXPECT_NE(message.find("test-host"), std::string::npos) << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);

  // A listener that never speaks SSH: the banner never comes.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::listen(listener, 4);
  socklen_t length = sizeof address;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  SshTarget silent = target();
  silent.port = ntohs(address.sin_port);
  SshConnectOptions options = connectOptions();
  options.connect_timeout = 1500ms;
  const auto silent_start = std::chrono::steady_clock::now();
  message = expectRefused(silent, options);
  const auto took = std::chrono::steady_clock::now() - silent_start;
  ::close(listener);
  EXPECT_GE(took, 1s) << message;
  EXPECT_LT(took, 10s) << message;
  EXPECT_NE(message.find("test-host"), std::string::npos) << message;
}

// ---------------------------------------------------------------------------------------------
// The launcher, on one host.

const std::string kNode = std::string(ringmaster::testBinaryDir()) + "/app/ringmaster-node";

class SshLaunch : public SshTest {
 protected:
  // A 2-rank DDP job on the test's sshd, the paths it is given full of shell syntax (a job name
  // can hold none: the spec allows letters, digits, '.', '_' and '-').
  SshLaunchOptions launchOptions(const std::string& node_binary) {
    std::ifstream in(std::string(ringmaster::testSourceDir()) + "/resources/examples/ddp_mlp.json");
    nlohmann::json spec = nlohmann::json::parse(in);
    spec["name"] = "ssh-upload";
    spec["train"]["steps"] = 3;
    spec["launch"]["hosts"] = {{{"host", "127.0.0.1"},
                                {"port", server_->port()},
                                {"ranks", 2},
                                {"identity_file", (dir_ / "id_user").string()}}};
    SshLaunchOptions options;
    options.hosts = {LaunchHostSpec{.host = "127.0.0.1",
                                    .ranks = 2,
                                    .port = server_->port(),
                                    .identity_file = (dir_ / "id_user").string()}};
    options.spec_json = spec.dump();
    options.node_binary = node_binary;
    options.local_node_binary = kNode;
    options.remote_cache_dir = (dir_ / "node cache; touch CANARY").string();
    options.ssh_config_path = "";
    options.connect = connectOptions();
    options.grace = 2s;
    return options;
  }
  // Pumps to the end; returns the telemetry lines.
  std::vector<std::string> runToEnd(Launch& launch) {
    std::vector<std::string> lines;
    LaunchSink sink{.on_telemetry = [&](std::string_view line) { lines.emplace_back(line); },
                    .on_log = [](std::string_view) {}};
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (launch.pump(100ms, sink)) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "the job did not end";
        launch.kill();
      }
    }
    return lines;
  }
};

TEST_F(SshLaunch, AHostLackingRingmasterNodeGetsThisBuildUploadedIntoAVersionCache) {
  trustServer();
  const std::string missing = (dir_ / "no such dir; touch CANARY" / "ringmaster-node").string();
  SshLauncher launch(launchOptions(missing));
  ASSERT_EQ(launch.hosts().size(), 1u);
  const SshHostRecord& host = launch.hosts()[0];
  EXPECT_TRUE(host.uploaded);
  EXPECT_EQ(host.node_binary.rfind((dir_ / "node cache; touch CANARY").string(), 0), 0u)
      << host.node_binary;
  EXPECT_TRUE(fs::exists(host.node_binary));
  const auto lines = runToEnd(launch);
  EXPECT_TRUE(launch.wait().ok());
  EXPECT_TRUE(launch.failure().empty()) << launch.failure();
  EXPECT_GT(lines.size(), 4u);
  EXPECT_FALSE(fs::exists(dir_ / "CANARY"));
  EXPECT_FALSE(fs::exists(fs::path(std::getenv("HOME")) / "CANARY"));

  // The next launch finds the cached build and uploads nothing.
  SshLauncher again(launchOptions(missing));
  EXPECT_FALSE(again.hosts()[0].uploaded);
  runToEnd(again);
  EXPECT_TRUE(again.wait().ok());
}

TEST_F(SshLaunch, WithoutUploadsAMissingRingmasterNodeIsAClearErrorNamingTheHost) {
  trustServer();
  SshLaunchOptions options = launchOptions("/opt/nowhere/ringmaster-node");
  options.upload_node_binary = false;
  try {
    SshLauncher launch(options);
    ADD_FAILURE() << "the launch started";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("/opt/nowhere/ringmaster-node is not there or does not run"),
              std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find(fmt::format("127.0.0.1:{}", server_->port())), std::string::npos)
        << e.message();
  }
}

// Issue 16, finding 10, over SSH: a stand-in node prints a 10 MB telemetry line on stdout and the
// agent's report of a worker's oversized line on stderr; the launcher passes both to on_bad_line,
// the report under its rank, and the line after them as telemetry.
TEST_F(SshLaunch, OversizedLinesAndTheAgentsReportsArePassedOnAsBadLines) {
  trustServer();
  const LineSplitter::Line worker_line{.text = "{", .oversized = true, .bytes = 20'000'000};
  std::ofstream(dir_ / "report.txt")
      << "[agent node 0] " << oversizedLineReport(1, worker_line, kMaxLineBytes) << "\n";
  const fs::path node = dir_ / "stand-in-node";
  std::ofstream(node) << fmt::format(
      "#!/bin/sh\n"
      "if [ \"$1\" = --version ]; then echo '{}'; exit 0; fi\n"
      "echo '[agent node 0] rendezvous store on 127.0.0.1:1' >&2\n"
      "head -c 10485760 /dev/zero | tr '\\0' x; printf '\\nlast\\n'\n"
      "cat '{}' >&2\n",
      expectedNodeVersion(), (dir_ / "report.txt").string());
  fs::permissions(node, fs::perms::owner_all);
  SshLauncher launch(launchOptions(node.string()));
  std::vector<std::pair<std::optional<int>, std::string>> bad;
  std::vector<std::string> telemetry;
  const LaunchSink sink{
      .on_telemetry = [&](std::string_view line) { telemetry.emplace_back(line); },
      .on_log = [](std::string_view) {},
      .on_bad_line = [&](std::optional<int> rank,
                         std::string_view report) { bad.emplace_back(rank, report); }};
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (launch.pump(100ms, sink)) ASSERT_LT(std::chrono::steady_clock::now(), deadline);
  EXPECT_TRUE(launch.wait().ok());

  EXPECT_EQ(telemetry, std::vector<std::string>{"last"});
  ASSERT_EQ(bad.size(), 2u);
  std::sort(bad.begin(), bad.end());
  EXPECT_EQ(bad[0].first, std::nullopt);
  EXPECT_NE(bad[0].second.find("oversized telemetry line: 10485760 bytes"), std::string::npos)
      << bad[0].second;
  EXPECT_NE(bad[0].second.find(fmt::format("127.0.0.1:{}", server_->port())), std::string::npos)
      << bad[0].second;
  EXPECT_EQ(bad[1].first, 1);
  EXPECT_NE(bad[1].second.find("from rank 1: 20000000 bytes"), std::string::npos) << bad[1].second;
}

// Issue 21: a program job's launch.env and launch.env_file reach its workers on an SSH host byte
// for byte (the spec travels as a file on the agent's stdin, the environment through exec, never
// a command line), and the hostile value executes nothing there.
TEST_F(SshLaunch, LaunchEnvReachesTheWorkersOnTheHostUnchangedAndExecutesNothing) {
  trustServer();
  const fs::path canary = dir_ / "CANARY";
  const std::string hostile = fmt::format(
      "two  spaces 'single' \"double\" $(touch {0}) `touch {0}` ; touch {0} ${{HOME}}\nline two",
      canary.string());
  const fs::path out = dir_ / "env-out";
  fs::create_directories(out);
  std::ofstream(dir_ / "worker.sh") << fmt::format(
      "printf '%s' \"$HOSTILE\" > '{0}/HOSTILE.'$RANK\n"
      "printf '%s' \"$HF_TOKEN\" > '{0}/HF_TOKEN.'$RANK\n"
      "printf '%s' \"$RANK/$WORLD_SIZE\" > '{0}/RANK.'$RANK\n",
      out.string());
  std::ofstream(dir_ / "job.env") << "# read by the agent on the host\nHF_TOKEN=hf_on the host\n";
  const nlohmann::json spec = {
      {"name", "ssh-env"},
      {"program", {{"python", "sh"}, {"script", "worker.sh"}, {"workdir", dir_.string()}}},
      {"launch",
       {{"hosts",
         {{{"host", "127.0.0.1"},
           {"port", server_->port()},
           {"ranks", 2},
           {"identity_file", (dir_ / "id_user").string()}}}},
        {"env", {{"HOSTILE", hostile}}},
        {"env_file", (dir_ / "job.env").string()},
        {"timeout_s", 30}}}};
  ASSERT_TRUE(parseJobSpec(spec).ok()) << parseJobSpec(spec).describe();
  SshLaunchOptions options = launchOptions(kNode);
  options.spec_json = spec.dump();
  SshLauncher launch(options);
  runToEnd(launch);
  EXPECT_TRUE(launch.wait().ok()) << launch.failure();
  // Nothing but fixed words and paths was on the command line sshd ran.
  EXPECT_EQ(launch.hosts()[0].command.find("HOSTILE"), std::string::npos)
      << launch.hosts()[0].command;
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    const auto got = [&](const std::string& name) {
      std::ifstream in(out / fmt::format("{}.{}", name, rank), std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    EXPECT_EQ(got("HOSTILE"), hostile);
    EXPECT_EQ(got("HF_TOKEN"), "hf_on the host");
    EXPECT_EQ(got("RANK"), fmt::format("{}/2", rank));
  }
  EXPECT_FALSE(fs::exists(canary)) << "a value was executed";
}

// ---------------------------------------------------------------------------------------------
// Many hosts (issue 32, point 4): a bounded number of threads, whatever the number of hosts.

// Counts the thread bodies running at once; refuses the thread at position `refuse` (if any) as
// the system does at its thread limit (ulimit -u), which a test cannot safely reach for real.
struct ThreadCounter {
  std::atomic<int> running{0}, most{0}, started{0};
  int refuse = -1;

  ThreadStarter starter() {
    return [this](std::function<void()> body) {
      if (started++ == refuse)
        throw std::system_error(EAGAIN, std::generic_category(), "thread creation refused");
      return std::thread([this, body = std::move(body)] {
        const int now = ++running;
        for (int seen = most; now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        body();
        --running;
      });
    };
  }
};

int threadsOfThisProcess() {
  int count = 0;
  for ([[maybe_unused]] const auto& task : fs::directory_iterator("/proc/self/task")) ++count;
  return count;
}

// A listener on 127.0.0.1 that accepts (into its backlog) and never speaks; its port.
class MuteListener {
 public:
  MuteListener() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(fd_, 64);
    socklen_t length = sizeof address;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  ~MuteListener() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

// 300 hosts that all fail, closed ports on 127.0.x.y and every 15th a listener that never speaks
// (each of those takes the whole connect timeout): every host is tried, the launch's error counts
// them all and lists the first 20, and the process never holds more than the launch's bound of
// threads (sampled from /proc/self/task while it goes).
TEST_F(SshLaunch, ThreeHundredFailingHostsAreEachTriedAndReportedOnABoundedNumberOfThreads) {
  MuteListener mute;
  const int closed_port = testing::freeLoopbackPort();
  SshLaunchOptions options = launchOptions(kNode);
  options.hosts.clear();
  for (int i = 0; i < 300; ++i) {
    const bool silent = i % 15 == 7;
    options.hosts.push_back(
        {.host = silent ? "127.0.0.1" : fmt::format("127.0.{}.{}", 1 + i / 250, 1 + i % 250),
         .ranks = 1,
         .port = silent ? mute.port() : closed_port});
  }
  options.connect.connect_timeout = 500ms;
  options.max_threads = 8;
  ThreadCounter counter;
  options.start_thread = counter.starter();

  const int before = threadsOfThisProcess();
  std::atomic<bool> done{false};
  std::atomic<int> most_threads{0};
  std::thread sampler([&] {
    while (!done) {
      most_threads = std::max(most_threads.load(), threadsOfThisProcess());
      std::this_thread::sleep_for(1ms);
    }
  });
  std::string message;
  try {
    SshLauncher launch(options);
    ADD_FAILURE() << "the launch started";
  } catch (const Error& e) {
    message = e.message();
  }
  done = true;
  sampler.join();

  EXPECT_EQ(message.rfind("300 of 300 hosts failed:\n", 0), 0u) << message.substr(0, 2000);
  EXPECT_NE(message.find("\n  ... and 280 more"), std::string::npos) << message.substr(0, 2000);
  size_t listed = 0;
  for (size_t at = 0; (at = message.find("\n  host '", at)) != std::string::npos; ++at) ++listed;
  EXPECT_EQ(listed, 20u) << message.substr(0, 2000);
  EXPECT_NE(message.find(fmt::format("no SSH connection within 500 ms")), std::string::npos)
      << "host 7, a silent one, is among the first 20";
  EXPECT_EQ(counter.started, 8);
  EXPECT_LE(counter.most, 8);
  EXPECT_GT(most_threads, before + 1) << "the sampler saw none of the launch's threads";
  EXPECT_LE(most_threads, before + 1 + 8) << "the sampler, and at most 8 for the launch";
}

// A stop asked for while hosts are connected (a launch to many silent hosts lasts hosts /
// max_threads connect timeouts, and no tick reaches the front end meanwhile): no further host is
// tried and the launch fails saying so.
TEST_F(SshLaunch, AStopAskedForWhileConnectingTriesNoFurtherHost) {
  MuteListener mute;
  SshLaunchOptions options = launchOptions(kNode);
  options.hosts.assign(40, {.host = "127.0.0.1", .ranks = 1, .port = mute.port()});
  options.connect.connect_timeout = 300ms;
  options.max_threads = 2;
  std::atomic<int> asked{0};
  options.stop_requested = [&] { return ++asked > 3; };  // after three hosts were taken
  try {
    SshLauncher launch(options);
    ADD_FAILURE() << "the launch started";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kComm);
    EXPECT_EQ(e.message(),
              "the launch was stopped on request before every host was tried (3 of 40)");
  }
}

// A stand-in ringmaster-node for `hosts` launches: it writes its PID and job directory under
// `dir` (by node rank), says where its store is and then reads its stdin to the end, printing
// "line from node N" first.
fs::path writeStandInNode(const fs::path& dir) {
  const fs::path node = dir / "stand-in-node";
  std::ofstream(node) << fmt::format(
      "#!/bin/sh\n"
      "if [ \"$1\" = --version ]; then echo '{0}'; exit 0; fi\n"
      "echo $$ > '{1}/pid.'$5\n"
      "dirname \"$3\" > '{1}/jobdir.'$5\n"
      "echo \"[agent node $5] rendezvous store on 127.0.0.1:1\" >&2\n"
      "echo \"line from node $5\"\n"
      "exec cat > /dev/null\n",
      expectedNodeVersion(), dir.string());
  fs::permissions(node, fs::perms::owner_all);
  return node;
}

// Five hosts served by two threads (each serves two or three in turn): every host's lines arrive,
// cancel reaches each, and the launch never runs more than two threads at once.
TEST_F(SshLaunch, HostsServedSeveralToAThreadEachDeliverTheirLinesAndStop) {
  trustServer();
  SshLaunchOptions options = launchOptions(writeStandInNode(dir_).string());
  options.hosts = std::vector<LaunchHostSpec>(5, options.hosts[0]);
  options.max_threads = 2;
  ThreadCounter counter;
  options.start_thread = counter.starter();
  SshLauncher launch(options);
  std::set<std::string> lines;
  const LaunchSink sink{.on_telemetry = [&](std::string_view line) { lines.emplace(line); },
                        .on_log = [](std::string_view) {}};
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (lines.size() < 5 && launch.pump(100ms, sink))
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
  EXPECT_EQ(lines,
            (std::set<std::string>{"line from node 0", "line from node 1", "line from node 2",
                                   "line from node 3", "line from node 4"}));
  launch.cancel();  // TERM to each agent's process group
  while (launch.pump(100ms, sink)) ASSERT_LT(std::chrono::steady_clock::now(), deadline);
  EXPECT_EQ(launch.wait().signal, SIGTERM);
  EXPECT_EQ(counter.started, 6);  // 2 connecting, 2 starting nodes 1-4, 2 serving
  EXPECT_LE(counter.most, 2);
}

bool processGone(pid_t pid, std::chrono::seconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (::kill(pid, 0) == 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// A thread the system refuses, at each of the launch's thread creations (connecting, starting the
// agents, serving): the launch throws kUnavailable naming the phase and the system's reason,
// nothing aborts, and every agent already started is stopped and its job directory removed.
TEST_F(SshLaunch, AThreadRefusedAtAnyPointOfTheLaunchIsAClearErrorAndLeavesNothingRunning) {
  trustServer();
  SshLaunchOptions options = launchOptions(writeStandInNode(dir_).string());
  options.hosts = std::vector<LaunchHostSpec>(3, options.hosts[0]);
  options.max_threads = 2;
  const std::vector<std::string> phases = {"to connect to the hosts", "to start the agents",
                                           "to serve the hosts"};
  for (int refuse = 0; refuse <= 6; ++refuse) {
    SCOPED_TRACE(refuse);
    for (int rank = 0; rank < 3; ++rank) {
      fs::remove(dir_ / fmt::format("pid.{}", rank));
      fs::remove(dir_ / fmt::format("jobdir.{}", rank));
    }
    ThreadCounter counter;
    counter.refuse = refuse;
    options.start_thread = counter.starter();
    try {
      SshLauncher launch(options);
      EXPECT_EQ(refuse, 6) << "the launch went on past a refused thread";
      launch.kill();
      launch.wait();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
      const std::string phase = phases[static_cast<size_t>(refuse / 2)];
      EXPECT_NE(e.message().find("cannot start a thread " + phase), std::string::npos)
          << e.message();
      EXPECT_NE(e.message().find(std::generic_category().message(EAGAIN)), std::string::npos)
          << e.message();
    }
    EXPECT_EQ(counter.running, 0) << "a launch thread outlived the launch";
    // Agents start once every host is prepared, node 0 first (its store line is read before the
    // others start): none before, node 0's from then on. Nodes 1 and 2 are started once serving,
    // but how far their remote shells got before the launch stopped them depends on how fast the
    // host starts a shell (a login's start-up files: root's here run `pyenv init`), so they are
    // not counted: what holds for them is the loop below, nothing of them left running.
    const int started = refuse < 2 ? 0 : 1;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    const auto agents = [&] {
      int found = 0;
      for (int rank = 0; rank < 3; ++rank) found += fs::exists(dir_ / fmt::format("pid.{}", rank));
      return found;
    };
    while (agents() < started && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    if (refuse < 2) EXPECT_EQ(agents(), 0) << "an agent started though connecting failed";
    EXPECT_GE(agents(), started);
    const auto nothingLeft = [&] {
      for (int rank = 0; rank < 3; ++rank) {
        const fs::path pid_file = dir_ / fmt::format("pid.{}", rank);
        if (!fs::exists(pid_file)) continue;
        const pid_t pid = std::stoi(testing::readText(pid_file));
        EXPECT_TRUE(processGone(pid, 15s)) << "the agent of node " << rank << " still runs";
        const std::string job_dir = testing::readText(dir_ / fmt::format("jobdir.{}", rank));
        EXPECT_FALSE(fs::exists(job_dir.substr(0, job_dir.find('\n')))) << job_dir;
      }
    };
    nothingLeft();
    // Nor does an agent whose shell was still starting when the launch stopped appear later.
    std::this_thread::sleep_for(1s);
    nothingLeft();
  }
}

// ---------------------------------------------------------------------------------------------
// Issue 36: one launch shell per host checks the node, writes the spec and becomes the agent.

// A stand-in ringmaster-node saying `version`; as an agent it records under `dir` (by node rank)
// its arguments one a line, its spec, the spec's mode and its umask, says where its store is and
// prints "line from node N", then reads its stdin to the end.
fs::path writeRecordingNode(const fs::path& dir, const std::string& version) {
  const fs::path node = dir / "recording-node";
  std::ofstream(node) << fmt::format(
      "#!/bin/sh\n"
      "if [ \"$1\" = --version ]; then printf '%s\\n' {0}; exit 0; fi\n"
      "printf '%s\\n' \"$@\" > '{1}/args.'$5\n"
      "cat \"$3\" > '{1}/spec.'$5\n"
      "stat -c %a \"$3\" > '{1}/mode.'$5\n"
      "umask > '{1}/umask.'$5\n"
      "echo \"[agent node $5] rendezvous store on 127.0.0.1:1\" >&2\n"
      "echo \"line from node $5\"\n"
      "exec cat > /dev/null\n",
      shellQuote(version), dir.string());
  fs::permissions(node, fs::perms::owner_all);
  return node;
}

std::vector<std::string> linesOf(const fs::path& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The spec reaches every agent byte for byte whatever it holds (no trailing newline, shell
// syntax, quotes, CR, NUL-free binary, several MiB: past the channel's window) and 0600, the
// store's address (a hostile master_addr here) reaches it as one argument, and the agent keeps its
// stdin (nothing read past the spec) and runs with the host's own umask.
TEST_F(SshLaunch, TheSpecAndTheStoresAddressReachEveryAgentExactlyThroughItsLaunchShell) {
  trustServer();
  const fs::path canary = dir_ / "CANARY";
  std::string large(3 << 20, 'x');
  for (size_t i = 0; i < large.size(); i += 4099) large[i] = '\n';
  const std::vector<std::string> specs = {
      "{}",
      fmt::format("{{\"a\": \"$(touch {0}) `touch {0}` ; touch {0}\\n'q' \\\"d\\\" \\\\\"}}\n\n",
                  canary.string()),
      "line one\r\nline two\twith tab \xc3\xa9\xe2\x82\xac\x01\x7f no newline at the end", large};
  const std::string master = fmt::format("$(touch {0}) `touch {0}` 'q' \"d\" \\", canary.string());
  const CommandResult host_umask = SshSession(target(), connectOptions()).run("umask", 10s);
  for (size_t s = 0; s < specs.size(); ++s) {
    SCOPED_TRACE(s);
    SshLaunchOptions options = launchOptions(writeRecordingNode(dir_, expectedNodeVersion()));
    options.hosts = std::vector<LaunchHostSpec>(2, options.hosts[0]);
    options.spec_json = specs[s];
    options.master_addr = master;
    SshLauncher launch(options);
    std::set<std::string> lines;
    const LaunchSink sink{.on_telemetry = [&](std::string_view line) { lines.emplace(line); },
                          .on_log = [](std::string_view) {}};
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (lines.size() < 2 && launch.pump(100ms, sink))
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    EXPECT_EQ(lines, (std::set<std::string>{"line from node 0", "line from node 1"}));
    for (int rank = 0; rank < 2; ++rank) {
      SCOPED_TRACE(rank);
      EXPECT_TRUE(testing::readText(dir_ / fmt::format("spec.{}", rank)) == specs[s])
          << "the spec differs";
      EXPECT_EQ(testing::readText(dir_ / fmt::format("mode.{}", rank)), "600\n");
      EXPECT_EQ(testing::readText(dir_ / fmt::format("umask.{}", rank)), host_umask.out);
      const std::vector<std::string> args = linesOf(dir_ / fmt::format("args.{}", rank));
      const auto at = std::find(args.begin(), args.end(), "--master");
      ASSERT_NE(at, args.end());
      ASSERT_NE(at + 1, args.end());
      EXPECT_EQ(at[1], fmt::format("{}:{}", master, rank == 0 ? 0 : 1));
    }
    // The agents still read their stdin: they run until the launch ends it.
    EXPECT_EQ(lines.size(), 2u);
    launch.cancel();
    while (launch.pump(100ms, sink)) ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    EXPECT_EQ(launch.wait().signal, SIGTERM);
  }
  EXPECT_FALSE(fs::exists(canary)) << "a value was executed";
}

// Every version other than this build's, byte for byte (another release, this one with a space
// or a line after it, a prefix of it, nothing, shell syntax), is refused with the version found
// and the host named when uploads are not allowed: no agent runs, and the job directory is
// removed.
TEST_F(SshLaunch, EveryOtherNodeVersionIsAClearErrorNamingTheHostAndStartsNoAgent) {
  trustServer();
  const fs::path tmp = dir_ / "tmp";
  fs::create_directories(tmp);
  server_->restartWithConfig(fmt::format("SetEnv TMPDIR={}\n", tmp.string()));
  const std::string expected = expectedNodeVersion();
  const fs::path canary = dir_ / "CANARY";
  const std::vector<std::string> versions = {
      "ringmaster-node 0.0.1 (telemetry protocol 1)",
      expected + " ",
      expected + "\nanother line",
      expected.substr(0, expected.size() - 1),
      "",
      fmt::format("$(touch {0}) `touch {0}` '", canary.string())};
  for (const std::string& version : versions) {
    SCOPED_TRACE(version);
    const fs::path node = writeRecordingNode(dir_, version);
    SshLaunchOptions options = launchOptions(node.string());
    options.upload_node_binary = false;
    try {
      SshLauncher launch(options);
      ADD_FAILURE() << "the launch started";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnavailable) << e.message();
      EXPECT_NE(e.message().find(fmt::format("127.0.0.1:{}", server_->port())), std::string::npos)
          << e.message();
      const std::string why =
          version.empty() ? fmt::format("{} is not there or does not run", node.string())
                          : fmt::format("{} is '{}', not '{}'", node.string(), version, expected);
      EXPECT_NE(e.message().find(why), std::string::npos) << e.message();
    }
    EXPECT_FALSE(fs::exists(dir_ / "args.0")) << "the agent ran";
    EXPECT_TRUE(fs::is_empty(tmp)) << "a job directory was left";
  }
  EXPECT_FALSE(fs::exists(canary)) << "a version was executed";
}

// A host where no job directory can be made (its TMPDIR missing) fails the launch naming it and
// the shell's reason; the other host's agent never starts and its job directory is removed.
TEST_F(SshLaunch, AJobDirectoryThatCannotBeMadeFailsNamingTheHostAndStartsNoAgent) {
  trustServer();
  const fs::path tmp = dir_ / "tmp";
  fs::create_directories(tmp);
  SshdServer other(dir_ / "sshd-other", dir_ / "id_user.pub");
  std::ofstream(known_hosts_, std::ios::app) << other.knownHostsLine();
  other.restartWithConfig(fmt::format("SetEnv TMPDIR={}\n", (dir_ / "missing-dir").string()));
  server_->restartWithConfig(fmt::format("SetEnv TMPDIR={}\n", tmp.string()));
  SshLaunchOptions options = launchOptions(writeRecordingNode(dir_, expectedNodeVersion()));
  options.hosts.push_back(options.hosts[0]);
  options.hosts[1].port = other.port();
  try {
    SshLauncher launch(options);
    ADD_FAILURE() << "the launch started";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo) << e.message();
    EXPECT_NE(e.message().find(
                  fmt::format("@127.0.0.1:{}): cannot create a job directory: ", other.port())),
              std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find("missing-dir"), std::string::npos) << e.message();
  }
  std::this_thread::sleep_for(500ms);  // an agent told to start would have written by now
  EXPECT_FALSE(fs::exists(dir_ / "args.0")) << "node 0's agent ran";
  EXPECT_TRUE(fs::is_empty(tmp)) << "node 0's job directory was left";
}

// A host whose key is unknown, or changed, is refused before any authentication while the other
// hosts connect in parallel: the launch names it, that sshd never saw a key offered, and no agent
// starts anywhere.
TEST_F(SshLaunch, AHostWithAnUnknownOrChangedKeyFailsTheLaunchBeforeAuthenticatingThere) {
  trustServer();
  const fs::path tmp = dir_ / "tmp";
  fs::create_directories(tmp);
  server_->restartWithConfig(fmt::format("SetEnv TMPDIR={}\n", tmp.string()));
  SshdServer other(dir_ / "sshd-other", dir_ / "id_user.pub");
  SshLaunchOptions options = launchOptions(writeRecordingNode(dir_, expectedNodeVersion()));
  options.hosts.push_back(options.hosts[0]);
  options.hosts[1].port = other.port();
  options.connect.accept_unknown_key = [](const SshTarget&, const std::string&) { return false; };
  for (const std::string refusal : {"the host is not in", "the host key has changed"}) {
    SCOPED_TRACE(refusal);
    if (refusal == "the host key has changed") {
      std::ofstream(known_hosts_, std::ios::app) << other.knownHostsLine();
      other.replaceHostKey();
    }
    try {
      SshLauncher launch(options);
      ADD_FAILURE() << "the launch started";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find(fmt::format("127.0.0.1:{}): REFUSED, {}", other.port(), refusal)),
                std::string::npos)
          << e.message();
    }
    std::this_thread::sleep_for(500ms);  // let sshd write its log; an agent would have started
    const std::string log = other.log();
    EXPECT_EQ(log.find("publickey"), std::string::npos) << log;
    EXPECT_EQ(log.find("Accepted"), std::string::npos) << log;
    EXPECT_FALSE(fs::exists(dir_ / "args.0")) << "node 0's agent ran";
    EXPECT_TRUE(fs::is_empty(tmp)) << "node 0's job directory was left";
  }
}

// ---------------------------------------------------------------------------------------------
// Names and quoting.

using testing::injectionCorpus;  // tests/common/injection_corpus.h

TEST(ShellQuote, AShellGivesBackExactlyEachWordOfTheInjectionCorpus) {
  const fs::path dir = freshDir("quote");
  for (const std::string& word : injectionCorpus()) {
    CapturedProcess sh("/bin/sh", {"-c", "cd " + shellQuote(dir.string()) + " && printf '%s|' " +
                                             shellQuote(word)});
    ASSERT_TRUE(sh.wait(10s).ok()) << word;
    EXPECT_EQ(sh.out(), word + "|") << word;
  }
  EXPECT_FALSE(fs::exists(dir / "CANARY"));
  EXPECT_EQ(shellCommand({"a b", "c'd"}), "'a b' 'c'\\''d'");
  fs::remove_all(dir);
}

TEST_F(SshTest, TheRemoteShellReceivesExactlyTheIntendedArguments) {
  trustServer();
  SshSession session(target(), connectOptions());
  std::vector<std::string> argv = {"printf", "%s|"};
  for (const auto& word : injectionCorpus()) argv.push_back(word);
  CommandResult result =
      session.run("cd " + shellQuote(dir_.string()) + " && " + shellCommand(argv), 10s);
  std::string expected;
  for (const auto& word : injectionCorpus()) expected += word + "|";
  EXPECT_EQ(result.out, expected);
  EXPECT_FALSE(fs::exists(dir_ / "CANARY"));
}

TEST(SshTarget, HostAndUserNamesFromTheCorpusAreRejectedBeforeConnecting) {
  for (const std::string& word : injectionCorpus()) {
    LaunchHostSpec host{.host = word, .ranks = 1};
    EXPECT_THROW(resolveSshTarget(host, ""), Error) << word;
    LaunchHostSpec user{.host = "node1", .ranks = 1, .user = word};
    EXPECT_THROW(resolveSshTarget(user, ""), Error) << word;
  }
  LaunchHostSpec fine{.host = "gpu-node.example.org", .ranks = 1, .user = "alice_b"};
  EXPECT_EQ(resolveSshTarget(fine, "").user, "alice_b");
}

TEST(SshTarget, AnAliasBringsItsConfigAndTheEntryFieldsWin) {
  const fs::path dir = freshDir("config");
  std::ofstream(dir / "config") << "# cluster\n"
                                   "Host gpu? !gpu9\n"
                                   "  HostName 10.0.0.7\n"
                                   "  Port=2222\n"
                                   "  User trainer\n"
                                   "  IdentityFile ~/.ssh/id_gpu\n"
                                   "Host *\n"
                                   "  User fallback\n"
                                   "  Port 22\n"
                                   "  IdentityFile \"/keys/%r@%h\"\n"
                                   "Host jump\n"
                                   "  ProxyJump bastion\n";
  SshTarget gpu = resolveSshTarget({.host = "gpu1", .ranks = 1}, (dir / "config").string());
  EXPECT_EQ(gpu.hostname, "10.0.0.7");
  EXPECT_EQ(gpu.port, 2222);
  EXPECT_EQ(gpu.user, "trainer");
  ASSERT_EQ(gpu.identity_files.size(), 2u);
  EXPECT_EQ(gpu.identity_files[0], std::string(std::getenv("HOME")) + "/.ssh/id_gpu");
  EXPECT_EQ(gpu.identity_files[1], "/keys/trainer@10.0.0.7");

  SshTarget excluded = resolveSshTarget({.host = "gpu9", .ranks = 1}, (dir / "config").string());
  EXPECT_EQ(excluded.hostname, "gpu9");
  EXPECT_EQ(excluded.user, "fallback");

  SshTarget overridden = resolveSshTarget({.host = "gpu2", .ranks = 1, .port = 2200, .user = "me"},
                                          (dir / "config").string());
  EXPECT_EQ(overridden.port, 2200);
  EXPECT_EQ(overridden.user, "me");

  // Issue 35: ProxyJump is resolved (refused before), the jump host through the config too.
  SshTarget jumped = resolveSshTarget({.host = "jump", .ranks = 1}, (dir / "config").string());
  ASSERT_NE(jumped.via, nullptr);
  EXPECT_EQ(jumped.via->alias, "bastion");
  EXPECT_EQ(jumped.via->user, "fallback");
  EXPECT_EQ(jumped.via->via, nullptr);
  fs::remove_all(dir);
}

// Issue 16, finding 4: an ssh config is bounded before it is read; /dev/zero (one endless line)
// or a huge file is refused naming the file, and a missing one is no config at all.
TEST(SshTarget, AnEndlessOrHugeConfigIsRefusedNotReadOn) {
  const fs::path dir = freshDir("config_bounds");
  std::ofstream(dir / "huge") << std::string((1 << 20) + 1, '#');
  for (const std::string& path : {std::string("/dev/zero"), (dir / "huge").string()}) {
    SCOPED_TRACE(path);
    try {
      resolveSshTarget({.host = "gpu1", .ranks = 1}, path);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat);
      EXPECT_NE(e.message().find(path + ": "), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("the 1 MiB a config file for ssh may have"), std::string::npos)
          << e.message();
    }
    EXPECT_THROW(sshConfigAliases(path), Error);
  }
  EXPECT_EQ(resolveSshTarget({.host = "gpu1", .ranks = 1}, (dir / "none").string()).hostname,
            "gpu1");
  EXPECT_TRUE(sshConfigAliases((dir / "none").string()).empty());
  fs::remove_all(dir);
}

// libssh results are checked like every other foreign call: a failure names the host, the call
// and libssh's message; success passes.
TEST(CheckSsh, AFailedLibsshCallThrowsNamingTheHostAndTheCall) {
  EXPECT_NO_THROW(checkSsh(nullptr, 0, "ssh_send_keepalive", "host 'a'"));
  try {
    checkSsh(nullptr, -1, "ssh_options_set(SSH_OPTIONS_HOST)", "host 'gpu-box'");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kComm);
    EXPECT_NE(e.message().find("host 'gpu-box': ssh_options_set(SSH_OPTIONS_HOST) failed"),
              std::string::npos)
        << e.message();
  }
}

}  // namespace
}  // namespace ringmaster
