// The recorder: takes decoded telemetry (or raw lines) from any number of ranks and writes it to
// the run database on its own thread, in batched transactions. Nothing is dropped: the queue is
// bounded, and a producer finding it full waits until the writer has taken it (backpressure: a
// reader blocked here stops reading its pipe, which slows the worker writing it). Storing is
// idempotent: an event replayed with the same (run, attempt, rank, seq) is stored once. An event
// naming no rank of the run (outside [0, world size), or a hello with another world size) is
// counted as a bad line and logged, never stored. The run it records into is created and finished
// through recorder/run_lifecycle.h, included here for the recorder's callers.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "recorder/run_lifecycle.h"
#include "telemetry/events.h"

namespace ringmaster::storage {

class Database;
class EventStore;

struct RecorderOptions {
  // Events (and log lines) waiting for the writer's next turn; a producer finding the queue full
  // waits. Two batches: the producers fill one while the writer commits the other.
  size_t queue_capacity = 1 << 14;
  size_t batch_size = 8192;  // events per transaction at most
  // How long the writer waits for a batch to fill before committing what it has: the most a
  // stored event waits for its transaction (flush() does not wait for it).
  std::chrono::milliseconds commit_delay{10};
};

struct RecorderCounts {
  int64_t stored = 0;      // events written
  int64_t duplicates = 0;  // replayed events recognised and skipped
  // Bad lines, each also logged to the run with its reason; the database keeps their sum
  // (attempts.lines_malformed, shown by `ringmaster show` as bad lines).
  int64_t malformed = 0;  // lines that did not decode, or were over the line limit (reportBadLine)
  int64_t rejected = 0;   // events naming no rank of the run, or a hello with another world size
  // Submitted after the writer had failed (the database became unwritable; the caller stops the
  // run and marks it failed): the only events not stored. Not in the database, which failed.
  int64_t dropped = 0;
  int64_t peak_queued = 0;  // the most events and log lines the queue held at once
  // Events stored with a text cut to its bound (recorder/text_bounds.h), each logged to the run
  // with the fields and their sizes (a warning, so `show` counts it among the problems).
  int64_t texts_cut = 0;
  // The writer thread's CPU time so far (storing, committing, its own share of the kernel's
  // writes), in seconds: what the recorder costs apart from the producers' decoding.
  double writer_cpu_s = 0;
};

class Recorder {
 public:
  // Opens its own connection to the database at `db_path` and starts the writer thread.
  Recorder(std::string db_path, int64_t run_id, int attempt, RecorderOptions options = {});
  // Writes what is queued, then stops.
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Queues an event, waiting while the queue is full; false only when the writer has failed (the
  // event is counted as dropped).
  bool submit(TelemetryEvent event);
  // Decodes a line and queues it; a malformed line is counted and its reason logged to the run.
  bool submitLine(std::string_view line);
  // Counts a line that was not submitted because it was bad (over the line limit) and logs
  // `reason` to the run as a warning, under `rank` when known.
  void reportBadLine(std::optional<int> rank, std::string_view reason);
  // Queues a line of a process's human-readable output (a worker's stderr) for the run's logs;
  // `rank` empty for the launcher's or an agent's own lines, and stored empty when the run has no
  // such rank. Waits while the queue is full, like submit.
  bool submitLog(std::optional<int> rank, std::string_view level, std::string_view message);
  // Blocks until everything submitted before the call is committed (or failed to be).
  void flush();
  RecorderCounts counts() const;
  // The error that stopped the writer (the database became unwritable), empty while healthy.
  std::string failure() const;

 private:
  struct PendingLog {
    std::optional<int> rank;
    std::string level, message;
    double t;
  };
  // What the writer takes from the queue at once.
  struct Batch {
    std::vector<TelemetryEvent> events;  // swapped with queue_, so neither is reallocated
    std::deque<PendingLog> logs, bad_lines;
    uint64_t bad_line_count = 0;
  };

  void writerLoop();
  // Waits for something queued (and, for a group commit, for a full batch or the commit delay),
  // then takes it all; false when stopping with nothing queued.
  bool takeBatch(Batch& batch);
  // Stores a batch, a transaction per batch_size events; false when the database failed (the
  // writer stops, and what it could not store is counted as dropped).
  bool writeBatch(Database& db, EventStore& store, const Batch& batch);
  // Waits until the queue has room; false when the writer can take nothing more. Holds `lock`.
  bool waitForRoom(std::unique_lock<std::mutex>& lock);
  // Counts a bad line and keeps its reason for the writer to log. Holds the mutex.
  void queueBadLine(std::optional<int> rank, std::string reason);
  // The queue length at which the writer commits without waiting its commit delay.
  size_t fullBatch() const { return std::min(options_.batch_size, options_.queue_capacity); }

  std::string db_path_;
  int64_t run_id_;
  int attempt_;
  RecorderOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable queued_, written_, room_;
  std::vector<TelemetryEvent> queue_;  // the writer takes it whole
  std::deque<PendingLog> logs_;
  std::deque<PendingLog> bad_line_reasons_;  // to log into the run (the first 100 per batch)
  uint64_t bad_lines_queued_ = 0;            // bad lines not yet counted in the database
  uint64_t submitted_ = 0, committed_ = 0;   // items accepted / processed, for flush()
  int flushing_ = 0;                         // callers waiting in flush()
  bool stopping_ = false;
  bool writer_done_ = false;  // the writer has returned: nothing queued now would be written
  RecorderCounts counts_;
  std::string failure_;
  std::thread writer_;
};

}  // namespace ringmaster::storage
