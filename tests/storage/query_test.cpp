// The storage queries against real databases: series reduction checked bucket by bucket against
// the points themselves (a spike survives 1M -> 1,000 buckets), the rank band, communication
// statistics with a straggler, the measured pipeline bubble, run summaries and comparison.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "db/database.h"
#include "db/statement.h"
#include "query/comm_stats.h"
#include "query/runs.h"
#include "query/schedule.h"
#include "query/series.h"
#include "query/summary.h"
#include "recorder/recorder.h"
#include "storage/storage_test_support.h"

namespace ringmaster::storage {
namespace {

class QueryTest : public testing::StorageTest {
 protected:
  std::string path() const { return (dir_ / "runs.db").string(); }
};

// The value of the test series at `step`: noise in [0, 1) and one spike.
constexpr int64_t kSpikeStep = 777'777;
double pointValue(int64_t step) {
  if (step == kSpikeStep) return 1000.0;
  return std::fmod(static_cast<double>(step) * 0.6180339887, 1.0);
}

// The summary of the points in [first, last] computed directly.
SeriesSummary bruteForce(int64_t first, int64_t last) {
  SeriesSummary summary;
  for (int64_t step = first; step <= last; ++step) summary.add(step, pointValue(step));
  return summary;
}

void expectSameSummary(const SeriesSummary& got, const SeriesSummary& want) {
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.min, want.min);
  EXPECT_EQ(got.max, want.max);
  EXPECT_EQ(got.first_step, want.first_step);
  EXPECT_EQ(got.last_step, want.last_step);
  EXPECT_EQ(got.last_value, want.last_value);
  EXPECT_NEAR(got.mean(), want.mean(), 1e-9);
}

// Checks a reduced series bucket by bucket against the points, for the range [first, last].
void expectExact(const Series& series, int64_t first, int64_t last, int buckets) {
  ASSERT_FALSE(series.buckets.empty());
  EXPECT_LE(series.buckets.size(), static_cast<size_t>(buckets));
  int64_t total = 0;
  for (const SeriesBucket& bucket : series.buckets) {
    SCOPED_TRACE(fmt::format("bucket at {}", bucket.start));
    expectSameSummary(bucket.summary,
                      bruteForce(std::max(first, bucket.start),
                                 std::min(last, bucket.start + series.bucket_width - 1)));
    total += bucket.summary.count;
  }
  EXPECT_EQ(total, last - first + 1);
}

TEST_F(QueryTest, ASpikeSurvivesAMillionPointsReducedToAThousandBuckets) {
  constexpr int64_t kPoints = 1'000'000;
  int64_t run = 0;
  {
    // Written at schema 1 with bare inserts; migration 2 then summarises the series into
    // rollups, as for a database of an older build.
    Database old(path(), {.schema_version = 1});
    old.exec(
        "INSERT INTO runs (name, spec, strategy, world_size, status, created_at) "
        "VALUES ('long', '{}', 'ddp', 1, 'completed', 1)");
    old.exec("INSERT INTO metrics (name) VALUES ('loss')");
    run = 1;
    old.transaction([&] {
      Statement insert(old, "INSERT INTO scalars VALUES (1, 1, 0, ?, ?, 0)");
      for (int64_t step = 1; step <= kPoints; ++step)
        insert.bind(1, step).bind(2, pointValue(step)).run();
    });
  }
  Database db(path());

  const Series all = loadSeries(db, run, "loss", 0, {.buckets = 1000});
  expectExact(all, 1, kPoints, 1000);
  EXPECT_GE(all.buckets.size(), 900u);
  int spikes = 0;
  for (const SeriesBucket& bucket : all.buckets) {
    if (bucket.summary.max == 1000.0) {
      ++spikes;
      EXPECT_LE(bucket.start, kSpikeStep);
      EXPECT_GT(bucket.start + all.bucket_width, kSpikeStep);
    }
  }
  EXPECT_EQ(spikes, 1);

  // Ranges whose ends cut rollup buckets, at several resolutions (rollups of 4096, 512 and 64,
  // points).
  for (auto [first, last, buckets] :
       std::vector<std::tuple<int64_t, int64_t, int>>{{12'345, 987'654, 777},
                                                      {1, 1'000'000, 1000},
                                                      {700'001, 800'000, 2000},
                                                      {777'700, 777'900, 50},
                                                      {5, 5, 10}}) {
    SCOPED_TRACE(fmt::format("[{}, {}] in {} buckets", first, last, buckets));
    expectExact(loadSeries(db, run, "loss", 0, {first, last, buckets}), first, last, buckets);
  }
  EXPECT_TRUE(loadSeries(db, run, "no such metric", 0).buckets.empty());
  EXPECT_TRUE(loadSeries(db, run, "loss", 3).buckets.empty());
  EXPECT_EQ(summarizeSeries(db, run, "loss", 0).max, 1000.0);
}

// A recorder session writing `steps` step events for each rank of `run`, values from `loss`.
void recordSteps(const std::string& path, int64_t run, int world, int64_t steps,
                 const std::function<StepEvent(int rank, int64_t step)>& make) {
  Recorder recorder(path, run, 0, {.batch_size = 100});
  for (int rank = 0; rank < world; ++rank) {
    uint64_t seq = 0;
    for (int64_t step = 1; step <= steps; ++step) {
      recorder.submit({.rank = rank, .seq = seq++, .time = 1e9 + step, .body = make(rank, step)});
    }
  }
  recorder.flush();
  ASSERT_EQ(recorder.failure(), "");
}

TEST_F(QueryTest, TheRankBandCarriesTheLowestMinTheMedianMeanAndTheHighestMax) {
  Database db(path());
  const int64_t run =
      createRun(db, {.name = "band", .spec_json = "{}", .strategy = "ddp", .world_size = 4});
  // Rank r's loss is r + 1 everywhere, except rank 3's spike at step 500.
  recordSteps(path(), run, 4, 1000, [](int rank, int64_t step) {
    return StepEvent{.step = step, .loss = step == 500 && rank == 3 ? 99.0 : rank + 1.0};
  });
  const Band band = loadRankBand(db, run, "loss", {.buckets = 10});
  ASSERT_FALSE(band.buckets.empty());
  EXPECT_LE(band.buckets.size(), 10u);
  bool spike = false;
  for (const BandBucket& bucket : band.buckets) {
    EXPECT_EQ(bucket.ranks, 4);
    EXPECT_EQ(bucket.min, 1.0);
    spike = spike || bucket.max == 99.0;
    if (bucket.max != 99.0) {
      EXPECT_EQ(bucket.max, 4.0);
      EXPECT_EQ(bucket.median, 2.5);  // the ranks' means 1, 2, 3, 4
    }
  }
  EXPECT_TRUE(spike);
}

TEST_F(QueryTest, CommunicationStatisticsPerOpAndSizeAndAStragglerRank) {
  Database db(path());
  const int64_t run =
      createRun(db, {.name = "comm", .spec_json = "{}", .strategy = "ddp", .world_size = 4});
  {
    Recorder recorder(path(), run, 0);
    for (int rank = 0; rank < 4; ++rank) {
      uint64_t seq = 0;
      // Durations 1..100 ms on every rank, one op a second: they do not overlap, so a rank's time
      // in them is their sum (issue 32: overlapping ones count the union).
      for (int i = 1; i <= 100; ++i) {
        recorder.submit({.rank = rank,
                         .seq = seq,
                         .time = 1e9 + static_cast<double>(seq++),
                         .body = CommEvent{.op = "all_reduce",
                                           .group = "world",
                                           .bytes = 1 << 20,
                                           .dtype = "float32",
                                           .duration_ms = static_cast<double>(i),
                                           .algbw_gbps = 1.0 * i,
                                           .busbw_gbps = 1.5 * i,
                                           .wait_ms = rank == 2 ? 0.0 : 0.5 * i}});
      }
      recorder.submit({.rank = rank,
                       .seq = seq,
                       .time = 1e9 + static_cast<double>(seq++),
                       .body = CommEvent{.op = "broadcast",
                                         .group = "world",
                                         .bytes = 64,
                                         .dtype = "float32",
                                         .duration_ms = 2}});
      for (int64_t step = 1; step <= 10; ++step) {
        // Rank 2 computes twice as long as the others.
        const double compute = rank == 2 ? 20 : 10;
        recorder.submit({.rank = rank,
                         .seq = seq++,
                         .time = 1e9,
                         .body = StepEvent{.step = step,
                                           .step_ms = 22,
                                           .compute_ms = compute,
                                           .exposed_comm_ms = 22 - compute}});
      }
    }
  }
  const std::vector<CommOpStats> ops = commStatsByOp(db, run);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].op, "all_reduce");
  EXPECT_EQ(ops[0].bytes, 1 << 20);
  EXPECT_EQ(ops[0].count, 400);
  // Transfer times: duration less wait, i / 2 on ranks 0, 1, 3 and i on rank 2 (which waited 0).
  EXPECT_EQ(ops[0].total_ms, 3 * 5050 / 2.0 + 5050);
  ASSERT_TRUE(ops[0].wait_ms.has_value());
  EXPECT_EQ(*ops[0].wait_ms, 3 * 2525);
  EXPECT_EQ(ops[0].p50_ms, 29);  // nearest rank of 0.5, 1, ..., 50 three times and 1..100 once
  EXPECT_EQ(ops[0].p99_ms, 97);
  EXPECT_EQ(ops[0].algbw_gbps, 51);
  EXPECT_EQ(ops[0].busbw_gbps, 1.5 * 51);
  EXPECT_EQ(ops[1].op, "broadcast");
  EXPECT_EQ(ops[1].count, 4);
  EXPECT_EQ(ops[1].p99_ms, 2);
  EXPECT_FALSE(ops[1].wait_ms.has_value());

  const std::vector<RankCommStats> ranks = commStatsByRank(db, run);
  ASSERT_EQ(ranks.size(), 4u);
  for (const RankCommStats& rank : ranks) {
    SCOPED_TRACE(rank.rank);
    EXPECT_EQ(rank.operations, 101);
    EXPECT_EQ(rank.comm_ms, 5050 + 2);
    ASSERT_TRUE(rank.wait_ms.has_value());
    EXPECT_EQ(*rank.wait_ms, rank.rank == 2 ? 0 : 2525);
    EXPECT_EQ(*rank.transfer_ms, rank.comm_ms - *rank.wait_ms);
    EXPECT_EQ(rank.mean_step_ms, 22);
    EXPECT_EQ(rank.straggler, rank.rank == 2);
  }
}

// Issue 21, waiting versus transfer: the recorder splits each collective from its members'
// starts once all of them are stored, keeps a collective some member never reported unsplit and a
// point-to-point wait as measured, takes up a collective left incomplete by an earlier recorder
// of the attempt; the rank the others wait for is the straggler when its compute is slower too,
// and no rank is when the computes are even (the waits alone are a loaded host's skew).
// One rank's all_reduce `seq_op` of a 3-rank group: started at `start_us`, lasting `duration_ms`.
void submitAllReduce(Recorder& recorder, uint64_t (&seq)[3], int rank, uint64_t seq_op,
                     int64_t start_us, double duration_ms) {
  // Stamped with its end, as workers do: a rank's collectives do not overlap.
  recorder.submit({.rank = rank,
                   .seq = seq[rank]++,
                   .time = static_cast<double>(start_us) / 1e6 + duration_ms / 1e3,
                   .body = CommEvent{.seq_op = seq_op,
                                     .op = "all_reduce",
                                     .group = "world",
                                     .bytes = 4096,
                                     .dtype = "float32",
                                     .duration_ms = duration_ms,
                                     .step = 1,
                                     .start_us = start_us,
                                     .end_us = start_us + static_cast<int64_t>(duration_ms * 1e3),
                                     .group_size = 3}});
}

constexpr int64_t kCollectivesBase = 1'700'000'000'000'000;

// Collectives 1-22 and a receive, stored by the run's first recorder: rank 1 arrives late at
// 1-20, never reports 21, and reports 22 only to the next recorder.
void recordFirstCollectives(const std::string& path, int64_t run, uint64_t (&seq)[3]) {
  Recorder recorder(path, run, 0);
  // 1..20: rank 1 arrives 30 ms after rank 0 and rank 2 2 ms after; all end together.
  for (uint64_t op = 1; op <= 20; ++op) {
    const int64_t base = kCollectivesBase + static_cast<int64_t>(op) * 100'000;
    for (int rank : {2, 0, 1}) {  // stored in any order
      const int64_t late_us = rank == 1 ? 30'000 : rank == 2 ? 2'000 : 0;
      submitAllReduce(recorder, seq, rank, op, base + late_us, (32'000 - late_us) / 1e3);
    }
  }
  // 21: rank 1 never reports it (it died): no split.
  submitAllReduce(recorder, seq, 0, 21, kCollectivesBase + 2'100'000, 5);
  submitAllReduce(recorder, seq, 2, 21, kCollectivesBase + 2'100'000, 5);
  // 22: rank 0's row is stored by this recorder, the others' by the next one.
  submitAllReduce(recorder, seq, 0, 22, kCollectivesBase + 2'200'000, 2);
  // A receive's wait, measured by the backend, stays as it is.
  recorder.submit({.rank = 2,
                   .seq = seq[2]++,
                   .time = 1e9,
                   .body = CommEvent{.seq_op = 1,
                                     .op = "recv",
                                     .group = "world",
                                     .bytes = 64,
                                     .dtype = "float32",
                                     .duration_ms = 7,
                                     .wait_ms = 5}});
}

// The rest, by a second recorder: 22's other ranks, 23, and a step per rank that computed
// `compute` ms.
void recordLaterCollectives(const std::string& path, int64_t run, uint64_t (&seq)[3],
                            std::array<double, 3> compute) {
  Recorder recorder(path, run, 0);
  submitAllReduce(recorder, seq, 1, 22, kCollectivesBase + 2'200'000, 2);
  submitAllReduce(recorder, seq, 2, 22, kCollectivesBase + 2'200'000, 2);
  // 23: rank 0 started 5 ms before the others but its op lasted 1 ms (a clock off by more than
  // that): its wait is its whole duration, never more.
  submitAllReduce(recorder, seq, 0, 23, kCollectivesBase + 2'300'000, 1);
  submitAllReduce(recorder, seq, 1, 23, kCollectivesBase + 2'305'000, 1);
  submitAllReduce(recorder, seq, 2, 23, kCollectivesBase + 2'305'000, 1);
  for (int rank = 0; rank < 3; ++rank) {
    recorder.submit({.rank = rank,
                     .seq = seq[rank]++,
                     .time = 1e9,
                     .body = StepEvent{.step = 1,
                                       .step_ms = 50,
                                       .compute_ms = compute[static_cast<size_t>(rank)],
                                       .exposed_comm_ms = 5}});
  }
}

// A run of these collectives whose ranks computed `compute` ms per step; its id.
int64_t recordCollectiveWaits(Database& db, const std::string& path,
                              std::array<double, 3> compute) {
  const int64_t run =
      createRun(db, {.name = "wait", .spec_json = "{}", .strategy = "ddp", .world_size = 3});
  uint64_t seq[3] = {0, 0, 0};
  recordFirstCollectives(path, run, seq);
  recordLaterCollectives(path, run, seq, compute);
  return run;
}

// The wait stored for `rank`'s collective `seq_op`; nullopt when none was split off.
std::optional<double> storedWaitMs(Database& db, int64_t run, int rank, int seq_op,
                                   const char* op = "all_reduce") {
  Statement select(db,
                   "SELECT wait_ms FROM comm_events WHERE run_id = ? AND rank = ? AND "
                   "seq_op = ? AND op = ?");
  select.bind(1, run).bind(2, int64_t{rank}).bind(3, int64_t{seq_op}).bind(4, op);
  EXPECT_TRUE(select.run()) << rank << " " << seq_op;
  return select.isNull(0) ? std::nullopt : std::optional(select.columnDouble(0));
}

TEST_F(QueryTest, ACollectivesWaitIsSplitFromItsMembersStartsAndNamesTheStraggler) {
  Database db(path());
  const auto record = [&](std::array<double, 3> compute) {
    return recordCollectiveWaits(db, path(), compute);
  };
  // Rank 1 computes 4 times as long as the others, and they wait for it.
  const int64_t run = record({10, 40, 10});
  auto wait = [&](int rank, int seq_op, const char* op = "all_reduce") {
    return storedWaitMs(db, run, rank, seq_op, op);
  };
  for (int op = 1; op <= 20; ++op) {
    SCOPED_TRACE(op);
    EXPECT_EQ(wait(0, op), 30.0);
    EXPECT_EQ(wait(1, op), 0.0);
    EXPECT_EQ(wait(2, op), 28.0);
  }
  EXPECT_EQ(wait(0, 21), std::nullopt);
  EXPECT_EQ(wait(2, 21), std::nullopt);
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(wait(rank, 22), 0.0);
  EXPECT_EQ(wait(0, 23), 1.0);
  EXPECT_EQ(wait(1, 23), 0.0);
  EXPECT_EQ(wait(2, 23), 0.0);
  EXPECT_EQ(wait(2, 1, "recv"), 5.0);
  EXPECT_EQ(testing::queryInt(db, "SELECT count(*) FROM comm_events WHERE group_size = 3"),
            3 * 22 + 2);

  const std::vector<RankCommStats> ranks = commStatsByRank(db, run);
  ASSERT_EQ(ranks.size(), 3u);
  // Rank 0: 20 x 30 ms + 1 ms waited of 20 x 32 + 5 + 2 + 1 ms in collectives.
  EXPECT_EQ(ranks[0].wait_ms, 601.0);
  EXPECT_EQ(ranks[0].transfer_ms, 648.0 - 601.0);
  EXPECT_EQ(ranks[0].collectives_measured, 22);
  EXPECT_EQ(ranks[1].wait_ms, 0.0);
  EXPECT_EQ(ranks[2].wait_ms, 560.0 + 5.0);  // the receive's included
  EXPECT_EQ(ranks[2].collectives_measured, 22);
  ASSERT_TRUE(ranks[1].mean_wait_ms && ranks[1].peers_mean_wait_ms);
  EXPECT_EQ(*ranks[1].mean_wait_ms, 0.0);
  EXPECT_DOUBLE_EQ(*ranks[1].peers_mean_wait_ms, (601.0 / 22 + 560.0 / 22) / 2);
  for (const RankCommStats& rank : ranks) EXPECT_EQ(rank.straggler, rank.rank == 1) << rank.rank;

  // The same waits with every rank computing as long: the skew of a loaded host, no straggler.
  const std::vector<RankCommStats> even = commStatsByRank(db, record({10, 10, 10}));
  ASSERT_TRUE(even[1].peers_mean_wait_ms.has_value());
  EXPECT_EQ(*even[1].peers_mean_wait_ms, *ranks[1].peers_mean_wait_ms);
  for (const RankCommStats& rank : even) EXPECT_FALSE(rank.straggler) << rank.rank;
}

TEST_F(QueryTest, TheMeasuredBubbleIsEachRanksIdleShareOfTheStep) {
  Database db(path());
  const int64_t run =
      createRun(db, {.name = "pipe", .spec_json = "{}", .strategy = "pipeline", .world_size = 2});
  {
    Recorder recorder(path(), run, 0);
    uint64_t seq[2] = {0, 0};
    auto action = [&](int rank, int64_t step, int micro, SchedPhase phase, int64_t start,
                      int64_t end) {
      recorder.submit({.rank = rank,
                       .seq = seq[rank]++,
                       .time = 1e9,
                       .body = SchedEvent{.step = step,
                                          .stage = rank,
                                          .micro_batch = micro,
                                          .phase = phase,
                                          .start_us = start,
                                          .end_us = end}});
    };
    // Step 1, two stages, one micro-batch: F0 F1 B1 B0, each 10 us, span 40 us: every rank is
    // busy 20 of 40 us.
    action(0, 1, 0, SchedPhase::kForward, 0, 10);
    action(1, 1, 0, SchedPhase::kForward, 10, 20);
    action(1, 1, 0, SchedPhase::kBackward, 20, 30);
    action(0, 1, 0, SchedPhase::kBackward, 30, 40);
    // Step 2: rank 1 busy the whole 100 us, rank 0 for 25 us.
    action(0, 2, 0, SchedPhase::kForward, 1000, 1025);
    action(1, 2, 0, SchedPhase::kForward, 1000, 1100);
  }
  EXPECT_EQ(scheduledSteps(db, run), (std::vector<int64_t>{1, 2}));
  const std::optional<StepSchedule> first = loadStepSchedule(db, run, 1);
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->actions.size(), 4u);
  EXPECT_EQ(first->actions[2].phase, 'B');
  EXPECT_EQ(first->actions[2].rank, 1);
  EXPECT_EQ(first->end_us - first->start_us, 40);
  ASSERT_EQ(first->ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(first->ranks[0].bubble_fraction, 0.5);
  EXPECT_DOUBLE_EQ(first->bubble_fraction, 0.5);
  const std::optional<StepSchedule> second = loadStepSchedule(db, run, 2);
  ASSERT_TRUE(second.has_value());
  EXPECT_DOUBLE_EQ(second->ranks[0].bubble_fraction, 0.75);
  EXPECT_DOUBLE_EQ(second->ranks[1].bubble_fraction, 0.0);
  // The mean leaves out the first step (warm-up) when there are others.
  EXPECT_DOUBLE_EQ(*meanBubbleFraction(db, run), 0.375);
  EXPECT_FALSE(loadStepSchedule(db, run, 3).has_value());
}

TEST_F(QueryTest, AnActionsWaitForItsInputIsBubbleNotCompute) {
  Database db(path());
  const int64_t run =
      createRun(db, {.name = "pipe", .spec_json = "{}", .strategy = "pipeline", .world_size = 2});
  {
    Recorder recorder(path(), run, 0);
    uint64_t seq[2] = {0, 0};
    auto action = [&](int rank, SchedPhase phase, int64_t start, int64_t ready, int64_t end,
                      int64_t transfer = 0) {
      recorder.submit({.rank = rank,
                       .seq = seq[rank]++,
                       .time = 1e9,
                       .body = SchedEvent{.step = 1,
                                          .stage = rank,
                                          .micro_batch = 0,
                                          .phase = phase,
                                          .start_us = start,
                                          .end_us = end,
                                          .ready_us = ready,
                                          .transfer_us = transfer}});
    };
    // Rank 1 reaches its F at 0 while rank 0 computes F0 from 5 to 15: it waits until 15. Then
    // rank 1 computes F and B (15..35) while rank 0 waits for B's gradient from 16 to 35, the
    // last 4 us of it the gradient's transfer.
    action(0, SchedPhase::kForward, 5, 5, 15);
    action(1, SchedPhase::kForward, 0, 15, 25);
    action(1, SchedPhase::kBackward, 25, 25, 35);
    action(0, SchedPhase::kBackward, 16, 35, 45, 4);
  }
  const std::optional<StepSchedule> step = loadStepSchedule(db, run, 1);
  ASSERT_TRUE(step.has_value());
  // The span starts at the first compute (5), not at rank 1's arrival (0).
  EXPECT_EQ(step->start_us, 5);
  EXPECT_EQ(step->end_us, 45);
  ASSERT_EQ(step->ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(step->ranks[0].busy_us, 20);
  EXPECT_DOUBLE_EQ(step->ranks[0].transfer_us, 4);
  EXPECT_DOUBLE_EQ(step->ranks[0].wait_us, 15);
  // Idle and waiting, 40 us - 20 computing - 4 transferring (counted as communication instead).
  EXPECT_DOUBLE_EQ(step->ranks[0].bubble_fraction, 16.0 / 40);
  EXPECT_DOUBLE_EQ(step->ranks[1].busy_us, 20);
  EXPECT_DOUBLE_EQ(step->ranks[1].wait_us, 10);  // from the span's start, 5, to 15
  EXPECT_DOUBLE_EQ(step->ranks[1].bubble_fraction, 0.5);
  EXPECT_EQ(step->actions[0].rank, 1);  // by arrival
  EXPECT_EQ(step->actions[0].waitUs(), 15);
  EXPECT_EQ(step->actions[0].computeUs(), 10);
}

TEST_F(QueryTest, TheFinalLossIsTheGlobalBatchsLossWeightedBySamples) {
  Database db(path());
  const int64_t run =
      createRun(db, {.name = "ddp", .spec_json = "{}", .strategy = "ddp", .world_size = 3});
  recordSteps(path(), run, 3, 4, [](int rank, int64_t step) {
    // Rank 2 holds the uneven remainder of the batch: 8 samples against 16.
    return StepEvent{.step = step,
                     .loss = step == 4 ? 1.0 + rank : 9.0,
                     .samples = rank == 2 ? 8 : 16,
                     .step_ms = 1};
  });
  const std::optional<FinalLoss> loss = finalLoss(db, run, 3);
  ASSERT_TRUE(loss.has_value());
  EXPECT_EQ(loss->step, 4);
  EXPECT_DOUBLE_EQ(loss->loss, (1.0 * 16 + 2.0 * 16 + 3.0 * 8) / 40);
  EXPECT_DOUBLE_EQ(*summarizeRun(db, run).final_loss, loss->loss);
  EXPECT_FALSE(
      finalLoss(
          db,
          createRun(db, {.name = "empty", .spec_json = "{}", .strategy = "ddp", .world_size = 2}),
          2)
          .has_value());
}

TEST_F(QueryTest, RunsAreSummarisedAndComparedWithTheirSpecDifferences) {
  Database db(path());
  const int64_t fast =
      createRun(db, {.name = "fast",
                     .spec_json = R"({"strategy":{"kind":"ddp"},"train":{"steps":100,)"
                                  R"("batch_size":64},"model":{"layers":[4,8,2]}})",
                     .strategy = "ddp",
                     .world_size = 2});
  const int64_t slow =
      createRun(db, {.name = "slow",
                     .spec_json = R"({"strategy":{"kind":"ddp"},"train":{"steps":100,)"
                                  R"("batch_size":32},"model":{"layers":[4,16,2]}})",
                     .strategy = "ddp",
                     .world_size = 2});
  // fast: 32 samples per rank in 10 ms -> 6400 samples/s for the job; slow: half that.
  for (const auto& run_and_step : {std::pair{fast, 10.0}, std::pair{slow, 20.0}}) {
    const double step_ms = run_and_step.second;  // a variable: clang 14 cannot capture a binding
    recordSteps(path(), run_and_step.first, 2, 100, [step_ms](int rank, int64_t step) {
      return StepEvent{.step = step,
                       .loss = 1.0 / static_cast<double>(step) + rank * 0.01,
                       .samples = 32,
                       .step_ms = step_ms,
                       .compute_ms = step_ms * 0.75,
                       .exposed_comm_ms = step_ms * 0.25,
                       .mem_peak = static_cast<uint64_t>(1000 * (rank + 1) + step)};
    });
  }
  finishRun(db, fast, "completed");

  const RunSummary summary = summarizeRun(db, fast);
  EXPECT_EQ(summary.run.name, "fast");
  EXPECT_EQ(summary.run.status, "completed");
  EXPECT_EQ(summary.final_step, 100);
  EXPECT_NEAR(*summary.final_loss, 0.01 + 0.005, 1e-12);
  EXPECT_NEAR(summary.samples_per_second, 6400, 1e-6);
  EXPECT_NEAR(summary.comm_share, 0.25, 1e-12);
  ASSERT_EQ(summary.ranks.size(), 2u);
  EXPECT_EQ(summary.ranks[0].peak_memory, 1100);
  EXPECT_EQ(summary.ranks[1].peak_memory, 2100);
  EXPECT_EQ(summary.ranks[1].last_step, 100);
  EXPECT_NEAR(summary.ranks[1].samples_per_second, 3200, 1e-6);
  EXPECT_EQ(summary.ranks[1].mean_step_ms, 10);
  EXPECT_FALSE(summary.bubble_fraction.has_value());

  const RunComparison comparison = compareRuns(db, {fast, slow});
  ASSERT_EQ(comparison.runs.size(), 2u);
  EXPECT_NEAR(comparison.runs[1].samples_per_second, 3200, 1e-6);
  ASSERT_EQ(comparison.differences.size(), 2u);
  EXPECT_EQ(comparison.differences[0].path, "model.layers");
  EXPECT_EQ(comparison.differences[0].values, (std::vector<std::string>{"[4,8,2]", "[4,16,2]"}));
  EXPECT_EQ(comparison.differences[1].path, "train.batch_size");
  EXPECT_EQ(comparison.differences[1].values, (std::vector<std::string>{"64", "32"}));
  EXPECT_TRUE(specDifferences({R"({"a":1})", R"({"a":1})"}).empty());
  EXPECT_THROW(specDifferences({"{", "{}"}), Error);

  const std::vector<RunRecord> listed = listRuns(db);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].name, "slow");  // newest first
  EXPECT_EQ(listRuns(db, {.status = "completed"}).size(), 1u);
  EXPECT_EQ(listRuns(db, {.name_contains = "ow"}).size(), 1u);
  EXPECT_THROW(loadRun(db, 42), Error);
  EXPECT_EQ(metricNames(db, fast).size(), 12u);  // 11 per step and the wall time
  // Issue 20: metricNames seeks one metric at a time; the slow reference reads the run's widest
  // rollups. Same names, same order, for each run and for a run without any.
  for (const int64_t run : {fast, slow, int64_t{42}}) {
    Statement reference(
        db,
        "SELECT DISTINCT metric FROM series_rollups WHERE run_id = ? AND width = 4096 "
        "ORDER BY metric");
    reference.bind(1, run);
    std::vector<std::string> expected;
    while (reference.run()) expected.push_back(reference.columnText(0));
    EXPECT_EQ(metricNames(db, run), expected) << "run " << run;
  }
  EXPECT_EQ(loadIngestCounts(db, fast).stored, 200);
}

// Throughput in tokens and MFU: over the steps that report them; absent for runs without.
TEST_F(QueryTest, SummaryHasTokensPerSecondMfuAndTheLastLearningRate) {
  Database db(path());
  const int64_t run =
      createRun(db, {.name = "gpt", .spec_json = "{}", .strategy = "ddp", .world_size = 2});
  // 8 samples of 64 tokens per rank in 16 ms: 32000 tokens/s per rank, 64000 for the job; only
  // rank 0 knows its peak (MFU 0.25 then 0.75: mean 0.5); the lr decays by step.
  recordSteps(path(), run, 2, 10, [](int rank, int64_t step) {
    return StepEvent{.step = step,
                     .loss = 2.0,
                     .lr = 1e-3 / static_cast<double>(step),
                     .samples = 8,
                     .step_ms = 16,
                     .compute_ms = 16,
                     .tokens = 8 * 64,
                     .tokens_per_s = 32000,
                     .mfu = rank == 0 ? std::optional(step <= 5 ? 0.25 : 0.75) : std::nullopt};
  });
  const RunSummary summary = summarizeRun(db, run);
  ASSERT_TRUE(summary.tokens_per_second && summary.mfu && summary.lr);
  EXPECT_NEAR(*summary.tokens_per_second, 64000, 1e-6);
  EXPECT_NEAR(*summary.mfu, 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(*summary.lr, 1e-4);
  EXPECT_NEAR(*summary.ranks[1].tokens_per_second, 32000, 1e-6);
  EXPECT_FALSE(summary.ranks[1].mfu);
  EXPECT_NEAR(*summary.ranks[0].mfu, 0.5, 1e-12);

  const int64_t old =
      createRun(db, {.name = "old", .spec_json = "{}", .strategy = "single", .world_size = 1});
  recordSteps(path(), old, 1, 3, [](int, int64_t step) {
    return StepEvent{.step = step, .loss = 1, .samples = 8, .step_ms = 4, .compute_ms = 4};
  });
  const RunSummary before = summarizeRun(db, old);
  EXPECT_FALSE(before.tokens_per_second);
  EXPECT_FALSE(before.mfu);
  EXPECT_FALSE(before.ranks[0].tokens_per_second);
}

TEST_F(QueryTest, CommunicationTimeByOpPerStepInBuckets) {
  Database db(path());
  const int64_t run =
      createRun(db, {.name = "ops", .spec_json = "{}", .strategy = "ddp", .world_size = 2});
  {
    Recorder recorder(path(), run, 0);
    for (int rank = 0; rank < 2; ++rank) {
      uint64_t seq = 0;
      for (int64_t step = 1; step <= 100; ++step) {
        // Every step: an all_reduce of 2 ms on rank 0 and 4 ms on rank 1; a broadcast on step 1.
        recorder.submit({.rank = rank,
                         .seq = seq++,
                         .time = 1e9,
                         .body = CommEvent{.op = "all_reduce",
                                           .group = "world",
                                           .bytes = 64,
                                           .dtype = "float32",
                                           .duration_ms = 2.0 + 2 * rank,
                                           .step = step}});
        if (step == 1)
          recorder.submit({.rank = rank,
                           .seq = seq++,
                           .time = 1e9,
                           .body = CommEvent{.op = "broadcast",
                                             .group = "world",
                                             .bytes = 64,
                                             .dtype = "float32",
                                             .duration_ms = 50,
                                             .step = step}});
      }
    }
  }
  const CommTimeByOp all = commTimeByOp(db, run, 0, 1000, 10);
  EXPECT_EQ(all.bucket_width, 10);
  ASSERT_EQ(all.ops.size(), 2u);
  EXPECT_EQ(all.ops[0].op, "all_reduce");
  ASSERT_EQ(all.ops[0].buckets.size(), 10u);
  for (const auto& bucket : all.ops[0].buckets) EXPECT_DOUBLE_EQ(bucket.ms_per_step, 3.0);
  EXPECT_EQ(all.ops[0].buckets[3].start, 31);
  EXPECT_EQ(all.ops[1].op, "broadcast");
  ASSERT_EQ(all.ops[1].buckets.size(), 1u);
  EXPECT_DOUBLE_EQ(all.ops[1].buckets[0].ms_per_step, 100.0 / 20);  // 2 ranks x 10 steps
  const CommTimeByOp one = commTimeByOp(db, run, 41, 60, 1000, 1);
  EXPECT_EQ(one.bucket_width, 1);
  ASSERT_EQ(one.ops.size(), 1u);
  ASSERT_EQ(one.ops[0].buckets.size(), 20u);
  EXPECT_DOUBLE_EQ(one.ops[0].buckets[0].ms_per_step, 4.0);
  EXPECT_TRUE(commTimeByOp(db, run, 500, 600, 10).ops.empty());
}

// Issue 32, point 8: a rank's operations overlap in time (a pipeline stage posts several receives
// at once, each waiting for its sender; DDP's bucket all-reduces run together). Its wait and its
// communication time are the union of their intervals, as is its time per step in one op; the
// per-op table sums over operations, overlapping ones counted each.
TEST_F(QueryTest, OverlappingOperationsOfARankCountTheTimeTheyCoverOnce) {
  Database db(path());
  const int64_t run =
      createRun(db, {.name = "overlap", .spec_json = "{}", .strategy = "ddp", .world_size = 2});
  constexpr double kOrigin = 1.7e9;  // seconds, as workers stamp events
  uint64_t seq[2] = {0, 0};
  // An op of `rank` that began `start_ms` after the origin, stamped with its end as workers do.
  const auto op = [&](Recorder& recorder, int rank, const char* name, double start_ms,
                      double duration_ms, std::optional<double> wait_ms) {
    recorder.submit({.rank = rank,
                     .seq = seq[rank]++,
                     .time = kOrigin + (start_ms + duration_ms) / 1e3,
                     .body = CommEvent{.op = name,
                                       .group = "world",
                                       .bytes = 4096,
                                       .dtype = "float32",
                                       .duration_ms = duration_ms,
                                       .wait_ms = wait_ms,
                                       .step = 1}});
  };
  {
    Recorder recorder(path(), run, 0);
    // Rank 0: three receives posted together: [0, 10] waiting [0, 8], [1, 13] waiting [1, 12],
    // [2, 6] waiting [2, 5] (inside both); then a send [20, 22] and a receive [30, 35] that
    // waited [30, 31]. Covered: [0, 13] + [20, 22] + [30, 35] = 20 ms, waiting [0, 12] + [30, 31]
    // = 13 ms (summed: 33 and 23).
    op(recorder, 0, "recv", 0, 10, 8);
    op(recorder, 0, "recv", 1, 12, 11);
    op(recorder, 0, "recv", 2, 4, 3);
    op(recorder, 0, "send", 20, 2, std::nullopt);
    op(recorder, 0, "recv", 30, 5, 1);
    // Rank 1: two bucket all-reduces that overlap, [0, 10] and [5, 12], no wait measured.
    op(recorder, 1, "all_reduce", 0, 10, std::nullopt);
    op(recorder, 1, "all_reduce", 5, 7, std::nullopt);
  }
  constexpr double kClockMs = 1e-3;  // the stamps' rounding at 1.7e9 s is about 2.4e-4 ms
  const std::vector<RankCommStats> ranks = commStatsByRank(db, run);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].operations, 5);
  EXPECT_NEAR(ranks[0].comm_ms, 20, kClockMs);
  ASSERT_TRUE(ranks[0].wait_ms && ranks[0].transfer_ms);
  EXPECT_NEAR(*ranks[0].wait_ms, 13, kClockMs);
  EXPECT_NEAR(*ranks[0].transfer_ms, 7, kClockMs);
  EXPECT_NEAR(ranks[1].comm_ms, 12, kClockMs);
  EXPECT_FALSE(ranks[1].wait_ms);

  // Per op, over every operation: the receives' waits summed, 8 + 11 + 3 + 1.
  const std::vector<CommOpStats> ops = commStatsByOp(db, run);
  const auto recv =
      std::find_if(ops.begin(), ops.end(), [](const CommOpStats& s) { return s.op == "recv"; });
  ASSERT_NE(recv, ops.end());
  EXPECT_EQ(recv->count, 4);
  EXPECT_EQ(recv->wait_ms, 23.0);
  EXPECT_EQ(recv->total_ms, 2.0 + 1 + 1 + 4);

  // Time per step in an op: rank 1's all-reduces cover 12 ms of its step 1 (summed: 17); rank
  // 0's receive transfers [8, 10], [12, 13], [5, 6] and [31, 35] are disjoint: 8 ms.
  const CommTimeByOp by_op = commTimeByOp(db, run, 1, 1, 1);
  ASSERT_EQ(by_op.ops.size(), 3u);
  EXPECT_EQ(by_op.ops[0].op, "all_reduce");
  ASSERT_EQ(by_op.ops[0].buckets.size(), 1u);
  EXPECT_NEAR(by_op.ops[0].buckets[0].ms_per_step, 12.0 / 2, kClockMs);  // over 2 rank-steps
  const CommTimeByOp rank1 = commTimeByOp(db, run, 1, 1, 1, 1);
  ASSERT_EQ(rank1.ops.size(), 1u);
  EXPECT_NEAR(rank1.ops[0].buckets[0].ms_per_step, 12, kClockMs);
  const CommTimeByOp rank0 = commTimeByOp(db, run, 1, 1, 1, 0);
  ASSERT_EQ(rank0.ops.size(), 2u);
  EXPECT_EQ(rank0.ops[0].op, "recv");
  EXPECT_NEAR(rank0.ops[0].buckets[0].ms_per_step, 8, kClockMs);
}

}  // namespace
}  // namespace ringmaster::storage
