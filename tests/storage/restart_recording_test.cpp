// Issue 21, automatic restarts, as the recorder stores them: two ranks' attempt 0 (steps 1..30,
// rank 1 killed) and attempt 1 (resumed at step 21 with new values, sequence numbers from 0
// again). Each attempt gets its row (start, steps, root cause), every event is stored under its
// attempt and none is taken for a duplicate, the steps attempt 1 ran again hold its values, and the
// rollups equal rollups recomputed from the stored points, and the communication time per step
// counts attempt 1's operations alone: no step counted twice; collectives are matched within an
// attempt; custom metrics are replaced with their step. A replay of both attempts stores nothing
// and changes nothing.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "db/database.h"
#include "query/comm_stats.h"
#include "recorder/recorder.h"
#include "storage/storage_test_support.h"

namespace ringmaster::storage {
namespace {

constexpr double kAttemptOneStart = 2e9;

// One rank's events of one attempt: hello, steps first..last (loss by step and attempt), and
// either a fatal error (the killed rank) and done, or done.
std::vector<TelemetryEvent> attemptStream(int rank, int attempt, int first, int last, bool killed) {
  std::vector<TelemetryEvent> events;
  uint64_t seq = 0;
  const double start = attempt == 0 ? 1e9 : kAttemptOneStart;
  const auto add = [&](EventBody body) {
    events.push_back({.rank = rank, .seq = seq, .time = start + seq, .body = std::move(body)});
    ++seq;
  };
  add(HelloEvent{
      .world_size = 2, .host = "h", .pid = 100 * (attempt + 1) + rank, .attempt = attempt});
  for (int step = first; step <= last; ++step) {
    // Operations are numbered from 1 in each attempt; the killed rank never reported its
    // all_reduce #15, which attempt 1 numbers again.
    const int64_t seq_op = step - first + 1;
    if (!(killed && seq_op == 15)) {
      add(CommEvent{.seq_op = static_cast<uint64_t>(seq_op),
                    .op = "all_reduce",
                    .group = "world",
                    .bytes = 64,
                    .dtype = "float32",
                    .duration_ms = 1.0 + attempt,
                    .step = step,
                    .start_us = int64_t{1'000'000} * attempt + 1000 * step + 100 * rank,
                    .group_size = 2});
    }
    // Custom metrics (issue 33): train/grad_norm in both attempts, eval/acc in attempt 0 only.
    StepEvent s{.step = step, .loss = 10.0 * (attempt + 1) + 1.0 / step, .step_ms = 5.0 + attempt};
    s.metrics["train/grad_norm"] = attempt + 1.0 / step;
    if (attempt == 0) s.metrics["eval/acc"] = step / 100.0;
    add(s);
  }
  if (killed) {
    add(ErrorEvent{.message = fmt::format("rank {} (pid {}) on h killed by SIGKILL", rank, 101),
                   .kind = "worker failed",
                   .where = "agent",
                   .step = last,
                   .fatal = true,
                   .host = "h",
                   .signal = std::string("SIGKILL")});
  }
  add(DoneEvent{.status = killed ? DoneStatus::kFailed : DoneStatus::kCompleted,
                .final_step = last});
  return events;
}

std::vector<TelemetryEvent> bothAttempts() {
  std::vector<TelemetryEvent> all;
  for (int rank = 0; rank < 2; ++rank)
    for (TelemetryEvent& e : attemptStream(rank, 0, 1, 30, rank == 1)) all.push_back(std::move(e));
  for (int rank = 0; rank < 2; ++rank)
    for (TelemetryEvent& e : attemptStream(rank, 1, 21, 40, false)) all.push_back(std::move(e));
  return all;
}

class RestartRecording : public testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    path_ = (dir_ / "runs.db").string();
    db_.emplace(path_);
    run_ = createRun(*db_, {.name = "t", .spec_json = "{}", .strategy = "ddp", .world_size = 2});
  }
  void TearDown() override {
    db_.reset();
    StorageTest::TearDown();
  }
  int64_t count(const std::string& sql) { return testing::queryInt(*db_, sql); }
  std::string text(const std::string& sql) { return testing::queryText(*db_, sql); }
  // Rollup buckets that differ from the buckets recomputed from the stored points.
  int64_t wrongRollups() {
    const std::string points =
        "FROM scalar_points p WHERE p.run_id = r.run_id AND p.metric = r.metric AND p.rank = "
        "r.rank AND p.step / r.width = r.bucket";
    return count(fmt::format(
        "SELECT count(*) FROM series_rollups r WHERE "
        "r.run_id = {1} AND (r.n != (SELECT count(*) {0}) OR abs(r.sum - (SELECT total(value) "
        "{0})) > 1e-9 * (1 + abs(r.sum)) OR r.min != (SELECT min(value) {0}) OR r.max != (SELECT "
        "max(value) {0}) OR r.first_step != (SELECT min(step) {0}) OR r.last_step != (SELECT "
        "max(step) {0}) OR r.last_value != (SELECT value {0} ORDER BY step DESC LIMIT 1))",
        points, run_));
  }
  std::string path_;
  std::optional<Database> db_;
  int64_t run_ = 0;
};

TEST_F(RestartRecording, EachAttemptIsStoredAndNoStepIsCountedTwice) {
  const std::vector<TelemetryEvent> events = bothAttempts();
  {
    // Small batches: attempt 1's steps reach buckets written by earlier transactions.
    Recorder recorder(path_, run_, 0, {.batch_size = 7});
    for (const TelemetryEvent& e : events) ASSERT_TRUE(recorder.submit(e));
    recorder.flush();
    EXPECT_EQ(recorder.counts().stored, static_cast<int64_t>(events.size()));
    EXPECT_EQ(recorder.counts().duplicates, 0);
  }
  const std::string run = fmt::format("run_id = {}", run_);
  EXPECT_EQ(count("SELECT count(*) FROM attempts WHERE " + run), 2);
  EXPECT_EQ(count("SELECT started_at FROM attempts WHERE attempt = 1 AND " + run),
            static_cast<int64_t>(kAttemptOneStart));
  EXPECT_EQ(count("SELECT ended_at FROM attempts WHERE attempt = 0 AND " + run),
            static_cast<int64_t>(kAttemptOneStart));
  EXPECT_EQ(count("SELECT first_step FROM attempts WHERE attempt = 0 AND " + run), 1);
  EXPECT_EQ(count("SELECT last_step FROM attempts WHERE attempt = 0 AND " + run), 30);
  EXPECT_EQ(count("SELECT first_step FROM attempts WHERE attempt = 1 AND " + run), 21);
  EXPECT_EQ(count("SELECT last_step FROM attempts WHERE attempt = 1 AND " + run), 40);
  EXPECT_EQ(text("SELECT error FROM attempts WHERE attempt = 0 AND " + run),
            "rank 1 (pid 101) on h killed by SIGKILL");
  EXPECT_EQ(count("SELECT error_rank FROM attempts WHERE attempt = 0 AND " + run), 1);
  EXPECT_EQ(count("SELECT error IS NULL FROM attempts WHERE attempt = 1 AND " + run), 1);
  // The run's root cause is the latest attempt's: none, as attempt 1 did not fail.
  EXPECT_EQ(count(fmt::format("SELECT error IS NULL FROM runs WHERE id = {}", run_)), 1);
  // Each rank once per attempt, with that attempt's pid and status.
  EXPECT_EQ(count("SELECT pid FROM ranks WHERE attempt = 1 AND rank = 1 AND " + run), 201);
  EXPECT_EQ(text("SELECT status FROM ranks WHERE attempt = 0 AND rank = 1 AND " + run), "failed");
  EXPECT_EQ(
      count("SELECT count(*) FROM ranks WHERE status = 'completed' AND attempt = 1 AND " + run), 2);
  // The steps attempt 1 ran again hold its values; the rest attempt 0's.
  EXPECT_EQ(count("SELECT count(*) FROM steps WHERE " + run), 80);
  EXPECT_EQ(count("SELECT attempt FROM steps WHERE step = 25 AND rank = 0 AND " + run), 1);
  EXPECT_EQ(count("SELECT attempt FROM steps WHERE step = 20 AND rank = 0 AND " + run), 0);
  EXPECT_EQ(count("SELECT round(loss) FROM steps WHERE step = 21 AND rank = 1 AND " + run), 20);
  EXPECT_EQ(count("SELECT count(*) FROM logs WHERE level = 'error' AND attempt = 0 AND " + run), 1);
  // Custom metrics as the step columns (issue 33): the steps attempt 1 ran again hold its values
  // alone, so eval/acc, which attempt 1 does not report, is gone from steps 21..30.
  const auto custom = [&](const std::string& name, const std::string& where) {
    return count(
        fmt::format("SELECT count(*) FROM scalars s JOIN metrics m ON m.id = s.metric_id "
                    "WHERE m.name = '{}' AND s.run_id = {} AND {}",
                    name, run_, where));
  };
  EXPECT_EQ(custom("train/grad_norm", "1"), 80);
  EXPECT_EQ(custom("train/grad_norm", "step BETWEEN 21 AND 30 AND attempt = 1 AND value > 1"), 20);
  EXPECT_EQ(custom("eval/acc", "1"), 40);
  EXPECT_EQ(custom("eval/acc", "step > 20"), 0);
  // Every step once in the rollups.
  EXPECT_EQ(count("SELECT sum(n) FROM series_rollups "
                  "WHERE metric = 'loss' AND width = 64 AND " +
                  run),
            80);
  EXPECT_GT(count("SELECT count(*) FROM series_rollups WHERE " + run), 0);
  EXPECT_EQ(wrongRollups(), 0);
  // Communication time per step: the re-run steps count attempt 1's operations only.
  const CommTimeByOp by_op = commTimeByOp(*db_, run_, 0, 1000, 1000);
  ASSERT_EQ(by_op.bucket_width, 1);
  ASSERT_EQ(by_op.ops.size(), 1u);
  ASSERT_EQ(by_op.ops[0].buckets.size(), 40u);
  // Transfer time per rank and step: rank 0 waits 0.1 ms of each; #15 of attempt 0 is rank 0's
  // alone, unsplit.
  for (const OpTimeBucket& bucket : by_op.ops[0].buckets) {
    const double expected = bucket.start >= 21 ? 1.95 : bucket.start == 15 ? 1.0 : 0.95;
    EXPECT_NEAR(bucket.ms_per_step, expected, 1e-9) << "step " << bucket.start;
  }

  // Waiting is split within an attempt: every collective of attempt 1 has its wait (rank 0 waits
  // the 0.1 ms rank 1 arrives later), attempt 0's #15, which rank 1 never reported, has none.
  EXPECT_EQ(
      count("SELECT count(*) FROM comm_events WHERE attempt = 1 AND wait_ms IS NULL AND " + run),
      0);
  EXPECT_EQ(count("SELECT count(*) FROM comm_events WHERE attempt = 1 AND rank = 0 AND "
                  "abs(wait_ms - 0.1) > 1e-9 AND " +
                  run),
            0);
  EXPECT_EQ(
      count("SELECT count(*) FROM comm_events WHERE attempt = 0 AND wait_ms IS NULL AND " + run),
      1);

  // A replay of both attempts (attach, a restarted launcher) stores nothing and changes nothing.
  const std::string before = text(
      fmt::format("SELECT group_concat(n || ':' || sum || ':' || min || ':' || max, ',') FROM "
                  "(SELECT * FROM series_rollups WHERE {} ORDER BY metric, rank, width, bucket)",
                  run));
  {
    Recorder replay(path_, run_, 0, {.batch_size = 5});
    for (const TelemetryEvent& e : events) ASSERT_TRUE(replay.submit(e));
    replay.flush();
    EXPECT_EQ(replay.counts().stored, 0);
    EXPECT_EQ(replay.counts().duplicates, static_cast<int64_t>(events.size()));
  }
  EXPECT_EQ(text(fmt::format(
                "SELECT group_concat(n || ':' || sum || ':' || min || ':' || max, ',') FROM "
                "(SELECT * FROM series_rollups WHERE {} ORDER BY metric, rank, width, bucket)",
                run)),
            before);
  EXPECT_EQ(count("SELECT count(*) FROM attempts WHERE " + run), 2);
  EXPECT_EQ(wrongRollups(), 0);
}

}  // namespace
}  // namespace ringmaster::storage
