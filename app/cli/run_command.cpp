// The run command's loop: launcher output in, recorder and progress display out, signals turned
// into a cancel (first) and a kill (second).
#include "cli/run_command.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "checkpoint/training_checkpoint.h"
#include "cli/history_commands.h"
#if RINGMASTER_HAVE_LIBSSH
#include "cli/ssh_prompts.h"
#endif
#include "cli/terminal.h"
#include "core/display_text.h"
#include "core/error.h"
#include "db/database.h"
#include "db/files.h"
#include "exit_codes.h"
#include "launcher/local_launcher.h"
#if RINGMASTER_HAVE_LIBSSH
#include "ssh/ssh_launcher.h"
#endif
#include "query/runs.h"
#include "recorder/recorder.h"
#include "spec/job_spec.h"
#include "telemetry/codec.h"
#include "telemetry/progress.h"
#include "train/data_check.h"

namespace ringmaster::cli {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace storage;

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

// The override among `overrides` ("a.b=VALUE") that set the field at `path` or one inside it, or
// a field containing it; nullptr when the problem is not at a field an override set.
const std::string* overrideFor(const std::string& path, const std::vector<std::string>& overrides) {
  const auto within = [](const std::string& inner, const std::string& outer) {
    return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
           (inner[outer.size()] == '.' || inner[outer.size()] == '[');
  };
  for (const std::string& assignment : overrides) {
    const std::string field = assignment.substr(0, assignment.find('='));
    if (path == field || within(path, field) || within(field, path)) return &assignment;
  }
  return nullptr;
}

JobSpec loadSpec(const RunCommandOptions& options) {
  const std::string text = readJobSpecText(options.spec_path);
  SpecParseResult parsed = parseJobSpec(text);
  if (options.overrides.empty() || !parsed.ok()) {
    // The file's own problems (the JSON error with its position first of all) are the file's.
    if (!parsed.ok())
      RM_THROW(kSpec, fmt::format("{} is not a valid job spec:\n{}", options.spec_path,
                                  parsed.describe()));
    return *parsed.spec;
  }
  // The file is valid: whatever is wrong now came with the overrides, and each problem names
  // the --set that made it where it can.
  nlohmann::json document = nlohmann::json::parse(text);
  applyOverrides(document, options.overrides);
  parsed = parseJobSpec(document);
  if (parsed.ok()) return *parsed.spec;
  std::string sets, problems;
  for (const std::string& assignment : options.overrides)
    sets += fmt::format("{}--set {}", sets.empty() ? "" : " ", assignment);
  for (const SpecProblem& problem : parsed.problems) {
    problems += fmt::format(
        "\n{}", problem.path.empty() ? problem.message : problem.path + ": " + problem.message);
    if (const std::string* cause = overrideFor(problem.path, options.overrides))
      problems += fmt::format(" (from --set {})", *cause);
  }
  RM_THROW(kSpec, fmt::format("{} makes the job spec invalid ({} itself is valid):{}", sets,
                              options.spec_path, problems));
}

// Refuses, before anything is recorded, a local run whose data files this machine cannot load.
void checkDataBeforeLaunch(const JobSpec& spec, const std::string& spec_path) {
  const std::vector<SpecProblem> problems = checkDataFiles(spec);
  if (problems.empty()) return;
  std::string text;
  bool missing = false;
  for (const SpecProblem& problem : problems) {
    text += fmt::format("\n{}: {}", problem.path, problem.message);
    missing = missing || problem.message.starts_with("no file");
  }
  if (missing) {
    // make-idx writes MNIST's training file names into one directory.
    const fs::path images(spec.data.images), labels(spec.data.labels);
    if (images.filename() == "train-images-idx3-ubyte" &&
        labels.filename() == "train-labels-idx1-ubyte" &&
        images.parent_path() == labels.parent_path()) {
      const std::string dir = images.has_parent_path() ? images.parent_path().string() : ".";
      text += fmt::format(
          "\n(`ringmaster-node make-idx {}` writes a small generated MNIST-shaped set there; or "
          "unpack MNIST's own files there)",
          dir);
    } else {
      text +=
          "\n(`ringmaster-node make-idx DIR` writes a small generated MNIST-shaped set, "
          "DIR/train-images-idx3-ubyte and DIR/train-labels-idx1-ubyte)";
    }
  }
  RM_THROW(kSpec, fmt::format("{}: the data cannot be read:{}", spec_path, text));
}

// Where a relative checkpoint.dir goes in a local run: under the run's own directory, not the
// working directory. With `resume`, the newest earlier run of the same name that has that
// directory is continued (its id in `resumed_from`), as a relative dir named before.
std::string checkpointDirFor(const JobSpec& spec, const Database& db, const std::string& db_path,
                             int64_t run_id, std::optional<int64_t>& resumed_from) {
  const std::string& dir = spec.checkpoint->dir;
  if (spec.checkpoint->resume) {
    RunFilter same;
    same.name_contains = spec.name;
    for (const RunRecord& earlier : listRuns(db, same)) {
      if (earlier.id == run_id || earlier.name != spec.name) continue;
      const fs::path candidate = runDirectory(db_path, earlier.id) / dir;
      std::error_code ec;
      if (fs::is_directory(candidate, ec)) {
        resumed_from = earlier.id;
        return candidate.lexically_normal().string();
      }
    }
  }
  return (runDirectory(db_path, run_id) / dir).lexically_normal().string();
}

bool runsHere(const JobSpec& spec) {
  if (spec.launch.hosts.size() != 1) return false;
  const LaunchHostSpec& host = spec.launch.hosts[0];
  const bool local_name =
      host.host == "localhost" || host.host == "127.0.0.1" || host.host == "::1";
  return local_name && !host.port && !host.user && !host.identity_file;
}

#if RINGMASTER_HAVE_LIBSSH
std::unique_ptr<Launch> launchOverSsh(const JobSpec& spec, const std::string& canonical,
                                      const RunCommandOptions& options, Database& db,
                                      int64_t run_id) {
  SshLaunchOptions launch;
  launch.hosts = spec.launch.hosts;
  launch.spec_json = canonical;
  launch.local_node_binary = defaultNodeBinary();
  // By default the hosts have this build at the same absolute path (a shared file system).
  launch.node_binary = spec.launch.node_binary.value_or(launch.local_node_binary);
  launch.master_addr = options.master_addr;
  launch.grace = std::chrono::milliseconds(static_cast<int64_t>(options.grace_s * 1000));
  if (options.ssh_config) launch.ssh_config_path = *options.ssh_config;
  launch.connect = interactiveConnectOptions(options.accept_new_host_keys, options.known_hosts);
  auto launcher = std::make_unique<SshLauncher>(std::move(launch));
  std::vector<RunHost> hosts;
  for (size_t i = 0; i < launcher->hosts().size(); ++i) {
    const SshHostRecord& host = launcher->hosts()[i];
    hosts.push_back({.node_rank = static_cast<int>(i),
                     .alias = host.alias,
                     .hostname = host.hostname,
                     .user = host.user,
                     .port = host.port,
                     .fingerprint = host.fingerprint,
                     .node_binary = host.node_binary,
                     .uploaded = host.uploaded,
                     .command = host.command,
                     .libssh_version = host.libssh_version});
  }
  recordRunHosts(db, run_id, hosts);
  return launcher;
}
#endif

// "[rank 3] ..." -> 3.
std::optional<int> rankOfLogLine(std::string_view line) {
  constexpr std::string_view kPrefix = "[rank ";
  if (line.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  int rank = 0;
  size_t i = kPrefix.size();
  if (i >= line.size() || !std::isdigit(static_cast<unsigned char>(line[i]))) return std::nullopt;
  for (; i < line.size() && std::isdigit(static_cast<unsigned char>(line[i])) && rank < 1 << 20;
       ++i)
    rank = rank * 10 + (line[i] - '0');
  return rank;
}

// The last error printed on the agent's stderr ("error: ..." and the lines after it, as
// runReportingErrors prints them): the agent's own, such as a spec it could not read or a port it
// could not listen on, which no telemetry carries. Without it a run failing that way would say
// only how the agent exited.
class AgentError {
 public:
  void observe(std::string_view line) {
    if (line.starts_with("error: ")) {
      text_ = std::string(line.substr(7));
      lines_ = 1;
    } else if (lines_ > 0 && lines_ < kMaxLines && !line.starts_with("[")) {
      text_ += fmt::format("\n{}", line);
      ++lines_;
    } else {
      lines_ = 0;
    }
  }
  const std::string& text() const { return text_; }

 private:
  static constexpr int kMaxLines = 20;
  std::string text_;
  int lines_ = 0;
};

// The live progress line: redrawn in place on a terminal, a plain line every few seconds otherwise.
class ProgressDisplay {
 public:
  ProgressDisplay(bool enabled, bool terminal) : enabled_(enabled), terminal_(terminal) {}

  void update(const RunProgress& progress, bool force = false) {
    if (!enabled_) return;
    const auto now = Clock::now();
    const auto interval = terminal_ ? std::chrono::milliseconds(100) : std::chrono::seconds(5);
    if (!force && now - last_ < interval) return;
    if (!terminal_ && progress.step() == last_step_ && !force) return;
    last_ = now;
    last_step_ = progress.step();
    const double fraction =
        progress.totalSteps() > 0
            ? std::min(1.0, static_cast<double>(progress.step()) / progress.totalSteps())
            : 0.0;
    std::string text = fmt::format("step {}/{}", progress.step(), progress.totalSteps());
    if (auto loss = progress.loss()) text += fmt::format("  loss {}", formatNumber(*loss));
    if (progress.samplesPerSecond() > 0)
      text += fmt::format("  {:.0f} samples/s", progress.samplesPerSecond());
    if (auto eta = progress.etaSeconds()) text += fmt::format("  ETA {}", formatDuration(*eta));
    if (progress.step() == 0)
      text = fmt::format("starting: {}/{} ranks up", progress.ranksStarted(), progress.worldSize());
    if (terminal_) {
      constexpr int kWidth = 24;
      const int filled = static_cast<int>(fraction * kWidth);
      fmt::print(stderr, "\r\x1b[K[{}{}] {:3.0f}%  {}", std::string(filled, '#'),
                 std::string(kWidth - filled, '-'), fraction * 100, text);
      drawn_ = true;
    } else {
      fmt::print(stderr, "{:3.0f}%  {}\n", fraction * 100, text);
    }
    std::fflush(stderr);
  }
  // Clears the in-place line before other output.
  void clear() {
    if (drawn_) fmt::print(stderr, "\r\x1b[K");
    drawn_ = false;
  }

 private:
  bool enabled_, terminal_;
  bool drawn_ = false;
  Clock::time_point last_{};
  int64_t last_step_ = -1;
};

}  // namespace

fs::path runDirectory(const std::string& db_path, int64_t run_id) {
  const fs::path db = fs::absolute(db_path).lexically_normal();
  return db.parent_path() / (db.filename().string() + "-runs") / fmt::format("run-{}", run_id);
}

void applyOverrides(nlohmann::json& document, const std::vector<std::string>& overrides) {
  for (const std::string& assignment : overrides) {
    const size_t equals = assignment.find('=');
    if (equals == std::string::npos || equals == 0) {
      RM_THROW(kInvalidArgument,
               fmt::format("--set '{}': expected FIELD=VALUE, e.g. train.steps=50", assignment));
    }
    const std::string path = assignment.substr(0, equals);
    const std::string text = assignment.substr(equals + 1);
    // A value that is not JSON is a string; JSON beyond the spec's bounds is refused unparsed.
    nlohmann::json value = text;
    if (const std::optional<SpecProblem> problem = checkSpecText(text); !problem) {
      value = nlohmann::json::parse(text);
    } else if (!problem->message.starts_with("invalid JSON")) {
      RM_THROW(kInvalidArgument,
               fmt::format("--set {}: {}", displaySafeLine(path), problem->message));
    }
    nlohmann::json* node = &document;
    std::stringstream parts(path);
    std::string key;
    while (std::getline(parts, key, '.')) {
      if (key.empty() || !node->is_object()) {
        RM_THROW(kInvalidArgument,
                 fmt::format("--set '{}': '{}' is not a field path of objects", assignment, path));
      }
      node = &(*node)[key];
    }
    *node = std::move(value);
  }
}

int runCommand(const RunCommandOptions& options) {
  const JobSpec spec = loadSpec(options);
  const bool here = runsHere(spec);
#if !RINGMASTER_HAVE_LIBSSH
  if (!here) {
    RM_THROW(kUnavailable,
             "launch.hosts names remote hosts, and this build has no SSH "
             "launcher (libssh was not found when it was configured)");
  }
#endif
  if (here) checkDataBeforeLaunch(spec, options.spec_path);
  // A relative checkpoint.dir lies under the run's own directory, made later; the workers check it.
  if (here && spec.checkpoint && fs::path(spec.checkpoint->dir).is_absolute())
    checkCheckpointDirWritable(spec.checkpoint->dir);
  const std::string node_binary = defaultNodeBinary();
  const int world = worldSize(spec);

  Database db(options.db_path);
  reconcileInterruptedRuns(db);
  const std::string canonical = toJson(spec).dump(2);
  const int64_t run_id = createRun(db, {.name = spec.name,
                                        .spec_json = canonical,
                                        .strategy = std::string(toString(spec.strategy.kind)),
                                        .world_size = world});
  // The spec the workers read, kept in the run's directory: the run's exact input. It differs from
  // the recorded one only in a relative checkpoint.dir made absolute (runDirectory), so that
  // runs compare by what was asked for.
  JobSpec worker_spec = spec;
  std::optional<int64_t> resumed_from;
  if (here && spec.checkpoint && fs::path(spec.checkpoint->dir).is_relative()) {
    worker_spec.checkpoint->dir = checkpointDirFor(spec, db, options.db_path, run_id, resumed_from);
  }
  // Every file the run writes is in its own directory, made here and by no one else: two runs
  // (of two databases side by side, each starting at id 1) never share one.
  const fs::path run_directory = runDirectory(options.db_path, run_id);
  const fs::path spec_file = run_directory / "spec.json";
  std::unique_ptr<OutputFile> telemetry_copy;
  try {
    createDirectories(run_directory.parent_path());
    if (!createDirectoryExclusive(run_directory)) {
      RM_THROW(kIo, fmt::format("the run directory {} already exists: it was left by an earlier "
                                "database at {} (a new database numbers its runs from 1 again); "
                                "move it away or remove it",
                                run_directory.string(), options.db_path));
    }
    writeFileAtomically(spec_file, toJson(worker_spec).dump(2) + "\n");
    if (options.save_telemetry)
      telemetry_copy = std::make_unique<OutputFile>(*options.save_telemetry);
  } catch (const Error& e) {
    recordRunError(db, run_id, e.message());
    finishRun(db, run_id, "failed");
    throw;
  }
  // A failed write of the telemetry copy stops the run as a failed write of the database does.
  std::string copy_failure;
  const auto copyTelemetry = [&](const std::function<void(OutputFile&)>& write) {
    if (!telemetry_copy || !copy_failure.empty()) return;
    try {
      write(*telemetry_copy);
    } catch (const Error& e) {
      copy_failure = fmt::format("the telemetry copy: {}", e.message());
    }
  };

  const bool terminal = ::isatty(STDERR_FILENO) != 0;
  const bool colour = colourFor(stderr);
  if (!options.quiet) {
    const std::string where =
        here ? "local" : fmt::format("over SSH on {} hosts,", spec.launch.hosts.size());
    fmt::print(stderr, "{} run {} '{}': {} on {} {} rank{}, recording to {}\n",
               paint("ringmaster", Colour::kBold, colour), run_id, displaySafeLine(spec.name),
               toString(spec.strategy.kind), world, where, world == 1 ? "" : "s", options.db_path);
    if (worker_spec.checkpoint) {
      fmt::print(stderr, "checkpoints in {}{}\n", displaySafeLine(worker_spec.checkpoint->dir),
                 resumed_from ? fmt::format(" (resuming run {}'s)", *resumed_from) : "");
    }
  }

  RunProgress progress(world, spec.train.steps,
                       spec.strategy.kind == StrategyKind::kPipeline ? 1.0 / world : 1.0);
  ProgressDisplay display(!options.quiet, terminal);
  Recorder recorder(options.db_path, run_id, 0);
  StopSignals signals;
  std::unique_ptr<Launch> launcher;
  if (here) {
    launcher = std::make_unique<LocalLauncher>(LocalLaunchOptions{
        .node_binary = node_binary,
        .spec_path = spec_file.string(),
        .grace = std::chrono::milliseconds(static_cast<int64_t>(options.grace_s * 1000))});
  } else {
#if RINGMASTER_HAVE_LIBSSH
    try {
      launcher = launchOverSsh(spec, canonical, options, db, run_id);
    } catch (const Error& e) {
      recordRunError(db, run_id, e.message());
      finishRun(db, run_id, "failed");
      throw;
    }
#endif
  }
  Launch& launch = *launcher;
  AgentError agent_words;
  LaunchSink sink{.on_telemetry =
                      [&](std::string_view line) {
                        copyTelemetry([&](OutputFile& copy) {
                          copy.write(line);
                          copy.write("\n");
                        });
                        DecodeResult decoded = decodeEvent(line);
                        if (!decoded.ok()) {
                          recorder.submitLine(line);  // counted and logged as malformed
                          return;
                        }
                        progress.observe(decoded.event());
                        recorder.submit(std::move(decoded.event()));
                      },
                  .on_log =
                      [&](std::string_view line) {
                        agent_words.observe(line);
                        recorder.submitLog(rankOfLogLine(line), "stderr", line);
                        if (options.verbose) {
                          display.clear();
                          fmt::print(stderr, "{}\n", displaySafeLine(line));
                        }
                      },
                  .on_bad_line =
                      [&](std::optional<int> rank, std::string_view report) {
                        recorder.reportBadLine(rank, report);  // counted and logged
                      }};

  int handled_signals = 0;
  std::string recording_failure;
  while (launch.pump(std::chrono::milliseconds(100), sink)) {
    if (const int signals_now = signals.count(); signals_now > handled_signals) {
      handled_signals = signals_now;
      display.clear();
      if (handled_signals == 1) {
        if (!options.quiet)
          fmt::print(stderr, "cancelling: the ranks finish their step (Ctrl-C again to kill)\n");
        launch.cancel();
      } else {
        launch.kill();
      }
    }
    copyTelemetry([](OutputFile& copy) { copy.flush(); });
    if (recording_failure.empty()) {
      std::string failure = recorder.failure();
      if (failure.empty()) failure = copy_failure;
      if (!failure.empty()) {
        recording_failure = failure;
        display.clear();
        fmt::print(stderr, "error: {}; stopping the run\n", displaySafe(failure));
        launch.cancel();
      }
    }
    display.update(progress);
  }
  const ExitStatus agent = launch.wait();
  recorder.flush();
  copyTelemetry([](OutputFile& copy) { copy.close(); });
  display.update(progress, /*force=*/true);
  display.clear();
  if (terminal && !options.quiet) fmt::print(stderr, "\n");
  if (recording_failure.empty()) recording_failure = recorder.failure();
  if (recording_failure.empty()) recording_failure = copy_failure;
  const std::string launch_failure = launch.failure();

  const bool cancelled = handled_signals > 0 && recording_failure.empty();
  std::string status = agent.ok() ? "completed" : cancelled ? "cancelled" : "failed";
  if (!recording_failure.empty() || !launch_failure.empty()) status = "failed";
  try {
    if (!launch_failure.empty()) {
      recordRunRootCause(db, run_id, launch_failure);
    } else if (status == "failed") {
      recordRunError(
          db, run_id,
          !recording_failure.empty()
              ? recording_failure
              : fmt::format(
                    "the node agent ended with {}{}", agent.describe(),
                    agent_words.text().empty() ? "" : fmt::format(": {}", agent_words.text())));
    }
    finishRun(db, run_id, status);
  } catch (const Error& e) {
    fmt::print(stderr,
               "error: could not mark run {} {}: {}; it will show as interrupted from the next "
               "start\n",
               run_id, status, displaySafe(e.message()));
    return kExitFailed;
  }
  printRunReport(db, run_id, options.json, stdout);
  if (status == "completed") return kExitOk;
  return status == "cancelled" ? kExitCancelled : kExitFailed;
}

}  // namespace ringmaster::cli
