// The strategies' plans (spec/strategies/): the memory estimate against the ZeRO formulas (moved
// here from the window's tests with the estimate), the registered dimension plans, and the
// pipeline's rules that the parser and the runtime share.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "spec/job_spec.h"
#include "spec/memory_estimate.h"
#include "spec/strategies/plan.h"
#include "tensor/allocator.h"

namespace ringmaster {
namespace {

JobSpec specOf(const std::string& strategy_json, int ranks, const std::string& extra_train = "") {
  const std::string text = R"({"name": "t", "strategy": )" + strategy_json +
                           R"(, "model": {"kind": "mlp", "layers": [100, 50, 40, 30, 10]},
          "data": {"kind": "synthetic", "samples": 256, "features": 100, "classes": 10},
          "train": {"steps": 10, "batch_size": 16)" +
                           extra_train + R"(},
          "optimizer": {"kind": "adam", "lr": 0.001},
          "launch": {"hosts": [{"host": "localhost", "ranks": )" +
                           std::to_string(ranks) + "}]}}";
  SpecParseResult parsed = parseJobSpec(text);
  EXPECT_TRUE(parsed.ok()) << parsed.describe();
  return parsed.ok() ? *parsed.spec : JobSpec{};
}

// What the caching allocator hands out for tensors of these sizes in bytes (each rounded up:
// tensor/allocator.h), as the estimate counts them.
double allocated(const std::vector<double>& tensor_bytes) {
  double sum = 0;
  for (double bytes : tensor_bytes)
    sum += static_cast<double>(CachingAllocator::roundSize(static_cast<size_t>(bytes)));
  return sum;
}

// The float32 parameter tensors of the MLP [100, 50, 40, 30, 10] below, in bytes: each Linear's
// weight and bias.
const std::vector<double> kMlpTensors = {4 * 5000, 4 * 50, 4 * 2000, 4 * 40,
                                         4 * 1200, 4 * 30, 4 * 300,  4 * 10};

double part(const RankMemoryEstimate& estimate, const std::string& name) {
  for (const auto& p : estimate.parts)
    if (p.name == name) return p.bytes;
  return -1;
}

TEST(MemoryEstimate, FollowsTheZeroFormulas) {
  // Ψ = 100*50+50 + 50*40+40 + 40*30+30 + 30*10+10 = 8630 parameters.
  const double psi = 8630;
  // Each tensor as the allocator rounds it; DDP's gradients are one bucket (under its first cap of
  // 1 MiB), the optimizer's two Adam moments one tensor per parameter each.
  const auto ddp = estimateMemory(specOf(R"({"kind": "ddp"})", 4));
  ASSERT_EQ(ddp.size(), size_t{4});
  EXPECT_EQ(part(ddp[0], "parameters"), allocated(kMlpTensors));
  EXPECT_EQ(part(ddp[0], "gradients"), allocated({4 * psi}));
  EXPECT_EQ(part(ddp[0], "optimizer state"), 2 * allocated(kMlpTensors));
  // Activations: batch 16 x (inputs 100+50+40+30, activation outputs 50+40+30) x 4 B.
  EXPECT_EQ(part(ddp[0], "activations"), 16.0 * (100 + 50 + 40 + 30 + 50 + 40 + 30) * 4);

  // FSDP: one flat parameter per layer unit [5050, 2040, 1230, 310], padded to 4 shards.
  const auto fsdp = estimateMemory(specOf(R"({"kind": "fsdp", "sharding": "full_shard"})", 4));
  const double shards = allocated({4 * 1263, 4 * 510, 4 * 308, 4 * 78});
  EXPECT_EQ(part(fsdp[3], "parameters"), shards);
  EXPECT_EQ(part(fsdp[3], "optimizer state"), 2 * shards);
  // One unit gathered and the next prefetched: the two largest layers, 5050 + 2040.
  EXPECT_EQ(part(fsdp[3], "all-gathered units (transient)"), 4.0 * (5050 + 2040));

  const auto zero2 = estimateMemory(specOf(R"({"kind": "fsdp", "sharding": "shard_grad_op"})", 2));
  // Each unit stays gathered until its backward's reduction: the most is held while the first
  // (largest) unit's gradient is reduced, when only it is still gathered; at the last unit's
  // every unit is, but its gradient is small: 4 x (5050 + 5050) > 4 x (8630 + 310), rounded.
  EXPECT_EQ(part(zero2[0], "unsharded parameters (forward to backward)"), allocated({4 * 5050}));

  // Pipeline over 2 ranks: the balanced split of [5050, 2040, 1230, 310] is {5050} | {rest}.
  const auto pipe = estimateMemory(
      specOf(R"({"kind": "pipeline", "schedule": "gpipe"})", 2, R"(, "micro_batches": 4)"));
  EXPECT_EQ(part(pipe[0], "parameters"), allocated({4 * 5000, 4 * 50}));
  EXPECT_EQ(part(pipe[1], "parameters"),
            allocated({4 * 2000, 4 * 40, 4 * 1200, 4 * 30, 4 * 300, 4 * 10}));
  // GPipe keeps all 4 micro-batches of 4 samples: rank 0's stage saves 100 + 50 per sample.
  EXPECT_EQ(part(pipe[0], "activations"), 4.0 * 4 * (100 + 50) * 4);
  // Every receive of the step is posted at its start and kept to its end: rank 0 the gradient of
  // its output (50 features) for each micro-batch, float32. Rank 1's are its inputs, which its
  // first Linear keeps as they came (float32) for all 4 micro-batches: its activations count
  // them, so it has no receive buffers beside them.
  EXPECT_EQ(part(pipe[0], "receive buffers (transient)"), 4 * allocated({4 * 50 * 4}));
  EXPECT_EQ(part(pipe[1], "receive buffers (transient)"), -1);
  EXPECT_EQ(part(pipe[1], "activations"), 4.0 * 4 * (50 + 40 + 40 + 30 + 30) * 4);
  for (const auto& p : pipe[0].parts) EXPECT_FALSE(p.formula.empty()) << p.name;
}

JobSpec gptSpecOf(int ranks, const std::string& strategy = R"({"kind": "pipeline"})",
                  const std::string& extra_train = R"(, "micro_batches": 2)") {
  SpecParseResult parsed = parseJobSpec(R"({"name": "t", "strategy": )" + strategy + R"(,
      "model": {"kind": "gpt", "vocab_size": 256, "context": 8, "layers": 2, "heads": 2,
                "dim": 16},
      "data": {"kind": "text", "path": "corpus.txt", "val_fraction": 0.1},
      "train": {"steps": 10, "batch_size": 4)" +
                                        extra_train + R"(},
      "optimizer": {"kind": "adam", "lr": 0.001},
      "launch": {"hosts": [{"host": "localhost", "ranks": )" +
                                        std::to_string(ranks) + "}]}}");
  EXPECT_TRUE(parsed.ok()) << parsed.describe();
  return parsed.ok() ? *parsed.spec : JobSpec{};
}

TEST(MemoryEstimate, APipelinesLastStageKeepsACopyOfTheTiedEmbedding) {
  // GPT, vocabulary 256, context 8, width 16, 2 blocks: the embedding block holds wte (4096) and
  // wpe (128); each transformer block 3280 (LayerNorms 2 x 32, c_attn 816, c_proj 272, c_fc 1088,
  // mlp.c_proj 1040); the head ln_f (32) and reads wte. Balanced over [4224, 3280, 3280, 32]:
  // {embedding} | {h.0, h.1, head}, and the last rank keeps a copy of wte.
  const auto pipe = estimateMemory(gptSpecOf(2));
  ASSERT_EQ(pipe.size(), 2u);
  const double first = part(pipe[0], "parameters"), last = part(pipe[1], "parameters");
  EXPECT_EQ(first, allocated({4 * 4096, 4 * 128}));  // wte, wpe
  // One rank holds both ends (two interleaved stages: one stage would be no pipeline): no copy.
  const double whole = part(
      estimateMemory(gptSpecOf(
          1, R"({"kind": "pipeline", "schedule": "interleaved_1f1b", "virtual_stages": 2})"))[0],
      "parameters");
  EXPECT_EQ(last, whole - first + allocated({4 * 4096})) << "the head's stage holds a copy of wte";
  EXPECT_EQ(part(pipe[1], "optimizer state"), 2 * last);
}

TEST(MemoryEstimate, FsdpKeepsTheTiedRootUnitGatheredAcrossTheBlocks) {
  // The same GPT under full_shard with block units: the root unit (wte, wpe, ln_f: 4256) stays
  // gathered while h.0 runs with h.1 prefetched (3280 each).
  const auto fsdp =
      estimateMemory(gptSpecOf(2, R"({"kind": "fsdp", "sharding": "full_shard"})", ""));
  EXPECT_EQ(part(fsdp[0], "all-gathered units (transient)"), 4.0 * (4256 + 2 * 3280));
  // Its flat parameters, halved: the root unit's 4256 and each block's 3280.
  EXPECT_EQ(part(fsdp[0], "parameters"), allocated({4 * 2128, 4 * 1640, 4 * 1640}));
}

// Mixed precision: master weights, gradients and optimizer state stay float32 under
// train.precision bf16; a 16-bit reduce_dtype adds its copies of the gradients and a 16-bit
// param_dtype changes what a gathered unit costs (parallel/ddp.h, parallel/fsdp.h).
TEST(MemoryEstimate, SixteenBitReductionsAndGathersCountTheirCopies) {
  const double psi = 8630, largest = 5050, second = 2040;
  const auto bf16 = estimateMemory(specOf(R"({"kind": "ddp"})", 4, R"(, "precision": "bf16")"));
  EXPECT_EQ(part(bf16[0], "parameters"), allocated(kMlpTensors));
  EXPECT_EQ(part(bf16[0], "gradients"), allocated({4 * psi}));
  EXPECT_EQ(part(bf16[0], "optimizer state"), 2 * allocated(kMlpTensors));
  EXPECT_EQ(part(bf16[0], "16-bit reduce buffers (transient)"), -1) << "fp32 reduction";
  const auto ddp = estimateMemory(specOf(R"({"kind": "ddp", "reduce_dtype": "bf16"})", 4));
  EXPECT_EQ(part(ddp[0], "16-bit reduce buffers (transient)"), allocated({2 * psi}));
  EXPECT_EQ(part(ddp[0], "gradients"), allocated({4 * psi}));

  // full_shard: the largest unit gathered in bf16 and widened (6 B), or held in float32 beside
  // the next unit's bf16 buffer and cast shard (4 B + (2 + 2/4) B), whichever is more.
  const auto gather = estimateMemory(
      specOf(R"({"kind": "fsdp", "sharding": "full_shard", "param_dtype": "bf16"})", 4));
  EXPECT_EQ(part(gather[1], "all-gathered units (transient)"),
            std::max(6 * largest, 4 * largest + 2.5 * second));
  const auto whole = estimateMemory(specOf(
      R"({"kind": "fsdp", "sharding": "full_shard", "units": "model", "param_dtype": "fp16"})", 4));
  EXPECT_EQ(part(whole[0], "all-gathered units (transient)"), 6 * psi);
  const auto zero2 = estimateMemory(
      specOf(R"({"kind": "fsdp", "sharding": "shard_grad_op", "param_dtype": "bf16"})", 2));
  // Each unit stays gathered until its backward's reduction: the most is held while the first
  // (largest) unit's gradient is reduced, when only it is still gathered; at the last unit's
  // every unit is, but its gradient is small: 4 x (5050 + 5050) > 4 x (8630 + 310), rounded.
  EXPECT_EQ(part(zero2[0], "unsharded parameters (forward to backward)"), allocated({4 * 5050}));
  EXPECT_EQ(part(zero2[0], "16-bit gather buffer (transient)"), (2 + 1) * largest);
  const auto rounded = estimateMemory(
      specOf(R"({"kind": "fsdp", "sharding": "no_shard", "param_dtype": "bf16"})", 2));
  EXPECT_EQ(part(rounded[0], "rounded parameters"), 4 * psi);

  const auto reduce = estimateMemory(
      specOf(R"({"kind": "fsdp", "sharding": "full_shard", "reduce_dtype": "bf16"})", 4));
  // The reduced bf16 shards until the sync, and the largest unit's float32 gradient with its bf16
  // copy while it is reduce-scattered; in float32 the reduced shards are float32 and the unit's
  // gradient is the reduction's own input.
  EXPECT_EQ(part(reduce[0], "gradients in reduction (transient)"), 2 * psi / 4 + 6 * largest);
  EXPECT_EQ(part(gather[0], "gradients in reduction (transient)"), 4 * psi / 4 + 4 * largest);
  EXPECT_EQ(part(reduce[0], "all-gathered units (transient)"), 4 * (largest + second));
  const auto reduce_whole = estimateMemory(
      specOf(R"({"kind": "fsdp", "sharding": "no_shard", "reduce_dtype": "bf16"})", 4));
  EXPECT_EQ(part(reduce_whole[0], "16-bit reduce buffers (transient)"), 2 * psi);
  for (const auto& p : gather[0].parts) EXPECT_FALSE(p.formula.empty()) << p.name;

  // The GPT's tied root unit (4256) stays gathered in float32 while a block's unit (3280) is
  // held beside the next block's bf16 prefetch (2 B buffer + 2 B / 2 cast shard), which is more
  // than one unit widened (6 B): 4 x 4256 + (4 + 3) x 3280.
  const auto gpt = estimateMemory(
      gptSpecOf(2, R"({"kind": "fsdp", "sharding": "full_shard", "param_dtype": "bf16"})", ""));
  EXPECT_EQ(part(gpt[0], "all-gathered units (transient)"), 4.0 * 4256 + 7.0 * 3280);

  // A pipeline's messages stay float32 under bf16 autocast: the GPT's stages exchange [2, 8, 16]
  // per micro-batch, 2 micro-batches; the 2-rank split {embedding} | {h.0, h.1, head}. The last
  // rank's 1F1B holds one micro-batch at its peak, whose received input h.0's ln_1 keeps as it
  // came (its activations count it).
  for (const char* precision : {"", R"(, "precision": "bf16")"}) {
    const auto pipe = estimateMemory(gptSpecOf(2, R"({"kind": "pipeline"})",
                                               std::string(R"(, "micro_batches": 2)") + precision));
    EXPECT_EQ(part(pipe[0], "receive buffers (transient)"), 2.0 * 2 * 8 * 16 * 4) << precision;
    EXPECT_EQ(part(pipe[1], "receive buffers (transient)"), 1.0 * 2 * 8 * 16 * 4) << precision;
  }
}

// Issue 34: the dimensions are registered plans. The data-parallel plans by name
// (strategy.dp.kind's choices), tp's and pp's once each, every one on its own dimension.
TEST(DimensionPlans, DataParallelPlansAreRegisteredByNameAndEachDimensionHasItsPlan) {
  EXPECT_EQ(dataParallelPlanNames(), (std::vector<std::string_view>{"ddp", "fsdp"}));
  for (const DimensionPlan* plan : dataParallelPlans()) {
    EXPECT_EQ(plan->dim(), MeshDim::kDp) << plan->name();
    EXPECT_EQ(findDataParallelPlan(plan->name()), plan);
  }
  EXPECT_EQ(findDataParallelPlan("fdsp"), nullptr);
  EXPECT_EQ(findDataParallelPlan("pipeline"), nullptr);
  EXPECT_EQ(tensorParallelPlan().dim(), MeshDim::kTp);
  EXPECT_EQ(pipelineParallelPlan().dim(), MeshDim::kPp);
  EXPECT_EQ(dimensionPlans().size(), dataParallelPlans().size() + 2);
  // The one place that knows which ranks share samples: the mesh's dp.
  EXPECT_EQ(dataParallelSize(specOf(R"({"kind": "pipeline"})", 2)), 1);
  EXPECT_EQ(dataParallelSize(specOf(R"({"kind": "ddp"})", 3)), 3);
  EXPECT_EQ(dataParallelSize(specOf(R"({"mesh": {"dp": 2, "pp": 2}})", 4)), 2);
  EXPECT_EQ(stageCount(specOf(R"({"mesh": {"dp": 2, "pp": 2}})", 4, R"(, "micro_batches": 2)")), 2);
  // The one-dimension layouts' plan; none for one rank or a mixed mesh.
  EXPECT_EQ(soleDimensionPlan(specOf(R"({"kind": "single"})", 1)), nullptr);
  EXPECT_EQ(soleDimensionPlan(specOf(R"({"kind": "fsdp"})", 2)), findDataParallelPlan("fsdp"));
  EXPECT_EQ(soleDimensionPlan(specOf(R"({"kind": "pipeline"})", 2)), &pipelineParallelPlan());
  EXPECT_EQ(soleDimensionPlan(specOf(R"({"mesh": {"dp": 2, "pp": 2}})", 4)), nullptr);
}

// Each option key belongs to one plan, except the data-parallel dtype option ddp and fsdp share
// (the parser gates it for both, the form shows one field for both).
TEST(DimensionPlans, EveryOptionKeyBelongsToOnePlanButTheSharedReduceDtype) {
  std::map<std::string_view, std::vector<std::string_view>> owners;
  for (const DimensionPlan* plan : dimensionPlans())
    for (std::string_view key : plan->optionKeys()) owners[key].push_back(plan->name());
  for (const auto& [key, plans] : owners) {
    if (key == "reduce_dtype")
      EXPECT_EQ(plans, (std::vector<std::string_view>{"ddp", "fsdp"}));
    else
      EXPECT_EQ(plans.size(), 1u) << key;
  }
  // bucket_cap_mb, reduce_dtype; sharding, units, param_dtype; sequence_parallel; schedule,
  // virtual_stages, stages
  EXPECT_EQ(owners.size(), size_t{9});
  // Each plan's fields are its options at their canonical paths.
  for (const DimensionPlan* plan : dimensionPlans()) {
    const std::string block = fmt::format("strategy.{}.", toString(plan->dim()));
    std::vector<std::string> keys;
    for (const SpecField& field : plan->fields()) {
      EXPECT_TRUE(field.path.starts_with(block)) << field.path;
      keys.push_back(field.path.substr(block.size()));
    }
    std::vector<std::string> option_keys;
    for (std::string_view key : plan->optionKeys()) option_keys.emplace_back(key);
    EXPECT_EQ(keys, option_keys) << plan->name();
  }
}

// A layout of more than one dimension is estimated rank by rank by meshMemory (issue 34; its
// formulas are tested in mesh_memory_test.cpp): here 2 replicas of 2 stages, each stage's ranks
// alike, the stages different.
TEST(MemoryEstimate, AMixedMeshIsEstimatedPerRankByTheMesh) {
  const JobSpec spec = specOf(R"({"mesh": {"dp": 2, "pp": 2}})", 4, R"(, "micro_batches": 2)");
  const std::vector<RankMemoryEstimate> ranks = estimateMemory(spec);
  ASSERT_EQ(ranks.size(), 4u);
  const MemoryInputs inputs = modelMemoryInputs(spec);
  for (int r = 0; r < 4; ++r) {
    const std::vector<MemoryPart> expected = meshMemory(inputs, r);
    ASSERT_EQ(ranks[r].parts.size(), expected.size()) << "rank " << r;
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_EQ(ranks[r].parts[i].bytes, expected[i].bytes)
          << "rank " << r << " " << expected[i].name;
  }
  EXPECT_EQ(ranks[0].total(), ranks[1].total());  // dp 0 and 1 of stage 0
  EXPECT_NE(ranks[0].total(), ranks[2].total());  // stage 0 and stage 1
}

TEST(PipelineRules, WrittenOnceForTheParserAndTheRuntime) {
  EXPECT_FALSE(virtualStagesProblem(PipelineSchedule::k1f1b, 1));
  EXPECT_FALSE(virtualStagesProblem(PipelineSchedule::kInterleaved1f1b, 2));
  ASSERT_TRUE(virtualStagesProblem(PipelineSchedule::kInterleaved1f1b, 1));
  EXPECT_EQ(virtualStagesProblem(PipelineSchedule::kGpipe, 2)->path, "strategy.pp.virtual_stages");

  EXPECT_FALSE(microBatchesProblem(PipelineSchedule::kInterleaved1f1b, 8, 4));
  EXPECT_FALSE(microBatchesProblem(PipelineSchedule::k1f1b, 3, 4));
  for (const int micro_batches : {1, 2, 3, 5, 6, 7}) {
    const auto problem = microBatchesProblem(PipelineSchedule::kInterleaved1f1b, micro_batches, 4);
    ASSERT_TRUE(problem) << micro_batches;
    EXPECT_EQ(problem->path, "train.micro_batches");
  }

  EXPECT_FALSE(stageCountProblem(4, "4", 4));
  ASSERT_TRUE(stageCountProblem(5, "5", 4));
  EXPECT_EQ(stageCountProblem(5, "5", 4)->path, "strategy.mesh.pp");

  EXPECT_FALSE(partitionProblem({{0}, {1, 2, 3}}, 2, "2", 4));
  ASSERT_TRUE(partitionProblem({{0}, {2, 3}}, 2, "2", 4));
  EXPECT_EQ(partitionProblem({{0}, {2, 3}}, 2, "2", 4)->path, "strategy.pp.stages[1][0]");
  EXPECT_EQ(partitionProblem({{0}}, 2, "2", 4)->path, "strategy.pp.stages");
  EXPECT_EQ(partitionProblem({{0}, {1}}, 2, "2", 4)->message,
            "layers 2..3 are in no stage (stages must list layers 0..3 in order, each once)");

  EXPECT_EQ(balancedSplit({5050, 2040, 1230, 310}, 2), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(balancedSplit({1, 1, 1, 1}, 4), (std::vector<size_t>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace ringmaster
