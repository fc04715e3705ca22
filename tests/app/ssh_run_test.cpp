// `ringmaster run` over SSH onto two real sshd "hosts" on 127.0.0.1 (2 ranks each): every event
// sent reaches the database and the hosts are recorded with their verified keys; Ctrl-C leaves no
// process on the hosts; a connection cut mid-run ends that host's agent and workers and fails the
// run naming the host; a passphrase never reaches the database or the logs; a program job's
// script runs from its folder uploaded to each host; a 300-host launch that mostly fails fails
// the run counting every host.
#include <gtest/gtest.h>
#include <pwd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/python_torch.h"
#include "common/ssh_hosts.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using storage::testing::queryText;
using storage::testing::storedEvents;
using testing::CapturedProcess;

const std::string kRingmaster = testing::ringmasterBinary();

// The PIDs of sshd's descendants that are sshd processes (the connection's own processes).
std::vector<pid_t> sshdSessionProcesses(pid_t listener) {
  std::vector<pid_t> found;
  for (pid_t pid : testing::descendantsOf(listener)) {
    if (testing::readProcFile(pid, "comm") == "sshd\n") found.push_back(pid);
  }
  return found;
}

// The remote job directories of every run in the database, from the commands recorded per host.
std::vector<std::string> jobDirsOf(const std::string& db_path) {
  std::vector<std::string> dirs;
  if (!fs::exists(db_path)) return dirs;
  storage::Database db(db_path);
  const std::string commands =
      queryText(db, "SELECT coalesce(group_concat(command, '\n'), '') FROM run_hosts");
  for (size_t at = commands.find("/ringmaster-job."); at != std::string::npos;
       at = commands.find("/ringmaster-job.", at + 1)) {
    const size_t begin = commands.rfind('\'', at) + 1;
    dirs.push_back(commands.substr(begin, commands.find('/', at + 1) - begin));
  }
  return dirs;
}

// Processes on the "hosts" (this machine) that belong to a job recorded in the database.
std::vector<pid_t> jobProcessesOf(const std::string& db_path) {
  std::vector<pid_t> found;
  const auto dirs = jobDirsOf(db_path);
  if (dirs.empty()) return found;
  for (const pid_t pid : testing::processIds()) {
    const std::string text = testing::readProcFile(pid, "cmdline");
    for (const auto& dir : dirs)
      if (text.find(dir) != std::string::npos) found.push_back(pid);
  }
  return found;
}

class SshRun : public testing::CliRunTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    if (auto why = testing::sshdUnavailable(); !why.empty()) GTEST_SKIP() << why;
    servers_ = testing::startSshHosts(dir_, 2);
  }
  void TearDown() override {
    for (pid_t pid : jobProcesses()) ::kill(pid, SIGKILL);  // only after a failure
    servers_.clear();
    StorageTest::TearDown();
  }

  // A DDP spec over the two hosts, 2 ranks each, telemetry every step.
  std::string writeSpec(int steps, const std::string& name = "ssh-ddp") {
    json spec = testing::exampleSpec("ddp_mlp");
    spec["name"] = name;
    spec["train"]["steps"] = steps;
    spec["telemetry"]["every_steps"] = 1;
    spec["launch"]["hosts"] = testing::loopbackLaunchHosts(servers_, dir_, 2);
    const fs::path path = dir_ / "spec.json";
    std::ofstream(path) << spec.dump(2);
    return path.string();
  }
  std::vector<std::string> runArgs(const std::string& spec, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--db", dbPath(), "run", spec};
    for (const std::string& option : testing::sshOptions(dir_)) args.push_back(option);
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  std::vector<std::string> jobDirs() const { return jobDirsOf(dbPath()); }
  std::vector<pid_t> jobProcesses() const { return jobProcessesOf(dbPath()); }
  bool noJobProcessesLeft(std::chrono::seconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!jobProcesses().empty()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(50ms);
    }
    return true;
  }
  // Waits until the run has stored a step event of every rank.
  bool waitForTraining(CapturedProcess& run, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      run.readFor(200ms);
      if (!fs::exists(dbPath())) continue;
      storage::Database db(dbPath());
      if (queryInt(db, "SELECT count(DISTINCT rank) FROM steps") == 4) return true;
    }
    return false;
  }

  testing::SshdServers servers_;
};

TEST_F(SshRun, TrainsAcrossTwoHostsAndStoresEveryEventSent) {
  const std::string telemetry = (dir_ / "telemetry.jsonl").string();
  CapturedProcess run(kRingmaster, runArgs(writeSpec(15), {"--save-telemetry", telemetry}));
  const ExitStatus status = run.wait(240s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.err();

  std::map<int, int64_t> sent;
  std::ifstream in(telemetry);
  for (std::string line; std::getline(in, line);) {
    const DecodeResult decoded = decodeEvent(line);
    ASSERT_TRUE(decoded.ok()) << line;
    EXPECT_EQ(decoded.event().seq, static_cast<uint64_t>(sent[decoded.event().rank]));
    ++sent[decoded.event().rank];
  }
  ASSERT_EQ(sent.size(), 4u);
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "completed");
  for (const auto& [rank, count] : sent) {
    EXPECT_EQ(storedEvents(db, rank), count) << "rank " << rank;
  }
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM ranks"), 4);
  ASSERT_EQ(queryInt(db, "SELECT count(*) FROM run_hosts"), 2);
  for (int node = 0; node < 2; ++node) {
    EXPECT_EQ(
        queryText(db, fmt::format("SELECT fingerprint FROM run_hosts WHERE node_rank = {}", node)),
        servers_[static_cast<size_t>(node)]->hostKeyFingerprint());
    const std::string command =
        queryText(db, fmt::format("SELECT command FROM run_hosts WHERE node_rank = {}", node));
    EXPECT_NE(command.find(fmt::format("'--node-rank' '{}'", node)), std::string::npos) << command;
  }
  EXPECT_FALSE(queryText(db, "SELECT libssh_version FROM run_hosts LIMIT 1").empty());
  EXPECT_TRUE(noJobProcessesLeft(15s));
  for (const auto& dir : jobDirs()) EXPECT_FALSE(fs::exists(dir)) << dir << " was left behind";
}

// A program job (issue 19): a PyTorch DDP script, its folder uploaded to each host's job
// directory with the reporter package of this build, 2 ranks a host.
TEST_F(SshRun, ASweepRunsEachMemberAcrossTheHostsWithTheSameSshOptions) {
  // Issue 37: `sweep` takes run's SSH options and hands them to every member (and would to a
  // detached driver): two members over the two sshd hosts, both completed, nothing left.
  std::vector<std::string> args = {"--db",       dbPath(), "sweep",
                                   writeSpec(4), "--axis", "optimizer.lr=0.01,0.02"};
  for (const std::string& option : testing::sshOptions(dir_)) args.push_back(option);
  CapturedProcess sweep(kRingmaster, args);
  const ExitStatus status = sweep.wait(240s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << sweep.err();
  storage::Database db(dbPath());
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM sweep_members WHERE state = 'started'"), 2);
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM runs WHERE status = 'completed' AND id IN "
                     "(SELECT run FROM sweep_members)"),
            2);
  // Each run reached both hosts, their keys verified against the test's known_hosts.
  EXPECT_EQ(queryInt(db, "SELECT count(DISTINCT run_id || ':' || node_rank) FROM run_hosts"), 4);
  EXPECT_TRUE(noJobProcessesLeft(15s));
}

TEST_F(SshRun, RunsAPyTorchScriptWithItsFolderUploadedToEachHost) {
  if (const std::string why = testing::pythonTorchUnavailable(RINGMASTER_PYTHON_TORCH);
      !why.empty())
    GTEST_SKIP() << why;
  const fs::path project = dir_ / "project";
  fs::create_directories(project / "lib");
  fs::copy_file(std::string(ringmaster::testSourceDir()) + "/tests/app/scripts/ddp_program.py",
                project / "train.py");
  std::ofstream(project / "lib" / "notes.txt") << "a file in a sub-folder travels too\n";
  json spec = {
      {"name", "ssh-program"},
      {"program",
       {{"python", RINGMASTER_PYTHON_TORCH},
        {"script", "train.py"},
        {"args", {"--steps", "8"}},
        {"workdir", project.string()},
        {"upload", true}}},
      {"launch", {{"hosts", testing::loopbackLaunchHosts(servers_, dir_, 2)}, {"timeout_s", 60}}}};
  std::ofstream(dir_ / "program.json") << spec.dump(2);
  const std::string telemetry = (dir_ / "telemetry.jsonl").string();
  CapturedProcess run(kRingmaster,
                      runArgs((dir_ / "program.json").string(), {"--save-telemetry", telemetry}));
  const ExitStatus status = run.wait(240s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.err();

  std::map<int, int64_t> sent;
  std::ifstream in(telemetry);
  for (std::string line; std::getline(in, line);) {
    const DecodeResult decoded = decodeEvent(line);
    ASSERT_TRUE(decoded.ok()) << line;
    ++sent[decoded.event().rank];
  }
  ASSERT_EQ(sent.size(), 4u);
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "completed");
  for (const auto& [rank, count] : sent) {
    SCOPED_TRACE(fmt::format("rank {}", rank));
    EXPECT_EQ(storedEvents(db, rank), count);
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM steps WHERE rank = {}", rank)), 8);
    // The DDP bucket's all-reduce every step, and the script's all_reduce of its loss.
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM comm_events WHERE rank = {} AND "
                                       "op = 'all_reduce'",
                                       rank)),
              16);
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM logs WHERE rank = {} AND message "
                                       "LIKE '%step % on stderr'",
                                       rank)),
              8);
  }
  // Every rank ran its host's copy of the folder, in the job directory, sub-folder included.
  for (int rank = 0; rank < 4; ++rank) {
    const std::string said = queryText(
        db,
        fmt::format("SELECT message FROM logs WHERE rank = {} AND message LIKE '% runs %'", rank));
    EXPECT_NE(said.find("/ringmaster-job."), std::string::npos) << said;
    EXPECT_NE(said.find("/program/train.py beside ['lib', 'train.py']"), std::string::npos) << said;
  }
  EXPECT_TRUE(noJobProcessesLeft(15s));
  for (const auto& dir : jobDirs()) EXPECT_FALSE(fs::exists(dir)) << dir << " was left behind";
}

TEST_F(SshRun, AnUnknownHostStopsTheLaunchBeforeAnythingStartsUnlessAccepted) {
  std::ofstream(dir_ / "known_hosts", std::ios::trunc) << servers_[0]->knownHostsLine();
  CapturedProcess refused(kRingmaster, runArgs(writeSpec(2), {"-q"}));
  const ExitStatus status = refused.wait(60s);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(refused.err().find("REFUSED, the host is not in"), std::string::npos) << refused.err();
  EXPECT_NE(refused.err().find(servers_[1]->hostKeyFingerprint()), std::string::npos)
      << refused.err();
  {
    storage::Database db(dbPath());
    EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "failed");
    EXPECT_EQ(queryInt(db, "SELECT count(*) FROM run_hosts"), 0);
  }
  CapturedProcess accepted(kRingmaster, runArgs(writeSpec(2), {"-q", "--accept-new-host-keys"}));
  const ExitStatus accepted_status = accepted.wait(240s);
  EXPECT_TRUE(accepted_status.ok()) << accepted.err();
  EXPECT_NE(accepted.err().find(servers_[1]->hostKeyFingerprint()), std::string::npos)
      << "the accepted fingerprint is shown";
}

// Issue 32, point 4: a launch to 300 hosts, the two real ones and 298 closed ports on 127.0.x.y,
// tries every host and fails the run (never left running) with every failure counted and the
// first ones named.
TEST_F(SshRun, ALaunchToThreeHundredHostsOfWhichMostFailFailsTheRunCountingEach) {
  json spec = testing::exampleSpec("ddp_mlp");
  spec["launch"]["hosts"] = testing::loopbackLaunchHosts(servers_, dir_, 1);
  const int closed_port = testing::freeLoopbackPort();
  for (int i = 0; i < 298; ++i) {
    spec["launch"]["hosts"].push_back(
        {{"host", fmt::format("127.0.{}.{}", 1 + i / 250, 1 + i % 250)},
         {"port", closed_port},
         {"ranks", 1}});
  }
  std::ofstream(dir_ / "spec.json") << spec.dump();
  CapturedProcess run(kRingmaster, runArgs((dir_ / "spec.json").string(), {"-q"}));
  const ExitStatus status = run.wait(120s);
  EXPECT_EQ(status.exit_code, 1) << status.describe() << "\n" << run.err();
  EXPECT_NE(run.err().find("error: 298 of 300 hosts failed:"), std::string::npos) << run.err();
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "failed");
  const std::string error = queryText(db, "SELECT error FROM runs");
  EXPECT_EQ(error.rfind("298 of 300 hosts failed:\n  host '127.0.1.1'", 0), 0u) << error;
  EXPECT_NE(error.find("... and 278 more"), std::string::npos) << error;
}

TEST_F(SshRun, CtrlCCancelsAndLeavesNoProcessOnTheHosts) {
  CapturedProcess run(kRingmaster, runArgs(writeSpec(100000), {"-q"}));
  ASSERT_TRUE(waitForTraining(run, 120s)) << run.err();
  run.signal(SIGINT);
  const ExitStatus status = run.wait(60s);
  EXPECT_EQ(status.exit_code, 130) << status.describe() << "\n" << run.err() << run.out();
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "cancelled");
  EXPECT_TRUE(noJobProcessesLeft(15s));
}

// Issue 32, point 2: the second Ctrl-C kills the agent's whole session on the host, so the
// processes a script started in its own process group die too. The child ignores SIGTERM and the
// grace period is longer than the test waits: only that kill can end it.
TEST_F(SshRun, ASecondCtrlCKillsWhatTheScriptsStartedOnTheHostToo) {
  const fs::path pids = dir_ / "pids";
  fs::create_directories(pids);
  const json spec = {{"name", "ssh-children"},
                     {"program",
                      {{"python", "/usr/bin/python3"},
                       {"script", std::string(ringmaster::testSourceDir()) +
                                      "/tests/app/scripts/children_program.py"},
                       {"args", {"waits-ignores-term", pids.string(), "0"}}}},
                     {"launch",
                      {{"hosts", json::array({{{"host", "127.0.0.1"},
                                               {"port", servers_[0]->port()},
                                               {"ranks", 1},
                                               {"identity_file", (dir_ / "id_user").string()}}})},
                       {"timeout_s", 60}}}};
  std::ofstream(dir_ / "children.json") << spec.dump(2);
  std::vector<std::string> args = runArgs((dir_ / "children.json").string(), {});
  *(std::find(args.begin(), args.end(), "--grace") + 1) = "600";
  CapturedProcess run(kRingmaster, args);
  pid_t child = 0;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (child == 0 && std::chrono::steady_clock::now() < deadline) {
    run.readFor(50ms);
    if (fs::exists(pids / "rank0"))
      for (const auto& entry : fs::directory_iterator(pids / "rank0"))
        child = std::stoi(entry.path().filename().string());
  }
  ASSERT_NE(child, 0) << run.err();
  // The second once the first was taken (two pending SIGINTs would be one).
  run.signal(SIGINT);
  const auto cancel_deadline = std::chrono::steady_clock::now() + 30s;
  while ((run.out() + run.err()).find("cancelling") == std::string::npos &&
         std::chrono::steady_clock::now() < cancel_deadline)
    run.readFor(50ms);
  run.signal(SIGINT);
  run.wait(60s);
  EXPECT_FALSE(run.timedOut()) << run.err() << run.out();
  const auto gone = [child] { return ::kill(child, 0) != 0 && errno == ESRCH; };
  const auto kill_deadline = std::chrono::steady_clock::now() + 15s;
  while (!gone() && std::chrono::steady_clock::now() < kill_deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(gone()) << "the script's child " << child << " was left running";
  if (!gone()) ::kill(child, SIGKILL);
  EXPECT_TRUE(noJobProcessesLeft(15s));
}

TEST_F(SshRun, ACutConnectionEndsThatHostsProcessesAndFailsTheRunNamingTheHost) {
  CapturedProcess run(kRingmaster, runArgs(writeSpec(100000), {"-q"}));
  ASSERT_TRUE(waitForTraining(run, 120s)) << run.err();
  const auto sessions = sshdSessionProcesses(servers_[1]->pid());
  ASSERT_FALSE(sessions.empty());
  for (pid_t pid : sessions) ::kill(pid, SIGKILL);
  const ExitStatus status = run.wait(90s);
  EXPECT_EQ(status.exit_code, 1) << status.describe() << "\n" << run.err();
  EXPECT_TRUE(noJobProcessesLeft(30s));
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "failed");
  const std::string error = queryText(db, "SELECT error FROM runs");
  EXPECT_NE(error.find(fmt::format("127.0.0.1:{}", servers_[1]->port())), std::string::npos)
      << error;
}

TEST_F(SshRun, APassphraseNeverReachesTheDatabaseTheFilesOrTheOutput) {
  const std::string secret = "planted-Passphrase-9f3c1e";
  testing::makeKey(dir_ / "id_locked", secret);
  for (int i = 0; i < 2; ++i) {
    std::ofstream(dir_ / fmt::format("sshd{}", i) / "authorized_keys", std::ios::app)
        << testing::readText(dir_ / "id_locked.pub");
  }
  const fs::path askpass = dir_ / "askpass" / "askpass.sh";
  fs::create_directories(askpass.parent_path());
  std::ofstream(askpass) << "#!/bin/sh\necho '" << secret << "'\n";
  fs::permissions(askpass, fs::perms::owner_all);
  std::string spec = testing::readText(writeSpec(3));
  for (size_t at; (at = spec.find("id_user")) != std::string::npos;)
    spec.replace(at, 7, "id_locked");
  std::ofstream(dir_ / "spec.json") << spec;

  CapturedProcess run(kRingmaster, runArgs((dir_ / "spec.json").string(), {"-v"}),
                      {{"SSH_ASKPASS", askpass.string()}, {"SSH_ASKPASS_REQUIRE", "force"}});
  const ExitStatus status = run.wait(240s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.err();
  EXPECT_EQ(run.out().find(secret), std::string::npos);
  EXPECT_EQ(run.err().find(secret), std::string::npos);
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
    if (!entry.is_regular_file() || entry.path().parent_path() == askpass.parent_path()) continue;
    ++files;
    EXPECT_EQ(testing::readText(entry.path()).find(secret), std::string::npos)
        << entry.path() << " holds the passphrase";
  }
  EXPECT_GT(files, 5);  // the database, its WAL, the spec copy, keys, sshd logs and configs
}

TEST_F(SshRun, HostsCheckShowsTheKeyTheNodeVersionCpusAndMemory) {
  std::ofstream(dir_ / "ssh_config")
      << "Host 127.0.0.1\n  IdentityFile " << (dir_ / "id_user").string() << "\n";
  const int closed_port = testing::freeLoopbackPort();
  CapturedProcess check(
      kRingmaster,
      {"hosts", "check", fmt::format("127.0.0.1:{}", servers_[0]->port()),
       fmt::format("127.0.0.1:{}", closed_port), "--known-hosts", (dir_ / "known_hosts").string(),
       "--ssh-config", (dir_ / "ssh_config").string(), "--json"});
  const ExitStatus status = check.wait(60s);
  EXPECT_EQ(status.exit_code, 1) << "one host is unreachable";
  const json reports = json::parse(check.out());
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0]["fingerprint"], servers_[0]->hostKeyFingerprint());
  EXPECT_TRUE(reports[0]["node_matches"].get<bool>()) << reports[0].dump();
  EXPECT_GE(reports[0]["cpus"].get<int>(), 1);
  EXPECT_GT(reports[0]["memory_bytes"].get<int64_t>(), 1 << 20);
  EXPECT_EQ(reports[0]["error"], "");
  EXPECT_NE(reports[1]["error"].get<std::string>().find(std::to_string(closed_port)),
            std::string::npos)
      << reports[1].dump();
}

// Three network namespaces this test creates: the launcher's, with a bridge, and two hosts joined
// to it by veth pairs, each with its own address. Everything is removed again, by name.
class NetworkNamespaces {
 public:
  NetworkNamespaces() : prefix_(fmt::format("rm{}", ::getpid())) {
    subnet_ = fmt::format("10.213.{}", ::getpid() % 200 + 20);
  }
  ~NetworkNamespaces() {
    for (const char* name : {"l", "a", "b"}) ip({"netns", "del", prefix_ + name});
  }
  // Why not, or "" once the namespaces are up.
  std::string setUp() {
    if (::geteuid() != 0) return "network namespaces need root";
    if (!fs::exists("/usr/sbin/ip")) return "no /usr/sbin/ip (iproute2)";
    if (!ip({"netns", "add", launcher()})) return "`ip netns add` is not allowed here";
    const std::vector<std::vector<std::string>> steps = {
        {"netns", "add", host(0)},
        {"netns", "add", host(1)},
        {"-n", launcher(), "link", "add", "br0", "type", "bridge"},
        {"-n", launcher(), "addr", "add", subnet_ + ".1/24", "dev", "br0"},
        {"-n", launcher(), "link", "set", "br0", "up"},
        {"-n", launcher(), "link", "set", "lo", "up"}};
    for (const auto& step : steps)
      if (!ip(step)) return "setting up the namespaces failed at ip " + step[2];
    for (int i = 0; i < 2; ++i) {
      const std::string veth = fmt::format("v{}", i);
      const std::vector<std::vector<std::string>> link = {
          {"-n", launcher(), "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns",
           host(i)},
          {"-n", launcher(), "link", "set", veth, "master", "br0"},
          {"-n", launcher(), "link", "set", veth, "up"},
          {"-n", host(i), "addr", "add", address(i) + "/24", "dev", "eth0"},
          {"-n", host(i), "link", "set", "eth0", "up"},
          {"-n", host(i), "link", "set", "lo", "up"}};
      for (const auto& step : link)
        if (!ip(step)) return "setting up the namespaces failed at ip " + step[2] + " " + step[3];
    }
    return "";
  }
  std::string launcher() const { return prefix_ + "l"; }
  std::string host(int i) const { return prefix_ + (i == 0 ? "a" : "b"); }
  std::string address(int i) const { return fmt::format("{}.{}", subnet_, i + 2); }

 private:
  static bool ip(const std::vector<std::string>& args) {
    CapturedProcess process("/usr/sbin/ip", args);
    return process.wait(30s).ok();
  }
  std::string prefix_, subnet_;
};

// Two hosts in their own network namespaces, each with its own address and sshd; the launcher
// runs in a third, joined to both by a bridge.
class SshRunAcrossNamespaces : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = testing::sshdUnavailable(); !why.empty()) GTEST_SKIP() << why;
    namespaces_ = std::make_unique<NetworkNamespaces>();
    if (auto why = namespaces_->setUp(); !why.empty()) GTEST_SKIP() << why;
    dir_ = fs::temp_directory_path() / fmt::format("ringmaster-netns-{}", ::getpid());
    fs::remove_all(dir_);
    servers_ = testing::startSshHosts(
        dir_, 2,
        [&](int i) {
          return testing::SshdPlacement{
              .netns = namespaces_->host(i), .address = namespaces_->address(i), .port = 22};
        },
        "");
  }
  void TearDown() override {
    // Processes a silent host's sshd never learnt to stop: by PID, from the recorded job dirs.
    if (!dir_.empty())
      for (pid_t pid : jobProcessesOf(dbPath())) ::kill(pid, SIGKILL);
    servers_.clear();
    namespaces_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string dbPath() const { return (dir_ / "runs.db").string(); }
  std::unique_ptr<CapturedProcess> launch(int steps) {
    json spec = testing::exampleSpec("ddp_mlp");
    spec["train"]["steps"] = steps;
    spec["telemetry"]["every_steps"] = 1;
    spec["launch"]["hosts"] = json::array();
    for (int i = 0; i < 2; ++i) {
      spec["launch"]["hosts"].push_back({{"host", namespaces_->address(i)},
                                         {"ranks", 2},
                                         {"identity_file", (dir_ / "id_user").string()}});
    }
    std::ofstream(dir_ / "spec.json") << spec.dump(2);
    return std::make_unique<CapturedProcess>(
        "/usr/sbin/ip",
        std::vector<std::string>{"netns", "exec", namespaces_->launcher(), kRingmaster, "--db",
                                 dbPath(), "run", (dir_ / "spec.json").string(), "--known-hosts",
                                 (dir_ / "known_hosts").string(), "--ssh-config",
                                 (dir_ / "ssh_config").string(), "--grace", "2", "-q"});
  }

  std::unique_ptr<NetworkNamespaces> namespaces_;
  fs::path dir_;
  testing::SshdServers servers_;
};

TEST_F(SshRunAcrossNamespaces, TrainsAcrossTwoHostsWithTheirOwnAddresses) {
  auto run = launch(10);
  const ExitStatus status = run->wait(240s);
  EXPECT_TRUE(status.ok()) << status.describe() << "\n" << run->err();
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "completed");
  EXPECT_EQ(queryInt(db, "SELECT count(DISTINCT rank) FROM steps"), 4);
  EXPECT_EQ(queryText(db, "SELECT hostname FROM run_hosts WHERE node_rank = 1"),
            namespaces_->address(1));
}

TEST_F(SshRunAcrossNamespaces, AHostThatFallsSilentFailsTheRunWithinABoundedTime) {
  auto run = launch(1000000);
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  bool training = false;
  while (!training && std::chrono::steady_clock::now() < deadline) {
    run->readFor(200ms);
    if (!fs::exists(dbPath())) continue;
    storage::Database db(dbPath());
    training = queryInt(db, "SELECT count(DISTINCT rank) FROM steps") == 4;
  }
  ASSERT_TRUE(training) << run->err();
  // The link to host 1 goes down: no reset, no end of stream, its packets simply vanish.
  CapturedProcess cut("/usr/sbin/ip", {"-n", namespaces_->launcher(), "link", "set", "v1", "down"});
  ASSERT_TRUE(cut.wait(30s).ok()) << cut.err();
  const auto cut_at = std::chrono::steady_clock::now();
  const ExitStatus status = run->wait(120s);
  const auto detected_after = std::chrono::steady_clock::now() - cut_at;
  EXPECT_EQ(status.exit_code, 1) << status.describe() << "\n" << run->err();
  EXPECT_LT(detected_after, 60s);  // keepalive every 5 s, TCP_USER_TIMEOUT 20 s, then the grace
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "failed");
  const std::string error = queryText(db, "SELECT error FROM runs");
  EXPECT_NE(error.find(namespaces_->address(1)), std::string::npos) << error;
}

}  // namespace
}  // namespace ringmaster
