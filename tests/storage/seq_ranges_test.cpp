// SeqRanges: idempotence as ranges of sequence numbers, checked against a plain set of every
// number, and the changes it hands over reproduce its ranges in a table kept beside it.
#include "recorder/seq_ranges.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <random>
#include <set>

namespace ringmaster::storage {
namespace {

// The ranges as the seq_ranges table would hold them after every drainChanges.
struct MirroredTable {
  std::map<uint64_t, uint64_t> rows;
  void apply(SeqRanges& ranges) {
    ranges.drainChanges([&](uint64_t first) { rows.erase(first); },
                        [&](uint64_t first, uint64_t last) { rows[first] = last; });
  }
};

TEST(SeqRanges, AnInOrderStreamIsOneRange) {
  SeqRanges ranges;
  MirroredTable table;
  for (uint64_t seq = 0; seq < 1000; ++seq) {
    EXPECT_TRUE(ranges.insert(seq));
    if (seq % 100 == 99) table.apply(ranges);
  }
  EXPECT_EQ(ranges.rangeCount(), 1u);
  EXPECT_EQ(table.rows, (std::map<uint64_t, uint64_t>{{0, 999}}));
  EXPECT_FALSE(ranges.insert(0));
  EXPECT_FALSE(ranges.insert(500));
  EXPECT_FALSE(ranges.insert(999));
}

TEST(SeqRanges, GapsMergeWhenFilledFromEitherSide) {
  SeqRanges ranges;
  MirroredTable table;
  for (uint64_t seq : {10, 12, 14}) ranges.insert(seq);
  table.apply(ranges);
  EXPECT_EQ(table.rows, (std::map<uint64_t, uint64_t>{{10, 10}, {12, 12}, {14, 14}}));
  EXPECT_TRUE(ranges.insert(11));  // joins both neighbours
  EXPECT_TRUE(ranges.insert(9));   // extends the start downwards
  EXPECT_TRUE(ranges.insert(15));  // extends the end
  table.apply(ranges);
  EXPECT_EQ(table.rows, (std::map<uint64_t, uint64_t>{{9, 12}, {14, 15}}));
  EXPECT_TRUE(ranges.insert(13));
  table.apply(ranges);
  EXPECT_EQ(table.rows, (std::map<uint64_t, uint64_t>{{9, 15}}));
  EXPECT_EQ(ranges.rangeCount(), 1u);
}

TEST(SeqRanges, LoadedRangesRecogniseReplays) {
  SeqRanges ranges;
  ranges.load(0, 99);
  ranges.load(200, 200);
  EXPECT_FALSE(ranges.insert(42));
  EXPECT_FALSE(ranges.insert(200));
  EXPECT_TRUE(ranges.insert(100));
  EXPECT_TRUE(ranges.insert(201));
}

TEST(SeqRanges, TheExtremesOfUnsigned64BitsDoNotOverflow) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  SeqRanges ranges;
  MirroredTable table;
  EXPECT_TRUE(ranges.insert(kMax));
  EXPECT_TRUE(ranges.insert(kMax - 1));
  EXPECT_TRUE(ranges.insert(0));
  EXPECT_FALSE(ranges.insert(kMax));
  table.apply(ranges);
  EXPECT_EQ(table.rows, (std::map<uint64_t, uint64_t>{{0, 0}, {kMax - 1, kMax}}));
}

TEST(SeqRanges, ShuffledReplayedStreamsMatchASetOfEveryNumber) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 random(seed);
    std::uniform_int_distribution<uint64_t> pick(0, 300);
    SeqRanges ranges;
    MirroredTable table;
    std::set<uint64_t> every;
    for (int i = 0; i < 1000; ++i) {
      const uint64_t seq = pick(random);
      ASSERT_EQ(ranges.insert(seq), every.insert(seq).second) << seq;
      if (random() % 16 == 0) table.apply(ranges);
    }
    table.apply(ranges);
    std::set<uint64_t> covered;
    for (const auto& [first, last] : table.rows) {
      for (uint64_t seq = first; seq <= last; ++seq) covered.insert(seq);
      EXPECT_FALSE(table.rows.contains(last + 1)) << "adjacent ranges are merged";
    }
    EXPECT_EQ(covered, every);
    EXPECT_EQ(table.rows.size(), ranges.rangeCount());
  }
}

}  // namespace
}  // namespace ringmaster::storage
