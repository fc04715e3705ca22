// The pipeline bubble explained: the engine's planned schedule replayed with each model stage's
// measured action times (the median compute, ready_us..end_us, of its F, B and W actions, so
// waits and transfers are excluded), and the gap between the planned and the measured bubble
// split into stage imbalance (replayed minus planned) and runtime overhead (measured minus
// replayed). It reads the schedule queries and the stored spec; it draws nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "db/database.h"
#include "query/schedule.h"
#include "spec/job_spec.h"
#include "spec/strategies/pipeline_schedule.h"

namespace ringmaster::storage {

// One model stage's measured action times, µs: the median compute of each phase's actions.
struct StageCost {
  int stage = 0;                                          // model stage
  int rank = 0;                                           // the rank that runs it
  double forward_us = 0, backward_us = 0, weight_us = 0;  // weight: zb_h1 only, else 0
  int actions = 0;                                        // actions measured
  double perMicroBatchUs() const { return forward_us + backward_us + weight_us; }
};

struct BubbleSplit {
  double planned = 0;   // the plan's bubble with unit costs (the textbook figure for most plans)
  double replayed = 0;  // the plan's bubble with each stage's measured costs
  double measured = 0;  // the measured bubble (mean over the steps used)
  // The gap in percentage points: imbalance + overhead = measured - planned.
  double imbalancePoints() const { return 100 * (replayed - planned); }
  double overheadPoints() const { return 100 * (measured - replayed); }
  std::vector<StageCost> stages;  // by model stage
  int slowest_stage = 0;          // the most compute per micro-batch
  int steps = 0;                  // the steps measured
  ScheduleTimeline replay;        // "planned with measured costs", µs from its first action
};

// The plan of an engine pipeline job's spec (its world size, micro-batches, schedule and virtual
// stages); nullopt for other strategies and for program jobs. Throws kInvalidArgument for a
// pipeline the engine would refuse.
std::optional<PipelinePlan> pipelinePlanOf(const JobSpec& spec);

// The split over `steps` of a run planned as `plan`: each stage's costs are the medians over all
// of its actions in them, the measured bubble their mean. nullopt when there is no step or some
// model stage has no measured forward or backward (or weight gradient, for zb_h1); actions of a
// stage the plan does not have are ignored.
std::optional<BubbleSplit> splitBubble(const PipelinePlan& plan,
                                       const std::vector<StepSchedule>& steps);

// The run's split, over the steps meanBubbleFraction averages (after the first, which includes the
// warm-up); nullopt for a run that is no engine pipeline run (or whose spec no longer parses) and
// as splitBubble.
std::optional<BubbleSplit> runBubbleSplit(const Database& db, int64_t run_id,
                                          const std::string& spec_json);

// The split in words, as every front end shows it: "stage imbalance: +33.9 pts; runtime overhead:
// +7.8 pts; slowest stage: 0 (rank 0), 2.10 ms per micro-batch (F 0.70 + B 1.40 ms)".
std::string describeBubbleSplit(const BubbleSplit& split);

}  // namespace ringmaster::storage
