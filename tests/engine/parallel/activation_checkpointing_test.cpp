// Activation checkpointing (nn/layers.h: each block's forward re-run in its backward) under every
// strategy through makeParallelStrategy: the loss and the gradients each rank's optimizer sees
// equal those of the same run without it, bit for bit (the recompute runs the same kernels on the
// same inputs and draws the same dropout masks), on world sizes 1 to 3; and it frees what it
// should (a checkpointed block's children keep nothing between forward and backward).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "core/error.h"
#include "data/synthetic_dataset.h"
#include "engine/comm/comm_harness.h"
#include "nn/model.h"
#include "parallel/strategy.h"
#include "tensor/ops.h"

namespace ringmaster {
namespace {

using testing::runRanks;

constexpr int64_t kFeatures = 6, kClasses = 3, kSamples = 48;

// A model with several children per block and a Dropout in every hidden block (mlp), or Residual
// blocks (residual_mlp: a nested Sequential inside each block).
ModelSpec modelSpec(const std::string& kind) {
  ModelSpec model;
  model.kind = kind;
  model.layers = {kFeatures, 8, 8, 8, kClasses};
  model.layer_norm = true;
  model.activation = ActivationKind::kGelu;
  model.dropout = kind == "mlp" ? 0.25 : 0;
  model.seed = 5;
  return model;
}

struct RankResult {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads;  // what the optimizer updates, after the last batch
};

// Three batches (the second and third accumulated into one step) on each of `world` ranks.
std::vector<RankResult> train(JobSpec spec, int world, bool checkpointing) {
  spec.train.activation_checkpointing = checkpointing;
  std::vector<RankResult> results(static_cast<size_t>(world));
  auto body = [&](Communicator* comm) {
    SyntheticTeacherDataset dataset(kSamples, kFeatures, kClasses, 2);
    auto model = buildModel(spec.model);
    std::unique_ptr<ParallelStrategy> strategy =
        makeParallelStrategy({.model = *model, .world = comm, .spec = spec});
    EXPECT_EQ(model->activationCheckpointing(), checkpointing);
    const int rank = comm ? comm->rank() : 0;
    const BatchMaker make_batch = [&](const std::vector<int64_t>& rows) {
      return makeBatch(dataset, rows);
    };
    RankResult& result = results[static_cast<size_t>(rank)];
    for (int batch = 0; batch < 3; ++batch) {
      if (batch < 2)
        for (const NamedParameter& p : strategy->optimizerParameters())
          ops::fill(p.parameter->grad, 0.0f);
      std::vector<int64_t> indices;
      for (int64_t i = 0; i < spec.train.batch_size; ++i)
        indices.push_back((batch * 13 + rank * 5 + i * 3) % kSamples);
      const bool sync = batch != 1;
      result.losses.push_back(
          strategy->trainBatch(indices, make_batch, batch == 0 ? 1 : 2, sync).loss);
      if (sync) strategy->finishGradientSync();
    }
    for (const NamedParameter& p : strategy->optimizerParameters())
      result.grads.push_back(p.parameter->grad.toFloatVector());
  };
  if (spec.strategy.kind == StrategyKind::kSingle) {
    body(nullptr);
  } else {
    auto failures = runRanks(world, [&](Communicator& comm) { body(&comm); });
    EXPECT_ALL_RANKS_OK(failures);
  }
  return results;
}

void expectSame(const JobSpec& spec, int world, const std::string& what) {
  const std::vector<RankResult> plain = train(spec, world, false);
  const std::vector<RankResult> checkpointed = train(spec, world, true);
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE(fmt::format("{}, {} ranks, rank {}", what, world, r));
    EXPECT_EQ(checkpointed[r].losses, plain[r].losses);
    ASSERT_EQ(checkpointed[r].grads.size(), plain[r].grads.size());
    ASSERT_FALSE(plain[r].grads.empty());
    for (size_t i = 0; i < plain[r].grads.size(); ++i)
      EXPECT_EQ(checkpointed[r].grads[i], plain[r].grads[i]) << "parameter " << i;
  }
}

JobSpec baseSpec(const std::string& kind, StrategyKind strategy) {
  JobSpec spec;
  spec.model = modelSpec(kind);
  spec.strategy.kind = strategy;
  spec.train.batch_size = 4;
  return spec;
}

TEST(ActivationCheckpointing, SingleEqualsTheRunWithout) {
  for (const std::string kind : {"mlp", "residual_mlp"})
    expectSame(baseSpec(kind, StrategyKind::kSingle), 1, kind);
}

TEST(ActivationCheckpointing, DdpEqualsTheRunWithout) {
  for (int world = 1; world <= 3; ++world)
    expectSame(baseSpec("mlp", StrategyKind::kDdp), world, "ddp");
}

TEST(ActivationCheckpointing, FsdpEqualsTheRunWithoutInEveryMode) {
  for (FsdpSharding sharding :
       {FsdpSharding::kFullShard, FsdpSharding::kShardGradOp, FsdpSharding::kNoShard}) {
    for (FsdpUnits units : {FsdpUnits::kLayer, FsdpUnits::kModel}) {
      JobSpec spec = baseSpec("mlp", StrategyKind::kFsdp);
      spec.strategy.fsdp = {.sharding = sharding, .units = units};
      const int world = sharding == FsdpSharding::kFullShard ? 3 : 2;
      expectSame(spec, world, fmt::format("fsdp {} {}", toString(sharding), toString(units)));
    }
  }
}

TEST(ActivationCheckpointing, PipelineEqualsTheRunWithoutUnderEverySchedule) {
  for (PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1f1b,
                                    PipelineSchedule::kInterleaved1f1b, PipelineSchedule::kZbH1}) {
    const bool interleaved = schedule == PipelineSchedule::kInterleaved1f1b;
    for (int world : interleaved ? std::vector<int>{2} : std::vector<int>{1, 2, 3}) {
      // residual_mlp gives 5 blocks (input layer, 3 residual blocks, output): room for 3 stages
      // and for 2 ranks x 2 virtual stages.
      JobSpec spec = baseSpec("residual_mlp", StrategyKind::kPipeline);
      spec.model.layers = {kFeatures, 8, 8, 8, 8, kClasses};
      spec.train.batch_size = 4;
      spec.train.micro_batches = 2;
      spec.strategy.pipeline.schedule = schedule;
      spec.strategy.pipeline.virtual_stages = interleaved ? 2 : 1;
      expectSame(spec, world, fmt::format("pipeline {}", toString(schedule)));
    }
  }
}

// A pipeline with a Dropout in its blocks: micro-batches' forwards advance the masks' counters
// between a micro-batch's forward and its backward, which the recompute must rewind.
TEST(ActivationCheckpointing, PipelineRewindsTheDropoutMasksOfEachMicroBatch) {
  for (PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::kZbH1}) {
    JobSpec spec = baseSpec("mlp", StrategyKind::kPipeline);
    spec.train.micro_batches = 2;
    spec.strategy.pipeline.schedule = schedule;
    expectSame(spec, 2, fmt::format("pipeline {} with dropout", toString(schedule)));
  }
}

TEST(ActivationCheckpointing, ABlocksChildrenKeepNothingBetweenForwardAndBackward) {
  JobSpec spec = baseSpec("mlp", StrategyKind::kSingle);
  auto model = buildModel(spec.model);
  model->setActivationCheckpointing(true);
  SyntheticTeacherDataset dataset(kSamples, kFeatures, kClasses, 2);
  const std::vector<int64_t> rows = {0, 1, 2, 3};
  model->forward(makeBatch(dataset, rows).inputs);
  for (size_t m = 0; m < model->size(); ++m)
    for (const Tensor& t : model->child(m).saveContext())
      EXPECT_FALSE(t.defined()) << "child " << m << " kept a tensor";
  const ChildrenContext context = model->saveChildContexts(0, model->size());
  ASSERT_EQ(context.checkpoints.size(), model->blocks().size());
  for (const BlockCheckpoint& checkpoint : context.checkpoints)
    EXPECT_TRUE(checkpoint.input.defined());
  // Whole blocks only: a range that cuts one is refused.
  EXPECT_THROW(model->saveChildContexts(0, 1), Error);
  // And it needs the blocks.
  Sequential bare;
  EXPECT_THROW(bare.setActivationCheckpointing(true), Error);
}

}  // namespace
}  // namespace ringmaster
