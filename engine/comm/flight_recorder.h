// FlightRecorder: the last N operations of one communicator (sequence number, op, group, bytes,
// dtype, peer, state scheduled / started / completed / failed, and the time of each transition),
// kept in a ring so that a timeout or a failure can show what every rank was doing.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/comm_op.h"
#include "comm/reduce_op.h"

namespace ringmaster {

enum class OpState { kScheduled, kStarted, kCompleted, kFailed };
std::string_view toString(OpState state);

struct FlightEntry {
  uint64_t id = 0;   // this communicator's running number over every operation
  uint64_t seq = 0;  // the collective sequence number (or p2p number for send / recv)
  CommOp op = CommOp::kAllReduce;
  std::string group;
  uint64_t bytes = 0;
  DType dtype = DType::kF32;
  int peer = -1;  // root of rooted collectives, peer of send / recv, -1 otherwise
  OpState state = OpState::kScheduled;
  double scheduled_us = 0;  // microseconds since the Unix epoch
  double started_us = 0;
  double finished_us = 0;
};

// What the live hang view reads from a recorder: the newest completed collective and the oldest
// operation started and not finished (the one its rank waits in), when still kept.
struct FlightProgress {
  std::optional<FlightEntry> last_completed_collective;
  std::optional<FlightEntry> oldest_in_flight;
};

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity);

  void record(const FlightEntry& entry);
  // Moves the entry with `id` (if still kept) to `state` at `time_us`.
  void transition(uint64_t id, OpState state, double time_us);
  std::vector<FlightEntry> entries() const;  // oldest first
  // A JSON array of the entries, oldest first, as the telemetry error event carries it.
  nlohmann::json dump() const;
  // One pass over the ring under its lock, copying two entries at most.
  FlightProgress progress() const;

 private:
  size_t capacity_;
  mutable std::mutex mutex_;
  std::vector<FlightEntry> ring_;  // guarded by mutex_
  size_t next_ = 0;                // where the next entry goes once the ring is full
};

// Every live communicator's recorder in this process, for a dump on demand (`ringmaster flight`,
// SIGUSR1 in a worker): a communicator registers its recorder for its lifetime.
void registerFlightRecorder(const FlightRecorder* recorder);
void unregisterFlightRecorder(const FlightRecorder* recorder);
// The entries of every registered recorder as one JSON array (each record names its group),
// registration order, oldest entry first within each.
nlohmann::json dumpRegisteredFlightRecorders();

}  // namespace ringmaster
