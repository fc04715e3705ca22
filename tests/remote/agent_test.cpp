// The node agent: the torchrun environment of each worker; lines of 8 fast writers arrive whole
// and complete; and, through `ringmaster-node agent` as a child process, a DDP run streams every
// rank, a worker killed with SIGKILL stops the rest and is reported, a closed stdin or SIGTERM
// ends every worker, and options that do not fit the spec are refused.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "agent/node_agent.h"
#include "common/captured_process.h"
#include "common/test_paths.h"
#include "core/error.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using testing::CapturedProcess;
using Clock = std::chrono::steady_clock;

const std::string kNode = std::string(ringmaster::testBinaryDir()) + "/app/ringmaster-node";

JobSpec ddpSpec(int ranks, int64_t steps) {
  SpecParseResult parsed = parseJobSpec(R"({
    "name": "agent-test", "strategy": {"kind": "ddp"},
    "model": {"kind": "mlp", "layers": [16, 32, 4], "seed": 3},
    "data": {"kind": "synthetic", "samples": 4096, "features": 16, "classes": 4, "seed": 1},
    "train": {"steps": 10, "batch_size": 16},
    "optimizer": {"kind": "sgd", "lr": 0.05},
    "device": "cpu",
    "launch": {"hosts": [{"host": "localhost", "ranks": 2}], "timeout_s": 30}})");
  EXPECT_TRUE(parsed.ok()) << parsed.describe();
  JobSpec spec = *parsed.spec;
  spec.launch.hosts[0].ranks = ranks;
  applyLegacyStrategyKind("ddp", ranks, spec.strategy);  // the mesh spans the new world
  spec.train.steps = steps;
  return spec;
}

// A spec file that lives as long as the object.
class SpecFile {
 public:
  explicit SpecFile(const JobSpec& spec) {
    path_ = fs::temp_directory_path() / ("ringmaster_agent_" + std::to_string(getpid()) + "_" +
                                         std::to_string(counter_++) + ".json");
    std::ofstream(path_) << toJson(spec).dump(2);
  }
  ~SpecFile() { fs::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// Every line of `text` decoded; a line that does not decode fails the test.
std::vector<TelemetryEvent> decodeAll(const std::string& text) {
  std::vector<TelemetryEvent> events;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    DecodeResult decoded = decodeEvent(line);
    EXPECT_TRUE(decoded.ok()) << (decoded.ok() ? "" : decoded.error().message) << ": "
                              << line.substr(0, 120);
    if (decoded.ok()) events.push_back(decoded.event());
  }
  return events;
}

bool processExists(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

std::map<int, pid_t> workerPids(const std::vector<TelemetryEvent>& events) {
  std::map<int, pid_t> pids;
  for (const auto& e : events)
    if (const auto* hello = std::get_if<HelloEvent>(&e.body))
      pids[e.rank] = static_cast<pid_t>(hello->pid);
  return pids;
}

TEST(AgentEnvironment, FollowsTorchrunAcrossNodes) {
  AgentOptions options;
  options.spec = ddpSpec(2, 1);
  options.spec.launch.hosts.push_back({.host = "b", .ranks = 3});
  options.node_rank = 1;
  options.nnodes = 2;
  options.master_addr = "10.0.0.1";
  auto env = workerEnvironment(options, 29500, 2);
  std::map<std::string, std::string> vars(env.begin(), env.end());
  EXPECT_EQ(vars["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(vars["MASTER_PORT"], "29500");
  EXPECT_EQ(vars["RANK"], "4");  // two ranks on node 0, then local rank 2
  EXPECT_EQ(vars["WORLD_SIZE"], "5");
  EXPECT_EQ(vars["LOCAL_RANK"], "2");
  EXPECT_EQ(vars["LOCAL_WORLD_SIZE"], "3");
  EXPECT_EQ(vars["NODE_RANK"], "1");
  EXPECT_EQ(vars["TORCHELASTIC_USE_AGENT_STORE"], "True");
}

// Issue 35: under launch.scheduler the nodes are the allocation's, each with ranks_per_node
// workers numbered node by node; an agent whose --nnodes is not the spec's node count is refused.
JobSpec slurmSpec(int nodes, int ranks_per_node) {
  JobSpec spec = ddpSpec(1, 1);
  spec.launch.hosts.clear();
  spec.launch.slurm = SlurmSpec{.nodes = nodes, .ranks_per_node = ranks_per_node};
  applyLegacyStrategyKind("ddp", nodes * ranks_per_node, spec.strategy);
  EXPECT_TRUE(validateJobSpec(spec).empty());
  return spec;
}

TEST(AgentEnvironment, FollowsTheSlurmAllocationsNodes) {
  AgentOptions options;
  options.spec = slurmSpec(3, 4);
  options.node_rank = 2;
  options.nnodes = 3;
  options.master_addr = "n1";
  auto env = workerEnvironment(options, 24242, 1);
  std::map<std::string, std::string> vars(env.begin(), env.end());
  EXPECT_EQ(vars["RANK"], "9");  // four ranks on each of nodes 0 and 1, then local rank 1
  EXPECT_EQ(vars["WORLD_SIZE"], "12");
  EXPECT_EQ(vars["LOCAL_RANK"], "1");
  EXPECT_EQ(vars["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(vars["NODE_RANK"], "2");
  EXPECT_EQ(vars["GROUP_WORLD_SIZE"], "3");
  options.nnodes = 2;
  options.worker_command = {"/bin/true"};
  EXPECT_THROW(runAgent(options), Error);
}

TEST(Agent, UnderSlurmItStartsRanksPerNodeWorkers) {
  AgentOptions options;
  options.spec = slurmSpec(1, 3);
  options.worker_command = {std::string(testBinaryDir()) + "/tests/remote/telemetry_flood", "5"};
  options.host = "test";
  options.input_fd = -1;
  std::FILE* out = std::tmpfile();
  std::FILE* log = std::tmpfile();
  options.output_fd = fileno(out);
  options.log_fd = fileno(log);
  EXPECT_EQ(runAgent(options), AgentOutcome::kCompleted);
  std::rewind(out);
  std::string text;
  char buffer[1 << 16];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, out)) > 0;) text.append(buffer, n);
  std::fclose(out);
  std::fclose(log);
  std::map<int, int> events;
  for (const TelemetryEvent& e : decodeAll(text)) ++events[e.rank];
  EXPECT_EQ(events, (std::map<int, int>{{0, 5}, {1, 5}, {2, 5}}));
}

TEST(Agent, EightFastWritersLoseNoLineAndTearNone) {
  constexpr int kWorkers = 8, kEvents = 2000;
  AgentOptions options;
  options.spec = ddpSpec(kWorkers, 1);
  options.worker_command = {std::string(testBinaryDir()) + "/tests/remote/telemetry_flood",
                            std::to_string(kEvents)};
  options.host = "test";
  options.input_fd = -1;
  std::FILE* out = std::tmpfile();
  std::FILE* log = std::tmpfile();
  options.output_fd = fileno(out);
  options.log_fd = fileno(log);
  EXPECT_EQ(runAgent(options), AgentOutcome::kCompleted);

  std::rewind(out);
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, out)) > 0) text.append(buffer, n);
  std::fclose(out);
  std::fclose(log);
  std::map<int, uint64_t> next_seq;
  size_t over_pipe_buf = 0;
  for (const TelemetryEvent& e : decodeAll(text)) {
    EXPECT_EQ(e.seq, next_seq[e.rank]) << "rank " << e.rank;
    next_seq[e.rank] = e.seq + 1;
    const auto& message = std::get<LogEvent>(e.body).message;
    if (message.size() > 4096) ++over_pipe_buf;
    const size_t length = (e.seq * 7919u + static_cast<size_t>(e.rank) * 31u) % 20000u;
    EXPECT_EQ(message, std::string(length, static_cast<char>('a' + (e.seq + e.rank) % 26)));
  }
  ASSERT_EQ(next_seq.size(), static_cast<size_t>(kWorkers));
  for (auto [rank, count] : next_seq) EXPECT_EQ(count, static_cast<uint64_t>(kEvents)) << rank;
  EXPECT_GT(over_pipe_buf, 1000u) << "the test must include lines longer than PIPE_BUF";
}

TEST(Agent, DdpRunOnThreeRanksStreamsEveryRankWhole) {
  SpecFile spec(ddpSpec(3, 20));
  CapturedProcess agent(kNode, {"agent", "--spec", spec.path()});
  ExitStatus status = agent.wait(std::chrono::seconds(120));
  ASSERT_TRUE(testing::exitedWith(status, 0)) << status.describe() << "\n" << agent.err();
  std::map<int, uint64_t> next_seq;
  std::map<int, int> steps, dones;
  for (const TelemetryEvent& e : decodeAll(agent.out())) {
    EXPECT_EQ(e.seq, next_seq[e.rank]) << "rank " << e.rank;
    next_seq[e.rank] = e.seq + 1;
    if (const auto* hello = std::get_if<HelloEvent>(&e.body)) {
      EXPECT_EQ(hello->world_size, 3);
      EXPECT_EQ(hello->local_rank, e.rank);
    }
    if (std::holds_alternative<StepEvent>(e.body)) ++steps[e.rank];
    if (const auto* done = std::get_if<DoneEvent>(&e.body)) {
      ++dones[e.rank];
      EXPECT_EQ(done->status, DoneStatus::kCompleted);
      EXPECT_EQ(done->final_step, 20);
    }
  }
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(steps[rank], 20) << rank;
    EXPECT_EQ(dones[rank], 1) << rank;
  }
}

class AgentExample : public ::testing::TestWithParam<std::string> {};

TEST_P(AgentExample, RunsOnFourRanksAndLearns) {
  // resources/examples/<strategy>_mlp.json as shipped, shortened to 150 steps for the test's time
  // and without its checkpoints.
  JobSpec spec = loadJobSpecFile(std::string(ringmaster::testSourceDir()) + "/resources/examples/" +
                                 GetParam() + ".json");
  ASSERT_EQ(worldSize(spec), 4);
  spec.train.steps = 150;
  spec.checkpoint.reset();
  SpecFile file(spec);
  CapturedProcess agent(kNode, {"agent", "--spec", file.path()});
  ExitStatus status = agent.wait(std::chrono::seconds(240));
  ASSERT_TRUE(testing::exitedWith(status, 0)) << status.describe() << "\n" << agent.err();
  std::map<int, std::vector<double>> losses;
  int sched_events = 0;
  for (const TelemetryEvent& e : decodeAll(agent.out())) {
    if (const auto* step = std::get_if<StepEvent>(&e.body)) losses[e.rank].push_back(step->loss);
    sched_events += std::holds_alternative<SchedEvent>(e.body);
  }
  ASSERT_EQ(losses.size(), 4u);
  for (const auto& [rank, series] : losses) {
    ASSERT_GE(series.size(), 2u);
    EXPECT_LT(series.back(), 0.5 * series.front()) << "rank " << rank;
  }
  if (stageCount(spec) > 1) {
    // An F and a B per micro-batch on every stage, for every step with a step event.
    EXPECT_EQ(sched_events, 2 * spec.train.micro_batches * 4 * static_cast<int>(losses[0].size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, AgentExample,
                         ::testing::Values("ddp_mlp", "fsdp_mlp", "pipeline_mlp"),
                         [](const auto& info) { return info.param; });

// Starts a long DDP run and waits until every rank has reported 3 steps.
struct LongRun {
  explicit LongRun(int ranks, double timeout_s = 30)
      : spec(withTimeout(ddpSpec(ranks, 1000000), timeout_s)),
        agent(kNode, {"agent", "--spec", spec.path(), "--grace", "2"}) {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline && !started) {
      agent.readFor(std::chrono::milliseconds(50));
      std::vector<TelemetryEvent> events =
          decodeAll(agent.out().substr(0, agent.out().rfind('\n') + 1));
      std::map<int, int64_t> last_step;
      for (const auto& e : events)
        if (const auto* step = std::get_if<StepEvent>(&e.body)) last_step[e.rank] = step->step;
      started = static_cast<int>(last_step.size()) == ranks;
      for (auto [rank, step] : last_step) started = started && step >= 3;
      if (started) pids = workerPids(events);
    }
  }
  static JobSpec withTimeout(JobSpec spec, double timeout_s) {
    spec.launch.timeout_s = timeout_s;
    return spec;
  }
  SpecFile spec;
  CapturedProcess agent;
  bool started = false;
  std::map<int, pid_t> pids;
};

TEST(Agent, SigkilledWorkerStopsTheRestAndIsReported) {
  LongRun run(3);
  ASSERT_TRUE(run.started) << run.agent.err();
  ASSERT_EQ(run.pids.size(), 3u);
  const auto killed_at = Clock::now();
  ASSERT_EQ(::kill(run.pids[1], SIGKILL), 0);
  ExitStatus status = run.agent.wait(std::chrono::seconds(60));
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  ::testing::Test::RecordProperty("seconds_from_sigkill_to_agent_exit", std::to_string(seconds));
  std::printf("agent exited %.2f s after the SIGKILL\n", seconds);
  EXPECT_FALSE(run.agent.timedOut());
  EXPECT_TRUE(testing::exitedWith(status, 1)) << status.describe() << "\n" << run.agent.err();
  for (auto [rank, pid] : run.pids) EXPECT_FALSE(processExists(pid)) << "rank " << rank;

  std::vector<TelemetryEvent> events = decodeAll(run.agent.out());
  const ErrorEvent* root = nullptr;
  for (const auto& e : events) {
    if (const auto* error = std::get_if<ErrorEvent>(&e.body); error && error->where == "agent") {
      EXPECT_EQ(root, nullptr) << "one root cause";
      EXPECT_EQ(e.rank, 1);
      root = error;
    }
  }
  ASSERT_NE(root, nullptr) << run.agent.out().substr(run.agent.out().size() - 2000);
  EXPECT_EQ(root->signal, std::optional<std::string>("SIGKILL"));
  EXPECT_TRUE(root->host.has_value());
  EXPECT_GT(root->step.value_or(0), 0);
  EXPECT_NE(root->message.find("rank 1"), std::string::npos) << root->message;
  EXPECT_NE(root->message.find("SIGKILL"), std::string::npos) << root->message;
  std::map<int, int> dones;
  for (const auto& e : events)
    if (std::holds_alternative<DoneEvent>(e.body)) ++dones[e.rank];
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(dones[rank], 1) << "rank " << rank;
}

// Issue 16, finding 12: a rank stopped with SIGSTOP mid-run. The others' collective times out
// (launch.timeout_s 2) naming it, and each of them reports that one error once; every report
// carries the step the rank really completed; the stopped rank, which SIGTERM cannot end, is
// reported hung (done status "hung"), not cancelled.
TEST(Agent, SigstoppedWorkerIsReportedHungAndEveryReportHasTheRealStep) {
  LongRun run(3, 2.0);
  ASSERT_TRUE(run.started) << run.agent.err();
  ASSERT_EQ(run.pids.size(), 3u);
  ASSERT_EQ(::kill(run.pids[1], SIGSTOP), 0);
  ExitStatus status = run.agent.wait(std::chrono::seconds(60));
  for (auto [rank, pid] : run.pids) ::kill(pid, SIGKILL);  // whatever happened, nothing is left
  EXPECT_FALSE(run.agent.timedOut());
  EXPECT_TRUE(testing::exitedWith(status, 1)) << status.describe() << "\n" << run.agent.err();

  std::vector<TelemetryEvent> events = decodeAll(run.agent.out());
  std::map<int, int64_t> last_step;
  std::map<int, std::vector<const ErrorEvent*>> worker_errors, agent_errors;
  std::map<int, std::vector<const DoneEvent*>> dones;
  for (const auto& e : events) {
    if (const auto* step = std::get_if<StepEvent>(&e.body)) last_step[e.rank] = step->step;
    if (const auto* error = std::get_if<ErrorEvent>(&e.body))
      (error->where == "agent" ? agent_errors : worker_errors)[e.rank].push_back(error);
    if (const auto* done = std::get_if<DoneEvent>(&e.body)) dones[e.rank].push_back(done);
  }
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_GE(last_step[rank], 3) << "rank " << rank;
    ASSERT_EQ(dones[rank].size(), 1u) << "rank " << rank;
    EXPECT_EQ(dones[rank][0]->status, rank == 1 ? DoneStatus::kHung : DoneStatus::kFailed)
        << "rank " << rank;
    EXPECT_EQ(dones[rank][0]->final_step, last_step[rank]) << "rank " << rank;
  }
  EXPECT_TRUE(worker_errors[1].empty()) << "the stopped rank wrote nothing";
  for (int rank : {0, 2}) {
    ASSERT_EQ(worker_errors[rank].size(), 1u) << "rank " << rank << ": one failure, one error";
    EXPECT_NE(worker_errors[rank][0]->message.find("rank 1"), std::string::npos)
        << worker_errors[rank][0]->message;
  }
  ASSERT_EQ(agent_errors[1].size(), 1u);
  const ErrorEvent& hung = *agent_errors[1][0];
  EXPECT_EQ(hung.kind, "worker hung");
  EXPECT_NE(hung.message.find("rank 1"), std::string::npos) << hung.message;
  EXPECT_NE(hung.message.find("stopped: SIGSTOP"), std::string::npos) << hung.message;
  EXPECT_NE(hung.message.find(fmt::format("after step {}", last_step[1])), std::string::npos)
      << hung.message;
  EXPECT_EQ(hung.step, std::optional<int64_t>(last_step[1]));
  // The healthy rank the agent saw fail first: its exit, after the step it really reached.
  int first_failed = -1;
  for (int rank : {0, 2}) {
    if (agent_errors[rank].empty()) continue;
    EXPECT_EQ(first_failed, -1) << "one first failure";
    first_failed = rank;
    EXPECT_NE(agent_errors[rank][0]->message.find(fmt::format("after step {}", last_step[rank])),
              std::string::npos)
        << agent_errors[rank][0]->message;
  }
  EXPECT_NE(first_failed, -1);
}

TEST(Agent, ClosingStdinEndsEveryWorker) {
  LongRun run(2);
  ASSERT_TRUE(run.started) << run.agent.err();
  run.agent.closeStdin();
  ExitStatus status = run.agent.wait(std::chrono::seconds(60));
  EXPECT_FALSE(run.agent.timedOut());
  EXPECT_TRUE(testing::exitedWith(status, 129)) << status.describe() << "\n" << run.agent.err();
  EXPECT_NE(run.agent.err().find("stdin closed"), std::string::npos) << run.agent.err();
  for (auto [rank, pid] : run.pids) EXPECT_FALSE(processExists(pid)) << "rank " << rank;
}

TEST(Agent, SigtermIsForwardedAndEveryRankEndsCancelled) {
  LongRun run(2);
  ASSERT_TRUE(run.started) << run.agent.err();
  run.agent.signal(SIGTERM);
  ExitStatus status = run.agent.wait(std::chrono::seconds(60));
  EXPECT_TRUE(testing::exitedWith(status, 130)) << status.describe() << "\n" << run.agent.err();
  for (auto [rank, pid] : run.pids) EXPECT_FALSE(processExists(pid)) << "rank " << rank;
  std::map<int, DoneStatus> done;
  for (const auto& e : decodeAll(run.agent.out()))
    if (const auto* d = std::get_if<DoneEvent>(&e.body)) done[e.rank] = d->status;
  ASSERT_EQ(done.size(), 2u);
  for (auto [rank, s] : done) EXPECT_EQ(s, DoneStatus::kCancelled) << "rank " << rank;
}

TEST(Agent, OptionsThatDoNotFitTheSpecAreRefused) {
  SpecFile spec(ddpSpec(2, 1));
  CapturedProcess agent(kNode, {"agent", "--spec", spec.path(), "--nnodes", "2"});
  ExitStatus status = agent.wait(std::chrono::seconds(30));
  EXPECT_TRUE(testing::exitedWith(status, 2)) << status.describe();
  EXPECT_NE(agent.err().find("--nnodes 2 does not match the spec's 1 launch.hosts"),
            std::string::npos)
      << agent.err();
}

// Issue 21, automatic restarts across hosts: two agents (node ranks 0 and 1 on this machine, one
// and two workers) with launch.max_restarts 1. A worker of node 1 killed with SIGKILL stops node
// 0's worker too (through node 0's store), and every worker starts again as attempt 1 from the
// newest checkpoint; a second failure, with no restart left, ends both agents failed.
TEST(AgentRestarts, AFailureOnOneNodeRestartsEveryNodesWorkers) {
  const fs::path checkpoints =
      fs::temp_directory_path() / ("ringmaster_agent_restart_" + std::to_string(getpid()));
  fs::remove_all(checkpoints);
  JobSpec spec = ddpSpec(1, 1000000);
  spec.launch.hosts.push_back({.host = "localhost", .ranks = 2});
  applyLegacyStrategyKind("ddp", worldSize(spec), spec.strategy);
  spec.launch.max_restarts = 1;
  spec.checkpoint = CheckpointSpec{.dir = checkpoints.string(), .every_steps = 20};
  spec.telemetry.every_steps = 1;
  SpecFile file(spec);
  CapturedProcess node0(
      kNode, {"agent", "--spec", file.path(), "--nnodes", "2", "--node-rank", "0", "--grace", "2"});
  // Node 1 reaches the store at the port node 0's agent names.
  const std::string said = "rendezvous store on 127.0.0.1:";
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline && node0.err().find(said) == std::string::npos)
    node0.readFor(std::chrono::milliseconds(50));
  const size_t at = node0.err().find(said);
  ASSERT_NE(at, std::string::npos) << node0.err();
  const std::string port =
      node0.err().substr(at + said.size(), node0.err().find('\n', at) - at - said.size());
  CapturedProcess node1(kNode, {"agent", "--spec", file.path(), "--nnodes", "2", "--node-rank", "1",
                                "--master", "127.0.0.1:" + port, "--grace", "2"});

  // Each node's workers of an attempt by rank (from their hellos), once every rank of the
  // attempt has stepped past the first checkpoint.
  const auto hellos = [](const std::string& out, int attempt) {
    std::map<int, pid_t> pids;
    for (const auto& e : decodeAll(out.substr(0, out.rfind('\n') + 1)))
      if (const auto* hello = std::get_if<HelloEvent>(&e.body); hello && hello->attempt == attempt)
        pids[e.rank] = static_cast<pid_t>(hello->pid);
    return pids;
  };
  const auto waitForAttempt = [&](int attempt) {
    while (Clock::now() < deadline + std::chrono::seconds(60)) {
      node0.readFor(std::chrono::milliseconds(25));
      node1.readFor(std::chrono::milliseconds(25));
      if (hellos(node0.out(), attempt).size() == 1 && hellos(node1.out(), attempt).size() == 2 &&
          fs::exists(checkpoints / "step_00000040"))
        return true;
      if (node0.status() || node1.status()) return false;
    }
    return false;
  };
  ASSERT_TRUE(waitForAttempt(0)) << node0.err() << node1.err();
  const std::map<int, pid_t> first0 = hellos(node0.out(), 0), first1 = hellos(node1.out(), 0);
  ASSERT_EQ(::kill(first1.at(2), SIGKILL), 0);
  ASSERT_TRUE(waitForAttempt(1)) << node0.err() << node1.err();
  EXPECT_FALSE(processExists(first0.at(0))) << "node 0's worker of attempt 0 was stopped";
  EXPECT_NE(hellos(node0.out(), 1).at(0), first0.at(0));
  EXPECT_NE(node0.err().find("a worker failed on another host in attempt 0"), std::string::npos)
      << node0.err();
  EXPECT_NE(node0.err().find("restarting every worker as attempt 1"), std::string::npos)
      << node0.err();
  // Node 1 reported attempt 0's root cause: rank 2, SIGKILL.
  bool reported = false;
  for (const auto& e : decodeAll(node1.out().substr(0, node1.out().rfind('\n') + 1)))
    if (const auto* error = std::get_if<ErrorEvent>(&e.body); error && error->where == "agent")
      reported =
          reported || (e.rank == 2 && error->signal == std::optional<std::string>("SIGKILL"));
  EXPECT_TRUE(reported) << node1.out().substr(0, 2000);

  // No restart left: the next failure ends both agents failed, every worker stopped.
  const std::map<int, pid_t> second0 = hellos(node0.out(), 1), second1 = hellos(node1.out(), 1);
  ASSERT_EQ(::kill(second0.at(0), SIGKILL), 0);
  const ExitStatus status0 = node0.wait(std::chrono::seconds(60));
  const ExitStatus status1 = node1.wait(std::chrono::seconds(60));
  EXPECT_TRUE(testing::exitedWith(status0, 1)) << status0.describe() << "\n" << node0.err();
  EXPECT_TRUE(testing::exitedWith(status1, 1)) << status1.describe() << "\n" << node1.err();
  for (auto [rank, pid] : second1) EXPECT_FALSE(processExists(pid)) << "rank " << rank;
  EXPECT_NE(node0.err().find("no restart left (launch.max_restarts 1)"), std::string::npos)
      << node0.err();
  fs::remove_all(checkpoints);
}

}  // namespace
}  // namespace ringmaster
