// bench-comm's parsing and sweep, and the benchmark itself over Gloo with every op checked for
// world sizes 1..4: a correct communicator gives zero wrong elements and sane bandwidth figures.
#include <gtest/gtest.h>

#include "comm/bench/comm_benchmark.h"
#include "comm_harness.h"
#include "core/error.h"

namespace ringmaster {
namespace {

using namespace ringmaster::testing;

TEST(CommBenchmark, ParsesSizesAsNcclTestsDoes) {
  EXPECT_EQ(parseByteSize("8"), 8u);
  EXPECT_EQ(parseByteSize("64K"), 65536u);
  EXPECT_EQ(parseByteSize("64k"), 65536u);
  EXPECT_EQ(parseByteSize("128M"), 128u << 20);
  EXPECT_EQ(parseByteSize("2G"), 2ull << 30);
  for (const char* bad : {"", "K", "12Q", "-4", "1.5M", "99999999999999999"}) {
    try {
      parseByteSize(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(e.message().find(std::string("'") + bad + "'"), std::string::npos) << e.message();
    }
  }
}

TEST(CommBenchmark, ParsesOpsDtypesAndReduceOpsInEitherSpelling) {
  EXPECT_EQ(parseBenchOp("all_reduce"), BenchOp::kAllReduce);
  EXPECT_EQ(parseBenchOp("allreduce"), BenchOp::kAllReduce);
  EXPECT_EQ(parseBenchOp("reducescatter"), BenchOp::kReduceScatter);
  EXPECT_EQ(parseBenchOp("sendrecv"), BenchOp::kSendRecv);
  EXPECT_EQ(parseCommDType("half"), DType::kF16);
  EXPECT_EQ(parseCommDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(parseReduceKind("prod"), ReduceKind::kProduct);
  EXPECT_EQ(parseReduceKind("premul_sum"), ReduceKind::kPremulSum);
  EXPECT_THROW(parseBenchOp("allreduse"), Error);
  EXPECT_THROW(parseCommDType("float8"), Error);
  EXPECT_THROW(parseReduceKind("mean"), Error);
}

TEST(CommBenchmark, SweepsByFactorOrIncrement) {
  CommBenchOptions o;
  o.min_bytes = 8;
  o.max_bytes = 128;
  o.step_factor = 2;
  EXPECT_EQ(sweepSizes(o), (std::vector<uint64_t>{8, 16, 32, 64, 128}));
  o.step_bytes = 50;
  EXPECT_EQ(sweepSizes(o), (std::vector<uint64_t>{8, 58, 108}));
  o.min_bytes = 256;
  EXPECT_THROW(sweepSizes(o), Error);
}

class CommBenchmarkRanks : public ::testing::TestWithParam<int> {};

// Every op, with every reduce op of the dtype, at sizes that leave ragged blocks: zero wrong.
TEST_P(CommBenchmarkRanks, EveryOpChecksClean) {
  const int world = GetParam();
  for (DType dtype : {DType::kI32, DType::kF16}) {
    CommBenchOptions o;
    o.ops = allBenchOps();
    if (world == 1) std::erase(o.ops, BenchOp::kSendRecv);
    o.min_bytes = 6;
    o.max_bytes = 6000;
    o.step_factor = 10;
    o.iters = 2;
    o.warmup = 1;
    o.dtype = dtype;
    o.redops = reduceKindsFor(dtype);
    o.root = world - 1;
    o.check = true;
    std::vector<std::vector<CommBenchRow>> rows(static_cast<size_t>(world));
    auto failures = runRanks(world, [&](Communicator& comm) {
      rows[static_cast<size_t>(comm.rank())] = runCommBenchmark(comm, o);
    });
    ASSERT_TRUE(failures.empty()) << describe(failures);
    ASSERT_FALSE(rows[0].empty());
    for (const auto& row : rows[0]) {
      SCOPED_TRACE(std::string(toString(row.op)) + " " + std::to_string(row.bytes));
      ASSERT_TRUE(row.wrong.has_value());
      EXPECT_EQ(*row.wrong, 0);
      EXPECT_EQ(row.root, isRooted(row.op) ? world - 1 : -1);
      EXPECT_EQ(row.redop.has_value(), takesReduceOp(row.op));
      EXPECT_GT(row.time_us, 0);
      EXPECT_EQ(row.bytes, static_cast<uint64_t>(row.count) * dtypeSize(dtype));
    }
    // Every rank saw the same rows: the slowest rank's time is shared.
    for (int r = 1; r < world; ++r) {
      ASSERT_EQ(rows[static_cast<size_t>(r)].size(), rows[0].size());
      for (size_t i = 0; i < rows[0].size(); ++i)
        EXPECT_EQ(rows[static_cast<size_t>(r)][i].time_us, rows[0][i].time_us);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CommBenchmarkRanks, ::testing::Values(1, 2, 3, 4));

TEST(CommBenchmark, RefusesARootOutsideTheGroupAndSendRecvAlone) {
  auto failures = runRanks(2, [&](Communicator& comm) {
    CommBenchOptions o;
    o.root = 2;
    runCommBenchmark(comm, o);
  });
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_NE(failures[0].message.find("root 2 is not a rank of the 2 ranks"), std::string::npos)
      << failures[0].message;
  failures = runRanks(1, [&](Communicator& comm) {
    CommBenchOptions o;
    o.ops = {BenchOp::kSendRecv};
    runCommBenchmark(comm, o);
  });
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].message.find("sendrecv needs 2 or more ranks"), std::string::npos);
}

}  // namespace
}  // namespace ringmaster
