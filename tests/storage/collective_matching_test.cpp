// CollectiveMatcher without a database: the rows it writes through a CommRowWriter that keeps
// them in memory. A collective's rows are written once it is complete, each with its wait for the
// last member to start (at most its duration); rows of one still missing members are inserted
// without a wait at the end of a batch and get it when the collective completes later.
#include "recorder/collective_matching.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

namespace ringmaster::storage {
namespace {

struct Row {
  int attempt = 0;
  int rank = 0;
  std::optional<double> wait_ms;
};

class MemoryRows : public CommRowWriter {
 public:
  int64_t insertComm(const CommRow& row, std::optional<double> wait_ms) override {
    rows[next_rowid] = {row.attempt, row.rank, wait_ms};
    ++inserts;
    return next_rowid++;
  }
  void setCommWait(int64_t rowid, double wait_ms) override {
    ASSERT_TRUE(rows.count(rowid)) << rowid;
    rows[rowid].wait_ms = wait_ms;
    ++updates;
  }
  // The wait of the row of `rank` in `attempt`: nullopt when there is no such row or no wait.
  std::optional<double> waitOf(int rank, int attempt = 0) const {
    for (const auto& [rowid, row] : rows)
      if (row.rank == rank && row.attempt == attempt) return row.wait_ms;
    return std::nullopt;
  }
  std::map<int64_t, Row> rows;
  int64_t next_rowid = 1;
  int inserts = 0, updates = 0;
};

// Rank `rank`'s part of all_reduce `seq_op` of a group of `group_size`, started at `start_us`.
CommRow member(int rank, uint64_t seq_op, int64_t start_us, double duration_ms = 10,
               int64_t group_size = 3, int attempt = 0) {
  CommEvent c;
  c.seq_op = seq_op;
  c.op = "all_reduce";
  c.group = "world";
  c.duration_ms = duration_ms;
  c.start_us = start_us;
  c.group_size = group_size;
  return {attempt, rank, 0.0, c};
}

TEST(CollectiveMatching, OnlyCollectivesOfSeveralMembersWithAStartAndNoWaitAreMatched) {
  EXPECT_TRUE(CollectiveMatcher::needsMatching(member(0, 1, 0).event));
  CommEvent single = member(0, 1, 0, 10, 1).event;
  EXPECT_FALSE(CollectiveMatcher::needsMatching(single));
  CommEvent no_start = member(0, 1, 0).event;
  no_start.start_us.reset();
  EXPECT_FALSE(CollectiveMatcher::needsMatching(no_start));
  CommEvent no_size = member(0, 1, 0).event;
  no_size.group_size.reset();
  EXPECT_FALSE(CollectiveMatcher::needsMatching(no_size));
  CommEvent measured = member(0, 1, 0).event;
  measured.wait_ms = 2;
  EXPECT_FALSE(CollectiveMatcher::needsMatching(measured));
}

TEST(CollectiveMatching, ACompleteCollectiveIsInsertedOnceEachRowWithItsWaitForTheLastStart) {
  MemoryRows rows;
  CollectiveMatcher matcher(rows);
  matcher.add(member(0, 1, 1000));
  matcher.add(member(1, 1, 4000));
  EXPECT_EQ(rows.inserts, 0) << "held back until every member is in";
  matcher.add(member(2, 1, 1000 + 50'000, /*duration_ms=*/5));  // the last to start
  EXPECT_EQ(rows.inserts, 3);
  EXPECT_EQ(rows.updates, 0);
  EXPECT_EQ(rows.waitOf(2), 0.0);
  EXPECT_EQ(rows.waitOf(1), 10.0) << "47 ms late, clamped to its 10 ms duration";
  matcher.add(member(0, 2, 0, 100));
  matcher.add(member(1, 2, 30'000, 100));
  matcher.add(member(2, 2, 12'000, 100));
  EXPECT_EQ(rows.waitOf(0), 10.0);  // seq 1's row, found first
  EXPECT_EQ(rows.rows.rbegin()->second.wait_ms, 18.0) << "rank 2 waited 18 ms in seq 2";
  matcher.insertHeldRows();
  EXPECT_EQ(rows.inserts, 6) << "nothing was left held";
}

TEST(CollectiveMatching, ARowHeldAtTheEndOfABatchGetsItsWaitWhenTheCollectiveCompletes) {
  MemoryRows rows;
  CollectiveMatcher matcher(rows);
  matcher.add(member(0, 1, 0));
  matcher.add(member(1, 1, 2000));
  matcher.insertHeldRows();
  ASSERT_EQ(rows.inserts, 2);
  EXPECT_EQ(rows.waitOf(0), std::nullopt);
  matcher.insertHeldRows();
  EXPECT_EQ(rows.inserts, 2) << "a row is inserted once";
  matcher.add(member(2, 1, 3000));
  EXPECT_EQ(rows.inserts, 3);
  EXPECT_EQ(rows.updates, 2);
  EXPECT_EQ(rows.waitOf(0), 3.0);
  EXPECT_EQ(rows.waitOf(1), 1.0);
  EXPECT_EQ(rows.waitOf(2), 0.0);
}

TEST(CollectiveMatching, AttemptsAndGroupsAreCollectivesOfTheirOwn) {
  MemoryRows rows;
  CollectiveMatcher matcher(rows);
  matcher.add(member(0, 1, 0, 10, 2, /*attempt=*/0));
  matcher.add(member(1, 1, 5000, 10, 2, /*attempt=*/1));  // a restart numbers from 1 again
  CommRow other_group = member(1, 1, 5000, 10, 2, 0);
  other_group.event.group = "dp0";
  matcher.add(other_group);
  EXPECT_EQ(rows.inserts, 0);
  matcher.add(member(1, 1, 2000, 10, 2, /*attempt=*/0));
  EXPECT_EQ(rows.inserts, 2);
  EXPECT_EQ(rows.waitOf(0, 0), 2.0);
  EXPECT_EQ(rows.waitOf(1, 0), 0.0);
  matcher.insertHeldRows();
  EXPECT_EQ(rows.waitOf(1, 1), std::nullopt) << "attempt 1's has no partner yet";
  EXPECT_EQ(rows.inserts, 4);
}

}  // namespace
}  // namespace ringmaster::storage
