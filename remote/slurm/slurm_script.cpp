// The Slurm batch script (slurm_script.h): #SBATCH lines of words the spec parser has validated,
// then a body that finds the master in the allocation and starts one agent per node with srun.
// Every path is shell-quoted; what differs per node (its rank, its spool) is expanded on that
// node by the shell srun starts there, never in the batch script.
#include "slurm/slurm_script.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "process/shell_quote.h"

namespace ringmaster::slurm {

namespace {

// The first port of the range a master port is derived in from the job id, and its size, where
// launch.master_port leaves it to the allocation: 20000-31999, below Linux's ephemeral ports
// (32768 on), which any connection on the node may hold as its local port ("address already in
// use" came from one in the tests).
constexpr int kDerivedPortBase = 20000;
constexpr int kDerivedPortRange = 12000;
// A sweep's members in one allocation: the ports a job id's steps take before the next id's
// (a prime, so coprime with the range).
constexpr int kStepPorts = 67;

// The job directory as sbatch reads it in --output: no character the #SBATCH line's own parser
// would split, quote, escape or end a comment at, and '%' (Slurm's file name patterns) doubled.
std::string outputDirectory(const std::string& job_dir) {
  const bool plain = std::none_of(job_dir.begin(), job_dir.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte <= 0x20 || byte == 0x7f || std::strchr("'\"\\#", c);
  });
  RM_CHECK_ARG(plain && !job_dir.empty(),
               fmt::format("the run's job directory {} holds a blank, quote, backslash, '#' or "
                           "control character, which an #SBATCH --output line cannot carry; "
                           "keep the run database under a path without them",
                           shellQuote(job_dir)));
  std::string doubled;
  for (char c : job_dir) doubled += c == '%' ? std::string("%%") : std::string(1, c);
  return doubled;
}

const SlurmSpec& slurmOf(const JobSpec& spec) {
  RM_CHECK_ARG(spec.launch.slurm.has_value(),
               fmt::format("job spec '{}' has no launch.scheduler", spec.name));
  return *spec.launch.slurm;
}

}  // namespace

std::vector<std::string> sbatchOptions(const JobSpec& spec, const SlurmScriptPaths& paths) {
  const SlurmSpec& slurm = slurmOf(spec);
  std::vector<std::string> options = {
      "--job-name=" + slurm.job_name.value_or(spec.name),
      fmt::format("--nodes={}", slurm.nodes),
      "--ntasks-per-node=1",
  };
  if (slurm.cpus_per_task)
    options.push_back(fmt::format("--cpus-per-task={}", *slurm.cpus_per_task));
  if (slurm.gpus_per_node)
    options.push_back(fmt::format("--gpus-per-node={}", *slurm.gpus_per_node));
  const std::pair<const char*, const std::optional<std::string>*> words[] = {
      {"mem", &slurm.mem},
      {"partition", &slurm.partition},
      {"account", &slurm.account},
      {"qos", &slurm.qos},
      {"time", &slurm.time},
      {"constraint", &slurm.constraint},
      {"reservation", &slurm.reservation}};
  for (const auto& [name, value] : words)
    if (*value) options.push_back(fmt::format("--{}={}", name, **value));
  options.push_back("--output=" + outputDirectory(paths.job_dir) + "/slurm-%j.out");
  options.push_back("--no-requeue");
  options.insert(options.end(), slurm.extra_sbatch.begin(), slurm.extra_sbatch.end());
  return options;
}

std::string slurmBatchScript(const JobSpec& spec, const SlurmScriptPaths& paths) {
  const SlurmSpec& slurm = slurmOf(spec);
  std::string script = fmt::format(
      "#!/bin/bash\n"
      "# Written by Ringmaster for job spec '{}': its Slurm batch script (docs/slurm.md), kept\n"
      "# with the run in its job directory and submitted with `sbatch --parsable`. srun starts\n"
      "# one ringmaster-node agent per node; each starts that node's {} worker(s).\n",
      spec.name, slurm.ranks_per_node);
  for (const std::string& option : sbatchOptions(spec, paths)) script += "#SBATCH " + option + "\n";
  const std::string master_port =
      spec.launch.master_port != 0
          ? std::to_string(spec.launch.master_port)
          : fmt::format("$(( {} + SLURM_JOB_ID % {} ))", kDerivedPortBase, kDerivedPortRange);
  // The agent's command as each node's shell runs it: the paths are its positional parameters
  // (quoted once, below), the node's rank its own $SLURM_NODEID.
  const std::string agent = fmt::format(
      "exec \"$1\" agent --spec \"$2\" --nnodes {} --node-rank \"$SLURM_NODEID\" "
      "--master \"$3\" --grace {} --spool-dir \"$4\"/node-\"$SLURM_NODEID\"",
      slurm.nodes, paths.grace_s);
  script += fmt::format(
      "\n"
      "set -euo pipefail\n"
      "# The master: the allocation's first node, at its NodeAddr (else its name).\n"
      "nodes=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\")\n"
      "first=$(head -n 1 <<<\"$nodes\")\n"
      "addr=$(scontrol show node \"$first\" -o | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p' "
      "|| true)\n"
      "MASTER_ADDR=${{addr:-$first}}\n"
      "MASTER_PORT={}\n"
      "export MASTER_ADDR MASTER_PORT\n"
      "srun --nodes={} --ntasks-per-node=1 --kill-on-bad-exit=1 --input=none \\\n"
      "  /bin/bash -c {} ringmaster-node-agent \\\n"
      "  {} {} \"$MASTER_ADDR:$MASTER_PORT\" {}\n",
      master_port, slurm.nodes, shellQuote(agent), shellQuote(paths.node_binary),
      shellQuote(paths.spec_path), shellQuote(paths.job_dir));
  return script;
}

// ---- A sweep's member as a job step of the sweep's allocation (issue 37)

namespace {

void checkAllocationId(const std::string& allocation_id) {
  const bool digits = !allocation_id.empty() && allocation_id.size() <= 20 &&
                      std::all_of(allocation_id.begin(), allocation_id.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  RM_CHECK_ARG(digits, fmt::format("the sweep's allocation {} is not a Slurm job id",
                                   shellQuote(allocation_id)));
}

}  // namespace

std::vector<std::string> stepOptions(const JobSpec& spec, const std::string& allocation_id) {
  const SlurmSpec& slurm = slurmOf(spec);
  checkAllocationId(allocation_id);
  std::vector<std::string> options = {
      "--jobid=" + allocation_id, fmt::format("--nodes={}", slurm.nodes), "--ntasks-per-node=1"};
  if (slurm.cpus_per_task)
    options.push_back(fmt::format("--cpus-per-task={}", *slurm.cpus_per_task));
  if (slurm.gpus_per_node)
    options.push_back(fmt::format("--gpus-per-node={}", *slurm.gpus_per_node));
  if (slurm.mem) options.push_back("--mem=" + *slurm.mem);
  if (slurm.time) options.push_back("--time=" + *slurm.time);
  options.push_back("--job-name=" + slurm.job_name.value_or(spec.name));
  options.push_back("--kill-on-bad-exit=1");
  options.push_back("--input=none");
  return options;
}

std::string slurmStepScript(const JobSpec& spec, const SlurmScriptPaths& paths,
                            const std::string& allocation_id, int unreachable_polls) {
  RM_CHECK_ARG(unreachable_polls >= 1,
               fmt::format("unreachable_polls is {}, at least 1", unreachable_polls));
  const SlurmSpec& slurm = slurmOf(spec);
  const std::vector<std::string> options = stepOptions(spec, allocation_id);
  // Two members of one allocation may share a node address: the port differs per step. Each job
  // id owns kStepPorts ports in a row, and kStepPorts shares no factor with the range, so that
  // distinct job ids start at every port of it: with 64 (a factor 16 in common with 12,000)
  // allocations whose ids agreed modulo 750 derived the same ports, and two tests' sweeps on one
  // machine met on them ("run failed" for both members of one).
  const std::string master_port =
      spec.launch.master_port != 0
          ? std::to_string(spec.launch.master_port)
          : fmt::format("$(( {} + (SLURM_JOB_ID * {} + SLURM_STEP_ID) % {} ))", kDerivedPortBase,
                        kStepPorts, kDerivedPortRange);
  // Each node's task: the master is the step's first node (not the allocation's), node 0 says
  // the step's id, and the agent starts as in the batch script.
  const std::string task = fmt::format(
      "first=$(scontrol show hostnames \"$SLURM_STEP_NODELIST\" | head -n 1)\n"
      "addr=$(scontrol show node \"$first\" -o | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p' "
      "|| true)\n"
      "port={}\n"
      "if [ \"$SLURM_NODEID\" = 0 ]; then\n"
      "  echo \"$SLURM_JOB_ID.$SLURM_STEP_ID\" >\"$3\"/slurm-step.tmp && "
      "mv -f \"$3\"/slurm-step.tmp \"$3\"/slurm-step\n"
      "fi\n"
      "exec \"$1\" agent --spec \"$2\" --nnodes {} --node-rank \"$SLURM_NODEID\" "
      "--master \"${{addr:-$first}}:$port\" --grace {} --spool-dir \"$3\"/node-\"$SLURM_NODEID\"",
      master_port, slurm.nodes, paths.grace_s);
  std::string srun = "srun";
  for (const std::string& option : options) srun += " " + shellQuote(option);
  const std::string dir = shellQuote(paths.job_dir);
  return fmt::format(
      "#!/bin/bash\n"
      "# Written by Ringmaster for job spec '{name}': a member of a sweep, run as a job step of\n"
      "# the sweep's Slurm allocation {job} (docs/slurm.md, \"Sweeps in one allocation\"). The\n"
      "# submitting host runs it detached; srun starts one ringmaster-node agent per node.\n"
      "umask 077\n"
      "dir={dir}\n"
      "exec </dev/null >>\"$dir\"/slurm-step.out 2>&1\n"
      "echo $$ >\"$dir\"/slurm-step.pid\n"
      "ended() {{\n"
      "  echo \"$1\" >\"$dir\"/slurm-step-exit.tmp && mv -f \"$dir\"/slurm-step-exit.tmp "
      "\"$dir\"/slurm-step-exit\n"
      "  exit \"$1\"\n"
      "}}\n"
      "trap 'ended 143' TERM INT HUP\n"
      "# srun refuses an allocation still queued: wait while it is (a controller that does not\n"
      "# answer for {unreachable_s} s in a row ends the wait: nothing is left waiting forever).\n"
      "unreachable=0\n"
      "while :; do\n"
      "  [ ! -e \"$dir\"/slurm-step-cancel ] || ended 143\n"
      "  if ! state=$(squeue --noheader --jobs={job} --format=%T 2>&1); then\n"
      "    case \"$state\" in *'Invalid job id'*) state=gone ;; *) answer=$state; "
      "state=UNREACHABLE ;; esac\n"
      "  fi\n"
      "  case \"$state\" in\n"
      "    RUNNING) break ;;\n"
      "    UNREACHABLE)\n"
      "      unreachable=$((unreachable + 1))\n"
      "      if [ \"$unreachable\" -ge {unreachable_polls} ]; then\n"
      "        echo \"the Slurm controller did not answer for {unreachable_s} s: $answer\"; ended "
      "1\n"
      "      fi\n"
      "      sleep 2 ;;\n"
      "    PENDING | CONFIGURING) unreachable=0; sleep 2 ;;\n"
      "    *) echo \"the sweep's allocation {job} is ${{state:-gone}}\"; ended 1 ;;\n"
      "  esac\n"
      "done\n"
      "[ ! -e \"$dir\"/slurm-step-cancel ] || ended 143\n"
      "{srun} \\\n"
      "  /bin/bash -c {task} ringmaster-node-agent \\\n"
      "  {binary} {spec} \"$dir\"\n"
      "ended $?\n",
      fmt::arg("name", spec.name), fmt::arg("job", allocation_id), fmt::arg("dir", dir),
      fmt::arg("unreachable_polls", unreachable_polls),
      fmt::arg("unreachable_s", 2 * unreachable_polls), fmt::arg("srun", srun),
      fmt::arg("task", shellQuote(task)), fmt::arg("binary", shellQuote(paths.node_binary)),
      fmt::arg("spec", shellQuote(paths.spec_path)));
}

}  // namespace ringmaster::slurm
