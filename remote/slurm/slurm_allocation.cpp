// A sweep's shared Slurm allocation (slurm_allocation.h): the plan of which members fit, and the
// holder job that keeps the nodes while the driver's heartbeat goes on.
#include "slurm/slurm_allocation.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "process/shell_quote.h"
#include "slurm/slurm_script.h"

namespace ringmaster::slurm {
namespace {

constexpr std::chrono::milliseconds kCommandTimeout{60'000};
constexpr int64_t kStepStartSeconds = 60;  // the time limit's allowance per round

std::optional<int64_t> number(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// What members must share to run in one allocation: everything sbatch asks of it but the sizes.
std::string sharedKey(const SlurmSpec& slurm) {
  const auto word = [](const std::optional<std::string>& value) { return value.value_or("-"); };
  std::string key =
      fmt::format("partition {} account {} qos {} reservation {} constraint {} mem {}",
                  word(slurm.partition), word(slurm.account), word(slurm.qos),
                  word(slurm.reservation), word(slurm.constraint), word(slurm.mem));
  for (const std::string& option : slurm.extra_sbatch) key += " " + option;
  if (slurm.submit_from)
    key += fmt::format(" from {}@{}:{}", slurm.submit_from->user.value_or("-"),
                       slurm.submit_from->host, slurm.submit_from->port.value_or(22));
  return key;
}

// The key most members share (the first one's on a tie).
std::string commonKey(const std::vector<std::string>& keys) {
  std::map<std::string, int> counts;
  for (const std::string& key : keys)
    if (!key.empty()) ++counts[key];
  std::string best;
  for (const std::string& key : keys)
    if (!key.empty() && (best.empty() || counts[key] > counts[best])) best = key;
  return best;
}

std::string minutes(int64_t seconds) {
  return std::to_string((seconds + 59) / 60);
}

}  // namespace

std::optional<int64_t> slurmTimeSeconds(const std::string& time) {
  if (time == "UNLIMITED" || time == "INFINITE" || time.empty()) return std::nullopt;
  int64_t days = 0;
  std::string_view rest = time;
  const size_t dash = rest.find('-');
  if (dash != std::string_view::npos) {
    const std::optional<int64_t> d = number(rest.substr(0, dash));
    if (!d) return std::nullopt;
    days = *d;
    rest = rest.substr(dash + 1);
  }
  std::vector<int64_t> parts;
  for (size_t start = 0;;) {
    const size_t colon = rest.find(':', start);
    const std::optional<int64_t> part = number(rest.substr(start, colon - start));
    if (!part) return std::nullopt;
    parts.push_back(*part);
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (parts.size() > 3) return std::nullopt;
  int64_t seconds = 0;
  if (dash != std::string_view::npos) {
    // days-hours[:minutes[:seconds]]
    const int64_t units[] = {3600, 60, 1};
    for (size_t i = 0; i < parts.size(); ++i) seconds += parts[i] * units[i];
  } else {
    // minutes, minutes:seconds, hours:minutes:seconds
    const int64_t two[] = {60, 1}, three[] = {3600, 60, 1};
    for (size_t i = 0; i < parts.size(); ++i)
      seconds += parts[i] * (parts.size() == 3 ? three[i] : parts.size() == 2 ? two[i] : 60);
  }
  return days * 86400 + seconds;
}

SweepAllocationPlan planSweepAllocation(const std::vector<JobSpec>& members, int parallel,
                                        int max_nodes) {
  RM_CHECK_ARG(parallel >= 1,
               fmt::format("a sweep runs at least 1 member at once, not {}", parallel));
  SweepAllocationPlan plan;
  std::vector<std::string> keys;
  for (const JobSpec& member : members)
    keys.push_back(member.launch.slurm ? sharedKey(*member.launch.slurm) : std::string());
  const std::string key = commonKey(keys);
  // Who shares the allocation's options and fits its node cap.
  std::vector<size_t> fitting;
  plan.members.resize(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    SweepMemberPlacement& placement = plan.members[i];
    if (!members[i].launch.slurm) continue;
    placement.kind = SweepMemberPlacement::Kind::kOwnJob;
    const int nodes = members[i].launch.slurm->nodes;
    if (keys[i] != key) {
      placement.reason = fmt::format(
          "its launch.scheduler ({}) differs from the sweep's allocation's ({})", keys[i], key);
    } else if (max_nodes > 0 && nodes > max_nodes) {
      placement.reason =
          fmt::format("needs {} nodes; the sweep's allocation has at most {}", nodes, max_nodes);
    } else {
      fitting.push_back(i);
    }
  }
  if (fitting.empty()) return plan;
  SlurmSpec shape = *members[fitting.front()].launch.slurm;
  shape.nodes = 0;
  shape.cpus_per_task.reset();
  shape.gpus_per_node.reset();
  shape.job_name.reset();
  std::vector<int64_t> limits;
  bool unlimited = false;
  for (const size_t i : fitting) {
    const SlurmSpec& slurm = *members[i].launch.slurm;
    shape.nodes = std::max(shape.nodes, slurm.nodes);
    if (slurm.cpus_per_task)
      shape.cpus_per_task = std::max(shape.cpus_per_task.value_or(0), *slurm.cpus_per_task);
    if (slurm.gpus_per_node)
      shape.gpus_per_node = std::max(shape.gpus_per_node.value_or(0), *slurm.gpus_per_node);
    const std::optional<int64_t> limit = slurmTimeSeconds(slurm.time.value_or(""));
    unlimited = unlimited || !limit;
    if (limit) limits.push_back(*limit);
    plan.members[i] = {.kind = SweepMemberPlacement::Kind::kInAllocation};
  }
  const int at_once = std::min<int>(parallel, static_cast<int>(fitting.size()));
  shape.nodes *= at_once;
  if (max_nodes > 0) shape.nodes = std::min(shape.nodes, max_nodes);
  shape.time.reset();
  if (!unlimited) {
    const size_t rounds = (fitting.size() + at_once - 1) / at_once;
    std::sort(limits.rbegin(), limits.rend());
    int64_t total = static_cast<int64_t>(rounds) * kStepStartSeconds;
    for (size_t round = 0; round < rounds; ++round) total += limits[round];
    shape.time = minutes(total);
  }
  plan.allocation = shape;
  return plan;
}

std::string sweepAllocationScript(const SlurmSpec& allocation, const std::string& job_name,
                                  const std::string& dir, int heartbeat_timeout_s) {
  JobSpec holder;
  holder.name = job_name;
  holder.launch.hosts.clear();
  holder.launch.slurm = allocation;
  holder.launch.slurm->job_name = job_name;
  std::string script =
      "#!/bin/bash\n"
      "# Written by Ringmaster: the Slurm allocation a sweep's members run in as job steps\n"
      "# (docs/slurm.md, \"Sweeps in one allocation\"). It holds the nodes while the sweep's\n"
      "# driver rewrites its heartbeat file, and ends (its steps with it) once that stops.\n";
  for (const std::string& option : sbatchOptions(holder, {.job_dir = dir}))
    script += "#SBATCH " + option + "\n";
  script += fmt::format(
      "\n"
      "beat={}/heartbeat\n"
      "last=$(cat \"$beat\" 2>/dev/null || true)\n"
      "since=$SECONDS\n"
      "while [ $((SECONDS - since)) -lt {} ]; do\n"
      "  sleep 1\n"
      "  now=$(cat \"$beat\" 2>/dev/null || true)\n"
      "  if [ \"$now\" != \"$last\" ]; then last=$now; since=$SECONDS; fi\n"
      "done\n"
      "echo \"the sweep's driver stopped its heartbeat ($beat) {} s ago: the allocation ends\"\n",
      shellQuote(dir), heartbeat_timeout_s, heartbeat_timeout_s);
  return script;
}

// The heartbeat: a thread that rewrites dir/heartbeat until release().
struct SweepAllocation::Heartbeat {
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  bool released = false;
  std::atomic<uint64_t> beats{0};
  std::thread thread;
};

SweepAllocation::SweepAllocation(std::unique_ptr<SlurmHost> host, const SlurmSpec& allocation,
                                 SweepAllocationOptions options)
    : host_(std::move(host)),
      options_(std::move(options)),
      heartbeat_(std::make_unique<Heartbeat>()) {
  RM_CHECK_ARG(allocation.nodes >= 1, "a sweep's allocation of no node");
  const int timeout_s = static_cast<int>(options_.heartbeat_timeout.count());
  script_ = sweepAllocationScript(allocation, options_.job_name, options_.dir, timeout_s);
  beat();
  const std::string path = options_.dir + "/slurm-allocation.sbatch";
  host_->writeFile(path, script_, /*executable=*/true);
  const CommandOutput out = host_->run({"sbatch", "--parsable", path}, kCommandTimeout);
  if (!out.status.ok()) {
    const std::string said = out.err.empty() ? out.status.describe() : out.err;
    RM_THROW(kComm,
             fmt::format("sbatch on {} refused the sweep's allocation: {}", host_->describe(),
                         said.substr(0, said.find_last_not_of("\n ") + 1)));
  }
  job_id_ = parseSbatchJobId(out.out);
  heartbeat_->thread = std::thread([this] {
    std::unique_lock lock(heartbeat_->mutex);
    while (!heartbeat_->wake.wait_for(lock, options_.heartbeat_every,
                                      [this] { return heartbeat_->stop; })) {
      lock.unlock();
      try {
        beat();
      } catch (const Error&) {
        // A missed beat is one of many; the holder waits heartbeat_timeout for the next.
      }
      lock.lock();
    }
  });
}

SweepAllocation::~SweepAllocation() {
  release();
}

void SweepAllocation::beat() {
  host_->writeFile(options_.dir + "/heartbeat", std::to_string(++heartbeat_->beats) + "\n");
}

std::optional<SlurmJobState> SweepAllocation::state() {
  const CommandOutput text = host_->run(
      {"squeue", "--noheader", "--jobs", job_id_, "--format=%i|%T|%r|%N"}, kCommandTimeout);
  if (text.status.ok())
    if (std::optional<SlurmJobState> state = parseSqueueText(text.out, job_id_)) return state;
  std::vector<std::string> argv = {
      "sacct",      "--jobs",      job_id_,    "--allocations",
      "--noheader", "--parsable2", "--format", "JobID,State,ExitCode,NodeList"};
  CommandOutput out = host_->run(argv, kCommandTimeout);
  if (out.status.ok())
    if (std::optional<SlurmJobState> state = parseSacct(out.out, job_id_)) return state;
  argv.insert(argv.begin() + 1, "--completion");
  out = host_->run(argv, kCommandTimeout);
  return out.status.ok() ? parseSacct(out.out, job_id_) : std::nullopt;
}

std::string SweepAllocation::release() {
  {
    std::lock_guard lock(heartbeat_->mutex);
    if (heartbeat_->released) return {};
    heartbeat_->released = true;
    heartbeat_->stop = true;
  }
  heartbeat_->wake.notify_all();
  if (heartbeat_->thread.joinable()) heartbeat_->thread.join();
  if (job_id_.empty()) return {};
  const CommandOutput out = host_->run({"scancel", job_id_}, kCommandTimeout);
  if (out.status.ok()) return {};
  return fmt::format("scancel of the sweep's allocation {} failed: {}", job_id_,
                     out.err.empty() ? out.status.describe() : out.err);
}

}  // namespace ringmaster::slurm
