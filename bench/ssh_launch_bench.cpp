// SSH launch benchmark: the time from launch to every rank's `hello` for 1, 2, 4 and 8 sshd
// "hosts" on 127.0.0.1 (one rank each), through SshLauncher (connect and verify every host,
// check ringmaster-node, write the spec there, start node 0 then the rest), beside the anchor:
// the same agents started by a plain `ssh` loop in parallel, reading a spec already on the disk,
// measured in the same run. Then (issue 32) a launch to 1,000 hosts that all fail, in a network
// namespace the benchmark makes (`unshare -rn`): unreachable (a route that rejects), silent (a
// device without carrier: packets vanish) and mute (a listener that never speaks), the time to
// every host's failure and the launcher's peak resident memory per host, beside plain `ssh` to
// the same hosts as many at a time. Needs openssh-server, openssh-client and iproute2.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/sshd_server.h"
#include "core/error.h"
#include "process/child_process.h"
#include "ssh/ssh_launcher.h"
#include "telemetry/codec.h"

namespace {

using namespace ringmaster;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const std::string kNode = std::string(RINGMASTER_BINARY_DIR) + "/app/ringmaster-node";

bool isHello(std::string_view line) {
  const DecodeResult decoded = decodeEvent(line);
  return decoded.ok() && std::holds_alternative<HelloEvent>(decoded.event().body);
}

struct Hosts {
  fs::path dir;
  std::vector<std::unique_ptr<testing::SshdServer>> servers;
  std::string user = ::getpwuid(::getuid())->pw_name;

  nlohmann::json spec(size_t n) const {
    std::ifstream in(std::string(RINGMASTER_SOURCE_DIR) + "/resources/examples/ddp_mlp.json");
    nlohmann::json spec = nlohmann::json::parse(in);
    spec["name"] = "ssh-launch-bench";
    spec["launch"]["hosts"] = nlohmann::json::array();
    for (size_t i = 0; i < n; ++i) {
      spec["launch"]["hosts"].push_back(
          {{"host", "127.0.0.1"}, {"port", servers[i]->port()}, {"ranks", 1}});
    }
    return spec;
  }
};

double ringmasterLaunch(const Hosts& hosts, size_t n) {
  SshLaunchOptions options;
  for (size_t i = 0; i < n; ++i) {
    options.hosts.push_back({.host = "127.0.0.1",
                             .ranks = 1,
                             .port = hosts.servers[i]->port(),
                             .identity_file = (hosts.dir / "id_user").string()});
  }
  options.spec_json = hosts.spec(n).dump();
  options.node_binary = kNode;
  options.local_node_binary = kNode;
  options.ssh_config_path = "";
  options.connect.known_hosts_path = (hosts.dir / "known_hosts").string();
  options.connect.use_agent = false;
  options.grace = 1s;
  const auto start = Clock::now();
  SshLauncher launch(options);
  size_t hellos = 0;
  LaunchSink sink{.on_telemetry = [&](std::string_view line) { hellos += isHello(line); },
                  .on_log = [](std::string_view) {}};
  while (hellos < n && launch.pump(20ms, sink)) {
    if (Clock::now() - start > 120s) throw std::runtime_error("no hello from every rank");
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  launch.kill();
  launch.wait();
  return ms;
}

double sshLoopLaunch(const Hosts& hosts, size_t n) {
  const fs::path spec_path = hosts.dir / fmt::format("spec-{}.json", n);
  std::ofstream(spec_path) << hosts.spec(n).dump();
  const int master_port = testing::freeLoopbackPort();
  const auto start = Clock::now();
  std::vector<ChildProcess> agents;
  for (size_t i = 0; i < n; ++i) {
    ChildOptions child;
    child.argv = {"/usr/bin/ssh",
                  "-q",
                  "-i",
                  (hosts.dir / "id_user").string(),
                  "-o",
                  "UserKnownHostsFile=" + (hosts.dir / "known_hosts").string(),
                  "-o",
                  "StrictHostKeyChecking=yes",
                  "-o",
                  "BatchMode=yes",
                  "-F",
                  "/dev/null",
                  "-p",
                  std::to_string(hosts.servers[i]->port()),
                  hosts.user + "@127.0.0.1",
                  kNode,
                  "agent",
                  "--spec",
                  spec_path.string(),
                  "--node-rank",
                  std::to_string(i),
                  "--nnodes",
                  std::to_string(n),
                  "--master",
                  fmt::format("127.0.0.1:{}", master_port),
                  "--grace",
                  "1"};
    child.stdin_mode = StreamMode::kPipe;
    child.stdout_mode = StreamMode::kPipe;
    child.stderr_mode = StreamMode::kNull;
    agents.emplace_back(child);
  }
  std::vector<LineSplitter> splitters(n);
  size_t hellos = 0;
  while (hellos < n) {
    std::vector<pollfd> fds;
    for (auto& agent : agents) fds.push_back({agent.stdoutFd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 20);
    for (size_t i = 0; i < n; ++i) {
      if ((fds[i].revents & POLLIN) == 0) continue;
      char buffer[1 << 14];
      const ssize_t got = ::read(fds[i].fd, buffer, sizeof buffer);
      if (got <= 0) continue;
      splitters[i].feed({buffer, static_cast<size_t>(got)});
      while (auto line = splitters[i].next()) hellos += isHello(line->text);
    }
    if (Clock::now() - start > 120s) throw std::runtime_error("no hello from every rank (ssh)");
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  for (auto& agent : agents) agent.closeStdin();  // the agents stop when their stdin closes
  for (auto& agent : agents) agent.stop(3s);
  return ms;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// ---------------------------------------------------------------------------------------------
// Many hosts that all fail (issue 32), inside a network namespace of the benchmark's own.

// Sets up the namespace this process runs in (made by `unshare -rn`): loopback up, 10.0.0.0/8
// on a tun device without carrier (silent: packets go nowhere), 198.18.0.0/15 rejected
// (unreachable). Returns why not, or "".
std::string setUpNamespace() {
  const std::vector<std::vector<std::string>> steps = {
      {"link", "set", "lo", "up"},
      {"tuntap", "add", "rmsilent", "mode", "tun"},
      {"addr", "add", "10.0.0.1/8", "dev", "rmsilent"},
      {"link", "set", "rmsilent", "up"},
      {"route", "add", "unreachable", "198.18.0.0/15"}};
  for (const auto& step : steps) {
    ChildOptions ip{.argv = {"/usr/sbin/ip"}, .stdout_mode = StreamMode::kNull};
    ip.argv.insert(ip.argv.end(), step.begin(), step.end());
    if (!ChildProcess(ip).wait().ok()) return "ip " + fmt::format("{}", fmt::join(step, " "));
  }
  return "";
}

// A listener on 127.0.0.1 that never accepts nor speaks; its port.
int muteListener() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::listen(fd, 4096);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

struct ManyHostsCase {
  std::string name;
  std::function<std::string(size_t)> address;
  int port = 22;
};

// "VmRSS" or "VmHWM" of this process, KiB.
long statusKib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

struct LaunchFigures {
  double ms = 0;
  double peak_kib_per_host = 0;
  std::string error;
};

// The launch to every host of `c`: the time until it fails (every host tried), and the peak
// resident memory it added (VmHWM reset first), per host.
LaunchFigures failingLaunch(const ManyHostsCase& c, size_t n, std::chrono::milliseconds timeout) {
  SshLaunchOptions options;
  for (size_t i = 0; i < n; ++i) options.hosts.push_back({.host = c.address(i), .port = c.port});
  options.spec_json = "{}";
  options.node_binary = kNode;
  options.ssh_config_path = "";
  options.connect.known_hosts_path = "/dev/null";
  options.connect.use_agent = false;
  options.connect.connect_timeout = timeout;
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
  const long before = statusKib("VmRSS");
  LaunchFigures figures;
  const auto start = Clock::now();
  try {
    SshLauncher launch(options);
    figures.error = "the launch started";
  } catch (const Error& e) {
    if (e.message().rfind(fmt::format("{} of {} hosts failed", n, n), 0) != 0)
      figures.error = e.message().substr(0, 200);
  }
  figures.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  figures.peak_kib_per_host = static_cast<double>(statusKib("VmHWM") - before) / n;
  return figures;
}

// Plain `ssh` to the same hosts, at most `at_once` at a time (pdsh's fanout, `xargs -P`): the
// time until every one has ended; each must fail.
double sshFanout(const ManyHostsCase& c, size_t n, std::chrono::milliseconds timeout,
                 size_t at_once, std::string& error) {
  const auto start = Clock::now();
  std::vector<ChildProcess> running;
  size_t next = 0, succeeded = 0;
  while (next < n || !running.empty()) {
    while (next < n && running.size() < at_once) {
      ChildOptions ssh{
          .argv = {"/usr/bin/ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o",
                   fmt::format("ConnectTimeout={}", (timeout.count() + 999) / 1000), "-o",
                   "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=/dev/null", "-p",
                   std::to_string(c.port), c.address(next++), "true"},
          .stdout_mode = StreamMode::kNull,
          .stderr_mode = StreamMode::kNull};
      running.emplace_back(ssh);
    }
    std::this_thread::sleep_for(2ms);
    for (size_t i = 0; i < running.size();) {
      if (auto status = running[i].poll()) {
        succeeded += status->ok();
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  if (succeeded > 0) error = fmt::format("{} ssh connections succeeded", succeeded);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Run inside the namespace: the table of the many-host cases.
int manyHostsTable(size_t n, std::chrono::milliseconds timeout) {
  if (auto why = setUpNamespace(); !why.empty()) {
    fmt::print(stderr, "cannot set up the network namespace: {} failed\n", why);
    return 2;
  }
  const int mute_port = muteListener();
  const auto address = [](const std::string& prefix, size_t i) {
    return fmt::format("{}.{}.{}", prefix, i / 250, i % 250 + 2);
  };
  const std::vector<ManyHostsCase> cases = {
      {"unreachable", [&](size_t i) { return address("198.18", i); }},
      {"silent", [&](size_t i) { return address("10.0", i); }},
      {"mute", [](size_t) { return std::string("127.0.0.1"); }, mute_port}};
  fmt::print(
      "\n{} hosts that all fail, in a network namespace of the benchmark's own; connect "
      "timeout {} ms, at most {} at once on both sides\n\n",
      n, timeout.count(), kDefaultWorkerThreads);
  fmt::print("{:>12}  {:>16}  {:>16}  {:>8}  {:>20}\n", "hosts", "ringmaster ms", "ssh fanout ms",
             "ratio", "peak KiB per host");
  int failures = 0;
  for (const ManyHostsCase& c : cases) {
    const LaunchFigures ours = failingLaunch(c, n, timeout);
    std::string anchor_error;
    const double anchor = sshFanout(c, n, timeout, kDefaultWorkerThreads, anchor_error);
    fmt::print("{:>12}  {:>16.0f}  {:>16.0f}  {:>8.2f}  {:>20.1f}\n", c.name, ours.ms, anchor,
               ours.ms / anchor, ours.peak_kib_per_host);
    for (const std::string& error : {ours.error, anchor_error}) {
      if (error.empty()) continue;
      fmt::print(stderr, "{}: {}\n", c.name, error);
      ++failures;
    }
  }
  fmt::print(
      "\nunreachable: 198.18.0.0/15 routed `unreachable` (refused at once); silent: 10.0.0.0/8 on "
      "a tun device without carrier (the SYN vanishes; the connect timeout ends each); mute: a "
      "listener on 127.0.0.1 that never accepts nor speaks (the banner never comes). ssh fanout: "
      "plain `ssh -o ConnectTimeout=...`, as many at once as the launcher's threads.\n");
  return failures == 0 ? 0 : 1;
}

// The table of 1, 2, 4 and 8 sshd "hosts" on 127.0.0.1.
int smallHostsTable(int repeats) {
  if (auto why = testing::sshdUnavailable(); !why.empty()) {
    fmt::print(stderr, "cannot run: {}\n", why);
    return 2;
  }
  Hosts hosts;
  hosts.dir = fs::temp_directory_path() / fmt::format("ringmaster-ssh-bench-{}", ::getpid());
  fs::create_directories(hosts.dir);
  testing::makeKey(hosts.dir / "id_user");
  for (int i = 0; i < 8; ++i) {
    hosts.servers.push_back(std::make_unique<testing::SshdServer>(
        hosts.dir / fmt::format("sshd{}", i), hosts.dir / "id_user.pub"));
    std::ofstream(hosts.dir / "known_hosts", std::ios::app)
        << hosts.servers.back()->knownHostsLine();
  }
  fmt::print(
      "Launch to every rank's hello, sshd \"hosts\" on 127.0.0.1, one rank each, {} rounds "
      "alternating the two, best against best (medians beside)\n\n",
      repeats);
  fmt::print("{:>6}  {:>16}  {:>16}  {:>8}  {:>18}  {:>18}  {:>12}\n", "hosts", "ringmaster ms",
             "ssh loop ms", "ratio", "ringmaster median", "ssh loop median", "median ratio");
  for (size_t n : {1, 2, 4, 8}) {
    std::vector<double> ours, anchor;
    for (int r = 0; r < repeats; ++r) {
      ours.push_back(ringmasterLaunch(hosts, n));
      anchor.push_back(sshLoopLaunch(hosts, n));
    }
    const double best_ours = *std::min_element(ours.begin(), ours.end());
    const double best_anchor = *std::min_element(anchor.begin(), anchor.end());
    fmt::print("{:>6}  {:>16.0f}  {:>16.0f}  {:>8.2f}  {:>18.0f}  {:>18.0f}  {:>12.2f}\n", n,
               best_ours, best_anchor, best_ours / best_anchor, median(ours), median(anchor),
               median(ours) / median(anchor));
  }
  fmt::print(
      "\nratio: ringmaster / ssh loop (the loop skips what the launcher adds: the version "
      "check and the spec written on each host, and node 0's store started before the "
      "other agents, which need its port)\n");
  hosts.servers.clear();
  fs::remove_all(hosts.dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"SSH launch benchmark: launch to every rank's hello, beside a plain ssh loop"};
  int repeats = 5;
  size_t many_hosts = 1000;
  int timeout_ms = 1000;
  bool only_many = false, in_namespace = false;
  app.add_option("--repeats", repeats, "launches per size and side, alternating")->default_val(5);
  app.add_option("--many-hosts", many_hosts, "hosts of the failing launches (0: none)")
      ->default_val(1000);
  app.add_option("--connect-timeout-ms", timeout_ms, "their connect timeout")->default_val(1000);
  app.add_flag("--only-many-hosts", only_many, "skip the sshd table");
  app.add_flag("--in-namespace", in_namespace, "(internal) run the failing launches here")
      ->group("");
  CLI11_PARSE(app, argc, argv);
  const std::chrono::milliseconds timeout(timeout_ms);
  if (in_namespace) return manyHostsTable(many_hosts, timeout);
  if (!only_many)
    if (const int rc = smallHostsTable(repeats); rc != 0) return rc;
  if (many_hosts == 0) return 0;
  std::fflush(stdout);  // the table so far before the child's
  // The failing launches run in a user and network namespace of their own (no outside network,
  // nothing changed here): this binary again, under `unshare -rn`.
  ChildOptions child{.argv = {"/usr/bin/unshare", "-rn", fs::read_symlink("/proc/self/exe"),
                              "--in-namespace", "--many-hosts", std::to_string(many_hosts),
                              "--connect-timeout-ms", std::to_string(timeout_ms)},
                     .stdout_mode = StreamMode::kInherit,
                     .stderr_mode = StreamMode::kInherit};
  const ExitStatus status = ChildProcess(child).wait();
  if (!status.ok()) fmt::print(stderr, "the namespace's launches: {}\n", status.describe());
  return status.ok() ? 0 : 1;
}
