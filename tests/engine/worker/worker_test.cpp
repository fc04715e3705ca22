// End-to-end tests of `ringmaster-node worker` as a child process: it trains the example MLP, its
// telemetry stream decodes line by line, and its failures and cancellation end in the documented
// exit codes with a telemetry error / done event. The binary is run, not linked.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/captured_process.h"
#include "common/test_paths.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

using testing::CapturedProcess;
using testing::exitedWith;
using namespace std::chrono_literals;

const std::string kNode = std::string(ringmaster::testBinaryDir()) + "/app/ringmaster-node";
const std::string kExamples = std::string(ringmaster::testSourceDir()) + "/resources/examples";

std::vector<TelemetryEvent> decodeStream(const std::string& text) {
  std::vector<TelemetryEvent> events;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    DecodeResult decoded = decodeEvent(line);
    EXPECT_TRUE(decoded.ok()) << "undecodable line: " << line;
    if (decoded.ok()) events.push_back(decoded.event());
  }
  return events;
}

std::string writeTempSpec(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("ringmaster_worker_test_" + name + ".json");
  std::ofstream(path) << text;
  return path.string();
}

TEST(Worker, VersionNamesTheTelemetryProtocol) {
  CapturedProcess node(kNode, {"--version"});
  ExitStatus status = node.wait(30s);
  EXPECT_TRUE(exitedWith(status, 0));
  EXPECT_NE(node.out().find("telemetry protocol " + std::to_string(kTelemetryProtocol)),
            std::string::npos)
      << node.out();
}

// Acceptance: the example spec trains the 784-256-256-10 MLP on synthetic teacher data and its
// loss after 300 steps is below half of the first step's.
TEST(Worker, SingleMlpExampleHalvesItsLossIn300Steps) {
  CapturedProcess node(kNode, {"worker", "--spec", kExamples + "/single_mlp.json"});
  ExitStatus status = node.wait(600s);
  ASSERT_FALSE(node.timedOut());
  ASSERT_TRUE(exitedWith(status, 0)) << node.err();

  std::vector<TelemetryEvent> events = decodeStream(node.out());
  ASSERT_GE(events.size(), 3u);
  ASSERT_TRUE(std::holds_alternative<HelloEvent>(events.front().body));
  const auto& hello = std::get<HelloEvent>(events.front().body);
  EXPECT_EQ(hello.world_size, 1);
  EXPECT_EQ(hello.strategy, "single");
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].seq, i);

  std::map<int64_t, double> loss;
  for (const auto& e : events) {
    if (const auto* step = std::get_if<StepEvent>(&e.body)) {
      loss[step->step] = step->loss;
      EXPECT_GT(step->mem_peak, 0u);
      EXPECT_GE(step->mem_reserved, step->mem_allocated);
      EXPECT_EQ(step->samples, 64);
    }
  }
  ASSERT_TRUE(loss.count(1) && loss.count(300)) << "steps 1 and 300 must be reported";
  std::cout << "loss at step 1: " << loss[1] << ", at step 300: " << loss[300] << "\n";
  EXPECT_LT(loss[300], 0.5 * loss[1]);

  ASSERT_TRUE(std::holds_alternative<DoneEvent>(events.back().body));
  EXPECT_EQ(std::get<DoneEvent>(events.back().body).status, DoneStatus::kCompleted);
  EXPECT_EQ(std::get<DoneEvent>(events.back().body).final_step, 300);
}

TEST(Worker, InvalidSpecExitsWith2AndNamesEveryField) {
  const std::string spec = writeTempSpec("invalid", R"({
    "name": "bad", "model": {"kind": "mlp", "layers": [4, 2]},
    "data": {"kind": "synthetic", "samples": 64, "features": 4, "classes": 2},
    "train": {"steps": 10, "batch_size": -3}, "optimizer": {"kind": "sgd", "lr": 0.1},
    "bogus": 1})");
  CapturedProcess node(kNode, {"worker", "--spec", spec});
  ExitStatus status = node.wait(30s);
  EXPECT_TRUE(exitedWith(status, 2)) << node.err();
  EXPECT_NE(node.err().find("train.batch_size: expected a positive integer, got -3"),
            std::string::npos)
      << node.err();
  EXPECT_NE(node.err().find("bogus"), std::string::npos) << node.err();
  std::vector<TelemetryEvent> events = decodeStream(node.out());
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(std::holds_alternative<ErrorEvent>(events.front().body));
  EXPECT_EQ(std::get<DoneEvent>(events.back().body).status, DoneStatus::kFailed);
}

TEST(Worker, MissingSpecFileExitsWith1) {
  CapturedProcess node(kNode, {"worker", "--spec", "/nonexistent/spec.json"});
  ExitStatus status = node.wait(30s);
  EXPECT_TRUE(exitedWith(status, 1)) << node.err();
  EXPECT_NE(node.err().find("/nonexistent/spec.json"), std::string::npos) << node.err();
}

TEST(Worker, BadRankEnvironmentExitsWith2) {
  CapturedProcess node(kNode, {"worker", "--spec", kExamples + "/single_mlp.json"},
                       {{"RANK", "x1"}});
  ExitStatus status = node.wait(30s);
  EXPECT_TRUE(exitedWith(status, 2)) << node.err();
  EXPECT_NE(node.err().find("RANK"), std::string::npos) << node.err();
}

TEST(Worker, SigtermCancelsCleanlyWithExit130) {
  const std::string spec = writeTempSpec("long", R"({
    "name": "long", "strategy": {"kind": "single"}, "model": {"kind": "mlp", "layers": [16, 16, 4]},
    "data": {"kind": "synthetic", "samples": 512, "features": 16, "classes": 4},
    "train": {"steps": 100000000, "batch_size": 8}, "optimizer": {"kind": "sgd", "lr": 0.01},
    "device": "cpu", "telemetry": {"every_steps": 1000}})");
  CapturedProcess node(kNode, {"worker", "--spec", spec});
  ASSERT_TRUE(node.waitForOutput("\"type\":\"step\"", 60s)) << node.err();
  node.signal(SIGTERM);
  ExitStatus status = node.wait(60s);
  ASSERT_FALSE(node.timedOut());
  EXPECT_TRUE(exitedWith(status, 130)) << node.err();
  std::vector<TelemetryEvent> events = decodeStream(node.out());
  ASSERT_FALSE(events.empty());
  const auto* done = std::get_if<DoneEvent>(&events.back().body);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->status, DoneStatus::kCancelled);
  EXPECT_GT(done->final_step, 0);
}

TEST(Worker, CudaWithoutADeviceExitsWith3) {
  const std::string spec = writeTempSpec("cuda", R"({
    "name": "cuda", "strategy": {"kind": "single"}, "model": {"kind": "mlp", "layers": [4, 2]},
    "data": {"kind": "synthetic", "samples": 64, "features": 4, "classes": 2},
    "train": {"steps": 1, "batch_size": 8}, "optimizer": {"kind": "sgd", "lr": 0.1},
    "device": "cuda"})");
  CapturedProcess node(kNode, {"worker", "--spec", spec});
  ExitStatus status = node.wait(60s);
  ASSERT_EQ(status.signal, 0);
  if (status.exit_code == 0) GTEST_SKIP() << "a CUDA device is visible: the run succeeded";
  EXPECT_EQ(status.exit_code, 3) << node.err();
  EXPECT_NE(node.err().find("cuda"), std::string::npos) << node.err();
}

}  // namespace
}  // namespace ringmaster
