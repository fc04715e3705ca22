// The node agent giving a job's environment to its workers (issue 21: launch.env, launch.env_file),
// with real processes: /bin/sh workers write what they received into files, compared byte for
// byte; a value with spaces, both quotes, $(...) and backticks executes nothing; env_file values
// reach the workers and appear nowhere the agent writes; a bad env_file fails the agent, naming
// the file and line, before any worker starts.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "agent/env_file.h"
#include "agent/node_agent.h"
#include "core/error.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

// A private directory, removed with the object.
class TempDirectory {
 public:
  TempDirectory() {
    path_ = fs::temp_directory_path() / fmt::format("ringmaster_job_env_{}_{}", getpid(), count_++);
    fs::create_directories(path_);
  }
  ~TempDirectory() { fs::remove_all(path_); }
  fs::path path() const { return path_; }

 private:
  static inline int count_ = 0;
  fs::path path_;
};

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string readAll(std::FILE* file) {
  std::rewind(file);
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  std::fclose(file);
  return text;
}

// Each rank writes the variables named in `names` into `<dir>/<NAME>.<RANK>`, exactly as it got
// them (printf '%s', no line break added), and marks that it ran.
std::string dumpingWorker(const std::vector<std::string>& names) {
  std::string script = "touch \"started.$RANK\"\n";
  for (const std::string& name : names)
    script += fmt::format("printf '%s' \"${}\" > \"{}.$RANK\"\n", name, name);
  return script;
}

JobSpec programJob(const fs::path& workdir, int ranks, const nlohmann::json& launch_extra) {
  nlohmann::json document = {
      {"name", "job-env-test"},
      {"program", {{"python", "sh"}, {"script", "worker.sh"}, {"workdir", workdir.string()}}},
      {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", ranks}}}}, {"timeout_s", 30}}}};
  for (const auto& [key, value] : launch_extra.items()) document["launch"][key] = value;
  SpecParseResult parsed = parseJobSpec(document);
  EXPECT_TRUE(parsed.ok()) << parsed.describe();
  return parsed.ok() ? *parsed.spec : JobSpec{};
}

struct AgentRun {
  AgentOutcome outcome;
  std::string output;  // everything the agent wrote: telemetry and log
};

AgentRun runProgram(const JobSpec& spec) {
  AgentOptions options;
  options.spec = spec;
  ProgramWorker worker = programWorker(spec, "/unused", "/opt/ringmaster/python");
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
  AgentOutcome outcome = AgentOutcome::kFailed;
  try {
    outcome = runAgent(options);
  } catch (...) {
    std::fclose(out);
    std::fclose(log);
    throw;
  }
  const std::string output = readAll(out);
  return {outcome, output + readAll(log)};
}

TEST(JobEnvironment, EveryWorkerGetsTheValuesByteForByteAndNothingIsExecuted) {
  TempDirectory dir;
  const fs::path pwned = dir.path() / "pwned";
  const std::string hostile = fmt::format(
      "two  spaces 'single' \"double\" $(touch {0}) `touch {0}` ${{HOME}} \\ ; | & > < * ?\n"
      "second line\ttab",
      pwned.string());
  std::ofstream(dir.path() / "worker.sh")
      << dumpingWorker({"HOSTILE", "NCCL_DEBUG", "EMPTY", "OMP_NUM_THREADS", "PYTHONPATH",
                        "PYTHONUNBUFFERED", "RANK", "WORLD_SIZE"});
  const JobSpec spec = programJob(dir.path(), 2,
                                  {{"env",
                                    {{"HOSTILE", hostile},
                                     {"NCCL_DEBUG", "INFO"},
                                     {"EMPTY", ""},
                                     // The agent's defaults yield to the job's values.
                                     {"OMP_NUM_THREADS", "7"},
                                     {"PYTHONUNBUFFERED", "0"},
                                     // Put after the reporter package, which stays first.
                                     {"PYTHONPATH", "/srv/user lib"}}}});
  const AgentRun run = runProgram(spec);
  ASSERT_EQ(run.outcome, AgentOutcome::kCompleted) << run.output;
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    const auto got = [&](const std::string& name) {
      return readFile(dir.path() / fmt::format("{}.{}", name, rank));
    };
    EXPECT_EQ(got("HOSTILE"), hostile);
    EXPECT_EQ(got("NCCL_DEBUG"), "INFO");
    EXPECT_EQ(got("EMPTY"), "");
    EXPECT_EQ(got("OMP_NUM_THREADS"), "7");
    EXPECT_EQ(got("PYTHONUNBUFFERED"), "0");
    const char* inherited = std::getenv("PYTHONPATH");
    EXPECT_EQ(got("PYTHONPATH"),
              fmt::format("/opt/ringmaster/python{}:/srv/user lib",
                          inherited && *inherited ? fmt::format(":{}", inherited) : std::string()));
    // torchrun's variables are Ringmaster's as ever.
    EXPECT_EQ(got("RANK"), std::to_string(rank));
    EXPECT_EQ(got("WORLD_SIZE"), "2");
  }
  EXPECT_FALSE(fs::exists(pwned)) << "a value was executed";
}

TEST(JobEnvironment, EnvFileValuesReachTheWorkersAndAppearNowhereTheAgentWrites) {
  TempDirectory dir;
  const std::string secret = "hf_s3cr3t value with 'quotes' and $(touch nothing)";
  const fs::path env_file = dir.path() / "job.env";
  std::ofstream(env_file) << "# the job's secrets\n"
                          << "\n"
                          << "   # an indented comment\n"
                          << "HF_TOKEN=" << secret << "\n"
                          << "WANDB_API_KEY==starts with an equals sign=\r\n"
                          << "NCCL_DEBUG=TRACE\n"
                          << "EMPTY=\n";
  std::ofstream(dir.path() / "worker.sh")
      << dumpingWorker({"HF_TOKEN", "WANDB_API_KEY", "NCCL_DEBUG", "EMPTY", "FROM_SPEC"})
      << "echo \"rank $RANK ran\"\n";
  const JobSpec spec = programJob(
      dir.path(), 2,
      {{"env", {{"NCCL_DEBUG", "INFO"}, {"FROM_SPEC", "kept"}}}, {"env_file", env_file.string()}});
  const AgentRun run = runProgram(spec);
  ASSERT_EQ(run.outcome, AgentOutcome::kCompleted) << run.output;
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    const auto got = [&](const std::string& name) {
      return readFile(dir.path() / fmt::format("{}.{}", name, rank));
    };
    EXPECT_EQ(got("HF_TOKEN"), secret);
    EXPECT_EQ(got("WANDB_API_KEY"), "=starts with an equals sign=");
    EXPECT_EQ(got("NCCL_DEBUG"), "TRACE");  // the file wins over launch.env
    EXPECT_EQ(got("EMPTY"), "");
    EXPECT_EQ(got("FROM_SPEC"), "kept");
  }
  EXPECT_NE(run.output.find("rank 1 ran"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("s3cr3t"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("starts with an equals"), std::string::npos) << run.output;
  const std::string recorded = toJson(spec).dump();
  EXPECT_EQ(recorded.find("s3cr3t"), std::string::npos) << recorded;
  EXPECT_NE(recorded.find(env_file.string()), std::string::npos) << recorded;
}

// The agent's error for an env_file holding `text`; no worker may have started.
std::string envFileError(const std::string& text, ErrorKind expected_kind = ErrorKind::kSpec) {
  TempDirectory dir;
  const fs::path env_file = dir.path() / "bad.env";
  std::ofstream(env_file) << text;
  std::ofstream(dir.path() / "worker.sh") << dumpingWorker({});
  const JobSpec spec = programJob(dir.path(), 2, {{"env_file", env_file.string()}});
  try {
    const AgentRun run = runProgram(spec);
    ADD_FAILURE() << "the agent ran with env_file " << text << ":\n" << run.output;
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), expected_kind) << error.message();
    EXPECT_NE(error.message().find(env_file.string()), std::string::npos) << error.message();
    EXPECT_FALSE(fs::exists(dir.path() / "started.0")) << "a worker started";
    EXPECT_FALSE(fs::exists(dir.path() / "started.1")) << "a worker started";
    return error.message();
  }
  return {};
}

TEST(JobEnvironment, AMalformedEnvFileFailsTheAgentNamingFileAndLineBeforeAnyWorker) {
  const std::string no_equals = envFileError("A=1\n\nghp_secretvalue\n");
  EXPECT_NE(no_equals.find("bad.env:3: expected NAME=VALUE"), std::string::npos) << no_equals;
  EXPECT_EQ(no_equals.find("ghp_secretvalue"), std::string::npos) << no_equals;

  const std::string bad_name = envFileError("# ok\nexport A=1\n");
  EXPECT_NE(bad_name.find("bad.env:2: not an environment variable name"), std::string::npos)
      << bad_name;
  const std::string reserved = envFileError("MASTER_PORT=1\n");
  EXPECT_NE(reserved.find("bad.env:1: MASTER_PORT is set by Ringmaster"), std::string::npos)
      << reserved;
  const std::string prefix = envFileError("X=1\nRINGMASTER_TELEMETRY_FD=9\n");
  EXPECT_NE(prefix.find("bad.env:2: RINGMASTER_* variables are set by Ringmaster"),
            std::string::npos)
      << prefix;
  const std::string twice = envFileError("A=1\nB=2\nA=3\n");
  EXPECT_NE(twice.find("bad.env:3: A is already set on line 1"), std::string::npos) << twice;
  const std::string nul = envFileError(std::string("A=x\0y\n", 6));
  EXPECT_NE(nul.find("bad.env:1: A: expected a value without NUL"), std::string::npos) << nul;
}

TEST(JobEnvironment, AMissingOrOversizedEnvFileFailsTheAgentNamingIt) {
  TempDirectory dir;
  std::ofstream(dir.path() / "worker.sh") << dumpingWorker({});
  const fs::path missing = dir.path() / "no-such.env";
  try {
    runProgram(programJob(dir.path(), 1, {{"env_file", missing.string()}}));
    ADD_FAILURE() << "the agent ran without its env_file";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kIo) << error.message();
    EXPECT_NE(error.message().find(missing.string()), std::string::npos) << error.message();
  }
  EXPECT_FALSE(fs::exists(dir.path() / "started.0"));
  const std::string big = envFileError(
      "A=" + std::string(static_cast<size_t>(kMaxEnvFileBytes), 'x') + "\n", ErrorKind::kSpec);
  EXPECT_EQ(big.find("xxxx"), std::string::npos) << big.substr(0, 200);
}

TEST(EnvFile, TheLineRulesAndTheBoundOnVariables) {
  EXPECT_TRUE(parseEnvFile("", "f").empty());
  EXPECT_TRUE(parseEnvFile("\n\n  \n# x=1\n", "f").empty());
  const auto parsed = parseEnvFile("A=1\nB= spaced \nC=x=y\nD=last without newline", "f");
  EXPECT_EQ(parsed,
            (std::map<std::string, std::string>{
                {"A", "1"}, {"B", " spaced "}, {"C", "x=y"}, {"D", "last without newline"}}));
  std::string many;
  for (int64_t i = 0; i <= kMaxEnvVariables; ++i) many += fmt::format("V{}=1\n", i);
  try {
    parseEnvFile(many, "f");
    ADD_FAILURE() << "more than the bound of variables was taken";
  } catch (const Error& error) {
    EXPECT_NE(error.message().find(fmt::format("f:{}: more than {} variables", kMaxEnvVariables + 1,
                                               kMaxEnvVariables)),
              std::string::npos)
        << error.message();
  }
}

}  // namespace
}  // namespace ringmaster
