// Pipeline schedules as they ran: the F / B / W actions of one step on every rank (times on rank
// 0's clock), each as the wait for its input and its compute, and the measured bubble: the share
// of the step's span each rank did not compute (idle between actions or waiting inside one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "db/database.h"

namespace ringmaster::storage {

struct ScheduledAction {
  int rank = 0;
  int stage = 0;          // model stage
  int virtual_stage = 0;  // model chunk on its rank
  int micro_batch = 0;
  char phase = 'F';  // 'F', 'B' or 'W'
  // Reached at start_us, computing from ready_us (its input had arrived) to end_us; the last
  // transfer_us before ready_us were the input's transfer (exposed communication), the time
  // before that waiting for the other stage. Runs recorded before these existed read ready_us =
  // start_us and transfer_us = 0.
  int64_t start_us = 0, ready_us = 0, end_us = 0;
  int64_t transfer_us = 0;
  int64_t waitUs() const { return ready_us - transfer_us - start_us; }
  int64_t computeUs() const { return end_us - ready_us; }
};

struct RankBubble {
  int rank = 0;
  double busy_us = 0;          // computing
  double transfer_us = 0;      // receiving inputs it waited for (exposed communication)
  double wait_us = 0;          // inside actions, waiting for another stage (within the span)
  double bubble_fraction = 0;  // 1 - (busy + transfer) / the step's span: idle and waiting
};

struct StepSchedule {
  int64_t step = 0;
  // From the first compute's start to the last action's end: a stage that reached its first
  // action before any stage computed waited outside the step's span.
  int64_t start_us = 0, end_us = 0;
  std::vector<ScheduledAction> actions;  // by start time
  std::vector<RankBubble> ranks;         // by rank
  double bubble_fraction = 0;            // mean over ranks
};

// The steps with schedule events, ascending.
std::vector<int64_t> scheduledSteps(const Database& db, int64_t run_id);
// One step's schedule; nullopt when the step has no schedule events.
std::optional<StepSchedule> loadStepSchedule(const Database& db, int64_t run_id, int64_t step);
// The mean bubble fraction over the run's scheduled steps after the first (which includes the
// warm-up); the first alone when it is the only one; nullopt without schedule events.
std::optional<double> meanBubbleFraction(const Database& db, int64_t run_id);

}  // namespace ringmaster::storage
