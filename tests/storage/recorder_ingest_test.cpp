// Issue 36 (ingest): what the recorder's faster ingest must keep. Events spanning any batch
// boundary all land, each step counted once in its rollups; the write-ahead log is copied into the
// database file while the recorder records (the log stays bounded); and a recorder SIGKILLed
// mid-batch, with checkpoints behind it, loses nothing it had committed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "db/database.h"
#include "recorder/recorder.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster::storage {
namespace {

namespace fs = std::filesystem;
using testing::queryInt;

// Rank `rank`'s event of `step`: a step event and, before it, two all-reduces.
std::vector<TelemetryEvent> stepEvents(int rank, int64_t step, uint64_t& seq) {
  std::vector<TelemetryEvent> events;
  for (const uint64_t bytes : {uint64_t{1} << 20, uint64_t{4}}) {
    events.push_back({.rank = rank,
                      .seq = seq++,
                      .time = 1.8e9 + static_cast<double>(step),
                      .body = CommEvent{.op = "all_reduce",
                                        .group = "world",
                                        .bytes = bytes,
                                        .dtype = "float32",
                                        .duration_ms = 1.5,
                                        .algbw_gbps = 0.7,
                                        .busbw_gbps = 1.05,
                                        .step = step}});
  }
  events.push_back({.rank = rank,
                    .seq = seq++,
                    .time = 1.8e9 + static_cast<double>(step),
                    .body = StepEvent{.step = step,
                                      .loss = 1.0 / static_cast<double>(step) + rank,
                                      .lr = 1e-3,
                                      .samples = 64,
                                      .step_ms = 10,
                                      .compute_ms = 7,
                                      .comm_ms = 4}});
  return events;
}

// `ranks` ranks' `steps` steps, interleaved step by step as a DDP run sends them.
std::vector<TelemetryEvent> interleavedRun(int ranks, int64_t steps) {
  std::vector<uint64_t> seqs(static_cast<size_t>(ranks), 0);
  std::vector<TelemetryEvent> events;
  for (int64_t step = 1; step <= steps; ++step)
    for (int rank = 0; rank < ranks; ++rank)
      for (TelemetryEvent& e : stepEvents(rank, step, seqs[static_cast<size_t>(rank)]))
        events.push_back(std::move(e));
  return events;
}

// SQLite's automatic checkpoint: it copies the log once a commit leaves this many pages in it.
constexpr unsigned kLogPages = 1000;

class RecorderIngestTest : public testing::StorageTest {
 protected:
  int64_t newRun(const std::string& path, int ranks) {
    Database db(path);
    return createRun(db,
                     {.name = "ingest", .spec_json = "{}", .strategy = "ddp", .world_size = ranks});
  }
};

// Every batch size from one event to more than the run, with queues smaller and larger than a
// batch: every row lands once, and each rollup width counts every step once with its sum.
TEST_F(RecorderIngestTest, EventsSpanningAnyBatchBoundaryAllLandCountedOnceInTheirRollups) {
  constexpr int kRanks = 3;
  constexpr int64_t kSteps = 700;  // buckets of 64 and 512 both close and stay open
  const std::vector<TelemetryEvent> events = interleavedRun(kRanks, kSteps);
  struct Sizes {
    size_t queue, batch;
  };
  for (const Sizes sizes : {Sizes{1, 1}, Sizes{5, 2}, Sizes{64, 7}, Sizes{16, 64},
                            Sizes{1 << 14, 8192}, Sizes{1 << 14, 1 << 14}}) {
    SCOPED_TRACE(fmt::format("queue {}, batch {}", sizes.queue, sizes.batch));
    const std::string path = (dir_ / fmt::format("q{}b{}.db", sizes.queue, sizes.batch)).string();
    const int64_t run = newRun(path, kRanks);
    {
      Recorder recorder(path, run, 0,
                        {.queue_capacity = sizes.queue,
                         .batch_size = sizes.batch,
                         .commit_delay = std::chrono::milliseconds(1)});
      for (const TelemetryEvent& e : events) ASSERT_TRUE(recorder.submit(e));
      recorder.flush();
      EXPECT_EQ(recorder.counts().stored, static_cast<int64_t>(events.size()));
    }
    Database db(path);
    EXPECT_EQ(queryInt(db, "SELECT count(*) FROM steps"), kRanks * kSteps);
    EXPECT_EQ(queryInt(db, "SELECT count(DISTINCT rank || ':' || step) FROM steps"),
              kRanks * kSteps);
    EXPECT_EQ(queryInt(db, "SELECT count(*) FROM comm_events"), 2 * kRanks * kSteps);
    EXPECT_EQ(queryInt(db,
                       "SELECT count(*) FROM comm_events WHERE op = 'all_reduce' AND "
                       "group_name = 'world' AND dtype = 'float32' AND dim = 'world'"),
              2 * kRanks * kSteps);
    for (const int width : {64, 512, 4096}) {
      SCOPED_TRACE(fmt::format("width {}", width));
      const std::string rollup = fmt::format(
          "FROM series_rollups r WHERE r.metric = 'loss' AND "
          "r.width = {}",
          width);
      EXPECT_EQ(queryInt(db, "SELECT sum(n) " + rollup), kRanks * kSteps);
      for (int rank = 0; rank < kRanks; ++rank) {
        const std::string mine = fmt::format("{} AND r.rank = {}", rollup, rank);
        EXPECT_EQ(queryInt(db, "SELECT sum(n) " + mine), kSteps);
        EXPECT_EQ(queryInt(db, "SELECT min(first_step) " + mine), 1);
        EXPECT_EQ(queryInt(db, "SELECT max(last_step) " + mine), kSteps);
        // The sum of every loss, to a millionth: no point counted twice or left out.
        EXPECT_EQ(queryInt(db, "SELECT round(sum(sum) * 1e6) " + mine),
                  queryInt(db, fmt::format("SELECT round(sum(loss) * 1e6) FROM steps WHERE "
                                           "rank = {}",
                                           rank)));
      }
    }
  }
}

// The log is copied into the database file while the run is still being recorded (a log that is
// never copied grows for the whole run, and every reader pays for it).
TEST_F(RecorderIngestTest, TheLogIsCopiedIntoTheDatabaseFileWhileRecording) {
  const std::string path = (dir_ / "checkpoint.db").string();
  const int64_t run = newRun(path, 2);
  const auto initial_size = fs::file_size(path);
  // A commit per event: each writes a few pages, so the log passes kLogPages quickly.
  Recorder recorder(path, run, 0, {.batch_size = 1, .commit_delay = std::chrono::milliseconds(0)});
  const std::vector<TelemetryEvent> events = interleavedRun(2, 1500);
  for (const TelemetryEvent& e : events) ASSERT_TRUE(recorder.submit(e));
  recorder.flush();
  ASSERT_GT(fs::file_size(path + "-wal"), kLogPages * 16 * 1024u)
      << "too few pages were written to need a checkpoint";
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (fs::file_size(path) <= initial_size && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GT(fs::file_size(path), initial_size) << "the log was never copied into the database";
  // The log is reused from its start after a checkpoint: it stays within a few checkpoints' size.
  EXPECT_LT(fs::file_size(path + "-wal"), 8u * kLogPages * 16 * 1024);
}

// A child process records two ranks' steps and reports each count it has flushed; it is
// SIGKILLed mid-stream, after many checkpoints. Every event it had flushed is in the database,
// each rank's steps without a gap, and each step in its rollups once (they commit together).
TEST_F(RecorderIngestTest, ARecorderKilledMidBatchLosesNothingItCommitted) {
  const std::string path = (dir_ / "killed.db").string();
  constexpr int kRanks = 2;
  const int64_t run = newRun(path, kRanks);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[0]);
    alarm(60);  // never outlives a parent that failed to kill it
    Recorder recorder(path, run, 0,
                      {.batch_size = 64, .commit_delay = std::chrono::milliseconds(1)});
    std::vector<uint64_t> seqs(kRanks, 0);
    for (int64_t step = 1;; ++step) {
      for (int rank = 0; rank < kRanks; ++rank)
        for (TelemetryEvent& e : stepEvents(rank, step, seqs[static_cast<size_t>(rank)]))
          recorder.submit(std::move(e));
      if (step % 100 == 0) {
        recorder.flush();
        const int64_t flushed = step;
        if (write(pipe_fds[1], &flushed, sizeof flushed) != sizeof flushed) _exit(1);
      }
    }
  }
  close(pipe_fds[1]);
  // Killed once it has flushed enough steps for many checkpoints (6,000 events a 1,000 steps).
  int64_t flushed = 0, report = 0;
  for (;;) {
    const ssize_t got = read(pipe_fds[0], &report, sizeof report);
    if (got < 0 && errno == EINTR) continue;
    if (got != sizeof report) break;
    flushed = report;
    if (flushed >= 8000) break;
  }
  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  close(pipe_fds[0]);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the child ended by itself: status " << status << ", after flushing " << flushed
      << " steps";
  ASSERT_GE(flushed, 8000) << "the child stopped reporting before it was killed";

  Database db(path);
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE(fmt::format("rank {}", rank));
    const std::string mine = fmt::format("FROM steps WHERE rank = {}", rank);
    const int64_t steps = queryInt(db, "SELECT count(*) " + mine);
    EXPECT_GE(steps, flushed);
    EXPECT_EQ(queryInt(db, "SELECT min(step) " + mine), 1);
    EXPECT_EQ(queryInt(db, "SELECT max(step) " + mine), steps);  // no gap
    // A step's all-reduces come before its step event: a batch may end between them.
    const std::string comm = fmt::format("FROM comm_events WHERE rank = {}", rank);
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) {} AND step <= {}", comm, steps)),
              2 * steps);
    EXPECT_LE(queryInt(db, fmt::format("SELECT count(*) {} AND step > {}", comm, steps)), 2);
    EXPECT_LE(queryInt(db, "SELECT max(step) " + comm), steps + 1);
    EXPECT_EQ(
        queryInt(db, fmt::format("SELECT sum(n) FROM series_rollups r WHERE r.metric = 'loss' "
                                 "AND r.width = "
                                 "64 AND r.rank = {}",
                                 rank)),
        steps);
  }
}

}  // namespace
}  // namespace ringmaster::storage
