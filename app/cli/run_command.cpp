// The run command's front end over RunSession: the header line, the live progress display,
// signals turned into stop requests, the events file, and the run's report at the end.
#include "cli/run_command.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "cli/history_commands.h"
#include "cli/sweep_command.h"
#if RINGMASTER_HAVE_LIBSSH
#include "cli/ssh_prompts.h"
#endif
#include "cli/terminal.h"
#include "core/display_text.h"
#include "core/error.h"
#include "db/database.h"
#include "exit_codes.h"
#include "launcher/local_launcher.h"
#include "process/detached_job.h"
#include "recorder/run_lifecycle.h"
#include "run/run_events.h"
#include "run/run_session.h"
#include "slurm/slurm_state.h"
#include "spec/job_spec.h"
#include "telemetry/progress.h"

namespace ringmaster::cli {

using Clock = std::chrono::steady_clock;
using session::RunEvent;

namespace {

std::atomic<int> g_stop_signals{0};

void onStopSignal(int) {
  g_stop_signals.fetch_add(1);
}

// SIGINT / SIGTERM count stop requests (without SA_RESTART, so poll returns at once).
class StopSignals {
 public:
  StopSignals() {
    g_stop_signals = 0;
    struct sigaction action {};
    action.sa_handler = onStopSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  int count() const { return g_stop_signals.load(); }

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// The live progress line: redrawn in place on a terminal, a plain line when the step moved (at
// most one a second) otherwise; never the same line twice, so the final one prints once and, on a
// terminal, stays. With a total of steps the bar fills; without one (a script whose spec does not
// say how many steps it logs) a marker moves one cell with every logged step (issue 33).
class ProgressDisplay {
 public:
  static constexpr int kWidth = 24;  // cells of the bar

  ProgressDisplay(bool enabled, bool terminal) : enabled_(enabled), terminal_(terminal) {}

  void update(const RunProgress& progress, bool force = false) {
    if (!enabled_) return;
    const auto now = Clock::now();
    const auto interval = terminal_ ? std::chrono::milliseconds(100) : std::chrono::seconds(1);
    if (!force && now - last_ < interval) return;
    if (!terminal_ && progress.step() == last_step_ && !force) return;
    const std::string line =
        terminal_ ? bar(progress) + "  " + text(progress) : plainLine(progress);
    if (line == last_line_) return;
    last_ = now;
    last_step_ = progress.step();
    last_line_ = line;
    if (terminal_) {
      fmt::print(stderr, "\r\x1b[K{}", line);
      drawn_ = true;
    } else {
      fmt::print(stderr, "{}\n", line);
    }
    std::fflush(stderr);
  }
  // The run ended: its last state once more where it changed, the terminal's line kept.
  void finish(const RunProgress* progress) {
    if (progress) update(*progress, /*force=*/true);
    if (drawn_) fmt::print(stderr, "\n");
    drawn_ = false;
  }
  // Clears the in-place line before other output (and draws it again at the next update).
  void clear() {
    if (drawn_) {
      fmt::print(stderr, "\r\x1b[K");
      last_line_.clear();
    }
    drawn_ = false;
  }

 private:
  // "[#####-------]  40%", or without a total "[----===-----]" with the marker at the step.
  static std::string bar(const RunProgress& progress) {
    if (progress.totalSteps() <= 0) {
      constexpr int kMarker = 3;
      const int at = static_cast<int>(progress.step() % (kWidth - kMarker + 1));
      return fmt::format("[{}{}{}]", std::string(at, '-'), std::string(kMarker, '='),
                         std::string(kWidth - kMarker - at, '-'));
    }
    const double fraction = fractionDone(progress);
    const int filled = static_cast<int>(fraction * kWidth);
    return fmt::format("[{}{}] {:3.0f}%", std::string(filled, '#'),
                       std::string(kWidth - filled, '-'), fraction * 100);
  }
  static std::string plainLine(const RunProgress& progress) {
    if (progress.totalSteps() <= 0) return text(progress);
    return fmt::format("{:3.0f}%  {}", fractionDone(progress) * 100, text(progress));
  }
  static double fractionDone(const RunProgress& progress) {
    return std::min(1.0, static_cast<double>(progress.step()) / progress.totalSteps());
  }
  // "step 3/10  loss 0.5  20 samples/s  ETA 4 s" ("step 3" and no ETA without a total).
  static std::string text(const RunProgress& progress) {
    if (progress.step() == 0)
      return fmt::format("starting: {}/{} ranks up", progress.ranksStarted(), progress.worldSize());
    const bool total = progress.totalSteps() > 0;
    std::string text = total ? fmt::format("step {}/{}", progress.step(), progress.totalSteps())
                             : fmt::format("step {}", progress.step());
    if (auto loss = progress.loss()) text += fmt::format("  loss {}", formatNumber(*loss));
    if (progress.samplesPerSecond() > 0)
      text += fmt::format("  {:.0f} samples/s", progress.samplesPerSecond());
    if (auto eta = progress.etaSeconds(); eta && total)
      text += fmt::format("  ETA {}", formatDuration(*eta));
    return text;
  }

  bool enabled_, terminal_;
  bool drawn_ = false;
  Clock::time_point last_{};
  int64_t last_step_ = -1;
  std::string last_line_;
};

int exitCodeOf(const std::string& status) {
  if (status == "completed") return kExitOk;
  return status == "cancelled" ? kExitCancelled : kExitFailed;
}

// What a detached run's spool says of itself (lines dropped, the spool gone while its agent runs),
// which an attach shows unless quiet, verbose or not.
bool isSpoolWord(std::string_view line) {
  return line.starts_with("warning: the telemetry spool");
}

// Thrown out of an attach's loop by Ctrl-C: the follower stops, the detached job goes on.
struct LeaveDetached {};

// What is being run, where, and where it is recorded (and its checkpoints), on stderr.
void printRunHeader(session::RunSession& run, const RunCommandOptions& options) {
  const int64_t run_id = run.runId();
  const JobSpec& spec = run.spec();
  const int world = run.worldSize();
  const bool colour = colourFor(stderr);
  const std::string where =
      run.local() ? fmt::format("{} local rank{}", world, world == 1 ? "" : "s")
      : spec.launch.slurm
          ? fmt::format("{} ranks under Slurm ({} node{} x {})", world, spec.launch.slurm->nodes,
                        spec.launch.slurm->nodes == 1 ? "" : "s", spec.launch.slurm->ranks_per_node)
          : fmt::format("{} rank{} over SSH on {} host{}", world, world == 1 ? "" : "s",
                        spec.launch.hosts.size(), spec.launch.hosts.size() == 1 ? "" : "s");
  fmt::print(stderr, "{} {}run {} '{}': {} on {}, recording to {}\n",
             paint("ringmaster", Colour::kBold, colour),
             run.attached()   ? "attached to "
             : options.detach ? "detached "
                              : "",
             run_id, displaySafeLine(spec.name), strategyLabel(spec), where, options.db_path);
  if (run.workerSpec().checkpoint) {
    fmt::print(stderr, "checkpoints in {}{}\n", displaySafeLine(run.workerSpec().checkpoint->dir),
               run.resumedFrom() ? fmt::format(" (resuming run {}'s)", *run.resumedFrom()) : "");
  }
}

// A detached run: its id on stdout (for scripts), how to reach it again on stderr.
int reportDetached(session::RunSession& run, const RunCommandOptions& options,
                   session::RunEventWriter* events) {
  const int64_t run_id = run.runId();
  if (options.json) {
    fmt::print("{}\n",
               nlohmann::json{{"run", run_id}, {"status", "detached"}, {"job_dirs", run.jobDirs()}}
                   .dump());
  } else {
    fmt::print("{}\n", run_id);
  }
  if (!options.quiet) {
    fmt::print(stderr,
               "run {} is detached: its workers go on without this process (spool in {}).\n"
               "follow it: ringmaster --db {} attach {}\nstop it:   ringmaster --db {} cancel "
               "{}\n",
               run_id, displaySafeLine(run.jobDirs().empty() ? "" : run.jobDirs()[0]),
               options.db_path, run_id, options.db_path, run_id);
  }
  if (events)
    events->write({.event = "finished", .run = run_id, .status = "detached", .exit_code = 0});
  return kExitOk;
}

// `stop_leaves`: a stop signal leaves the run (attach) instead of cancelling it.
int runSession(session::RunSession& run, const RunCommandOptions& options,
               session::RunEventWriter* events,
               const std::function<void(std::string_view)>& on_log = {}, bool stop_leaves = false) {
  const int64_t run_id = run.runId();
  const int world = run.worldSize();
  if (events) events->write({.event = "created", .run = run_id, .world_size = world});

  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  if (!options.quiet) printRunHeader(run, options);

  ProgressDisplay display(!options.quiet, terminal);
  StopSignals signals;
  int forwarded_signals = 0;
  int64_t evented_step = -1;
  int evented_ranks = -1;
  session::RunObserver observer{
      .on_tick =
          [&] {
            if (stop_leaves && signals.count() > 0) {
              display.clear();
              throw LeaveDetached{};
            }
            for (; forwarded_signals < signals.count(); ++forwarded_signals) run.requestStop();
          },
      .on_progress =
          [&](const RunProgress& progress) {
            display.update(progress);
            if (events &&
                (progress.step() != evented_step || progress.ranksStarted() != evented_ranks)) {
              evented_step = progress.step();
              evented_ranks = progress.ranksStarted();
              events->write({.event = "progress",
                             .run = run_id,
                             .step = progress.step(),
                             .total_steps = progress.totalSteps(),
                             .ranks_started = progress.ranksStarted(),
                             .loss = progress.loss()});
            }
          },
      .on_log =
          [&](std::string_view line) {
            if (on_log) on_log(line);
            // Slurm's word on the job (queued, why, started) is news whatever the verbosity.
            const bool slurm_word = !options.quiet && line.starts_with("[slurm] ");
            if (!options.verbose && !slurm_word &&
                !(run.attached() && !options.quiet && isSpoolWord(line)))
              return;
            display.clear();
            fmt::print(stderr, "{}\n", displaySafeMessageLine(line));
          },
      .on_cancelling =
          [&] {
            display.clear();
            if (!options.quiet)
              fmt::print(stderr,
                         "cancelling: the ranks finish their step (Ctrl-C again to kill)\n");
            if (events) events->write({.event = "cancelling", .run = run_id});
          },
      .on_recording_failure =
          [&](const std::string& failure) {
            display.clear();
            fmt::print(stderr, "error: {}; stopping the run\n", displaySafe(failure));
          },
      .stop_launch = [&signals] { return signals.count() > 0; }};
  const session::RunOutcome outcome = run.run(observer);
  display.finish(run.progress());
  if (outcome.finish_failure) {
    fmt::print(stderr,
               "error: could not mark run {} {}: {}; it will show as interrupted from the next "
               "start\n",
               run_id, outcome.status, displaySafe(*outcome.finish_failure));
    if (events)
      events->write({.event = "finished", .run = run_id, .status = "", .exit_code = kExitFailed});
    return kExitFailed;
  }
  if (outcome.status == "detached") return reportDetached(run, options, events);
  printRunReport(run.database(), run_id, options.json, options.report_on_stderr ? stderr : stdout);
  const int code = exitCodeOf(outcome.status);
  if (events)
    events->write(
        {.event = "finished", .run = run_id, .status = outcome.status, .exit_code = code});
  return code;
}

}  // namespace

int runCommand(const RunCommandOptions& options) {
  std::optional<session::RunEventWriter> events;
  if (options.events_path) events.emplace(*options.events_path);
  try {
    session::RunRequest request{.spec_path = options.spec_path,
                                .db_path = options.db_path,
                                .overrides = options.overrides,
                                .save_telemetry = options.save_telemetry,
                                .grace_s = options.grace_s,
                                .detach = options.detach,
                                .ssh_config = options.ssh_config,
                                .master_addr = options.master_addr};
#if RINGMASTER_HAVE_LIBSSH
    request.connect = interactiveConnectOptions(options.accept_new_host_keys, options.known_hosts);
#endif
    session::RunSession run(std::move(request));
    return runSession(run, options, events ? &*events : nullptr);
  } catch (const Error& e) {
    // Refused, or the launch failed: the window reads why from the command's stderr.
    if (events) events->write({.event = "error", .message = e.message()});
    throw;
  }
}

namespace {

// A detached run as `cancel` finds it before anything is started (issue 32).
struct CancelTarget {
  storage::DetachedRun run;
  bool local = false;
  // The host's agent as its launch recorded it (local runs); nullopt for a run recorded before
  // agents were.
  std::optional<DetachedAgent> agent;
};

CancelTarget findCancelTarget(const std::string& db_path, int64_t run_id) {
  storage::Database db(db_path);
  std::optional<storage::DetachedRun> run = storage::findDetachedRun(db, run_id);
  if (!run) RM_THROW(kInvalidArgument, fmt::format("there is no run {} in {}", run_id, db_path));
  if (run->job_dirs.empty()) {
    RM_THROW(kInvalidArgument,
             fmt::format("run {} was not started detached (ringmaster run --detach): cancel stops "
                         "only detached runs (one in the foreground stops with Ctrl-C where it "
                         "runs)",
                         run_id));
  }
  CancelTarget target;
  const SpecParseResult parsed = parseJobSpec(run->spec_json);
  target.local = parsed.ok() && runsLocally(parsed.spec->launch) && run->job_dirs.size() == 1 &&
                 !run->scheduler;
  if (target.local && !run->agents.empty() && run->agents[0])
    target.agent = session::detachedAgentFrom(0, *run->agents[0]);
  target.run = std::move(*run);
  return target;
}

std::string pidList(const std::vector<ProcessIdentity>& processes) {
  std::string pids;
  for (const ProcessIdentity& process : processes) pids += fmt::format(" {}", process.pid);
  return pids;
}

// Stops every process of a local detached run still running (by the agent its launch recorded,
// verified by start time), then says whether any is left: kExitOk when none, else kExitFailed.
int stopWhatIsLeft(int64_t run_id, const CancelTarget& target, const RunCommandOptions& options) {
  const std::string& job_dir = target.run.job_dirs[0];
  const std::vector<ProcessIdentity> left =
      stopDetachedJob(*target.agent, job_dir,
                      std::chrono::milliseconds(static_cast<int64_t>(options.grace_s * 1000)));
  if (!left.empty()) {
    fmt::print(stderr, "error: run {}: processes still running after the cancel:{}\n", run_id,
               pidList(left));
    return kExitFailed;
  }
  if (!options.quiet)
    fmt::print(stderr, "run {}: no process of the run is left on its host\n", run_id);
  return kExitOk;
}

// `cancel` of a run that has ended: its processes, if any still run (an attach that recorded it
// failed while its agent went on), are stopped; with none, there is nothing to cancel.
int cancelEndedRun(int64_t run_id, const CancelTarget& target, const RunCommandOptions& options) {
  const std::vector<ProcessIdentity> running =
      target.agent ? detachedJobProcesses(*target.agent, target.run.job_dirs[0])
                   : std::vector<ProcessIdentity>{};
  if (running.empty()) {
    RM_THROW(kInvalidArgument,
             fmt::format("run {} has already ended ({}){}: there is nothing to cancel", run_id,
                         target.run.status, target.agent ? " and no process of it runs" : ""));
  }
  if (!options.quiet)
    fmt::print(stderr,
               "run {} has ended ({}), but {} of its processes still run:{}; stopping them\n",
               run_id, target.run.status, running.size(), pidList(running));
  return stopWhatIsLeft(run_id, target, options);
}

// After the recorded cancel of a remote run: every host's follower must have said that no process
// of the job is left there.
int checkHostsClear(int64_t run_id, size_t hosts, int hosts_clear, const std::string& left_words,
                    const RunCommandOptions& options, int code) {
  if (!left_words.empty() || hosts_clear < static_cast<int>(hosts)) {
    fmt::print(stderr, "error: run {}: not every host said that no process is left:{}\n", run_id,
               left_words.empty() ? " (a host's follower ended without saying)" : left_words);
    return kExitFailed;
  }
  if (!options.quiet)
    fmt::print(stderr, "run {}: no process of the run is left on any of its {} hosts\n", run_id,
               hosts);
  return code;
}

// The PIDs a detached agent wrote in its job directory: its own, then its workers' (a run
// recorded before its agent was: no start time to check them by).
std::vector<pid_t> jobProcesses(const std::string& job_dir) {
  std::vector<pid_t> pids;
  for (const char* name : {"agent.pid", "workers.pid"}) {
    std::ifstream file(job_dir + "/" + name);
    for (long pid = 0; file >> pid;)
      if (pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

// After the recorded cancel of a local run: its processes are stopped if any is left (the agent
// stops its workers within its grace; what outlives that is killed) and none may be left.
int checkNothingLeftHere(int64_t run_id, const CancelTarget& target,
                         const RunCommandOptions& options, int code) {
  if (target.agent) {
    const int left = stopWhatIsLeft(run_id, target, options);
    return left == kExitOk ? code : left;
  }
  std::vector<pid_t> left;
  const auto deadline = Clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(options.grace_s * 1000)) +
                        std::chrono::seconds(10);
  for (;;) {
    left.clear();
    for (pid_t pid : jobProcesses(target.run.job_dirs[0]))
      if (processIdentity(pid)) left.push_back(pid);
    if (left.empty() || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!left.empty()) {
    std::string pids;
    for (pid_t pid : left) pids += fmt::format(" {}", pid);
    fmt::print(stderr, "error: run {}: processes still running after the cancel:{}\n", run_id,
               pids);
    return kExitFailed;
  }
  if (!options.quiet)
    fmt::print(stderr, "run {}: no process of the run is left on its host\n", run_id);
  return code;
}

// After the recorded cancel of a Slurm run (issue 35): Slurm ends a job only once every process
// of it is gone (its proctrack plugin), so the job's final state, recorded with the run, is the
// check that nothing is left on any node.
int checkSchedulerJobEnded(const RunCommandOptions& options, int64_t run_id, int code) {
  storage::Database db(options.db_path);
  const std::optional<storage::DetachedRun> run = storage::findDetachedRun(db, run_id);
  const std::string state = run && run->scheduler ? run->scheduler->state : "";
  const std::string job = run && run->scheduler ? run->scheduler->job_id : "?";
  if (!slurm::isFinalSlurmState(state) || state.empty()) {
    fmt::print(stderr, "error: run {}: Slurm job {} has not ended ({})\n", run_id, job,
               state.empty() ? "its state is not known" : state);
    return kExitFailed;
  }
  if (!options.quiet)
    fmt::print(stderr, "run {}: Slurm job {} ended ({}): no process of it is left on its nodes\n",
               run_id, job, state);
  return code;
}

// Follows (attach) or cancels a detached run that is `running`, recording it to its end.
int followDetachedRun(const RunCommandOptions& options, int64_t run_id, bool cancel,
                      const std::optional<CancelTarget>& target, session::RunEventWriter* events) {
  session::AttachRequest request{.db_path = options.db_path,
                                 .run_id = run_id,
                                 .grace_s = options.grace_s,
                                 .ssh_config = options.ssh_config};
#if RINGMASTER_HAVE_LIBSSH
  request.connect = interactiveConnectOptions(options.accept_new_host_keys, options.known_hosts);
#endif
  session::RunSession run(std::move(request));
  if (cancel) {
    run.requestStop();
    if (!options.quiet)
      fmt::print(stderr, "cancelling run {}: its ranks finish their step\n", run_id);
  }
  // Each host's follower says, once its agent ended, whether any process of the job is left.
  int hosts_clear = 0;
  std::string left_words;
  const auto on_log = [&](std::string_view line) {
    if (!line.starts_with("[job ")) return;
    if (line.find("] no process of the job is left on ") != std::string_view::npos)
      ++hosts_clear;
    else if (line.find("] processes of the job still running on ") != std::string_view::npos)
      left_words += fmt::format("\n{}", displaySafeMessageLine(line));
  };
  int code = 0;
  try {
    code = runSession(run, options, events, on_log, /*stop_leaves=*/!cancel);
  } catch (const LeaveDetached&) {
    // What arrived is stored (the recorder's end); the run stays running, detached.
    if (!options.quiet)
      fmt::print(stderr,
                 "left run {}: it goes on detached (ringmaster attach {} follows it again, "
                 "ringmaster cancel {} stops it)\n",
                 run_id, run_id, run_id);
    if (events)
      events->write({.event = "finished", .run = run_id, .status = "detached", .exit_code = 0});
    return kExitOk;
  }
  if (!cancel) return code;
  if (target->run.scheduler) return checkSchedulerJobEnded(options, run_id, code);
  if (!target->local)
    return checkHostsClear(run_id, run.jobDirs().size(), hosts_clear, left_words, options, code);
  return checkNothingLeftHere(run_id, *target, options, code);
}

}  // namespace

int attachCommand(const RunCommandOptions& options, int64_t run_id, bool cancel) {
  std::optional<session::RunEventWriter> events;
  if (options.events_path) events.emplace(*options.events_path);
  try {
    // As `runs` and `show`: a --db with no file is refused, never created (issue 32).
    requireExistingDatabase(options.db_path);
    std::optional<CancelTarget> target;
    if (cancel) {
      target = findCancelTarget(options.db_path, run_id);
      const std::string& status = target->run.status;  // pending: queued in its scheduler
      if (status != "running" && status != "pending")
        return cancelEndedRun(run_id, *target, options);
    }
    return followDetachedRun(options, run_id, cancel, target, events ? &*events : nullptr);
  } catch (const Error& e) {
    if (events) events->write({.event = "error", .message = e.message()});
    throw;
  }
}

namespace {

// The options `run`, `attach` and `cancel` share: how the run is watched and stopped.
void addWatchOptions(CLI::App& command, RunCommandOptions& options) {
  command.add_option("--grace", options.grace_s, "seconds from SIGTERM to SIGKILL when cancelling")
      ->default_val(5.0)
      ->check(CLI::Range(0.0, 3600.0));
  command.add_option("--events", options.events_path,
                     "append the run's events to this file as JSON lines (created, progress, "
                     "finished: session/README.md), for a program that watches the run");
  command.add_flag("-q,--quiet", options.quiet, "no progress output");
  command.add_flag("-v,--verbose", options.verbose, "show the workers' own output");
  command.add_flag("--json", options.json, "print the final summary as JSON");
  command.add_option("--known-hosts", options.known_hosts,
                     "known_hosts file (default ~/.ssh/known_hosts)");
  command.add_option("--ssh-config", options.ssh_config,
                     "ssh client config (default ~/.ssh/config)");
}

}  // namespace

void addRunCommands(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<RunCommandOptions>();
  CLI::App* run = app.add_subcommand(
      "run", "validate a job spec, run it on this machine, record it and print its summary");
  run->add_option("spec", options->spec_path, "job spec (JSON)")->required();
  run->add_option("--set", options->overrides,
                  "override a spec field, FIELD=VALUE (VALUE as JSON, else a string); repeatable")
      ->allow_extra_args(false);
  run->add_option("--save-telemetry", options->save_telemetry,
                  "also write every telemetry line received to this file");
  addWatchOptions(*run, *options);
  run->add_flag("--accept-new-host-keys", options->accept_new_host_keys,
                "accept and record the key of a host not yet in known_hosts (its fingerprint is "
                "shown); a changed key is always refused");
  run->add_option("--master-addr", options->master_addr,
                  "the first host's address as the other hosts reach it (default: its HostName)");
  run->add_flag("--detach", options->detach,
                "start the job detached: it goes on when this command, the window or the SSH "
                "connection goes away; prints the run id (`attach` follows it, `cancel` stops it)");
  commands.add(run, [options](const CommonOptions& common) {
    options->db_path = common.databasePath();
    return runCommand(*options);
  });

  auto detached_run = std::make_shared<int64_t>(0);
  CLI::App* attach = app.add_subcommand(
      "attach",
      "follow a detached run: replay what it spooled since the last stored event, "
      "then record it live to its end");
  CLI::App* cancel = app.add_subcommand(
      "cancel",
      "stop a detached run on every host, record it to its end as cancelled and check "
      "that none of its processes is left");
  auto detached_sweep = std::make_shared<int64_t>(0);
  for (CLI::App* command : {attach, cancel}) {
    CLI::Option* run_option = command->add_option("run", *detached_run, "run id");
    // A detached sweep instead (issue 37, cli/sweep_command.h).
    CLI::Option* sweep_option =
        command->add_option("--sweep", *detached_sweep, "a detached sweep instead of a run");
    run_option->excludes(sweep_option);
    addWatchOptions(*command, *options);
    const bool cancelling = command == cancel;
    commands.add(command, [options, detached_run, detached_sweep, cancelling, run_option,
                           sweep_option](const CommonOptions& common) {
      options->db_path = common.databasePath();
      if (sweep_option->count() > 0)
        return attachSweepCommand(options->db_path, *detached_sweep, cancelling, options->grace_s,
                                  options->quiet);
      if (run_option->count() == 0)
        RM_THROW(kInvalidArgument, "a run id (or --sweep ID) is needed");
      return attachCommand(*options, *detached_run, cancelling);
    });
  }
}

}  // namespace ringmaster::cli
