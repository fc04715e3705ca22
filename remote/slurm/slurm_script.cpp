// PLACEHOLDER (issue 35, the desktop helper): a small stand-in for the batch script so that the job
// editor's preview builds and can be tested; the script helper's implementation replaces this file.
#include "slurm/slurm_script.h"

#include <fmt/format.h>

namespace ringmaster::slurm {

namespace {

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::vector<std::string> sbatchOptions(const JobSpec& spec, const SlurmScriptPaths& paths) {
  const SlurmSpec& slurm = *spec.launch.slurm;
  std::vector<std::string> options;
  auto add = [&](const char* name, const std::optional<std::string>& value) {
    if (value) options.push_back(fmt::format("--{}={}", name, *value));
  };
  options.push_back("--job-name=" + slurm.job_name.value_or(spec.name));
  options.push_back(fmt::format("--nodes={}", slurm.nodes));
  options.push_back("--ntasks-per-node=1");
  if (slurm.cpus_per_task)
    options.push_back(fmt::format("--cpus-per-task={}", *slurm.cpus_per_task));
  if (slurm.gpus_per_node)
    options.push_back(fmt::format("--gpus-per-node={}", *slurm.gpus_per_node));
  add("mem", slurm.mem);
  add("partition", slurm.partition);
  add("account", slurm.account);
  add("qos", slurm.qos);
  add("time", slurm.time);
  add("constraint", slurm.constraint);
  add("reservation", slurm.reservation);
  options.push_back("--output=" + paths.job_dir + "/slurm-%j.out");
  options.push_back("--no-requeue");
  options.insert(options.end(), slurm.extra_sbatch.begin(), slurm.extra_sbatch.end());
  return options;
}

std::string slurmBatchScript(const JobSpec& spec, const SlurmScriptPaths& paths) {
  std::string script = "#!/bin/bash\n";
  for (const std::string& option : sbatchOptions(spec, paths)) script += "#SBATCH " + option + "\n";
  const int nodes = spec.launch.slurm->nodes;
  script += fmt::format(
      "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
      "MASTER_PORT={}\n"
      "srun --nodes={} --ntasks-per-node=1 --kill-on-bad-exit=1 --input=none \\\n"
      "  {} agent --spec {} --nnodes {} --node-rank \"$SLURM_NODEID\" \\\n"
      "  --master \"$MASTER_ADDR:$MASTER_PORT\" --grace {} --spool-dir {}/node-\"$SLURM_NODEID\"\n",
      spec.launch.master_port > 0 ? std::to_string(spec.launch.master_port)
                                  : std::string("$((20000 + SLURM_JOB_ID % 20000))"),
      nodes, quoted(paths.node_binary), quoted(paths.spec_path), nodes, paths.grace_s,
      quoted(paths.job_dir));
  return script;
}

}  // namespace ringmaster::slurm
