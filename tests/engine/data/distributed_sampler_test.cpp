// DistributedSampler against PyTorch's semantics (a literal transcription of its __iter__, and
// values printed by torch 2.x), swept over world sizes 1..5 and sizes including 0, 1 and primes;
// and BatchIterator's batching across epochs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "core/error.h"
#include "data/distributed_sampler.h"

namespace ringmaster {
namespace {

using Indices = std::vector<int64_t>;

const std::vector<int64_t> kSizes{0, 1, 2, 3, 4, 5, 7, 10, 11, 12, 13, 16, 17, 31, 60, 97, 100};

std::vector<Indices> allRanks(int64_t size, int replicas, bool shuffle, uint64_t seed,
                              bool drop_last, int64_t epoch = 0) {
  std::vector<Indices> out;
  for (int r = 0; r < replicas; ++r) {
    DistributedSampler sampler(size, replicas, r, shuffle, seed, drop_last);
    sampler.setEpoch(epoch);
    out.push_back(sampler.indices());
  }
  return out;
}

// torch.utils.data.DistributedSampler.__iter__ for shuffle=False, written as the Python is.
Indices pytorchUnshuffled(int64_t size, int replicas, int rank, bool drop_last) {
  int64_t num_samples;
  if (drop_last && size % replicas != 0) {
    num_samples = static_cast<int64_t>(std::ceil(static_cast<double>(size - replicas) / replicas));
  } else {
    num_samples = static_cast<int64_t>(std::ceil(static_cast<double>(size) / replicas));
  }
  const int64_t total_size = num_samples * replicas;
  Indices indices(size);
  std::iota(indices.begin(), indices.end(), 0);
  if (!drop_last) {
    const int64_t padding_size = total_size - size;
    if (padding_size <= size) {
      indices.insert(indices.end(), indices.begin(), indices.begin() + padding_size);
    } else {
      Indices repeated;
      const auto times = static_cast<int64_t>(std::ceil(static_cast<double>(padding_size) / size));
      for (int64_t t = 0; t < times; ++t)
        repeated.insert(repeated.end(), indices.begin(), indices.end());
      indices.insert(indices.end(), repeated.begin(), repeated.begin() + padding_size);
    }
  } else {
    indices.resize(total_size);
  }
  Indices mine;
  for (int64_t p = rank; p < total_size; p += replicas) mine.push_back(indices[p]);
  return mine;
}

// The padded global list the ranks were cut from: position p belongs to rank p % replicas.
Indices interleave(const std::vector<Indices>& ranks) {
  Indices global;
  const size_t per_rank = ranks[0].size();
  for (size_t i = 0; i < per_rank; ++i) {
    for (const Indices& r : ranks) global.push_back(r.at(i));
  }
  return global;
}

TEST(DistributedSampler, MatchesValuesPrintedByPyTorch) {
  // [list(DistributedSampler(range(n), R, r, shuffle=False, drop_last=dl)) for r in range(R)]
  struct Case {
    int64_t size;
    int replicas;
    bool drop_last;
    std::vector<Indices> expected;
  };
  const std::vector<Case> cases{
      {10, 4, false, {{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}}},
      {10, 4, true, {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
      {2, 5, false, {{0}, {1}, {0}, {1}, {0}}},
      {2, 5, true, {{}, {}, {}, {}, {}}},
      {3, 2, false, {{0, 2}, {1, 0}}},
      {0, 3, false, {{}, {}, {}}},
      {1, 3, false, {{0}, {0}, {0}}},
      {7, 3, true, {{0, 3}, {1, 4}, {2, 5}}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(allRanks(c.size, c.replicas, false, 0, c.drop_last), c.expected)
        << "size " << c.size << " replicas " << c.replicas << " drop_last " << c.drop_last;
  }
}

TEST(DistributedSampler, UnshuffledMatchesPyTorchTranscription) {
  for (int64_t size : kSizes) {
    for (int replicas = 1; replicas <= 5; ++replicas) {
      for (bool drop_last : {false, true}) {
        for (int rank = 0; rank < replicas; ++rank) {
          DistributedSampler sampler(size, replicas, rank, false, 0, drop_last);
          EXPECT_EQ(sampler.indices(), pytorchUnshuffled(size, replicas, rank, drop_last))
              << "size " << size << " replicas " << replicas << " rank " << rank << " drop_last "
              << drop_last;
        }
      }
    }
  }
}

TEST(DistributedSampler, CountsPaddingAndTruncation) {
  for (int64_t size : kSizes) {
    for (int replicas = 1; replicas <= 5; ++replicas) {
      for (bool drop_last : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "size " << size << " replicas " << replicas << " drop_last " << drop_last);
        const int64_t expected =
            drop_last && size % replicas != 0
                ? static_cast<int64_t>(std::ceil(static_cast<double>(size - replicas) / replicas))
                : (size + replicas - 1) / replicas;
        const auto ranks = allRanks(size, replicas, true, 7, drop_last, 3);
        std::map<int64_t, int> seen;
        for (int r = 0; r < replicas; ++r) {
          DistributedSampler sampler(size, replicas, r, true, 7, drop_last);
          EXPECT_EQ(sampler.numSamples(), expected);
          EXPECT_EQ(sampler.totalSize(), expected * replicas);
          ASSERT_EQ(static_cast<int64_t>(ranks[r].size()), expected);
          for (int64_t i : ranks[r]) {
            ASSERT_GE(i, 0);
            ASSERT_LT(i, size);
            ++seen[i];
          }
        }
        const int64_t total = expected * replicas;
        if (drop_last || size % replicas == 0) {
          // Nothing is repeated: the ranks are disjoint; exactly `total` distinct indices.
          EXPECT_EQ(static_cast<int64_t>(seen.size()), total);
          for (auto [index, count] : seen) EXPECT_EQ(count, 1) << "index " << index;
          EXPECT_LE(size - total, replicas - 1);  // drop_last loses fewer than one per rank
        } else {
          // Every index appears; the padding repeats the permutation from its start.
          EXPECT_EQ(static_cast<int64_t>(seen.size()), size);
          const Indices global = interleave(ranks);
          for (int64_t p = size; p < total; ++p) EXPECT_EQ(global[p], global[p % size]);
        }
      }
    }
  }
}

TEST(DistributedSampler, UnionCoversEveryIndexOnceWhenSizeDivides) {
  for (int replicas = 1; replicas <= 5; ++replicas) {
    for (int64_t size :
         {int64_t{0}, int64_t{replicas}, int64_t{replicas} * 7, int64_t{replicas} * 13}) {
      for (bool drop_last : {false, true}) {
        Indices all;
        for (const Indices& r : allRanks(size, replicas, true, 11, drop_last, 2)) {
          all.insert(all.end(), r.begin(), r.end());
        }
        std::sort(all.begin(), all.end());
        Indices expected(size);
        std::iota(expected.begin(), expected.end(), 0);
        EXPECT_EQ(all, expected) << "size " << size << " replicas " << replicas;
      }
    }
  }
}

TEST(DistributedSampler, RanksShareOnePermutationPerSeedAndEpoch) {
  // Samplers built separately (as on separate ranks) cut the same permutation: interleaved, the
  // first `size` positions are a permutation of the dataset.
  for (int64_t size : {int64_t{13}, int64_t{97}, int64_t{100}}) {
    for (int replicas = 1; replicas <= 5; ++replicas) {
      const Indices global = interleave(allRanks(size, replicas, true, 42, false, 5));
      Indices head(global.begin(), global.begin() + size);
      std::sort(head.begin(), head.end());
      Indices expected(size);
      std::iota(expected.begin(), expected.end(), 0);
      EXPECT_EQ(head, expected) << "size " << size << " replicas " << replicas;
    }
  }
  // Deterministic: the same arguments give the same indices.
  EXPECT_EQ(allRanks(97, 3, true, 42, false, 5), allRanks(97, 3, true, 42, false, 5));
}

TEST(DistributedSampler, EpochsAndSeedsChangeTheOrder) {
  DistributedSampler sampler(100, 2, 1, true, 42);
  const Indices epoch0 = sampler.indices();
  sampler.setEpoch(1);
  const Indices epoch1 = sampler.indices();
  EXPECT_NE(epoch0, epoch1);
  sampler.setEpoch(0);
  EXPECT_EQ(sampler.indices(), epoch0);
  EXPECT_NE(DistributedSampler(100, 2, 1, true, 43).indices(), epoch0);
  // Seeded with seed + epoch, as PyTorch: (seed 42, epoch 1) is (seed 43, epoch 0).
  EXPECT_EQ(DistributedSampler(100, 2, 1, true, 43).indices(), epoch1);
  // Unshuffled order ignores the epoch.
  DistributedSampler plain(100, 2, 1, false, 42);
  const Indices plain0 = plain.indices();
  plain.setEpoch(9);
  EXPECT_EQ(plain.indices(), plain0);
  // And a shuffle actually shuffles.
  EXPECT_NE(epoch0, plain0);
}

TEST(DistributedSampler, RejectsBadArguments) {
  auto kind = [](auto make) {
    try {
      make();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kInternal;
  };
  EXPECT_EQ(kind([] { DistributedSampler(10, 0, 0); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind([] { DistributedSampler(10, 3, 3); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind([] { DistributedSampler(10, 3, -1); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind([] { DistributedSampler(-1, 3, 0); }), ErrorKind::kInvalidArgument);
  try {
    DistributedSampler(10, 4, 4);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "sampler: rank 4 is outside [0, 4)");
  }
}

// -------------------------------------------------------------------------------------------------
// BatchIterator

TEST(BatchIterator, WalksEpochsAndDropsThePartialBatch) {
  DistributedSampler sampler(23, 2, 0, true, 5);  // 12 samples per rank
  BatchIterator batches(sampler, 5);              // 2 batches per epoch, 2 samples dropped
  EXPECT_EQ(batches.batchesPerEpoch(), 2);
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    sampler.setEpoch(epoch);
    const Indices expected = sampler.indices();
    EXPECT_EQ(batches.epoch(), epoch);
    for (int64_t b = 0; b < 2; ++b) {
      const Indices batch = batches.next();
      ASSERT_EQ(batch.size(), 5u);
      EXPECT_EQ(batch, Indices(expected.begin() + b * 5, expected.begin() + b * 5 + 5))
          << "epoch " << epoch << " batch " << b;
    }
  }
}

TEST(BatchIterator, StartsAtTheSamplersEpochAndSeeks) {
  DistributedSampler sampler(40, 3, 2, true, 9);  // 14 per rank, 4 batches of 3 per epoch
  sampler.setEpoch(7);
  BatchIterator reference(sampler, 3);
  std::vector<Indices> first;
  for (int i = 0; i < 11; ++i) first.push_back(reference.next());
  const Indices epoch7 = sampler.indices();
  EXPECT_EQ(first[0], Indices(epoch7.begin(), epoch7.begin() + 3));
  EXPECT_EQ(reference.epoch(), 9);  // 11 batches = 2 epochs of 4 + 3
  for (int64_t skip : {0, 1, 3, 4, 5, 8, 10}) {
    BatchIterator resumed(sampler, 3);
    resumed.next();  // seek is from construction, whatever was consumed
    resumed.seek(skip);
    EXPECT_EQ(resumed.next(), first[skip]) << "seek " << skip;
  }
}

TEST(BatchIterator, RejectsBatchesLargerThanAnEpoch) {
  EXPECT_THROW(BatchIterator(DistributedSampler(10, 2, 0), 6), Error);
  EXPECT_THROW(BatchIterator(DistributedSampler(0, 1, 0), 1), Error);
  EXPECT_THROW(BatchIterator(DistributedSampler(10, 1, 0), 0), Error);
  BatchIterator exact(DistributedSampler(10, 2, 1, false), 5);
  EXPECT_EQ(exact.next(), (Indices{1, 3, 5, 7, 9}));
  EXPECT_EQ(exact.next(), (Indices{1, 3, 5, 7, 9}));
}

}  // namespace
}  // namespace ringmaster
