// The residual_mlp model kind (engine/nn/residual_mlp.cpp), the proof that a model added through
// the registration table runs everywhere: its description matches what it builds, the spec parser
// takes it and its rules, and it trains under every strategy (world sizes 1 and 3) with the loss
// falling and the distributed weights equal to one process's. Its gradient check is in
// tests/engine/nn/gradient_check_test.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "checkpoint/safetensors.h"
#include "common/train_ranks.h"
#include "nn/layers.h"
#include "nn/model.h"
#include "spec/job_spec.h"
#include "train/trainer.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

ModelSpec residualSpec(bool layer_norm) {
  return ModelSpec{.kind = "residual_mlp",
                   .layers = {12, 16, 16, 16, 4},
                   .activation = ActivationKind::kGelu,
                   .layer_norm = layer_norm,
                   .seed = 7};
}

// ---------------------------------------------------------------------------------------------
// What it declares

TEST(ResidualMlp, DescriptionMatchesTheBuiltModel) {
  for (bool layer_norm : {false, true}) {
    SCOPED_TRACE(layer_norm ? "with LayerNorm" : "without LayerNorm");
    const ModelSpec spec = residualSpec(layer_norm);
    const ModelDescription description = describeModel(spec);
    auto model = buildModel(spec);
    std::vector<NamedParameter> built = model->namedParameters();
    ASSERT_EQ(description.parameters.size(), built.size());
    for (size_t i = 0; i < built.size(); ++i) {
      EXPECT_EQ(description.parameters[i].name, built[i].name);
      EXPECT_EQ(description.parameters[i].shape, built[i].parameter->value.shape())
          << built[i].name;
    }
    EXPECT_EQ(description.parameterCount(), model->parameterCount());
    EXPECT_EQ(model->blocks(), description.blocks);
    ASSERT_EQ(description.blocks.size(), 4u);  // input, block.0, block.1, output
    EXPECT_EQ(description.blocks[1].name, "block.0");
    EXPECT_EQ(description.inputShape(), (Shape{12}));
    EXPECT_EQ(description.outputShape(), (Shape{4}));
    // 2 per multiply-add: 12x16, two blocks of two 16x16, 16x4.
    EXPECT_EQ(description.flops_per_sample, 2 * (12 * 16 + 4 * 16 * 16 + 16 * 4));
    // Kept for backward, in floats: the input Linear's input; per block [LayerNorm's input, mean,
    // rstd], both Linears' inputs and the activation's; the output Linear's input.
    const int64_t per_block = (layer_norm ? 16 + 2 : 0) + 3 * 16;
    EXPECT_EQ(description.activation_bytes_per_sample, 4 * (12 + 2 * per_block + 16));
    int64_t blocks_sum = 0;
    for (const ModelBlock& block : description.blocks)
      blocks_sum += block.activation_bytes_per_sample;
    EXPECT_EQ(blocks_sum, description.activation_bytes_per_sample);
    // The block's input and output are its width, as the pipeline sends them.
    Tensor out = model->forward(Tensor::zeros({3, 12}));
    EXPECT_EQ(out.shape(), (Shape{3, 4}));
  }
}

TEST(ResidualMlp, NamesItsParametersAsNestedSequentials) {
  const ModelDescription d = describeModel(residualSpec(true));
  std::vector<std::string> names;
  for (const ParameterInfo& p : d.parameters) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.0.weight", "1.0.bias",
                                             "1.1.weight", "1.1.bias", "1.3.weight", "1.3.bias",
                                             "2.0.weight", "2.0.bias", "2.1.weight", "2.1.bias",
                                             "2.3.weight", "2.3.bias", "3.weight", "3.bias"}));
}

// ---------------------------------------------------------------------------------------------
// The spec

constexpr const char* kSpec = R"({
  "name": "residual", "strategy": {"kind": "single"},
  "model": {"kind": "residual_mlp", "layers": [12, 16, 16, 16, 4], "activation": "gelu",
            "layer_norm": true, "seed": 7},
  "data": {"kind": "synthetic", "samples": 1024, "features": 12, "classes": 4, "seed": 2},
  "train": {"steps": 1, "batch_size": 8},
  "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0},
  "device": "cpu"})";

TEST(ResidualMlp, TheSpecParserTakesItsKindAndItsRules) {
  SpecParseResult parsed = parseJobSpec(kSpec);
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  EXPECT_EQ(parsed.spec->model.kind, "residual_mlp");
  EXPECT_EQ(toJson(*parsed.spec)["model"]["kind"], "residual_mlp");

  nlohmann::json doc = nlohmann::json::parse(kSpec);
  doc["model"]["layers"] = {12, 16, 8, 16, 4};
  doc["model"]["dropout"] = 0.1;
  parsed = parseJobSpec(doc.dump());
  ASSERT_FALSE(parsed.ok());
  const std::string problems = parsed.describe();
  EXPECT_NE(problems.find("model.layers[2]: residual_mlp's hidden widths must all equal "
                          "model.layers[1] (16), got 8"),
            std::string::npos)
      << problems;
  EXPECT_NE(problems.find("model.dropout: residual_mlp has no dropout"), std::string::npos)
      << problems;

  doc = nlohmann::json::parse(kSpec);
  doc["model"]["kind"] = "cnn";
  parsed = parseJobSpec(doc.dump());
  EXPECT_NE(parsed.describe().find("model.kind: expected one of \"mlp\", \"residual_mlp\", "
                                   "\"gpt\", got \"cnn\""),
            std::string::npos)
      << parsed.describe();
}

// ---------------------------------------------------------------------------------------------
// Every strategy

class ResidualMlpStrategies
    : public ::testing::TestWithParam<std::tuple<std::string, int /*world*/>> {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / fmt::format("ringmaster_residual_{}_{}", getpid(),
                                                ::testing::UnitTest::GetInstance()->random_seed());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

constexpr int64_t kSteps = 30;

// The strategy's run and the one-process run that must reach the same weights: the triple batch
// for data parallelism, gradient accumulation over the micro-batches for the pipeline.
TEST_P(ResidualMlpStrategies, TrainsAndAgreesWithOneProcess) {
  const auto [strategy, world] = GetParam();
  JobSpec spec = *parseJobSpec(kSpec).spec;
  spec.train.steps = kSteps;
  spec.launch.hosts[0].ranks = world;
  applyLegacyStrategyKind(strategy, world, spec.strategy);
  // A pipeline on one rank: two interleaved virtual stages (one stage would be no pipeline).
  if (strategy == "pipeline" && world == 1)
    spec.strategy.pipeline = {.schedule = PipelineSchedule::kInterleaved1f1b, .virtual_stages = 2};
  spec.checkpoint =
      CheckpointSpec{.dir = (dir_ / "parallel").string(), .consolidate = strategy == "fsdp"};
  JobSpec single = spec;
  single.launch.hosts[0].ranks = 1;
  applyLegacyStrategyKind("single", worldSize(single), single.strategy);
  single.checkpoint = CheckpointSpec{.dir = (dir_ / "single").string()};
  if (strategy == "pipeline") {
    spec.train.batch_size = 16;
    spec.train.micro_batches = 4;
    single.train.batch_size = 4;
    single.train.grad_accum_steps = 4;
  } else {
    single.train.batch_size = spec.train.batch_size * world;
  }

  std::vector<TrainingResult> runs;
  for (const testing::RankTraining& run : strategy == "single"
                                              ? std::vector{testing::trainRank(spec)}
                                              : testing::trainOnRanks(spec, world))
    runs.push_back(run.result);
  const TrainingResult reference = testing::trainRank(single).result;
  EXPECT_LT(reference.last_loss, reference.first_loss);
  for (const TrainingResult& run : runs) {
    EXPECT_EQ(run.final_step, kSteps);
    if (strategy != "pipeline") {
      EXPECT_LT(run.last_loss, run.first_loss);
    }
  }
  const TrainingResult& last_stage = runs.back();
  EXPECT_LT(last_stage.last_loss, last_stage.first_loss);

  const std::string step = fmt::format("step_{:08}", kSteps);
  SafetensorsFile whole = loadSafetensors((dir_ / "single" / step / "model.safetensors").string());
  std::vector<fs::path> files;
  if (strategy == "pipeline") {
    for (int rank = 0; rank < world; ++rank) {
      files.push_back(dir_ / "parallel" / fmt::format("rank_{}_of_{}", rank, world) / step /
                      "model.safetensors");
    }
  } else {
    files.push_back(dir_ / "parallel" / step / "model.safetensors");
  }
  std::set<std::string> seen;
  for (const fs::path& file : files) {
    for (const auto& [name, tensor] : loadSafetensors(file.string()).tensors) {
      seen.insert(name);
      ASSERT_TRUE(whole.tensors.count(name)) << name;
      std::vector<float> a = tensor.toFloatVector(), b = whole.tensors.at(name).toFloatVector();
      ASSERT_EQ(a.size(), b.size()) << name;
      for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f) << name << " " << i;
    }
  }
  EXPECT_EQ(seen.size(), whole.tensors.size()) << "every parameter is in some checkpoint";
}

INSTANTIATE_TEST_SUITE_P(EveryStrategy, ResidualMlpStrategies,
                         ::testing::Values(std::tuple("single", 1), std::tuple("ddp", 1),
                                           std::tuple("ddp", 3), std::tuple("fsdp", 1),
                                           std::tuple("fsdp", 3), std::tuple("pipeline", 1),
                                           std::tuple("pipeline", 3)),
                         [](const auto& info) {
                           return fmt::format("{}_world{}", std::get<0>(info.param),
                                              std::get<1>(info.param));
                         });

}  // namespace
}  // namespace ringmaster
