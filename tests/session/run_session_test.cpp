// The run session as a library (what the web server will call) and its machine-readable channel as
// `ringmaster run --events FILE` writes it (what the window reads): a run from spec text observed
// to its end, a stop request that cancels, a refused spec that creates nothing, and the events'
// JSON lines.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/test_paths.h"
#include "core/error.h"
#include "db/database.h"
#include "run/run_events.h"
#include "run/run_session.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using storage::testing::queryText;
using testing::CapturedProcess;
using testing::exitedWith;

const std::string kBinaryDir = ringmaster::testBinaryDir();

std::string example(const std::string& name) {
  return std::string(ringmaster::testSourceDir()) + "/resources/examples/" + name + ".json";
}

std::string fileText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<json> jsonLines(const fs::path& path) {
  std::vector<json> lines;
  std::istringstream in(fileText(path));
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

class RunSessionTest : public storage::testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    // The test binary has no ringmaster-node beside it.
    ::setenv("RINGMASTER_NODE", (kBinaryDir + "/app/ringmaster-node").c_str(), 1);
  }
  std::string dbPath() const { return (dir_ / "runs.db").string(); }
  session::RunRequest request(std::vector<std::string> overrides) const {
    return {.spec_path = "single_mlp.json",
            .spec_text = fileText(example("single_mlp")),
            .db_path = dbPath(),
            .overrides = std::move(overrides),
            .grace_s = 2};
  }
};

TEST_F(RunSessionTest, RunsASpecGivenAsTextReportingProgressToItsEnd) {
  session::RunSession run(request({"train.steps=5", "telemetry.every_steps=1"}));
  EXPECT_EQ(run.runId(), 1);
  EXPECT_TRUE(run.local());
  EXPECT_EQ(run.worldSize(), 1);
  int progress_calls = 0;
  int64_t last_step = -1;
  const session::RunOutcome outcome = run.run({.on_progress = [&](const RunProgress& progress) {
    ++progress_calls;
    last_step = progress.step();
  }});
  EXPECT_EQ(outcome.status, "completed");
  EXPECT_FALSE(outcome.finish_failure);
  EXPECT_GT(progress_calls, 0);
  ASSERT_NE(run.progress(), nullptr);
  EXPECT_EQ(run.progress()->step(), 5);
  EXPECT_LE(last_step, 5);
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "completed");
  EXPECT_EQ(queryInt(db, "SELECT max(step) FROM steps"), 5);
  EXPECT_TRUE(fs::exists(session::runDirectory(dbPath(), 1) / "spec.json"));
}

TEST_F(RunSessionTest, AStopRequestCancelsTheRun) {
  session::RunSession run(request({"train.steps=100000", "telemetry.every_steps=1"}));
  bool asked = false;
  const session::RunOutcome outcome = run.run({.on_progress = [&](const RunProgress& progress) {
    if (!asked && progress.step() > 0) {
      asked = true;
      run.requestStop();
    }
  }});
  EXPECT_TRUE(asked);
  EXPECT_EQ(outcome.status, "cancelled");
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "cancelled");
}

TEST_F(RunSessionTest, ABadSpecIsRefusedBeforeARunExists) {
  try {
    session::RunSession run(request({"train.batch_size=-3"}));
    FAIL() << "the spec was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kSpec);
    EXPECT_NE(e.message().find("train.batch_size"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("(from --set train.batch_size=-3)"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dbPath()));
}

TEST(RunEvents, EncodeAndDecodeAgreeAndOtherLinesAreNoEvents) {
  const session::RunEvent progress{.event = "progress",
                                   .run = 7,
                                   .step = 10,
                                   .total_steps = 300,
                                   .ranks_started = 4,
                                   .loss = 0.25};
  EXPECT_EQ(json::parse(session::encodeRunEvent(progress)),
            json::parse(R"({"event":"progress","run":7,"step":10,"total_steps":300,)"
                        R"("ranks_started":4,"loss":0.25})"));
  const auto decoded = session::decodeRunEvent(session::encodeRunEvent(progress));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->run, 7);
  EXPECT_EQ(decoded->step, 10);
  EXPECT_EQ(decoded->loss, 0.25);
  const auto finished = session::decodeRunEvent(session::encodeRunEvent(
      {.event = "finished", .run = 7, .status = "cancelled", .exit_code = 130}));
  ASSERT_TRUE(finished);
  EXPECT_EQ(finished->status, "cancelled");
  EXPECT_EQ(finished->exit_code, 130);
  for (const char* line : {"", "ringmaster run 7 'x'", "[1,2]", R"({"run":7})", R"({"event":7})",
                           "{\"event\":\"created\",\"run\":"})
    EXPECT_FALSE(session::decodeRunEvent(line)) << line;
}

// `ringmaster run --events FILE`: the window's channel, one JSON object a line.
TEST_F(RunSessionTest, TheRunCommandWritesCreatedProgressAndFinishedEvents) {
  fs::create_directories(dir_);
  const fs::path events = dir_ / "events.jsonl";
  CapturedProcess run(kBinaryDir + "/app/ringmaster",
                      {"--db", dbPath(), "run", example("single_mlp"), "--set", "train.steps=5",
                       "--set", "telemetry.every_steps=1", "-q", "--events", events.string()});
  ASSERT_TRUE(run.wait(120s).ok()) << run.err();
  const std::vector<json> lines = jsonLines(events);
  ASSERT_GE(lines.size(), 3u) << fileText(events);
  EXPECT_EQ(lines.front(), json::parse(R"({"event":"created","run":1,"world_size":1})"));
  EXPECT_EQ(lines.back(),
            json::parse(R"({"event":"finished","run":1,"status":"completed","exit_code":0})"));
  int64_t previous = -1;
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["event"], "progress") << lines[i];
    EXPECT_EQ(lines[i]["total_steps"], 5);
    EXPECT_GE(lines[i]["step"].get<int64_t>(), previous);
    previous = lines[i]["step"].get<int64_t>();
  }
  EXPECT_EQ(previous, 5);
}

TEST_F(RunSessionTest, ARefusedRunIsAnErrorEventAndNoRun) {
  fs::create_directories(dir_);
  const fs::path events = dir_ / "events.jsonl";
  CapturedProcess run(kBinaryDir + "/app/ringmaster",
                      {"--db", dbPath(), "run", example("ddp_mlp"), "--set", "train.batch_size=-3",
                       "--events", events.string()});
  EXPECT_TRUE(exitedWith(run.wait(30s), 2)) << run.err();
  const std::vector<json> lines = jsonLines(events);
  ASSERT_EQ(lines.size(), 1u) << fileText(events);
  EXPECT_EQ(lines[0]["event"], "error");
  EXPECT_FALSE(lines[0].contains("run"));
  EXPECT_NE(lines[0]["message"].get<std::string>().find("train.batch_size"), std::string::npos);
}

}  // namespace
}  // namespace ringmaster
