// SSH launch benchmark: the time from launch to every rank's `hello` for 1, 2, 4 and 8 sshd
// "hosts" on 127.0.0.1 (one rank each), through SshLauncher (connect and verify every host,
// check ringmaster-node, write the spec there, start node 0 then the rest), beside the anchor:
// the same agents started by a plain `ssh` loop in parallel, reading a spec already on the disk,
// measured in the same run. Needs openssh-server and openssh-client.
#include <poll.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "process/child_process.h"
#include "common/sshd_server.h"
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"SSH launch benchmark: launch to every rank's hello, beside a plain ssh loop"};
  int repeats = 3;
  app.add_option("--repeats", repeats, "launches per size (the median is shown)")->default_val(3);
  CLI11_PARSE(app, argc, argv);
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
      "Launch to every rank's hello, sshd \"hosts\" on 127.0.0.1, one rank each, median of "
      "{}\n\n",
      repeats);
  fmt::print("{:>6}  {:>16}  {:>16}  {:>8}\n", "hosts", "ringmaster ms", "ssh loop ms", "ratio");
  for (size_t n : {1, 2, 4, 8}) {
    std::vector<double> ours, anchor;
    for (int r = 0; r < repeats; ++r) {
      ours.push_back(ringmasterLaunch(hosts, n));
      anchor.push_back(sshLoopLaunch(hosts, n));
    }
    fmt::print("{:>6}  {:>16.0f}  {:>16.0f}  {:>8.2f}\n", n, median(ours), median(anchor),
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
