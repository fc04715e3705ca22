// The live hang view's storage (issue 21): progress events through the recorder into
// rank_progress, one row per (rank, group) kept at its latest, and the diagnosis query naming the
// rank that has not reached the collective the others wait in, the silent ranks, a stalled
// transfer, a point-to-point wait, and nothing for a healthy or an ended run.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "db/database.h"
#include "query/hang.h"
#include "recorder/recorder.h"
#include "recorder/run_lifecycle.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster::storage {
namespace {

constexpr double kT0 = 1.7e9;  // the reports' clock

class HangQueryTest : public testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    path_ = (dir_ / "runs.db").string();
    db_.emplace(path_);
    run_ = createRun(*db_, {.name = "hang", .spec_json = "{}", .strategy = "ddp", .world_size = 4});
  }
  void TearDown() override {
    db_.reset();
    StorageTest::TearDown();
  }

  // Stores each event of `events` through a recorder, as a run would.
  void record(const std::vector<TelemetryEvent>& events) {
    Recorder recorder(path_, run_, 0);
    for (const TelemetryEvent& e : events) EXPECT_TRUE(recorder.submitLine(encodeEvent(e)));
    recorder.flush();
  }

  std::string path_;
  std::optional<Database> db_;
  int64_t run_ = 0;
};

// A progress report of `rank` at time `t`: started and completed up to `started`, waiting in
// all_reduce #`waiting_in` for `waiting_ms` when given.
TelemetryEvent report(int rank, uint64_t seq, double t, uint64_t started,
                      std::optional<int64_t> waiting_in = {}, double waiting_ms = 0) {
  ProgressEvent p;
  p.group = "world";
  p.period_s = 2;
  p.step = 14;
  p.started = started;
  p.completed = waiting_in ? started - 1 : started;
  p.completed_op = "all_reduce";
  if (waiting_in) {
    p.op = "all_reduce";
    p.op_seq = *waiting_in;
    p.waiting_ms = waiting_ms;
  }
  return {.rank = rank, .seq = seq, .time = t, .body = p};
}

TEST_F(HangQueryTest, ARankShortOfTheCollectiveIsNamedWithTheOpItsSequenceAndTheWait) {
  std::vector<TelemetryEvent> events;
  // Early reports, all healthy, then the latest: ranks 0, 1 and 3 in all_reduce #28 for 40 s,
  // rank 2 last seen having started #27, 10 s before the reader's now.
  for (int rank : {0, 1, 2, 3}) events.push_back(report(rank, 1, kT0, 20));
  for (int rank : {0, 1, 3}) events.push_back(report(rank, 2, kT0 + 50, 28, 28, 40'000));
  events.push_back(report(2, 2, kT0 + 40, 27));
  record(events);
  EXPECT_EQ(testing::queryInt(*db_, "SELECT count(*) FROM rank_progress"), 4)
      << "one row per rank and group, not per report";

  const LiveProgress live = loadLiveProgress(*db_, run_, kT0 + 53);
  EXPECT_TRUE(live.running);
  ASSERT_EQ(live.hangs.size(), 1u);
  const HangDiagnosis& hang = live.hangs[0];
  EXPECT_EQ(hang.op, "all_reduce");
  EXPECT_EQ(hang.op_seq, 28);
  EXPECT_EQ(hang.stuck, std::vector<int>{2});
  EXPECT_EQ(hang.waiting, (std::vector<int>{0, 1, 3}));
  EXPECT_DOUBLE_EQ(hang.waiting_s, 43);  // 40 s at the report, 3 s before now
  EXPECT_EQ(hang.silent, std::vector<int>{2}) << "13 s without a report: over 3 periods of 2 s";
  EXPECT_EQ(hang.message,
            "rank 2 has not reached all_reduce #28 and is silent (ranks 0, 1 and 3 waiting 43 s)");
  ASSERT_EQ(live.rank_states.size(), 4u);
  EXPECT_EQ(live.rank_states[0], "waiting 43 s in all_reduce #28");
  EXPECT_EQ(live.rank_states[2], "has not reached all_reduce #28, silent for 13 s");

  // A replayed older report of rank 0 does not move its row back.
  record({report(0, 1, kT0, 20)});
  EXPECT_EQ(testing::queryInt(*db_, "SELECT op_seq FROM rank_progress WHERE rank = 0"), 28);
}

TEST_F(HangQueryTest, ARankStillReportingButBehindIsNamedWithoutBeingSilent) {
  std::vector<TelemetryEvent> events;
  for (int rank : {0, 1, 2}) events.push_back(report(rank, 1, kT0 + 10, 9, 9, 6'000));
  events.push_back(report(3, 1, kT0 + 10, 8));  // alive, computing, not yet at #9
  record(events);
  const LiveProgress live = loadLiveProgress(*db_, run_, kT0 + 11);
  ASSERT_EQ(live.hangs.size(), 1u);
  EXPECT_EQ(live.hangs[0].message,
            "rank 3 has not reached all_reduce #9 (ranks 0, 1 and 2 "
            "waiting 7 s)");
  EXPECT_TRUE(live.hangs[0].silent.empty());
}

// Found on a real run: the stopped rank's last report caught it in a short wait in #19, which it
// got past before it stopped (the others completed #24 with it); that old wait, brought forward,
// is no second hang.
TEST_F(HangQueryTest, AWaitOthersHaveCompletedIsAnOldReportNotAHang) {
  std::vector<TelemetryEvent> events;
  for (int rank : {0, 1, 3}) events.push_back(report(rank, 1, kT0 + 4, 25, 25, 4'000));
  events.push_back(report(2, 1, kT0, 19, 19, 50));
  record(events);
  const LiveProgress live = loadLiveProgress(*db_, run_, kT0 + 4.2);
  ASSERT_EQ(live.hangs.size(), 1u);
  EXPECT_EQ(live.hangs[0].op_seq, 25);
  EXPECT_EQ(live.hangs[0].stuck, std::vector<int>{2});
  EXPECT_EQ(live.rank_states[2], "has not reached all_reduce #25");
}

// Found on a real 4-rank run: rank 2, stopped inside all_reduce #90, still owed rank 3 its last
// chunk of the ring while ranks 0 and 1 had completed #90 and wait in #91. Rank 3, alive and
// reporting its wait in #90, is held up there: rank 2 alone is named as short of #91. Once rank 3's
// reports stop too, or when every rank short of it is waiting, each is named.
TEST_F(HangQueryTest, ARankHeldUpInAnEarlierCollectiveIsNotBlamed) {
  std::vector<TelemetryEvent> events;
  for (int rank : {0, 1}) events.push_back(report(rank, 1, kT0 + 10, 91, 91, 5'000));
  events.push_back(report(2, 1, kT0 + 5, 90, 90, 10));
  events.push_back(report(3, 1, kT0 + 10, 90, 90, 4'500));
  record(events);
  const LiveProgress live = loadLiveProgress(*db_, run_, kT0 + 10.5);
  ASSERT_EQ(live.hangs.size(), 1u);
  const HangDiagnosis& hang = live.hangs[0];
  EXPECT_EQ(hang.op_seq, 91);
  EXPECT_EQ(hang.stuck, std::vector<int>{2});
  EXPECT_EQ(hang.message,
            "rank 2 has not reached all_reduce #91; rank 3 held up waiting 5 s in all_reduce #90 "
            "(ranks 0 and 1 waiting 6 s)");
  EXPECT_EQ(live.rank_states[2], "has not reached all_reduce #91");
  EXPECT_EQ(live.rank_states[3], "held up: waiting 5 s in all_reduce #90");

  // Rank 2 reporting a wait in #90 as fresh as rank 3's leaves no rank to blame: both are named.
  record({report(2, 2, kT0 + 10, 90, 90, 4'500)});
  EXPECT_EQ(loadLiveProgress(*db_, run_, kT0 + 10.5).hangs.at(0).stuck, (std::vector<int>{2, 3}));
}

// A report that missed its next period says nothing about now: its wait is not brought forward.
TEST_F(HangQueryTest, AWaitIsNotBroughtForwardBeyondTheNextReport) {
  std::vector<TelemetryEvent> events;
  for (int rank : {0, 1, 2, 3}) events.push_back(report(rank, 1, kT0, 12, 12, 3'000));
  record(events);
  EXPECT_EQ(loadLiveProgress(*db_, run_, kT0 + 2).hangs.size(), 1u);
  EXPECT_TRUE(loadLiveProgress(*db_, run_, kT0 + 4.5).hangs.empty());
}

TEST_F(HangQueryTest, AShortWaitIsNoHang) {
  std::vector<TelemetryEvent> events;
  for (int rank : {0, 1, 2}) events.push_back(report(rank, 1, kT0, 5, 5, 1'000));
  events.push_back(report(3, 1, kT0, 4));
  record(events);
  // 1 s + 1 s of age: under two periods of 2 s.
  const LiveProgress live = loadLiveProgress(*db_, run_, kT0 + 1);
  EXPECT_TRUE(live.hangs.empty());
  for (const std::string& state : live.rank_states) EXPECT_EQ(state, "");
}

TEST_F(HangQueryTest, EveryRankInTheCollectiveIsAStalledTransfer) {
  std::vector<TelemetryEvent> events;
  for (int rank : {0, 1, 2, 3}) events.push_back(report(rank, 1, kT0, 12, 12, 30'000));
  record(events);
  const LiveProgress live = loadLiveProgress(*db_, run_, kT0);
  ASSERT_EQ(live.hangs.size(), 1u);
  EXPECT_TRUE(live.hangs[0].stuck.empty());
  EXPECT_EQ(live.hangs[0].message,
            "ranks 0, 1, 2 and 3 waiting 30 s in all_reduce #12; every "
            "rank reached it (the transfer itself stalled)");
}

TEST_F(HangQueryTest, ARankThatWentSilentInsideTheCollectiveIsNamed) {
  std::vector<TelemetryEvent> events;
  for (int rank : {0, 1, 2}) {
    TelemetryEvent e = report(rank, 1, kT0 + 20, 12, 12, 20'000);
    if (rank == 0) std::get<ProgressEvent>(e.body).silent = "3";  // its heartbeat stopped
    events.push_back(e);
  }
  events.push_back(report(3, 1, kT0 + 1, 12, 12, 1'000));  // in #12 too, then nothing
  record(events);
  const LiveProgress live = loadLiveProgress(*db_, run_, kT0 + 20);
  ASSERT_EQ(live.hangs.size(), 1u);
  EXPECT_EQ(live.hangs[0].stuck, std::vector<int>{3});
  EXPECT_EQ(live.hangs[0].message,
            "rank 3 stopped responding inside all_reduce #12 (ranks 0, 1 and 2 waiting 20 s)");
  EXPECT_EQ(live.rank_states[3], "silent for 19 s inside all_reduce #12");
}

TEST_F(HangQueryTest, AReceiveNamesItsPeer) {
  ProgressEvent p;
  p.group = "pp";
  p.period_s = 2;
  p.op = "recv";
  p.op_seq = 31;
  p.peer = 2;
  p.waiting_ms = 9'000;
  record({{.rank = 3, .seq = 1, .time = kT0, .body = p}});
  const LiveProgress live = loadLiveProgress(*db_, run_, kT0);
  ASSERT_EQ(live.hangs.size(), 1u);
  EXPECT_EQ(live.hangs[0].message,
            "rank 3 has waited 9 s in recv #31 of pp from rank 2, which "
            "has sent no progress");
  EXPECT_EQ(live.hangs[0].stuck, std::vector<int>{2});
  EXPECT_EQ(live.rank_states[2], "rank 3 waits for it");
}

TEST_F(HangQueryTest, AnEndedRunHasNoDiagnosisButKeepsItsReports) {
  std::vector<TelemetryEvent> events;
  for (int rank : {0, 1, 3}) events.push_back(report(rank, 1, kT0, 28, 28, 40'000));
  events.push_back(report(2, 1, kT0, 27));
  record(events);
  finishRun(*db_, run_, "failed");
  const LiveProgress live = loadLiveProgress(*db_, run_, kT0 + 5);
  EXPECT_FALSE(live.running);
  EXPECT_TRUE(live.hangs.empty());
  EXPECT_EQ(live.ranks.size(), 4u);
  EXPECT_THROW(loadLiveProgress(*db_, run_ + 1, kT0), Error);
}

}  // namespace
}  // namespace ringmaster::storage
