// Issue 32, point 4: the bounded worker threads (launcher/worker_threads.h). Every task runs once
// on at most the given number of threads, for counts and bounds around 0, 1 and both sides of
// each other; a thread the system refuses, at every position, is an Error naming the cause with
// the started threads joined (a joinable std::thread destroyed would abort the test binary).
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "core/error.h"
#include "launcher/worker_threads.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;

// Counts the bodies running at once, and refuses the thread at position `refuse` (if any) as
// the system does at its thread limit.
struct CountingStarter {
  std::atomic<int> running{0}, most{0}, started{0};
  int refuse = -1;

  ThreadStarter starter() {
    return [this](std::function<void()> body) {
      if (started++ == refuse)
        throw std::system_error(EAGAIN, std::generic_category(), "thread creation refused");
      return std::thread([this, body = std::move(body)] {
        const int now = ++running;
        for (int seen = most; now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        body();
        --running;
      });
    };
  }
};

TEST(WorkerThreads, EveryTaskRunsOnceOnAtMostTheBoundOfThreads) {
  for (size_t count : {0, 1, 2, 7, 64, 300}) {
    for (size_t workers : {0, 1, 3, 64, 1000}) {
      SCOPED_TRACE(testing::Message() << count << " tasks on " << workers << " workers");
      CountingStarter counting;
      std::mutex mutex;
      std::multiset<size_t> ran;
      runOnWorkers(
          count, workers,
          [&](size_t i) {
            std::this_thread::sleep_for(100us);
            std::lock_guard<std::mutex> lock(mutex);
            ran.insert(i);
          },
          "for the test", counting.starter());
      ASSERT_EQ(ran.size(), count);
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(ran.count(i), 1u) << i;
      const size_t bound = std::min(count, std::max<size_t>(workers, 1));
      EXPECT_EQ(static_cast<size_t>(counting.started), bound);
      EXPECT_LE(static_cast<size_t>(counting.most), bound);
    }
  }
}

TEST(WorkerThreads, ATaskExceptionComesBackAfterEveryOtherTaskRan) {
  std::atomic<int> ran{0};
  EXPECT_THROW(runOnWorkers(
                   50, 4,
                   [&](size_t i) {
                     ++ran;
                     if (i == 7) throw std::runtime_error("task 7");
                   },
                   "for the test"),
               std::runtime_error);
  EXPECT_EQ(ran, 50);
}

TEST(WorkerThreads, ARefusedThreadAtAnyPositionIsAnErrorNamingTheCauseAfterTheStartedEnded) {
  for (int refuse = 0; refuse < 4; ++refuse) {
    SCOPED_TRACE(refuse);
    CountingStarter counting;
    counting.refuse = refuse;
    std::atomic<int> ran{0};
    try {
      runOnWorkers(
          200, 4,
          [&](size_t) {
            std::this_thread::sleep_for(5ms);
            ++ran;
          },
          "to connect to the hosts", counting.starter());
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
      EXPECT_NE(e.message().find("cannot start a thread to connect to the hosts"),
                std::string::npos)
          << e.message();
      EXPECT_NE(e.message().find(fmt::format("({} of 4 started)", refuse)), std::string::npos)
          << e.message();
      EXPECT_NE(e.message().find(std::generic_category().message(EAGAIN)), std::string::npos)
          << e.message();
    }
    EXPECT_EQ(counting.running, 0) << "a thread outlived the call";
    EXPECT_LT(ran, 200) << "the tasks not taken were run anyway";
  }
}

TEST(WorkerThreads, StartThreadsStopsAndJoinsTheStartedOnesAndLeavesTheOthersInPlace) {
  std::vector<std::thread> threads;
  threads.emplace_back([] {});  // started before: kept, joinable
  std::atomic<bool> stop{false};
  CountingStarter counting;
  counting.refuse = 2;
  EXPECT_THROW(startThreads(
                   5,
                   [&](size_t) {
                     while (!stop) std::this_thread::sleep_for(1ms);
                   },
                   threads, "to serve the hosts", [&] { stop = true; }, counting.starter()),
               Error);
  EXPECT_TRUE(stop);
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_EQ(counting.running, 0);
  threads[0].join();
}

}  // namespace
}  // namespace ringmaster
