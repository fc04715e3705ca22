// RunProgress: the live state of a run folded from its telemetry, for a progress bar or a status
// line: the step reached, the latest loss, the job's samples per second, the time left, which
// ranks have said hello or finished, and the first fatal error (the root cause).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "telemetry/events.h"

namespace ringmaster {

class RunProgress {
 public:
  // `samples_share`: the part of a rank's reported samples that are its own (1 for data parallel
  // strategies; 1 / world for a pipeline, whose stages all report the same samples).
  RunProgress(int world_size, int64_t total_steps, double samples_share = 1.0);

  void observe(const TelemetryEvent& event);

  int worldSize() const { return world_size_; }
  int64_t totalSteps() const { return total_steps_; }
  // The highest step that every rank having reported steps has reached.
  int64_t step() const;
  // The mean over ranks of their latest loss.
  std::optional<double> loss() const;
  // The whole job's throughput, smoothed over recent steps; 0 before the first step.
  double samplesPerSecond() const;
  // Time left at the recent pace of steps; nullopt until two steps have been seen.
  std::optional<double> etaSeconds() const;
  int ranksStarted() const { return static_cast<int>(hello_.size()); }
  int ranksDone() const { return done_; }

  struct RootCause {
    int rank = 0;
    std::string message;
    std::optional<std::string> host;
  };
  const std::optional<RootCause>& rootCause() const { return root_cause_; }

 private:
  struct RankState {
    int64_t step = 0;
    double loss = 0;
    double samples_per_second = 0;  // exponentially smoothed
  };
  int world_size_;
  int64_t total_steps_;
  double samples_share_;
  std::map<int, RankState> ranks_;
  std::map<int, bool> hello_;
  int done_ = 0;
  // Wall time and step of the first and latest step events of the lowest reporting rank.
  std::optional<std::pair<double, int64_t>> first_, latest_;
  int pace_rank_ = -1;
  std::optional<RootCause> root_cause_;
};

}  // namespace ringmaster
