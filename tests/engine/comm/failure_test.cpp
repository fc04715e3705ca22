// Never hang: a rank that does not arrive makes the others time out with the op, its sequence
// number and the missing ranks named; a rank that fails or dies makes the others abort within a
// watchdog period instead of their own timeout; the flight recorder reaches the observer; and
// every thread is released (each test ends by destroying its communicators). Over each CPU
// transport: Gloo's TCP, and shared memory (issue 36).
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "comm_harness.h"
#include "comm_values.h"

namespace ringmaster {
namespace {

using namespace ringmaster::testing;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Each test over "gloo" (TCP) and "shm" (shared memory).
class CommFailure : public ::testing::TestWithParam<std::string> {
 protected:
  const std::string& backend() const { return GetParam(); }
  std::vector<RankFailure> runRanks(int world, const std::function<void(Communicator&)>& body,
                                    CommOptions options = {}) const {
    return testing::runRanks(world, body, std::move(options), backend());
  }
};

struct FailureLog : CommObserver {
  std::mutex mutex;
  std::vector<std::string> errors;
  std::vector<nlohmann::json> dumps;
  void onFailure(const Error& error, const nlohmann::json& recorder) override {
    std::lock_guard<std::mutex> lock(mutex);
    errors.push_back(error.message());
    dumps.push_back(recorder);
  }
};

TEST_P(CommFailure, TimeoutNamesTheOpTheSequenceAndTheRanksThatDidNotArrive) {
  CommOptions options;
  options.timeout = 1500ms;
  options.watchdog_period = 50ms;
  auto log = std::make_shared<FailureLog>();
  options.observer = log;
  std::atomic<bool> released{false};
  auto failures = runRanks(
      3,
      [&](Communicator& comm) {
        Tensor t = makeTensor(DType::kF32, 16, [](int64_t) { return 1.0; });
        comm.allReduce(t)->wait();  // #1: everyone
        if (comm.rank() == 2) {
          // Rank 2 never reaches #2; it waits until the others gave up, then leaves.
          while (!comm.failed()) std::this_thread::sleep_for(10ms);
          released = true;
          return;
        }
        comm.allReduce(t)->wait();  // #2: ranks 0 and 1 only
      },
      options);
  ASSERT_EQ(failures.size(), 2u) << describe(failures);
  for (const auto& f : failures) {
    EXPECT_NE(f.message.find("all_reduce #2 on world"), std::string::npos) << f.message;
    EXPECT_TRUE(f.message.find("timed out after 1500 ms; ranks that did not reach it: 2") !=
                    std::string::npos ||
                f.message.find("rank 0 failed") != std::string::npos ||
                f.message.find("rank 1 failed") != std::string::npos)
        << f.message;
  }
  EXPECT_TRUE(released.load());  // rank 2 learned of the failure through the store
  ASSERT_FALSE(log->dumps.empty());
  // The flight recorder shows #1 completed and #2 not.
  bool saw_first = false, saw_second = false;
  for (const auto& entry : log->dumps[0]) {
    if (entry["seq"] == 1) saw_first = entry["state"] == "completed";
    if (entry["seq"] == 2) saw_second = entry["state"] != "completed";
  }
  EXPECT_TRUE(saw_first) << log->dumps[0].dump();
  EXPECT_TRUE(saw_second) << log->dumps[0].dump();
}

// Issue 21, the live hang view: while ranks 0 and 1 wait in all_reduce #2, which rank 2 has not
// called yet, each reports every progress period the op, its sequence number and its wait, and
// once it has waited a period, that rank 2 has not started it (read in the store; its heartbeat
// goes on, so it is not silent). Rank 2 joins once that was reported: nothing fails.
TEST_P(CommFailure, WaitingRanksReportTheOpAndTheRankThatHasNotStartedIt) {
  struct ProgressLog : CommObserver {
    std::mutex mutex;
    std::vector<CommProgress> reports;
    void onProgress(const CommProgress& progress) override {
      std::lock_guard<std::mutex> lock(mutex);
      reports.push_back(progress);
    }
    int namingTheAbsentRank() {
      std::lock_guard<std::mutex> lock(mutex);
      int n = 0;
      for (const CommProgress& p : reports) n += p.not_arrived == std::vector<int>{2};
      return n;
    }
  };
  CommOptions options;
  options.timeout = 20s;
  options.watchdog_period = 20ms;
  options.progress_period = 150ms;
  auto log = std::make_shared<ProgressLog>();
  options.observer = log;
  auto failures = runRanks(
      3,
      [&](Communicator& comm) {
        Tensor t = makeTensor(DType::kF32, 16, [](int64_t) { return 1.0; });
        comm.allReduce(t)->wait();  // #1: everyone
        if (comm.rank() == 2) {
          const auto deadline = Clock::now() + 10s;
          while (log->namingTheAbsentRank() < 2 && Clock::now() < deadline)
            std::this_thread::sleep_for(10ms);
        }
        comm.allReduce(t)->wait();  // #2
      },
      options);
  EXPECT_TRUE(failures.empty()) << describe(failures);
  ASSERT_GE(log->namingTheAbsentRank(), 2);
  std::lock_guard<std::mutex> lock(log->mutex);
  for (const CommProgress& p : log->reports) {
    if (p.not_arrived.empty()) continue;
    EXPECT_EQ(p.group, "world");
    EXPECT_EQ(p.period_s, 0.15);
    ASSERT_TRUE(p.op.has_value());
    EXPECT_EQ(*p.op, CommOp::kAllReduce);
    EXPECT_EQ(p.op_seq, 2u);
    EXPECT_EQ(p.started, 2u);
    EXPECT_EQ(p.completed, 1u);
    EXPECT_EQ(p.completed_op, CommOp::kAllReduce);
    EXPECT_GE(p.waiting_ms, 150);
    EXPECT_TRUE(p.silent.empty()) << "rank 2's watchdog beats on";
  }
}

TEST_P(CommFailure, AFailingRankAbortsThePeersLongBeforeTheirTimeout) {
  CommOptions options;
  // The peers must not wait for this, neither in wait() nor in their Gloo op, which the abort
  // unwinds so that destroying the communicators does not wait for it either.
  options.timeout = 20s;
  options.watchdog_period = 50ms;
  std::atomic<int64_t> slowest_ms{0};
  auto run_start = Clock::now();
  auto failures = runRanks(
      4,
      [&](Communicator& comm) {
        Tensor t = makeTensor(DType::kF32, 1 << 16, [](int64_t) { return 1.0; });
        comm.allReduce(t)->wait();
        if (comm.rank() == 3) {
          std::this_thread::sleep_for(200ms);
          comm.abort("simulated failure: loss became NaN");
          throw std::runtime_error("rank 3 gave up");
        }
        auto start = Clock::now();
        try {
          comm.allReduce(t)->wait();
        } catch (const Error& e) {
          auto ms =
              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
          slowest_ms = std::max<int64_t>(slowest_ms, ms);
          EXPECT_NE(e.message().find("rank 3 failed: simulated failure: loss became NaN"),
                    std::string::npos)
              << e.message();
          EXPECT_NE(e.message().find("all_reduce #2 on world"), std::string::npos) << e.message();
          throw;
        }
      },
      options);
  EXPECT_EQ(failures.size(), 4u) << describe(failures);
  // Within a few watchdog periods, far below the 20 s timeout.
  EXPECT_LT(slowest_ms.load(), 10000);
  EXPECT_LT(Clock::now() - run_start, 10s) << "a rank's Gloo op ran into its timeout";
}

TEST_P(CommFailure, ADeadRankFailsThePeersPromptly) {
  CommOptions options;
  options.timeout = 20s;
  options.watchdog_period = 50ms;
  std::atomic<int64_t> slowest_ms{0};
  // Rank 1's communicator goes away (its sockets close) while the others are inside all_reduce.
  TcpStoreOptions server_options;
  server_options.is_server = true;
  auto server = std::make_shared<TcpStore>(server_options);
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      Rendezvous rdv;
      rdv.rank = rank;
      rdv.world_size = 3;
      if (rank == 0)
        rdv.store = server;
      else {
        TcpStoreOptions client;
        client.port = server->port();
        rdv.store = std::make_shared<TcpStore>(client);
      }
      ProcessGroupOptions pg;
      pg.comm = options;
      pg.shared_memory = backend() == "shm";
      auto comm = makeCommunicator(rdv, pg);
      EXPECT_EQ(comm->backendName(), backend());
      Tensor t = makeTensor(DType::kF32, 1024, [](int64_t) { return 1.0; });
      comm->allReduce(t)->wait();
      if (rank == 1) {
        std::this_thread::sleep_for(200ms);
        comm.reset();  // dies: no failure published, only closed connections
        return;
      }
      auto start = Clock::now();
      try {
        comm->allReduce(t)->wait();
      } catch (const Error& e) {
        errors++;
        auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
        slowest_ms = std::max<int64_t>(slowest_ms, ms);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 2);
  EXPECT_LT(slowest_ms.load(), 30000);
}

TEST_P(CommFailure, OperationsAfterAFailureFailAtOnceWithTheRootCause) {
  CommOptions options;
  options.watchdog_period = 50ms;
  auto failures = runRanks(
      2,
      [&](Communicator& comm) {
        comm.abort("stop here");
        Tensor t = makeTensor(DType::kF32, 4, [](int64_t) { return 1.0; });
        auto work = comm.allReduce(t);
        try {
          work->wait(5s);
          FAIL() << "an operation succeeded after abort";
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), ErrorKind::kComm);
          EXPECT_NE(e.message().find("stop here"), std::string::npos) << e.message();
        }
        EXPECT_TRUE(work->isCompleted());
        EXPECT_FALSE(work->isSuccess());
      },
      options);
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(CommFailure, AnUnmatchedReceiveTimesOutNamingThePeer) {
  CommOptions options;
  options.timeout = 800ms;
  options.watchdog_period = 50ms;
  auto failures = runRanks(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 0) {
          Tensor t = Tensor::empty({8}, DType::kF32);
          comm.recv(t, 1, 5);  // rank 1 never sends
        } else {
          while (!comm.failed()) std::this_thread::sleep_for(10ms);
        }
      },
      options);
  ASSERT_EQ(failures.size(), 1u) << describe(failures);
  EXPECT_EQ(failures[0].rank, 0);
  EXPECT_NE(
      failures[0].message.find("recv #1 on world (from rank 1, tag 5) timed out after 800 ms"),
      std::string::npos)
      << failures[0].message;
}

// A reduce's or gather's other ranks are done once they have contributed: they may destroy their
// communicator while the root still waits for a slower rank, and the root must still finish.
TEST_P(CommFailure, RanksDoneWithARootedOpMayLeaveWhileTheRootWaitsForASlowerOne) {
  constexpr int kRoot = 2, kSlow = 1;
  CommOptions options;
  options.verify_calls = false;  // its exchange before every op would hold rank 0 back
  auto failures = runRanks(
      3,
      [&](Communicator& comm) {
        comm.barrier()->wait();  // the group is up (and its clocks aligned) on every rank
        if (comm.rank() == kSlow) std::this_thread::sleep_for(500ms);
        Tensor t = makeTensor(DType::kF32, 37, [&](int64_t i) { return comm.rank() + i; });
        comm.reduce(t, kRoot, ReduceOp::sum())->wait();
        Tensor in = makeTensor(DType::kI64, 5, [&](int64_t i) { return 10 * comm.rank() + i; });
        Tensor out = comm.rank() == kRoot ? Tensor::empty({15}, DType::kI64) : Tensor();
        comm.gather(out, in, kRoot)->wait();
        if (comm.rank() != kRoot) return;  // rank 0 leaves here, long before rank 1 arrives
        EXPECT_TRUE(
            sameValues(t, makeTensor(DType::kF32, 37, [](int64_t i) { return 3 + 3 * i; })));
        EXPECT_TRUE(sameValues(
            out, makeTensor(DType::kI64, 15, [](int64_t j) { return 10 * (j / 5) + j % 5; })));
      },
      options);
  EXPECT_ALL_RANKS_OK(failures);
}

INSTANTIATE_TEST_SUITE_P(Transports, CommFailure,
                         ::testing::Values(std::string("gloo"), std::string("shm")),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ringmaster
