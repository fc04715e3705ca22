// The pipeline runtime against gradient accumulation: every schedule on 1 to 4 ranks (interleaved
// with 2 chunks per rank) ends with the parameters one process reaches accumulating over the same
// micro-batches, loss included; stage partitions; and the executed actions follow the plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "engine/comm/comm_harness.h"
#include "engine/parallel/equivalence.h"
#include "parallel/pipeline.h"

extern "C" void openblas_set_num_threads(int threads);  // OpenBLAS

namespace ringmaster {
namespace {

using testing::kSamples;
using testing::kTolerance;
using testing::maxDifference;
using testing::Parameters;
using testing::runRanks;
using testing::Schedule;
using testing::trainOneProcess;

// Eight Linear layers, so that 4 ranks x 2 chunks have a layer each; with a LayerNorm and a
// Dropout per block every kind of module context crosses the schedule.
const MlpConfig kDeepModel{.layers = {12, 16, 16, 16, 16, 16, 16, 16, 4}, .seed = 5};
constexpr int kMicroBatches = 12;  // a multiple of every world size, as interleaving needs
constexpr int64_t kRows = 2;       // per micro-batch
constexpr int kSteps = 3;

struct PipelineRun {
  Parameters parameters;  // in the whole model's parameter order
  std::vector<double> losses;
  std::vector<std::vector<ExecutedAction>> actions;  // per rank, of the last step
  int64_t clock_uncertainty_us = 0;                  // the largest of the ranks'
};

PipelineRun trainPipeline(int world, PipelineSchedule schedule, int virtual_stages,
                          const MlpConfig& config) {
  std::map<std::string, std::vector<float>> trained;
  std::vector<std::string> order;
  PipelineRun run;
  run.actions.resize(world);
  std::mutex mutex;
  auto failures = runRanks(world, [&](Communicator& comm) {
    SyntheticTeacherDataset data(kSamples, 12, 4, 3);
    auto model = buildMlp(config);
    const std::vector<NamedParameter> all = model->namedParameters();
    PipelineParallel pipeline(
        *model, comm,
        {.schedule = schedule, .virtual_stages = virtual_stages, .micro_batches = kMicroBatches});
    Sgd sgd(pipeline.parameters(), {.lr = 0.1f, .momentum = 0.9f});
    BatchIterator batches(DistributedSampler(kSamples, 1, 0, true, 7, false),
                          kRows * kMicroBatches);
    std::vector<double> losses;
    for (int step = 0; step < kSteps; ++step) {
      sgd.zeroGrad();
      const std::vector<int64_t> indices = batches.next();
      PipelineStepResult result = pipeline.runStep(
          kRows,
          [&](int micro) {
            return makeBatch(data, std::vector<int64_t>(indices.begin() + micro * kRows,
                                                        indices.begin() + (micro + 1) * kRows));
          },
          1.0f / kMicroBatches);
      sgd.step();
      losses.push_back(result.loss_sum / kMicroBatches);
      EXPECT_EQ(result.samples, kRows * kMicroBatches);
      if (step == kSteps - 1) {
        std::lock_guard<std::mutex> lock(mutex);
        run.actions[comm.rank()] = result.actions;
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    // The ranks are threads of one process, on one clock: the measured offset must be within
    // the measurement's own bound of zero.
    EXPECT_LE(std::abs(pipeline.clockOffsetUs()), pipeline.clockUncertaintyUs());
    run.clock_uncertainty_us = std::max(run.clock_uncertainty_us, pipeline.clockUncertaintyUs());
    if (comm.rank() == 0) {
      run.losses = losses;
      for (const NamedParameter& p : all) order.push_back(p.name);
    }
    for (const NamedParameter& p : pipeline.parameters())
      trained[p.name] = p.parameter->value.toFloatVector();
  });
  EXPECT_ALL_RANKS_OK(failures);
  for (const std::string& name : order) run.parameters.push_back(trained[name]);
  return run;
}

using PipelineCase = std::tuple<int, PipelineSchedule>;
class PipelineEquivalence : public ::testing::TestWithParam<PipelineCase> {};

TEST_P(PipelineEquivalence, EqualsGradientAccumulationOverTheSameMicroBatches) {
  const auto [world, schedule] = GetParam();
  const int virtual_stages = schedule == PipelineSchedule::kInterleaved1f1b ? 2 : 1;
  for (const bool with_dropout_and_norm : {false, true}) {
    SCOPED_TRACE(with_dropout_and_norm ? "LayerNorm and Dropout" : "plain");
    MlpConfig config = kDeepModel;
    if (with_dropout_and_norm) {
      config.layer_norm = true;
      config.dropout = 0.25f;
    }
    PipelineRun pipeline = trainPipeline(world, schedule, virtual_stages, config);
    Parameters reference = trainOneProcess(
        1, {.batch_per_rank = kRows, .accumulation = kMicroBatches, .steps = kSteps}, config);
    EXPECT_LE(maxDifference(pipeline.parameters, reference), kTolerance);
    EXPECT_GT(maxDifference(reference, testing::snapshot(*buildMlp(config))), 1e-3f)
        << "training must move the parameters, or the comparison proves nothing";
    ASSERT_EQ(pipeline.losses.size(), static_cast<size_t>(kSteps));
    EXPECT_GT(pipeline.losses.front(), 0.5);
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, PipelineEquivalence,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(PipelineSchedule::kGpipe,
                                                              PipelineSchedule::k1f1b,
                                                              PipelineSchedule::kInterleaved1f1b,
                                                              PipelineSchedule::kZbH1)),
                         [](const auto& info) {
                           return "world" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::string(toString(std::get<1>(info.param)));
                         });

TEST(Pipeline, ExecutedActionsFollowThePlanAndTheirDependencies) {
  const int world = 3;
  PipelineRun run = trainPipeline(world, PipelineSchedule::k1f1b, 1, kDeepModel);
  const PipelinePlan plan = makePipelinePlan(world, kMicroBatches, PipelineSchedule::k1f1b);
  std::map<std::tuple<char, int, int>, ExecutedAction> by_key;  // (phase, micro, stage)
  for (int rank = 0; rank < world; ++rank) {
    ASSERT_EQ(run.actions[rank].size(), plan.actions[rank].size());
    for (size_t i = 0; i < plan.actions[rank].size(); ++i) {
      const ExecutedAction& executed = run.actions[rank][i];
      EXPECT_EQ(executed.action, plan.actions[rank][i]) << "rank " << rank << " action " << i;
      EXPECT_LE(executed.start_us, executed.ready_us);
      EXPECT_LE(executed.ready_us, executed.end_us);
      if (i > 0) {
        EXPECT_GE(executed.start_us, run.actions[rank][i - 1].end_us - 1);
      }
      by_key[{phaseLetter(executed.action.phase), executed.action.micro_batch,
              executed.model_stage}] = executed;
    }
  }
  // On the aligned clock a forward ends after the previous stage's forward of its micro-batch, and
  // a backward after the next stage's backward, to within the alignment's error (twice: both
  // ranks' offsets are measured) and the microsecond the clock reads are rounded to.
  const int64_t kClockSlackUs = 2 * run.clock_uncertainty_us + 1;
  for (int micro = 0; micro < kMicroBatches; ++micro) {
    for (int stage = 1; stage < world; ++stage) {
      const ExecutedAction& forward = by_key[{'F', micro, stage}];
      const ExecutedAction& forward_before = by_key[{'F', micro, stage - 1}];
      const ExecutedAction& backward = by_key[{'B', micro, stage - 1}];
      const ExecutedAction& backward_before = by_key[{'B', micro, stage}];
      EXPECT_GE(forward.end_us + kClockSlackUs, forward_before.end_us);
      EXPECT_GE(backward.end_us + kClockSlackUs, backward_before.end_us);
      // Compute begins once the input arrived: never before the action that produced it ended
      // (the time before that, from start_us, was waiting).
      EXPECT_GE(forward.ready_us + kClockSlackUs, forward_before.end_us)
          << "F" << micro << " on stage " << stage;
      EXPECT_GE(backward.ready_us + kClockSlackUs, backward_before.end_us)
          << "B" << micro << " on stage " << stage - 1;
    }
  }
}

// One step of a pipeline of `stages` over `world` ranks with 64-row micro-batches, after a warm-up
// step: each rank's actions and step result.
struct TimedStep {
  std::vector<std::vector<ExecutedAction>> actions;
  std::vector<PipelineStepResult> results;
  std::vector<double> wall_ms;
};

TimedStep timePipelineStep(int world, const MlpConfig& config,
                           const std::vector<std::vector<int>>& stages, int micro_batches) {
  // One BLAS thread per rank, as the node agent gives each worker: a matrix product that took
  // every core while its peer idled and half of them while both computed would stretch compute
  // exactly where the stages overlap, and hide the bubble.
  openblas_set_num_threads(1);
  constexpr int64_t kWideRows = 64;
  TimedStep timed;
  timed.actions.resize(world);
  timed.results.resize(world);
  timed.wall_ms.resize(world);
  auto failures = runRanks(world, [&](Communicator& comm) {
    SyntheticTeacherDataset data(kWideRows * micro_batches, config.layers.front(), 4, 3);
    auto model = buildMlp(config);
    PipelineParallel pipeline(*model, comm, {.micro_batches = micro_batches, .stages = stages});
    auto batchOf = [&](int micro) {
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < kWideRows; ++i) rows.push_back(micro * kWideRows + i);
      return makeBatch(data, rows);
    };
    pipeline.runStep(kWideRows, batchOf, 1.0f / micro_batches);  // warm-up
    const auto start = std::chrono::steady_clock::now();
    PipelineStepResult result = pipeline.runStep(kWideRows, batchOf, 1.0f / micro_batches);
    timed.wall_ms[comm.rank()] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    timed.actions[comm.rank()] = result.actions;
    timed.results[comm.rank()] = std::move(result);
  });
  EXPECT_ALL_RANKS_OK(failures);
  return timed;
}

int64_t totalWaitUs(const std::vector<ExecutedAction>& actions) {
  int64_t total = 0;
  for (const ExecutedAction& a : actions) total += a.ready_us - a.start_us;
  return total;
}

int64_t totalComputeUs(const std::vector<ExecutedAction>& actions) {
  int64_t total = 0;
  for (const ExecutedAction& a : actions) total += a.end_us - a.ready_us;
  return total;
}

TEST(Pipeline, AStageMadeSlowShowsAsTheOthersWaitsNotAsTheirComputeOrCommunication) {
  // Stage 0 holds a 1024-wide layer pair, stage 1 one narrow layer: stage 1 waits for every
  // forward input while stage 0 computes. (Two ranks: on this machine's two cores a third thread
  // would make even the fast stages' compute wait for a core.)
  const MlpConfig config{.layers = {16, 1024, 1024, 4}, .seed = 3};
  const TimedStep timed = timePipelineStep(2, config, {{0, 1}, {2}}, 6);
  EXPECT_GT(totalComputeUs(timed.actions[0]), 4 * totalComputeUs(timed.actions[1]));
  EXPECT_GT(totalWaitUs(timed.actions[1]), totalComputeUs(timed.actions[1]));
  EXPECT_GT(totalWaitUs(timed.actions[1]), totalWaitUs(timed.actions[0]));
  // The time stage 1 was blocked receiving is the pipeline's wait, not communication: the
  // transfers of 256 KiB activations are a small part of it.
  const PipelineStepResult& fast = timed.results[1];
  EXPECT_GT(fast.pipeline_wait_ms, fast.exposed_transfer_ms);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_LT(timed.results[rank].transfer_ms, timed.wall_ms[rank]);
}

TEST(Pipeline, TheMeasuredBubbleOfABalancedPipelineIsNearThePlannedOne) {
  // Two equal stages (as many ranks as this machine has cores in CI) and 8 micro-batches: 1F1B's
  // bubble is (p - 1) / (m + p - 1) = 1/9. Measured: each rank's share of the step's span (first
  // compute to last end) it did not compute. Counting an action's wait as compute would put it
  // near 0; overheads outside the model (each message's hops between threads, the loss) only
  // raise it, more on a loaded machine: the layers are 1024 wide so that compute dominates them
  // (0.16-0.18 measured on 2 idle cores, up to 0.34 while two compilers ran beside the test).
  const MlpConfig config{.layers = {1024, 1024, 1024, 1024, 1024}, .seed = 3};
  const int micro_batches = 8;
  const TimedStep timed = timePipelineStep(2, config, {{0, 1}, {2, 3}}, micro_batches);
  int64_t first = std::numeric_limits<int64_t>::max(), last = 0;
  for (const auto& actions : timed.actions) {
    for (const ExecutedAction& a : actions) {
      first = std::min(first, a.ready_us);
      last = std::max(last, a.end_us);
    }
  }
  const double span = static_cast<double>(last - first);
  double bubble = 0;
  for (const auto& actions : timed.actions)
    bubble += 1 - static_cast<double>(totalComputeUs(actions)) / span;
  bubble /= 2;
  const double planned = theoreticalBubbleFraction(PipelineSchedule::k1f1b, 2, micro_batches, 1);
  EXPECT_NEAR(planned, 1.0 / 9, 1e-9);
  EXPECT_GT(bubble, planned - 0.05);
  EXPECT_LT(bubble, planned + 0.25);
  ::testing::Test::RecordProperty("measured_bubble", std::to_string(bubble));
}

TEST(Pipeline, ClippingUsesTheNormOfTheWholeModel) {
  // One step's gradients: 3 stages on 3 ranks against one process accumulating the same
  // micro-batches; the clipped norm must be the whole model's on every rank.
  SyntheticTeacherDataset data(kSamples, 12, 4, 3);
  auto batchOf = [&](int micro) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < kRows; ++i) rows.push_back(micro * kRows + i);
    return makeBatch(data, rows);
  };
  auto whole = buildMlp(kDeepModel);
  SoftmaxCrossEntropy loss;
  for (int micro = 0; micro < kMicroBatches; ++micro) {
    Batch batch = batchOf(micro);
    loss.forward(whole->forward(batch.features), batch.labels);
    whole->backward(loss.backward(1.0f / kMicroBatches));
  }
  const double expected = gradNorm(whole->namedParameters());
  std::vector<double> norms(3);
  auto failures = runRanks(3, [&](Communicator& comm) {
    auto model = buildMlp(kDeepModel);
    PipelineParallel pipeline(*model, comm, {.micro_batches = kMicroBatches});
    pipeline.runStep(kRows, batchOf, 1.0f / kMicroBatches);
    norms[comm.rank()] = pipeline.clipGradNorm(1e-3);
  });
  EXPECT_ALL_RANKS_OK(failures);
  for (int rank = 0; rank < 3; ++rank) EXPECT_NEAR(norms[rank], expected, 1e-5 * expected);
}

TEST(Pipeline, StagesBalanceParametersOrFollowTheSpec) {
  // Linear layers of 12x64, 64x64, 64x64, 64x4: 832, 4160, 4160, 260 parameters; blocks of a
  // Linear and its ReLU occupy modules 0-1, 2-3, 4-5 and 6.
  auto model = buildMlp({.layers = {12, 64, 64, 64, 4}});
  using Stages = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(partitionStages(*model, 2), (Stages{{0, 4}, {4, 7}}));
  EXPECT_EQ(partitionStages(*model, 3), (Stages{{0, 2}, {2, 4}, {4, 7}}));
  EXPECT_EQ(partitionStages(*model, 2, {{0}, {1, 2, 3}}), (Stages{{0, 2}, {2, 7}}));
  EXPECT_THROW(partitionStages(*model, 2, {{0}, {2, 3}}), Error);
  EXPECT_THROW(partitionStages(*model, 5), Error);
}

}  // namespace
}  // namespace ringmaster
