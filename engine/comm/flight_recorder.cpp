// FlightRecorder ring buffer.
#include "comm/flight_recorder.h"

#include <algorithm>

namespace ringmaster {

std::string_view toString(OpState state) {
  switch (state) {
    case OpState::kScheduled:
      return "scheduled";
    case OpState::kStarted:
      return "started";
    case OpState::kCompleted:
      return "completed";
    case OpState::kFailed:
      return "failed";
  }
  return "?";
}

FlightRecorder::FlightRecorder(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {
  ring_.reserve(capacity_);
}

void FlightRecorder::record(const FlightEntry& entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ring_.size() < capacity_) {
    ring_.push_back(entry);
  } else {
    ring_[next_] = entry;
    next_ = (next_ + 1) % capacity_;
  }
}

void FlightRecorder::transition(uint64_t id, OpState state, double time_us) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t n = ring_.size();
  if (n == 0) return;
  auto update = [&](FlightEntry& entry) {
    entry.state = state;
    if (state == OpState::kStarted)
      entry.started_us = time_us;
    else
      entry.finished_us = time_us;
  };
  // Entries are recorded in id order, almost always: the entry sits as far before the newest as
  // its id is below the newest's (one look instead of a scan of the ring per transition).
  // An id further back than the ring holds was dropped (a burst of queued operations).
  const size_t newest = n < capacity_ ? n - 1 : (next_ + n - 1) % n;
  const uint64_t back = ring_[newest].id - id;
  if (ring_[newest].id >= id) {
    if (back >= n) return;
    FlightEntry& guess = ring_[(newest + n - static_cast<size_t>(back)) % n];
    if (guess.id == id) return update(guess);
  }
  for (FlightEntry& entry : ring_)
    if (entry.id == id) return update(entry);
}

std::vector<FlightEntry> FlightRecorder::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FlightEntry> out;
  out.reserve(ring_.size());
  for (size_t i = 0; i < ring_.size(); ++i) out.push_back(ring_[(next_ + i) % ring_.size()]);
  return out;
}

FlightProgress FlightRecorder::progress() const {
  std::lock_guard<std::mutex> lock(mutex_);
  FlightProgress out;
  const size_t n = ring_.size();
  for (size_t i = 0; i < n; ++i) {  // newest first
    const FlightEntry& e = ring_[(next_ + n - 1 - i) % n];
    const bool p2p = e.op == CommOp::kSend || e.op == CommOp::kRecv;
    if (!p2p && e.state == OpState::kCompleted && !out.last_completed_collective)
      out.last_completed_collective = e;
    if (e.state == OpState::kStarted) out.oldest_in_flight = e;
  }
  return out;
}

nlohmann::json FlightRecorder::dump() const {
  nlohmann::json out = nlohmann::json::array();
  for (const FlightEntry& e : entries()) {
    nlohmann::json j = {{"seq", e.seq},
                        {"op", toString(e.op)},
                        {"group", e.group},
                        {"bytes", e.bytes},
                        {"dtype", commDTypeName(e.dtype)},
                        {"state", toString(e.state)},
                        {"scheduled_us", static_cast<int64_t>(e.scheduled_us)}};
    if (e.peer >= 0) j["peer"] = e.peer;
    if (e.started_us > 0) j["started_us"] = static_cast<int64_t>(e.started_us);
    if (e.finished_us > 0) j["finished_us"] = static_cast<int64_t>(e.finished_us);
    out.push_back(std::move(j));
  }
  return out;
}

namespace {

// Never destroyed: a process may exit with a communicator alive.
std::mutex& registryMutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}

std::vector<const FlightRecorder*>& registry() {  // guarded by registryMutex()
  static auto* recorders = new std::vector<const FlightRecorder*>;
  return *recorders;
}

}  // namespace

void registerFlightRecorder(const FlightRecorder* recorder) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().push_back(recorder);
}

void unregisterFlightRecorder(const FlightRecorder* recorder) {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto& recorders = registry();
  recorders.erase(std::remove(recorders.begin(), recorders.end(), recorder), recorders.end());
}

nlohmann::json dumpRegisteredFlightRecorders() {
  std::lock_guard<std::mutex> lock(registryMutex());
  nlohmann::json out = nlohmann::json::array();
  for (const FlightRecorder* recorder : registry())
    for (auto& entry : recorder->dump()) out.push_back(std::move(entry));
  return out;
}

}  // namespace ringmaster
