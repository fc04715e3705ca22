// One command per fact, each a fixed string: nothing from the user reaches the remote shell
// except the quoted node path.
#include "ssh/host_check.h"

#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "ssh/ssh_launcher.h"

namespace ringmaster {

namespace {

using namespace std::chrono_literals;

std::string firstLine(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// One of sinfo's commands: a failure of its own (a timeout: sinfo waits for an unreachable
// controller) is the command's, not the host check's.
slurm::CommandOutput runForSlurm(SshSession& session, const std::vector<std::string>& argv) {
  try {
    const CommandResult result = session.run(shellCommand(argv), 30s);
    return {.status = {.exit_code = result.exit_status < 0 ? 255 : result.exit_status},
            .out = result.out,
            .err = result.err};
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kTimeout) throw;
    return {.status = {.exit_code = 255}, .out = "", .err = e.message()};
  }
}

}  // namespace

HostReport checkHost(const SshTarget& target, const SshConnectOptions& options,
                     const std::string& node_binary) {
  HostReport report;
  report.target = target;
  try {
    SshSession session(target, options);
    report.fingerprint = session.fingerprint();
    CommandResult node = session.run(shellCommand({node_binary, "--version"}), 30s);
    if (node.exit_status == 0) report.node_version = firstLine(node.out);
    report.node_matches = report.node_version == expectedNodeVersion();
    CommandResult cpus = session.run("nproc", 30s);
    if (cpus.exit_status == 0) report.cpus = std::atoi(cpus.out.c_str());
    CommandResult memory = session.run("grep MemTotal /proc/meminfo", 30s);
    if (memory.exit_status == 0) {
      std::istringstream in(memory.out);
      std::string label;
      int64_t kib = 0;
      in >> label >> kib;
      report.memory_bytes = kib * 1024;
    }
    CommandResult gpus = session.run(
        "command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total "
        "--format=csv,noheader,nounits",
        30s);
    if (gpus.exit_status == 0) {
      std::istringstream in(gpus.out);
      for (std::string line; std::getline(in, line);) {
        const size_t comma = line.rfind(',');
        if (comma == std::string::npos) continue;
        report.gpus.push_back(
            {.name = line.substr(0, comma), .memory_mib = std::atoll(line.c_str() + comma + 1)});
      }
    }
    report.slurm = slurm::querySlurmCluster(
        [&](const std::vector<std::string>& argv) { return runForSlurm(session, argv); });
  } catch (const Error& e) {
    report.error = e.message();
  }
  return report;
}

LaunchHostSpec parseHostArgument(const std::string& text) {
  LaunchHostSpec host;
  std::string rest = text;
  if (const size_t at = rest.find('@'); at != std::string::npos) {
    host.user = rest.substr(0, at);
    rest = rest.substr(at + 1);
  }
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(':') == colon) {  // one colon: a port (not IPv6)
    const std::string port = rest.substr(colon + 1);
    RM_CHECK_ARG(!port.empty() && port.find_first_not_of("0123456789") == std::string::npos &&
                     port.size() <= 5,
                 fmt::format("host '{}': the port '{}' is not a number", text, port));
    host.port = std::stoi(port);
    rest = rest.substr(0, colon);
  }
  host.host = rest;
  return host;
}

}  // namespace ringmaster
