// Every collective and point-to-point op over each CPU transport (Gloo's TCP, and shared memory:
// issue 36), for world sizes 1..4 (odd ones included) and element counts 0, 1, odd and large, each
// checked bit for bit against the host reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "comm_harness.h"
#include "comm_values.h"
#include "tensor/allocator.h"

namespace ringmaster {
namespace {

using namespace ringmaster::testing;

// Rank r's input element i: small integers, so every reduction is exact in every dtype.
double input(int rank, int64_t i) {
  return (rank + 1) + (i % 5);
}
// For the bitwise ops: one bit per rank plus bits shared by all.
double bits(int rank, int64_t i) {
  return (1 << rank) | ((i * 16) & 0xF0);
}

std::vector<Tensor> allInputs(int world, DType dtype, int64_t n, double (*f)(int, int64_t)) {
  std::vector<Tensor> out;
  for (int r = 0; r < world; ++r)
    out.push_back(makeTensor(dtype, n, [&](int64_t i) { return f(r, i); }));
  return out;
}

std::vector<ReduceOp> opsFor(DType dtype) {
  std::vector<ReduceOp> ops{ReduceOp::sum(), ReduceOp::avg(), ReduceOp::min(), ReduceOp::max()};
  if (dtype != DType::kBF16 && dtype != DType::kF16) ops.push_back(ReduceOp::product());
  if (isFloating(dtype))
    ops.push_back(ReduceOp::premulSum(0.5));
  else {
    ops.push_back(ReduceOp::band());
    ops.push_back(ReduceOp::bor());
    ops.push_back(ReduceOp::bxor());
  }
  return ops;
}

bool bitwise(ReduceOp op) {
  return op.kind == ReduceKind::kBand || op.kind == ReduceKind::kBor ||
         op.kind == ReduceKind::kBxor;
}

const std::vector<DType> kDTypes{DType::kF32, DType::kF64,  DType::kI32,
                                 DType::kI64, DType::kBF16, DType::kF16};

// (transport, world size): "gloo" is Gloo over TCP, "shm" the shared-memory backend.
class Collectives : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  const std::string& backend() const { return std::get<0>(GetParam()); }
  int world() const { return std::get<1>(GetParam()); }
  // The harness's runRanks over this case's transport.
  std::vector<RankFailure> runRanks(int world, const std::function<void(Communicator&)>& body,
                                    CommOptions options = {}) const {
    return testing::runRanks(world, body, std::move(options), backend());
  }
};

TEST_P(Collectives, AllReduceEveryOpAndDtype) {
  auto failures = runRanks(world(), [&](Communicator& comm) {
    for (DType dtype : kDTypes) {
      for (ReduceOp op : opsFor(dtype)) {
        for (int64_t n : {0, 1, 7, 1000}) {
          auto f = bitwise(op) ? bits : input;
          auto inputs = allInputs(world(), dtype, n, f);
          Tensor t = inputs[static_cast<size_t>(comm.rank())].clone();
          comm.allReduce(t, op)->wait();
          ASSERT_TRUE(sameValues(t, referenceReduce(inputs, op)))
              << toString(op.kind) << " " << commDTypeName(dtype) << " n=" << n;
        }
      }
    }
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, AllReduceOfManySegments) {
  // 3 MiB of float32 (an odd count): several of Gloo's segments per rank.
  const int64_t n = 786433;
  auto failures = runRanks(world(), [&](Communicator& comm) {
    auto inputs = allInputs(world(), DType::kF32, n, input);
    Tensor t = inputs[static_cast<size_t>(comm.rank())].clone();
    comm.allReduce(t)->wait();
    ASSERT_TRUE(sameValues(t, referenceReduce(inputs, ReduceOp::sum())));
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, QueuedAveragesOnOneBufferRunInOrder) {
  // Operations queued on one buffer without waiting run one after another, composed parts
  // included: AVG over Gloo is SUM and a division, and the next SUM must see the divided values.
  auto failures = runRanks(world(), [&](Communicator& comm) {
    // Large enough that a division running late would overlap the next operation's transfer.
    Tensor t = Tensor::full({1 << 21}, static_cast<float>(comm.rank() + 1));
    std::vector<WorkPtr> works;
    for (int i = 0; i < 4; ++i) works.push_back(comm.allReduce(t, ReduceOp::avg()));
    comm.allReduce(t, ReduceOp::sum())->wait();
    for (const WorkPtr& work : works) work->wait();
    // The mean of 1..n is (n + 1) / 2, unchanged by further averages, then summed n times.
    const float expected = static_cast<float>(world() * (world() + 1)) / 2.0f;
    for (float v : t.toFloatVector()) ASSERT_FLOAT_EQ(v, expected);
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  auto failures = runRanks(world(), [&](Communicator& comm) {
    for (int root = 0; root < comm.size(); ++root) {
      for (int64_t n : {0, 1, 1001}) {
        Tensor t = makeTensor(DType::kI64, n,
                              [&](int64_t i) { return comm.rank() == root ? 100 * root + i : -1; });
        comm.broadcast(t, root)->wait();
        ASSERT_TRUE(
            sameValues(t, makeTensor(DType::kI64, n, [&](int64_t i) { return 100 * root + i; })))
            << "root " << root << " n=" << n;
      }
    }
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, ReduceToEveryRoot) {
  auto failures = runRanks(world(), [&](Communicator& comm) {
    for (int root = 0; root < comm.size(); ++root) {
      for (auto [dtype, op] :
           std::vector<std::pair<DType, ReduceOp>>{{DType::kF32, ReduceOp::sum()},
                                                   {DType::kF64, ReduceOp::avg()},
                                                   {DType::kI32, ReduceOp::max()},
                                                   {DType::kI64, ReduceOp::bor()},
                                                   {DType::kF32, ReduceOp::premulSum(0.25)}}) {
        auto f = bitwise(op) ? bits : input;
        auto inputs = allInputs(world(), dtype, 37, f);
        Tensor t = inputs[static_cast<size_t>(comm.rank())].clone();
        comm.reduce(t, root, op)->wait();
        if (comm.rank() == root) {
          ASSERT_TRUE(sameValues(t, referenceReduce(inputs, op)))
              << toString(op.kind) << " root " << root;
        }
      }
    }
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, AllGather) {
  auto failures = runRanks(world(), [&](Communicator& comm) {
    for (DType dtype : {DType::kF32, DType::kI64, DType::kBF16}) {
      for (int64_t n : {0, 1, 7, 1000}) {
        Tensor in = makeTensor(dtype, n, [&](int64_t i) { return input(comm.rank(), i); });
        Tensor out = Tensor::empty({n * comm.size()}, dtype);
        comm.allGather(out, in)->wait();
        Tensor expected = makeTensor(dtype, n * comm.size(), [&](int64_t j) {
          return input(static_cast<int>(j / std::max<int64_t>(n, 1)), j % std::max<int64_t>(n, 1));
        });
        ASSERT_TRUE(sameValues(out, expected)) << commDTypeName(dtype) << " n=" << n;
      }
    }
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, ReduceScatter) {
  auto failures = runRanks(world(), [&](Communicator& comm) {
    for (auto [dtype, op] :
         std::vector<std::pair<DType, ReduceOp>>{{DType::kF32, ReduceOp::sum()},
                                                 {DType::kF64, ReduceOp::min()},
                                                 {DType::kF32, ReduceOp::avg()},
                                                 {DType::kBF16, ReduceOp::premulSum(2.0)},
                                                 {DType::kI64, ReduceOp::bxor()},
                                                 {DType::kI32, ReduceOp::product()}}) {
      for (int64_t block : {0, 1, 7, 1000}) {
        const int64_t n = block * comm.size();
        auto f = bitwise(op) ? bits : input;
        auto inputs = allInputs(world(), dtype, n, f);
        Tensor in = inputs[static_cast<size_t>(comm.rank())].clone();
        Tensor untouched = in.clone();
        Tensor out = Tensor::empty({block}, dtype);
        comm.reduceScatter(out, in, op)->wait();
        Tensor full = referenceReduce(inputs, op);
        Tensor mine =
            block == 0 ? Tensor::empty({0}, dtype) : full.narrowRows(comm.rank() * block, block);
        ASSERT_TRUE(sameValues(out, mine))
            << toString(op.kind) << " " << commDTypeName(dtype) << " block=" << block;
        ASSERT_TRUE(sameValues(in, untouched)) << "reduce_scatter changed its input";
      }
    }
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, AllToAll) {
  auto failures = runRanks(world(), [&](Communicator& comm) {
    const int n = comm.size();
    for (int64_t block : {1, 7, 300}) {
      // Rank i's block j carries 1000 * i + 10 * j + k.
      Tensor in = makeTensor(DType::kI32, block * n, [&](int64_t x) {
        return 1000 * comm.rank() + 10 * (x / block) + x % block;
      });
      Tensor out = Tensor::empty({block * n}, DType::kI32);
      comm.allToAll(out, in)->wait();
      Tensor expected = makeTensor(DType::kI32, block * n, [&](int64_t x) {
        return 1000 * (x / block) + 10 * comm.rank() + x % block;
      });
      ASSERT_TRUE(sameValues(out, expected)) << "block " << block;
    }
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, GatherAndScatterAtEveryRoot) {
  auto failures = runRanks(world(), [&](Communicator& comm) {
    const int n = comm.size();
    for (int root = 0; root < n; ++root) {
      const int64_t block = 5;
      Tensor in = makeTensor(DType::kF64, block, [&](int64_t i) { return input(comm.rank(), i); });
      Tensor gathered = comm.rank() == root ? Tensor::empty({block * n}, DType::kF64) : Tensor();
      comm.gather(gathered, in, root)->wait();
      if (comm.rank() == root) {
        ASSERT_TRUE(sameValues(gathered, makeTensor(DType::kF64, block * n, [&](int64_t j) {
                                 return input(static_cast<int>(j / block), j % block);
                               })));
      }
      Tensor source = comm.rank() == root ? makeTensor(DType::kF64, block * n,
                                                       [&](int64_t j) { return 7 * j + root; })
                                          : Tensor();
      Tensor mine = Tensor::empty({block}, DType::kF64);
      comm.scatter(mine, source, root)->wait();
      ASSERT_TRUE(sameValues(
          mine, makeTensor(DType::kF64, block,
                           [&](int64_t i) { return 7 * (comm.rank() * block + i) + root; })))
          << "scatter root " << root;
    }
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, BarrierHoldsEveryRankUntilAllArrive) {
  std::atomic<int> arrived{0};
  auto failures = runRanks(world(), [&](Communicator& comm) {
    if (comm.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    arrived.fetch_add(1);
    comm.barrier()->wait();
    ASSERT_EQ(arrived.load(), comm.size());
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, QueuedOperationsCompleteInAnyWaitOrder) {
  auto failures = runRanks(world(), [&](Communicator& comm) {
    std::vector<Tensor> tensors;
    std::vector<WorkPtr> works;
    for (int k = 0; k < 8; ++k) {
      tensors.push_back(
          makeTensor(DType::kF32, 257, [&](int64_t i) { return k + input(comm.rank(), i); }));
      works.push_back(comm.allReduce(tensors.back()));
    }
    for (int k = 7; k >= 0; --k) {
      works[static_cast<size_t>(k)]->wait();
      ASSERT_TRUE(works[static_cast<size_t>(k)]->isCompleted());
      ASSERT_TRUE(works[static_cast<size_t>(k)]->isSuccess());
      auto inputs = allInputs(world(), DType::kF32, 257, input);
      Tensor expected = referenceReduce(inputs, ReduceOp::sum());
      auto e = values(expected);
      auto got = values(tensors[static_cast<size_t>(k)]);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], e[i] + k * comm.size());
    }
  });
  EXPECT_ALL_RANKS_OK(failures);
}

// Issue 36: shm finishes a collective inside launch, so a small one called while nothing else is
// in flight runs on the caller's thread (CommOptions::caller_thread_max_bytes), sparing the
// hand-offs to the op thread and back. A larger one, any one with the option at 0 or after
// keepSmallCollectivesAsynchronous, and every one over Gloo go through the op thread; one-rank
// groups complete on the caller's thread. The observer hears each operation on the thread that
// finished it.
TEST_P(Collectives, ASmallCollectiveWithNothingInFlightRunsOnItsCallersThread) {
  struct Threads : CommObserver {
    std::mutex mutex;
    std::map<uint64_t, std::thread::id> by_seq;  // this rank's operations only
    void onOperation(const CommRecord& r) override {
      std::lock_guard<std::mutex> lock(mutex);
      by_seq[r.seq] = std::this_thread::get_id();
    }
  };
  constexpr int64_t kSmall = 257;                                                // floats
  const int64_t large = CommOptions::kCallerThreadMaxBytes / sizeof(float) + 1;  // just above
  enum class Setting { kDefault, kOptionZero, kKeptAsynchronous };
  for (Setting setting : {Setting::kDefault, Setting::kOptionZero, Setting::kKeptAsynchronous}) {
    SCOPED_TRACE(::testing::Message() << "setting " << static_cast<int>(setting));
    std::vector<std::shared_ptr<Threads>> observers;
    for (int r = 0; r < world(); ++r) observers.push_back(std::make_shared<Threads>());
    auto failures = testing::runRanksWith(
        world(),
        [&](Communicator& comm) {
          const auto caller = std::this_thread::get_id();
          if (setting == Setting::kKeptAsynchronous) comm.keepSmallCollectivesAsynchronous();
          for (int64_t n : {kSmall, large}) {
            auto inputs = allInputs(world(), DType::kF32, n, input);
            Tensor t = inputs[static_cast<size_t>(comm.rank())].clone();
            comm.allReduce(t)->wait();
            ASSERT_TRUE(sameValues(t, referenceReduce(inputs, ReduceOp::sum())));
          }
          Threads& seen = *observers[static_cast<size_t>(comm.rank())];
          std::lock_guard<std::mutex> lock(seen.mutex);
          ASSERT_EQ(seen.by_seq.size(), 2u);
          const bool small_here =
              world() == 1 || (backend() == "shm" && setting == Setting::kDefault);
          EXPECT_EQ(seen.by_seq.at(1) == caller, small_here);
          EXPECT_EQ(seen.by_seq.at(2) == caller, world() == 1);
        },
        [&](int rank) {
          CommOptions options;
          if (setting == Setting::kOptionZero) options.caller_thread_max_bytes = 0;
          options.observer = observers[static_cast<size_t>(rank)];
          return options;
        },
        backend());
    EXPECT_ALL_RANKS_OK(failures);
  }
}

// Two threads of each rank all-reduce at once, so one may run on its caller's thread while the
// other is queued: the backend still sees one operation at a time (TSan watches), in an order the
// communicator numbers the same on every rank. Every input is ones, so whichever calls the ranks
// pair, every result is the world size.
TEST_P(Collectives, CallersOnSeveralThreadsGetTheBackendOneAtATime) {
  constexpr int kThreads = 2, kCalls = 40;
  auto failures = runRanks(world(), [&](Communicator& comm) {
    std::mutex mutex;
    std::exception_ptr error;
    std::vector<std::thread> threads;
    for (int k = 0; k < kThreads; ++k) {
      threads.emplace_back([&] {
        try {
          for (int i = 0; i < kCalls; ++i) {
            Tensor t = Tensor::full({64}, 1.0f);
            comm.allReduce(t)->wait();
            for (float v : t.toFloatVector())
              if (v != static_cast<float>(world()))
                throw std::runtime_error(fmt::format("got {}, expected {}", v, world()));
          }
        } catch (...) {
          std::lock_guard<std::mutex> lock(mutex);
          if (!error) error = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    if (error) std::rethrow_exception(error);
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, TimingRecordsEveryOperation) {
  struct Collect : CommObserver {
    std::mutex mutex;
    std::vector<CommRecord> records;
    void onOperation(const CommRecord& r) override {
      std::lock_guard<std::mutex> lock(mutex);
      records.push_back(r);
    }
  };
  CommOptions options;
  auto shared = std::make_shared<Collect>();
  options.observer = shared;
  auto failures = runRanks(
      world(),
      [&](Communicator& comm) {
        Tensor t = makeTensor(DType::kF32, 1024, [](int64_t) { return 1.0; });
        comm.allReduce(t)->wait();
        Tensor out = Tensor::empty({1024 * comm.size()}, DType::kF32);
        comm.allGather(out, t)->wait();
        comm.barrier()->wait();
      },
      options);
  EXPECT_ALL_RANKS_OK(failures);
  ASSERT_EQ(shared->records.size(), static_cast<size_t>(3 * world()));
  for (const CommRecord& r : shared->records) {
    EXPECT_EQ(r.group, "world");
    EXPECT_EQ(r.group_size, world());
    EXPECT_GE(r.duration_ms, 0);
    if (r.op == CommOp::kAllReduce) {
      EXPECT_EQ(r.seq, 1u);
      EXPECT_EQ(r.bytes, 4096u);
    } else if (r.op == CommOp::kAllGather) {
      EXPECT_EQ(r.seq, 2u);
      EXPECT_EQ(r.bytes,
                4096u * static_cast<uint64_t>(world()));  // the output, as nccl-tests counts
    } else {
      EXPECT_EQ(r.op, CommOp::kBarrier);
      EXPECT_EQ(r.bytes, 0u);
    }
    if (r.duration_ms > 0 && world() > 1) {
      EXPECT_NEAR(r.algbw_gbps, r.bytes / (r.duration_ms * 1e6), 1e-9);
      EXPECT_NEAR(r.busbw_gbps, r.algbw_gbps * busFactor(r.op, world()), 1e-9);
    }
  }
}

// Issue 21, waiting versus transfer: each collective's record carries when this rank reached it
// and when it completed, on the aligned clock; the start is taken before the verify_calls
// exchange (on by default), so a rank that arrived early starts before the late one, and no rank
// completes before the last one started. Point-to-point and one-rank groups carry none.
TEST_P(Collectives, ACollectivesStartIsWhenEachRankReachedItBeforeTheCallsAreVerified) {
  constexpr auto kLate = std::chrono::milliseconds(300);
  struct Collect : CommObserver {
    std::mutex mutex;
    std::vector<CommRecord> records;
    void onOperation(const CommRecord& r) override {
      std::lock_guard<std::mutex> lock(mutex);
      records.push_back(r);
    }
  };
  CommOptions options;
  ASSERT_TRUE(options.verify_calls);
  auto shared = std::make_shared<Collect>();
  options.observer = shared;
  const int late = world() - 1;
  auto failures = runRanks(
      world(),
      [&](Communicator& comm) {
        comm.barrier()->wait();
        if (comm.rank() == late) std::this_thread::sleep_for(kLate);
        Tensor t = makeTensor(DType::kF32, 1024, [](int64_t) { return 1.0; });
        comm.allReduce(t)->wait();
        if (comm.size() > 1) {
          const int right = (comm.rank() + 1) % comm.size();
          const int left = (comm.rank() + comm.size() - 1) % comm.size();
          auto sent = comm.isend(t, right);
          Tensor got = Tensor::empty({1024}, DType::kF32);
          comm.irecv(got, left)->wait();
          sent->wait();
        }
      },
      options);
  EXPECT_ALL_RANKS_OK(failures);
  std::vector<CommRecord> reduces;
  for (const CommRecord& r : shared->records) {
    if (r.op == CommOp::kAllReduce) reduces.push_back(r);
    if (r.op == CommOp::kSend || r.op == CommOp::kRecv || world() == 1) {
      EXPECT_FALSE(r.start_us || r.end_us) << toString(r.op);
    } else {
      ASSERT_TRUE(r.start_us && r.end_us) << toString(r.op);
      EXPECT_LE(*r.start_us, *r.end_us);
    }
  }
  ASSERT_EQ(reduces.size(), static_cast<size_t>(world()));
  if (world() == 1) return;
  // Which record is the late rank's: the one that started last (ranks are threads of this
  // process; the records do not name their rank).
  std::sort(reduces.begin(), reduces.end(),
            [](const CommRecord& a, const CommRecord& b) { return *a.start_us < *b.start_us; });
  const int64_t last_start = *reduces.back().start_us;
  for (const CommRecord& r : reduces) EXPECT_GE(*r.end_us, last_start);
  // The early ranks' starts are before the late rank's by about its sleep (half of it allowed for
  // scheduling): had they been taken after the verify_calls exchange, which waits for the late
  // rank, they would all be after it.
  for (size_t i = 0; i + 1 < reduces.size(); ++i)
    EXPECT_LT(*reduces[i].start_us, last_start - kLate.count() * 1000 / 2);
}

// A receive posted long before its sender launches waits for it, and that wait is told apart from
// the transfer (small messages carry the sender's launch time in front of their bytes, large ones
// in a message of their own); a send launched after those receives completes when it does, not
// behind them.
TEST(PointToPoint, AReceivesWaitForItsSenderIsNotTransferAndASendIsNotHeldBehindIt) {
  constexpr auto kSenderLate = std::chrono::milliseconds(300);
  std::vector<std::optional<double>> waits(2), durations(2);
  bool send_done_first = false;
  auto failures = runRanks(2, [&](Communicator& comm) {
    Tensor small = makeTensor(DType::kF32, 64, [](int64_t i) { return i; });
    Tensor large = makeTensor(DType::kF32, 64 << 10, [](int64_t i) { return -i; });
    comm.barrier()->wait();
    if (comm.rank() == 0) {
      Tensor from_one = Tensor::empty({8}, DType::kF32);
      auto receive = comm.irecv(from_one, 1, 3);  // posted before rank 1 sends it
      std::this_thread::sleep_for(kSenderLate);
      comm.isend(small, 1, 1)->wait();
      comm.isend(large, 1, 2)->wait();
      receive->wait();
      return;
    }
    Tensor got_small = Tensor::empty({64}, DType::kF32);
    Tensor got_large = Tensor::empty({64 << 10}, DType::kF32);
    auto r1 = comm.irecv(got_small, 0, 1);
    auto r2 = comm.irecv(got_large, 0, 2);
    auto s3 = comm.isend(makeTensor(DType::kF32, 8, [](int64_t) { return 7; }), 0, 3);
    s3->wait();
    send_done_first = !r1->isCompleted() && !r2->isCompleted();
    r1->wait();
    r2->wait();
    EXPECT_EQ(values(got_small), values(small));
    EXPECT_EQ(values(got_large), values(large));
    waits = {r1->waitMs(), r2->waitMs()};
    durations = {r1->durationMs(), r2->durationMs()};
  });
  EXPECT_ALL_RANKS_OK(failures);
  EXPECT_TRUE(send_done_first) << "the send was held behind receives posted before it";
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i == 0 ? "small (staged)" : "large (header of its own)");
    ASSERT_TRUE(waits[i].has_value() && durations[i].has_value());
    // The sender launched at least kSenderLate after the barrier both passed; allow the ranks'
    // barrier exits to differ by a scheduling slice.
    EXPECT_GE(*waits[i], kSenderLate.count() - 50.0);
    EXPECT_LE(*waits[i], *durations[i]);
  }
}

TEST_P(Collectives, SendAndReceiveAroundTheRingWithTags) {
  if (world() == 1) GTEST_SKIP() << "point-to-point needs two ranks";
  auto failures = runRanks(world(), [&](Communicator& comm) {
    const int n = comm.size();
    const int right = (comm.rank() + 1) % n, left = (comm.rank() + n - 1) % n;
    // Two messages with different tags, received in the opposite order of sending.
    Tensor first = makeTensor(DType::kF32, 100, [&](int64_t i) { return comm.rank() * 1000 + i; });
    Tensor second = makeTensor(DType::kF32, 3, [&](int64_t i) { return -comm.rank() - i; });
    auto s1 = comm.isend(first, right, 1);
    auto s2 = comm.isend(second, right, 2);
    Tensor got_second = Tensor::empty({3}, DType::kF32);
    Tensor got_first = Tensor::empty({100}, DType::kF32);
    auto r2 = comm.irecv(got_second, left, 2);
    auto r1 = comm.irecv(got_first, left, 1);
    r2->wait();
    r1->wait();
    s1->wait();
    s2->wait();
    ASSERT_TRUE(sameValues(
        got_first, makeTensor(DType::kF32, 100, [&](int64_t i) { return left * 1000 + i; })));
    ASSERT_TRUE(
        sameValues(got_second, makeTensor(DType::kF32, 3, [&](int64_t i) { return -left - i; })));
    // Blocking send / recv between ranks 0 and 1, the others idle.
    if (comm.rank() == 0) comm.send(makeTensor(DType::kI64, 1, [](int64_t) { return 42; }), 1);
    if (comm.rank() == 1) {
      Tensor x = Tensor::empty({1}, DType::kI64);
      comm.recv(x, 0);
      ASSERT_EQ(values(x)[0], 42);
    }
  });
  EXPECT_ALL_RANKS_OK(failures);
}

// Issue 36: a send / recv pair goes on while the group's other ranks are done and have destroyed
// their communicators (over shared memory a waiting receive checks its peer's life, and only its
// peer's: a departed third rank once failed it). The receive waits long enough to sleep and check.
TEST_P(Collectives, APointToPointPairOutlivesTheRanksThatLeft) {
  if (world() < 3) GTEST_SKIP() << "needs a rank beside the pair";
  auto failures = runRanks(world(), [&](Communicator& comm) {
    if (comm.rank() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      comm.send(makeTensor(DType::kI64, 3, [](int64_t i) { return 7 + i; }), 1, 9);
    } else if (comm.rank() == 1) {
      Tensor x = Tensor::empty({3}, DType::kI64);
      comm.recv(x, 0, 9);
      ASSERT_EQ(values(x), (std::vector<double>{7, 8, 9}));
    }
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, SubGroupsRunConcurrentlyWithTheWorld) {
  auto failures = runRanks(world(), [&](Communicator& comm) {
    std::vector<int> evens, odds;
    for (int r = 0; r < comm.size(); ++r) (r % 2 ? odds : evens).push_back(r);
    auto even_group = comm.newGroup(evens, "evens");
    auto odd_group = odds.empty() ? nullptr : comm.newGroup(odds, "odds");
    auto& mine = comm.rank() % 2 ? odd_group : even_group;
    ASSERT_NE(mine, nullptr);
    ASSERT_EQ((comm.rank() % 2 ? even_group : odd_group), nullptr);  // not a member of the other
    const auto& members = comm.rank() % 2 ? odds : evens;
    ASSERT_EQ(mine->size(), static_cast<int>(members.size()));
    // Both groups at once, from two threads of each rank.
    Tensor on_world = makeTensor(DType::kF32, 4096, [&](int64_t) { return comm.rank() + 1; });
    Tensor on_group = makeTensor(DType::kF32, 4096, [&](int64_t) { return comm.rank() + 1; });
    std::thread world_thread([&] {
      for (int k = 0; k < 5; ++k) {
        Tensor t = on_world.clone();
        comm.allReduce(t)->wait();
        if (k == 4) on_world = t;
      }
    });
    for (int k = 0; k < 5; ++k) {
      Tensor t = on_group.clone();
      mine->allReduce(t)->wait();
      if (k == 4) on_group = t;
    }
    world_thread.join();
    double group_sum = 0;
    for (int r : members) group_sum += r + 1;
    ASSERT_EQ(values(on_world)[4095], comm.size() * (comm.size() + 1) / 2.0);
    ASSERT_EQ(values(on_group)[0], group_sum);
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST_P(Collectives, MalformedCallsAreRefusedBeforeAnythingIsSent) {
  auto failures = runRanks(world(), [&](Communicator& comm) {
    Tensor t = Tensor::empty({4}, DType::kF32);
    EXPECT_THROW(comm.broadcast(t, comm.size()), Error);
    EXPECT_THROW(comm.allGather(Tensor::empty({3}, DType::kF32), t), Error);
    EXPECT_THROW(comm.allReduce(t, ReduceOp::band()), Error);
    EXPECT_THROW(comm.isend(t, comm.rank()), Error);
    EXPECT_THROW(comm.newGroup({0, 0}), Error);
    // And the communicator still works afterwards.
    Tensor ok = makeTensor(DType::kF32, 4, [](int64_t) { return 1.0; });
    comm.allReduce(ok)->wait();
    ASSERT_EQ(values(ok)[0], comm.size());
  });
  EXPECT_ALL_RANKS_OK(failures);
}

// The host allocator's live bytes each time an all-gather or all-reduce is finished, before its
// caller hears of it.
class LiveBytesWhenFinished : public CommObserver {
 public:
  void onOperation(const CommRecord& record) override {
    if (record.op == CommOp::kBarrier) return;
    std::lock_guard<std::mutex> lock(mutex_);
    live_.push_back(allocatorFor(Device::cpu()).stats().allocated_bytes);
  }
  std::vector<uint64_t> live() {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_;
  }

 private:
  std::mutex mutex_;
  std::vector<uint64_t> live_;
};

// An operation's tensors are the communicator's until it is done and no longer: a caller that
// dropped its own references before wait() has that memory back when it hears the operation is
// done, not whenever the completion thread next gets a core (FSDP's measured peak depended on it:
// a unit's 16-bit all-gather buffers could outlive their widening into its backward). Rank 0
// drops its buffers; rank 1 keeps its own until both are done, so rank 0's observer sees the
// allocator's bytes less rank 0's buffers exactly.
TEST(OperationBuffers, AreReleasedBeforeTheCallerHearsTheOperationIsDone) {
  auto observer = std::make_shared<LiveBytesWhenFinished>();
  std::vector<uint64_t> expected;  // rank 0's
  std::atomic<int> dropped{0};     // the operations whose buffers rank 0 has dropped
  constexpr int64_t kElements = 300000;
  auto failures = runRanksWith(
      2,
      [&](Communicator& comm) {
        for (int operation = 0; operation < 2; ++operation) {
          const bool gather = operation == 0;
          Tensor in =
              makeTensor(DType::kF32, kElements, [&](int64_t i) { return input(comm.rank(), i); });
          Tensor out = gather ? Tensor::empty({2 * kElements}) : Tensor();
          comm.barrier()->wait();  // both ranks' buffers exist before rank 0 counts
          const uint64_t before = allocatorFor(Device::cpu()).stats().allocated_bytes;
          // Rank 1 joins the operation only once rank 0 has dropped its buffers, so that it cannot
          // be done before.
          if (comm.rank() == 1)
            while (dropped.load() == operation) std::this_thread::yield();
          WorkPtr work = gather ? comm.allGather(out, in) : comm.allReduce(in);
          if (comm.rank() == 0) {
            const size_t own = CachingAllocator::roundSize(in.nbytes()) +
                               (gather ? CachingAllocator::roundSize(out.nbytes()) : 0);
            expected.push_back(before - own);
            in = Tensor();
            out = Tensor();
            dropped.fetch_add(1);
          }
          work->wait();
          comm.barrier()->wait();  // rank 1's buffers live until rank 0's operation is done
        }
      },
      [&](int rank) {
        CommOptions options;
        options.verify_calls = false;  // its exchange allocates tensors of its own
        if (rank == 0) options.observer = observer;
        return options;
      });
  EXPECT_ALL_RANKS_OK(failures);
  EXPECT_EQ(observer->live(), expected);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, Collectives,
                         ::testing::Combine(::testing::Values(std::string("gloo"),
                                                              std::string("shm")),
                                            ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_world" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace ringmaster
