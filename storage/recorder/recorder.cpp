// The recorder's queue and its writer thread, which stores each batch through an EventStore
// (recorder/event_store.h) in one transaction.
#include "recorder/recorder.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "db/database.h"
#include "recorder/event_store.h"
#include "recorder/text_bounds.h"
#include "telemetry/codec.h"

namespace ringmaster::storage {

namespace {

double threadCpuSeconds() {
  timespec cpu{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
  return static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) * 1e-9;
}

double nowSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

Recorder::Recorder(std::string db_path, int64_t run_id, int attempt, RecorderOptions options)
    : db_path_(std::move(db_path)), run_id_(run_id), attempt_(attempt), options_(options) {
  options_.queue_capacity = std::max<size_t>(options_.queue_capacity, 1);
  options_.batch_size = std::max<size_t>(options_.batch_size, 1);
  writer_ = std::thread([this] { writerLoop(); });
}

Recorder::~Recorder() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  writer_.join();
}

bool Recorder::waitForRoom(std::unique_lock<std::mutex>& lock) {
  room_.wait(lock, [&] {
    return queue_.size() + logs_.size() < options_.queue_capacity || !failure_.empty() ||
           writer_done_;
  });
  if (failure_.empty() && !writer_done_) return true;
  ++counts_.dropped;
  return false;
}

bool Recorder::submit(TelemetryEvent event) {
  {
    std::unique_lock lock(mutex_);
    if (!waitForRoom(lock)) return false;
    queue_.push_back(std::move(event));
    ++submitted_;
    const size_t queued = queue_.size() + logs_.size();
    counts_.peak_queued = std::max(counts_.peak_queued, static_cast<int64_t>(queued));
    // The writer waits for the first item, then for a full batch (or its commit delay).
    if (queued != 1 && queued != fullBatch()) return true;
  }
  queued_.notify_one();
  return true;
}

bool Recorder::submitLine(std::string_view line) {
  DecodeResult decoded = decodeEvent(line);
  if (decoded.ok()) return submit(std::move(decoded.event()));
  {
    std::lock_guard lock(mutex_);
    queueBadLine(std::nullopt, "malformed telemetry line: " + decoded.error().message);
  }
  queued_.notify_one();
  return false;
}

void Recorder::reportBadLine(std::optional<int> rank, std::string_view reason) {
  {
    std::lock_guard lock(mutex_);
    queueBadLine(rank, std::string(reason));
  }
  queued_.notify_one();
}

void Recorder::queueBadLine(std::optional<int> rank, std::string reason) {
  ++counts_.malformed;
  if (bad_line_reasons_.size() < 100)
    bad_line_reasons_.push_back({rank, "warn", std::move(reason), nowSeconds()});
  ++submitted_;
  ++bad_lines_queued_;
}

bool Recorder::submitLog(std::optional<int> rank, std::string_view level,
                         std::string_view message) {
  {
    std::unique_lock lock(mutex_);
    if (!waitForRoom(lock)) return false;
    logs_.push_back({rank, std::string(level), std::string(message), nowSeconds()});
    ++submitted_;
    const size_t queued = queue_.size() + logs_.size();
    counts_.peak_queued = std::max(counts_.peak_queued, static_cast<int64_t>(queued));
    if (queued != 1 && queued != fullBatch()) return true;
  }
  queued_.notify_one();
  return true;
}

void Recorder::flush() {
  std::unique_lock lock(mutex_);
  const uint64_t target = submitted_;
  ++flushing_;
  queued_.notify_one();  // no waiting for a fuller batch
  written_.wait(lock, [&] { return committed_ >= target || !failure_.empty(); });
  --flushing_;
}

RecorderCounts Recorder::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::string Recorder::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void Recorder::writerLoop() {
  // However the writer ends, a producer waiting for room must not wait for it any longer.
  struct Done {
    Recorder& recorder;
    ~Done() {
      {
        std::lock_guard lock(recorder.mutex_);
        recorder.writer_done_ = true;
      }
      recorder.room_.notify_all();
      recorder.written_.notify_all();
    }
  } done{*this};
  std::optional<Database> db;
  std::optional<EventStore> store;
  try {
    db.emplace(db_path_);
    store.emplace(*db, run_id_, attempt_);
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    failure_ = e.what();
    counts_.dropped += static_cast<int64_t>(queue_.size() + logs_.size());
    queue_.clear();
    logs_.clear();
    return;
  }
  Batch batch;
  while (takeBatch(batch)) {
    room_.notify_all();
    if (!writeBatch(*db, *store, batch)) return;
  }
}

bool Recorder::takeBatch(Batch& batch) {
  std::unique_lock lock(mutex_);
  const auto nothing_queued = [&] {
    return queue_.empty() && logs_.empty() && bad_lines_queued_ == 0;
  };
  queued_.wait(lock, [&] { return stopping_ || !nothing_queued(); });
  if (stopping_ && nothing_queued()) return false;
  // Group commit: a transaction's cost is mostly the pages it writes, so a stream of events is
  // committed a batch at a time, not an event at a time.
  queued_.wait_for(lock, options_.commit_delay, [&] {
    return stopping_ || flushing_ > 0 || queue_.size() + logs_.size() >= fullBatch();
  });
  batch.events.clear();
  batch.events.swap(queue_);
  batch.logs.clear();
  batch.logs.swap(logs_);
  batch.bad_lines.clear();
  batch.bad_lines.swap(bad_line_reasons_);
  batch.bad_line_count = std::exchange(bad_lines_queued_, 0);
  return true;
}

namespace {

// Stores `events` through `store` (in the caller's transaction), counting them in `counts`; the
// first 100 rejections are logged to the run with their reasons.
void storeEvents(EventStore& store, std::span<const TelemetryEvent> events,
                 RecorderCounts& counts) {
  int64_t rejections_logged = 0, cuts_logged = 0;
  std::string why, cut;
  for (const TelemetryEvent& original : events) {
    const std::optional<TelemetryEvent> bounded = withTextsBounded(original, cut);
    const TelemetryEvent& event = bounded ? *bounded : original;
    if (bounded) {
      ++counts.texts_cut;
      if (cuts_logged++ < 100)
        store.log(std::nullopt, nowSeconds(), "warn",
                  fmt::format("rank {}'s {} event: text cut to its bound: {}", event.rank,
                              eventTypeName(event.body), cut));
    }
    switch (store.store(event, why)) {
      case EventStore::Outcome::kStored:
        ++counts.stored;
        break;
      case EventStore::Outcome::kDuplicate:
        ++counts.duplicates;
        break;
      case EventStore::Outcome::kRejected:
        ++counts.rejected;
        if (rejections_logged++ < 100) store.log(std::nullopt, nowSeconds(), "warn", why);
        break;
    }
  }
}

}  // namespace

bool Recorder::writeBatch(Database& db, EventStore& store, const Batch& batch) {
  const std::vector<TelemetryEvent>& events = batch.events;
  // A transaction per batch_size events; the logs and bad lines go with the first.
  for (size_t first = 0; first == 0 || first < events.size(); first += options_.batch_size) {
    const size_t end = std::min(events.size(), first + options_.batch_size);
    RecorderCounts counts;
    if (first == 0) counts.malformed = static_cast<int64_t>(batch.bad_line_count);
    const uint64_t processed =
        (end - first) + (first == 0 ? batch.logs.size() + batch.bad_line_count : 0);
    try {
      db.transaction([&] {
        // A retried body starts over.
        counts.stored = counts.duplicates = counts.rejected = counts.texts_cut = 0;
        storeEvents(store, std::span(events).subspan(first, end - first), counts);
        if (first == 0) {
          const auto logLine = [&](const PendingLog& line) {
            const bool known = line.rank && store.inWorld(*line.rank);
            store.log(known ? std::optional<int64_t>(*line.rank) : std::nullopt, line.t, line.level,
                      line.message);
          };
          for (const PendingLog& line : batch.logs) logLine(line);
          for (const PendingLog& line : batch.bad_lines) logLine(line);
        }
        store.writeBatchState();
        store.addCounts(counts);
      });
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex_);
      failure_ = fmt::format("recording run {} stopped: {}", run_id_, e.what());
      counts_.dropped += static_cast<int64_t>(events.size() - first + queue_.size() + logs_.size() +
                                              (first == 0 ? batch.logs.size() : 0));
      queue_.clear();
      logs_.clear();
      committed_ += processed;
      return false;
    }
    std::lock_guard lock(mutex_);
    counts_.stored += counts.stored;
    counts_.duplicates += counts.duplicates;
    counts_.rejected += counts.rejected;
    counts_.texts_cut += counts.texts_cut;
    counts_.writer_cpu_s = threadCpuSeconds();
    committed_ += processed;
    written_.notify_all();
  }
  return true;
}

}  // namespace ringmaster::storage
