// The memory estimate on the device mesh (issue 34: "the memory estimate covers every layout, per
// rank"): for every factorisation of 4 ranks of a small GPT (and 2x2x2 on 8), with dp as DDP and
// as FSDP, each rank's parts are consistent: a one-dimension layout is that dimension's plan,
// tensor parallelism divides exactly the split matrices, heads, hidden units and vocabulary, FSDP
// shards the states as the runtime does (a replica's units, or a stage's flat buffers), DDP keeps
// them whole, and the pipeline's stages sum to the whole model.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "nn/model.h"
#include "spec/job_spec.h"
#include "spec/memory_estimate.h"
#include "spec/mesh_layout.h"
#include "spec/strategies/plan.h"
#include "tensor/allocator.h"

namespace ringmaster {
namespace {

// The GPT of every case: vocabulary 256, context T = 8, width C = 16, 4 heads, 4 blocks; batch 4
// in 2 micro-batches under a pipeline.
constexpr double kT = 8, kC = 16, kH = 4, kV = 256, kBlocks = 4, kBatch = 4;

struct Layout {
  int dp = 1, tp = 1, pp = 1;
  std::string dp_kind = "ddp";
};

std::string nameOf(const Layout& layout) {
  return fmt::format("{}x{}x{} {}", layout.dp, layout.tp, layout.pp, layout.dp_kind);
}

// The GPT job on dp x tp x pp local ranks, its strategy block in the mesh form; 2 micro-batches
// under a pipeline.
JobSpec gptSpec(const Layout& layout, const std::string& schedule = "1f1b",
                bool sequence_parallel = false) {
  nlohmann::json strategy = {{"mesh", {{"dp", layout.dp}, {"tp", layout.tp}, {"pp", layout.pp}}},
                             {"dp", {{"kind", layout.dp_kind}}}};
  if (layout.tp > 1) strategy["tp"] = {{"sequence_parallel", sequence_parallel}};
  if (layout.pp > 1) strategy["pp"] = {{"schedule", schedule}};
  SpecParseResult parsed = parseJobSpec(fmt::format(R"({{"name": "t", "strategy": {},
      "model": {{"kind": "gpt", "vocab_size": 256, "context": 8, "layers": 4, "heads": 4,
                "dim": 16}},
      "data": {{"kind": "text", "path": "corpus.txt", "val_fraction": 0.1}},
      "train": {{"steps": 10, "batch_size": 4, "micro_batches": {}}},
      "optimizer": {{"kind": "adam", "lr": 0.001}},
      "launch": {{"hosts": [{{"host": "localhost", "ranks": {}}}]}}}})",
                                                    strategy.dump(), layout.pp > 1 ? 2 : 1,
                                                    layout.dp * layout.tp * layout.pp));
  EXPECT_TRUE(parsed.ok()) << nameOf(layout) << ": " << parsed.describe();
  return parsed.ok() ? *parsed.spec : JobSpec{};
}

// Every rank's parts as meshMemory gives them.
std::vector<std::vector<MemoryPart>> meshParts(const JobSpec& spec) {
  const MemoryInputs inputs = modelMemoryInputs(spec);
  std::vector<std::vector<MemoryPart>> ranks;
  for (int r = 0; r < spec.strategy.mesh.size(); ++r) ranks.push_back(meshMemory(inputs, r));
  return ranks;
}

double part(const std::vector<MemoryPart>& parts, const std::string& name) {
  for (const MemoryPart& p : parts)
    if (p.name == name) return p.bytes;
  return -1;
}

double allocated(double bytes) {
  return static_cast<double>(CachingAllocator::roundSize(static_cast<size_t>(bytes)));
}

// The float32 parameter tensors one of `tp` ranks holds of blocks [first, end) (0: the embedding,
// 1..4: h.0..h.3, 5: the head), each rounded by the allocator. Megatron-LM's split: c_attn and
// c_fc by columns (weight and bias), the projections by rows (their biases whole), wte by
// vocabulary; LayerNorms and wpe whole.
double tensorBytes(int tp, int first, int end) {
  std::vector<double> elements;
  for (int b = first; b < end; ++b) {
    if (b == 0) elements.insert(elements.end(), {kV / tp * kC, kT * kC});
    if (b == 5) elements.insert(elements.end(), {kC, kC});
    if (b == 0 || b == 5) continue;
    elements.insert(elements.end(), {kC, kC, kC * 3 * kC / tp, 3 * kC / tp, kC / tp * kC, kC, kC,
                                     kC, kC * 4 * kC / tp, 4 * kC / tp, 4 * kC / tp * kC, kC});
  }
  double bytes = 0;
  for (double n : elements) bytes += allocated(4 * n);
  return bytes;
}

// FSDP's flat units as each of `dp` ranks holds its shard (padded to dp shards, rounded).
double flatShards(const std::vector<double>& units, int dp) {
  double bytes = 0;
  for (double unit : units) bytes += allocated(4 * std::ceil(unit / dp));
  return bytes;
}

// The layouts of 4 ranks (and 2x2x2 on 8), each with dp as DDP and as FSDP.
std::vector<Layout> everyLayout() {
  std::vector<Layout> layouts;
  for (const std::string kind : {"ddp", "fsdp"}) {
    for (const auto& [dp, tp, pp] : std::vector<std::array<int, 3>>{
             {4, 1, 1}, {1, 4, 1}, {1, 1, 4}, {2, 2, 1}, {2, 1, 2}, {1, 2, 2}, {2, 2, 2}})
      layouts.push_back({dp, tp, pp, kind});
  }
  return layouts;
}

TEST(MeshMemory, AOneDimensionLayoutIsThatDimensionsPlan) {
  // 4x1x1 is DDP's or FSDP's plan over 4 ranks, 1x1x4 the pipeline's: part by part, formulas too.
  for (const Layout& layout :
       {Layout{4, 1, 1, "ddp"}, Layout{4, 1, 1, "fsdp"}, Layout{1, 1, 4, "ddp"}}) {
    const JobSpec spec = gptSpec(layout);
    const DimensionPlan* plan = soleDimensionPlan(spec);
    ASSERT_NE(plan, nullptr) << nameOf(layout);
    const MemoryInputs inputs = modelMemoryInputs(spec);
    const std::vector<std::vector<MemoryPart>> mesh = meshParts(spec);
    for (int r = 0; r < 4; ++r) {
      const std::vector<MemoryPart> expected = plan->estimateMemory(inputs, r);
      ASSERT_EQ(mesh[r].size(), expected.size()) << nameOf(layout) << " rank " << r;
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(mesh[r][i].name, expected[i].name) << nameOf(layout);
        EXPECT_EQ(mesh[r][i].bytes, expected[i].bytes) << nameOf(layout) << " " << expected[i].name;
        EXPECT_EQ(mesh[r][i].formula, expected[i].formula) << nameOf(layout);
      }
    }
  }
}

TEST(MeshMemory, EveryRankOfEveryLayoutHasItsStagesParts) {
  for (const Layout& layout : everyLayout()) {
    const JobSpec spec = gptSpec(layout);
    const std::vector<std::vector<MemoryPart>> ranks = meshParts(spec);
    for (int r = 0; r < spec.strategy.mesh.size(); ++r) {
      const MeshCoordinates at = meshCoordinates(spec.strategy.mesh, r);
      const std::string where = fmt::format("{} rank {}", nameOf(layout), r);
      for (const MemoryPart& p : ranks[r]) {
        EXPECT_GE(p.bytes, 0) << where << " " << p.name;
        EXPECT_FALSE(p.formula.empty()) << where << " " << p.name;
      }
      for (const std::string name : {"parameters", "gradients", "optimizer state", "activations"})
        EXPECT_GT(part(ranks[r], name), 0) << where << " " << name;
      // The loss (vocabulary-parallel under tp) is computed on the last stage only.
      EXPECT_EQ(part(ranks[r], "loss buffers (transient)") > 0, at.pp == layout.pp - 1) << where;
      // Ranks differing only in their dp or tp coordinate hold the same.
      const int first_of_stage = meshRank(spec.strategy.mesh, {.dp = 0, .tp = 0, .pp = at.pp});
      ASSERT_EQ(ranks[r].size(), ranks[first_of_stage].size()) << where;
      for (size_t i = 0; i < ranks[r].size(); ++i)
        EXPECT_EQ(ranks[r][i].bytes, ranks[first_of_stage][i].bytes)
            << where << " " << ranks[r][i].name;
    }
  }
}

TEST(MeshMemory, TensorParallelismSplitsTheMatricesHeadsHiddenUnitsAndVocabulary) {
  // Per block and sample, float32: the LayerNorms' inputs and statistics (2 T C + 4 T) and the
  // inputs of c_attn and c_fc (2 T C) are whole on every tp rank; attn.c_proj's and mlp.c_proj's
  // inputs, q, k, v and the GELU's input (12 T C) and the probabilities (H T T) are divided.
  auto block = [](int tp) {
    return 4 * ((2 * kT * kC + 4 * kT) + 2 * kT * kC + (12 * kT * kC + kH * kT * kT) / tp);
  };
  const double embedding = 4 * kT, head = 4 * (kT * kC + 2 * kT) + 4 * kT * kC;
  for (const std::string kind : {"ddp", "fsdp"}) {
    for (int tp : {1, 2, 4}) {
      for (int dp : {1, 4 / tp}) {
        const Layout layout{dp, tp, 1, kind};
        const std::vector<MemoryPart> rank = meshParts(gptSpec(layout)).back();
        EXPECT_EQ(part(rank, "activations"), kBatch * (embedding + kBlocks * block(tp) + head))
            << nameOf(layout);
        // The vocabulary-parallel loss: the logits, softmax and gradient of V / tp columns.
        EXPECT_EQ(part(rank, "loss buffers (transient)"), 3 * allocated(4 * kBatch * kT * kV / tp))
            << nameOf(layout);
        if (kind == "fsdp") continue;  // its shards: below
        EXPECT_EQ(part(rank, "parameters"), tensorBytes(tp, 0, 6)) << nameOf(layout);
        EXPECT_EQ(part(rank, "optimizer state"), 2 * tensorBytes(tp, 0, 6)) << nameOf(layout);
      }
    }
  }
  // Sequence parallelism also splits the LayerNorms' inputs and statistics (the blocks' and
  // ln_f's); the products' inputs are all-gathered whole.
  const double whole = part(meshParts(gptSpec({1, 2, 1}))[0], "activations");
  const double split = part(meshParts(gptSpec({1, 2, 1}, "1f1b", true))[0], "activations");
  EXPECT_EQ(whole - split,
            kBatch * 4 * (kBlocks * (2 * kT * kC + 4 * kT) + (kT * kC + 2 * kT)) / 2);
}

TEST(MeshMemory, ModelShareKeepsWhatIsWholeAndDividesTheRest) {
  ModelSpec gpt = gptSpec({}).model;
  const int64_t full = describeModel(gpt).parameterCount();
  // Whole on every tp rank: wpe (T C), ln_f and per block both LayerNorms (2 C each) and the
  // projections' biases (C each).
  const int64_t kept = static_cast<int64_t>(kT * kC + 2 * kC + kBlocks * (4 * kC + 2 * kC));
  for (int tp : {2, 4}) {
    const ModelDescription share = describeModelShare(gpt, DType::kF32, {.ranks = tp});
    EXPECT_EQ(tp * (share.parameterCount() - kept) + kept, full) << "tp " << tp;
    EXPECT_EQ(share.outputShape(), (Shape{8, 256 / tp}));
  }
  ModelSpec mlp;
  mlp.layers = {10, 10};
  EXPECT_THROW(describeModelShare(mlp, DType::kF32, {.ranks = 2}), Error);
}

TEST(MeshMemory, FsdpShardsAndDdpReplicatesTheStatesOfAReplicaOrAStage) {
  // The GPT's FSDP units under tp = 2: the root (the embedding's wte 2048 and wpe 128, with the
  // head's ln_f 32: tied) and one per block (1688).
  const std::vector<double> units = {2048 + 128 + 32, 1688, 1688, 1688, 1688};
  const std::vector<MemoryPart> fsdp = meshParts(gptSpec({2, 2, 1, "fsdp"}))[0];
  EXPECT_EQ(part(fsdp, "parameters"), flatShards(units, 2));
  EXPECT_EQ(part(fsdp, "gradients"), flatShards(units, 2));
  EXPECT_EQ(part(fsdp, "optimizer state"), 2 * flatShards(units, 2));
  const std::vector<MemoryPart> alone = meshParts(gptSpec({1, 2, 1}))[0];
  const std::vector<MemoryPart> ddp = meshParts(gptSpec({2, 2, 1, "ddp"}))[0];
  for (const std::string name : {"activations", "loss buffers (transient)"}) {
    EXPECT_EQ(part(fsdp, name), part(alone, name)) << name;
    EXPECT_EQ(part(ddp, name), part(alone, name)) << name;
  }
  EXPECT_EQ(part(ddp, "parameters"), part(alone, "parameters"));
  EXPECT_EQ(part(ddp, "optimizer state"), part(alone, "optimizer state"));
  // Over pipeline stages (2x1x2, parallel/replica_gradients.h): the stage's parameters (with the
  // head stage's copy of wte, 4096) and gradients each in one flat buffer, padded to 2 shards;
  // FSDP adds this rank's shard of both and keeps the optimizer's state for the shard only, DDP
  // for each parameter tensor. Balanced by parameters: {embedding, h.0} | {h.1, h.2, h.3, head}.
  const std::vector<double> stage_elements = {4096 + 128 + 3280, 3 * 3280 + 32 + 4096};
  const std::vector<std::vector<MemoryPart>> fsdp_stages = meshParts(gptSpec({2, 1, 2, "fsdp"}));
  const std::vector<std::vector<MemoryPart>> ddp_stages = meshParts(gptSpec({2, 1, 2, "ddp"}));
  const std::vector<double> stage_tensors = {tensorBytes(1, 0, 2),
                                             tensorBytes(1, 2, 6) + allocated(4 * 4096)};
  for (int pp = 0; pp < 2; ++pp) {
    const double padded = 2 * std::ceil(stage_elements[pp] / 2);
    const double flat = allocated(4 * padded), shard = allocated(4 * padded / 2);
    const std::vector<MemoryPart>& sharded = fsdp_stages[static_cast<size_t>(2 * pp)];
    EXPECT_EQ(part(sharded, "parameters"), flat + shard) << "stage " << pp;
    EXPECT_EQ(part(sharded, "gradients"), flat + shard) << "stage " << pp;
    EXPECT_EQ(part(sharded, "optimizer state"), 2 * shard) << "stage " << pp;
    const std::vector<MemoryPart>& replicated = ddp_stages[static_cast<size_t>(2 * pp)];
    EXPECT_EQ(part(replicated, "parameters"), flat) << "stage " << pp;
    EXPECT_EQ(part(replicated, "gradients"), flat) << "stage " << pp;
    EXPECT_EQ(part(replicated, "optimizer state"), 2 * stage_tensors[pp]) << "stage " << pp;
  }
}

TEST(MeshMemory, PipelineStagesSumToTheWholeModel) {
  // Under GPipe every micro-batch is held: a stage keeps its blocks' activations for the whole
  // batch, so the stages' sum is the unsplit model's. Without FSDP the optimizer's state sums to
  // the model's with the head stage's copy of wte (4096 / tp), and so do the parameters with one
  // replica (with more they are in one flat buffer per stage: above).
  for (const Layout& layout : everyLayout()) {
    if (layout.pp == 1) continue;
    const std::vector<std::vector<MemoryPart>> ranks = meshParts(gptSpec(layout, "gpipe"));
    const std::vector<MemoryPart> whole =
        meshParts(gptSpec({layout.dp, layout.tp, 1, layout.dp_kind}, "gpipe"))[0];
    double parameters = 0, optimizer = 0, activations = 0;
    for (int pp = 0; pp < layout.pp; ++pp) {
      const std::vector<MemoryPart>& stage =
          ranks[static_cast<size_t>(meshRank(gptSpec(layout).strategy.mesh, {0, 0, pp}))];
      parameters += part(stage, "parameters");
      optimizer += part(stage, "optimizer state");
      activations += part(stage, "activations");
    }
    const double copy = allocated(4 * kV / layout.tp * kC);
    EXPECT_EQ(activations, part(whole, "activations")) << nameOf(layout);
    if (layout.dp_kind == "fsdp") continue;
    EXPECT_EQ(optimizer, part(whole, "optimizer state") + 2 * copy) << nameOf(layout);
    if (layout.dp == 1) {
      EXPECT_EQ(parameters, part(whole, "parameters") + copy) << nameOf(layout);
    }
    // 1F1B holds fewer micro-batches than GPipe on the first stage.
    const std::vector<MemoryPart> one_f_one_b = meshParts(gptSpec(layout, "1f1b"))[0];
    EXPECT_LE(part(one_f_one_b, "activations"), part(ranks[0], "activations")) << nameOf(layout);
  }
}

}  // namespace
}  // namespace ringmaster
