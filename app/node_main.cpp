// ringmaster-node: the binary that runs on training nodes. `agent` supervises one host's workers
// (torchrun's role); `worker` runs one rank of a job and streams its telemetry on stdout;
// `bench-comm` benchmarks the collectives; `make-idx` writes a small IDX data set for the `idx`
// data kind; `estimate` prints the engine's per-rank memory estimate for a spec as JSON;
// `--version` says which build and protocol this is.
// Errors become exit codes here and nowhere else (docs/errors.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "agent/node_agent.h"
#include "agent/telemetry_spool.h"
#include "bench_comm_command.h"
#include "comm/process_group.h"
#include "core/error.h"
#include "data/digits_idx.h"
#include "exit_codes.h"
#include "process/detached_job.h"
#include "spec/job_spec.h"
#include "spec/memory_estimate.h"
#include "spec/strategies/plan.h"
#include "telemetry/codec.h"
#include "telemetry/writer.h"
#include "train/comm_telemetry.h"
#include "train/flight_on_demand.h"
#include "train/trainer.h"

namespace {

using namespace ringmaster;

std::atomic<bool> g_stop_requested{false};

void onStopSignal(int) {
  g_stop_requested.store(true);
}

// Whether the training ranks check, before each collective, that they all call the same one
// (CommOptions::verify_calls): only with RINGMASTER_DISTRIBUTED_DEBUG=DETAIL, as PyTorch's
// TORCH_DISTRIBUTED_DEBUG. The trainer's collectives come from the engine, not from user code, and
// the check's extra all-gather per collective halved small models' DDP throughput on 4 ranks.
bool verifyCollectives() {
  const char* mode = std::getenv("RINGMASTER_DISTRIBUTED_DEBUG");
  return mode != nullptr && std::string(mode) == "DETAIL";
}

// Reads an integer environment variable of the torchrun environment; absent gives `fallback`.
int intFromEnvironment(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 1 << 20) {
    RM_THROW(kInvalidArgument,
             fmt::format("environment variable {}={} is not a non-negative integer", name, text));
  }
  return static_cast<int>(value);
}

// This host as its ranks and messages name it: under Slurm the node's name (SLURMD_NODENAME),
// which is how a person knows it (and nodes of one machine, a test cluster, share the host name).
std::string hostName() {
  if (const char* node = std::getenv("SLURMD_NODENAME"); node != nullptr && *node != '\0')
    return node;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// `estimate`: the engine's memory estimate (estimateMemory) for each rank of the spec's world, as
// a JSON array of {rank, total, parts: [{name, bytes, formula}]}; a layout without formulas fails
// with kUnavailable like any other error.
int printMemoryEstimate(const std::string& spec_path) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankMemoryEstimate& rank : estimateMemory(loadJobSpecFile(spec_path))) {
    nlohmann::json parts = nlohmann::json::array();
    for (const MemoryPart& part : rank.parts)
      parts.push_back({{"name", part.name}, {"bytes", part.bytes}, {"formula", part.formula}});
    ranks.push_back({{"rank", rank.rank}, {"total", rank.total()}, {"parts", std::move(parts)}});
  }
  fmt::print("{}\n", ranks.dump());
  return static_cast<int>(kExitOk);
}

int runWorker(const std::string& spec_path) {
  RankContext context;
  context.rank = intFromEnvironment("RANK", 0);
  context.world_size = intFromEnvironment("WORLD_SIZE", 1);
  context.local_rank = intFromEnvironment("LOCAL_RANK", context.rank);
  context.host = hostName();
  context.attempt = intFromEnvironment("TORCHELASTIC_RESTART_COUNT", 0);
  if (context.world_size < 1 || context.rank >= context.world_size) {
    RM_THROW(kInvalidArgument,
             fmt::format("RANK={} is outside WORLD_SIZE={}", context.rank, context.world_size));
  }

  TelemetryWriter telemetry(stdout, context.rank);
  // `ringmaster flight`: SIGUSR1 emits the communicators' flight recorders (a `flight` event).
  FlightDumpOnSignal flight_dumps(telemetry, SIGUSR1);
  // Both outlive the try: a failure is reported with the step the trainer completed last, once.
  auto comm_observer = std::make_shared<TelemetryCommObserver>(telemetry);
  std::unique_ptr<Trainer> trainer;
  try {
    JobSpec spec = loadJobSpecFile(spec_path);
    RM_CHECK_ARG(!spec.program,
                 fmt::format("{} is a program job: its ranks run {}, which "
                             "`ringmaster-node agent` starts, not the engine's worker",
                             spec_path, spec.program ? spec.program->script : ""));
    // A restarted attempt (launch.max_restarts) goes on from the newest checkpoint complete on
    // every rank; without checkpoints it starts again from step 1.
    if (context.attempt > 0 && spec.checkpoint) spec.checkpoint->resume = true;
    // Every layout that needs the world (all but `single`: needsWorldCommunicator) trains over
    // the world process group, made from the torchrun environment (env://) that the agent sets.
    std::unique_ptr<Communicator> world;
    if (needsWorldCommunicator(spec)) {
      ProcessGroupOptions options;
      const Device device = resolveDevice(spec.device, context.local_rank);
      options.backend = backendFor(spec.backend, device);
      options.cuda_device = device.isCuda() ? device.index : 0;
      const auto timeout =
          std::chrono::milliseconds(static_cast<int64_t>(spec.launch.timeout_s * 1000));
      options.init.timeout = timeout;
      options.comm.timeout = timeout;
      options.comm.observer = comm_observer;
      options.comm.verify_calls = verifyCollectives();
      world = initProcessGroup(options);
    }
    trainer = std::make_unique<Trainer>(
        std::move(spec), context, telemetry, [] { return g_stop_requested.load(); }, stderr,
        world.get(), comm_observer.get());
    TrainingResult result = trainer->run();
    telemetry.emit(
        DoneEvent{.status = result.cancelled ? DoneStatus::kCancelled : DoneStatus::kCompleted,
                  .final_step = result.final_step,
                  .wall_s = result.wall_seconds});
    if (result.cancelled) {
      fmt::print(stderr, "[rank {}] cancelled after step {}\n", context.rank, result.final_step);
      return kExitCancelled;
    }
    fmt::print(stderr, "[rank {}] done: {} steps, loss {:.4f} -> {:.4f} in {:.1f} s\n",
               context.rank, result.final_step, result.first_loss, result.last_loss,
               result.wall_seconds);
    return kExitOk;
  } catch (const Error& e) {
    const int64_t last_step = trainer ? trainer->lastCompletedStep() : 0;
    if (!comm_observer->failureReported()) {
      telemetry.emit(ErrorEvent{.message = e.message(),
                                .kind = std::string(errorKindName(e.kind())),
                                .where = e.where(),
                                .step = last_step,
                                .fatal = true});
    }
    telemetry.emit(DoneEvent{.status = DoneStatus::kFailed, .final_step = last_step, .wall_s = 0});
    throw;
  }
}

struct AgentArgs {
  std::string spec_path;
  int node_rank = 0;
  int nnodes = 1;
  std::string master;
  double grace_s = 5;
  bool ignore_stdin = false;
  std::string detach_dir;  // --detach: the job directory (spool, pid files)
  std::string spool_dir;   // --spool-dir: the same, in the foreground (a Slurm task)
  uint64_t spool_segment_bytes = 64ull << 20;
  int spool_segments = 16;
};

// Writes `text` to `path`, created (or truncated) owner-only: 0600 whatever the umask.
void writeOwnerOnlyFile(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) RM_THROW(kIo, fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  ::fchmod(fd, 0600);  // a file left by an earlier agent keeps no wider mode
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int saved = errno;
  ::close(fd);
  if (!written) RM_THROW(kIo, fmt::format("cannot write {}: {}", path, std::strerror(saved)));
}

// Runs the agent with every line it would write into the spool JOB_DIR/spool (and none on stdout
// or from stdin), its workers' PIDs in JOB_DIR/workers.pid and this binary's path in
// JOB_DIR/node-binary; the spool's end holds the exit code returned. The body of a detached agent
// and of one under Slurm (--spool-dir).
int runSpoolingAgent(AgentOptions options, const std::string& job_dir, const SpoolOptions& bound,
                     const std::string& pid_file) {
  namespace fs = std::filesystem;
  std::error_code error;
  int code = kExitFailed;
  try {
    TelemetrySpool spool({.directory = job_dir + "/spool",
                          .segment_bytes = bound.segment_bytes,
                          .max_segments = bound.max_segments});
    options.spool = &spool;
    options.input_fd = -1;
    options.output_fd = -1;
    options.workers_pid_file = job_dir + "/workers.pid";
    // The ringmaster-node that runs it: what spool-follow is run with on this host.
    writeOwnerOnlyFile(job_dir + "/node-binary", fs::read_symlink("/proc/self/exe").string());
    writeOwnerOnlyFile(pid_file + ".tmp", fmt::format("{}\n", ::getpid()));
    fs::rename(pid_file + ".tmp", pid_file, error);
    try {
      code = static_cast<int>(runAgent(options));
    } catch (const Error& e) {
      // As runReportingErrors words it, so that the launcher's reading of the agent's last
      // error finds it in the spool too.
      std::istringstream lines("error: " + e.message());
      for (std::string line; std::getline(lines, line);) spool.appendLog(line);
      fmt::print(stderr, "error: {}\n", e.message());
      code = exitCodeFor(e.kind());
    }
    spool.finish(code);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
  }
  return code;
}

// Runs the agent detached (ringmaster run --detach): a grandchild in its own session (no SIGHUP
// from a closing SSH channel or terminal reaches it), stdin and stdout on /dev/null, its stderr in
// DIR/agent.log, every line in the spool DIR/spool, its PID in DIR/agent.pid and its workers' in
// DIR/workers.pid. This process returns once the agent has written its PID: the launcher sees
// the agent end at once, and `spool-follow DIR` is how its output is read from then on.
int runDetachedAgent(AgentOptions options, const std::string& job_dir, const SpoolOptions& bound) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(job_dir, error);
  if (error) RM_THROW(kIo, fmt::format("--detach: cannot make {}: {}", job_dir, error.message()));
  ::chmod(job_dir.c_str(), 0700);
  const std::string pid_file = job_dir + "/agent.pid";
  fs::remove(pid_file, error);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) RM_THROW(kIo, fmt::format("--detach: fork: {}", std::strerror(errno)));
  if (child == 0) {
    ::setsid();
    const pid_t daemon = ::fork();
    if (daemon != 0) ::_exit(daemon < 0 ? 1 : 0);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    const int log = ::open((job_dir + "/agent.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(log >= 0 ? log : null, STDERR_FILENO);
    const int code = runSpoolingAgent(std::move(options), job_dir, bound, pid_file);
    std::fflush(nullptr);
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  // The agent writes its PID before it starts anything (bounded: it fails to or it does).
  for (int i = 0; i < 3000 && !fs::exists(pid_file, error); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::ifstream pid(pid_file);
  long agent_pid = 0;
  if (!(pid >> agent_pid))
    RM_THROW(kIo,
             fmt::format("--detach: the detached agent did not start (see {}/agent.log)", job_dir));
  // What the agent says until its workers run is said here too, as an attached agent says it:
  // the launcher reads node 0's rendezvous store from it, and an agent failing at once is seen.
  SpoolReader reader(job_dir + "/spool");
  for (bool started = false; !started;) {
    while (std::optional<SpoolLine> line = reader.next()) {
      fmt::print(line->telemetry ? stdout : stderr, "{}\n", line->text);
      started = started || (!line->telemetry && line->text.find("] started ") != std::string::npos);
    }
    std::fflush(nullptr);
    if (const std::optional<int> code = reader.ended()) return *code;
    if (::kill(static_cast<pid_t>(agent_pid), 0) != 0 && !readSpoolEnd(job_dir + "/spool"))
      RM_THROW(kIo, fmt::format("--detach: the detached agent ended without a word (see "
                                "{}/agent.log)",
                                job_dir));
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Its identity (start time, session, boot), which the launching side records: the job's processes
  // are found and stopped by it even when the job directory is gone (issue 32).
  const std::optional<ProcessStat> stat = readProcessStat(static_cast<pid_t>(agent_pid));
  if (!stat || stat->state == 'Z') {
    fmt::print(stderr, "[agent node {}] detached: pid {} (ended already), job directory {}\n",
               options.node_rank, agent_pid, job_dir);
    return kExitOk;
  }
  const DetachedAgent agent{.node_rank = options.node_rank,
                            .process = {.pid = static_cast<pid_t>(agent_pid),
                                        .start_time = stat->start_time,
                                        .boot_id = bootId()},
                            .session = stat->session};
  fmt::print(stderr, "{}\n", detachedAgentLine(agent, job_dir));
  return kExitOk;
}

// Runs the agent in the foreground with its lines spooled in JOB_DIR/spool, as a Slurm task does
// (issue 35): Slurm tracks and stops the task's processes, so it neither detaches nor reads
// stdin; the submitting host follows the spool (spool-follow --until-file) through the file system
// the nodes share with it. A spool left by an earlier attempt of the job is kept.
int runSpoolingAgentInForeground(AgentOptions options, const std::string& job_dir,
                                 const SpoolOptions& bound) {
  std::error_code error;
  std::filesystem::create_directories(job_dir, error);
  if (error)
    RM_THROW(kIo, fmt::format("--spool-dir: cannot make {}: {}", job_dir, error.message()));
  ::chmod(job_dir.c_str(), 0700);
  return runSpoolingAgent(std::move(options), job_dir, bound, job_dir + "/agent.pid");
}

// Whether process `pid` runs (a zombie runs nothing).
bool processRuns(pid_t pid) {
  const std::optional<ProcessStat> stat = readProcessStat(pid);
  return stat && stat->state != 'Z';
}

// The detached agent spool-follow follows: as its launch recorded it (--agent), else as
// DIR/agent.pid names it (its start time and session read now, while it runs).
struct FollowedAgent {
  pid_t pid = 0;
  std::optional<DetachedAgent> known;  // with start time and session

  bool runs() const { return known ? identityRuns(known->process) : processRuns(pid); }
};

// --agent PID:START_TIME:SESSION:BOOT, else DIR/agent.pid.
FollowedAgent followedAgent(const std::string& job_dir, const std::string& recorded) {
  FollowedAgent agent;
  if (!recorded.empty()) {
    long long pid = 0, session = 0;
    unsigned long long start = 0;
    char boot[65] = {};
    char extra = 0;
    RM_CHECK_ARG(std::sscanf(recorded.c_str(), "%lld:%llu:%lld:%64[0-9a-f-]%c", &pid, &start,
                             &session, boot, &extra) == 4 &&
                     pid > 0 && session > 0,
                 fmt::format("--agent '{}': expected PID:START_TIME:SESSION:BOOT", recorded));
    agent.pid = static_cast<pid_t>(pid);
    agent.known =
        DetachedAgent{.process = {.pid = agent.pid,
                                  .start_time = start,
                                  .boot_id = std::string(boot) == "-" ? "" : std::string(boot)},
                      .session = static_cast<pid_t>(session)};
    return agent;
  }
  std::ifstream pid(job_dir + "/agent.pid");
  long value = 0;
  if (pid >> value) agent.pid = static_cast<pid_t>(value);
  RM_CHECK_ARG(agent.pid > 0, fmt::format("{} holds no agent.pid", job_dir));
  agent.known = detachedAgentOf(job_dir, 0);
  return agent;
}

// The job's processes that run: by the agent's session when it is known, else by the PID files.
std::string processesLeft(const std::string& job_dir, const FollowedAgent& agent) {
  std::string left;
  if (agent.known) {
    for (const ProcessIdentity& process : detachedJobProcesses(*agent.known, job_dir))
      left += fmt::format(" {}", process.pid);
    return left;
  }
  for (const char* name : {"agent.pid", "workers.pid"}) {
    std::ifstream file(job_dir + "/" + name);
    for (long pid = 0; file >> pid;)
      if (pid > 0 && processRuns(static_cast<pid_t>(pid))) left += fmt::format(" {}", pid);
  }
  return left;
}

// After the agent's end: waits (bounded) for the agent and every worker it started to be gone
// and says which are left, if any, on stderr (`ringmaster cancel` checks it on every host).
void reportProcessesLeft(const std::string& job_dir, const FollowedAgent& agent) {
  std::string left;
  for (int i = 0; i < 500; ++i) {
    left = processesLeft(job_dir, agent);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (left.empty())
    fmt::print(stderr, "[job {}] no process of the job is left on {}\n", job_dir, hostName());
  else
    fmt::print(stderr, "[job {}] processes of the job still running on {}:{}\n", job_dir,
               hostName(), left);
  std::fflush(stderr);
}

// A spool deleted (or its whole job directory) while the agent may still run (issue 32): nothing
// more can be read, but the run has not ended while its agent runs. Says so, waits for the agent
// to end (a cancel signals it meanwhile) and ends failed: how the job ended is not known.
int followWithoutSpool(const std::string& job_dir, const FollowedAgent& agent) {
  if (agent.runs()) {
    fmt::print(stderr,
               "warning: the telemetry spool {}/spool is gone while the detached agent (pid {}) "
               "still runs: nothing more of the job can be recorded, and the run goes on until "
               "the agent ends (`ringmaster cancel` stops it)\n",
               job_dir, agent.pid);
    std::fflush(stderr);
    while (agent.runs()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  fmt::print(stderr,
             "error: the detached agent (pid {}) of {} is gone, and its telemetry spool was "
             "deleted: how the job ended is not known\n",
             agent.pid, job_dir);
  reportProcessesLeft(job_dir, agent);
  return kExitFailed;
}

// `spool-follow DIR --from RANK:ATTEMPT:SEQ,... [--agent PID:START_TIME:SESSION:BOOT]`: the spool's
// lines as the agent wrote them (telemetry on stdout, log lines on stderr), without each rank's
// telemetry up to the given (attempt, seq), then live until the agent has ended; exits with the
// agent's exit code. A spool that dropped lines says so first, on stderr (the recorder logs it as
// a warning).
// With `until_file` (a Slurm job's node, issue 35): no agent is known here (it runs on a compute
// node); the follow waits for the spool to appear, and ends when the agent wrote its end or, once
// `until_file` exists (the submitting side writes it when Slurm says the job ended), with what the
// spool holds then, failed when the agent never wrote its end (its node failed, or the job was
// killed before).
int spoolFollow(const std::string& job_dir, const std::string& from,
                const std::string& recorded_agent, const std::string& until_file) {
  std::map<int, std::pair<int, uint64_t>> skip;  // rank -> (attempt, seq) already stored
  std::istringstream items(from);
  for (std::string item; std::getline(items, item, ',');) {
    int rank = 0, attempt = 0;
    unsigned long long seq = 0;
    char extra = 0;
    RM_CHECK_ARG(std::sscanf(item.c_str(), "%d:%d:%llu%c", &rank, &attempt, &seq, &extra) == 3,
                 fmt::format("--from '{}': expected RANK:ATTEMPT:SEQ", item));
    skip[rank] = {attempt, seq};
  }
  const std::string spool_dir = job_dir + "/spool";
  const bool under_scheduler = !until_file.empty();
  auto scheduler_ended = [&] { return std::filesystem::exists(until_file); };
  if (under_scheduler) {
    while (!std::filesystem::is_directory(spool_dir)) {
      if (scheduler_ended()) {
        fmt::print(stderr, "error: the job ended before its agent started in {}\n", job_dir);
        return kExitFailed;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  const FollowedAgent agent =
      under_scheduler ? FollowedAgent{} : followedAgent(job_dir, recorded_agent);
  if (!std::filesystem::is_directory(spool_dir)) return followWithoutSpool(job_dir, agent);
  for (const auto& [rank, drop] : readSpoolDrops(spool_dir)) {
    fmt::print(stderr,
               "warning: the telemetry spool outgrew its bound: {} telemetry lines of rank {} "
               "(seq {}..{}) were dropped before this replay\n",
               drop.lines, rank, drop.first_seq, drop.last_seq);
  }
  std::map<int, int> attempt_of;  // each rank's attempt, from its latest hello
  SpoolReader reader(spool_dir);
  // Writes what the spool holds past the reader, less each rank's telemetry already stored.
  auto replay = [&] {
    bool wrote = false;
    while (std::optional<SpoolLine> line = reader.next()) {
      if (!line->telemetry) {
        fmt::print(stderr, "{}\n", line->text);
        continue;
      }
      DecodeResult decoded = decodeEvent(line->text);
      if (decoded.ok()) {
        const TelemetryEvent& event = decoded.event();
        if (const auto* hello = std::get_if<HelloEvent>(&event.body))
          attempt_of[event.rank] = hello->attempt;
        const auto stored = skip.find(event.rank);
        if (stored != skip.end() && std::pair(attempt_of[event.rank], event.seq) <= stored->second)
          continue;
      }
      fmt::print(stdout, "{}\n", line->text);
      wrote = true;
    }
    if (wrote) std::fflush(stdout);
    std::fflush(stderr);
  };
  for (;;) {
    replay();
    if (const std::optional<int> code = reader.ended()) {
      if (!under_scheduler) reportProcessesLeft(job_dir, agent);
      return *code;
    }
    if (under_scheduler) {
      if (scheduler_ended()) {
        replay();
        if (const std::optional<int> code = reader.ended()) return *code;
        fmt::print(stderr,
                   "error: the job ended without the agent of {} saying how (its node failed, "
                   "or the job was killed)\n",
                   job_dir);
        return kExitFailed;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    // An agent that is gone without writing its end (killed, its host restarted) ends nothing by
    // itself: said, and the follow ends failed rather than waiting forever.
    if (!agent.runs() && !readSpoolEnd(spool_dir)) {
      replay();
      fmt::print(stderr,
                 "error: the detached agent (pid {}) of {} is gone without saying how the job "
                 "ended (killed, or its host restarted)\n",
                 agent.pid, job_dir);
      reportProcessesLeft(job_dir, agent);
      return kExitFailed;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int runAgentCommand(const AgentArgs& args) {
  AgentOptions options;
  options.spec = loadJobSpecFile(args.spec_path);
  options.node_rank = args.node_rank;
  options.nnodes = args.nnodes;
  const size_t colon = args.master.rfind(':');
  RM_CHECK_ARG(colon != std::string::npos && colon > 0,
               fmt::format("--master '{}': expected HOST:PORT", args.master));
  options.master_addr = args.master.substr(0, colon);
  if (options.master_addr.size() > 2 && options.master_addr.front() == '[')
    options.master_addr = options.master_addr.substr(1, options.master_addr.size() - 2);
  try {
    size_t used = 0;
    options.master_port = std::stoi(args.master.substr(colon + 1), &used);
    RM_CHECK_ARG(used == args.master.size() - colon - 1, "trailing characters");
  } catch (const std::exception&) {
    RM_THROW(kInvalidArgument, fmt::format("--master '{}': the port is not a number", args.master));
  }
  // The workers are this very binary, so agent and workers are always the same build.
  std::error_code error;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", error).string();
  RM_CHECK_ARG(!error, "agent: cannot find its own executable (/proc/self/exe)");
  const std::filesystem::path spec_path = std::filesystem::absolute(args.spec_path);
  if (options.spec.program) {
    // The user's script, with the `ringmaster` Python package of the launching build (uploaded
    // into the job's directory over SSH), else of this very build, beside it.
    std::filesystem::path package = spec_path.parent_path() / "python";
    if (!std::filesystem::exists(package / "ringmaster" / "__init__.py", error))
      package = std::filesystem::path(self).parent_path() / "python";
    ProgramWorker program =
        programWorker(options.spec, spec_path.parent_path().string(), package.string());
    options.worker_command = std::move(program.command);
    options.worker_directory = std::move(program.directory);
    options.worker_environment = std::move(program.environment);
    options.worker_telemetry_fd = program.telemetry_fd;
    options.workers_host_store = program.hosts_store;
  } else {
    options.worker_command = {self, "worker", "--spec", spec_path.string()};
  }
  options.host = hostName();
  options.adopt_orphans = true;  // this process's only children are the workers
  options.grace = std::chrono::milliseconds(static_cast<int64_t>(args.grace_s * 1000));
  options.input_fd = args.ignore_stdin ? -1 : STDIN_FILENO;
  const SpoolOptions bound{.segment_bytes = args.spool_segment_bytes,
                           .max_segments = args.spool_segments};
  if (!args.spool_dir.empty())
    return runSpoolingAgentInForeground(
        std::move(options), std::filesystem::absolute(args.spool_dir).lexically_normal().string(),
        bound);
  if (!args.detach_dir.empty())
    return runDetachedAgent(std::move(options),
                            std::filesystem::absolute(args.detach_dir).lexically_normal().string(),
                            bound);
  return static_cast<int>(runAgent(options));
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed telemetry pipe is an error value, not a death

  CLI::App app{"ringmaster-node: runs ranks of Ringmaster jobs on this host"};
  app.set_version_flag("--version", fmt::format("ringmaster-node {} (telemetry protocol {})",
                                                RINGMASTER_VERSION, RINGMASTER_TELEMETRY_PROTOCOL));
  app.require_subcommand(1);
  std::string spec_path;
  CLI::App* worker = app.add_subcommand("worker",
                                        "run one rank (RANK / WORLD_SIZE from the "
                                        "environment, default 0 / 1)");
  worker->add_option("--spec", spec_path, "job spec (JSON)")->required();
  AgentArgs agent_args;
  CLI::App* agent = app.add_subcommand(
      "agent", "run this host's workers of a job (one agent per host), their telemetry on stdout");
  agent->add_option("--spec", agent_args.spec_path, "job spec (JSON)")->required();
  agent->add_option("--node-rank", agent_args.node_rank, "this host's index in launch.hosts")
      ->default_val(0);
  agent->add_option("--nnodes", agent_args.nnodes, "number of hosts (agents)")->default_val(1);
  agent
      ->add_option("--master", agent_args.master,
                   "HOST:PORT of the rendezvous store, hosted by node 0's agent (port 0 there: "
                   "the spec's launch.master_port, else a free one)")
      ->default_val("127.0.0.1:0");
  agent
      ->add_option("--grace", agent_args.grace_s,
                   "seconds between SIGTERM and SIGKILL when stopping workers")
      ->default_val(5.0)
      ->check(CLI::Range(0.0, 3600.0));
  agent->add_flag("--ignore-stdin", agent_args.ignore_stdin,
                  "keep running when stdin closes (default: stop everything, as when the "
                  "launcher's SSH link drops)");
  agent->add_option("--detach", agent_args.detach_dir,
                    "run detached in its own session, its lines spooled in DIR/spool (read them "
                    "with spool-follow DIR), its PID in DIR/agent.pid; returns once it runs");
  agent
      ->add_option("--spool-dir", agent_args.spool_dir,
                   "run in the foreground with stdin ignored, every line spooled in DIR/spool (a "
                   "Slurm task: spool-follow DIR --until-file FILE reads them), its PID in "
                   "DIR/agent.pid")
      ->excludes("--detach");
  agent
      ->add_option("--spool-segment-bytes", agent_args.spool_segment_bytes,
                   "with --detach or --spool-dir: a spool segment is closed at this size")
      ->default_val(64ull << 20)
      ->check(CLI::Range(uint64_t{1024}, uint64_t{1} << 40));
  agent
      ->add_option("--spool-segments", agent_args.spool_segments,
                   "with --detach or --spool-dir: the most spool segments kept (the oldest is "
                   "deleted, what it "
                   "held counted per rank)")
      ->default_val(16)
      ->check(CLI::Range(1, 100000));
  std::string follow_dir, follow_from, follow_agent, follow_until;
  CLI::App* spool_follow = app.add_subcommand(
      "spool-follow",
      "print a detached agent's spooled lines (telemetry on stdout, logs on stderr) and follow "
      "them until the agent ends; exits with its exit code");
  spool_follow->add_option("dir", follow_dir, "the agent's job directory (agent --detach DIR)")
      ->required();
  spool_follow->add_option("--from", follow_from,
                           "RANK:ATTEMPT:SEQ,...: each rank's telemetry up to this attempt and "
                           "seq is left out (already stored)");
  spool_follow->add_option(
      "--agent", follow_agent,
      "PID:START_TIME:SESSION:BOOT: the detached agent as its launch recorded it "
      "(default: DIR/agent.pid, as it runs now)");
  spool_follow
      ->add_option("--until-file", follow_until,
                   "an agent on another node (a Slurm task, agent --spool-dir): wait for DIR's "
                   "spool to appear, and follow it until the agent's end or, once FILE exists, "
                   "what the spool holds then")
      ->excludes("--agent");
  std::string idx_dir;
  int64_t idx_samples = 10000;
  uint64_t idx_seed = 1;
  CLI::App* make_idx = app.add_subcommand(
      "make-idx",
      "write a small MNIST-shaped IDX set (generated digits, 28 x 28, labels 0-9) for the idx "
      "data kind: DIR/train-images-idx3-ubyte and DIR/train-labels-idx1-ubyte");
  make_idx->add_option("dir", idx_dir, "directory to write into (created)")->required();
  make_idx->add_option("--samples", idx_samples, "number of images")
      ->default_val(10000)
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  make_idx->add_option("--seed", idx_seed, "seed of the drawing")->default_val(1);
  std::string estimate_spec;
  CLI::App* estimate = app.add_subcommand(
      "estimate", "print the engine's memory estimate for each rank of a job spec (JSON)");
  estimate->add_option("--spec", estimate_spec, "job spec (JSON)")->required();
  BenchCommArgs bench_comm_args;
  CLI::App* bench_comm = addBenchCommCommand(app, bench_comm_args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }

  return runReportingErrors([&] {
    if (worker->parsed()) {
      // A worker finishes its step and reports before it exits; bench-comm just dies.
      std::signal(SIGINT, onStopSignal);
      std::signal(SIGTERM, onStopSignal);
      return runWorker(spec_path);
    }
    if (agent->parsed()) return runAgentCommand(agent_args);
    if (spool_follow->parsed())
      return spoolFollow(follow_dir, follow_from, follow_agent, follow_until);
    if (make_idx->parsed()) {
      const IdxFilePair files = writeDigitsIdx(idx_dir, idx_samples, idx_seed);
      fmt::print("{}\n{}\n", files.images, files.labels);
      return static_cast<int>(kExitOk);
    }
    if (estimate->parsed()) return printMemoryEstimate(estimate_spec);
    if (bench_comm->parsed())
      return runBenchComm(bench_comm_args, std::vector<std::string>(argv, argv + argc));
    return static_cast<int>(kExitUsage);
  });
}
