// Pipeline schedules as a pure function: (ranks, micro-batches, schedule, virtual stages) -> the
// ordered F / B / W actions of each rank. The runtime executes these lists; the desktop draws them.
// simulateSchedule() plays a plan with given costs (the same for every stage, or each model
// stage's own, as measured) and reports each action's start and end and the bubble, which with
// unit costs is the textbook figure.
#pragma once

#include <string>
#include <vector>

#include "spec/strategies/pipeline.h"

namespace ringmaster {

// F: forward; B: backward (input and weight gradients, or with zb_h1 the input gradient only);
// W: the weight gradient of zb_h1, deferred to fill what would be bubble.
enum class PipelinePhase { kForward, kBackward, kWeight };

char phaseLetter(PipelinePhase phase);  // 'F', 'B', 'W'

struct PipelineAction {
  PipelinePhase phase = PipelinePhase::kForward;
  int micro_batch = 0;
  int chunk = 0;  // virtual stage on this rank: 0..virtual_stages-1
  bool operator==(const PipelineAction&) const = default;
};

struct PipelinePlan {
  PipelineSchedule schedule = PipelineSchedule::k1f1b;
  int ranks = 1;           // p: pipeline ranks
  int micro_batches = 1;   // m
  int virtual_stages = 1;  // v: model chunks per rank
  // actions[r]: rank r's actions in execution order.
  std::vector<std::vector<PipelineAction>> actions;

  int modelStages() const { return ranks * virtual_stages; }
  // The model stage (0..p*v-1) of chunk `chunk` on rank `rank`: chunk * p + rank, so that a
  // micro-batch visits every rank once per chunk (Megatron's interleaving).
  int modelStage(int rank, int chunk) const { return chunk * ranks + rank; }
};

// Throws kInvalidArgument naming the problem: p, m or v below 1; v > 1 without interleaved_1f1b;
// interleaved_1f1b with v < 2 or m not a multiple of p (Megatron's requirement).
PipelinePlan makePipelinePlan(int ranks, int micro_batches, PipelineSchedule schedule,
                              int virtual_stages = 1);

// What each phase costs, in any unit; with zb_h1, `backward` is the input-gradient part and
// `weight` the rest, otherwise `backward` is the whole backward and `weight` is unused.
struct PhaseCosts {
  double forward = 1.0;
  double backward = 1.0;
  double weight = 1.0;
};

struct TimedAction {
  PipelineAction action;
  int rank = 0;
  double start = 0;
  double end = 0;
};

struct ScheduleTimeline {
  std::vector<std::vector<TimedAction>> per_rank;  // in each rank's execution order
  double makespan = 0;
  std::vector<double> bubble_fraction;  // per rank: idle time / makespan
  double bubbleFraction() const;        // mean over ranks
};

// Plays the plan: every action starts when its rank is free and its inputs exist (F after the
// previous model stage's F of the micro-batch; B after the next stage's B and its own F; W after
// its B); transfers take no time. Throws kInvalidArgument if the plan would deadlock.
ScheduleTimeline simulateSchedule(const PipelinePlan& plan, const PhaseCosts& costs = {});

// The same play with each model stage's own costs: stage_costs[s] is what one action of model
// stage s costs (not divided among virtual stages), as measured on a run; the replay of a plan
// with its stages' measured times. Throws kInvalidArgument unless there is one entry per model
// stage, each finite and not negative.
ScheduleTimeline simulateSchedule(const PipelinePlan& plan,
                                  const std::vector<PhaseCosts>& stage_costs);

// The textbook bubble fraction with equal forward and backward costs: (p-1)/(m+p-1) for GPipe and
// 1F1B, (p-1)/(v*m+p-1) for interleaved 1F1B, (p-1)/(3m+p-1) for ZB-H1 with F = B = W (which
// needs m >= p: with fewer micro-batches the F and B chains through all stages dominate).
double theoreticalBubbleFraction(PipelineSchedule schedule, int ranks, int micro_batches,
                                 int virtual_stages = 1);

}  // namespace ringmaster
