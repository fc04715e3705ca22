// Bad input gets a clear error and never a hang: ranks that disagree on a collective's size, dtype,
// root or op; a rank outside the group; an unreachable MASTER_ADDR.
#include <gtest/gtest.h>

#include <chrono>

#include "comm/init_method.h"
#include "comm_harness.h"
#include "comm_values.h"

namespace ringmaster {
namespace {

using namespace ringmaster::testing;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Runs `body` on 3 ranks with a 10 s timeout; expects every rank to fail with a message holding
// each of `expected`, and in far less than the timeout (the check comes before any transfer).
void expectDisagreement(const std::function<void(Communicator&)>& body,
                        const std::vector<std::string>& expected) {
  CommOptions options;
  options.timeout = 10s;
  options.watchdog_period = 50ms;
  const auto start = Clock::now();
  auto failures = runRanks(3, body, options);
  const auto elapsed = Clock::now() - start;
  ASSERT_EQ(failures.size(), 3u) << describe(failures);
  for (const auto& f : failures) {
    EXPECT_NE(f.message.find("disagree on the collective they call"), std::string::npos)
        << f.message;
    for (const auto& text : expected)
      EXPECT_NE(f.message.find(text), std::string::npos) << f.message;
  }
  EXPECT_LT(elapsed, 9s) << "the ranks waited for their timeout instead of comparing calls";
}

TEST(CommBadInput, MismatchedSizesAcrossRanksNameEveryRanksCall) {
  expectDisagreement(
      [](Communicator& comm) {
        Tensor t = makeTensor(DType::kF32, comm.rank() == 1 ? 200 : 100, [](int64_t) { return 1; });
        comm.allReduce(t)->wait();
      },
      {"rank 0: all_reduce #1 of float32 400 bytes, sum",
       "rank 1: all_reduce #1 of float32 800 bytes, sum"});
}

TEST(CommBadInput, MismatchedDtypesOfEqualBytesAreCaught) {
  // Same byte count, so the transfer alone would "succeed" and reduce garbage.
  expectDisagreement(
      [](Communicator& comm) {
        Tensor t = comm.rank() == 2 ? makeTensor(DType::kF64, 50, [](int64_t) { return 1; })
                                    : makeTensor(DType::kF32, 100, [](int64_t) { return 1; });
        comm.allReduce(t)->wait();
      },
      {"rank 2: all_reduce #1 of float64 400 bytes", "rank 0: all_reduce #1 of float32 400 bytes"});
}

TEST(CommBadInput, RanksNamingDifferentRootsAreCaught) {
  expectDisagreement(
      [](Communicator& comm) {
        Tensor t = makeTensor(DType::kI32, 10, [](int64_t) { return 1; });
        comm.broadcast(t, comm.rank() == 0 ? 1 : 0)->wait();
      },
      {"rank 0: broadcast #1 of int32 40 bytes, root 1",
       "rank 1: broadcast #1 of int32 40 bytes, root 0"});
}

TEST(CommBadInput, RanksCallingDifferentCollectivesAreCaught) {
  expectDisagreement(
      [](Communicator& comm) {
        Tensor t = makeTensor(DType::kF32, 8, [](int64_t) { return 1; });
        if (comm.rank() == 1)
          comm.barrier()->wait();
        else
          comm.allReduce(t, ReduceOp::max())->wait();
      },
      {"rank 1: barrier #1", "rank 0: all_reduce #1 of float32 32 bytes, max"});
}

TEST(CommBadInput, ARootOutsideTheGroupIsRefusedAtTheCall) {
  auto failures = runRanks(2, [](Communicator& comm) {
    Tensor t = makeTensor(DType::kF32, 4, [](int64_t) { return 1; });
    comm.reduce(t, 2)->wait();
  });
  ASSERT_EQ(failures.size(), 2u);
  for (const auto& f : failures)
    EXPECT_NE(f.message.find("reduce on world: root 2 out of range for 2 ranks"), std::string::npos)
        << f.message;
}

TEST(CommBadInput, ASubGroupWithARankOutsideTheWorldIsRefused) {
  auto failures = runRanks(3, [](Communicator& comm) { comm.newGroup({0, 3}); });
  ASSERT_EQ(failures.size(), 3u);
  for (const auto& f : failures)
    EXPECT_NE(f.message.find("ranks [0, 3] must be distinct ranks of 0..2"), std::string::npos)
        << f.message;
}

TEST(CommBadInput, AnUnreachableMasterAddrIsNamedWithinTheRendezvousTimeout) {
  int port;
  {
    TcpStoreOptions options;
    options.is_server = true;
    TcpStore probe(options);
    port = probe.port();
  }  // now nobody listens there
  EnvLookup env = fakeEnv({{"MASTER_ADDR", "127.0.0.1"},
                           {"MASTER_PORT", std::to_string(port)},
                           {"RANK", "1"},
                           {"WORLD_SIZE", "2"}});
  InitOptions options;
  options.timeout = 1s;
  const auto start = Clock::now();
  try {
    rendezvous(options, env);
    FAIL() << "connected to nothing";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
    EXPECT_NE(e.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.message();
  }
  EXPECT_LT(Clock::now() - start, 30s);
}

TEST(CommBadInput, AnUnresolvableMasterAddrIsNamed) {
  EnvLookup env = fakeEnv({{"MASTER_ADDR", "no-such-host.invalid"},
                           {"MASTER_PORT", "29500"},
                           {"RANK", "1"},
                           {"WORLD_SIZE", "2"}});
  InitOptions options;
  options.timeout = 1s;
  try {
    rendezvous(options, env);
    FAIL() << "resolved an .invalid name";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("no-such-host.invalid"), std::string::npos) << e.message();
  }
}

}  // namespace
}  // namespace ringmaster
