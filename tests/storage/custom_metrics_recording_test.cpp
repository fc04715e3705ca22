// Issue 33, custom metrics as the recorder stores them, against a real SQLite file: every name
// within the bounds is a series of `scalars` per rank with its rollups, read back by metricNames
// and loadSeries as any step field; each bound (a name too long, a character outside the set, a
// leading '/', a step field's name, the 257th name of a run, a non-finite value) refuses only its
// own points, counted in one warning per kind (per name for values), and nothing else of the step
// is lost; a recorder started again for the run keeps the run's names and its limit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "db/database.h"
#include "db/statement.h"
#include "query/runs.h"
#include "query/series.h"
#include "recorder/recorder.h"
#include "storage/storage_test_support.h"
#include "telemetry/custom_metrics.h"

namespace ringmaster::storage {
namespace {

constexpr int kRanks = 2;
constexpr int kSteps = 100;

class CustomMetricsRecording : public testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    path_ = (dir_ / "runs.db").string();
    db_.emplace(path_);
    run_ =
        createRun(*db_, {.name = "t", .spec_json = "{}", .strategy = "ddp", .world_size = kRanks});
  }
  void TearDown() override {
    db_.reset();
    StorageTest::TearDown();
  }
  int64_t count(const std::string& sql) { return testing::queryInt(*db_, sql); }
  // Points of one metric of the run, from `scalars`.
  int64_t points(const std::string& metric) {
    return count(fmt::format(
        "SELECT count(*) FROM scalars s JOIN metrics m ON m.id = s.metric_id WHERE s.run_id = {} "
        "AND m.name = '{}'",
        run_, metric));
  }
  // The run's warnings that contain `text`, each "...: N points"; their counts.
  std::vector<int64_t> warningCounts(const std::string& text) {
    std::vector<int64_t> counts;
    Statement select(*db_,
                     "SELECT message FROM logs WHERE run_id = ? AND level = 'warn' AND rank IS "
                     "NULL AND instr(message, ?) > 0 ORDER BY rowid");
    select.bind(1, run_).bind(2, text);
    while (select.run()) {
      const std::string message = select.columnText(0);
      const size_t colon = message.rfind(": ");
      counts.push_back(std::stoll(message.substr(colon + 2)));
    }
    return counts;
  }
  void record(const std::vector<TelemetryEvent>& events, int batch_size = 16) {
    Recorder recorder(path_, run_, 0, {.batch_size = static_cast<size_t>(batch_size)});
    for (const TelemetryEvent& e : events) ASSERT_TRUE(recorder.submit(e));
    recorder.flush();
    EXPECT_EQ(recorder.counts().stored, static_cast<int64_t>(events.size()));
  }
  std::string path_;
  std::optional<Database> db_;
  int64_t run_ = 0;
};

// Each rank's hello and steps 1..kSteps, each step carrying what `metrics(rank, step)` gives.
template <typename MetricsOf>
std::vector<TelemetryEvent> stream(MetricsOf metrics, uint64_t first_seq = 0, int first_step = 1,
                                   int last_step = kSteps) {
  std::vector<TelemetryEvent> events;
  for (int rank = 0; rank < kRanks; ++rank) {
    uint64_t seq = first_seq;
    if (first_seq == 0) {
      events.push_back({.rank = rank,
                        .seq = seq++,
                        .time = 1e9,
                        .body = HelloEvent{.world_size = kRanks, .host = "h", .strategy = "ddp"}});
    }
    for (int step = first_step; step <= last_step; ++step) {
      StepEvent s{.step = step, .loss = 1.0 / step, .samples = 8, .step_ms = 2};
      s.metrics = metrics(rank, step);
      events.push_back({.rank = rank, .seq = seq++, .time = 1e9 + step, .body = s});
    }
  }
  return events;
}

double gradNorm(int rank, int step) {
  return 1.0 / step + rank;
}

TEST_F(CustomMetricsRecording, EveryNameIsASeriesPerRankWithItsRollups) {
  record(stream([](int rank, int step) {
    std::map<std::string, double> m = {{"train/grad_norm", gradNorm(rank, step)},
                                       {"my_custom_thing", 7.0 * rank - step}};
    if (step % 10 == 0) m["eval/acc"] = step / 1000.0;  // every tenth step only
    return m;
  }));
  EXPECT_EQ(points("train/grad_norm"), kRanks * kSteps);
  EXPECT_EQ(points("my_custom_thing"), kRanks * kSteps);
  EXPECT_EQ(points("eval/acc"), kRanks * kSteps / 10);
  EXPECT_EQ(count("SELECT count(*) FROM logs WHERE level = 'warn'"), 0);
  const std::vector<std::string> names = metricNames(*db_, run_);
  for (const char* name : {"train/grad_norm", "my_custom_thing", "eval/acc", "loss"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;

  for (int rank = 0; rank < kRanks; ++rank) {
    // Every width's rollups count each point once.
    for (const int64_t width : kRollupWidths) {
      EXPECT_EQ(count(fmt::format("SELECT sum(n) FROM scalar_rollups r JOIN metrics m ON m.id = "
                                  "r.metric_id WHERE m.name = 'eval/acc' AND r.run_id = {} AND "
                                  "rank = {} AND width = {}",
                                  run_, rank, width)),
                kSteps / 10);
    }
    // The series reduced, as the front ends read it, against the points computed here.
    const Series series =
        loadSeries(*db_, run_, "train/grad_norm", rank, {.from_step = 1, .buckets = 4});
    ASSERT_EQ(series.buckets.size(), 4u);
    for (const SeriesBucket& bucket : series.buckets) {
      double min = std::numeric_limits<double>::infinity(), max = -min, sum = 0;
      int n = 0;
      for (int64_t step = std::max<int64_t>(bucket.start, 1);
           step <= std::min<int64_t>(series.lastStepOf(bucket.start), kSteps); ++step, ++n) {
        const double value = gradNorm(rank, static_cast<int>(step));
        min = std::min(min, value);
        max = std::max(max, value);
        sum += value;
      }
      EXPECT_EQ(bucket.summary.count, n);
      EXPECT_EQ(bucket.summary.min, min);
      EXPECT_EQ(bucket.summary.max, max);
      EXPECT_NEAR(bucket.summary.sum, sum, 1e-12 * sum);
    }
    const SeriesSummary whole = summarizeSeries(*db_, run_, "eval/acc", rank);
    EXPECT_EQ(whole.last_step, kSteps);
    EXPECT_EQ(whole.last_value, kSteps / 1000.0);
  }
}

TEST_F(CustomMetricsRecording, EachBoundRefusesOnlyItsPointsWithACountedWarning) {
  const std::string too_long(kMaxCustomMetricNameBytes + 1, 'n');
  const std::string longest(kMaxCustomMetricNameBytes, 'n');
  constexpr int kExtra = 300;  // from step 2: 253 fit the run's 256 names, 47 do not
  record(stream([&](int rank, int step) {
    std::map<std::string, double> m = {{"train/grad_norm", gradNorm(rank, step)},
                                       {"eval/acc", 0.5},
                                       {longest, 1.0},
                                       {too_long, 1.0},
                                       {"has space", 1.0},
                                       {"caf\xc3\xa9", 1.0},
                                       {"/leading", 1.0},
                                       {"loss", 99.0},
                                       {"wall_time_s", 99.0},
                                       {"", 1.0}};
    if (step % 4 == 0) m["eval/acc"] = std::numeric_limits<double>::quiet_NaN();
    if (step >= 2)
      for (int i = 0; i < kExtra; ++i) m[fmt::format("extra/{:03}", i)] = i;
    return m;
  }));
  constexpr int64_t kPoints = kRanks * kSteps;  // of a name in every step
  // What is within the bounds is all there; the step's own loss is the step's.
  EXPECT_EQ(points("train/grad_norm"), kPoints);
  EXPECT_EQ(points(longest), kPoints);
  EXPECT_EQ(points("eval/acc"), kPoints - kPoints / 4);
  EXPECT_EQ(count("SELECT count(*) FROM steps"), kPoints);
  EXPECT_EQ(count("SELECT count(*) FROM steps WHERE loss = 99 OR wall_time_s = 99"), 0);
  const int64_t accepted_extra = kMaxCustomMetricsPerRun - 3;
  EXPECT_EQ(points("extra/000"), kRanks * (kSteps - 1));
  EXPECT_EQ(points(fmt::format("extra/{:03}", accepted_extra - 1)), kRanks * (kSteps - 1));
  EXPECT_EQ(points(fmt::format("extra/{:03}", accepted_extra)), 0);
  EXPECT_EQ(
      count(fmt::format("SELECT count(DISTINCT metric_id) FROM scalars WHERE run_id = {}", run_)),
      static_cast<int64_t>(kMaxCustomMetricsPerRun));
  EXPECT_EQ(count("SELECT count(*) FROM metrics WHERE name IN ('has space', '/leading', '') OR "
                  "length(name) > 128"),
            0)
      << "a refused name is never registered";

  // One warning per kind, each with its count of refused points.
  EXPECT_EQ(warningCounts("longer than 128 bytes"), std::vector<int64_t>{kPoints});
  EXPECT_EQ(warningCounts("outside [A-Za-z0-9_./-]"), std::vector<int64_t>{2 * kPoints})
      << "'has space' and 'café'";
  EXPECT_EQ(warningCounts("starts with '/'"), std::vector<int64_t>{kPoints});
  EXPECT_EQ(warningCounts("is empty"), std::vector<int64_t>{kPoints});
  EXPECT_EQ(warningCounts("a step field's"), std::vector<int64_t>{2 * kPoints});
  EXPECT_EQ(warningCounts("past the limit of 256 names"),
            std::vector<int64_t>{(kExtra - accepted_extra) * kRanks * (kSteps - 1)});
  EXPECT_EQ(warningCounts("'eval/acc' refused, a non-finite value"),
            std::vector<int64_t>{kPoints / 4});
  EXPECT_EQ(count("SELECT count(*) FROM logs WHERE level = 'warn'"), 7);

  // A recorder started again for the run (attach) keeps its names and its limit.
  record(stream(
      [](int, int) {
        return std::map<std::string, double>{{"extra/000", 5}, {"extra/299", 5}, {"new", 5}};
      },
      kSteps + 1, kSteps + 1, kSteps + 1));
  EXPECT_EQ(points("extra/000"), kRanks * kSteps);
  EXPECT_EQ(points("extra/299"), 0);
  EXPECT_EQ(points("new"), 0);
  EXPECT_EQ(warningCounts("past the limit of 256 names").back(), 2 * kRanks);
}

}  // namespace
}  // namespace ringmaster::storage
