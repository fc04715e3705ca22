// Issue 36, "no blocking collective PyTorch's DDP does not do": the ranks' stop agreement rides the
// gradients (DDP) or runs a step behind (every other strategy), and every rank still stops after
// the same step, whatever the world size, the strategy, the reduce dtype and which rank asked; a
// DDP step runs no collective but its gradients' all-reduces; and a step's step_ms holds what the
// trainer did since the previous step, so that the steps' times add up to the loop's wall clock.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/train_ranks.h"
#include "engine/comm/comm_harness.h"
#include "train/trainer.h"

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;

// An MLP deep enough for four pipeline stages, on teacher data, with clipping (a norm every step).
JobSpec stopSpec(const std::string& strategy, int world) {
  SpecParseResult parsed = parseJobSpec(R"({
    "name": "stop-agreement-test", "strategy": {"kind": "single"},
    "model": {"kind": "mlp", "layers": [16, 24, 24, 24, 8], "seed": 5},
    "data": {"kind": "synthetic", "samples": 4096, "features": 16, "classes": 8, "seed": 2},
    "train": {"steps": 1000, "batch_size": 8},
    "optimizer": {"kind": "adamw", "lr": 0.003, "clip_grad_norm": 5.0},
    "device": "cpu"})");
  EXPECT_TRUE(parsed.ok()) << parsed.describe();
  JobSpec spec = *parsed.spec;
  spec.launch.hosts[0].ranks = world;
  const std::string kind = strategy.substr(0, strategy.find('-'));
  applyLegacyStrategyKind(world == 1 && kind == "ddp" ? "single" : kind, world, spec.strategy);
  if (strategy == "ddp-bf16") spec.strategy.ddp.reduce_dtype = Precision::kBf16;
  if (strategy == "ddp-fp16") spec.strategy.ddp.reduce_dtype = Precision::kFp16;
  if (strategy == "ddp-accum") spec.train.grad_accum_steps = 2;
  if (kind == "pipeline") {
    spec.optimizer.clip_grad_norm.reset();
    spec.train.micro_batches = 2;
  }
  return spec;
}

// Trains `spec` on `world` ranks as threads over loopback Gloo (`single`: in this thread), rank r
// polling stop_of(r) (each rank's own predicate); each rank's run, in rank order.
std::vector<testing::RankTraining> trainWithStops(
    const JobSpec& spec, int world, const std::function<std::function<bool()>(int)>& stop_of) {
  std::vector<testing::RankTraining> runs(static_cast<size_t>(world));
  if (!needsWorldCommunicator(spec)) {
    runs[0] = testing::trainRank(spec, nullptr, stop_of(0));
    return runs;
  }
  auto failures = testing::runRanks(world, [&](Communicator& comm) {
    runs[static_cast<size_t>(comm.rank())] = testing::trainRank(spec, &comm, stop_of(comm.rank()));
  });
  EXPECT_ALL_RANKS_OK(failures);
  return runs;
}

// True from this rank's `from`-th poll on (1-based), false before; never with from 0.
std::function<bool()> stopFromPoll(int from) {
  return [from, polls = 0]() mutable { return from > 0 && ++polls >= from; };
}

struct StopCase {
  std::string strategy;
  int world;
};

class StopAgreementCases : public ::testing::TestWithParam<StopCase> {};

// One rank (the last) asks from its 4th poll: every rank stops after step 3 (the ranks poll once
// before each step, and once more before the first, where they agree at once; one rank polls
// once before each step and stops before step 4), cancelled. Asked during set-up (its first
// poll): no rank runs a step.
TEST_P(StopAgreementCases, EveryRankStopsAfterTheSameStep) {
  const auto [strategy, world] = GetParam();
  const JobSpec spec = stopSpec(strategy, world);
  for (const auto& [asks_from, last_step] : std::vector<std::pair<int, int64_t>>{{4, 3}, {1, 0}}) {
    // Named copies: Debian 12's clang 14 cannot capture structured bindings.
    const int last_rank = world - 1, asking_poll = asks_from;
    const auto runs = trainWithStops(
        spec, world, [&](int rank) { return stopFromPoll(rank == last_rank ? asking_poll : 0); });
    for (int rank = 0; rank < world; ++rank) {
      const TrainingResult& result = runs[static_cast<size_t>(rank)].result;
      EXPECT_TRUE(result.cancelled) << strategy << ", rank " << rank << ", poll " << asks_from;
      EXPECT_EQ(result.final_step, last_step)
          << strategy << ", rank " << rank << " of " << world << ", asked from poll " << asks_from;
    }
  }
}

std::vector<StopCase> stopCases() {
  std::vector<StopCase> cases;
  for (int world = 1; world <= 4; ++world)
    for (const char* strategy : {"ddp", "fsdp", "pipeline"}) cases.push_back({strategy, world});
  // The flag through a 16-bit bucket (pre-divided by 3: not exact) and through accumulation.
  for (const char* strategy : {"ddp-bf16", "ddp-fp16", "ddp-accum"}) cases.push_back({strategy, 3});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Strategies, StopAgreementCases, ::testing::ValuesIn(stopCases()),
                         [](const auto& info) {
                           std::string name =
                               fmt::format("{}_world{}", info.param.strategy, info.param.world);
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// A stop that reaches the ranks at different moments, as a signal does: rank 0 raises it during its
// 6th poll and every rank polls the same flag from then on, so ranks see it on different steps.
// Whatever the interleaving, all stop after the same step.
TEST(StopAgreement, RanksThatSeeTheStopOnDifferentStepsStillStopTogether) {
  for (const char* strategy : {"ddp", "fsdp"}) {
    std::atomic<bool> raised = false;
    const auto runs =
        trainWithStops(stopSpec(strategy, 3), 3, [&](int rank) -> std::function<bool()> {
          return [&raised, rank, polls = 0]() mutable {
            if (rank == 0 && ++polls == 6) raised = true;
            return raised.load();
          };
        });
    for (const auto& run : runs) {
      EXPECT_TRUE(run.result.cancelled) << strategy;
      EXPECT_EQ(run.result.final_step, runs[0].result.final_step) << strategy;
      EXPECT_GE(run.result.final_step, 4) << strategy << ": rank 0 raised it before step 5";
      EXPECT_LE(run.result.final_step, 6) << strategy << ": within a step of every rank's poll";
    }
  }
}

// What a rank's communicators ran, by operation and size, and by group.
class OperationLog : public CommObserver {
 public:
  void onOperation(const CommRecord& record) override {
    std::lock_guard lock(mutex_);
    ++counts_[{record.op, record.bytes}];
    ++groups_[record.group];
  }
  std::map<std::pair<CommOp, uint64_t>, int> counts() const {
    std::lock_guard lock(mutex_);
    return counts_;
  }
  std::map<std::string, int> groups() const {
    std::lock_guard lock(mutex_);
    return groups_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<CommOp, uint64_t>, int> counts_;
  std::map<std::string, int> groups_;
};

// Trains `spec` on `world` ranks as threads, each rank's communicators observed by its log.
std::vector<std::shared_ptr<OperationLog>> trainLogged(const JobSpec& spec, int world) {
  std::vector<std::shared_ptr<OperationLog>> logs;
  for (int rank = 0; rank < world; ++rank) logs.push_back(std::make_shared<OperationLog>());
  auto failures = testing::runRanksWith(
      world,
      [&](Communicator& comm) {
        EXPECT_EQ(testing::trainRank(spec, &comm).result.final_step, spec.train.steps);
      },
      [&](int rank) {
        CommOptions options;
        options.observer = logs[static_cast<size_t>(rank)];
        return options;
      });
  EXPECT_TRUE(failures.empty()) << testing::describe(failures);
  return logs;
}

// A DDP step (with gradient clipping, as the README's job) runs its gradients' all-reduces and
// nothing else: over 6 steps, one all-reduce per bucket per step, and beside them only the
// start-up broadcast and the one stop agreement before the first step.
TEST(StopAgreement, ADdpStepRunsOnlyItsGradientsAllReduces) {
  constexpr int kWorld = 2, kSteps = 6;
  JobSpec spec = stopSpec("ddp", kWorld);
  spec.train.steps = kSteps;
  // Parameters 16x24+24, 2 x (24x24+24), 24x8+8 = 1808 floats, plus the stop flag: one bucket.
  constexpr uint64_t kBucketBytes = (1808 + 1) * 4;
  const auto logs = trainLogged(spec, kWorld);
  const std::map<std::pair<CommOp, uint64_t>, int> expected{
      {{CommOp::kBroadcast, kBucketBytes}, 1},        // rank 0's parameters
      {{CommOp::kAllReduce, 4}, 1},                   // the stop agreement before step 1
      {{CommOp::kAllReduce, kBucketBytes}, kSteps}};  // the gradients, stop flag inside
  for (int rank = 0; rank < kWorld; ++rank)
    EXPECT_EQ(logs[static_cast<size_t>(rank)]->counts(), expected) << "rank " << rank;
}

// Where the traffic cannot carry the flags (FSDP), they are summed in a group of their own, so
// that they never queue in front of the step's collectives: one all-reduce there per step, and
// one more before the first step.
TEST(StopAgreement, AFallbackStrategysFlagsRunInAGroupOfTheirOwn) {
  constexpr int kWorld = 2, kSteps = 5;
  JobSpec spec = stopSpec("fsdp", kWorld);
  spec.train.steps = kSteps;
  for (const auto& log : trainLogged(spec, kWorld)) {
    const std::map<std::string, int> groups = log->groups();
    ASSERT_EQ(groups.count("world.stop"), 1u) << ::testing::PrintToString(groups);
    EXPECT_EQ(groups.at("world.stop"), kSteps + 1);
  }
}

// Issue 36: step_ms is the wall clock's. The stop predicate, polled between steps, sleeps 15 ms
// each time: the step events' step_ms from step 2 on add up to at least the span from the first
// of those sleeps to the last (which lies between step 1's end and the last step's end), and to
// no more than the whole run. Had step_ms left out the time between steps, their sum (a few
// milliseconds of compute) would fall short of the sleeps'.
TEST(StopAgreement, StepTimesHoldTheTimeBetweenSteps) {
  constexpr int64_t kSteps = 6;
  for (const auto& [strategy, world] :
       std::vector<std::pair<std::string, int>>{{"ddp", 1}, {"ddp", 2}, {"fsdp", 2}}) {
    JobSpec spec = stopSpec(strategy, world);
    spec.train.steps = kSteps;
    spec.telemetry.every_steps = 1;  // each step's own step_ms
    // Rank 0's polls' sleeps: [start, end] of each, in order.
    std::vector<std::pair<Clock::time_point, Clock::time_point>> sleeps;
    const auto run_start = Clock::now();
    const auto runs = trainWithStops(spec, world, [&](int rank) -> std::function<bool()> {
      return [&sleeps, rank] {
        const auto start = Clock::now();
        std::this_thread::sleep_for(std::chrono::milliseconds(15));
        if (rank == 0) sleeps.emplace_back(start, Clock::now());
        return false;
      };
    });
    const double run_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - run_start).count();
    // The polls before step 2 and before the last step (several ranks poll twice before step 1).
    const size_t before_step_2 = world == 1 ? 1 : 2;
    ASSERT_EQ(sleeps.size(), before_step_2 + kSteps - 1) << strategy;
    const double sleeps_ms = std::chrono::duration<double, std::milli>(sleeps.back().second -
                                                                       sleeps[before_step_2].first)
                                 .count();
    double steps_ms = 0;
    for (const auto& e : runs[0].events)
      if (const auto* step = std::get_if<StepEvent>(&e.body); step && step->step >= 2)
        steps_ms += step->step_ms;
    const double rounding_ms = 1e-3 * kSteps;  // step_ms as the telemetry line writes it
    EXPECT_GE(steps_ms + rounding_ms, sleeps_ms) << strategy << " on " << world;
    EXPECT_LE(steps_ms, run_ms) << strategy << " on " << world;
  }
}

}  // namespace
}  // namespace ringmaster
