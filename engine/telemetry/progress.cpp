// Folding telemetry into the progress figures.
#include "telemetry/progress.h"

#include <algorithm>
#include <limits>

namespace ringmaster {

namespace {
constexpr double kSmoothing = 0.3;  // weight of the newest step in the throughput average
}

RunProgress::RunProgress(int world_size, int64_t total_steps, double samples_share)
    : world_size_(world_size), total_steps_(total_steps), samples_share_(samples_share) {}

void RunProgress::observe(const TelemetryEvent& event) {
  if (std::holds_alternative<HelloEvent>(event.body)) {
    hello_[event.rank] = true;
  } else if (const auto* step = std::get_if<StepEvent>(&event.body)) {
    RankState& rank = ranks_[event.rank];
    rank.step = std::max(rank.step, step->step);
    rank.loss = step->loss;
    if (step->step_ms > 0) {
      const double rate = static_cast<double>(step->samples) * 1000.0 / step->step_ms;
      rank.samples_per_second =
          rank.samples_per_second == 0
              ? rate
              : kSmoothing * rate + (1 - kSmoothing) * rank.samples_per_second;
    }
    if (pace_rank_ < 0 || event.rank < pace_rank_) {
      pace_rank_ = event.rank;
      first_.reset();
    }
    if (event.rank == pace_rank_) {
      if (!first_) first_ = {event.time, step->step};
      latest_ = {event.time, step->step};
    }
  } else if (const auto* error = std::get_if<ErrorEvent>(&event.body)) {
    if (error->fatal && !root_cause_)
      root_cause_ = RootCause{event.rank, error->message, error->host};
  } else if (std::holds_alternative<DoneEvent>(event.body)) {
    ++done_;
  }
}

int64_t RunProgress::step() const {
  if (ranks_.empty()) return 0;
  int64_t step = std::numeric_limits<int64_t>::max();
  for (const auto& [rank, state] : ranks_) step = std::min(step, state.step);
  return step;
}

std::optional<double> RunProgress::loss() const {
  if (ranks_.empty()) return std::nullopt;
  double sum = 0;
  for (const auto& [rank, state] : ranks_) sum += state.loss;
  return sum / static_cast<double>(ranks_.size());
}

double RunProgress::samplesPerSecond() const {
  double total = 0;
  for (const auto& [rank, state] : ranks_) total += state.samples_per_second;
  return total * samples_share_;
}

std::optional<double> RunProgress::etaSeconds() const {
  if (!first_ || !latest_ || latest_->second <= first_->second) return std::nullopt;
  const double per_step =
      (latest_->first - first_->first) / static_cast<double>(latest_->second - first_->second);
  return std::max<int64_t>(0, total_steps_ - latest_->second) * per_step;
}

}  // namespace ringmaster
