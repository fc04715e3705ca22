// TelemetryCommObserver: turns the communicator's records into telemetry `comm` events and its
// failure into an `error` event carrying the flight recorder, and its progress reports into
// `progress` events (the live hang view), on a worker's TelemetryWriter. Each comm event names the
// mesh dimension its group spans (Communicator::meshDimension, set by parallel/device_mesh.h), or
// "world" for a group off the mesh.
#pragma once

#include <atomic>
#include <cstdint>
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
};

}  // namespace ringmaster
