// Activation checkpointing (nn/layers.h: each block's forward re-run in its backward) under every
// strategy through makeParallelStrategy: the loss and the gradients each rank's optimizer sees
// equal those of the same run without it, bit for bit (the recompute runs the same kernels on the
// same inputs and draws the same dropout masks), on world sizes 1 to 3 (kept small: each case
// trains twice); and it frees what it should (a checkpointed block's children keep nothing between
// forward and backward; a training step's measured peak drops by what the memory estimate
// predicts).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>

#include "core/error.h"
#include "data/synthetic_dataset.h"
#include "engine/comm/comm_harness.h"
#include "nn/model.h"
#include "parallel/strategy.h"
#include "spec/memory_estimate.h"
#include "spec/strategies/pipeline.h"
#include "tensor/allocator.h"
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
  if (!needsWorldCommunicator(spec)) {
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

// `strategy`: a legacy kind, over `world` ranks.
JobSpec baseSpec(const std::string& kind, const std::string& strategy, int world = 1) {
  JobSpec spec;
  spec.model = modelSpec(kind);
  applyLegacyStrategyKind(strategy, world, spec.strategy);
  spec.train.batch_size = 4;
  return spec;
}

TEST(ActivationCheckpointing, SingleEqualsTheRunWithout) {
  for (const std::string kind : {"mlp", "residual_mlp"})
    expectSame(baseSpec(kind, "single"), 1, kind);
}

TEST(ActivationCheckpointing, DdpEqualsTheRunWithout) {
  for (int world = 1; world <= 3; ++world) expectSame(baseSpec("mlp", "ddp", world), world, "ddp");
}

TEST(ActivationCheckpointing, FsdpEqualsTheRunWithoutInEveryMode) {
  for (FsdpSharding sharding :
       {FsdpSharding::kFullShard, FsdpSharding::kShardGradOp, FsdpSharding::kNoShard}) {
    // Units per layer under every sharding; the whole model as one unit where it is gathered
    // and released around each pass (full_shard).
    for (FsdpUnits units : {FsdpUnits::kLayer, FsdpUnits::kModel}) {
      if (units == FsdpUnits::kModel && sharding != FsdpSharding::kFullShard) continue;
      const int world = sharding == FsdpSharding::kFullShard ? 3 : 2;
      JobSpec spec = baseSpec("mlp", "fsdp", world);
      spec.strategy.fsdp = {.sharding = sharding, .units = units};
      expectSame(spec, world, fmt::format("fsdp {} {}", toString(sharding), toString(units)));
    }
  }
}

TEST(ActivationCheckpointing, PipelineEqualsTheRunWithoutUnderEverySchedule) {
  for (PipelineSchedule schedule : {PipelineSchedule::kGpipe, PipelineSchedule::k1f1b,
                                    PipelineSchedule::kInterleaved1f1b, PipelineSchedule::kZbH1}) {
    const bool interleaved = schedule == PipelineSchedule::kInterleaved1f1b;
    for (int world : interleaved ? std::vector<int>{2} : std::vector<int>{1, 3}) {
      // residual_mlp gives 5 blocks (input layer, 3 residual blocks, output): room for 3 stages
      // and for 2 ranks x 2 virtual stages.
      JobSpec spec = baseSpec("residual_mlp", "pipeline", world);
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
    JobSpec spec = baseSpec("mlp", "pipeline", 2);
    spec.train.micro_batches = 2;
    spec.strategy.pipeline.schedule = schedule;
    expectSame(spec, 2, fmt::format("pipeline {} with dropout", toString(schedule)));
  }
}

TEST(ActivationCheckpointing, ABlocksChildrenKeepNothingBetweenForwardAndBackward) {
  JobSpec spec = baseSpec("mlp", "single");
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

// The peak memory of one training step, measured by the host allocator above what was live before
// it (parameters, gradients, the batch's source data), with and without checkpointing.
// `tokens`: the batches of a token model (else the synthetic features of the MLP's widths).
double measuredStepPeak(const JobSpec& spec, BatchMaker tokens = nullptr) {
  std::unique_ptr<SyntheticTeacherDataset> dataset;
  if (!tokens) {
    dataset = std::make_unique<SyntheticTeacherDataset>(kSamples, spec.model.layers.front(),
                                                        spec.model.layers.back(), 2);
  }
  auto model = buildModel(spec.model);
  setAutocast(*model, precisionDType(spec.train.precision));  // as the trainer does
  std::unique_ptr<ParallelStrategy> single =
      makeParallelStrategy({.model = *model, .world = nullptr, .spec = spec});
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < spec.train.batch_size; ++i) indices.push_back(i % kSamples);
  const BatchMaker make_batch =
      tokens ? tokens : [&](const std::vector<int64_t>& rows) { return makeBatch(*dataset, rows); };
  CachingAllocator& host = allocatorFor(Device::cpu());
  single->trainBatch(indices, make_batch, 1, true);  // a first step: every context is allocated
  model->zeroGrad();
  // What the previous step left in the modules' contexts is not this step's: drop it.
  for (size_t m = 0; m < model->size(); ++m)
    model->child(m).restoreContext(std::vector<Tensor>(model->child(m).saveContext().size()));
  const double before = static_cast<double>(host.stats().allocated_bytes);
  host.resetPeakStats();
  single->trainBatch(indices, make_batch, 1, true);
  return static_cast<double>(host.stats().peak_allocated_bytes) - before;
}

double estimatedActivations(const JobSpec& spec) {
  double bytes = 0;
  const std::vector<RankMemoryEstimate> ranks = estimateMemory(spec);
  for (const MemoryPart& part : ranks.at(0).parts)
    if (part.name == "activations" || part.name == "recomputed block (transient)")
      bytes += part.bytes;
  return bytes;
}

// Through a real training step: the peak drops with checkpointing by what the estimate predicts.
// An MLP whose hidden blocks (Linear, LayerNorm, GELU, Dropout) keep ~4 hidden widths per sample,
// so that the saved activations dominate the step's transient memory.
TEST(ActivationCheckpointing, ThePeakDropsAsEstimated) {
  JobSpec spec = baseSpec("mlp", "single");
  spec.model.layers = {32, 512, 512, 512, 512, 512, 8};
  spec.train.batch_size = 64;
  const double measured_off = measuredStepPeak(spec);
  const double estimated_off = estimatedActivations(spec);
  spec.train.activation_checkpointing = true;
  const double measured_on = measuredStepPeak(spec);
  const double estimated_on = estimatedActivations(spec);
  const double measured_drop = measured_off - measured_on;
  const double estimated_drop = estimated_off - estimated_on;
  std::printf(
      "step peak: %.0f -> %.0f bytes (drop %.0f); estimated activations %.0f -> %.0f "
      "(drop %.0f)\n",
      measured_off, measured_on, measured_drop, estimated_off, estimated_on, estimated_drop);
  // The estimate counts what the blocks keep, not the backward's own transient tensors (the
  // gradient flowing between children, a [batch, width] float or two at a time): those are about
  // the same at both peaks, so they cancel in the drop, as does everything else the step holds;
  // what remains is the allocator's rounding (512-byte granules per tensor; measured here: 2 KiB
  // apart). Bound it by one [batch, 512] float tensor (128 KiB), a twelfth of the drop and less
  // than one block's Dropout mask or GELU input left out of (or added to) the estimate.
  const double slack = 64.0 * 512 * 4;
  EXPECT_GT(estimated_drop, 10 * slack);
  EXPECT_NEAR(measured_drop, estimated_drop, slack);
}

// ---------------------------------------------------------------------------------------------
// The GPT: its blocks ("embedding", "h.i", "head") hold their Dropouts inside composite modules.

constexpr int64_t kVocab = 32, kContext = 8;

// `strategy`: a legacy kind, over `world` ranks.
JobSpec gptSpec(const std::string& strategy, int world = 1) {
  JobSpec spec;
  spec.model.kind = "gpt";
  spec.model.vocab_size = kVocab;
  spec.model.context = kContext;
  spec.model.block_count = 3;
  spec.model.heads = 2;
  spec.model.dim = 16;
  spec.model.dropout = 0.1;
  spec.model.seed = 3;
  applyLegacyStrategyKind(strategy, world, spec.strategy);
  spec.train.batch_size = 4;
  return spec;
}

// Sample i: the window of kContext + 1 tokens of a fixed pseudo-random text starting at i.
Batch tokenBatch(const std::vector<int64_t>& rows) {
  std::vector<int32_t> inputs, targets;
  auto token = [](int64_t at) { return static_cast<int32_t>((at * 7 + (at * at) % 11) % kVocab); };
  for (int64_t row : rows) {
    for (int64_t t = 0; t < kContext; ++t) {
      inputs.push_back(token(row + t));
      targets.push_back(token(row + t + 1));
    }
  }
  const auto n = static_cast<int64_t>(rows.size());
  return {Tensor::fromInts(inputs, {n, kContext}), Tensor::fromInts(targets, {n, kContext})};
}

// Two batches (the second accumulated onto the first) on `world` ranks: the losses and gradients.
std::vector<RankResult> trainGpt(JobSpec spec, int world, bool checkpointing) {
  spec.train.activation_checkpointing = checkpointing;
  std::vector<RankResult> results(static_cast<size_t>(world));
  auto body = [&](Communicator* comm) {
    auto model = buildModel(spec.model);
    std::unique_ptr<ParallelStrategy> strategy =
        makeParallelStrategy({.model = *model, .world = comm, .spec = spec});
    const int rank = comm ? comm->rank() : 0;
    RankResult& result = results[static_cast<size_t>(rank)];
    for (int batch = 0; batch < 2; ++batch) {
      std::vector<int64_t> indices;
      for (int64_t i = 0; i < spec.train.batch_size; ++i)
        indices.push_back(batch * 17 + rank * 5 + i * 3);
      result.losses.push_back(strategy->trainBatch(indices, tokenBatch, 2, batch == 1).loss);
    }
    strategy->finishGradientSync();
    for (const NamedParameter& p : strategy->optimizerParameters())
      result.grads.push_back(p.parameter->grad.toFloatVector());
  };
  if (!needsWorldCommunicator(spec)) {
    body(nullptr);
  } else {
    auto failures = runRanks(world, [&](Communicator& comm) { body(&comm); });
    EXPECT_ALL_RANKS_OK(failures);
  }
  return results;
}

void expectSameGpt(const JobSpec& spec, int world, const std::string& what) {
  const std::vector<RankResult> plain = trainGpt(spec, world, false);
  const std::vector<RankResult> checkpointed = trainGpt(spec, world, true);
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE(fmt::format("gpt {}, {} ranks, rank {}", what, world, r));
    EXPECT_EQ(checkpointed[r].losses, plain[r].losses);
    ASSERT_EQ(checkpointed[r].grads.size(), plain[r].grads.size());
    ASSERT_FALSE(plain[r].grads.empty());
    for (size_t i = 0; i < plain[r].grads.size(); ++i)
      EXPECT_EQ(checkpointed[r].grads[i], plain[r].grads[i]) << "parameter " << i;
  }
}

TEST(ActivationCheckpointing, GptEqualsTheRunWithoutUnderSingleAndDdp) {
  expectSameGpt(gptSpec("single"), 1, "single");
  for (int world : {2, 3}) expectSameGpt(gptSpec("ddp", world), world, "ddp");
}

// FSDP gathers a unit for its backward, where the recompute needs the full parameters; the
// pipeline keeps each micro-batch's block inputs and counters between its forward and backward.
TEST(ActivationCheckpointing, GptEqualsTheRunWithoutUnderFsdpAndThePipeline) {
  for (FsdpSharding sharding : {FsdpSharding::kFullShard, FsdpSharding::kShardGradOp}) {
    JobSpec spec = gptSpec("fsdp", 2);
    spec.strategy.fsdp.sharding = sharding;
    expectSameGpt(spec, 2, fmt::format("fsdp {}", toString(sharding)));
  }
  for (PipelineSchedule schedule : {PipelineSchedule::k1f1b, PipelineSchedule::kZbH1}) {
    JobSpec spec = gptSpec("pipeline", 3);
    spec.train.micro_batches = 2;
    spec.strategy.pipeline.schedule = schedule;
    expectSameGpt(spec, 3, fmt::format("pipeline {}", toString(schedule)));
  }
}

// A measured GPT step: the peak drops with checkpointing by what the estimate predicts from the
// GPT's declared activation bytes (nn/gpt.cpp). The blocks' activations dominate: 8 samples of 64
// tokens keep ~3.4 MB per transformer block.
TEST(ActivationCheckpointing, AGptStepsPeakDropsAsEstimated) {
  JobSpec spec = gptSpec("single");
  spec.model.vocab_size = kVocab;
  spec.model.context = 64;
  spec.model.block_count = 4;
  spec.model.heads = 4;
  spec.model.dim = 64;
  spec.train.batch_size = 8;
  const BatchMaker tokens = [](const std::vector<int64_t>& rows) {
    std::vector<int32_t> inputs, targets;
    for (int64_t row : rows) {
      for (int64_t t = 0; t < 64; ++t) {
        inputs.push_back(static_cast<int32_t>((row * 5 + t * 3) % kVocab));
        targets.push_back(static_cast<int32_t>((row * 5 + t * 3 + 3) % kVocab));
      }
    }
    const auto n = static_cast<int64_t>(rows.size());
    return Batch{Tensor::fromInts(inputs, {n, 64}), Tensor::fromInts(targets, {n, 64})};
  };
  // In fp32 and under bf16 autocast (train.precision), whose blocks keep about half as much.
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    SCOPED_TRACE(toString(precision));
    spec.train.precision = precision;
    spec.train.activation_checkpointing = false;
    const double measured_off = measuredStepPeak(spec, tokens);
    const double estimated_off = estimatedActivations(spec);
    spec.train.activation_checkpointing = true;
    const double measured_on = measuredStepPeak(spec, tokens);
    const double estimated_on = estimatedActivations(spec);
    const double measured_drop = measured_off - measured_on;
    const double estimated_drop = estimated_off - estimated_on;
    std::printf(
        "gpt %s step peak: %.0f -> %.0f bytes (drop %.0f); estimated activations %.0f -> %.0f "
        "(drop %.0f)\n",
        std::string(toString(precision)).c_str(), measured_off, measured_on, measured_drop,
        estimated_off, estimated_on, estimated_drop);
    // As for the MLP, what the step holds besides the blocks' activations cancels in the drop, but
    // for which working tensors of the backward are live at each peak: the checkpointed one is
    // inside a recomputed block's backward (attention's dq, dk, dv, dy: up to four [batch, T, C]
    // floats), the plain one in the head's (measured here: 128 KiB apart, in fp32 and in bf16).
    // Bound by four such tensors (512 KiB), a twentieth of the drop in fp32 (a fourteenth in
    // bf16) and a quarter of one missing [B, H, T, T] term over the four blocks (the dropped-out
    // attention probabilities, which the description first left out: 2 MiB in fp32).
    const double slack = 4.0 * 8 * 64 * 64 * 4;
    EXPECT_GT(estimated_drop, 12 * slack);
    EXPECT_NEAR(measured_drop, estimated_drop, slack);
  }
}

// What a transformer block declares it keeps (nn/gpt.cpp, the estimate's input) against
// Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", eq. 1:
// s b h (34 + 5 a s / h) bytes per layer in 16-bit, masks 1 byte), per sample (b = 1) at GPT-2
// small's sizes. In float32 every 2-byte activation is 4 bytes; beyond that, ours differs only by
// what the implementation keeps differently: its dropout masks are float32 (4 bytes an element,
// where the scaled figure has 2: + 2 (a s^2 + 2 s h)), and its LayerNorms keep mean and rstd
// (2 x 2 s floats, which the paper leaves out). The estimate uses the declared figure.
TEST(ActivationCheckpointing, TheGptBlocksDeclaredActivationsAreKorthikantisInFloat32) {
  const int64_t s = 1024, h = 768, a = 12;
  for (bool dropout : {true, false}) {
    ModelSpec model;
    model.kind = "gpt";
    model.vocab_size = 50257;
    model.context = s;
    model.block_count = 1;
    model.heads = a;
    model.dim = h;
    model.dropout = dropout ? 0.1 : 0;
    const ModelDescription description = describeModel(model);
    const ModelBlock& block = description.blocks.at(1);
    ASSERT_EQ(block.name, "h.0");
    // Without dropout the paper's figure loses the masks (a s^2 + 2 s h bytes) and the dropped-
    // out attention probabilities (2 a s^2): 32 s h + 2 a s^2.
    const int64_t paper_16bit = dropout ? 34 * s * h + 5 * a * s * s : 32 * s * h + 2 * a * s * s;
    const int64_t wider_masks = dropout ? 2 * (a * s * s + 2 * s * h) : 0;
    const int64_t layer_norm_statistics = 2 * 2 * s * 4;
    EXPECT_EQ(block.activation_bytes_per_sample,
              2 * paper_16bit + wider_masks + layer_norm_statistics)
        << (dropout ? "with" : "without") << " dropout";
  }
}

// Every strategy's plan counts, under checkpointing, the blocks' inputs (times the micro-batches
// a pipeline stage holds) and one block's activations beyond its input, as a part of its own.
TEST(ActivationCheckpointing, EveryPlansEstimateCountsBlockInputsAndOneRecomputedBlock) {
  JobSpec spec = baseSpec("mlp", "single");
  spec.model.layers = {32, 512, 512, 8};  // blocks: 32 -> 512, 512 -> 512, 512 -> 8
  spec.train.batch_size = 16;
  spec.train.micro_batches = 1;
  spec.launch.hosts = {{.host = "localhost", .ranks = 2}};
  const ModelDescription description = describeModel(spec.model);
  for (std::string kind : {"single", "ddp", "fsdp", "pipeline"}) {
    SCOPED_TRACE(kind);
    applyLegacyStrategyKind(kind, 2, spec.strategy);
    if (kind == "pipeline") {
      spec.train.micro_batches = 2;
      spec.strategy.pipeline.schedule = PipelineSchedule::kGpipe;
    }
    for (bool on : {false, true}) {
      spec.train.activation_checkpointing = on;
      const std::vector<RankMemoryEstimate> ranks = estimateMemory(spec);
      const RankMemoryEstimate& rank = ranks.at(0);
      // Rank 0 holds every block, or a pipeline's first stage (the balanced split by
      // parameters), with both micro-batches of 8 in flight under GPipe.
      const bool pipeline = kind == "pipeline";
      std::vector<int64_t> parameters;
      for (const ModelBlock& block : description.blocks) parameters.push_back(block.parameters);
      const size_t end = pipeline ? balancedSplit(parameters, 2).at(1) : 3;
      const int64_t rows = pipeline ? 8 : 16, in_flight = pipeline ? 2 : 1;
      double kept = 0, inputs = 0, beyond = 0;
      for (size_t b = 0; b < end; ++b) {
        const ModelBlock& block = description.blocks[b];
        kept += static_cast<double>(block.activation_bytes_per_sample * rows);
        inputs += static_cast<double>(shapeNumel(block.input_shape) * 4 * rows);
        beyond = std::max(beyond, static_cast<double>((block.activation_bytes_per_sample -
                                                       shapeNumel(block.input_shape) * 4) *
                                                      rows));
      }
      std::map<std::string, double> parts;
      for (const MemoryPart& part : rank.parts) parts[part.name] = part.bytes;
      EXPECT_EQ(parts.at("activations"), (on ? inputs : kept) * in_flight);
      EXPECT_EQ(parts.count("recomputed block (transient)"), on ? 1u : 0u);
      if (on) EXPECT_EQ(parts.at("recomputed block (transient)"), beyond);
    }
  }
}

}  // namespace
}  // namespace ringmaster
