// RunSession: the launch-and-record loop: launcher output in, recorder and observer out, stop
// requests turned into a cancel (first) and a kill (second).
#include "run/run_session.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "checkpoint/training_checkpoint.h"
#include "core/display_text.h"
#include "core/error.h"
#include "db/database.h"
#include "db/files.h"
#include "launcher/local_launcher.h"
#include "process/detached_job.h"
#if RINGMASTER_HAVE_LIBSSH
#include "ssh/ssh_launcher.h"
#endif
#include "query/runs.h"
#include "recorder/recorder.h"
#include "run/slurm_run.h"
#include "telemetry/codec.h"
#include "train/data_check.h"

namespace ringmaster::session {

namespace fs = std::filesystem;
using namespace storage;

namespace {

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

JobSpec loadSpec(const RunRequest& request) {
  const std::string text =
      request.spec_text ? *request.spec_text : readJobSpecText(request.spec_path);
  SpecParseResult parsed = parseJobSpec(text);
  if (request.overrides.empty() || !parsed.ok()) {
    // The file's own problems (the JSON error with its position first of all) are the file's.
    if (!parsed.ok())
      RM_THROW(kSpec, fmt::format("{} is not a valid job spec:\n{}", request.spec_path,
                                  parsed.describe()));
    return *parsed.spec;
  }
  // The file is valid: whatever is wrong now came with the overrides, and each problem names
  // the --set that made it where it can.
  nlohmann::json document = nlohmann::json::parse(text);
  applyOverrides(document, request.overrides);
  parsed = parseJobSpec(document);
  if (parsed.ok()) return *parsed.spec;
  std::string sets, problems;
  for (const std::string& assignment : request.overrides)
    sets += fmt::format("{}--set {}", sets.empty() ? "" : " ", assignment);
  for (const SpecProblem& problem : parsed.problems) {
    problems += fmt::format(
        "\n{}", problem.path.empty() ? problem.message : problem.path + ": " + problem.message);
    if (const std::string* cause = overrideFor(problem.path, request.overrides))
      problems += fmt::format(" (from --set {})", *cause);
  }
  RM_THROW(kSpec, fmt::format("{} makes the job spec invalid ({} itself is valid):{}", sets,
                              request.spec_path, problems));
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
  if (missing && spec.data.kind == DataKind::kText) {
    text += fmt::format(
        "\n(`scripts/make-text.sh {}` writes it from the licence texts in "
        "/usr/share/common-licenses)",
        spec.data.path);
  } else if (missing && spec.data.kind == DataKind::kIdx) {
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

// A program's working directory on this machine: program.workdir against the directory this
// process started in.
std::string localWorkdir(const ProgramSpec& program) {
  return fs::absolute(program.workdir.empty() ? "." : program.workdir).lexically_normal().string();
}

// Refuses, before anything is recorded, a program whose script is not in its workdir here (a local
// run, or one whose workdir is uploaded from here).
void checkProgramBeforeLaunch(const ProgramSpec& program) {
  const fs::path workdir = localWorkdir(program);
  std::error_code error;
  if (!fs::is_directory(workdir, error)) {
    RM_THROW(kSpec, fmt::format("program.workdir: {} is not a directory here", workdir.string()));
  }
  const fs::path script = workdir / program.script;
  if (!fs::is_regular_file(script, error)) {
    RM_THROW(kSpec,
             fmt::format("program.script: no file {} (program.script {} in program.workdir "
                         "{})",
                         script.lexically_normal().string(), program.script, workdir.string()));
  }
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

#if RINGMASTER_HAVE_LIBSSH
// Detached runs: `job_dirs` empty launches the job (detached with request.detach) and is filled
// with the hosts' job directories; else the detached agents there are followed from `from`.
std::unique_ptr<Launch> launchOverSsh(const JobSpec& spec, const std::string& canonical,
                                      const RunRequest& request, Database& db, int64_t run_id,
                                      std::vector<std::string>& job_dirs, const std::string& from,
                                      std::function<bool()> stop_requested) {
  SshLaunchOptions launch;
  launch.stop_requested = std::move(stop_requested);
  launch.detach = request.detach;
  if (!job_dirs.empty()) {
    launch.follow_dirs = job_dirs;
    launch.follow_from = from;
  }
  launch.hosts = spec.launch.hosts;
  launch.spec_json = canonical;
  launch.local_node_binary = defaultNodeBinary();
  // By default the hosts have this build at the same absolute path (a shared file system).
  launch.node_binary = spec.launch.node_binary.value_or(launch.local_node_binary);
  launch.master_addr = request.master_addr;
  launch.grace = std::chrono::milliseconds(static_cast<int64_t>(request.grace_s * 1000));
  if (request.ssh_config) launch.ssh_config_path = *request.ssh_config;
  if (spec.program) {
    // The reporter of this build travels with the job; the workdir too when asked.
    launch.upload_package =
        (fs::path(launch.local_node_binary).parent_path() / "python" / "ringmaster").string();
    if (spec.program->upload) launch.upload_directory = localWorkdir(*spec.program);
  }
  launch.connect = request.connect;
  const bool following = !launch.follow_dirs.empty();
  auto launcher = std::make_unique<SshLauncher>(std::move(launch));
  if (following) return launcher;  // its hosts were recorded at the launch
  if (request.detach) job_dirs = launcher->jobDirs();
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

// spool-follow's --from: each rank's last stored (attempt, seq).
std::string followFrom(const std::map<int, std::pair<int, uint64_t>>& stored) {
  std::string from;
  for (const auto& [rank, last] : stored)
    from += fmt::format("{}{}:{}:{}", from.empty() ? "" : ",", rank, last.first, last.second);
  return from;
}

}  // namespace

fs::path runDirectory(const std::string& db_path, int64_t run_id) {
  const fs::path db = fs::absolute(db_path).lexically_normal();
  return db.parent_path() / (db.filename().string() + "-runs") / fmt::format("run-{}", run_id);
}

fs::path localJobDirectory(const std::string& db_path, int64_t run_id) {
  return runDirectory(db_path, run_id) / "job";
}

DetachedAgent detachedAgentFrom(int node_rank, const RecordedAgent& recorded) {
  return {.node_rank = node_rank,
          .process = {.pid = static_cast<pid_t>(recorded.pid),
                      .start_time = static_cast<uint64_t>(recorded.start_time),
                      .boot_id = recorded.boot_id},
          .session = static_cast<pid_t>(recorded.session)};
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
      // A block the document leaves out (optimizer.schedule) is made by the assignment.
      if (node->is_null()) *node = nlohmann::json::object();
      if (key.empty() || !node->is_object()) {
        RM_THROW(kInvalidArgument,
                 fmt::format("--set '{}': '{}' is not a field path of objects", assignment, path));
      }
      node = &(*node)[key];
    }
    *node = std::move(value);
  }
}

RunSession::RunSession(RunRequest request) : request_(std::move(request)) {
  spec_ = loadSpec(request_);
  local_ = runsLocally(spec_.launch);
  // A Slurm job submitted from here reads this machine's files: its nodes share them. One
  // submitted from a login node reads the login node's, as a remote host's job does.
  const bool files_here = local_ || (underSlurm() && !spec_.launch.slurm->submit_from);
#if !RINGMASTER_HAVE_LIBSSH
  if (!local_ && !underSlurm()) {
    RM_THROW(kUnavailable,
             "launch.hosts names remote hosts, and this build has no SSH "
             "launcher (libssh was not found when it was configured)");
  }
#endif
  if (files_here && !spec_.program) checkDataBeforeLaunch(spec_, request_.spec_path);
  if (spec_.program && (files_here || spec_.program->upload))
    checkProgramBeforeLaunch(*spec_.program);
  // A relative checkpoint.dir lies under the run's own directory, made later; the workers check it.
  if (files_here && spec_.checkpoint && fs::path(spec_.checkpoint->dir).is_absolute())
    checkCheckpointDirWritable(spec_.checkpoint->dir);
  node_binary_ = defaultNodeBinary();
  world_size_ = ringmaster::worldSize(spec_);

  db_ = std::make_unique<Database>(request_.db_path);
  Database& db = *db_;
  reconcileInterruptedRuns(db);
  canonical_ = toJson(spec_).dump(2);
  // The spec's mesh (issue 34), where it spans the world; the ranks' hello may name it again.
  const MeshSpec& mesh = spec_.strategy.mesh;
  std::optional<MeshAxes> run_mesh;
  if (mesh.size() == world_size_) run_mesh = MeshAxes{.dp = mesh.dp, .tp = mesh.tp, .pp = mesh.pp};
  run_id_ = createRun(db, {.name = spec_.name,
                           .spec_json = canonical_,
                           .strategy = strategyLabel(spec_),
                           .world_size = world_size_,
                           .mesh = run_mesh});
  // The spec the workers read, kept in the run's directory: the run's exact input. It differs from
  // the recorded one only in a relative checkpoint.dir made absolute (runDirectory), so that
  // runs compare by what was asked for.
  worker_spec_ = spec_;
  // A local program starts in its workdir made absolute here, where `ringmaster run` started.
  if (files_here && spec_.program) worker_spec_.program->workdir = localWorkdir(*spec_.program);
  if (files_here && spec_.checkpoint && fs::path(spec_.checkpoint->dir).is_relative()) {
    worker_spec_.checkpoint->dir =
        checkpointDirFor(spec_, db, request_.db_path, run_id_, resumed_from_);
  }
  // Every file the run writes is in its own directory, made here and by no one else: two runs
  // (of two databases side by side, each starting at id 1) never share one.
  const fs::path run_directory = runDirectory(request_.db_path, run_id_);
  spec_file_ = run_directory / "spec.json";
  try {
    createDirectories(run_directory.parent_path());
    if (!createDirectoryExclusive(run_directory)) {
      RM_THROW(kIo, fmt::format("the run directory {} already exists: it was left by an earlier "
                                "database at {} (a new database numbers its runs from 1 again); "
                                "move it away or remove it",
                                run_directory.string(), request_.db_path));
    }
    writeFileAtomically(spec_file_, toJson(worker_spec_).dump(2) + "\n");
    if ((request_.detach && local_) || underSlurm())
      job_dirs_ = {localJobDirectory(request_.db_path, run_id_)};
    if (request_.save_telemetry)
      telemetry_copy_ = std::make_unique<OutputFile>(*request_.save_telemetry);
  } catch (const Error& e) {
    recordRunError(db, run_id_, e.message());
    finishRun(db, run_id_, "failed");
    throw;
  }
}

RunSession::RunSession(AttachRequest request) : attach_(true) {
  request_.db_path = request.db_path;
  request_.grace_s = request.grace_s;
  request_.ssh_config = request.ssh_config;
#if RINGMASTER_HAVE_LIBSSH
  request_.connect = request.connect;
#endif
  request_.spec_path = fmt::format("run {}", request.run_id);
  db_ = std::make_unique<Database>(request_.db_path);
  const std::optional<DetachedRun> run = findDetachedRun(*db_, request.run_id);
  if (!run)
    RM_THROW(kInvalidArgument,
             fmt::format("there is no run {} in {}", request.run_id, request_.db_path));
  if (run->job_dirs.empty())
    RM_THROW(kInvalidArgument,
             fmt::format("run {} was not started detached (ringmaster run --detach): there is "
                         "nothing to attach to",
                         request.run_id));
  // A run queued in its scheduler (pending, issue 35) goes on as a running one does.
  if (run->status != "running" && run->status != "pending")
    RM_THROW(kInvalidArgument, fmt::format("run {} has ended ({}): there is nothing to attach to",
                                           request.run_id, run->status));
  if (run->scheduler) slurm_job_id_ = run->scheduler->job_id;
  SpecParseResult parsed = parseJobSpec(run->spec_json);
  if (!parsed.ok())
    RM_THROW(kSpec, fmt::format("run {}'s recorded spec does not parse:\n{}", request.run_id,
                                parsed.describe()));
  spec_ = worker_spec_ = *parsed.spec;
  canonical_ = run->spec_json;
  run_id_ = request.run_id;
  local_ = runsLocally(spec_.launch);
#if !RINGMASTER_HAVE_LIBSSH
  if (!local_ && !underSlurm())
    RM_THROW(kUnavailable, fmt::format("run {} runs over SSH, and this build has no SSH launcher",
                                       request.run_id));
#endif
  world_size_ = run->world_size;
  job_dirs_ = run->job_dirs;
  for (size_t node = 0; node < run->agents.size(); ++node) {
    const std::optional<RecordedAgent>& agent = run->agents[node];
    recorded_agents_.push_back(
        agent ? std::optional(detachedAgentFrom(static_cast<int>(node), *agent)) : std::nullopt);
  }
  node_binary_ = defaultNodeBinary();
}

RunSession::~RunSession() = default;

namespace {

// How a launch ended, as run() records it.
struct LaunchEnd {
  ExitStatus agent;
  int handled_stops = 0;          // stop requests acted on: 1 cancelled, 2 killed as well
  std::string recording_failure;  // the database's or the telemetry copy's; empty when none
  std::string launch_failure;     // the launcher's own (an SSH connection lost...)
  std::string agent_words;        // the agent's last error on its stderr (AgentError)
};

// Recording one launch until every agent has ended: its telemetry copied (--save-telemetry),
// decoded, observed and recorded, its log lines recorded and shown, stop requests turned into a
// cancel (first) and a kill (second), a failed recording into a cancel.
class LaunchRecording {
 public:
  // `on_detached_agent`: a detached launch's agent said its identity (issue 32).
  LaunchRecording(Recorder& recorder, OutputFile* telemetry_copy, RunProgress& progress,
                  const RunObserver& observer, const std::atomic<int>& stop_requests,
                  std::function<void(const DetachedAgent&)> on_detached_agent = {})
      : recorder_(recorder),
        copy_(telemetry_copy),
        progress_(progress),
        observer_(observer),
        stop_requests_(stop_requests),
        on_detached_agent_(std::move(on_detached_agent)) {}

  LaunchEnd follow(Launch& launch) {
    const LaunchSink sink = this->sink();
    LaunchEnd end;
    while (launch.pump(std::chrono::milliseconds(100), sink)) {
      if (observer_.on_tick) observer_.on_tick();
      actOnStopRequests(launch, end.handled_stops);
      writeCopy([](OutputFile& copy) { copy.flush(); });
      if (end.recording_failure.empty()) {
        end.recording_failure = recordingFailure();
        if (!end.recording_failure.empty()) {
          if (observer_.on_recording_failure) observer_.on_recording_failure(end.recording_failure);
          launch.cancel();
        }
      }
      if (observer_.on_progress) observer_.on_progress(progress_);
    }
    end.agent = launch.wait();
    recorder_.flush();
    writeCopy([](OutputFile& copy) { copy.close(); });
    if (end.recording_failure.empty()) end.recording_failure = recordingFailure();
    end.launch_failure = launch.failure();
    end.agent_words = agent_words_.text();
    return end;
  }

 private:
  LaunchSink sink() {
    return {.on_telemetry =
                [this](std::string_view line) {
                  writeCopy([&](OutputFile& copy) {
                    copy.write(line);
                    copy.write("\n");
                  });
                  DecodeResult decoded = decodeEvent(line);
                  if (!decoded.ok()) {
                    recorder_.submitLine(line);  // counted and logged as malformed
                    return;
                  }
                  progress_.observe(decoded.event());
                  recorder_.submit(std::move(decoded.event()));
                },
            .on_log =
                [this](std::string_view line) {
                  agent_words_.observe(line);
                  if (on_detached_agent_) {
                    if (std::optional<DetachedAgent> agent = parseDetachedAgentLine(line))
                      on_detached_agent_(*agent);
                  }
                  // A spool's dropped lines (a detached run) and a job's processes left after
                  // its agent ended are warnings of the run.
                  const bool warning =
                      line.starts_with("warning: the telemetry spool") ||
                      (line.starts_with("[job ") &&
                       line.find("] processes of the job still running on ") != line.npos);
                  recorder_.submitLog(rankOfLogLine(line), warning ? "warn" : "stderr", line);
                  if (observer_.on_log) observer_.on_log(line);
                },
            .on_bad_line =
                [this](std::optional<int> rank, std::string_view report) {
                  recorder_.reportBadLine(rank, report);  // counted and logged
                }};
  }

  void actOnStopRequests(Launch& launch, int& handled_stops) {
    const int stops_now = stop_requests_.load();
    if (stops_now <= handled_stops) return;
    handled_stops = stops_now;
    if (handled_stops == 1) {
      if (observer_.on_cancelling) observer_.on_cancelling();
      launch.cancel();
    } else {
      launch.kill();
    }
  }

  // A failed write of the telemetry copy stops the run as a failed write of the database does:
  // the first failure is kept, and nothing more is written.
  void writeCopy(const std::function<void(OutputFile&)>& write) {
    if (copy_ == nullptr || !copy_failure_.empty()) return;
    try {
      write(*copy_);
    } catch (const Error& e) {
      copy_failure_ = fmt::format("the telemetry copy: {}", e.message());
    }
  }

  std::string recordingFailure() const {
    std::string failure = recorder_.failure();
    return failure.empty() ? copy_failure_ : failure;
  }

  Recorder& recorder_;
  OutputFile* copy_;
  std::string copy_failure_;
  RunProgress& progress_;
  const RunObserver& observer_;
  const std::atomic<int>& stop_requests_;
  AgentError agent_words_;
  std::function<void(const DetachedAgent&)> on_detached_agent_;
};

constexpr char kNoHelloFailure[] =
    "no rank said hello: the workers ended without identifying themselves, so the run cannot "
    "be taken as completed (a program job's script calls ringmaster.init(): docs/program.md)";

// The status the run ended with, recorded with its error or root cause; a detached launch that
// went well leaves the run `running` for attach.
RunOutcome recordOutcome(Database& db, int64_t run_id, bool detach, bool attached,
                         const LaunchEnd& end) {
  const ExitStatus& agent = end.agent;
  // An attached run's agent ends with 130 when anyone cancelled it (ringmaster cancel), and a
  // Slurm launch when Slurm says its job was (scancel, preemption).
  const bool cancelled = (end.handled_stops > 0 || (attached && agent.exit_code == 130)) &&
                         end.recording_failure.empty();
  RunOutcome outcome;
  if (detach && agent.ok() && end.handled_stops == 0 && end.recording_failure.empty() &&
      end.launch_failure.empty()) {
    // The agents run on, detached: the run stays `running` with no recorder until attached.
    outcome.status = "detached";
    return outcome;
  }
  outcome.status = agent.ok() ? "completed" : cancelled ? "cancelled" : "failed";
  if (!end.recording_failure.empty() || !end.launch_failure.empty()) outcome.status = "failed";
  try {
    // Workers that all ended well without one hello reported nothing Ringmaster can vouch for.
    const bool silent = outcome.status == "completed" && ranksThatSaidHello(db, run_id) == 0;
    if (silent) outcome.status = "failed";
    if (silent) {
      recordRunRootCause(db, run_id, kNoHelloFailure);
    } else if (!end.launch_failure.empty()) {
      recordRunRootCause(db, run_id, end.launch_failure);
    } else if (outcome.status == "failed") {
      recordRunError(
          db, run_id,
          !end.recording_failure.empty()
              ? end.recording_failure
              : fmt::format("the node agent ended with {}{}", agent.describe(),
                            end.agent_words.empty() ? "" : fmt::format(": {}", end.agent_words)));
    }
    finishRun(db, run_id, outcome.status);
  } catch (const Error& e) {
    outcome.finish_failure = e.message();
  }
  return outcome;
}

}  // namespace

RunOutcome RunSession::run(const RunObserver& observer) {
  RM_ENFORCE(!ran_, "a RunSession runs its job once");
  ran_ = true;
  Database& db = *db_;
  // The part of a rank's reported samples that are its own (ranks that share samples split them).
  progress_ =
      std::make_unique<RunProgress>(world_size_, expectedSteps(spec_),
                                    static_cast<double>(dataParallelSize(spec_)) / world_size_);
  Recorder recorder(request_.db_path, run_id_, 0);
  if (attach_) claimRun(db, run_id_);
  const std::unique_ptr<Launch> launch = startLaunch(db, observer);
  // Detached from here on: a launching process killed from now on leaves a run `attach` finds.
  if (request_.detach && !underSlurm()) markRunDetached(db, run_id_, job_dirs_);
  // Each host's agent recorded as soon as it says who it is, before the launch ends (which a
  // killed launching process never sees): cancel finds the job's processes by it (issue 32).
  const auto record_agent = [&](const DetachedAgent& agent) {
    try {
      recordDetachedAgent(db, run_id_, agent.node_rank,
                          {.pid = agent.process.pid,
                           .start_time = static_cast<int64_t>(agent.process.start_time),
                           .session = agent.session,
                           .boot_id = agent.process.boot_id});
    } catch (const Error& e) {
      // Not fatal to the launch: cancel then finds the processes by the PID files only.
      recorder.submitLog(std::nullopt, "warn",
                         fmt::format("the detached agent of node {} could not be recorded: {}",
                                     agent.node_rank, e.message()));
    }
  };
  LaunchRecording recording(
      recorder, telemetry_copy_.get(), *progress_, observer, stop_requests_,
      request_.detach ? record_agent : std::function<void(const DetachedAgent&)>{});
  if (underSlurm() && request_.detach) {
    // Queued (or already running) in Slurm, which goes on without us: its state as of now.
    if (auto* slurm_launch = dynamic_cast<slurm::SlurmLaunch*>(launch.get()))
      slurm_launch->refreshState();
    return {.status = "detached"};
  }
  return recordOutcome(db, run_id_, request_.detach && !underSlurm(), attach_ || underSlurm(),
                       recording.follow(*launch));
}

// The local launcher, or the SSH launcher for remote hosts (a launch failing there is recorded as
// the run's failure); an attached run's follows each rank's spool from its last stored event.
std::unique_ptr<Launch> RunSession::startLaunch(Database& db, const RunObserver& observer) {
  if (underSlurm()) {
    try {
      // Submitted from a login node, the job's directory is made there (job_dirs_ recorded at
      // the launch names it again when attaching).
      const bool from_login = spec_.launch.slurm->submit_from.has_value();
      SlurmRun slurm{.worker_spec = worker_spec_,
                     .job_dir = from_login && !attach_ ? "" : job_dirs_.at(0),
                     .spec_path = (runDirectory(request_.db_path, run_id_) / "spec.json").string(),
                     .node_binary = spec_.launch.node_binary.value_or(node_binary_),
                     .grace_s = request_.grace_s,
                     .db = db,
                     .run_id = run_id_,
                     .job_id = slurm_job_id_,
                     .allocation = attach_ ? std::nullopt : request_.slurm_allocation,
                     .follow_from = attach_ ? followFrom(lastStoredSeqs(db, run_id_)) : "",
                     .ssh_config = request_.ssh_config};
#if RINGMASTER_HAVE_LIBSSH
      slurm.connect = request_.connect;
#endif
      SlurmLaunched launched = launchUnderSlurm(slurm);
      job_dirs_ = {launched.job_dir};
      return std::move(launched.launch);
    } catch (const Error& e) {
      if (!attach_) {
        recordRunError(db, run_id_, e.message());
        finishRun(db, run_id_, "failed");
      }
      throw;
    }
  }
  if (local_) {
    LocalLaunchOptions local{
        .node_binary = node_binary_,
        .spec_path = spec_file_.string(),
        .grace = std::chrono::milliseconds(static_cast<int64_t>(request_.grace_s * 1000))};
    if (request_.detach || attach_) local.job_dir = job_dirs_.at(0);
    local.detach = request_.detach;
    if (attach_) {
      local.follow_from = followFrom(lastStoredSeqs(db, run_id_));
      local.detached_agent = recordedAgent(0);
    }
    return std::make_unique<LocalLauncher>(local);
  }
#if RINGMASTER_HAVE_LIBSSH
  try {
    // Only a stop asked for once a launch began gives it up (`cancel` asks before it attaches);
    // an attach is never given up this way (its detached run must not be marked failed).
    const int stops_before = stop_requests_.load();
    std::function<bool()> stop_requested;
    if (!attach_) {
      stop_requested = [this, &observer, stops_before] {
        return stop_requests_.load() > stops_before ||
               (observer.stop_launch && observer.stop_launch());
      };
    }
    return launchOverSsh(spec_, canonical_, request_, db, run_id_, job_dirs_,
                         attach_ ? followFrom(lastStoredSeqs(db, run_id_)) : "",
                         std::move(stop_requested));
  } catch (const Error& e) {
    recordRunError(db, run_id_, e.message());
    finishRun(db, run_id_, "failed");
    throw;
  } catch (const std::exception& e) {
    // Not one of ours (out of memory, a refused resource): the run still ends failed, never
    // `running` with nothing behind it.
    recordRunError(db, run_id_, fmt::format("the launch failed: {}", e.what()));
    finishRun(db, run_id_, "failed");
    throw;
  }
#else
  // Both constructors refuse a remote run in a build without the SSH launcher.
  RM_ENFORCE(false, "a remote run in a build without the SSH launcher");
  return nullptr;
#endif
}

}  // namespace ringmaster::session
