// The pipeline runtime against gradient accumulation: every schedule on 1 to 4 ranks (interleaved
// with 2 chunks per rank) ends with the parameters one process reaches accumulating over the same
// micro-batches, loss included; stage partitions; and the executed actions follow the plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>

#include "common/parallel_cases.h"
#include "engine/comm/comm_harness.h"
#include "engine/parallel/equivalence.h"
#include "parallel/pipeline.h"

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

using testing::PipelineCase;
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

INSTANTIATE_TEST_SUITE_P(Schedules, PipelineEquivalence, testing::everyPipelineCase(),
                         testing::pipelineCaseName);

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
    loss.forward(whole->forward(batch.inputs), batch.targets);
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
