// The schedule function: every plan contains each action once, respects its dependencies under any
// costs, keeps 1F1B's activations within p micro-batches, and with unit costs has the textbook
// bubble: (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v m+p-1) interleaved, (p-1)/(3m+p-1) for ZB-H1.
// Replayed with each stage's own costs (issue 33, explain the bubble): equal costs give the unit
// plan's bubble, a heavy stage the bubble worked out by hand.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "spec/strategies/pipeline_schedule.h"

namespace ringmaster {
namespace {

using Phase = PipelinePhase;

struct Case {
  PipelineSchedule schedule;
  int p, m, v;
};

std::string name(const Case& c) {
  return fmt::format("{}_p{}_m{}_v{}", toString(c.schedule), c.p, c.m, c.v);
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (int p : {1, 2, 3, 4, 8}) {
    for (int m : {1, 2, 3, 4, 5, 8, 16}) {
      cases.push_back({PipelineSchedule::kGpipe, p, m, 1});
      cases.push_back({PipelineSchedule::k1f1b, p, m, 1});
      cases.push_back({PipelineSchedule::kZbH1, p, m, 1});
      if (m % p == 0)
        for (int v : {2, 3}) cases.push_back({PipelineSchedule::kInterleaved1f1b, p, m, v});
    }
  }
  return cases;
}

// Runs `check` on every case, the case named in failures.
template <typename Check>
void forEveryCase(Check check) {
  for (const Case& c : allCases()) {
    SCOPED_TRACE(name(c));
    check(c);
  }
}

TEST(EverySchedule, RunsEachActionOnceOnItsRank) {
  forEveryCase([](const Case& c) {
    PipelinePlan plan = makePipelinePlan(c.p, c.m, c.schedule, c.v);
    ASSERT_EQ(plan.actions.size(), static_cast<size_t>(c.p));
    const bool split = c.schedule == PipelineSchedule::kZbH1;
    for (int r = 0; r < c.p; ++r) {
      std::set<std::tuple<Phase, int, int>> seen;
      for (const PipelineAction& a : plan.actions[r]) {
        EXPECT_TRUE(seen.insert({a.phase, a.micro_batch, a.chunk}).second) << "rank " << r;
        EXPECT_GE(a.micro_batch, 0);
        EXPECT_LT(a.micro_batch, c.m);
        EXPECT_GE(a.chunk, 0);
        EXPECT_LT(a.chunk, c.v);
      }
      EXPECT_EQ(seen.size(), static_cast<size_t>(c.m * c.v * (split ? 3 : 2))) << "rank " << r;
    }
  });
}

TEST(EverySchedule, RespectsItsDependenciesUnderAnyCosts) {
  forEveryCase([](const Case& c) {
    PipelinePlan plan = makePipelinePlan(c.p, c.m, c.schedule, c.v);
    std::mt19937 random(c.p * 1000 + c.m * 10 + c.v);
    std::uniform_real_distribution<double> cost(0.1, 3.0);
    for (int trial = 0; trial < 5; ++trial) {
      PhaseCosts costs{cost(random), cost(random), cost(random)};
      ScheduleTimeline timeline = simulateSchedule(plan, costs);
      // An independent check of the timeline: each action after its inputs, ranks never overlap.
      std::map<std::tuple<int, int, Phase>, const TimedAction*> by_key;
      for (const auto& rank : timeline.per_rank)
        for (const TimedAction& t : rank)
          by_key[{plan.modelStage(t.rank, t.action.chunk), t.action.micro_batch, t.action.phase}] =
              &t;
      const int stages = plan.modelStages();
      for (const auto& entry : by_key) {
        // Plain variables, not structured bindings: clang 14 (asan, tsan) cannot capture those.
        const int stage = std::get<0>(entry.first);
        const int mb = std::get<1>(entry.first);
        const Phase phase = std::get<2>(entry.first);
        const TimedAction* t = entry.second;
        auto before = [&](int s, Phase ph) {
          auto it = by_key.find({s, mb, ph});
          ASSERT_NE(it, by_key.end());
          EXPECT_LE(it->second->end, t->start + 1e-9)
              << phaseLetter(phase) << " of micro-batch " << mb << " at stage " << stage
              << " before its input " << phaseLetter(ph) << " at stage " << s;
        };
        if (phase == Phase::kForward && stage > 0) before(stage - 1, Phase::kForward);
        if (phase == Phase::kBackward) {
          before(stage, Phase::kForward);
          if (stage < stages - 1) before(stage + 1, Phase::kBackward);
        }
        if (phase == Phase::kWeight) before(stage, Phase::kBackward);
      }
      for (const auto& rank : timeline.per_rank)
        for (size_t i = 1; i < rank.size(); ++i) EXPECT_LE(rank[i - 1].end, rank[i].start + 1e-9);
    }
  });
}

TEST(EverySchedule, UnitCostBubbleIsTheTextbookFigure) {
  forEveryCase([](const Case& c) {
    PipelinePlan plan = makePipelinePlan(c.p, c.m, c.schedule, c.v);
    ScheduleTimeline timeline = simulateSchedule(plan);  // F = B = W = 1
    const double expected = theoreticalBubbleFraction(c.schedule, c.p, c.m, c.v);
    if (c.schedule == PipelineSchedule::kZbH1 && c.m < c.p) {
      // Too few micro-batches to hide the chains: the makespan is the critical path, one F per
      // stage down, one B per stage back up, and on the first stage the last W: 2p + 2m - 1 here.
      EXPECT_DOUBLE_EQ(timeline.makespan, 2 * c.p + 2 * c.m - 1);
      return;
    }
    for (int r = 0; r < c.p; ++r)
      EXPECT_NEAR(timeline.bubble_fraction[r], expected, 1e-9) << "rank " << r;
  });
}

// Issue 33: the replay with every model stage costing the same (any amount, F = B = W) is the unit
// plan scaled: the same bubble on every rank, for every schedule.
TEST(EverySchedule, EqualStageCostsReplayTheUnitPlansBubble) {
  forEveryCase([](const Case& c) {
    PipelinePlan plan = makePipelinePlan(c.p, c.m, c.schedule, c.v);
    const ScheduleTimeline unit = simulateSchedule(plan);
    const std::vector<PhaseCosts> equal(static_cast<size_t>(plan.modelStages()), {2.5, 2.5, 2.5});
    const ScheduleTimeline replay = simulateSchedule(plan, equal);
    EXPECT_NEAR(replay.makespan, unit.makespan * 2.5 * c.v, 1e-9);
    for (int r = 0; r < c.p; ++r)
      EXPECT_NEAR(replay.bubble_fraction[r], unit.bubble_fraction[r], 1e-9) << "rank " << r;
  });
}

// Issue 33: with GPipe and 1F1B the ratio of backward to forward, the same on every stage, does not
// move the bubble either: only unequal stages show as imbalance.
TEST(EverySchedule, ABackwardDearerThanTheForwardOnEveryStageKeepsGpipeAnd1f1bBubbles) {
  forEveryCase([](const Case& c) {
    if (c.schedule != PipelineSchedule::kGpipe && c.schedule != PipelineSchedule::k1f1b) return;
    PipelinePlan plan = makePipelinePlan(c.p, c.m, c.schedule, c.v);
    const std::vector<PhaseCosts> costs(static_cast<size_t>(plan.modelStages()), {1, 2.5, 0});
    EXPECT_NEAR(simulateSchedule(plan, costs).bubbleFraction(),
                theoreticalBubbleFraction(c.schedule, c.p, c.m), 1e-9);
  });
}

// Issue 33: 1F1B on 3 stages, 3 micro-batches, the middle stage 4 times the others (F = B = 1,
// 4, 1). By hand: stage 0 runs F0 F1 F2 at 0..3; stage 1 F0 1..5, F1 5..9; stage 2 F0 5..6,
// B0 6..7, F1 9..10, B1 10..11; stage 1 B0 9..13, F2 13..17; stage 2 F2 17..18, B2 18..19; stage
// 1 B1 17..21, B2 21..25; stage 0 B0 13..14, B1 21..22, B2 25..26. Makespan 26; busy 6, 24, 6:
// bubbles 20/26, 2/26, 20/26, mean 7/13, against the unit plan's 2/5.
TEST(PipelineReplay, AHeavyStageGivesTheBubbleWorkedOutByHand) {
  const PipelinePlan plan = makePipelinePlan(3, 3, PipelineSchedule::k1f1b);
  const ScheduleTimeline replay = simulateSchedule(plan, {{1, 1, 0}, {4, 4, 0}, {1, 1, 0}});
  EXPECT_DOUBLE_EQ(replay.makespan, 26);
  ASSERT_EQ(replay.bubble_fraction.size(), 3u);
  EXPECT_NEAR(replay.bubble_fraction[0], 20.0 / 26, 1e-12);
  EXPECT_NEAR(replay.bubble_fraction[1], 2.0 / 26, 1e-12);
  EXPECT_NEAR(replay.bubble_fraction[2], 20.0 / 26, 1e-12);
  EXPECT_NEAR(replay.bubbleFraction(), 7.0 / 13, 1e-12);
  EXPECT_NEAR(simulateSchedule(plan).bubbleFraction(), 2.0 / 5, 1e-12);
  // Stage 0's last backward waits for stage 1's: it starts at 25.
  EXPECT_DOUBLE_EQ(replay.per_rank[0].back().start, 25);
  // The heavier the middle stage, the larger the bubble: never below the balanced plan's.
  double previous = simulateSchedule(plan).bubbleFraction();
  for (double heavy : {1.5, 2.0, 4.0, 8.0}) {
    const double bubble =
        simulateSchedule(plan, {{1, 1, 0}, {heavy, heavy, 0}, {1, 1, 0}}).bubbleFraction();
    EXPECT_GT(bubble, previous) << "middle stage " << heavy << " times the others";
    previous = bubble;
  }
}

TEST(PipelineReplay, RefusesStageCostsThatDoNotFitThePlan) {
  const PipelinePlan plan = makePipelinePlan(2, 4, PipelineSchedule::kInterleaved1f1b, 2);
  EXPECT_THROW(simulateSchedule(plan, std::vector<PhaseCosts>(2)), Error);  // 4 model stages
  std::vector<PhaseCosts> costs(4);
  costs[3].backward = -1;
  EXPECT_THROW(simulateSchedule(plan, costs), Error);
  costs[3].backward = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(simulateSchedule(plan, costs), Error);
}

TEST(EverySchedule, HoldsAtMostPMicroBatchesOfActivations) {
  forEveryCase([](const Case& c) {
    if (c.schedule == PipelineSchedule::kGpipe) return;  // GPipe holds all m by design
    PipelinePlan plan = makePipelinePlan(c.p, c.m, c.schedule, c.v);
    for (int r = 0; r < c.p; ++r) {
      // A micro-batch's activations on a rank live from its F to its B (zb_h1's W keeps only the
      // layer inputs and output gradients, which B has already reduced to what W needs).
      const Phase last = Phase::kBackward;
      int held = 0, peak = 0;
      for (const PipelineAction& a : plan.actions[r]) {
        if (a.phase == Phase::kForward) peak = std::max(peak, ++held);
        if (a.phase == last) --held;
      }
      if (c.schedule == PipelineSchedule::kInterleaved1f1b) {
        // Megatron's bound, in chunk activations of 1/v of a stage each.
        EXPECT_LE(peak, std::min(c.m * c.v, (c.p - r - 1) * 2 + (c.v - 1) * c.p + 1)) << r;
      } else {
        EXPECT_LE(peak, c.p - r) << "rank " << r;
        EXPECT_LE(peak, c.p);
      }
    }
  });
}

TEST(PipelineSchedule, OneFOneBIsTheTextbookOrder) {
  PipelinePlan plan = makePipelinePlan(4, 6, PipelineSchedule::k1f1b);
  auto letters = [&](int r) {
    std::string s;
    for (const auto& a : plan.actions[r])
      s += fmt::format("{}{} ", phaseLetter(a.phase), a.micro_batch);
    return s;
  };
  EXPECT_EQ(letters(0), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ");
  EXPECT_EQ(letters(3), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 ");
}

TEST(PipelineSchedule, ZeroBubbleBeatsOneFOneBWithTheSameCosts) {
  PhaseCosts costs{1.0, 1.0, 1.0};
  for (int p : {2, 4, 8}) {
    const double zb =
        simulateSchedule(makePipelinePlan(p, 8, PipelineSchedule::kZbH1), costs).bubbleFraction();
    // 1F1B with the same work per micro-batch: backward = B + W.
    const double ofob = simulateSchedule(makePipelinePlan(p, 8, PipelineSchedule::k1f1b),
                                         {costs.forward, costs.backward + costs.weight})
                            .bubbleFraction();
    EXPECT_LT(zb, ofob) << "p=" << p;
  }
}

TEST(PipelineSchedule, BadArgumentsNameTheField) {
  auto message = [](auto make) {
    try {
      make();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      return e.message();
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] {
              makePipelinePlan(4, 6, PipelineSchedule::kInterleaved1f1b, 2);
            }).find("train.micro_batches"),
            std::string::npos);
  EXPECT_NE(message([] {
              makePipelinePlan(4, 8, PipelineSchedule::k1f1b, 2);
            }).find("strategy.pp.virtual_stages"),
            std::string::npos);
  EXPECT_NE(
      message([] { makePipelinePlan(4, 0, PipelineSchedule::kGpipe); }).find("train.micro_batches"),
      std::string::npos);
}

TEST(PipelineSchedule, AnOrderThatCannotRunIsReportedAsADeadlock) {
  PipelinePlan plan = makePipelinePlan(2, 2, PipelineSchedule::k1f1b);
  std::swap(plan.actions[1][0], plan.actions[1][1]);  // rank 1: B0 before F0
  EXPECT_THROW(simulateSchedule(plan), Error);
}

}  // namespace
}  // namespace ringmaster
