// SlurmLaunch: submission with sbatch, the job's state from squeue then sacct, every node's spool
// read through spool-follow, cancel and kill through scancel.
#include "slurm/slurm_launch.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster::slurm {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kCommandTimeout{60'000};
// How long a job may be known neither to squeue nor to sacct before it is taken as gone (sacct
// through slurmdbd lags a few seconds behind squeue forgetting a job).
constexpr std::chrono::seconds kUnknownFor{60};

// The file the spool followers end on (spool-follow --until-file): written once Slurm says the
// job ended, so that a node whose agent never wrote its end (its node failed) ends the follow.
std::string endedMarker(const std::string& job_dir) {
  return job_dir + "/slurm-ended";
}

// A sweep member's files in its job directory (slurmStepScript writes them): its step's id, the
// exit status of its srun, and the PID of the step script (which leads its own process group).
std::string stepIdFile(const std::string& job_dir) {
  return job_dir + "/slurm-step";
}
std::string stepExitFile(const std::string& job_dir) {
  return job_dir + "/slurm-step-exit";
}
std::string stepPidFile(const std::string& job_dir) {
  return job_dir + "/slurm-step.pid";
}
std::string stepCancelFile(const std::string& job_dir) {
  return job_dir + "/slurm-step-cancel";
}

bool allDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string words(const CommandOutput& output) {
  std::string text = output.err.empty() ? output.out : output.err;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? output.status.describe() : text;
}

}  // namespace

struct SlurmLaunch::State {
  std::unique_ptr<SlurmHost> host;
  SlurmLaunchOptions options;
  std::string job_id;
  SlurmJobState last;
  bool known = false;  // some state was read
  Clock::time_point last_poll{};
  Clock::time_point unknown_since{};
  bool ended_marked = false;
  std::vector<std::unique_ptr<Launch>> followers;  // one per node
  std::vector<bool> following;                     // pump has not yet returned false
  std::vector<ExitStatus> follower_status;
  bool cancel_asked = false;
  std::string failure;
  std::string down_nodes;  // a NODE_FAIL's nodes that Slurm marks down
  std::string step_id;     // a sweep member's step, "ALLOC.STEP", once node 0 wrote it

  bool stepMode() const { return options.allocation.has_value(); }

  void submit() {
    host->writeFile(options.script_path, options.script, /*executable=*/true);
    const CommandOutput out =
        host->run({"sbatch", "--parsable", options.script_path}, kCommandTimeout);
    if (!out.status.ok())
      RM_THROW(kComm,
               fmt::format("sbatch on {} refused the job: {}", host->describe(), words(out)));
    job_id = parseSbatchJobId(out.out);
  }

  // A sweep's member: its step script, started detached (a session of its own, so that neither
  // this process's end nor the command's process group reaches it); it writes its own output.
  void startStep() {
    host->writeFile(options.script_path, options.script, /*executable=*/true);
    const CommandOutput out =
        host->run({"setsid", "-f", "/bin/bash", options.script_path}, kCommandTimeout);
    if (!out.status.ok())
      RM_THROW(kComm, fmt::format("the step of the sweep's Slurm allocation {} could not be "
                                  "started on {}: {}",
                                  *options.allocation, host->describe(), words(out)));
  }

  // The first line of a file on the submitting host; "" when it is not there (yet).
  std::string firstLine(const std::string& path) {
    const CommandOutput out = host->run({"cat", path}, kCommandTimeout);
    if (!out.status.ok()) return {};
    return out.out.substr(0, out.out.find('\n'));
  }

  // The member's step, once node 0 of it said it.
  void learnStep() {
    if (!step_id.empty()) return;
    const std::string said = firstLine(stepIdFile(options.job_dir));
    if (said.starts_with(job_id + ".") && allDigits(said.substr(job_id.size() + 1))) step_id = said;
  }

  // A member's state: its step's while squeue lists it, its srun's end once the step script wrote
  // it (an end other than completed or cancelled is the allocation's when that ended); before its
  // step started, PENDING with the allocation's reason.
  std::optional<SlurmJobState> queryStep() {
    learnStep();
    if (!step_id.empty()) {
      const CommandOutput steps = host->run(
          {"squeue", "--steps", "--noheader", "--jobs", job_id, "--format=%i|%N"}, kCommandTimeout);
      if (steps.status.ok()) {
        if (std::optional<SlurmJobState> state = parseSqueueSteps(steps.out, step_id)) return state;
      }
    }
    // A step that ended well, or as asked, says so itself; any other end is the allocation's when
    // that has ended (released, TIMEOUT, NODE_FAIL), whether or not the step had started.
    const std::string exit = firstLine(stepExitFile(options.job_dir));
    if (!exit.empty() && (exit == "0" || cancel_asked)) return stepEnd(exit);
    std::optional<SlurmJobState> allocation = query();
    if (!allocation) return exit.empty() ? std::nullopt : std::optional(stepEnd(exit));
    if (isFinalSlurmState(allocation->state)) {
      if (step_id.empty())
        allocation->reason =
            fmt::format("its step never started: the sweep's allocation {} ended {}", job_id,
                        allocation->state);
      allocation->job_id = step_id.empty() ? job_id : step_id;
      return allocation;
    }
    if (!exit.empty()) return stepEnd(exit);
    if (!step_id.empty()) return known ? std::optional(last) : std::nullopt;
    return SlurmJobState{.job_id = job_id,
                         .state = "PENDING",
                         .reason = allocation->state == "PENDING"
                                       ? fmt::format("the sweep's allocation {} waits: {}", job_id,
                                                     allocation->reason)
                                       : fmt::format("its step in the sweep's allocation {} has "
                                                     "not started",
                                                     job_id)};
  }

  // The step's end from its srun's exit status: 0 completed, a stop asked for (or TERM) cancelled.
  SlurmJobState stepEnd(const std::string& exit) {
    SlurmJobState state{.job_id = step_id.empty() ? job_id : step_id, .nodes = last.nodes};
    int code = 1;
    if (allDigits(exit) && exit.size() < 4) code = std::stoi(exit);
    state.exit_code = code;
    state.state = code == 0                                    ? "COMPLETED"
                  : cancel_asked || code == 130 || code == 143 ? "CANCELLED"
                                                               : "FAILED";
    // No agent ran to say why: the script's own words are in its output.
    if (state.state == "FAILED" && step_id.empty())
      state.reason = fmt::format(
          "its step never started in the sweep's allocation {}: "
          "{}/slurm-step.out says why",
          job_id, options.job_dir);
    return state;
  }

  // Stops a member: its step once it runs (scancel STEP), else its step script's process group.
  void stopStep(bool gracefully) {
    learnStep();
    if (step_id.empty()) {
      // The script checks this file before it starts srun, should it not have said its PID yet.
      host->writeFile(stepCancelFile(options.job_dir), "cancelled\n");
      const std::string pid = firstLine(stepPidFile(options.job_dir));
      if (allDigits(pid)) {
        host->run({"kill", gracefully ? "-TERM" : "-KILL", "--", "-" + pid}, kCommandTimeout);
        if (!gracefully && !ended_marked) {
          last = {.job_id = job_id, .state = "CANCELLED", .reason = "stopped before its step"};
          known = true;
          if (options.on_state) options.on_state(last);
          markEnded();
        }
      }
      return;
    }
    std::vector<std::string> argv = {"scancel"};
    if (gracefully) argv.push_back("--signal=TERM");
    argv.push_back(step_id);
    const CommandOutput out = host->run(argv, kCommandTimeout);
    // Slurm 22.05's scancel signals a step (--signal) and then says "Kill job error on job step
    // id ALLOC: Invalid job id specified", exiting 225: the signal was sent (seen on the test
    // cluster), so that complaint is no failure of the cancel.
    const bool signalled_anyway =
        gracefully &&
        out.err.find(fmt::format("Kill job error on job step id {}:", job_id)) != std::string::npos;
    if (!out.status.ok() && !signalled_anyway && failure.empty())
      failure = fmt::format("scancel of Slurm step {} failed: {}", step_id, words(out));
  }

  void startFollowers() {
    const int nodes = options.spec.launch.slurm->nodes;
    for (int node = 0; node < nodes; ++node) {
      std::vector<std::string> argv = {options.node_binary, "spool-follow",
                                       fmt::format("{}/node-{}", options.job_dir, node),
                                       "--until-file", endedMarker(options.job_dir)};
      if (!options.follow_from.empty()) {
        argv.push_back("--from");
        argv.push_back(options.follow_from);
      }
      followers.push_back(host->start(argv));
      following.push_back(true);
      follower_status.emplace_back();
    }
  }

  // squeue while the job is listed there (JSON, else its text form), then sacct (accounting
  // storage, else the jobcomp file that `sacct -c` reads).
  std::optional<SlurmJobState> query() {
    const CommandOutput json = host->run({"squeue", "--json"}, kCommandTimeout);
    if (json.status.ok()) {
      try {
        if (std::optional<SlurmJobState> state = parseSqueueJson(json.out, job_id)) return state;
        return fromSacct();
      } catch (const Error&) {
        // No JSON serializer in this Slurm build: its text form below.
      }
    }
    const CommandOutput text = host->run(
        {"squeue", "--noheader", "--jobs", job_id, "--format=%i|%T|%r|%N"}, kCommandTimeout);
    if (text.status.ok()) {
      if (std::optional<SlurmJobState> state = parseSqueueText(text.out, job_id)) return state;
    }
    return fromSacct();
  }

  std::optional<SlurmJobState> fromSacct() {
    const std::vector<std::string> fields = {"--jobs",
                                             job_id,
                                             "--allocations",
                                             "--noheader",
                                             "--parsable2",
                                             "--format",
                                             "JobID,State,ExitCode,NodeList"};
    std::vector<std::string> argv = {"sacct"};
    argv.insert(argv.end(), fields.begin(), fields.end());
    CommandOutput out = host->run(argv, kCommandTimeout);
    if (out.status.ok()) {
      if (std::optional<SlurmJobState> state = parseSacct(out.out, job_id)) return state;
    }
    argv.insert(argv.begin() + 1, "--completion");  // the jobcomp file: final states only
    out = host->run(argv, kCommandTimeout);
    if (out.status.ok()) return parseSacct(out.out, job_id);
    return std::nullopt;
  }

  // Reads the job's state when it is time to; true when it changed.
  bool poll() {
    if (ended_marked || Clock::now() - last_poll < options.poll_every) return false;
    last_poll = Clock::now();
    std::optional<SlurmJobState> state = stepMode() ? queryStep() : query();
    if (!state) {
      if (unknown_since == Clock::time_point{}) unknown_since = Clock::now();
      if (Clock::now() - unknown_since < kUnknownFor) return false;
      state = SlurmJobState{
          .job_id = job_id, .state = "UNKNOWN", .reason = "neither squeue nor sacct knows the job"};
    }
    unknown_since = {};
    const bool changed = !known || !(*state == last);
    if (changed) {
      known = true;
      last = *state;
      if (state->state == "NODE_FAIL") down_nodes = downNodesOf(state->nodes);
      if (options.on_state) options.on_state(last);
    }
    if (isFinalSlurmState(last.state)) markEnded();
    return changed;
  }

  // "[slurm] job 4242: PENDING (Resources)", "[slurm] job 4242: RUNNING on n[1-2]".
  std::string stateLine() const {
    std::string line = fmt::format("[slurm] job {}: {}", job_id, last.state);
    if (!last.reason.empty()) line += fmt::format(" ({})", last.reason);
    if (!last.nodes.empty()) line += fmt::format(" on {}", last.nodes);
    if (!down_nodes.empty()) line += fmt::format("; down: {}", down_nodes);
    return line;
  }

  // The nodes of `nodes` that Slurm holds down or not responding (a NODE_FAIL's culprits).
  std::string downNodesOf(const std::string& nodes) {
    if (nodes.empty()) return {};
    const CommandOutput out = host->run({"sinfo", "--noheader", "--nodes", nodes,
                                         "--states=down,no_respond,fail", "--format=%N|%E"},
                                        kCommandTimeout);
    if (!out.status.ok()) return {};
    std::string down;
    for (size_t start = 0; start < out.out.size();) {
      size_t end = out.out.find('\n', start);
      if (end == std::string::npos) end = out.out.size();
      const std::string line = out.out.substr(start, end - start);
      start = end + 1;
      if (line.empty()) continue;
      const size_t bar = line.find('|');
      down += fmt::format("{}{}", down.empty() ? "" : "; ",
                          bar == std::string::npos
                              ? line
                              : fmt::format("{} ({})", line.substr(0, bar), line.substr(bar + 1)));
    }
    return down;
  }

  void markEnded() {
    if (ended_marked) return;
    host->writeFile(endedMarker(options.job_dir), last.state + "\n");
    ended_marked = true;
  }
};

SlurmLaunch::SlurmLaunch(std::unique_ptr<SlurmHost> host, SlurmLaunchOptions options)
    : state_(std::make_unique<State>()) {
  RM_CHECK_ARG(options.spec.launch.slurm.has_value(), "a Slurm launch of a spec without Slurm");
  state_->host = std::move(host);
  state_->options = std::move(options);
  const std::optional<std::string>& allocation = state_->options.allocation;
  if (allocation) {
    state_->job_id = *allocation;
    const std::optional<std::string>& recorded = state_->options.job_id;
    if (recorded && recorded->starts_with(*allocation + ".")) state_->step_id = *recorded;
    if (!recorded) state_->startStep();
  } else if (state_->options.job_id) {
    state_->job_id = *state_->options.job_id;
  } else {
    state_->submit();
  }
  state_->last = {.job_id = state_->job_id};
  state_->startFollowers();
}

SlurmLaunch::~SlurmLaunch() {
  if (!state_) return;
  for (const std::unique_ptr<Launch>& follower : state_->followers) follower->kill();
}

bool SlurmLaunch::pump(milliseconds timeout, const LaunchSink& sink) {
  State& s = *state_;
  if (s.poll() && sink.on_log) sink.on_log(s.stateLine());
  const auto deadline = Clock::now() + timeout;
  bool any = false;
  for (size_t node = 0; node < s.followers.size(); ++node) {
    if (!s.following[node]) continue;
    any = true;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    const milliseconds slice =
        std::max(milliseconds(1), left / static_cast<int>(s.followers.size()));
    if (!s.followers[node]->pump(slice, sink)) {
      s.following[node] = false;
      s.follower_status[node] = s.followers[node]->wait();
    }
  }
  if (any) return true;
  // Every node's spool has ended: the job's end as Slurm says it, once it says it.
  if (!s.ended_marked) {
    s.last_poll = {};
    if (s.poll() && sink.on_log) sink.on_log(s.stateLine());
  }
  if (!s.ended_marked) std::this_thread::sleep_for(std::min(timeout, milliseconds(200)));
  return !s.ended_marked;
}

void SlurmLaunch::cancel() {
  State& s = *state_;
  s.cancel_asked = true;
  if (s.stepMode()) {
    s.stopStep(/*gracefully=*/true);
    s.last_poll = {};
    return;
  }
  // A job still queued has nothing to stop gracefully: it leaves the queue. A running one's
  // agents get SIGTERM, which they forward to their workers, which end their step cancelled.
  const bool queued = !s.known || runStatusOfSlurmState(s.last.state) == "pending";
  std::vector<std::string> argv = {"scancel"};
  if (!queued) argv.push_back("--signal=TERM");
  argv.push_back(s.job_id);
  const CommandOutput out = s.host->run(argv, kCommandTimeout);
  if (!out.status.ok() && s.failure.empty())
    s.failure = fmt::format("scancel of Slurm job {} failed: {}", s.job_id, words(out));
  s.last_poll = {};
}

void SlurmLaunch::kill() {
  State& s = *state_;
  s.cancel_asked = true;
  if (s.stepMode()) {
    s.stopStep(/*gracefully=*/false);
    s.last_poll = {};
    return;
  }
  const CommandOutput out = s.host->run({"scancel", s.job_id}, kCommandTimeout);
  if (!out.status.ok() && s.failure.empty())
    s.failure = fmt::format("scancel of Slurm job {} failed: {}", s.job_id, words(out));
  s.last_poll = {};
}

ExitStatus SlurmLaunch::wait() {
  State& s = *state_;
  for (size_t node = 0; node < s.followers.size(); ++node) {
    if (s.following[node]) {
      s.followers[node]->kill();
      s.follower_status[node] = s.followers[node]->wait();
      s.following[node] = false;
    }
  }
  if (s.known && runStatusOfSlurmState(s.last.state) == "cancelled") return {.exit_code = 130};
  // The root of a failure, not its echo: one node's agent failing makes srun stop the others'
  // (SIGTERM: they end 130, as cancelled), so a node that failed by itself speaks first.
  const auto failed = std::find_if(
      s.follower_status.begin(), s.follower_status.end(),
      [](const ExitStatus& status) { return !status.ok() && status.exit_code != 130; });
  if (failed != s.follower_status.end()) return *failed;
  for (const ExitStatus& status : s.follower_status)
    if (!status.ok()) return status;
  return {};
}

std::string SlurmLaunch::failure() const {
  const State& s = *state_;
  if (!s.failure.empty()) return s.failure;
  if (!s.known) return {};
  const std::string_view status = runStatusOfSlurmState(s.last.state);
  if (status != "failed") return {};
  // A job whose script failed because a worker did: the agents' own root cause says more (a
  // sweep member whose step never started has no agent to say it).
  if (s.last.state == "FAILED" && !(s.stepMode() && s.step_id.empty())) return {};
  std::string text = describeSlurmState(s.last);
  if (!s.down_nodes.empty()) text += fmt::format("; down: {}", s.down_nodes);
  return text;
}

void SlurmLaunch::refreshState() {
  state_->last_poll = {};
  state_->poll();
}

const std::string& SlurmLaunch::jobId() const {
  return state_->job_id;
}

const SlurmJobState& SlurmLaunch::lastState() const {
  return state_->last;
}

}  // namespace ringmaster::slurm
