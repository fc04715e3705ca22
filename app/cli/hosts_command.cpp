// The hosts are checked in parallel, a bounded number at once; the table (or JSON) comes when
// all have answered.
#include "cli/hosts_command.h"

#include <cstdio>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/ssh_prompts.h"
#include "cli/terminal.h"
#include "core/display_text.h"
#include "exit_codes.h"
#include "launcher/local_launcher.h"
#include "launcher/worker_threads.h"
#include "ssh/host_check.h"

namespace ringmaster::cli {

namespace {

// A Slurm login node's answer (issue 35): null for a host without sinfo.
nlohmann::json slurmJson(const std::optional<slurm::SlurmClusterInfo>& info) {
  if (!info) return nullptr;
  nlohmann::json partitions = nlohmann::json::array();
  for (const slurm::SlurmPartition& p : info->partitions) {
    partitions.push_back({{"name", p.name},
                          {"default", p.is_default},
                          {"availability", p.availability},
                          {"allocated_nodes", p.allocated},
                          {"idle_nodes", p.idle},
                          {"other_nodes", p.other},
                          {"total_nodes", p.total}});
  }
  return {{"version", info->version}, {"partitions", partitions}, {"error", info->error}};
}

// Under the table, each Slurm login node's version and partitions.
void printSlurm(const std::vector<HostReport>& reports, bool colour) {
  for (const HostReport& r : reports) {
    if (!r.error.empty() || !r.slurm) continue;
    const slurm::SlurmClusterInfo& info = *r.slurm;
    fmt::print("\n{}: Slurm {}\n", displaySafeLine(r.target.alias),
               info.version.empty() ? "(version unknown)" : displaySafeLine(info.version));
    if (!info.error.empty())
      fmt::print("  {}: {}\n", paint("sinfo", Colour::kRed, colour), displaySafe(info.error));
    if (info.partitions.empty()) continue;
    Table table({"PARTITION", "STATE", "IDLE NODES", "NODES"});
    table.alignRight({2, 3});
    for (const slurm::SlurmPartition& p : info.partitions) {
      table.addRow({displaySafeLine(p.name + (p.is_default ? " (default)" : "")),
                    displaySafeLine(p.availability), std::to_string(p.idle),
                    std::to_string(p.total)});
    }
    table.print(stdout);
  }
}

}  // namespace

int hostsCheckCommand(const HostsCheckOptions& options) {
  const SshConnectOptions connect =
      interactiveConnectOptions(options.accept_new_host_keys, options.known_hosts);
  const std::string config = options.ssh_config.value_or(defaultSshConfigPath());
  const std::string node = options.node_binary.value_or(defaultNodeBinary());

  // At most kDefaultWorkerThreads hosts at a time, however many are named (issue 32).
  std::vector<HostReport> reports(options.hosts.size());
  runOnWorkers(
      options.hosts.size(), kDefaultWorkerThreads,
      [&](size_t i) {
        try {
          reports[i] = checkHost(resolveSshTarget(parseHostArgument(options.hosts[i]), config),
                                 connect, node);
        } catch (const Error& e) {
          reports[i].target.alias = options.hosts[i];
          reports[i].error = e.message();
        }
      },
      "to check the hosts");

  bool all_answered = true;
  if (options.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const HostReport& r : reports) {
      nlohmann::json gpus = nlohmann::json::array();
      for (const GpuInfo& gpu : r.gpus)
        gpus.push_back({{"name", gpu.name}, {"memory_mib", gpu.memory_mib}});
      out.push_back({{"host", r.target.alias},
                     {"hostname", r.target.hostname},
                     {"port", r.target.port},
                     {"user", r.target.user},
                     {"fingerprint", r.fingerprint},
                     {"node_version", r.node_version},
                     {"node_matches", r.node_matches},
                     {"cpus", r.cpus},
                     {"memory_bytes", r.memory_bytes},
                     {"gpus", gpus},
                     {"slurm", slurmJson(r.slurm)},
                     {"error", r.error}});
      all_answered = all_answered && r.error.empty();
    }
    fmt::print("{}\n", out.dump(2));
    return all_answered ? kExitOk : kExitFailed;
  }
  const bool colour = colourFor(stdout);
  Table table({"HOST", "ADDRESS", "HOST KEY", "RINGMASTER-NODE", "CPUS", "MEMORY", "GPUS"});
  table.alignRight({4, 5});
  for (const HostReport& r : reports) {
    if (!r.error.empty()) {
      all_answered = false;
      continue;
    }
    std::string node = r.node_version.empty() ? paint("not found", Colour::kRed, colour)
                       : r.node_matches
                           ? displaySafeLine(r.node_version)
                           : paint(r.node_version + " (other build)", Colour::kYellow, colour);
    std::string gpus = "none";
    if (!r.gpus.empty()) {
      gpus = fmt::format("{}x {} ({})", r.gpus.size(), displaySafeLine(r.gpus[0].name),
                         formatBytes(static_cast<double>(r.gpus[0].memory_mib) * (1 << 20)));
    }
    table.addRow(
        {displaySafeLine(r.target.alias),
         displaySafeLine(fmt::format("{}@{}:{}", r.target.user, r.target.hostname, r.target.port)),
         displaySafeLine(r.fingerprint), node, std::to_string(r.cpus),
         formatBytes(static_cast<double>(r.memory_bytes)), gpus});
  }
  if (!table.empty()) table.print(stdout);
  printSlurm(reports, colour);
  for (const HostReport& r : reports)
    if (!r.error.empty())
      fmt::print(stderr, "{}: {}\n", paint("error", Colour::kRed, colour), displaySafe(r.error));
  return all_answered ? kExitOk : kExitFailed;
}

void addHostsCommand(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<HostsCheckOptions>();
  CLI::App* hosts = app.add_subcommand("hosts", "SSH hosts");
  hosts->require_subcommand(1);
  CLI::App* check = hosts->add_subcommand(
      "check", "connect to hosts (host key verified) and show what they offer a job");
  check->add_option("hosts", options->hosts, "aliases of ~/.ssh/config or [user@]host[:port]")
      ->required();
  check->add_option("--node-binary", options->node_binary,
                    "ringmaster-node's path on the hosts (default: this build's)");
  check->add_option("--known-hosts", options->known_hosts,
                    "known_hosts file (default ~/.ssh/known_hosts)");
  check->add_option("--ssh-config", options->ssh_config,
                    "ssh client config (default ~/.ssh/config)");
  check->add_flag("--accept-new-host-keys", options->accept_new_host_keys,
                  "accept and record the key of a host not yet in known_hosts");
  check->add_flag("--json", options->json, "JSON instead of a table");
  commands.add(check, [options](const CommonOptions&) { return hostsCheckCommand(*options); });
}

}  // namespace ringmaster::cli
