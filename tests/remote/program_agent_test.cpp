// The node agent running a program job's workers (a user's script with a telemetry channel of its
// own): the channel's lines are the rank's telemetry, its stdout and stderr are log lines with the
// rank's prefix however much they look like telemetry, a failing script is reported with its
// rank's sequence continued, and what programWorker() makes of the spec's program section. The
// scripts here are /bin/sh ones, so the agent's side is tested without Python; the Python reporter
// is tests/python's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "agent/node_agent.h"
#include "core/error.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

// A directory with `script.sh`, removed with the object.
class ScriptDirectory {
 public:
  explicit ScriptDirectory(const std::string& script) {
    path_ = fs::temp_directory_path() / fmt::format("ringmaster_program_{}_{}", getpid(), count_++);
    fs::create_directories(path_);
    std::ofstream(path_ / "script.sh") << script;
  }
  ~ScriptDirectory() { fs::remove_all(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int count_ = 0;
  fs::path path_;
};

JobSpec programSpec(int ranks, const std::string& workdir) {
  SpecParseResult parsed = parseJobSpec(fmt::format(R"json({{
    "name": "program-agent-test",
    "program": {{"python": "sh", "script": "script.sh", "args": ["one arg", "$(two)"],
                 "workdir": "{}"}},
    "launch": {{"hosts": [{{"host": "localhost", "ranks": {}}}], "timeout_s": 30}}}})json",
                                                    workdir, ranks));
  EXPECT_TRUE(parsed.ok()) << parsed.describe();
  return *parsed.spec;
}

// A worker in sh: a hello and one step on descriptor 3, a line that looks like telemetry on stdout,
// a complaint on stderr; rank `failing_rank` exits 3 after its step instead of saying done.
std::string shellWorker(int failing_rank) {
  return fmt::format(R"sh(fd=$RINGMASTER_TELEMETRY_FD
t=$(date +%s)
printf '{{"v":1,"type":"hello","rank":%s,"seq":0,"t":%s,"world_size":%s,"local_rank":%s,"host":"h","pid":%s,"device":"cpu","device_name":"cpu","device_memory_total":0,"version":"%s","strategy":"%s"}}\n' "$RANK" "$t" "$WORLD_SIZE" "$LOCAL_RANK" "$$" "$RINGMASTER_VERSION" "$RINGMASTER_STRATEGY" >&$fd
echo '{{"v":1,"type":"step","rank":0,"seq":1,"t":1,"step":99}}'
echo "args: $1 | $2 | cwd $(pwd)"
echo "complaint from $RANK" >&2
printf '{{"v":1,"type":"step","rank":%s,"seq":1,"t":%s,"step":1,"loss":0.5,"lr":0.1,"samples":4,"step_ms":1,"compute_ms":1,"comm_ms":0,"exposed_comm_ms":0,"mem_allocated":0,"mem_peak":0,"mem_reserved":0,"device_mem_used":0}}\n' "$RANK" "$t" >&$fd
[ "$RANK" = {} ] && exit 3
printf '{{"v":1,"type":"done","rank":%s,"seq":2,"t":%s,"status":"completed","final_step":1,"wall_s":0}}\n' "$RANK" "$t" >&$fd
)sh",
                     failing_rank);
}

struct AgentRun {
  AgentOutcome outcome;
  std::vector<TelemetryEvent> events;
  std::vector<std::string> logs;
};

std::string readAll(std::FILE* file) {
  std::rewind(file);
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  std::fclose(file);
  return text;
}

AgentRun runProgram(const JobSpec& spec, const std::string& spec_directory) {
  AgentOptions options;
  options.spec = spec;
  ProgramWorker worker = programWorker(spec, spec_directory, "/opt/ringmaster/python");
  options.worker_command = worker.command;
  options.worker_directory = worker.directory;
  options.worker_environment = worker.environment;
  options.worker_telemetry_fd = worker.telemetry_fd;
  options.workers_host_store = worker.hosts_store;
  options.host = "test";
  options.input_fd = -1;
  std::FILE* out = std::tmpfile();
  std::FILE* log = std::tmpfile();
  options.output_fd = fileno(out);
  options.log_fd = fileno(log);
  AgentRun run{runAgent(options), {}, {}};
  std::istringstream lines(readAll(out));
  for (std::string line; std::getline(lines, line);) {
    DecodeResult decoded = decodeEvent(line);
    EXPECT_TRUE(decoded.ok()) << line;
    if (decoded.ok()) run.events.push_back(decoded.event());
  }
  std::istringstream log_lines(readAll(log));
  for (std::string line; std::getline(log_lines, line);) run.logs.push_back(line);
  return run;
}

bool hasLine(const std::vector<std::string>& lines, const std::string& wanted) {
  return std::find(lines.begin(), lines.end(), wanted) != lines.end();
}

TEST(ProgramAgent, TheChannelIsTelemetryAndStdoutAndStderrAreTheRanksLogLines) {
  ScriptDirectory dir(shellWorker(-1));
  const AgentRun run = runProgram(programSpec(3, dir.path()), "/unused");
  EXPECT_EQ(run.outcome, AgentOutcome::kCompleted);
  std::map<int, std::vector<std::string>> types;
  for (const TelemetryEvent& event : run.events) {
    types[event.rank].push_back(std::string(eventTypeName(event.body)));
    if (const auto* hello = std::get_if<HelloEvent>(&event.body)) {
      EXPECT_EQ(hello->version, std::string(kRingmasterVersion));
      EXPECT_EQ(hello->strategy, "ddp");
    }
    if (const auto* step = std::get_if<StepEvent>(&event.body)) {
      EXPECT_EQ(step->step, 1);
    }
  }
  ASSERT_EQ(types.size(), 3u);
  for (const auto& [rank, kinds] : types)
    EXPECT_EQ(kinds, (std::vector<std::string>{"hello", "step", "done"})) << "rank " << rank;
  for (int rank = 0; rank < 3; ++rank) {
    // Printed telemetry look-alikes are the rank's log, never its telemetry.
    EXPECT_TRUE(hasLine(run.logs, fmt::format(R"([rank {}] {{"v":1,"type":"step","rank":0,)"
                                              R"("seq":1,"t":1,"step":99}})",
                                              rank)));
    // Arguments arrive as they were written, nothing expanded, in the workdir.
    EXPECT_TRUE(hasLine(run.logs, fmt::format("[rank {}] args: one arg | $(two) | cwd {}", rank,
                                              fs::canonical(dir.path()).string())));
    EXPECT_TRUE(hasLine(run.logs, fmt::format("[rank {}] complaint from {}", rank, rank)));
  }
}

TEST(ProgramAgent, AFailingScriptIsReportedContinuingItsRanksSequence) {
  ScriptDirectory dir(shellWorker(1));
  const AgentRun run = runProgram(programSpec(2, dir.path()), "/unused");
  EXPECT_EQ(run.outcome, AgentOutcome::kFailed);
  bool reported = false;
  for (const TelemetryEvent& event : run.events) {
    const auto* error = std::get_if<ErrorEvent>(&event.body);
    if (event.rank != 1 || !error) continue;
    reported = true;
    EXPECT_EQ(event.seq, 2u);  // after its hello and step
    EXPECT_EQ(error->exit_code, 3);
    EXPECT_EQ(error->step, 1);
  }
  EXPECT_TRUE(reported);
}

TEST(ProgramWorker, CommandEnvironmentAndDirectoryFollowTheProgramSection) {
  JobSpec spec = programSpec(2, "/srv/project");
  ProgramWorker worker = programWorker(spec, "/tmp/job", "/opt/rm/python");
  ASSERT_EQ(worker.command.size(), 4u);
  EXPECT_EQ(fs::path(worker.command[0]).filename(), "sh");  // found on the PATH
  EXPECT_EQ(worker.command[1], "/srv/project/script.sh");
  EXPECT_EQ(worker.command[2], "one arg");
  EXPECT_EQ(worker.command[3], "$(two)");
  EXPECT_EQ(worker.directory, "/srv/project");
  std::map<std::string, std::string> env(worker.environment.begin(), worker.environment.end());
  EXPECT_EQ(env["RINGMASTER_TELEMETRY_FD"], std::to_string(worker.telemetry_fd));
  EXPECT_GE(worker.telemetry_fd, 3);
  EXPECT_EQ(env["RINGMASTER_STRATEGY"], "ddp");
  EXPECT_EQ(env["PYTHONPATH"].substr(0, 15), "/opt/rm/python");
  EXPECT_EQ(env["PYTHONUNBUFFERED"], "1");

  spec.program->upload = true;  // the uploaded workdir lies in the job's directory
  EXPECT_EQ(programWorker(spec, "/tmp/job", "/opt/rm/python").directory, "/tmp/job/program");

  spec.program->python = "ringmaster-no-such-python";
  try {
    programWorker(spec, "/tmp/job", "/opt/rm/python");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
    EXPECT_NE(e.message().find("program.python: ringmaster-no-such-python is not on this host's"),
              std::string::npos)
        << e.message();
  }
}

}  // namespace
}  // namespace ringmaster
