// Issue 35: the Slurm batch script (remote/slurm/slurm_script.h). Its #SBATCH lines are the
// validated words and nothing else; its body, run by bash with stand-ins for scontrol and srun
// first on PATH, takes the master from the allocation and starts one agent per node whose argv
// is exactly the intended words (paths with blanks and quotes included), each node with its own
// rank. Every value of the injection corpus in every Slurm text field and extra option is
// refused naming its field, or reaches the script only as its own #SBATCH word.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/injection_corpus.h"
#include "core/error.h"
#include "slurm/slurm_script.h"
#include "spec/job_spec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using slurm::SlurmScriptPaths;
using testing::CapturedProcess;
using testing::injectionCorpus;

// A Slurm engine job with `scheduler`'s fields beside its kind.
json slurmJob(const json& scheduler) {
  json launch = {{"scheduler", {{"kind", "slurm"}}}};
  launch["scheduler"].update(scheduler);
  return {{"name", "slurm_ddp"},
          {"strategy", json::object()},
          {"model", {{"kind", "mlp"}, {"layers", {4, 8, 3}}}},
          {"data", {{"kind", "synthetic"}, {"samples", 64}, {"features", 4}, {"classes", 3}}},
          {"train", {{"steps", 10}, {"batch_size", 8}}},
          {"optimizer", {{"kind", "sgd"}, {"lr", 0.1}}},
          {"launch", launch}};
}

JobSpec parsed(const json& document) {
  SpecParseResult result = parseJobSpec(document);
  EXPECT_TRUE(result.ok()) << result.describe();
  return result.ok() ? *result.spec : JobSpec{};
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string readText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeExecutable(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  fs::permissions(path, fs::perms::owner_all);
}

// The #SBATCH words of a script, in order.
std::vector<std::string> sbatchWords(const std::string& script) {
  std::vector<std::string> words;
  for (const std::string& line : linesOf(script))
    if (line.starts_with("#SBATCH ")) words.push_back(line.substr(8));
  return words;
}

// What follows the last #SBATCH line.
std::string bodyOf(const std::string& script) {
  const size_t last = script.rfind("\n#SBATCH ");
  return script.substr(script.find('\n', last + 1) + 1);
}

class SlurmScript : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("ringmaster-slurm-script-{}-{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "stubs");
    // A node binary and a spec under names with blanks and quotes; a job directory with the
    // characters an #SBATCH line can carry but a shell would expand.
    fs::create_directories(dir_ / "bin dir");
    fs::create_directories(dir_ / "spec 'dir'");
    paths_ = {.job_dir = (dir_ / "runs$HOME%j*" / "run-7" / "job").string(),
              .spec_path = (dir_ / "spec 'dir'" / "it's \"the\" spec.json").string(),
              .node_binary = (dir_ / "bin dir" / "ringmaster-node \"x\" 'y'").string(),
              .grace_s = 2.5};
    // scontrol: the allocation's two nodes; node n1's address is STUB_NODE_ADDR when set.
    writeExecutable(
        dir_ / "stubs" / "scontrol",
        "#!/bin/bash\n"
        "printf '%s\\n' \"$@\" >> \"$STUB_DIR/scontrol.argv\"\n"
        "if [ \"$1 $2\" = 'show hostnames' ]; then printf 'n1\\nn2\\n'; exit 0; fi\n"
        "if [ \"$1 $2\" = 'show node' ]; then\n"
        "  printf 'NodeName=%s Arch=x86_64 CPUTot=4' \"$3\"\n"
        "  [ -n \"${STUB_NODE_ADDR:-}\" ] && printf ' NodeAddr=%s' \"$STUB_NODE_ADDR\"\n"
        "  printf ' NodeHostName=%s Version=22.05\\n' \"$3\"; exit 0\n"
        "fi\n"
        "exit 1\n");
    // srun: records its argv, then runs the command once per node as that node (SLURM_NODEID).
    writeExecutable(dir_ / "stubs" / "srun",
                    "#!/bin/bash\n"
                    "printf '%s\\n' \"$@\" > \"$STUB_DIR/srun.argv\"\n"
                    "nodes=0\n"
                    "while [ $# -gt 0 ] && [ \"${1#--}\" != \"$1\" ]; do\n"
                    "  case \"$1\" in --nodes=*) nodes=${1#--nodes=} ;; esac; shift\n"
                    "done\n"
                    "for ((i = 0; i < nodes; i++)); do SLURM_NODEID=$i \"$@\" || exit $?; done\n");
    // The agent: records its argv, one word a line, per node.
    writeExecutable(paths_.node_binary,
                    "#!/bin/bash\n"
                    "printf '%s\\n' \"$@\" > \"$STUB_DIR/agent.$SLURM_NODEID.argv\"\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `script` with bash in the test's directory, the stand-ins first on PATH, as the batch
  // step of job 4242 on n[1-2] (whose own SLURM_NODEID is 0); its exit code.
  int runScript(const std::string& script, const std::string& node_addr) {
    const fs::path file = dir_ / "slurm.sbatch";
    std::ofstream(file, std::ios::binary) << script;
    std::map<std::string, std::string> env = {
        {"PATH", (dir_ / "stubs").string() + ":" + std::getenv("PATH")},
        {"SLURM_JOB_NODELIST", "n[1-2]"},
        {"SLURM_JOB_ID", "4242"},
        {"SLURM_NODEID", "0"},
        {"STUB_DIR", dir_.string()},
        {"STUB_NODE_ADDR", node_addr}};
    CapturedProcess bash("/bin/bash", {"-c", "cd \"$STUB_DIR\" && exec /bin/bash slurm.sbatch"},
                         env);
    const ExitStatus status = bash.wait(30s);
    EXPECT_FALSE(bash.timedOut());
    EXPECT_EQ(bash.err(), "") << script;
    return status.signal == 0 ? status.exit_code : 128 + status.signal;
  }

  // The agent's argv on `node`, as the script's srun started it there.
  std::vector<std::string> agentArgv(int node) const {
    return linesOf(readText(dir_ / fmt::format("agent.{}.argv", node)));
  }

  std::vector<std::string> expectedAgentArgv(int node, const std::string& master,
                                             int nodes = 2) const {
    return {"agent",
            "--spec",
            paths_.spec_path,
            "--nnodes",
            std::to_string(nodes),
            "--node-rank",
            std::to_string(node),
            "--master",
            master,
            "--grace",
            "2.5",
            "--spool-dir",
            paths_.job_dir + "/node-" + std::to_string(node)};
  }

  fs::path dir_;
  SlurmScriptPaths paths_;
};

TEST_F(SlurmScript, TheOptionsAreTheSpecsWordsInTheScriptsOrder) {
  const JobSpec spec = parsed(slurmJob(json::parse(R"({
    "nodes": 2, "ranks_per_node": 4, "gpus_per_node": 8, "cpus_per_task": 16, "mem": "64G",
    "partition": "gpu", "account": "proj", "qos": "high", "time": "2-00:00:00",
    "constraint": "a100&ib", "reservation": "r1", "job_name": "gpt",
    "extra_sbatch": ["--exclusive", "--mail-type=END"]})")));
  const std::vector<std::string> expected = {
      "--job-name=gpt",
      "--nodes=2",
      "--ntasks-per-node=1",
      "--cpus-per-task=16",
      "--gpus-per-node=8",
      "--mem=64G",
      "--partition=gpu",
      "--account=proj",
      "--qos=high",
      "--time=2-00:00:00",
      "--constraint=a100&ib",
      "--reservation=r1",
      "--output=" + dir_.string() + "/runs$HOME%%j*/run-7/job/slurm-%j.out",
      "--no-requeue",
      "--exclusive",
      "--mail-type=END"};
  EXPECT_EQ(slurm::sbatchOptions(spec, paths_), expected);
  const std::string script = slurm::slurmBatchScript(spec, paths_);
  EXPECT_EQ(sbatchWords(script), expected);
  const std::vector<std::string> lines = linesOf(script);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[0], "#!/bin/bash");
  EXPECT_TRUE(lines[1].starts_with("# Written by Ringmaster")) << lines[1];
  // sbatch reads #SBATCH lines only before the first command.
  size_t last_sbatch = 0, first_command = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].starts_with("#SBATCH ")) last_sbatch = i;
    if (first_command == lines.size() && !lines[i].empty() && lines[i][0] != '#') first_command = i;
  }
  EXPECT_LT(last_sbatch, first_command);
  // The fewest options: the spec's name for the job, no optional word.
  const JobSpec small = parsed(slurmJob(json::object()));
  EXPECT_EQ(slurm::sbatchOptions(small, paths_).front(), "--job-name=slurm_ddp");
  EXPECT_EQ(slurm::sbatchOptions(small, paths_).size(), 5u);
}

TEST_F(SlurmScript, EachNodesAgentGetsExactlyItsWordsAndTheMasterFromTheAllocation) {
  const JobSpec spec = parsed(slurmJob({{"nodes", 2}, {"ranks_per_node", 2}}));
  const std::string script = slurm::slurmBatchScript(spec, paths_);
  ASSERT_EQ(runScript(script, "10.1.2.3"), 0) << script;
  // The master port derived from the job id: 20000 + 4242 % 12000.
  for (int node = 0; node < 2; ++node)
    EXPECT_EQ(agentArgv(node), expectedAgentArgv(node, "10.1.2.3:24242")) << node;
  const std::vector<std::string> srun = linesOf(readText(dir_ / "srun.argv"));
  ASSERT_GE(srun.size(), 4u);
  EXPECT_EQ(std::vector<std::string>(srun.begin(), srun.begin() + 4),
            (std::vector<std::string>{"--nodes=2", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
                                      "--input=none"}));
  // scontrol was asked for the allocation's nodes, then for the first one's address.
  EXPECT_EQ(linesOf(readText(dir_ / "scontrol.argv")),
            (std::vector<std::string>{"show", "hostnames", "n[1-2]", "show", "node", "n1", "-o"}));
}

TEST_F(SlurmScript, TheMasterPortIsTheSpecsAndTheAddressFallsBackToTheNodeName) {
  json document = slurmJob({{"nodes", 2}});
  document["launch"]["master_port"] = 29500;
  const std::string script = slurm::slurmBatchScript(parsed(document), paths_);
  ASSERT_EQ(runScript(script, ""), 0) << script;
  for (int node = 0; node < 2; ++node)
    EXPECT_EQ(agentArgv(node), expectedAgentArgv(node, "n1:29500")) << node;
}

TEST_F(SlurmScript, AJobDirectoryAnSbatchLineCannotCarryIsRefused) {
  const JobSpec spec = parsed(slurmJob(json::object()));
  for (const std::string& dir : {"/runs/a b", "/runs/it's", "/runs/\"q\"", "/runs/a\\b",
                                 "/runs/a#b", "/runs/a\nb", "/runs/a\tb", ""}) {
    SlurmScriptPaths paths = paths_;
    paths.job_dir = dir;
    EXPECT_THROW(slurm::slurmBatchScript(spec, paths), Error) << dir;
  }
  EXPECT_THROW(slurm::sbatchOptions(JobSpec{}, paths_), Error);  // no scheduler
}

// The corpus, and what matters to Slurm's own reading of a line: comments, its file name
// patterns, options of its own, more lines.
std::vector<std::string> slurmCorpus() {
  std::vector<std::string> words = injectionCorpus();
  for (const std::string& word :
       {"#", "a#b", "%j", "--output=/tmp/x", "--wrap=touch CANARY", "-N 2", "a\rb", "x\x1by",
        "\n#SBATCH --wrap=touch CANARY", "#SBATCH --wrap=touch CANARY", "--usage"})
    words.push_back(word);
  words.push_back(std::string("a\0b", 3));
  return words;
}

TEST_F(SlurmScript, EveryCorpusValueIsRefusedNamingItsFieldOrIsOneSbatchWord) {
  const JobSpec baseline = parsed(slurmJob(json::object()));
  const std::string baseline_script = slurm::slurmBatchScript(baseline, paths_);
  const std::vector<std::string> baseline_words = sbatchWords(baseline_script);
  size_t accepted = 0, refused = 0;
  auto check = [&](const std::string& key, const json& value, const std::string& field,
                   const std::string& word) {
    SCOPED_TRACE(
        fmt::format("{} = {}", field, value.dump(-1, ' ', false, json::error_handler_t::replace)));
    const SpecParseResult result = parseJobSpec(slurmJob({{key, value}}));
    if (!result.ok()) {
      ++refused;
      ASSERT_EQ(result.problems.size(), 1u) << result.describe();
      EXPECT_EQ(result.problems[0].path, field) << result.describe();
      return;
    }
    ++accepted;
    const std::string script = slurm::slurmBatchScript(*result.spec, paths_);
    // One more #SBATCH line than the baseline, holding exactly the word; the body unchanged.
    std::vector<std::string> words = sbatchWords(script);
    const std::string expected_line = key == "extra_sbatch" ? word : "--" + key + "=" + word;
    const auto line = std::find(words.begin(), words.end(), expected_line);
    ASSERT_NE(line, words.end()) << script;
    words.erase(line);
    EXPECT_EQ(words, baseline_words);
    EXPECT_EQ(expected_line.find_first_of(" \t\n\r\v\f'\"\\#"), std::string::npos);
    EXPECT_EQ(bodyOf(script), bodyOf(baseline_script));
    CapturedProcess syntax("/bin/bash", {"-n", "-c", script});
    EXPECT_TRUE(testing::exitedWith(syntax.wait(10s), 0)) << syntax.err();
    // Run as the batch step: it does what it always does and writes no canary.
    EXPECT_EQ(runScript(script, "10.1.2.3"), 0);
    EXPECT_EQ(agentArgv(0), expectedAgentArgv(0, "10.1.2.3:24242", 1));
    EXPECT_FALSE(fs::exists(dir_ / "CANARY"));
  };
  for (const std::string& word : slurmCorpus()) {
    for (const char* key :
         {"partition", "account", "qos", "reservation", "job_name", "constraint", "mem", "time"})
      check(key, word, std::string("launch.scheduler.") + key, word);
    for (const std::string& item : {word, "--comment=" + word, "--" + word})
      check("extra_sbatch", json::array({item}), "launch.scheduler.extra_sbatch[0]", item);
  }
  // Most of the corpus is refused; what is accepted ("*" as a constraint, --comment=*) is data.
  EXPECT_GT(refused, 10 * accepted);
  EXPECT_GT(accepted, 0u);
}

// ---- Issue 37: a sweep's member as a job step of the sweep's allocation

class SlurmStepScript : public SlurmScript {
 protected:
  // Runs the step script with bash, the stand-ins first on PATH (squeue answering the
  // allocation's states from `states`, one a call, the last one repeated), as the submitting
  // host would; srun's nodes see step 3 of job 4242 on n[1-2]. Its exit code.
  int runStepScript(const std::string& script, const std::vector<std::string>& states) {
    fs::create_directories(paths_.job_dir);
    std::string answers;
    for (const std::string& state : states) answers += state + "\n";
    std::ofstream(dir_ / "squeue.states") << answers;
    writeExecutable(dir_ / "stubs" / "squeue",
                    "#!/bin/bash\n"
                    "printf '%s\\n' \"$@\" >> \"$STUB_DIR/squeue.argv\"\n"
                    "n=$(cat \"$STUB_DIR/squeue.calls\" 2>/dev/null || echo 0)\n"
                    "echo $((n + 1)) > \"$STUB_DIR/squeue.calls\"\n"
                    "total=$(wc -l < \"$STUB_DIR/squeue.states\")\n"
                    "line=$(( n + 1 < total ? n + 1 : total ))\n"
                    "state=$(sed -n \"${line}p\" \"$STUB_DIR/squeue.states\")\n"
                    "if [ \"$state\" = NO_CONTROLLER ]; then\n"
                    "  echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2\n"
                    "  exit 1\n"
                    "fi\n"
                    "echo \"$state\"\n");
    const fs::path file = dir_ / "slurm-step.sh";
    std::ofstream(file, std::ios::binary) << script;
    std::map<std::string, std::string> env = {
        {"PATH", (dir_ / "stubs").string() + ":" + std::getenv("PATH")},
        {"SLURM_STEP_NODELIST", "n[1-2]"},
        {"SLURM_JOB_ID", "4242"},
        {"SLURM_STEP_ID", "3"},
        {"STUB_DIR", dir_.string()},
        {"STUB_NODE_ADDR", "10.1.2.3"}};
    CapturedProcess bash("/bin/bash", {"-c", "cd \"$STUB_DIR\" && exec /bin/bash slurm-step.sh"},
                         env);
    const ExitStatus status = bash.wait(60s);
    EXPECT_FALSE(bash.timedOut());
    EXPECT_EQ(bash.err(), "") << script;  // the script writes into the job directory
    return status.signal == 0 ? status.exit_code : 128 + status.signal;
  }
};

TEST_F(SlurmStepScript, WaitsForTheAllocationThenEachNodesAgentGetsItsWordsAndTheStepIsSaid) {
  const JobSpec spec = parsed(slurmJob({{"nodes", 2}, {"ranks_per_node", 2}, {"time", "10"}}));
  const std::string script = slurm::slurmStepScript(spec, paths_, "4242");
  ASSERT_EQ(runStepScript(script, {"PENDING", "RUNNING"}), 0) << script;
  // Queued first: srun waited for the allocation to run.
  EXPECT_EQ(readText(dir_ / "squeue.calls"), "2\n");
  // The port derived from the job and the step: 20000 + (4242 * 67 + 3) % 12000.
  for (int node = 0; node < 2; ++node)
    EXPECT_EQ(agentArgv(node), expectedAgentArgv(node, "10.1.2.3:28217")) << node;
  const std::vector<std::string> srun = linesOf(readText(dir_ / "srun.argv"));
  ASSERT_GE(srun.size(), 9u);
  EXPECT_EQ(std::vector<std::string>(srun.begin(), srun.begin() + 7),
            slurm::stepOptions(spec, "4242"));
  EXPECT_EQ(srun[7], "/bin/bash");
  EXPECT_EQ(
      slurm::stepOptions(spec, "4242"),
      (std::vector<std::string>{"--jobid=4242", "--nodes=2", "--ntasks-per-node=1", "--time=10",
                                "--job-name=slurm_ddp", "--kill-on-bad-exit=1", "--input=none"}));
  // The master is the step's first node: scontrol asked for the step's nodes.
  EXPECT_EQ(linesOf(readText(dir_ / "scontrol.argv"))[2], "n[1-2]");
  EXPECT_EQ(readText(fs::path(paths_.job_dir) / "slurm-step"), "4242.3\n");
  EXPECT_EQ(readText(fs::path(paths_.job_dir) / "slurm-step-exit"), "0\n");
}

TEST_F(SlurmStepScript, AnAllocationThatEndedStartsNoStepAndSaysSo) {
  const JobSpec spec = parsed(slurmJob({{"nodes", 1}}));
  for (const std::string& state : {"CANCELLED", "TIMEOUT", ""}) {
    SCOPED_TRACE(state);
    fs::remove(dir_ / "squeue.calls");
    fs::remove(dir_ / "srun.argv");
    EXPECT_EQ(runStepScript(slurm::slurmStepScript(spec, paths_, "4242"), {state}), 1);
    EXPECT_FALSE(fs::exists(dir_ / "srun.argv"));
    EXPECT_EQ(readText(fs::path(paths_.job_dir) / "slurm-step-exit"), "1\n");
    EXPECT_NE(readText(fs::path(paths_.job_dir) / "slurm-step.out").find("allocation 4242 is"),
              std::string::npos);
  }
}

TEST_F(SlurmStepScript, AControllerThatStopsAnsweringEndsTheWaitAfterItsBound) {
  const JobSpec spec = parsed(slurmJob({{"nodes", 1}}));
  // Failed answers count only in a row: a PENDING between them starts the count again.
  const std::string script = slurm::slurmStepScript(spec, paths_, "4242", 3);
  EXPECT_EQ(runStepScript(script, {"NO_CONTROLLER", "NO_CONTROLLER", "PENDING", "NO_CONTROLLER",
                                   "NO_CONTROLLER", "NO_CONTROLLER"}),
            1);
  EXPECT_EQ(readText(dir_ / "squeue.calls"), "6\n");
  EXPECT_FALSE(fs::exists(dir_ / "srun.argv"));
  EXPECT_EQ(readText(fs::path(paths_.job_dir) / "slurm-step-exit"), "1\n");
  EXPECT_NE(readText(fs::path(paths_.job_dir) / "slurm-step.out")
                .find("the Slurm controller did not answer for 6 s: slurm_load_jobs error: "
                      "Unable to contact slurm controller"),
            std::string::npos)
      << readText(fs::path(paths_.job_dir) / "slurm-step.out");
  EXPECT_THROW(slurm::slurmStepScript(spec, paths_, "4242", 0), Error);
}

TEST_F(SlurmStepScript, ACancelAskedBeforeTheStepStartedEndsTheScriptWithoutOne) {
  const JobSpec spec = parsed(slurmJob({{"nodes", 1}}));
  for (const std::string& state : {"PENDING", "RUNNING"}) {
    SCOPED_TRACE(state);
    fs::remove(dir_ / "srun.argv");
    fs::create_directories(paths_.job_dir);
    std::ofstream(fs::path(paths_.job_dir) / "slurm-step-cancel") << "cancelled\n";
    EXPECT_EQ(runStepScript(slurm::slurmStepScript(spec, paths_, "4242"), {state}), 143);
    EXPECT_FALSE(fs::exists(dir_ / "srun.argv"));
    EXPECT_EQ(readText(fs::path(paths_.job_dir) / "slurm-step-exit"), "143\n");
  }
}

TEST_F(SlurmStepScript, AnAllocationIdThatIsNotAJobIdIsRefused) {
  const JobSpec spec = parsed(slurmJob({{"nodes", 1}}));
  for (const char* bad : {"", "42;rm -rf /", "4242.1", "$(touch CANARY)", "-1"})
    EXPECT_THROW(slurm::slurmStepScript(spec, paths_, bad), Error) << bad;
}

}  // namespace
}  // namespace ringmaster
