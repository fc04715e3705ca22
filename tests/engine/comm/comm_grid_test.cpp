// The acceptance grid of the communication layer: every op x dtype x reduce op that applies, for
// world sizes 1..4 and element counts 0, 1, 7, 1000 and 1 << 20, over each CPU transport (Gloo's
// TCP and shared memory), each result checked against bench-comm's independent reference
// (computed per element in double). Its own executable: too slow for the TSan build, which runs
// the label "comm".
#include <gtest/gtest.h>

#include "comm/bench/comm_benchmark.h"
#include "comm_harness.h"

#include <functional>
#include <string>
#include <thread>
#include <tuple>

namespace ringmaster {
namespace {

using namespace ringmaster::testing;

// (transport, world size): "gloo" is Gloo over TCP, "shm" the shared-memory backend.
class CommGrid : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  std::vector<RankFailure> runRanks(int world,
                                    const std::function<void(Communicator&)>& body) const {
    return testing::runRanks(world, body, {}, std::get<0>(GetParam()));
  }
};

TEST_P(CommGrid, EveryOpDtypeAndReduceOpAtEveryCount) {
  const int world = std::get<1>(GetParam());
  for (DType dtype : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kU8, DType::kBF16,
                      DType::kF16}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{1} << 20}) {
      CommBenchOptions o;
      o.ops = allBenchOps();
      if (world == 1) std::erase(o.ops, BenchOp::kSendRecv);
      // The blocked ops get count rounded up to whole blocks, so 1 and 7 are blocks of 1 and 7.
      o.min_bytes = o.max_bytes = static_cast<uint64_t>(count) * dtypeSize(dtype);
      o.iters = 1;
      o.warmup = 0;
      o.dtype = dtype;
      o.redops = reduceKindsFor(dtype);
      o.root = world / 2;
      o.check = true;
      std::vector<CommBenchRow> rows;
      auto failures = runRanks(world, [&](Communicator& comm) {
        auto mine = runCommBenchmark(comm, o);
        if (comm.rank() == 0) rows = mine;
      });
      ASSERT_TRUE(failures.empty()) << describe(failures);
      for (const auto& row : rows) {
        EXPECT_EQ(row.wrong.value_or(-1), 0)
            << toString(row.op) << " " << commDTypeName(dtype) << " "
            << (row.redop ? toString(*row.redop) : "") << " count " << count;
      }
    }
  }
}

// Every op x dtype x reduce op on a sub-group whose order differs from the world's (the world
// ranks from last to first, rank 0 left out where the world has more than two ranks), while the
// world group runs the same grid at the same time from another thread of each rank.
TEST_P(CommGrid, EveryOpOnASubGroupConcurrentlyWithTheWorld) {
  const int world = std::get<1>(GetParam());
  std::vector<int> members;
  for (int r = world - 1; r >= (world > 2 ? 1 : 0); --r) members.push_back(r);
  auto options = [&](DType dtype, int group_size) {
    CommBenchOptions o;
    o.ops = allBenchOps();
    if (group_size == 1) std::erase(o.ops, BenchOp::kSendRecv);
    o.min_bytes = dtypeSize(dtype);
    o.max_bytes = 1000 * dtypeSize(dtype);
    o.step_factor = 7;  // 1, 7, 49, 343 elements
    o.iters = 1;
    o.warmup = 0;
    o.dtype = dtype;
    o.redops = reduceKindsFor(dtype);
    o.root = group_size - 1;
    o.check = true;
    return o;
  };
  auto expectClean = [](const std::vector<CommBenchRow>& rows, const std::string& where) {
    ASSERT_FALSE(rows.empty()) << where;
    for (const auto& row : rows)
      EXPECT_EQ(row.wrong.value_or(-1), 0) << where << ": " << toString(row.op) << " "
                                           << commDTypeName(row.dtype) << " " << row.bytes << " B";
  };
  auto failures = runRanks(world, [&](Communicator& comm) {
    auto group = comm.newGroup(members, "reversed");
    std::thread world_thread([&] {
      for (DType dtype : {DType::kF32, DType::kI64, DType::kBF16})
        expectClean(runCommBenchmark(comm, options(dtype, comm.size())), "world");
    });
    if (group) {
      ASSERT_EQ(group->size(), static_cast<int>(members.size()));
      for (DType dtype : {DType::kF32, DType::kI64, DType::kBF16})
        expectClean(runCommBenchmark(*group, options(dtype, group->size())), "sub-group");
    }
    world_thread.join();
  });
  ASSERT_TRUE(failures.empty()) << describe(failures);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CommGrid,
                         ::testing::Combine(::testing::Values(std::string("gloo"),
                                                              std::string("shm")),
                                            ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_world" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace ringmaster
