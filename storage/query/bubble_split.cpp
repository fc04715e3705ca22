// The bubble split: stage costs gathered step by step (medians of each stage's compute per phase),
// the plan replayed with them, and the three bubbles side by side.
#include "query/bubble_split.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster::storage {

namespace {

// Each model stage's compute times per phase (F, B, W), µs, and the steps' bubbles, gathered
// one step at a time so that a long run's steps need not all be held at once.
class StageSamples {
 public:
  explicit StageSamples(int stages) : durations_(static_cast<size_t>(stages)) {}

  void add(const StepSchedule& step) {
    for (const ScheduledAction& action : step.actions) {
      const int phase = phaseIndex(action.phase);
      if (phase < 0 || action.stage < 0 || action.stage >= static_cast<int>(durations_.size()))
        continue;
      durations_[static_cast<size_t>(action.stage)][static_cast<size_t>(phase)].push_back(
          static_cast<double>(action.computeUs()));
    }
    bubble_sum_ += step.bubble_fraction;
    ++steps_;
  }

  int steps() const { return steps_; }
  double meanBubble() const { return steps_ > 0 ? bubble_sum_ / steps_ : 0; }

  // The medians per stage; nullopt when a stage lacks a phase the plan runs.
  std::optional<std::vector<StageCost>> costs(const PipelinePlan& plan) {
    const bool weight = plan.schedule == PipelineSchedule::kZbH1;
    std::vector<StageCost> stages;
    for (size_t s = 0; s < durations_.size(); ++s) {
      auto& phases = durations_[s];
      if (phases[0].empty() || phases[1].empty() || (weight && phases[2].empty()))
        return std::nullopt;
      stages.push_back(
          {.stage = static_cast<int>(s),
           .rank = static_cast<int>(s) % plan.ranks,
           .forward_us = median(phases[0]),
           .backward_us = median(phases[1]),
           .weight_us = weight ? median(phases[2]) : 0,
           .actions = static_cast<int>(phases[0].size() + phases[1].size() + phases[2].size())});
    }
    return stages;
  }

 private:
  static int phaseIndex(char phase) {
    return phase == 'F' ? 0 : phase == 'B' ? 1 : phase == 'W' ? 2 : -1;
  }

  static double median(std::vector<double>& values) {
    const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
    std::nth_element(values.begin(), middle, values.end());
    if (values.size() % 2 == 1) return *middle;
    return (*middle + *std::max_element(values.begin(), middle)) / 2;
  }

  std::vector<std::array<std::vector<double>, 3>> durations_;  // [stage][phase]
  double bubble_sum_ = 0;
  int steps_ = 0;
};

std::optional<BubbleSplit> splitOf(const PipelinePlan& plan, StageSamples& samples) {
  if (samples.steps() == 0) return std::nullopt;
  std::optional<std::vector<StageCost>> stages = samples.costs(plan);
  if (!stages) return std::nullopt;
  std::vector<PhaseCosts> costs;
  for (const StageCost& stage : *stages)
    costs.push_back({stage.forward_us, stage.backward_us, stage.weight_us});
  BubbleSplit split;
  split.planned = simulateSchedule(plan).bubbleFraction();
  split.replay = simulateSchedule(plan, costs);
  split.replayed = split.replay.bubbleFraction();
  split.measured = samples.meanBubble();
  split.steps = samples.steps();
  split.stages = std::move(*stages);
  for (const StageCost& stage : split.stages)
    if (stage.perMicroBatchUs() > split.stages[split.slowest_stage].perMicroBatchUs())
      split.slowest_stage = stage.stage;
  return split;
}

}  // namespace

std::optional<PipelinePlan> pipelinePlanOf(const JobSpec& spec) {
  // A program job's script schedules its own micro-batches: its spec has none to plan from.
  if (spec.program || stageCount(spec) == 1) return std::nullopt;
  return makePipelinePlan(spec.strategy.mesh.pp, spec.train.micro_batches,
                          spec.strategy.pipeline.schedule, spec.strategy.pipeline.virtual_stages);
}

std::optional<BubbleSplit> splitBubble(const PipelinePlan& plan,
                                       const std::vector<StepSchedule>& steps) {
  StageSamples samples(plan.modelStages());
  for (const StepSchedule& step : steps) samples.add(step);
  return splitOf(plan, samples);
}

std::optional<BubbleSplit> runBubbleSplit(const Database& db, int64_t run_id,
                                          const std::string& spec_json) {
  const SpecParseResult parsed = parseJobSpec(spec_json);
  if (!parsed.ok()) return std::nullopt;
  std::optional<PipelinePlan> plan;
  try {
    plan = pipelinePlanOf(*parsed.spec);
  } catch (const Error&) {
    return std::nullopt;  // a spec the engine refuses never ran a schedule
  }
  if (!plan) return std::nullopt;
  const std::vector<int64_t> steps = scheduledSteps(db, run_id);
  StageSamples samples(plan->modelStages());
  for (size_t i = steps.size() > 1 ? 1 : 0; i < steps.size(); ++i)
    if (std::optional<StepSchedule> step = loadStepSchedule(db, run_id, steps[i]))
      samples.add(*step);
  return splitOf(*plan, samples);
}

std::string describeBubbleSplit(const BubbleSplit& split) {
  const StageCost& slowest = split.stages.at(static_cast<size_t>(split.slowest_stage));
  std::string phases =
      fmt::format("F {:.2f} + B {:.2f}", slowest.forward_us / 1000, slowest.backward_us / 1000);
  if (slowest.weight_us > 0) phases += fmt::format(" + W {:.2f}", slowest.weight_us / 1000);
  return fmt::format(
      "stage imbalance: {:+.1f} pts; runtime overhead: {:+.1f} pts; slowest stage: {} (rank {}), "
      "{:.2f} ms per micro-batch ({} ms)",
      split.imbalancePoints(), split.overheadPoints(), slowest.stage, slowest.rank,
      slowest.perMicroBatchUs() / 1000, phases);
}

}  // namespace ringmaster::storage
