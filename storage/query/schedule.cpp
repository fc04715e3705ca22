// Schedule queries: actions read in start order, bubbles from per-rank compute time over the span.
#include "query/schedule.h"

#include <algorithm>
#include <map>

#include "db/statement.h"

namespace ringmaster::storage {

namespace {

// A time of an action as the telemetry protocol bounds it (kMaxStep, docs/telemetry.md), within
// [-2^53, 2^53] microseconds, so that every difference of two fits an int64 whatever a
// hand-edited row (or an older version's) holds.
int64_t actionTime(const Statement& row, int column) {
  constexpr int64_t kBound = int64_t{1} << 53;
  return std::clamp(row.columnInt(column), -kBound, kBound);
}

}  // namespace

std::vector<int64_t> scheduledSteps(const Database& db, int64_t run_id) {
  Statement select(db, "SELECT DISTINCT step FROM sched_events WHERE run_id = ? ORDER BY step");
  select.bind(1, run_id);
  std::vector<int64_t> steps;
  while (select.run()) steps.push_back(select.columnInt(0));
  return steps;
}

std::optional<StepSchedule> loadStepSchedule(const Database& db, int64_t run_id, int64_t step) {
  Statement select(db,
                   "SELECT rank, stage, virtual_stage, micro_batch, phase, start_us, "
                   "coalesce(ready_us, start_us), end_us, coalesce(transfer_us, 0) FROM "
                   "sched_events WHERE run_id = ? AND step = ? AND attempt = (SELECT max(attempt) "
                   "FROM sched_events WHERE run_id = ?1 AND step = ?2) ORDER BY start_us, rank");
  select.bind(1, run_id).bind(2, step);
  StepSchedule schedule{.step = step};
  while (select.run()) {
    const std::string phase = select.columnText(4);
    ScheduledAction action{.rank = static_cast<int>(select.columnInt(0)),
                           .stage = static_cast<int>(select.columnInt(1)),
                           .virtual_stage = static_cast<int>(select.columnInt(2)),
                           .micro_batch = static_cast<int>(select.columnInt(3)),
                           .phase = phase.empty() ? '?' : phase[0],
                           .start_us = actionTime(select, 5),
                           .ready_us = actionTime(select, 6),
                           .end_us = actionTime(select, 7),
                           .transfer_us = actionTime(select, 8)};
    // A row written by hand may hold times outside the action: keep them inside.
    action.end_us = std::max(action.end_us, action.start_us);
    action.ready_us = std::clamp(action.ready_us, action.start_us, action.end_us);
    action.transfer_us =
        std::clamp<int64_t>(action.transfer_us, 0, action.ready_us - action.start_us);
    if (schedule.actions.empty()) {
      schedule.start_us = action.ready_us;
      schedule.end_us = action.end_us;
    }
    schedule.start_us = std::min(schedule.start_us, action.ready_us);
    schedule.end_us = std::max(schedule.end_us, action.end_us);
    schedule.actions.push_back(action);
  }
  if (schedule.actions.empty()) return std::nullopt;
  std::map<int, RankBubble> ranks;
  for (const ScheduledAction& action : schedule.actions) {
    RankBubble& rank = ranks[action.rank];
    rank.rank = action.rank;
    rank.busy_us += static_cast<double>(action.computeUs());
    const int64_t transfer_start = action.ready_us - action.transfer_us;
    rank.transfer_us += static_cast<double>(
        action.ready_us - std::max(transfer_start, std::min(schedule.start_us, action.ready_us)));
    rank.wait_us += static_cast<double>(
        std::max<int64_t>(0, transfer_start - std::max(action.start_us, schedule.start_us)));
  }
  const double span =
      static_cast<double>(std::max<int64_t>(1, schedule.end_us - schedule.start_us));
  for (auto& [number, rank] : ranks) {
    rank.wait_us = std::max(0.0, rank.wait_us);
    rank.bubble_fraction = std::clamp(1 - (rank.busy_us + rank.transfer_us) / span, 0.0, 1.0);
    schedule.bubble_fraction += rank.bubble_fraction;
    schedule.ranks.push_back(rank);
  }
  schedule.bubble_fraction /= static_cast<double>(schedule.ranks.size());
  return schedule;
}

std::optional<double> meanBubbleFraction(const Database& db, int64_t run_id) {
  const std::vector<int64_t> steps = scheduledSteps(db, run_id);
  if (steps.empty()) return std::nullopt;
  double sum = 0;
  int counted = 0;
  for (size_t i = steps.size() > 1 ? 1 : 0; i < steps.size(); ++i) {
    if (auto schedule = loadStepSchedule(db, run_id, steps[i])) {
      sum += schedule->bubble_fraction;
      ++counted;
    }
  }
  if (counted == 0) return std::nullopt;
  return sum / counted;
}

}  // namespace ringmaster::storage
