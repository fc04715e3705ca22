// TelemetryCommObserver: turns the communicator's records into telemetry `comm` events and its
// failure into an `error` event carrying the flight recorder, and its progress reports into
// `progress` events (the live hang view), on a worker's TelemetryWriter. Each comm event names the
// mesh dimension of its group (issue 34), as the communicators were added.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "comm/communicator.h"
#include "telemetry/writer.h"

namespace ringmaster {

class TelemetryCommObserver : public CommObserver {
 public:
  explicit TelemetryCommObserver(TelemetryWriter& writer) : writer_(writer) {}

  // The step the next operations belong to (the trainer sets it at each step; 0: none yet).
  void setStep(int64_t step) { step_ = step; }
  // Labels the operations of `communicator`'s group (by its group name) with the mesh dimension
  // `dim`: "dp", "tp", "pp" or "world". A group never added is the world's, as the world
  // communicator is without a call. Throws kInvalidArgument for another dim, a communicator whose
  // observer is not this one (its operations would never reach it), or a group name added before
  // under another dim.
  void addCommunicator(const Communicator& communicator, std::string_view dim);
  // The dimension of a group's operations: as added, else "world".
  std::string dimensionOf(const std::string& group) const;
  void onOperation(const CommRecord& record) override;
  void onFailure(const Error& error, const nlohmann::json& flight_recorder) override;
  void onProgress(const CommProgress& progress) override;
  // Whether onFailure has written the communicator's failure: what the trainer throws after it
  // is that failure again, not a second error of the rank.
  bool failureReported() const { return failure_reported_; }

  static CommEvent toEvent(const CommRecord& record, std::optional<int64_t> step,
                           std::string_view dim = kWorldCommDim);
  static ProgressEvent toEvent(const CommProgress& progress, std::optional<int64_t> step);

 private:
  TelemetryWriter& writer_;
  std::atomic<int64_t> step_{0};
  std::atomic<bool> failure_reported_{false};
  mutable std::mutex dims_mutex_;            // communicators are added while others run
  std::map<std::string, std::string> dims_;  // group name -> its mesh dimension
};

}  // namespace ringmaster
