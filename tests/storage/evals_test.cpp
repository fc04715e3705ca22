// The eval event through the recorder into the evals table and back through the evaluation
// queries: a row per rank and step, stored once however often it is replayed, a non-finite loss
// kept as absent, and the queries reading one rank's rows in step order.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "db/database.h"
#include "query/evals.h"
#include "recorder/recorder.h"
#include "recorder/run_lifecycle.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster::storage {
namespace {

class EvalsTest : public testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    path_ = (dir_ / "runs.db").string();
    db_.emplace(path_);
    run_ =
        createRun(*db_, {.name = "evals", .spec_json = "{}", .strategy = "ddp", .world_size = 2});
  }
  void TearDown() override {
    db_.reset();
    StorageTest::TearDown();
  }
  int64_t count(const std::string& sql) { return testing::queryInt(*db_, sql); }
  std::string path_;
  std::optional<Database> db_;
  int64_t run_ = 0;
};

// Rank `rank`'s stream: hello, then an evaluation after steps 5, 10 and 12 whose loss falls with
// the step (the last one diverged: infinite loss and perplexity), then done.
std::vector<TelemetryEvent> evalStream(int rank) {
  std::vector<TelemetryEvent> events;
  uint64_t seq = 0;
  auto add = [&](EventBody body) {
    events.push_back({.rank = rank, .seq = seq++, .time = 1e9 + seq, .body = std::move(body)});
  };
  add(HelloEvent{.world_size = 2, .host = "h", .device = "cpu", .strategy = "ddp"});
  for (int64_t step : {5, 10}) {
    const double loss = 10.0 / static_cast<double>(step);
    add(EvalEvent{.step = step,
                  .val_loss = loss,
                  .perplexity = std::exp(loss),
                  .tokens = 256,
                  .eval_ms = 1.5 + rank});
  }
  add(EvalEvent{.step = 12,
                .val_loss = std::numeric_limits<double>::infinity(),
                .perplexity = std::numeric_limits<double>::infinity(),
                .tokens = 256,
                .eval_ms = 2});
  add(DoneEvent{.final_step = 12});
  return events;
}

TEST_F(EvalsTest, AnEvaluationIsOneRowPerRankAndStepStoredOnce) {
  std::vector<TelemetryEvent> events;
  for (int rank : {1, 0}) {
    const auto stream = evalStream(rank);
    events.insert(events.end(), stream.begin(), stream.end());
  }
  {
    Recorder recorder(path_, run_, 0);
    for (const TelemetryEvent& e : events) EXPECT_TRUE(recorder.submitLine(encodeEvent(e)));
    for (const TelemetryEvent& e : events) recorder.submit(e);  // replayed: stored once
    recorder.flush();
    EXPECT_EQ(recorder.counts().stored, static_cast<int64_t>(events.size()));
    EXPECT_EQ(recorder.counts().duplicates, static_cast<int64_t>(events.size()));
  }
  EXPECT_EQ(count("SELECT count(*) FROM evals"), 2 * 3);
  EXPECT_EQ(count("SELECT count(*) FROM evals WHERE rank = 1"), 3);
  EXPECT_EQ(count("SELECT count(*) FROM evals WHERE val_loss IS NULL AND perplexity IS NULL"), 2)
      << "the diverged evaluation of each rank";

  const std::vector<EvalPoint> evals = loadEvals(*db_, run_);
  ASSERT_EQ(evals.size(), 3u);
  EXPECT_EQ(evals[0].step, 5);
  EXPECT_EQ(evals[1].step, 10);
  EXPECT_EQ(evals[2].step, 12);
  for (const EvalPoint& point : evals) EXPECT_EQ(point.rank, 0) << "the lowest rank's rows";
  EXPECT_DOUBLE_EQ(*evals[0].val_loss, 2.0);
  EXPECT_DOUBLE_EQ(*evals[0].perplexity, std::exp(2.0));
  EXPECT_DOUBLE_EQ(*evals[1].val_loss, 1.0);
  EXPECT_EQ(evals[1].tokens, 256);
  EXPECT_DOUBLE_EQ(evals[1].eval_ms, 1.5);
  EXPECT_FALSE(evals[2].val_loss.has_value());
  EXPECT_FALSE(evals[2].perplexity.has_value());

  const std::optional<EvalPoint> latest = latestEval(*db_, run_);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 12);
}

TEST_F(EvalsTest, ARunWithoutEvaluationsHasNone) {
  EXPECT_TRUE(loadEvals(*db_, run_).empty());
  EXPECT_FALSE(latestEval(*db_, run_).has_value());
}

TEST_F(EvalsTest, DeletingTheRunDeletesItsEvaluations) {
  {
    Recorder recorder(path_, run_, 0);
    for (const TelemetryEvent& e : evalStream(0)) recorder.submit(e);
    recorder.flush();
  }
  ASSERT_EQ(count("SELECT count(*) FROM evals"), 3);
  db_->exec("DELETE FROM runs");
  EXPECT_EQ(count("SELECT count(*) FROM evals"), 0);
}

}  // namespace
}  // namespace ringmaster::storage
