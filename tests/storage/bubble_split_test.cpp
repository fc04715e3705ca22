// Issue 33, explain the bubble: the planned schedule replayed with each stage's measured costs,
// against a real database whose sched_events were played from known stage costs with waits before
// every action and a runtime gap inside each: the replay recovers the costs (waits excluded), its
// bubble is the one worked out by hand, and the gap splits into imbalance and overhead that add up
// to measured minus planned. Balanced costs leave no imbalance; medians ignore an outlier.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_paths.h"
#include "db/database.h"
#include "query/bubble_split.h"
#include "query/runs.h"
#include "query/schedule.h"
#include "recorder/recorder.h"
#include "recorder/run_lifecycle.h"
#include "storage/storage_test_support.h"

namespace ringmaster::storage {
namespace {

// The pipeline example (1F1B) on `ranks` local ranks with `micro_batches`, one Linear per stage.
std::string pipelineSpec(int ranks, int micro_batches) {
  std::ifstream in(std::string(testSourceDir()) + "/resources/examples/pipeline_mlp.json");
  nlohmann::json spec = nlohmann::json::parse(in);
  spec["launch"]["hosts"][0]["ranks"] = ranks;
  spec["train"]["micro_batches"] = micro_batches;
  spec["train"]["batch_size"] = 8 * micro_batches;
  nlohmann::json layers = nlohmann::json::array({784});
  for (int r = 1; r < ranks; ++r) layers.push_back(64);
  layers.push_back(10);
  spec["model"]["layers"] = layers;
  return spec.dump();
}

SchedPhase schedPhase(PipelinePhase phase) {
  return phase == PipelinePhase::kForward    ? SchedPhase::kForward
         : phase == PipelinePhase::kBackward ? SchedPhase::kBackward
                                             : SchedPhase::kWeight;
}

class BubbleSplitTest : public testing::StorageTest {
 protected:
  std::string path() const { return (dir_ / "runs.db").string(); }

  // Records steps 1..steps of `plan` played with per-stage costs (µs, F = B) on a real database:
  // every action of step s starts `gap_us` before it computes (runtime overhead between actions),
  // is reached when its rank is free (so it waits for its input inside the action), and step 1
  // (the warm-up, which the split leaves out) costs three times as much everywhere.
  int64_t recordRun(const std::string& spec_json, const PipelinePlan& plan,
                    const std::vector<double>& stage_us, double gap_us, int steps) {
    Database db(path());
    const int64_t run = createRun(
        db,
        {.name = "pipe", .spec_json = spec_json, .strategy = "pipeline", .world_size = plan.ranks});
    Recorder recorder(path(), run, 0);
    std::vector<uint64_t> seq(static_cast<size_t>(plan.ranks), 0);
    for (int step = 1; step <= steps; ++step) {
      std::vector<PhaseCosts> costs;
      for (double us : stage_us) {
        const double cost = (step == 1 ? 3 * us : us) + gap_us;
        costs.push_back({cost, cost, cost});
      }
      const ScheduleTimeline played = simulateSchedule(plan, costs);
      const int64_t origin = step * 1'000'000;
      for (const auto& actions : played.per_rank) {
        double free_at = 0;
        for (const TimedAction& timed : actions) {
          const auto at = [&](double t) { return origin + static_cast<int64_t>(t); };
          recorder.submit(
              {.rank = timed.rank,
               .seq = seq[static_cast<size_t>(timed.rank)]++,
               .time = 1e9,
               .body = SchedEvent{.step = step,
                                  .stage = plan.modelStage(timed.rank, timed.action.chunk),
                                  .micro_batch = timed.action.micro_batch,
                                  .phase = schedPhase(timed.action.phase),
                                  .start_us = at(free_at),
                                  .end_us = at(timed.end),
                                  .ready_us = at(timed.start + gap_us)}});
          free_at = timed.end;
        }
      }
    }
    return run;
  }
};

// 1F1B on 3 stages, 3 micro-batches, the middle stage 4 times the others: the replay's bubble is
// 7/13 (worked out in tests/engine/parallel/pipeline_schedule_test.cpp), the unit plan's 2/5.
TEST_F(BubbleSplitTest, AHeavyStagesShareIsImbalanceAndTheGapsBetweenActionsOverhead) {
  const std::string spec = pipelineSpec(3, 3);
  const PipelinePlan plan = makePipelinePlan(3, 3, PipelineSchedule::k1f1b);
  const int64_t run = recordRun(spec, plan, {1000, 4000, 1000}, 100, 4);
  Database db(path());
  const std::optional<BubbleSplit> split = runBubbleSplit(db, run, spec);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->steps, 3);  // steps 2..4
  ASSERT_EQ(split->stages.size(), 3u);
  const double expected_us[] = {1000, 4000, 1000};
  for (const StageCost& stage : split->stages) {
    SCOPED_TRACE(stage.stage);
    EXPECT_EQ(stage.rank, stage.stage);
    EXPECT_DOUBLE_EQ(stage.forward_us, expected_us[stage.stage]);  // the waits left out
    EXPECT_DOUBLE_EQ(stage.backward_us, expected_us[stage.stage]);
    EXPECT_EQ(stage.weight_us, 0);
    EXPECT_EQ(stage.actions, 3 * 3 * 2);
  }
  EXPECT_EQ(split->slowest_stage, 1);
  EXPECT_NEAR(split->planned, 2.0 / 5, 1e-12);
  EXPECT_NEAR(split->replayed, 7.0 / 13, 1e-12);
  EXPECT_DOUBLE_EQ(split->replay.makespan, 26'000);
  // Measured: the steps' mean bubble, as the run's figure; above the replay by the gaps.
  EXPECT_NEAR(split->measured, *meanBubbleFraction(db, run), 1e-12);
  EXPECT_GT(split->overheadPoints(), 0);
  EXPECT_NEAR(split->imbalancePoints(), 100 * (7.0 / 13 - 2.0 / 5), 1e-9);
  EXPECT_NEAR(split->imbalancePoints() + split->overheadPoints(),
              100 * (split->measured - split->planned), 1e-9);
  const std::string text = describeBubbleSplit(*split);
  EXPECT_NE(text.find("stage imbalance: +13.8 pts; runtime overhead: +"), std::string::npos)
      << text;
  EXPECT_NE(text.find("slowest stage: 1 (rank 1), 8.00 ms per micro-batch"), std::string::npos)
      << text;
}

// Every stage as costly: no imbalance, whatever the schedule's size; the gaps are overhead.
TEST_F(BubbleSplitTest, BalancedStagesLeaveNoImbalance) {
  for (int ranks : {2, 4}) {
    for (int micro_batches : {1, 4, 8}) {
      SCOPED_TRACE(::testing::Message()
                   << ranks << " ranks, " << micro_batches << " micro-batches");
      const std::string spec = pipelineSpec(ranks, micro_batches);
      const PipelinePlan plan = makePipelinePlan(ranks, micro_batches, PipelineSchedule::k1f1b);
      const int64_t run =
          recordRun(spec, plan, std::vector<double>(static_cast<size_t>(ranks), 700), 50, 3);
      Database db(path());
      const std::optional<BubbleSplit> split = runBubbleSplit(db, run, spec);
      ASSERT_TRUE(split.has_value());
      EXPECT_NEAR(split->imbalancePoints(), 0, 1e-9);
      EXPECT_NEAR(split->planned,
                  theoreticalBubbleFraction(PipelineSchedule::k1f1b, ranks, micro_batches), 1e-12);
      EXPECT_GT(split->overheadPoints(), 0);
    }
  }
}

// Medians, not means: one slow action does not move its stage's cost; the wait before each
// action is not compute.
TEST(BubbleSplit, EachStagesCostIsTheMedianOfItsActionsComputeAlone) {
  const PipelinePlan plan = makePipelinePlan(1, 3, PipelineSchedule::kGpipe);
  StepSchedule step{.step = 2, .bubble_fraction = 0.25};
  auto action = [&](char phase, int micro, int64_t start, int64_t ready, int64_t end) {
    step.actions.push_back({.rank = 0,
                            .stage = 0,
                            .micro_batch = micro,
                            .phase = phase,
                            .start_us = start,
                            .ready_us = ready,
                            .end_us = end});
  };
  action('F', 0, 0, 500, 600);       // 100 after a long wait
  action('F', 1, 600, 600, 10'600);  // the outlier
  action('F', 2, 10'600, 10'600, 10'700);
  action('B', 2, 10'700, 10'900, 11'100);
  action('B', 1, 11'100, 11'100, 11'300);
  action('B', 0, 11'300, 11'300, 11'500);
  action('F', 0, 0, 0, 100);
  step.actions.back().stage = 5;  // a stage the plan does not have: ignored
  const std::optional<BubbleSplit> split = splitBubble(plan, {step});
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->stages[0].forward_us, 100);
  EXPECT_EQ(split->stages[0].backward_us, 200);
  EXPECT_EQ(split->stages[0].actions, 6);
  EXPECT_EQ(split->measured, 0.25);
  EXPECT_EQ(split->replayed, 0);  // one stage is never idle
  EXPECT_DOUBLE_EQ(split->replay.makespan, 900);
}

// Nothing to split: no step, a stage without its backward, a run that is no pipeline.
TEST_F(BubbleSplitTest, WithoutEveryStagesCostsThereIsNoSplit) {
  const PipelinePlan plan = makePipelinePlan(2, 2, PipelineSchedule::k1f1b);
  EXPECT_FALSE(splitBubble(plan, {}).has_value());
  StepSchedule forwards_only;
  for (int stage : {0, 1})
    forwards_only.actions.push_back(
        {.rank = stage, .stage = stage, .phase = 'F', .start_us = 0, .ready_us = 0, .end_us = 5});
  EXPECT_FALSE(splitBubble(plan, {forwards_only}).has_value());

  Database db(path());
  std::ifstream in(std::string(testSourceDir()) + "/resources/examples/ddp_mlp.json");
  const std::string ddp((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(runBubbleSplit(db, 1, ddp).has_value());
  EXPECT_FALSE(runBubbleSplit(db, 1, "not json").has_value());
  const std::string spec = pipelineSpec(2, 2);
  const int64_t empty =
      createRun(db, {.name = "pipe", .spec_json = spec, .strategy = "pipeline", .world_size = 2});
  EXPECT_FALSE(runBubbleSplit(db, empty, spec).has_value());  // no schedule events yet
}

}  // namespace
}  // namespace ringmaster::storage
