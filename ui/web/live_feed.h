// What the event stream (/api/v1/stream) tells its clients: one poller thread looks at the database
// every 250 ms (SQLite's data_version first, so an idle database costs one pragma) and, when runs
// were added or changed or got new events, queues `runs` and `run` events to every subscriber.
// Subscribers coalesce: a run's newer event replaces its pending one, so what waits for a client
// is bounded by the number of runs; a subscriber over its bound is marked overflowed and its
// connection dropped, never waited for. No HTTP here.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "db/database.h"

namespace ringmaster::web {

// One client's pending events.
class Subscriber {
 public:
  explicit Subscriber(size_t queue_bound) : queue_bound_(queue_bound) {}

  // Queues `runs` entries and `run` events (each replaces the pending one of the same run).
  void push(const std::vector<nlohmann::json>& changed_runs,
            const std::vector<nlohmann::json>& run_events);
  // Wakes the writer for good: the server is stopping.
  void close();

  // Waits until something is pending, the subscriber is closed or `until` passes; returns the
  // pending events as SSE text ("" when none) and empties the queue.
  std::string take(std::chrono::steady_clock::time_point until);
  bool closed() const;
  bool overflowed() const;

 private:
  std::string frameLocked();

  const size_t queue_bound_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::map<int64_t, nlohmann::json> runs_;    // run id -> its runs-list entry
  std::map<int64_t, nlohmann::json> events_;  // run id -> {"id", "last_step", "status"}
  bool closed_ = false, overflowed_ = false;
};

class LiveFeed {
 public:
  LiveFeed(std::string db_path, std::chrono::milliseconds poll_interval, size_t queue_bound);
  ~LiveFeed();
  LiveFeed(const LiveFeed&) = delete;
  LiveFeed& operator=(const LiveFeed&) = delete;

  // Reads what the database holds now (no news) and starts the poller.
  void start();
  // Closes every subscriber and joins the poller.
  void stop();

  std::shared_ptr<Subscriber> subscribe();
  void unsubscribe(const std::shared_ptr<Subscriber>& subscriber);
  size_t subscribers() const;
  // Goes up each time the poller sees the database changed, before it tells the subscribers: what
  // was read from the database at one generation holds until the next.
  uint64_t generation() const { return generation_.load(); }

 private:
  struct RunState {
    std::string status;
    std::optional<double> ended_at;
    int64_t events = 0;  // events stored: the summed lengths of its stored seq ranges
    // Its scheduler job's state, reason and nodes (issue 35): a pending job's new reason is news.
    std::string scheduler;
  };
  static std::map<int64_t, RunState> readRunStates(const storage::Database& db);
  void poll(std::shared_ptr<storage::Database> db, std::map<int64_t, RunState> known,
            int64_t version);

  const std::string db_path_;
  const std::chrono::milliseconds poll_interval_;
  const size_t queue_bound_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<std::shared_ptr<Subscriber>> subscribers_;
  std::atomic<uint64_t> generation_{0};
  std::thread poller_;
};

}  // namespace ringmaster::web
