// The Python reporter (python/ringmaster) as the node agent runs it: the scripts of
// tests/python/scripts started as real processes with torchrun's environment and a telemetry pipe
// at descriptor 3 (RINGMASTER_TELEMETRY_FD), every line they write there decoded by the engine's
// decoder (and, for the device mesh's runs, stored by the recorder in SQLite). Needs a python3
// that imports torch (Debian's python3-torch); skips, saying so, without.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/test_paths.h"
#include "db/database.h"
#include "process/child_process.h"
#include "query/comm_by_dimension.h"
#include "query/runs.h"
#include "recorder/recorder.h"
#include "recorder/run_lifecycle.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;

const char* const kPython = RINGMASTER_PYTHON_TORCH;
const std::string kPackageDir = std::string(ringmaster::testSourceDir()) + "/python";
const std::string kScripts = std::string(ringmaster::testSourceDir()) + "/tests/python/scripts/";
constexpr int kTelemetryFd = 3;

bool pythonHasTorch() {
  static const bool has =
      std::system((std::string(kPython) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
  return has;
}

#define SKIP_WITHOUT_TORCH()                                     \
  if (!pythonHasTorch())                                         \
  GTEST_SKIP() << kPython                                        \
               << " cannot import torch: install python3-torch " \
                  "(scripts/install-deps.sh) to test the Python reporter"

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::string cpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    std::string value = line.substr(line.find(':') + 1);
    return value.substr(value.find_first_not_of(" \t"));
  }
  return "cpu";
}

// What one rank's process left: its streams, how it ended, and its telemetry decoded (a line
// that does not decode fails the test where it is read).
struct RankOutput {
  std::string telemetry, out, err;
  ExitStatus status;
  std::vector<TelemetryEvent> events;

  template <typename Body>
  std::vector<Body> all() const {
    std::vector<Body> found;
    for (const TelemetryEvent& e : events)
      if (const Body* body = std::get_if<Body>(&e.body)) found.push_back(*body);
    return found;
  }
  std::vector<CommEvent> comms(const std::string& op, const std::string& dtype) const {
    std::vector<CommEvent> found;
    for (const CommEvent& c : all<CommEvent>())
      if (c.op == op && c.dtype == dtype) found.push_back(c);
    return found;
  }
};

// `ranks` processes of one script with the environment the agent gives them (torchrun's, the
// telemetry descriptor, PYTHONPATH), their stdout, stderr and telemetry read until they end or
// `limit` passes (then they are killed). `on_telemetry(rank, text so far)` may act on a rank
// while it runs.
class ScriptRun {
 public:
  ScriptRun(const std::string& script, const std::vector<std::string>& args, int ranks,
            std::map<std::string, std::string> extra_env = {}, bool with_telemetry_fd = true) {
    const std::string port = std::to_string(freePort());
    for (int rank = 0; rank < ranks; ++rank) {
      ChildOptions o;
      o.argv = {kPython, kScripts + script};
      o.argv.insert(o.argv.end(), args.begin(), args.end());
      o.environment = extra_env;
      o.environment["PYTHONPATH"] = kPackageDir;
      o.environment["PYTHONUNBUFFERED"] = "1";
      o.environment["OMP_NUM_THREADS"] = "1";
      o.environment["CUDA_VISIBLE_DEVICES"] = "";  // the scripts train on the host, GPU or not
      o.environment["MASTER_ADDR"] = "127.0.0.1";
      o.environment["MASTER_PORT"] = port;
      o.environment["RANK"] = std::to_string(rank);
      o.environment["LOCAL_RANK"] = std::to_string(rank);
      o.environment["WORLD_SIZE"] = std::to_string(ranks);
      o.environment["LOCAL_WORLD_SIZE"] = std::to_string(ranks);
      o.environment["NODE_RANK"] = "0";
      if (with_telemetry_fd) o.environment["RINGMASTER_TELEMETRY_FD"] = "3";
      o.telemetry_fd = kTelemetryFd;
      children_.emplace_back(o);
    }
    outputs_.resize(static_cast<size_t>(ranks));
  }

  // Reads every stream to its end, then reaps the processes and decodes the telemetry.
  const std::vector<RankOutput>& finish(
      std::chrono::milliseconds limit,
      const std::function<void(int, const std::string&)>& on_telemetry = {}) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (pump(on_telemetry)) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "the script ran past " << limit.count() << " ms: killed";
        for (ChildProcess& child : children_) child.signal(SIGKILL);
      }
    }
    for (size_t rank = 0; rank < children_.size(); ++rank) {
      RankOutput& output = outputs_[rank];
      output.status = children_[rank].wait();
      decode(static_cast<int>(rank), output);
    }
    return outputs_;
  }

  ChildProcess& child(int rank) { return children_[static_cast<size_t>(rank)]; }

 private:
  // One poll over every open stream; false once all have ended.
  bool pump(const std::function<void(int, const std::string&)>& on_telemetry) {
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, std::string*>> sinks;
    for (size_t rank = 0; rank < children_.size(); ++rank) {
      ChildProcess& child = children_[rank];
      RankOutput& output = outputs_[rank];
      for (auto [fd, sink] :
           {std::pair{child.telemetryFd(), &output.telemetry},
            std::pair{child.stdoutFd(), &output.out}, std::pair{child.stderrFd(), &output.err}}) {
        if (fd < 0) continue;
        fds.push_back({fd, POLLIN, 0});
        sinks.emplace_back(rank, sink);
      }
    }
    if (fds.empty()) return false;
    ::poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < fds.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buffer[65536];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      auto [rank, sink] = sinks[i];
      if (n > 0) {
        sink->append(buffer, static_cast<size_t>(n));
        if (on_telemetry && sink == &outputs_[rank].telemetry)
          on_telemetry(static_cast<int>(rank), *sink);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        children_[rank].closeOutput(fds[i].fd);
      }
    }
    return true;
  }

  static void decode(int rank, RankOutput& output) {
    size_t begin = 0;
    while (begin < output.telemetry.size()) {
      const size_t end = output.telemetry.find('\n', begin);
      ASSERT_NE(end, std::string::npos)
          << "rank " << rank
          << ": a telemetry line without its newline: " << output.telemetry.substr(begin, 200);
      const std::string line = output.telemetry.substr(begin, end - begin);
      DecodeResult result = decodeEvent(line);
      ASSERT_TRUE(result.ok()) << "rank " << rank << ": " << result.error().message << "\n"
                               << line.substr(0, 500);
      output.events.push_back(result.event());
      begin = end + 1;
    }
  }

  std::vector<ChildProcess> children_;
  std::vector<RankOutput> outputs_;
};

// The stream rules every rank's telemetry keeps: written by `rank`, a hello first and a done
// last, seq 0, 1, 2, ... without a gap.
void expectWellFormedStream(const RankOutput& output, int rank) {
  ASSERT_FALSE(output.events.empty()) << "rank " << rank << " sent nothing; stderr:\n"
                                      << output.err;
  EXPECT_TRUE(std::holds_alternative<HelloEvent>(output.events.front().body));
  EXPECT_TRUE(std::holds_alternative<DoneEvent>(output.events.back().body));
  for (size_t i = 0; i < output.events.size(); ++i) {
    EXPECT_EQ(output.events[i].rank, rank);
    EXPECT_EQ(output.events[i].seq, i) << "rank " << rank << ": event " << i;
  }
}

std::string describe(const RankOutput& output) {
  return "exit: " + output.status.describe() + "\nstderr:\n" + output.err;
}

// ---------------------------------------------------------------------------------------------

TEST(Reporter, HelloSaysWhoTheRankIs) {
  SKIP_WITHOUT_TORCH();
  ScriptRun run("steps.py", {}, 1,
                {{"RINGMASTER_VERSION", "9.9.9-test"},
                 {"RINGMASTER_RUN_ID", "run-42"},
                 {"RINGMASTER_STRATEGY", "ddp"},
                 {"RINGMASTER_ATTEMPT", "2"}});
  const RankOutput& output = run.finish(60s)[0];
  ASSERT_TRUE(output.status.ok()) << describe(output);
  expectWellFormedStream(output, 0);
  const auto hellos = output.all<HelloEvent>();
  ASSERT_EQ(hellos.size(), 1u);
  const HelloEvent& hello = hellos[0];
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_EQ(hello.world_size, 1);
  EXPECT_EQ(hello.local_rank, 0);
  EXPECT_EQ(hello.host, host);
  EXPECT_EQ(hello.pid, run.child(0).pid());
  EXPECT_EQ(hello.device, "cpu");
  EXPECT_EQ(hello.device_name, cpuModel());
  EXPECT_EQ(hello.device_memory_total, 0u);
  EXPECT_EQ(hello.version, "9.9.9-test");
  EXPECT_EQ(hello.run_id, "run-42");
  EXPECT_EQ(hello.strategy, "ddp");
  EXPECT_EQ(hello.attempt, 2);
}

TEST(Reporter, HelloDefaultsToThePackagesVersionAndTheRanksStrategy) {
  SKIP_WITHOUT_TORCH();
  ScriptRun run("steps.py", {}, 1);
  const RankOutput& output = run.finish(60s)[0];
  ASSERT_TRUE(output.status.ok()) << describe(output);
  const auto hellos = output.all<HelloEvent>();
  ASSERT_EQ(hellos.size(), 1u);
  // python/ringmaster/__init__.py's __version__ follows the project's version.
  EXPECT_EQ(hellos[0].version, kRingmasterVersion);
  EXPECT_EQ(hellos[0].run_id, std::nullopt);
  EXPECT_EQ(hellos[0].strategy, "single");
  EXPECT_EQ(hellos[0].attempt, 0);
}

// Issue 32, point 3: the agent restarts a program job's ranks with TORCHELASTIC_RESTART_COUNT
// (launch.max_restarts), which the hello carries; RINGMASTER_ATTEMPT still wins where it is set.
TEST(Reporter, HelloTakesTheAttemptFromTheAgentsRestartCount) {
  SKIP_WITHOUT_TORCH();
  const std::vector<std::pair<std::map<std::string, std::string>, int>> cases = {
      {{{"TORCHELASTIC_RESTART_COUNT", "3"}}, 3},
      {{{"TORCHELASTIC_RESTART_COUNT", "3"}, {"RINGMASTER_ATTEMPT", "1"}}, 1}};
  for (const auto& [environment, attempt] : cases) {
    ScriptRun run("steps.py", {}, 1, environment);
    const RankOutput& output = run.finish(60s)[0];
    ASSERT_TRUE(output.status.ok()) << describe(output);
    const auto hellos = output.all<HelloEvent>();
    ASSERT_EQ(hellos.size(), 1u);
    EXPECT_EQ(hellos[0].attempt, attempt);
  }
}

TEST(Reporter, StepsCarryTheLossLearningRateTimesAndMemory) {
  SKIP_WITHOUT_TORCH();
  ScriptRun run("steps.py", {}, 1);
  const RankOutput& output = run.finish(60s)[0];
  ASSERT_TRUE(output.status.ok()) << describe(output);
  expectWellFormedStream(output, 0);
  const auto steps = output.all<StepEvent>();
  ASSERT_EQ(steps.size(), 3u) << "the forked child's log(99) must send nothing";
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepEvent& s = steps[i];
    SCOPED_TRACE("step " + std::to_string(s.step));
    EXPECT_EQ(s.step, static_cast<int64_t>(i + 1));
    EXPECT_EQ(s.samples, 16);
    EXPECT_EQ(s.tokens, 16);
    EXPECT_EQ(s.accuracy, 0.25);
    EXPECT_GT(s.step_ms, 0);
    // Nothing watched: no communication, the whole step is compute.
    EXPECT_EQ(s.comm_ms, 0);
    EXPECT_EQ(s.exposed_comm_ms, 0);
    EXPECT_EQ(s.compute_ms, s.step_ms);
    ASSERT_TRUE(s.tokens_per_s.has_value());
    EXPECT_NEAR(*s.tokens_per_s, 16 * 1000.0 / s.step_ms, 1e-9 * *s.tokens_per_s);
    // The host's figures: the process's resident bytes, and its peak during the step.
    EXPECT_GT(s.mem_allocated, 10u << 20);
    EXPECT_EQ(s.mem_reserved, s.mem_allocated);
    EXPECT_EQ(s.device_mem_used, s.mem_allocated);
    EXPECT_GE(s.mem_peak, s.mem_allocated);
    EXPECT_FALSE(s.grad_norm.has_value());
  }
  EXPECT_TRUE(std::isfinite(steps[0].loss));
  EXPECT_TRUE(std::isnan(steps[1].loss)) << "a NaN loss arrives as null";
  EXPECT_TRUE(std::isfinite(steps[2].loss));
  // Read from the optimizer at each step: the script halves it before step 3.
  EXPECT_EQ(steps[0].lr, 0.05);
  EXPECT_EQ(steps[1].lr, 0.05);
  EXPECT_EQ(steps[2].lr, 0.025);
  const auto dones = output.all<DoneEvent>();
  ASSERT_EQ(dones.size(), 1u);
  EXPECT_EQ(dones[0].status, DoneStatus::kCompleted);
  EXPECT_EQ(dones[0].final_step, 3);
  EXPECT_GT(dones[0].wall_s, 0);
}

// Issue 33: any numeric name is a custom metric (the step's "metrics"), as wandb.log takes it; a
// non-finite value travels as null (NaN), for the recorder to count; a value that is no number is
// left out with one warning.
TEST(Reporter, AnyNumericMetricTravelsAsACustomMetric) {
  SKIP_WITHOUT_TORCH();
  ScriptRun run("steps.py", {}, 1);
  const RankOutput& output = run.finish(60s)[0];
  ASSERT_TRUE(output.status.ok()) << describe(output);
  const auto steps = output.all<StepEvent>();
  ASSERT_EQ(steps.size(), 3u);
  for (const StepEvent& s : steps) {
    SCOPED_TRACE("step " + std::to_string(s.step));
    ASSERT_EQ(s.metrics.size(), 3u) << "unknown_metric, train/grad_norm, eval/acc";
    EXPECT_EQ(s.metrics.at("unknown_metric"), 1.5);
    EXPECT_EQ(s.metrics.at("train/grad_norm"), 0.5 * static_cast<double>(s.step)) << "a tensor";
    if (s.step == 2) {
      EXPECT_TRUE(std::isnan(s.metrics.at("eval/acc"))) << "an infinite value arrives as null";
    } else {
      EXPECT_EQ(s.metrics.at("eval/acc"), 0.75);
    }
  }
  const auto logs = output.all<LogEvent>();
  ASSERT_EQ(logs.size(), 2u) << "three steps passed not_a_number and many_elements";
  EXPECT_EQ(logs[0].level, LogLevel::kWarn);
  EXPECT_NE(logs[0].message.find("not_a_number"), std::string::npos) << logs[0].message;
  EXPECT_NE(logs[1].message.find("many_elements"), std::string::npos) << logs[1].message;
}

TEST(Reporter, PrintsStayOnStdoutAndStderr) {
  SKIP_WITHOUT_TORCH();
  ScriptRun run("steps.py", {}, 1);
  const RankOutput& output = run.finish(60s)[0];
  ASSERT_TRUE(output.status.ok()) << describe(output);
  EXPECT_NE(output.out.find("\"printed\":\"on stdout\""), std::string::npos) << output.out;
  EXPECT_NE(output.out.find("step 3 loss"), std::string::npos) << output.out;
  EXPECT_NE(output.err.find("a line on stderr"), std::string::npos) << output.err;
  EXPECT_EQ(output.telemetry.find("printed"), std::string::npos);
  EXPECT_EQ(output.telemetry.find("a line on stderr"), std::string::npos);
  EXPECT_EQ(output.telemetry.find("step 3 loss"), std::string::npos);
}

TEST(Reporter, WithoutATelemetryDescriptorEveryCallIsANoOp) {
  SKIP_WITHOUT_TORCH();
  ScriptRun run("steps.py", {}, 1, {}, /*with_telemetry_fd=*/false);
  const RankOutput& output = run.finish(60s)[0];
  ASSERT_TRUE(output.status.ok()) << describe(output);
  EXPECT_NE(output.out.find("steps.py finished (reporting: False)"), std::string::npos)
      << output.out;
  EXPECT_EQ(output.telemetry, "");
}

// A real DDP run over Gloo on 1 to 4 ranks, its buckets and explicit collectives watched.
class ReporterDdp : public ::testing::TestWithParam<int> {};

TEST_P(ReporterDdp, CommEventsForBucketsAndCollectivesAsTheEngineCountsThem) {
  SKIP_WITHOUT_TORCH();
  const int ranks = GetParam();
  const int steps = 3;
  ScriptRun run("ddp.py", {"--steps", std::to_string(steps)}, ranks);
  const std::vector<RankOutput>& outputs = run.finish(120s);
  const double n = ranks;
  for (int rank = 0; rank < ranks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const RankOutput& output = outputs[static_cast<size_t>(rank)];
    ASSERT_TRUE(output.status.ok()) << describe(output);
    expectWellFormedStream(output, rank);
    EXPECT_NE(output.out.find("step 3 loss"), std::string::npos) << output.out;
    EXPECT_NE(output.err.find("stderr line"), std::string::npos) << output.err;

    // The even ranks' group: torch's group 1, numbered on its own, its bus factor its size's.
    const auto group_ops = output.comms("all_reduce", "int32");
    ASSERT_EQ(group_ops.size(), rank % 2 == 0 ? 1u : 0u);
    for (const CommEvent& c : group_ops) {
      const double evens = (ranks + 1) / 2;
      EXPECT_EQ(c.group, "group1");
      EXPECT_EQ(c.seq_op, 0u);
      EXPECT_EQ(c.bytes, 12u);
      EXPECT_EQ(c.step, steps + 1) << "after the last step: the next one's";
      EXPECT_NEAR(c.busbw_gbps, evens == 1 ? 0.0 : c.algbw_gbps * 2 * (evens - 1) / evens,
                  1e-12 * c.algbw_gbps);
    }

    // The world's collectives are numbered 0, 1, 2, ... in launch order, send and recv apart.
    std::vector<uint64_t> collective_seqs, p2p_seqs;
    for (const CommEvent& c : output.all<CommEvent>()) {
      if (c.dtype == "int32") continue;
      EXPECT_EQ(c.group, "world");
      EXPECT_FALSE(c.wait_ms.has_value());
      (c.op == "send" || c.op == "recv" ? p2p_seqs : collective_seqs).push_back(c.seq_op);
    }
    std::sort(collective_seqs.begin(), collective_seqs.end());
    for (size_t i = 0; i < collective_seqs.size(); ++i) EXPECT_EQ(collective_seqs[i], i);
    std::sort(p2p_seqs.begin(), p2p_seqs.end());
    ASSERT_EQ(p2p_seqs.size(), ranks > 1 ? 2u * steps : 0u);
    for (size_t i = 0; i < p2p_seqs.size(); ++i) EXPECT_EQ(p2p_seqs[i], i);

    const auto step_events = output.all<StepEvent>();
    ASSERT_EQ(step_events.size(), static_cast<size_t>(steps));
    for (const StepEvent& s : step_events) {
      SCOPED_TRACE("step " + std::to_string(s.step));
      // DDP's buckets: the model's 1,069,312 bytes of float32 gradients; in one bucket at the
      // first step, and in two from the second, when DDP has rebuilt its buckets in the order the
      // gradients came (1 MiB first, then 1 KB ones).
      uint64_t bucket_bytes = 0;
      int buckets = 0;
      double step_comm_ms = 0, blocking_ms = 0;
      for (const CommEvent& c : output.all<CommEvent>()) {
        if (c.step != s.step) continue;
        step_comm_ms += c.duration_ms;
        if (c.op == "all_reduce" && c.dtype == "float32" && c.bytes != 28) {
          bucket_bytes += c.bytes;
          ++buckets;
        } else {
          blocking_ms += c.op == "send" || c.op == "recv" || c.bytes == 28 ? 0 : c.duration_ms;
        }
      }
      EXPECT_EQ(bucket_bytes, 1069312u);
      EXPECT_EQ(buckets, s.step == 1 ? 1 : 2);
      // comm_ms sums the step's operations; the blocking calls are exposed in full, and exposed
      // never passes comm.
      EXPECT_NEAR(s.comm_ms, step_comm_ms, 1e-6 * step_comm_ms);
      EXPECT_GE(s.exposed_comm_ms, blocking_ms * (1 - 1e-9));
      EXPECT_LE(s.exposed_comm_ms, s.comm_ms);
      EXPECT_NEAR(s.compute_ms, std::max(0.0, s.step_ms - s.exposed_comm_ms), 1e-9 * s.step_ms);
    }

    // The explicit collectives, bytes and bandwidths checked by hand (engine/comm/comm_op.cpp).
    const auto reduces = output.comms("all_reduce", "float64");
    ASSERT_EQ(reduces.size(), static_cast<size_t>(steps));
    for (const CommEvent& c : reduces) {
      EXPECT_EQ(c.bytes, 8000u);  // 1,000 float64: the per-rank buffer
      const double algbw = 8000 / (c.duration_ms * 1e6);
      EXPECT_NEAR(c.algbw_gbps, algbw, 1e-12 * algbw);
      EXPECT_NEAR(c.busbw_gbps, ranks == 1 ? 0.0 : algbw * 2 * (n - 1) / n, 1e-12 * algbw);
    }
    const auto gathers = output.comms("all_gather", "float32");
    ASSERT_EQ(gathers.size(), static_cast<size_t>(steps));
    for (const CommEvent& c : gathers) {
      EXPECT_EQ(c.bytes, static_cast<uint64_t>(20 * ranks));  // the whole output
      EXPECT_NEAR(c.busbw_gbps, c.algbw_gbps * (n - 1) / n, 1e-12 * c.algbw_gbps);
    }
    const auto broadcasts = output.comms("broadcast", "int64");
    ASSERT_EQ(broadcasts.size(), static_cast<size_t>(steps));
    for (const CommEvent& c : broadcasts) {
      EXPECT_EQ(c.bytes, 80u);
      EXPECT_EQ(c.busbw_gbps, ranks == 1 ? 0.0 : c.algbw_gbps);
    }
    const auto barriers = output.comms("barrier", "uint8");
    ASSERT_EQ(barriers.size(), static_cast<size_t>(steps));
    for (const CommEvent& c : barriers) EXPECT_EQ(c.bytes, 0u);
    EXPECT_EQ(output.comms("send", "float32").size(), ranks > 1 ? 3u : 0u);
    for (const CommEvent& c : output.comms("recv", "float32")) EXPECT_EQ(c.bytes, 12u);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ReporterDdp, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "Ranks"; });

TEST(Reporter, AnExceptionIsAnErrorWithTheTracebackAndTheFlightRecorder) {
  SKIP_WITHOUT_TORCH();
  ScriptRun run("raises.py", {}, 2);
  const std::vector<RankOutput>& outputs = run.finish(60s);
  const RankOutput& failed = outputs[1];
  EXPECT_TRUE(outputs[0].status.ok()) << describe(outputs[0]);
  EXPECT_EQ(failed.status.signal, 0);
  EXPECT_EQ(failed.status.exit_code, 1) << describe(failed);
  expectWellFormedStream(failed, 1);
  EXPECT_NE(failed.err.find("ValueError: boom after step 2"), std::string::npos)
      << "the script's own traceback still reaches stderr:\n"
      << failed.err;

  const auto errors = failed.all<ErrorEvent>();
  ASSERT_EQ(errors.size(), 1u);
  const ErrorEvent& error = errors[0];
  EXPECT_EQ(error.message.rfind("Traceback (most recent call last):", 0), 0u) << error.message;
  EXPECT_NE(error.message.find("in fail"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("ValueError: boom after step 2"), std::string::npos);
  EXPECT_EQ(error.kind, "exception");
  EXPECT_EQ(error.where.rfind(kScripts + "raises.py:", 0), 0u) << error.where;
  EXPECT_EQ(error.step, 2);
  EXPECT_TRUE(error.fatal);
  // The flight recorder: the last operations, oldest first, in the engine's record shape.
  ASSERT_TRUE(error.flight_recorder.has_value());
  const nlohmann::json& records = *error.flight_recorder;
  ASSERT_EQ(records.size(), 4u) << records.dump();
  const char* ops[] = {"all_reduce", "broadcast", "all_reduce", "broadcast"};
  for (size_t i = 0; i < records.size(); ++i) {
    const nlohmann::json& r = records[i];
    EXPECT_EQ(r.at("seq"), i);
    EXPECT_EQ(r.at("op"), ops[i]);
    EXPECT_EQ(r.at("group"), "world");
    EXPECT_EQ(r.at("bytes"), i % 2 == 0 ? 24 : 32);
    EXPECT_EQ(r.at("dtype"), i % 2 == 0 ? "float32" : "int64");
    EXPECT_EQ(r.at("state"), "completed");
    EXPECT_EQ(r.contains("peer"), i % 2 == 1) << r.dump();
    EXPECT_LE(r.at("scheduled_us").get<int64_t>(), r.at("started_us").get<int64_t>());
    EXPECT_LE(r.at("started_us").get<int64_t>(), r.at("finished_us").get<int64_t>());
  }

  const auto dones = failed.all<DoneEvent>();
  ASSERT_EQ(dones.size(), 1u);
  EXPECT_EQ(dones[0].status, DoneStatus::kFailed);
  EXPECT_EQ(dones[0].final_step, 2);
  ASSERT_EQ(outputs[0].all<DoneEvent>().size(), 1u);
  EXPECT_EQ(outputs[0].all<DoneEvent>()[0].status, DoneStatus::kCompleted);
}

TEST(Reporter, AnErrorTooLongForALineIsCut) {
  SKIP_WITHOUT_TORCH();
  ScriptRun run("raises.py", {"--huge"}, 2);
  const RankOutput& failed = run.finish(60s)[1];
  EXPECT_EQ(failed.status.exit_code, 1) << describe(failed);
  expectWellFormedStream(failed, 1);
  const auto errors = failed.all<ErrorEvent>();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_LE(errors[0].message.size(), (64u << 10) + 40);
  EXPECT_NE(errors[0].message.find(" [cut: "), std::string::npos);
  EXPECT_EQ(errors[0].message.rfind("Traceback (most recent call last):", 0), 0u);
}

TEST(Reporter, SigtermEndsTheRunCancelled) {
  SKIP_WITHOUT_TORCH();
  ScriptRun run("sigterm.py", {}, 1);
  bool signalled = false;
  const RankOutput& output = run.finish(60s, [&](int rank, const std::string& telemetry) {
    if (!signalled && telemetry.find("\"step\":2,") != std::string::npos) {
      run.child(rank).signal(SIGTERM);
      signalled = true;
    }
  })[0];
  ASSERT_TRUE(signalled);
  EXPECT_EQ(output.status.signal, 0);
  EXPECT_EQ(output.status.exit_code, 130) << describe(output);
  expectWellFormedStream(output, 0);
  const auto steps = output.all<StepEvent>();
  ASSERT_FALSE(steps.empty());
  const auto dones = output.all<DoneEvent>();
  ASSERT_EQ(dones.size(), 1u);
  EXPECT_EQ(dones[0].status, DoneStatus::kCancelled);
  EXPECT_EQ(dones[0].final_step, steps.back().step);
  EXPECT_TRUE(output.all<ErrorEvent>().empty());
  EXPECT_NE(output.err.find("SIGTERM: stopping after step"), std::string::npos) << output.err;
}

TEST(Reporter, SigtermDuringDdpStepsEndsEveryStreamWithDoneCancelled) {
  SKIP_WITHOUT_TORCH();
  const int ranks = 2;
  ScriptRun run("stop_ddp.py", {}, ranks);
  // As the agent stops a job: every rank at once, once all are training.
  std::vector<bool> reached(ranks, false);
  bool signalled = false;
  const std::vector<RankOutput>& outputs =
      run.finish(120s, [&](int rank, const std::string& telemetry) {
        if (telemetry.find("\"step\":5,") != std::string::npos)
          reached[static_cast<size_t>(rank)] = true;
        if (signalled || std::find(reached.begin(), reached.end(), false) != reached.end()) return;
        for (int r = 0; r < ranks; ++r) run.child(r).signal(SIGTERM);
        signalled = true;
      });
  ASSERT_TRUE(signalled);
  for (int rank = 0; rank < ranks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const RankOutput& output = outputs[static_cast<size_t>(rank)];
    // 130, as the engine's worker. A rank stopped with collectives in flight may instead die
    // in torch's own teardown, after its telemetry ("terminate called without an active
    // exception"): SIGABRT, which the agent counts as expected of a stopped worker.
    EXPECT_TRUE(output.status.exit_code == 130 || output.status.signal == SIGABRT)
        << describe(output);
    // The comm events of buckets that complete during the exit never follow the done.
    expectWellFormedStream(output, rank);
    const auto dones = output.all<DoneEvent>();
    ASSERT_EQ(dones.size(), 1u);
    EXPECT_EQ(dones[0].status, DoneStatus::kCancelled);
    EXPECT_TRUE(output.all<ErrorEvent>().empty());
  }
}

// ---------------------------------------------------------------------------------------------
// Issue 34, users' own scripts: a mesh of the script's process groups labels each comm event with
// its dimension ("dim"), and the hello carries the layout and the rank's coordinates.

bool pythonHasDeviceMesh() {
  static const bool has = std::system((std::string(kPython) +
                                       " -c 'import torch.distributed.device_mesh' >/dev/null 2>&1")
                                          .c_str()) == 0;
  return has;
}

// A rank's events of one type as the JSON it wrote: a comm line without a dim and one with
// "world", which the decoder reads alike, differ here.
std::vector<nlohmann::json> rawEvents(const RankOutput& output, const std::string& type) {
  std::vector<nlohmann::json> found;
  size_t begin = 0, end = 0;
  while ((end = output.telemetry.find('\n', begin)) != std::string::npos) {
    nlohmann::json event = nlohmann::json::parse(output.telemetry.substr(begin, end - begin));
    if (event.at("type") == type) found.push_back(std::move(event));
    begin = end + 1;
  }
  return found;
}

// The dimension of each comm event of a rank of tests/python/scripts/mesh.py, by its bytes (each
// group's all-reduce has a size of its own), "" where the line has no dim, which the engine's
// decoder reads as "world".
std::map<uint64_t, std::string> commDims(const RankOutput& output) {
  std::map<uint64_t, std::string> dims;
  const std::vector<nlohmann::json> lines = rawEvents(output, "comm");
  const std::vector<CommEvent> decoded = output.all<CommEvent>();
  EXPECT_EQ(lines.size(), decoded.size());
  for (size_t i = 0; i < std::min(lines.size(), decoded.size()); ++i) {
    const uint64_t bytes = lines[i].at("bytes");
    EXPECT_EQ(dims.count(bytes), 0u) << "two comm events of " << bytes << " bytes";
    dims[bytes] = lines[i].value("dim", "");
    EXPECT_EQ(decoded[i].dim, dims[bytes].empty() ? "world" : dims[bytes]) << bytes << " bytes";
  }
  return dims;
}

// What mesh.py's rank sends on each group of a D x T x P layout: its bytes -> its dim.
std::map<uint64_t, std::string> expectedDims(int dp, int tp, int pp) {
  std::map<uint64_t, std::string> dims = {
      {28, "world"}, {32, "world"}, {0, "world"} /* the barrier */, {36, ""} /* no dimension */};
  if (tp > 1) dims[12] = "tp";
  if (dp > 1) {
    dims[20] = "dp";
    dims[160] = "dp";  // DDP's bucket over the dp group
  }
  if (pp > 1) {
    dims[24] = "pp";
    dims[16] = "pp";  // the send or recv between the stages
  }
  return dims;
}

struct MeshCase {
  std::string name;
  int dp, tp, pp;
  std::vector<std::string> args;  // mesh.py's, besides --layout
};
void PrintTo(const MeshCase& c, std::ostream* out) {
  *out << c.name;
}

// `rank`'s coordinates in mesh.py's rank order (engine/spec/mesh_layout.h's: tp fastest, then dp,
// then pp), written out here rather than taken from the code under test.
MeshAxes meshOrderCoords(const MeshCase& c, int rank) {
  return {.dp = rank / c.tp % c.dp, .tp = rank % c.tp, .pp = rank / (c.tp * c.dp)};
}

// Every rank's lines through the real recorder into a real SQLite file: the run keeps the mesh
// the hellos name (over the one its ddp label implies), each rank its coordinates, and each comm
// row its dimension (a line without one: the world's), counted per rank by commByDimension.
void expectStoredMesh(const std::vector<RankOutput>& outputs, const MeshCase& c) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("ringmaster_reporter_mesh_" + std::to_string(::getpid()) + "_" + c.name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "runs.db").string();
  const int ranks = c.dp * c.tp * c.pp;
  {
    storage::Database db(path);
    const int64_t run = storage::createRun(
        db, {.name = "mesh", .spec_json = "{}", .strategy = "ddp", .world_size = ranks});
    {
      storage::Recorder recorder(path, run, 0);
      for (const RankOutput& output : outputs) {
        size_t begin = 0, end = 0;
        while ((end = output.telemetry.find('\n', begin)) != std::string::npos) {
          EXPECT_TRUE(recorder.submitLine(output.telemetry.substr(begin, end - begin)));
          begin = end + 1;
        }
      }
      recorder.flush();
      EXPECT_EQ(recorder.counts().malformed + recorder.counts().rejected, 0);
    }
    EXPECT_EQ(storage::loadRun(db, run).mesh, (MeshAxes{.dp = c.dp, .tp = c.tp, .pp = c.pp}));
    const std::vector<storage::RankRecord> stored_ranks = storage::loadRanks(db, run);
    EXPECT_EQ(stored_ranks.size(), static_cast<size_t>(ranks));
    for (const storage::RankRecord& rank : stored_ranks)
      EXPECT_EQ(rank.coords, meshOrderCoords(c, rank.rank)) << "rank " << rank.rank;
    std::map<std::pair<int, std::string>, int64_t> stored, expected;
    for (const storage::RankDimensionComm& row : storage::commByDimension(db, run).ranks)
      stored[{row.rank, row.dim}] = row.operations;
    for (int rank = 0; rank < ranks; ++rank)
      for (const auto& [bytes, dim] : expectedDims(c.dp, c.tp, c.pp))
        ++expected[{rank, dim.empty() ? "world" : dim}];
    EXPECT_EQ(stored, expected);
  }
  std::filesystem::remove_all(dir);
}

class ReporterMesh : public ::testing::TestWithParam<MeshCase> {};

TEST_P(ReporterMesh, CommEventsNameTheirDimensionAndTheHelloTheRanksCoordinates) {
  SKIP_WITHOUT_TORCH();
  const MeshCase& c = GetParam();
  const bool device_mesh = std::find(c.args.begin(), c.args.end(), "--device-mesh") != c.args.end();
  if (device_mesh && !pythonHasDeviceMesh())
    GTEST_SKIP() << kPython << "'s torch has no torch.distributed.device_mesh (torch 2.2+)";
  std::vector<std::string> args = {
      "--layout", std::to_string(c.dp) + "," + std::to_string(c.tp) + "," + std::to_string(c.pp)};
  args.insert(args.end(), c.args.begin(), c.args.end());
  const int ranks = c.dp * c.tp * c.pp;
  ScriptRun run("mesh.py", args, ranks);
  const std::vector<RankOutput>& outputs = run.finish(120s);
  for (int rank = 0; rank < ranks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const RankOutput& output = outputs[static_cast<size_t>(rank)];
    ASSERT_TRUE(output.status.ok()) << describe(output);
    expectWellFormedStream(output, rank);
    const auto hellos = output.all<HelloEvent>();
    ASSERT_EQ(hellos.size(), 1u);
    EXPECT_EQ(hellos[0].mesh, (MeshAxes{.dp = c.dp, .tp = c.tp, .pp = c.pp}));
    EXPECT_EQ(hellos[0].coords, meshOrderCoords(c, rank));
    EXPECT_EQ(commDims(output), expectedDims(c.dp, c.tp, c.pp));
    EXPECT_TRUE(output.all<LogEvent>().empty()) << output.all<LogEvent>()[0].message;
  }
  expectStoredMesh(outputs, c);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ReporterMesh,
    ::testing::Values(MeshCase{"DpTp2x2ToInit", 2, 2, 1, {"--order", "init"}},
                      MeshCase{"TpPp2x2ToWatchBeforeInit", 1, 2, 2, {"--order", "watch-first"}},
                      MeshCase{"DeviceMeshDpTp2x2", 2, 2, 1, {"--device-mesh"}}),
    [](const auto& info) { return info.param.name; });

// A mesh given after the hello labels the operations from then on (those of a group already seen
// too); the hello went without it, which the run hears once.
TEST(Reporter, AMeshAfterTheHelloLabelsTheCommunicationAndSaysTheHelloLacksIt) {
  SKIP_WITHOUT_TORCH();
  ScriptRun run("mesh.py", {"--layout", "2,1,1", "--order", "late"}, 2);
  const std::vector<RankOutput>& outputs = run.finish(120s);
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const RankOutput& output = outputs[static_cast<size_t>(rank)];
    ASSERT_TRUE(output.status.ok()) << describe(output);
    expectWellFormedStream(output, rank);
    const auto hellos = output.all<HelloEvent>();
    ASSERT_EQ(hellos.size(), 1u);
    EXPECT_FALSE(hellos[0].mesh.has_value());
    EXPECT_FALSE(hellos[0].coords.has_value());
    auto dims = expectedDims(2, 1, 1);
    dims[44] = "";  // on the dp group before the mesh named it
    EXPECT_EQ(commDims(output), dims);
    const auto logs = output.all<LogEvent>();
    ASSERT_EQ(logs.size(), 1u);
    EXPECT_EQ(logs[0].level, LogLevel::kWarn);
    EXPECT_NE(logs[0].message.find("the mesh came after the hello"), std::string::npos)
        << logs[0].message;
  }
}

// Every kind of bad mesh is refused, naming the call and what is wrong, whether the script runs
// under Ringmaster or not; a valid one naming the default group makes its operations that
// dimension's.
TEST(Reporter, ABadMeshIsRefusedWithOrWithoutAChannel) {
  SKIP_WITHOUT_TORCH();
  const std::string watch = "ringmaster.watch_distributed(mesh=...): ";
  const std::string init = "ringmaster.init(mesh=...): ";
  const std::string short_of_world = "dp 1 x tp 1 x pp 1 makes 1, but the world has 2 ranks";
  const std::vector<std::pair<std::string, std::string>> refusals = {
      {"before init_process_group", "ValueError: " + watch + "torch.distributed is not initial"},
      {"a list", "TypeError: " + watch + "a list; the mesh is a dict of dimension name"},
      {"unknown dimension", "ValueError: " + init + "unknown dimension 'ep'"},
      {"an int dimension", "ValueError: " + watch + "unknown dimension 0"},
      {"a string group", "TypeError: " + watch + "mesh['dp'] is a str, not a process group"},
      {"a None group", "TypeError: " + init + "mesh['tp'] is a NoneType, not a process group"},
      {"one group twice",
       "ValueError: " + watch + "mesh['dp'] and mesh['tp'] are the same process group"},
      {"product short of the world", "ValueError: " + watch + short_of_world},
      {"product past the world",
       "ValueError: " + watch + "dp 2 x tp 2 x pp 1 makes 4, but the world has 2 ranks"},
      {"a device mesh without names",
       "ValueError: " + watch + "a DeviceMesh without dimension names"},
      {"a device mesh of other names", "ValueError: " + watch + "unknown dimension 'dp_shard'"},
      {"dp as the world", "taken"},
      {"a second mesh", "ValueError: " + watch + "a mesh of other groups was given before"},
      {"the same mesh again", "taken"}};
  for (const bool channel : {true, false}) {
    SCOPED_TRACE(channel ? "with a channel" : "without a channel");
    ScriptRun run("mesh_errors.py", {}, 2, {}, channel);
    const std::vector<RankOutput>& outputs = run.finish(120s);
    for (int rank = 0; rank < 2; ++rank) {
      SCOPED_TRACE("rank " + std::to_string(rank));
      const RankOutput& output = outputs[static_cast<size_t>(rank)];
      ASSERT_TRUE(output.status.ok()) << describe(output);
      auto expected = refusals;
      // Rank 1 is outside the group of rank 0 alone; rank 0 is in it, a mesh of one rank.
      expected.insert(
          expected.begin() + 6,
          {"not a member", rank == 1 ? "ValueError: " + watch +
                                           "mesh['dp']: this rank (1) is not a member of that group"
                                     : "ValueError: " + watch + short_of_world});
      for (const auto& [label, refusal] : expected)
        EXPECT_NE(("\n" + output.out).find("\n" + label + ": " + refusal), std::string::npos)
            << label << ": " << refusal << "\nstdout:\n"
            << output.out;
      if (!channel) {
        EXPECT_EQ(output.telemetry, "");
        continue;
      }
      expectWellFormedStream(output, rank);
      const auto hellos = output.all<HelloEvent>();
      ASSERT_EQ(hellos.size(), 1u);
      EXPECT_EQ(hellos[0].mesh, (MeshAxes{.dp = 2, .tp = 1, .pp = 1}));
      EXPECT_EQ(hellos[0].coords, (MeshAxes{.dp = rank, .tp = 0, .pp = 0}));
      // The default group named dp is dp's; a group of every rank that is no dimension has none.
      EXPECT_EQ(commDims(output), (std::map<uint64_t, std::string>{{28, "dp"}, {36, ""}}));
    }
  }
}

}  // namespace
}  // namespace ringmaster
