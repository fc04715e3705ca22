// The flood test of issue 16 (finding 3): four fake ranks push 100,000 step events each, with
// their hello and done, into the real Recorder as fast as four threads can, and every event is
// stored: the recorder makes the producers wait rather than drop. Prints the recorder's peak
// memory (its queue's high-water mark and the process's peak resident size); no timed assertion.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "db/database.h"
#include "recorder/recorder.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster::storage {
namespace {

constexpr int kRanks = 4;
constexpr int64_t kSteps = 100'000;

// Rank `rank`'s whole stream as the lines a worker writes: hello, kSteps steps, done.
std::vector<std::string> floodLines(int rank) {
  std::vector<std::string> lines;
  lines.reserve(kSteps + 2);
  uint64_t seq = 0;
  auto add = [&](EventBody body) {
    lines.push_back(encodeEvent({.rank = rank,
                                 .seq = seq,
                                 .time = 1.8e9 + static_cast<double>(seq) * 1e-3,
                                 .body = std::move(body)}));
    ++seq;
  };
  add(HelloEvent{.world_size = kRanks, .local_rank = rank, .host = "flood", .strategy = "ddp"});
  for (int64_t step = 1; step <= kSteps; ++step) {
    add(StepEvent{.step = step,
                  .loss = 1.0 / static_cast<double>(step),
                  .lr = 1e-3,
                  .samples = 32,
                  .step_ms = 1,
                  .compute_ms = 0.8,
                  .comm_ms = 0.2});
  }
  add(DoneEvent{.status = DoneStatus::kCompleted, .final_step = kSteps, .wall_s = 1});
  return lines;
}

int64_t peakResidentKiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

class RecorderFloodTest : public testing::StorageTest {};

TEST_F(RecorderFloodTest, FourRanksOfAHundredThousandStepsAreAllStoredDoneIncluded) {
  const std::string path = (dir_ / "flood.db").string();
  int64_t run = 0;
  {
    Database db(path);
    run = createRun(db,
                    {.name = "flood", .spec_json = "{}", .strategy = "ddp", .world_size = kRanks});
  }
  std::vector<std::vector<std::string>> streams;
  for (int rank = 0; rank < kRanks; ++rank) streams.push_back(floodLines(rank));
  const int64_t rss_before = peakResidentKiB();
  RecorderCounts counts;
  {
    Recorder recorder(path, run, 0);
    std::vector<std::thread> ranks;
    for (int rank = 0; rank < kRanks; ++rank) {
      ranks.emplace_back([&, rank] {
        for (const std::string& line : streams[static_cast<size_t>(rank)])
          recorder.submitLine(line);
      });
    }
    for (std::thread& thread : ranks) thread.join();
    recorder.flush();
    EXPECT_EQ(recorder.failure(), "");
    counts = recorder.counts();
  }
  const int64_t rss_after = peakResidentKiB();
  fmt::print(
      "flood: {} events stored; the recorder's queue held at most {} events; peak RSS grew "
      "by {} KiB (to {} KiB, the test's own {} MB of lines included)\n",
      counts.stored, counts.peak_queued, rss_after - rss_before, rss_after,
      streams.size() * streams[0].size() * streams[0][1].size() / 1'000'000);

  const int64_t per_rank = kSteps + 2;
  EXPECT_EQ(counts.stored, kRanks * per_rank);
  EXPECT_EQ(counts.dropped, 0);
  EXPECT_EQ(counts.malformed + counts.rejected, 0);
  Database db(path);
  EXPECT_EQ(testing::queryInt(db, "SELECT events_stored FROM attempts"), kRanks * per_rank);
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE(fmt::format("rank {}", rank));
    const std::string where = fmt::format("WHERE run_id = {} AND rank = {}", run, rank);
    EXPECT_EQ(testing::queryInt(db, "SELECT count(*) FROM steps " + where), kSteps);
    EXPECT_EQ(testing::queryInt(db, "SELECT max(step) FROM steps " + where), kSteps);
    EXPECT_EQ(testing::queryText(db, "SELECT status FROM ranks " + where), "completed");
    EXPECT_EQ(testing::storedEvents(db, rank), per_rank);
  }
}

}  // namespace
}  // namespace ringmaster::storage
