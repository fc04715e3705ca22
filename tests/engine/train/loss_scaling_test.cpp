// fp16's dynamic loss scaling through the real training loop: a loss scale too large for fp16
// overflows the weight gradients (fp16 autocast rounds them through fp16), those steps are
// skipped with the parameters unchanged and the scale halved, then training proceeds; clean steps
// grow the scale; DDP, FSDP and a pipeline agree on every skip across ranks; a resumed run
// continues the scale and its growth count exactly. No hook: every overflow here is real.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "engine/comm/comm_harness.h"
#include "nn/mlp.h"
#include "optim/grad_scaler.h"
#include "telemetry/codec.h"
#include "tensor/cuda/cuda_runtime.h"
#include "train/trainer.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

// A small MLP in fp16 whose first steps overflow at a loss scale of 2^40.
JobSpec fp16Spec(int64_t steps, double init_scale, int64_t growth_interval = 2000) {
  SpecParseResult parsed = parseJobSpec(R"({
    "name": "loss-scaling-test", "strategy": {"kind": "single"},
    "model": {"kind": "mlp", "layers": [32, 64, 10], "seed": 5},
    "data": {"kind": "synthetic", "samples": 1024, "features": 32, "classes": 10, "seed": 2},
    "train": {"steps": 1, "batch_size": 16, "precision": "fp16"},
    "optimizer": {"kind": "adamw", "lr": 0.003, "clip_grad_norm": 5.0},
    "device": "cpu"})");
  EXPECT_TRUE(parsed.ok()) << parsed.describe();
  JobSpec spec = *parsed.spec;
  spec.train.steps = steps;
  spec.train.loss_scale = {.init = init_scale, .growth_interval = growth_interval};
  return spec;
}

std::vector<StepEvent> train(const JobSpec& spec, Communicator* world = nullptr) {
  std::FILE* stream = std::tmpfile();
  {
    const RankContext context{
        .rank = world ? world->rank() : 0, .world_size = world ? world->size() : 1, .host = "test"};
    TelemetryWriter telemetry(stream, context.rank);
    std::FILE* log = std::fopen("/dev/null", "w");
    Trainer trainer(
        spec, context, telemetry, [] { return false; }, log, world);
    trainer.run();
    std::fclose(log);
  }
  std::rewind(stream);
  std::vector<StepEvent> steps;
  char line[1 << 16];
  while (std::fgets(line, sizeof line, stream) != nullptr) {
    DecodeResult decoded = decodeEvent(line);
    EXPECT_TRUE(decoded.ok()) << line;
    if (!decoded.ok()) continue;
    if (const auto* step = std::get_if<StepEvent>(&decoded.event().body)) steps.push_back(*step);
  }
  std::fclose(stream);
  return steps;
}

std::vector<std::vector<StepEvent>> trainOnRanks(const JobSpec& spec, int world) {
  std::vector<std::vector<StepEvent>> runs(static_cast<size_t>(world));
  auto failures = testing::runRanks(world, [&](Communicator& comm) {
    runs[static_cast<size_t>(comm.rank())] = train(spec, &comm);
  });
  EXPECT_ALL_RANKS_OK(failures);
  return runs;
}

// The model's parameters, flattened: fresh from its seed, or from a checkpoint's model file.
std::vector<float> weights(const std::optional<fs::path>& checkpoint = std::nullopt) {
  auto model = buildMlp({.layers = {32, 64, 10}, .seed = 5});
  auto params = model->namedParameters();
  if (checkpoint) loadModelWeights(checkpoint->string(), params);
  std::vector<float> flat;
  for (auto& p : params) {
    auto v = p.parameter->value.toFloatVector();
    flat.insert(flat.end(), v.begin(), v.end());
  }
  return flat;
}

// The scale each step must have used, replaying GradScaler's rules over the steps' verdicts.
std::vector<double> replayedScales(const std::vector<StepEvent>& steps, double init,
                                   int64_t growth_interval) {
  GradScaler scaler({.init_scale = init, .growth_interval = growth_interval});
  std::vector<double> scales;
  for (const StepEvent& step : steps) {
    scales.push_back(scaler.scale());
    scaler.update(step.skipped.value_or(0) > 0);
  }
  return scales;
}

class LossScaling : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("ringmaster_loss_scaling_{}_{}",
                       ::testing::UnitTest::GetInstance()->random_seed(), getpid());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// Trains `spec` (fp16 from a scale of `init`, 40 steps) with a checkpoint after every step in
// `dir`, and checks that the first steps overflow and are skipped, the scale follows GradScaler's
// rules, a skipped step leaves the parameters as they were (the first as the model was built)
// and reports no gradient norm (nothing was clipped), and an update changes them. Returns the
// steps.
std::vector<StepEvent> expectOverflowsSkipped(JobSpec spec, double init, const fs::path& dir) {
  spec.train.steps = 40;
  spec.checkpoint = CheckpointSpec{.dir = dir.string(), .every_steps = 1};
  const std::vector<StepEvent> steps = train(spec);
  EXPECT_EQ(steps.size(), 40u);
  if (steps.size() != 40u) return steps;
  // Every step reports its scale and whether it was skipped; the first ones overflow for real.
  int64_t skipped_prefix = 0;
  while (skipped_prefix < 40 && steps[skipped_prefix].skipped == 1) ++skipped_prefix;
  EXPECT_GE(skipped_prefix, 1) << "a scale of " << init << " did not overflow fp16";
  EXPECT_LT(skipped_prefix, 30) << "training never proceeded";
  if (skipped_prefix == 0 || skipped_prefix >= 30) return steps;
  std::vector<double> scales;
  for (const StepEvent& step : steps) {
    EXPECT_TRUE(step.loss_scale && step.skipped) << step.step;
    scales.push_back(step.loss_scale.value_or(0));
  }
  EXPECT_EQ(scales, replayedScales(steps, init, 2000));
  EXPECT_EQ(scales[skipped_prefix], std::ldexp(init, -static_cast<int>(skipped_prefix)));
  std::vector<float> before = weights();
  for (const StepEvent& step : steps) {
    const std::vector<float> after = weights(checkpointStepDir(dir.string(), step.step));
    if (step.skipped == 1) {
      EXPECT_EQ(after, before) << "step " << step.step << " was skipped but changed the model";
      EXPECT_FALSE(step.grad_norm) << step.step;
    } else {
      EXPECT_NE(after, before) << "step " << step.step << " was not skipped but changed nothing";
      EXPECT_TRUE(step.grad_norm) << step.step;
    }
    before = after;
  }
  // And the loss falls once training proceeds.
  EXPECT_LT(steps.back().loss, steps[skipped_prefix].loss);
  return steps;
}

TEST_F(LossScaling, OverflowingStepsAreSkippedHalvingTheScaleUntilTrainingProceeds) {
  const double init = std::ldexp(1.0, 40);
  const std::vector<StepEvent> steps = expectOverflowsSkipped(fp16Spec(40, init), init, dir_);
  ASSERT_FALSE(steps.empty());
  // The loss is the true one, not scaled: near the fp32 run's first loss (the weights are the same
  // before the first update; fp16 rounds the products).
  JobSpec fp32 = fp16Spec(1, init);
  fp32.train.precision = Precision::kFp32;
  const std::vector<StepEvent> reference = train(fp32);
  ASSERT_EQ(reference.size(), 1u);
  EXPECT_NEAR(steps[0].loss, reference[0].loss, 1e-2 * reference[0].loss);
  EXPECT_FALSE(reference[0].loss_scale);  // fp16 only
  EXPECT_FALSE(reference[0].skipped);
  // bf16 has fp32's range: nothing to scale, nothing reported.
  JobSpec bf16 = fp32;
  bf16.train.precision = Precision::kBf16;
  const std::vector<StepEvent> unscaled = train(bf16);
  ASSERT_EQ(unscaled.size(), 1u);
  EXPECT_FALSE(unscaled[0].loss_scale);
  EXPECT_FALSE(unscaled[0].skipped);
}

// The same on a CUDA device: the unscale and the non-finite count run there (skips without one).
TEST_F(LossScaling, OnCudaOverflowingStepsAreSkippedAsOnTheHost) {
  if (cudaDeviceCount() == 0) {
    GTEST_SKIP() << "no CUDA device visible: "
                 << (cuda::kBuiltWithCuda
                         ? "the driver reports none (no GPU, no driver, or CUDA_VISIBLE_DEVICES)"
                         : "this build has no CUDA support (configure with the CUDA toolkit)");
  }
  const double init = std::ldexp(1.0, 40);
  JobSpec spec = fp16Spec(40, init);
  spec.device = DeviceKind::kCuda;
  expectOverflowsSkipped(spec, init, dir_);
}

TEST_F(LossScaling, TheScaleGrowsAfterEachGrowthIntervalOfCleanSteps) {
  const std::vector<StepEvent> steps = train(fp16Spec(7, 256.0, /*growth_interval=*/2));
  ASSERT_EQ(steps.size(), 7u);
  std::vector<double> scales;
  for (const StepEvent& step : steps) {
    EXPECT_EQ(step.skipped, 0) << step.step;
    scales.push_back(step.loss_scale.value_or(0));
  }
  EXPECT_EQ(scales, (std::vector<double>{256, 256, 512, 512, 1024, 1024, 2048}));
}

// With telemetry.every_steps > 1 an event counts the skipped steps since the previous one.
TEST_F(LossScaling, AnEventCountsTheStepsSkippedSinceThePreviousOne) {
  JobSpec spec = fp16Spec(6, std::ldexp(1.0, 40));
  spec.telemetry.every_steps = 3;
  const std::vector<StepEvent> every = train(spec);
  spec.telemetry.every_steps = 1;
  const std::vector<StepEvent> each = train(spec);
  ASSERT_EQ(each.size(), 6u);
  // Events at steps 1 (the first), 3 and 6.
  ASSERT_EQ(every.size(), 3u);
  EXPECT_EQ(every[0].skipped, each[0].skipped);
  EXPECT_EQ(every[1].skipped, *each[1].skipped + *each[2].skipped);
  EXPECT_EQ(every[2].skipped, *each[3].skipped + *each[4].skipped + *each[5].skipped);
  EXPECT_EQ(every[2].loss_scale, each[5].loss_scale);
}

// Every rank checks the gradients its optimizer updates (DDP: all of them; FSDP: its shard; a
// pipeline: its stage) and one all-reduce makes the verdict the same everywhere: all ranks skip
// the same steps with the same scale, and a skipped step changes no rank's parameters. The steps
// run from a scale of 2^24 down to the first that trains, so that the last skipped steps overflow
// only part of the model (some FSDP shards, some stages) and a rank deciding alone would step.
TEST_F(LossScaling, EveryStrategyAgreesOnSkippingAcrossRanks) {
  const double init = std::ldexp(1.0, 24);
  constexpr int64_t kSteps = 12;
  struct Case {
    std::string kind;
    int world;
  };
  for (const Case c :
       {Case{"ddp", 2}, Case{"ddp", 3}, Case{"fsdp", 2}, Case{"fsdp", 3}, Case{"pipeline", 2}}) {
    SCOPED_TRACE(fmt::format("{} on {} ranks", c.kind, c.world));
    JobSpec spec = fp16Spec(kSteps, init);
    spec.launch.hosts[0].ranks = c.world;
    applyLegacyStrategyKind(c.kind, c.world, spec.strategy);
    const fs::path dir = dir_ / fmt::format("{}_{}", c.kind, c.world);
    if (c.kind != "pipeline")
      spec.checkpoint = CheckpointSpec{.dir = dir.string(), .every_steps = 1, .consolidate = true};
    const std::vector<std::vector<StepEvent>> ranks = trainOnRanks(spec, c.world);
    ASSERT_EQ(ranks.size(), static_cast<size_t>(c.world));
    const std::vector<StepEvent>& steps = ranks.back();  // a pipeline's last stage has the loss
    ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps));
    for (int rank = 0; rank < c.world; ++rank) {
      ASSERT_EQ(ranks[rank].size(), static_cast<size_t>(kSteps));
      for (size_t i = 0; i < kSteps; ++i) {
        EXPECT_EQ(ranks[rank][i].skipped, steps[i].skipped) << "rank " << rank << " step " << i;
        EXPECT_EQ(ranks[rank][i].loss_scale, steps[i].loss_scale) << "rank " << rank;
      }
    }
    ASSERT_EQ(steps[0].skipped, 1) << "a scale of 2^24 did not overflow fp16";
    ASSERT_EQ(steps.back().skipped, 0) << "training never proceeded";
    std::vector<double> scales;
    for (const StepEvent& step : steps) scales.push_back(step.loss_scale.value_or(0));
    EXPECT_EQ(scales, replayedScales(steps, init, 2000));
    if (c.kind == "pipeline") continue;
    // DDP: rank 0's checkpoint; FSDP: the shards consolidated. A skipped step moved no shard; a
    // step that trained moved the model.
    std::vector<float> before = weights();
    for (const StepEvent& step : steps) {
      const std::vector<float> after = weights(checkpointStepDir(dir.string(), step.step));
      if (*step.skipped == 1)
        EXPECT_EQ(after, before) << "step " << step.step << " was skipped but changed the model";
      else
        EXPECT_NE(after, before) << "step " << step.step << " trained but changed nothing";
      before = after;
    }
  }
}

// A run stopped and resumed continues the scale and its count of clean steps: growth comes at the
// same step as in the uninterrupted run, and the weights are that run's bit for bit.
TEST_F(LossScaling, AResumedRunContinuesTheScaleAndItsGrowthCountExactly) {
  JobSpec straight = fp16Spec(8, 1024.0, /*growth_interval=*/3);
  straight.checkpoint = CheckpointSpec{.dir = (dir_ / "straight").string()};
  const std::vector<StepEvent> straight_steps = train(straight);
  ASSERT_EQ(straight_steps.size(), 8u);

  JobSpec interrupted = straight;
  interrupted.checkpoint = CheckpointSpec{.dir = (dir_ / "resumed").string(), .resume = true};
  interrupted.train.steps = 5;  // stops after two clean steps towards the next growth
  train(interrupted);
  interrupted.train.steps = 8;
  const std::vector<StepEvent> resumed = train(interrupted);
  ASSERT_EQ(resumed.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(resumed[i].step, straight_steps[5 + i].step);
    EXPECT_EQ(resumed[i].loss_scale, straight_steps[5 + i].loss_scale) << resumed[i].step;
    EXPECT_EQ(resumed[i].skipped, straight_steps[5 + i].skipped) << resumed[i].step;
  }
  EXPECT_EQ(straight_steps[6].loss_scale, 4096.0);  // grown at steps 4 and 7
  EXPECT_EQ(weights(checkpointStepDir((dir_ / "resumed").string(), 8)),
            weights(checkpointStepDir((dir_ / "straight").string(), 8)));
}

// The GPT in fp16 (every matrix product through fp16, the tied embedding and LM head, attention):
// at 2^30 its first steps overflow (down to 2^17 here) and are skipped on every rank, under one
// process and a pipeline whose first and last stages hold the tied weight's two copies; then the
// loss falls.
TEST_F(LossScaling, AGptInFp16SkipsItsOverflowingStepsAndTrains) {
  fs::create_directories(dir_);
  const fs::path corpus = dir_ / "corpus.txt";
  {
    std::ofstream out(corpus);
    const char* words[] = {"the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "dog. "};
    for (int i = 0; i < 400; ++i) out << words[(i * 7 + i / 3) % 8];
  }
  for (const auto& [strategy, ranks] : {std::pair{"single", 1}, {"pipeline", 2}}) {
    SCOPED_TRACE(strategy);
    SpecParseResult parsed = parseJobSpec(fmt::format(
        R"({{
      "name": "gpt-fp16", "strategy": {{"kind": "{}"}},
      "model": {{"kind": "gpt", "layers": 2, "vocab_size": 256, "context": 16, "heads": 2,
                 "dim": 32, "seed": 4}},
      "data": {{"kind": "text", "path": "{}", "val_fraction": 0.1}},
      "train": {{"steps": 30, "batch_size": 8, "seed": 9, "precision": "fp16",
                 "loss_scale": {{"init": 1073741824}}}},
      "optimizer": {{"kind": "adamw", "lr": 0.01}},
      "launch": {{"hosts": [{{"host": "localhost", "ranks": {}}}]}},
      "device": "cpu"}})",
        strategy, corpus.string(), ranks));
    ASSERT_TRUE(parsed.ok()) << parsed.describe();
    const std::vector<std::vector<StepEvent>> runs =
        ranks == 1 ? std::vector<std::vector<StepEvent>>{train(*parsed.spec)}
                   : trainOnRanks(*parsed.spec, ranks);
    const std::vector<StepEvent>& steps = runs.back();  // the last stage holds the loss
    ASSERT_EQ(steps.size(), 30u);
    for (const std::vector<StepEvent>& rank : runs) {
      for (size_t i = 0; i < 30; ++i) EXPECT_EQ(rank[i].skipped, steps[i].skipped) << i;
    }
    int64_t skipped_prefix = 0;
    while (skipped_prefix < 30 && steps[skipped_prefix].skipped == 1) ++skipped_prefix;
    ASSERT_GE(skipped_prefix, 1) << "a scale of 2^30 did not overflow fp16";
    ASSERT_LT(skipped_prefix, 20) << "training never proceeded";
    RecordProperty(fmt::format("{}_skipped_steps", strategy), static_cast<int>(skipped_prefix));
    std::vector<double> scales;
    for (const StepEvent& step : steps) scales.push_back(step.loss_scale.value_or(0));
    EXPECT_EQ(scales, replayedScales(steps, std::ldexp(1.0, 30), 2000));
    // From ln(256) = 5.5 nats per byte; the updates after the skips bring it well down.
    EXPECT_GT(steps[0].loss, 5.0);
    EXPECT_LT(steps.back().loss, steps[skipped_prefix].loss - 1.0)
        << "first trained " << steps[skipped_prefix].loss << ", last " << steps.back().loss;
  }
}

}  // namespace
}  // namespace ringmaster
