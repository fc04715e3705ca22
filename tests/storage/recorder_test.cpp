// The recorder against a real SQLite file: every kind of event from several ranks lands in its
// table; replayed and reordered events are stored once; malformed lines, oversized lines and
// events from ranks the run does not have are counted and logged, never stored; a full queue makes
// the producer wait, never drops, and a failed writer releases it; runs of a dead recorder become
// `interrupted`.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "db/database.h"
#include "db/series_summary.h"
#include "recorder/recorder.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster::storage {
namespace {

namespace fs = std::filesystem;

class RecorderTest : public testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    path_ = (dir_ / "runs.db").string();
    db_.emplace(path_);
    run_ = createRun(*db_, {.name = "test", .spec_json = "{}", .strategy = "ddp", .world_size = 3});
  }
  void TearDown() override {
    db_.reset();
    StorageTest::TearDown();
  }
  int64_t count(const std::string& sql) { return testing::queryInt(*db_, sql); }
  std::string path_;
  std::optional<Database> db_;
  int64_t run_ = 0;
};

// A rank's stream: hello, `steps` steps each with one all_reduce and one pipeline action, done.
std::vector<TelemetryEvent> rankStream(int rank, int steps) {
  std::vector<TelemetryEvent> events;
  uint64_t seq = 0;
  auto add = [&](EventBody body) {
    events.push_back({.rank = rank, .seq = seq++, .time = 1e9 + seq, .body = std::move(body)});
  };
  add(HelloEvent{.world_size = 3,
                 .host = "h" + std::to_string(rank),
                 .pid = 100 + rank,
                 .device = "cpu",
                 .strategy = "ddp"});
  for (int step = 1; step <= steps; ++step) {
    add(CommEvent{.seq_op = static_cast<uint64_t>(step),
                  .op = "all_reduce",
                  .group = "world",
                  .bytes = 4096,
                  .dtype = "float32",
                  .duration_ms = 0.5,
                  .step = step});
    add(SchedEvent{.step = step, .stage = rank, .micro_batch = 0, .start_us = 10, .end_us = 20});
    add(StepEvent{.step = step, .loss = 2.0 / step, .samples = 32, .step_ms = 5, .accuracy = 0.5});
  }
  add(LogEvent{.message = "hello from " + std::to_string(rank)});
  add(DoneEvent{.final_step = steps});
  return events;
}

TEST_F(RecorderTest, StoresEveryKindOfEventFromEveryRank) {
  {
    const auto started = std::chrono::steady_clock::now();
    Recorder recorder(path_, run_, 0);
    for (int rank = 0; rank < 3; ++rank)
      for (const TelemetryEvent& e : rankStream(rank, 10))
        EXPECT_TRUE(recorder.submitLine(encodeEvent(e)));
    recorder.flush();
    EXPECT_EQ(recorder.counts().stored, 3 * (10 * 3 + 3));
    // The writer's own CPU time: some, and no more than the time it has existed (a process-wide
    // clock would count the other threads too).
    const double alive_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_GT(recorder.counts().writer_cpu_s, 0);
    EXPECT_LE(recorder.counts().writer_cpu_s, alive_s);
  }
  EXPECT_EQ(count("SELECT count(*) FROM ranks WHERE status = 'completed'"), 3);
  EXPECT_EQ(count("SELECT count(*) FROM comm_events"), 30);
  EXPECT_EQ(count("SELECT count(*) FROM sched_events"), 30);
  // A row per step event; its series are the 11 required fields, accuracy and the wall time.
  EXPECT_EQ(count("SELECT count(*) FROM steps"), 3 * 10);
  EXPECT_EQ(count("SELECT count(*) FROM scalar_points"), 3 * 10 * 13);
  EXPECT_EQ(count("SELECT count(*) FROM scalars"), 0) << "only metrics outside the step event";
  // Every series is summarised per bucket of 64, 512 and 4096 steps: steps 1..10 are one bucket.
  // The step columns' buckets are one row per rank and width, holding every column.
  EXPECT_EQ(count("SELECT count(*) FROM series_rollups WHERE width = 64"), 3 * 13);
  EXPECT_EQ(count("SELECT count(*) FROM series_rollups WHERE width = 512"), 3 * 13);
  EXPECT_EQ(count("SELECT count(*) FROM series_rollups WHERE width = 4096"), 3 * 13);
  EXPECT_EQ(count("SELECT sum(n) FROM series_rollups WHERE width = 64"), 3 * 10 * 13);
  EXPECT_EQ(count("SELECT count(*) FROM step_rollups"), 3 * 3);
  EXPECT_EQ(count("SELECT count(*) FROM scalar_rollups"), 0) << "only metrics outside the step";
  EXPECT_EQ(count("SELECT count(*) FROM scalar_points WHERE metric = 'loss' AND rank = 2"), 10);
  EXPECT_EQ(count("SELECT count(*) FROM steps WHERE grad_norm IS NOT NULL"), 0) << "absent";
  EXPECT_EQ(count("SELECT count(*) FROM logs WHERE rank IS NOT NULL"), 3);
  EXPECT_EQ(count("SELECT events_stored FROM attempts"), 3 * 33);
}

TEST_F(RecorderTest, ReplayedAndReorderedEventsAreStoredOnce) {
  std::vector<TelemetryEvent> events;
  for (int rank = 0; rank < 3; ++rank) {
    std::vector<TelemetryEvent> stream = rankStream(rank, 20);
    events.insert(events.end(), stream.begin(), stream.end());
  }
  std::vector<TelemetryEvent> replayed = events;
  replayed.insert(replayed.end(), events.begin(), events.begin() + 40);
  std::shuffle(replayed.begin(), replayed.end(), std::mt19937(3));
  {
    Recorder recorder(path_, run_, 0, {.batch_size = 16});
    for (const TelemetryEvent& e : replayed) recorder.submit(e);
    recorder.flush();
    EXPECT_EQ(recorder.counts().stored, static_cast<int64_t>(events.size()));
    EXPECT_EQ(recorder.counts().duplicates, 40);
  }
  {
    Recorder again(path_, run_, 0);  // a whole stream replayed by a later recorder
    for (const TelemetryEvent& e : events) again.submit(e);
    again.flush();
    EXPECT_EQ(again.counts().stored, 0);
  }
  EXPECT_EQ(count("SELECT sum(last_seq - first_seq + 1) FROM seq_ranges"),
            static_cast<int64_t>(events.size()));
  EXPECT_EQ(count("SELECT count(*) FROM seq_ranges"), 3) << "one range per rank once all arrived";
  EXPECT_EQ(count("SELECT count(*) FROM comm_events"), 60);
  EXPECT_EQ(count("SELECT events_duplicate FROM attempts"),
            40 + static_cast<int64_t>(events.size()));
  // The bucket summaries, built batch by batch from shuffled events, equal the points' own.
  for (int64_t width : kRollupWidths) {
    EXPECT_EQ(count(fmt::format(
                  "SELECT count(*) FROM series_rollups r "
                  "JOIN (SELECT metric, rank, step / {0} AS bucket, count(*) AS n, min(value) AS "
                  "lo, max(value) AS hi, max(step) AS last FROM scalar_points GROUP BY 1, 2, 3) g "
                  "ON g.metric = r.metric AND g.rank = r.rank AND g.bucket = r.bucket "
                  "WHERE r.width = {0} AND r.n = g.n AND r.min = g.lo AND r.max = g.hi AND "
                  "r.last_step = g.last AND r.last_value = (SELECT value FROM scalar_points s "
                  "WHERE s.metric = r.metric AND s.rank = r.rank AND s.step = r.last_step)",
                  width)),
              count(fmt::format("SELECT count(DISTINCT metric || '/' || rank || '/' || "
                                "(step / {})) FROM scalar_points",
                                width)));
  }
}

// Fuzzed telemetry: valid streams with lines replayed, reordered, truncated, bit-flipped and
// spliced. Whatever decodes is stored exactly once per (rank, seq), whatever does not is counted
// as malformed, and the counts add up to what was submitted.
TEST_F(RecorderTest, FuzzedTelemetryIsStoredExactlyOnceOrCountedAsMalformed) {
  std::mt19937 random(7);
  std::vector<std::string> lines;
  for (int rank = 0; rank < 3; ++rank)
    for (const TelemetryEvent& e : rankStream(rank, 40)) lines.push_back(encodeEvent(e));
  std::vector<std::string> fuzzed;
  for (int i = 0; i < 4000; ++i) {
    std::string line = lines[random() % lines.size()];
    switch (random() % 6) {
      case 0:  // replayed as is
        break;
      case 1:  // truncated
        line.resize(random() % (line.size() + 1));
        break;
      case 2:  // a byte changed
        line[random() % line.size()] = static_cast<char>(random() % 256);
        break;
      case 3:  // two lines spliced
        line = line.substr(0, random() % line.size()) + lines[random() % lines.size()];
        break;
      case 4:  // a digit changed: often still valid, with another seq, step or value
        for (char& c : line) {
          if (std::isdigit(static_cast<unsigned char>(c)) && random() % 8 == 0) {
            c = static_cast<char>('0' + random() % 10);
            break;
          }
        }
        break;
      default:  // garbage
        line = std::string(random() % 64, static_cast<char>(random() % 256));
    }
    fuzzed.push_back(std::move(line));
  }
  int64_t malformed = 0, rejected = 0;
  std::set<std::pair<int, uint64_t>> distinct;
  for (const std::string& line : fuzzed) {
    DecodeResult decoded = decodeEvent(line);
    if (!decoded.ok()) {
      ++malformed;
      continue;
    }
    const TelemetryEvent& e = decoded.event();
    const auto* hello = std::get_if<HelloEvent>(&e.body);
    if (e.rank >= 3 || (hello && hello->world_size != 3))
      ++rejected;  // a digit changed into a rank (or world size) the run does not have
    else
      distinct.insert({e.rank, e.seq});
  }
  {
    Recorder recorder(path_, run_, 0, {.batch_size = 64});
    for (const std::string& line : fuzzed) recorder.submitLine(line);
    recorder.flush();
    const RecorderCounts counts = recorder.counts();
    EXPECT_EQ(recorder.failure(), "");
    EXPECT_EQ(counts.malformed, malformed);
    EXPECT_EQ(counts.rejected, rejected);
    EXPECT_EQ(counts.stored, static_cast<int64_t>(distinct.size()));
    EXPECT_EQ(counts.stored + counts.duplicates + counts.malformed + counts.rejected,
              static_cast<int64_t>(fuzzed.size()));
  }
  EXPECT_EQ(count("SELECT sum(last_seq - first_seq + 1) FROM seq_ranges"),
            static_cast<int64_t>(distinct.size()));
  EXPECT_EQ(count("SELECT lines_malformed FROM attempts"), malformed + rejected);
  EXPECT_EQ(count("SELECT count(*) FROM ranks WHERE rank >= 3"), 0);
  EXPECT_EQ(testing::queryText(*db_, "PRAGMA integrity_check"), "ok");
}

TEST_F(RecorderTest, MalformedLinesAreCountedAndLoggedNeverFatal) {
  {
    Recorder recorder(path_, run_, 0);
    EXPECT_FALSE(recorder.submitLine("not json"));
    EXPECT_FALSE(recorder.submitLine(R"({"v":1,"type":"step","rank":0})"));
    EXPECT_FALSE(recorder.submitLine(std::string(1 << 20, '{')));
    EXPECT_TRUE(recorder.submitLine(encodeEvent(rankStream(0, 1)[0])));
    recorder.flush();
    EXPECT_EQ(recorder.counts().malformed, 3);
    EXPECT_EQ(recorder.counts().stored, 1);
    EXPECT_TRUE(recorder.failure().empty());
  }
  EXPECT_EQ(count("SELECT lines_malformed FROM attempts"), 3);
  EXPECT_EQ(count("SELECT count(*) FROM logs WHERE rank IS NULL AND level = 'warn'"), 3);
}

// Issue 32, point 7: a done is kept in its rank's row whether or not the rank has said hello (it
// was counted as stored and kept nowhere): before the hello, in a row holding the status alone,
// which a later hello fills in, keeping the status; and a rank's hello and done stored by
// different recorders (a replay) meet in one row. Every status, every rank, both orders.
TEST_F(RecorderTest, ADoneIsKeptInItsRanksRowWhetherOrNotItsHelloCameFirst) {
  const HelloEvent hello = std::get<HelloEvent>(rankStream(0, 0).front().body);
  const std::vector<DoneStatus> statuses = {DoneStatus::kCompleted, DoneStatus::kFailed,
                                            DoneStatus::kCancelled, DoneStatus::kHung};
  uint64_t seq = 0;
  auto event = [&](int rank, EventBody body) {
    return TelemetryEvent{.rank = rank, .seq = seq++, .time = 1e9, .body = std::move(body)};
  };
  auto status = [&](int attempt, int rank) {
    return testing::queryText(
        *db_, fmt::format("SELECT coalesce(status, '-') || '/' || coalesce(host, '-') FROM ranks "
                          "WHERE attempt = {} AND rank = {}",
                          attempt, rank));
  };
  for (size_t i = 0; i < statuses.size(); ++i) {
    SCOPED_TRACE(toString(statuses[i]));
    const int attempt = static_cast<int>(i);
    HelloEvent greeting = hello;
    greeting.attempt = attempt;
    {
      Recorder recorder(path_, run_, 0);
      // The hello first (rank 0), the done first (rank 1), the done alone (rank 2).
      if (attempt > 0) recorder.submit(event(2, greeting));  // moves rank 2 to this attempt
      recorder.submit(event(0, greeting));
      recorder.submit(event(0, DoneEvent{.status = statuses[i]}));
      if (attempt > 0) {
        HelloEvent moving = greeting;
        moving.host = "";
        recorder.submit(event(1, moving));  // an empty host name is still a hello
      }
      recorder.submit(event(1, DoneEvent{.status = statuses[i]}));
      recorder.submit(event(2, DoneEvent{.status = statuses[i]}));
      recorder.flush();
      EXPECT_EQ(recorder.counts().stored, attempt > 0 ? 6 : 4);
      EXPECT_EQ(recorder.counts().rejected, 0);
    }
    const std::string name(toString(statuses[i]));
    EXPECT_EQ(status(attempt, 0), name + "/h0");
    EXPECT_EQ(status(attempt, 1), name + (attempt > 0 ? "/" : "/-"));
    EXPECT_EQ(status(attempt, 2), name + (attempt > 0 ? "/h0" : "/-"));
    if (attempt == 0) {
      Recorder replay(path_, run_, 0);  // rank 1's hello, after its done was stored
      replay.submit(event(1, greeting));
      replay.flush();
      EXPECT_EQ(status(0, 1), name + "/h0");
    }
  }
  EXPECT_EQ(ranksThatSaidHello(*db_, run_), 3);
}

// Issue 16, finding 5: events from ranks a run does not have are counted and logged as bad lines,
// never stored, whatever their kind and whichever way the rank is wrong; so is a hello whose
// world size is not the run's. Logs from such a rank are kept without the rank.
TEST_F(RecorderTest, EventsFromRanksTheRunDoesNotHaveAreCountedNotStored) {
  const int64_t world = 3;  // the fixture's run
  const std::vector<int> outside = {
      3, 4, 100'000, std::numeric_limits<int>::max(), -1, std::numeric_limits<int>::min()};
  int64_t bad = 0;
  {
    Recorder recorder(path_, run_, 0);
    for (int rank : outside) {
      // Every kind of event, through the decoder where it accepts the rank, else directly.
      std::vector<TelemetryEvent> stream = rankStream(0, 2);
      stream.push_back({.seq = 100,
                        .body = ErrorEvent{.message = "boom",
                                           .kind = "exception",
                                           .flight_recorder = nlohmann::json::array()}});
      for (TelemetryEvent e : stream) {
        e.rank = rank;
        const std::string line = encodeEvent(e);
        if (decodeEvent(line).ok())
          EXPECT_TRUE(recorder.submitLine(line));
        else
          EXPECT_TRUE(recorder.submit(e));
        ++bad;
      }
      recorder.submitLog(rank, "stderr", "a line from a rank that does not exist");
    }
    // A hello from a rank of the run that says the world is another size.
    for (int world_size : {2, 4, 100'000}) {
      TelemetryEvent hello = rankStream(1, 0)[0];
      std::get<HelloEvent>(hello.body).world_size = world_size;
      EXPECT_TRUE(recorder.submitLine(encodeEvent(hello)));
      ++bad;
    }
    for (const TelemetryEvent& e : rankStream(2, 2)) recorder.submit(e);  // a good rank
    recorder.flush();
    const RecorderCounts counts = recorder.counts();
    EXPECT_EQ(counts.rejected, bad);
    EXPECT_EQ(counts.stored, 2 * 3 + 3);
    EXPECT_EQ(counts.malformed, 0);
    EXPECT_EQ(recorder.failure(), "");
  }
  EXPECT_EQ(count("SELECT lines_malformed FROM attempts"), bad);
  for (const char* table : {"ranks", "steps", "comm_events", "sched_events", "logs", "seq_ranges",
                            "scalar_rollups", "flight_recorder_dumps"}) {
    SCOPED_TRACE(table);
    EXPECT_EQ(
        count(fmt::format("SELECT count(*) FROM {} WHERE rank < 0 OR rank >= {}", table, world)),
        0);
  }
  EXPECT_EQ(count("SELECT count(*) FROM ranks"), 1) << "only rank 2's hello";
  EXPECT_EQ(count("SELECT count(*) FROM logs WHERE rank IS NULL AND level = 'warn' AND message "
                  "LIKE '%which this run of 3 ranks does not have%'"),
            bad - 3);
  EXPECT_EQ(count("SELECT count(*) FROM logs WHERE rank IS NULL AND message LIKE "
                  "'%hello says the world has%'"),
            3);
  EXPECT_EQ(count("SELECT count(*) FROM logs WHERE rank IS NULL AND message = 'a line from a "
                  "rank that does not exist'"),
            static_cast<int64_t>(outside.size()));
  EXPECT_EQ(count("SELECT count(*) FROM runs WHERE error_rank IS NOT NULL"), 0);
}

// Issue 16, finding 3: a full queue makes the producer wait for the writer instead of dropping.
// Another connection holds the write lock, so the writer waits (within its busy timeout) while the
// producer fills the queue and blocks; once the lock is released every event is stored.
TEST_F(RecorderTest, AFullQueueMakesTheProducerWaitAndNothingIsDropped) {
  Database holder(path_);
  holder.exec("BEGIN IMMEDIATE");
  const std::vector<TelemetryEvent> events = rankStream(0, 20);
  {
    Recorder recorder(path_, run_, 0, {.queue_capacity = 8, .batch_size = 4});
    std::atomic<size_t> submitted = 0;
    std::thread producer([&] {
      for (const TelemetryEvent& e : events) {
        EXPECT_TRUE(recorder.submit(e));
        ++submitted;
      }
    });
    while (recorder.counts().peak_queued < 8) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // The writer took at most one batch before the lock stopped it; the queue holds 8 more.
    EXPECT_LE(submitted.load(), 4u + 8u) << "the producer did not wait; " << recorder.failure();
    holder.exec("COMMIT");
    producer.join();
    recorder.flush();
    EXPECT_EQ(recorder.counts().dropped, 0);
    EXPECT_EQ(recorder.counts().stored, static_cast<int64_t>(events.size()));
    EXPECT_EQ(recorder.counts().peak_queued, 8);
  }
  EXPECT_EQ(count("SELECT events_stored FROM attempts"), static_cast<int64_t>(events.size()));
  EXPECT_EQ(testing::queryText(*db_, "SELECT status FROM ranks WHERE rank = 0"), "completed");
}

// A producer waiting for room is released when the writer fails (here the database stays locked
// past its busy timeout): submit returns false and counts the event as dropped, and the run's
// caller sees the failure, instead of a launcher hanging on a recorder that will never write.
TEST_F(RecorderTest, AFailedWriterReleasesAWaitingProducer) {
  Database holder(path_);
  holder.exec("BEGIN IMMEDIATE");
  const std::vector<TelemetryEvent> events = rankStream(0, 20);
  int64_t refused = 0;
  {
    Recorder recorder(path_, run_, 0, {.queue_capacity = 4, .batch_size = 2});
    for (const TelemetryEvent& e : events) refused += recorder.submit(e) ? 0 : 1;
    recorder.flush();
    EXPECT_NE(recorder.failure(), "");
    EXPECT_GT(refused, 0);
    // Those refused, and those queued when the writer failed: none is hidden.
    EXPECT_EQ(recorder.counts().dropped, static_cast<int64_t>(events.size()));
    EXPECT_EQ(recorder.counts().stored, 0);
  }
  holder.exec("ROLLBACK");
}

TEST_F(RecorderTest, RunsOfADeadRecorderBecomeInterrupted) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // reaped: its pid names no process now
  const int64_t orphan =
      createRun(*db_, {.name = "orphan", .spec_json = "{}", .strategy = "ddp", .world_size = 1});
  db_->exec("UPDATE runs SET recorder_pid = " + std::to_string(child) +
            " WHERE id = " + std::to_string(orphan));
  EXPECT_EQ(reconcileInterruptedRuns(*db_), 1);
  EXPECT_EQ(count("SELECT count(*) FROM runs WHERE status = 'interrupted' AND id = " +
                  std::to_string(orphan)),
            1);
  // This process's own run is alive and stays running.
  EXPECT_EQ(
      count("SELECT count(*) FROM runs WHERE status = 'running' AND id = " + std::to_string(run_)),
      1);
  finishRun(*db_, run_, "completed");
  EXPECT_EQ(count("SELECT count(*) FROM runs WHERE status = 'completed' AND ended_at IS NOT NULL"),
            1);
}

}  // namespace
}  // namespace ringmaster::storage
