// The poller and the subscribers' coalescing queues.
#include "live_feed.h"

#include <fmt/format.h>

#include "api.h"
#include "db/database.h"
#include "db/statement.h"

namespace ringmaster::web {

using nlohmann::json;

// --- Subscriber ----------------------------------------------------------------------------------

void Subscriber::push(const std::vector<json>& changed_runs, const std::vector<json>& run_events) {
  {
    std::lock_guard lock(mutex_);
    if (closed_ || overflowed_) return;
    for (const json& run : changed_runs) runs_[run.at("id").get<int64_t>()] = run;
    for (const json& event : run_events) events_[event.at("id").get<int64_t>()] = event;
    if (runs_.size() + events_.size() > queue_bound_) {
      overflowed_ = true;
      runs_.clear();
      events_.clear();
    }
  }
  ready_.notify_all();
}

void Subscriber::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  ready_.notify_all();
}

bool Subscriber::closed() const {
  std::lock_guard lock(mutex_);
  return closed_;
}

bool Subscriber::overflowed() const {
  std::lock_guard lock(mutex_);
  return overflowed_;
}

std::string Subscriber::take(std::chrono::steady_clock::time_point until) {
  std::unique_lock lock(mutex_);
  ready_.wait_until(lock, until,
                    [&] { return closed_ || overflowed_ || !runs_.empty() || !events_.empty(); });
  if (closed_ || overflowed_) return {};
  return frameLocked();
}

std::string Subscriber::frameLocked() {
  std::string frame;
  if (!runs_.empty()) {
    json runs = json::array();
    for (auto& [id, run] : runs_) runs.push_back(std::move(run));
    frame += fmt::format("event: runs\ndata: {}\n\n", runs.dump());
    runs_.clear();
  }
  for (const auto& [id, event] : events_)
    frame += fmt::format("event: run\ndata: {}\n\n", event.dump());
  events_.clear();
  return frame;
}

// --- the poller ----------------------------------------------------------------------------------

// Every run's status, scheduler job and stored event count: two small scans (runs, seq_ranges).
std::map<int64_t, LiveFeed::RunState> LiveFeed::readRunStates(const storage::Database& db) {
  std::map<int64_t, RunState> states;
  storage::Statement runs(db,
                          "SELECT id, status, ended_at, scheduler_job_id || '|' || "
                          "scheduler_state || '|' || scheduler_reason || '|' || scheduler_nodes "
                          "FROM runs");
  while (runs.run())
    states[runs.columnInt(0)] = {runs.columnText(1), runs.optionalDouble(2), 0, runs.columnText(3)};
  storage::Statement seqs(
      db, "SELECT run_id, sum(last_seq - first_seq + 1) FROM seq_ranges GROUP BY run_id");
  while (seqs.run()) {
    const auto found = states.find(seqs.columnInt(0));
    if (found != states.end()) found->second.events = seqs.columnInt(1);
  }
  return states;
}

// --- LiveFeed ------------------------------------------------------------------------------------

LiveFeed::LiveFeed(std::string db_path, std::chrono::milliseconds poll_interval, size_t queue_bound)
    : db_path_(std::move(db_path)), poll_interval_(poll_interval), queue_bound_(queue_bound) {}

LiveFeed::~LiveFeed() {
  stop();
}

void LiveFeed::start() {
  storage::DatabaseOptions options;
  options.read_only = true;
  // What the database holds at start-up is no news: read here, before any client can connect.
  auto db = std::make_shared<storage::Database>(db_path_, options);
  auto known = std::make_shared<std::map<int64_t, RunState>>(readRunStates(*db));
  const int64_t version = db->dataVersion();
  poller_ = std::thread([this, db, known, version] { poll(db, std::move(*known), version); });
}

void LiveFeed::stop() {
  std::vector<std::shared_ptr<Subscriber>> subscribers;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    subscribers = subscribers_;
  }
  wake_.notify_all();
  for (const auto& subscriber : subscribers) subscriber->close();
  if (poller_.joinable()) poller_.join();
}

std::shared_ptr<Subscriber> LiveFeed::subscribe() {
  auto subscriber = std::make_shared<Subscriber>(queue_bound_);
  std::lock_guard lock(mutex_);
  if (stopping_) subscriber->close();
  subscribers_.push_back(subscriber);
  return subscriber;
}

void LiveFeed::unsubscribe(const std::shared_ptr<Subscriber>& subscriber) {
  std::lock_guard lock(mutex_);
  std::erase(subscribers_, subscriber);
}

size_t LiveFeed::subscribers() const {
  std::lock_guard lock(mutex_);
  return subscribers_.size();
}

void LiveFeed::poll(std::shared_ptr<storage::Database> db, std::map<int64_t, RunState> known,
                    int64_t version) {
  std::optional<int64_t> seen_version = version;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, poll_interval_, [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    std::vector<json> changed_runs, run_events;
    try {
      if (!db) {
        storage::DatabaseOptions options;
        options.read_only = true;
        db = std::make_shared<storage::Database>(db_path_, options);
        seen_version.reset();
      }
      const int64_t version = db->dataVersion();
      if (seen_version != version) {
        seen_version = version;
        generation_.fetch_add(1);
        std::map<int64_t, RunState> now = readRunStates(*db);
        for (const auto& [id, state] : now) {
          const auto before = known.find(id);
          const bool is_new = before == known.end();
          const bool row_changed = is_new || before->second.status != state.status ||
                                   before->second.ended_at != state.ended_at ||
                                   before->second.scheduler != state.scheduler;
          const bool got_events = is_new || before->second.events != state.events;
          if (!row_changed && !got_events) continue;
          const json entry = runListEntry(*db, id);
          if (row_changed) changed_runs.push_back(entry);
          run_events.push_back(
              {{"id", id}, {"final_step", entry.at("final_step")}, {"status", state.status}});
        }
        known = std::move(now);
      }
    } catch (const std::exception& error) {
      // A database being migrated or replaced: open it afresh next time.
      fmt::print(stderr, "ringmaster serve: polling the database: {}\n", error.what());
      db.reset();
    }
    lock.lock();
    if (!changed_runs.empty() || !run_events.empty())
      for (const auto& subscriber : subscribers_) subscriber->push(changed_runs, run_events);
  }
}

}  // namespace ringmaster::web
