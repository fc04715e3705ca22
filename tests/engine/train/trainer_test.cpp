// The training loop in process: the loss falls on teacher data, cancellation stops between steps,
// telemetry is a well-formed stream, and checkpoints round-trip model and optimizer state and
// seed a new run through model.init_checkpoint.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

#include <filesystem>

#include "checkpoint/safetensors.h"
#include "checkpoint/training_checkpoint.h"
#include "common/train_ranks.h"
#include "core/error.h"
#include "engine/comm/comm_harness.h"
#include "nn/mlp.h"
#include "telemetry/codec.h"
#include "tensor/ops.h"
#include "train/throughput.h"
#include "train/trainer.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

JobSpec smallSpec(int64_t steps) {
  SpecParseResult parsed = parseJobSpec(R"({
    "name": "trainer-test", "strategy": {"kind": "single"},
    "model": {"kind": "mlp", "layers": [32, 64, 10], "seed": 5},
    "data": {"kind": "synthetic", "samples": 2048, "features": 32, "classes": 10, "seed": 2},
    "train": {"steps": 1, "batch_size": 32},
    "optimizer": {"kind": "adamw", "lr": 0.003, "clip_grad_norm": 5.0},
    "device": "cpu"})");
  EXPECT_TRUE(parsed.ok()) << parsed.describe();
  JobSpec spec = *parsed.spec;
  spec.train.steps = steps;
  return spec;
}

// A trainer's result and events (common/train_ranks.h), `stop` first as these tests give it.
using TrainingRun = testing::RankTraining;
using testing::trainOnRanks;

TrainingRun train(
    const JobSpec& spec, std::function<bool()> stop = [] { return false; },
    Communicator* world = nullptr) {
  return testing::trainRank(spec, world, std::move(stop));
}

// Trains `spec` (which has a checkpoint section) on `world` ranks with checkpoints in `dir` and
// checkpoint.resume on, first to step `stop_at` and then again to its own step count, so that the
// second run resumes where the first stopped; returns the second run's ranks.
std::vector<TrainingRun> trainInterruptedThenResumed(JobSpec spec, const fs::path& dir,
                                                     int64_t stop_at, int world) {
  const int64_t steps = spec.train.steps;
  spec.checkpoint->dir = dir.string();
  spec.checkpoint->resume = true;
  spec.train.steps = stop_at;
  trainOnRanks(spec, world);
  spec.train.steps = steps;
  return trainOnRanks(spec, world);
}

// Every parameter of a checkpoint's model (a step directory or its model file), flattened.
std::vector<float> checkpointWeights(const fs::path& path, float dropout = 0) {
  auto model = buildMlp({.layers = {32, 64, 10}, .dropout = dropout});
  auto params = model->namedParameters();
  loadModelWeights(path.string(), params);
  std::vector<float> flat;
  for (auto& p : params) {
    auto v = p.parameter->value.toFloatVector();
    flat.insert(flat.end(), v.begin(), v.end());
  }
  return flat;
}

TEST(Trainer, LossFallsOnTeacherData) {
  TrainingRun run = train(smallSpec(200));
  EXPECT_FALSE(run.result.cancelled);
  EXPECT_EQ(run.result.final_step, 200);
  EXPECT_LT(run.result.last_loss, 0.5 * run.result.first_loss)
      << run.result.first_loss << " -> " << run.result.last_loss;
}

TEST(Trainer, EmitsHelloThenStepsWithMemoryFigures) {
  JobSpec spec = smallSpec(6);
  spec.telemetry.every_steps = 2;
  TrainingRun run = train(spec);
  ASSERT_FALSE(run.events.empty());
  ASSERT_TRUE(std::holds_alternative<HelloEvent>(run.events[0].body));
  // Issue 34: the hello names the spec's mesh (one rank: 1 x 1 x 1) and the rank's place in it.
  const auto& hello = std::get<HelloEvent>(run.events[0].body);
  EXPECT_EQ(hello.mesh, (MeshAxes{.dp = 1, .tp = 1, .pp = 1}));
  EXPECT_EQ(hello.coords, (MeshAxes{.dp = 0, .tp = 0, .pp = 0}));
  std::vector<int64_t> steps;
  for (size_t i = 0; i < run.events.size(); ++i) {
    EXPECT_EQ(run.events[i].seq, i);
    if (const auto* step = std::get_if<StepEvent>(&run.events[i].body)) {
      steps.push_back(step->step);
      EXPECT_GT(step->mem_peak, 0u);
      EXPECT_GE(step->mem_peak, step->mem_allocated);
      EXPECT_GE(step->mem_reserved, step->mem_allocated);
      EXPECT_GT(step->device_mem_used, 0u);
      ASSERT_TRUE(step->grad_norm.has_value());  // clip_grad_norm is set
      EXPECT_GT(*step->grad_norm, 0.0);
      EXPECT_GE(step->step_ms, step->compute_ms - 1e-9);
    }
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 4, 6}));  // the first, every 2nd and the last
}

// The step events of a run, in order.
std::vector<StepEvent> stepEvents(const TrainingRun& run) {
  std::vector<StepEvent> steps;
  for (const auto& e : run.events)
    if (const auto* step = std::get_if<StepEvent>(&e.body)) steps.push_back(*step);
  return steps;
}

JobSpec cosineSpec(int64_t steps) {
  JobSpec spec = smallSpec(steps);
  spec.optimizer.schedule = {.kind = LrScheduleKind::kCosine, .warmup_steps = 2, .min_lr = 3e-4};
  return spec;
}

TEST(Trainer, EachStepUsesAndReportsTheSchedulesLearningRate) {
  const JobSpec spec = cosineSpec(8);
  TrainingRun run = train(spec);
  const std::vector<StepEvent> steps = stepEvents(run);
  ASSERT_EQ(steps.size(), 8u);
  for (const StepEvent& step : steps) {
    EXPECT_EQ(step.lr, static_cast<float>(scheduledLr(spec.optimizer.schedule, spec.optimizer.lr,
                                                      step.step, spec.train.steps)))
        << step.step;
  }
  // Warm-up from lr / 3, the peak at step 3, decaying towards min_lr after.
  EXPECT_FLOAT_EQ(steps[0].lr, 0.001f);
  EXPECT_FLOAT_EQ(steps[2].lr, 0.003f);
  EXPECT_GT(steps[6].lr, steps[7].lr);
  EXPECT_GT(steps[7].lr, 3e-4);
  // A constant schedule: optimizer.lr every step.
  for (const StepEvent& step : stepEvents(train(smallSpec(3))))
    EXPECT_EQ(step.lr, static_cast<float>(0.003));
}

TEST(Trainer, StepsReportTokensThroughputAndMfuOnlyWithAPeak) {
  JobSpec spec = smallSpec(3);
  // A classifier's sample is one token: tokens are samples; the host has no known peak.
  for (const StepEvent& step : stepEvents(train(spec))) {
    ASSERT_TRUE(step.tokens && step.tokens_per_s) << step.step;
    EXPECT_EQ(*step.tokens, 32);
    EXPECT_GT(*step.tokens_per_s, 0);
    EXPECT_NEAR(*step.tokens_per_s, 32 * 1000.0 / step.step_ms, 1e-6 * *step.tokens_per_s);
    EXPECT_FALSE(step.mfu) << "no peak FLOP/s is known for " << deviceName(Device::cpu());
  }
  // With train.peak_tflops: the model's training FLOPs per token x tokens/s over it.
  spec.train.peak_tflops = 0.05;
  const double flops_per_token = trainingFlopsPerToken(describeModel(spec.model), 1);
  EXPECT_EQ(flops_per_token, 3.0 * 2 * (32 * 64 + 64 * 10));
  for (const StepEvent& step : stepEvents(train(spec))) {
    ASSERT_TRUE(step.mfu && step.tokens_per_s) << step.step;
    EXPECT_GT(*step.mfu, 0);
    EXPECT_NEAR(*step.mfu, flops_per_token * *step.tokens_per_s / 0.05e12, 1e-12);
  }
}

// A language model's sample is `context` tokens: the step's tokens are samples x context, and its
// MFU uses the GPT's 6N + 12 * layers * context * dim FLOPs per token (PaLM appendix B; N without
// the position embedding).
TEST(Trainer, AGptStepCountsEveryTargetTokenAndItsFlops) {
  const fs::path text =
      fs::temp_directory_path() / ("ringmaster_tokens_" + std::to_string(getpid()) + ".txt");
  {
    std::FILE* file = std::fopen(text.c_str(), "w");
    for (int i = 0; i < 200; ++i) std::fputs("the quick brown fox jumps over the lazy dog. ", file);
    std::fclose(file);
  }
  SpecParseResult parsed = parseJobSpec(fmt::format(R"({{
    "name": "gpt-tokens", "strategy": {{"kind": "single"}},
    "model": {{"kind": "gpt", "vocab_size": 256, "context": 8, "layers": 2, "heads": 2, "dim": 16}},
    "data": {{"kind": "text", "path": "{}"}},
    "train": {{"steps": 2, "batch_size": 4, "peak_tflops": 0.01}},
    "optimizer": {{"kind": "adamw", "lr": 0.001}}, "device": "cpu"}})",
                                                    text.string()));
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  const std::vector<StepEvent> steps = stepEvents(train(*parsed.spec));
  fs::remove(text);
  const ModelDescription model = describeModel(parsed.spec->model);
  const double n = static_cast<double>(model.parameterCount() - 8 * 16);  // less wpe
  const double flops_per_token = 6 * n + 12.0 * 2 * 8 * 16;
  EXPECT_DOUBLE_EQ(trainingFlopsPerToken(model, 8), flops_per_token);
  ASSERT_EQ(steps.size(), 2u);
  for (const StepEvent& step : steps) {
    EXPECT_EQ(step.samples, 4);
    EXPECT_EQ(step.tokens, 4 * 8);
    ASSERT_TRUE(step.tokens_per_s && step.mfu);
    EXPECT_NEAR(*step.mfu, flops_per_token * *step.tokens_per_s / 0.01e12, 1e-9 * *step.mfu);
  }
}

TEST(Trainer, StopRequestEndsTheRunBetweenSteps) {
  int polls = 0;
  TrainingRun run = train(smallSpec(1000), [&] { return ++polls > 3; });
  EXPECT_TRUE(run.result.cancelled);
  EXPECT_EQ(run.result.final_step, 3);
}

TEST(Trainer, GradientAccumulationProcessesEveryMicroBatch) {
  JobSpec spec = smallSpec(2);
  spec.train.grad_accum_steps = 3;
  TrainingRun run = train(spec);
  for (const auto& e : run.events) {
    if (const auto* step = std::get_if<StepEvent>(&e.body)) {
      EXPECT_EQ(step->samples, 96);
    }
  }
}

TEST(Trainer, DistributedStrategiesNeedTheWorldCommunicator) {
  JobSpec spec = smallSpec(1);
  spec.launch.hosts[0].ranks = 2;
  applyLegacyStrategyKind("ddp", worldSize(spec), spec.strategy);
  try {
    train(spec);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("strategy: 'ddp' needs the world communicator"), std::string::npos)
        << e.message();
  }
}

// DDP through the trainer on 3 ranks (threads over loopback Gloo): rank 0's checkpoint equals a
// single process's with the 3-times batch (tolerance: see tests/engine/parallel/ddp_test.cpp), and
// every rank's step events carry the communication figures.
TEST(Trainer, DdpOnThreeRanksEqualsOneProcessWithTheTripleBatch) {
  const fs::path dir =
      fs::temp_directory_path() / ("ringmaster_ddp_trainer_" + std::to_string(getpid()));
  fs::remove_all(dir);
  JobSpec ddp = smallSpec(6);
  ddp.optimizer.kind = OptimizerKind::kSgd;
  ddp.optimizer.lr = 0.05;
  ddp.optimizer.momentum = 0.9;
  ddp.optimizer.weight_decay = 0;
  ddp.optimizer.clip_grad_norm.reset();
  ddp.launch.hosts[0].ranks = 3;
  applyLegacyStrategyKind("ddp", worldSize(ddp), ddp.strategy);
  ddp.train.batch_size = 8;
  ddp.checkpoint = CheckpointSpec{.dir = (dir / "ddp").string()};
  std::vector<StepEvent> steps;
  for (const TrainingRun& run : trainOnRanks(ddp, 3)) {
    EXPECT_EQ(run.result.final_step, 6);
    for (const auto& e : run.events)
      if (const auto* step = std::get_if<StepEvent>(&e.body)) steps.push_back(*step);
  }
  EXPECT_EQ(steps.size(), 3u * 6u);
  for (const StepEvent& step : steps) {
    EXPECT_GT(step.comm_ms, 0.0);
    EXPECT_GE(step.exposed_comm_ms, 0.0);
    EXPECT_NEAR(step.compute_ms + step.exposed_comm_ms, step.step_ms, 1e-6);
  }

  JobSpec single = ddp;
  single.launch.hosts[0].ranks = 1;
  applyLegacyStrategyKind("single", worldSize(single), single.strategy);
  single.train.batch_size = 24;
  single.checkpoint = CheckpointSpec{.dir = (dir / "single").string()};
  train(single);

  std::vector<float> a = checkpointWeights(dir / "ddp" / "step_00000006" / "model.safetensors");
  std::vector<float> b = checkpointWeights(dir / "single" / "step_00000006" / "model.safetensors");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 2e-6f) << "element " << i;
  fs::remove_all(dir);
}

class TrainerCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ringmaster_ckpt_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TrainerCheckpoint, SavesEveryNStepsAndAtTheEnd) {
  JobSpec spec = smallSpec(5);
  spec.checkpoint = CheckpointSpec{.dir = dir_.string(), .every_steps = 2};
  train(spec);
  for (const char* step : {"step_00000002", "step_00000004", "step_00000005"}) {
    EXPECT_TRUE(fs::exists(dir_ / step / "model.safetensors")) << step;
    EXPECT_TRUE(fs::exists(dir_ / step / "optimizer.safetensors")) << step;
  }
}

TEST_F(TrainerCheckpoint, ModelAndOptimizerStateRoundTrip) {
  auto model = buildMlp({.layers = {6, 5, 3}, .seed = 1});
  auto params = model->namedParameters();
  Adam adam(params, {.lr = 0.01f});
  for (auto& p : params) ops::fill(p.parameter->grad, 0.5f);
  adam.step();
  adam.step();
  const std::string saved = saveTrainingCheckpoint(dir_.string(), 2, params, adam);

  auto restored_model = buildMlp({.layers = {6, 5, 3}, .seed = 99});
  auto restored_params = restored_model->namedParameters();
  loadModelWeights(saved, restored_params);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].parameter->value.toFloatVector(),
              restored_params[i].parameter->value.toFloatVector())
        << params[i].name;
  }
  Adam restored_adam(restored_params, {.lr = 0.01f});
  EXPECT_EQ(loadOptimizerState(saved, restored_adam), 2);
  for (auto* ps : {&params, &restored_params}) {
    for (auto& p : *ps) ops::fill(p.parameter->grad, -0.25f);
  }
  adam.step();
  restored_adam.step();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].parameter->value.toFloatVector(),
              restored_params[i].parameter->value.toFloatVector());
  }
}

TEST_F(TrainerCheckpoint, LoadingIntoAnotherModelNamesTheTensor) {
  auto model = buildMlp({.layers = {6, 5, 3}});
  auto params = model->namedParameters();
  Sgd sgd(params, {.lr = 0.1f});
  const std::string saved = saveTrainingCheckpoint(dir_.string(), 1, params, sgd);
  auto other = buildMlp({.layers = {6, 4, 3}});
  try {
    loadModelWeights(saved, other->namedParameters());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_NE(e.message().find("'0.weight'"), std::string::npos) << e.message();
  }
}

TEST_F(TrainerCheckpoint, InitCheckpointStartsFromTrainedWeights) {
  JobSpec spec = smallSpec(100);
  spec.checkpoint = CheckpointSpec{.dir = dir_.string(), .every_steps = 0};
  TrainingRun trained = train(spec);

  JobSpec resumed = smallSpec(1);
  resumed.model.init_checkpoint = (dir_ / "step_00000100" / "model.safetensors").string();
  TrainingRun from_checkpoint = train(resumed);
  TrainingRun from_scratch = train(smallSpec(1));
  // The same first batch: trained weights do much better on it than the seed's initial ones.
  EXPECT_LT(from_checkpoint.result.first_loss, 0.75 * from_scratch.result.first_loss);
  EXPECT_LT(from_checkpoint.result.first_loss, trained.result.first_loss);
}

TEST_F(TrainerCheckpoint, ResumingContinuesStepsDataOrderAndDropoutExactly) {
  JobSpec straight = smallSpec(8);
  straight.model.dropout = 0.1;  // the dropout streams must continue where they were
  straight.train.grad_accum_steps = 2;
  straight.checkpoint = CheckpointSpec{.dir = (dir_ / "straight").string()};
  train(straight);

  JobSpec interrupted = straight;
  interrupted.checkpoint = CheckpointSpec{.dir = (dir_ / "resumed").string(), .resume = true};
  interrupted.train.steps = 5;
  EXPECT_EQ(train(interrupted).result.final_step, 5);
  interrupted.train.steps = 8;
  TrainingRun resumed = train(interrupted);
  EXPECT_EQ(resumed.result.final_step, 8);
  std::vector<int64_t> steps;
  for (const auto& e : resumed.events)
    if (const auto* step = std::get_if<StepEvent>(&e.body)) steps.push_back(step->step);
  EXPECT_EQ(steps, (std::vector<int64_t>{6, 7, 8}));
  // The same arithmetic in the same order: bit for bit.
  EXPECT_EQ(checkpointWeights(dir_ / "resumed" / "step_00000008", 0.1f),
            checkpointWeights(dir_ / "straight" / "step_00000008", 0.1f));
  // Resuming a finished run trains nothing and keeps its step.
  EXPECT_EQ(train(interrupted).result.final_step, 8);
}

// A run stopped and resumed with the same spec: the schedule continues at the resumed step, and
// the weights are the uninterrupted run's bit for bit.
TEST_F(TrainerCheckpoint, ResumingContinuesTheLearningRateSchedule) {
  JobSpec straight = cosineSpec(8);
  straight.checkpoint = CheckpointSpec{.dir = (dir_ / "straight").string()};
  const std::vector<StepEvent> straight_steps = stepEvents(train(straight));

  JobSpec interrupted = straight;
  interrupted.checkpoint = CheckpointSpec{.dir = (dir_ / "resumed").string(), .resume = true};
  int polls = 0;
  EXPECT_EQ(train(interrupted, [&] { return ++polls > 5; }).result.final_step, 5);
  const std::vector<StepEvent> resumed_steps = stepEvents(train(interrupted));
  ASSERT_EQ(resumed_steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(resumed_steps[i].step, straight_steps[5 + i].step);
    EXPECT_EQ(resumed_steps[i].lr, straight_steps[5 + i].lr) << resumed_steps[i].step;
  }
  EXPECT_EQ(checkpointWeights(dir_ / "resumed" / "step_00000008"),
            checkpointWeights(dir_ / "straight" / "step_00000008"));
}

TEST_F(TrainerCheckpoint, DdpResumesFromRankZerosCheckpoint) {
  JobSpec straight = smallSpec(6);
  straight.launch.hosts[0].ranks = 2;
  applyLegacyStrategyKind("ddp", worldSize(straight), straight.strategy);
  straight.checkpoint = CheckpointSpec{.dir = (dir_ / "straight").string()};
  trainOnRanks(straight, 2);
  trainInterruptedThenResumed(straight, dir_ / "resumed", 4, 2);
  EXPECT_EQ(checkpointWeights(dir_ / "resumed" / "step_00000006"),
            checkpointWeights(dir_ / "straight" / "step_00000006"));
}

TEST_F(TrainerCheckpoint, FsdpResumesFromItsShardsAndConsolidatesTheModel) {
  JobSpec straight = smallSpec(6);
  straight.launch.hosts[0].ranks = 3;  // 32x64+64 and 64x10+10 values: both padded for 3 ranks
  applyLegacyStrategyKind("fsdp", worldSize(straight), straight.strategy);
  straight.checkpoint = CheckpointSpec{.dir = (dir_ / "straight").string(), .consolidate = true};
  trainOnRanks(straight, 3);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(fs::exists(dir_ / "straight" / fmt::format("rank_{}_of_3", rank) / "step_00000006" /
                           "optimizer.safetensors"));
  }
  std::vector<TrainingRun> resumed = trainInterruptedThenResumed(straight, dir_ / "resumed", 4, 3);
  for (const TrainingRun& run : resumed) EXPECT_EQ(run.result.final_step, 6);
  // The consolidated file is the plain model's state_dict, and resuming changed nothing.
  EXPECT_EQ(checkpointWeights(dir_ / "resumed" / "step_00000006"),
            checkpointWeights(dir_ / "straight" / "step_00000006"));
}

// Issue 16, finding 11: a checkpoint directory that cannot be written is refused before the first
// step (not at the first save, which with every_steps 0 comes after all the training), naming the
// directory and the system's reason. Paths under a regular file and in /proc stop root too.
TEST_F(TrainerCheckpoint, UnwritableDirectoryIsRefusedBeforeTheFirstStep) {
  fs::create_directories(dir_);
  const fs::path file = dir_ / "a-file";
  std::FILE* created = std::fopen(file.c_str(), "w");
  ASSERT_NE(created, nullptr);
  std::fclose(created);
  std::vector<std::string> unwritable{(file / "checkpoints").string(),
                                      "/proc/ringmaster-checkpoints"};
  if (geteuid() != 0) {  // the mode bits stop only a user who is not root
    fs::create_directories(dir_ / "read-only");
    fs::permissions(dir_ / "read-only", fs::perms::owner_read | fs::perms::owner_exec);
    unwritable.push_back((dir_ / "read-only" / "checkpoints").string());
  }
  for (const std::string& dir : unwritable) {
    JobSpec spec = smallSpec(3);
    spec.checkpoint = CheckpointSpec{.dir = dir, .every_steps = 0};
    std::atomic<int> steps_begun = 0;  // the stop check runs once before each step
    const auto stop = [&] { return ++steps_begun, false; };
    try {
      train(spec, stop);
      ADD_FAILURE() << dir << ": expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kIo) << e.message();
      EXPECT_NE(e.message().find(dir), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("checkpoint.dir"), std::string::npos) << e.message();
    }
    // FSDP: every rank writes its own shard, so every rank checks.
    applyLegacyStrategyKind("fsdp", 2, spec.strategy);
    auto failures = testing::runRanks(2, [&](Communicator& comm) { train(spec, stop, &comm); });
    ASSERT_EQ(failures.size(), 2u) << dir;
    for (const auto& failure : failures) {
      EXPECT_NE(failure.message.find(dir + "/rank_" + std::to_string(failure.rank) + "_of_2"),
                std::string::npos)
          << failure.message;
    }
    EXPECT_EQ(steps_begun, 0) << dir;
  }
  if (fs::exists(dir_ / "read-only")) fs::permissions(dir_ / "read-only", fs::perms::owner_all);
}

// Flips one byte in the middle of a file's tensor data (the header and sizes stay valid).
void flipDataByte(const fs::path& file) {
  std::FILE* f = std::fopen(file.c_str(), "r+b");
  ASSERT_NE(f, nullptr) << file;
  std::fseek(f, -64, SEEK_END);
  const int byte = std::fgetc(f);
  std::fseek(f, -64, SEEK_END);
  std::fputc(byte ^ 0x40, f);
  std::fclose(f);
}

// The warnings a run logged (telemetry log events at warn level), and the rest of its log lines.
std::vector<std::string> logLines(const TrainingRun& run, LogLevel level) {
  std::vector<std::string> lines;
  for (const auto& e : run.events) {
    if (const auto* log = std::get_if<LogEvent>(&e.body); log && log->level == level)
      lines.push_back(log->message);
  }
  return lines;
}

// Issue 16, finding 13: resuming walks the checkpoints newest first, skips an incomplete one (a
// file missing) and corrupt ones (a flipped data byte, a truncated file, another model's
// shapes), warns naming each and why, and continues from the newest good one, exactly as if
// nothing had been skipped.
TEST_F(TrainerCheckpoint, ResumeFallsBackToTheNewestGoodCheckpoint) {
  JobSpec straight = smallSpec(8);
  straight.checkpoint = CheckpointSpec{.dir = (dir_ / "straight").string()};
  train(straight);

  JobSpec spec = smallSpec(6);
  spec.checkpoint = CheckpointSpec{.dir = (dir_ / "resumed").string(), .every_steps = 1};
  train(spec);
  const fs::path dir = dir_ / "resumed";
  fs::remove(dir / "step_00000006" / "optimizer.safetensors");  // killed while writing
  flipDataByte(dir / "step_00000005" / "model.safetensors");
  fs::resize_file(dir / "step_00000004" / "optimizer.safetensors", 100);
  {  // step 3 holds another model's weights
    auto other = buildMlp({.layers = {32, 16, 10}});
    Sgd sgd(other->namedParameters(), {.lr = 0.1f});
    fs::remove_all(dir / "step_00000003");
    saveTrainingCheckpoint(dir.string(), 3, other->namedParameters(), sgd);
  }

  spec.checkpoint->resume = true;
  spec.train.steps = 8;
  TrainingRun resumed = train(spec);
  std::vector<int64_t> steps;
  for (const auto& e : resumed.events)
    if (const auto* step = std::get_if<StepEvent>(&e.body)) steps.push_back(step->step);
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(checkpointWeights(dir / "step_00000008"),
            checkpointWeights(dir_ / "straight" / "step_00000008"));

  const std::vector<std::string> warnings = logLines(resumed, LogLevel::kWarn);
  ASSERT_EQ(warnings.size(), 4u) << fmt::format("{}", fmt::join(warnings, "\n"));
  const std::vector<std::pair<std::string, std::string>> expected{
      {"step_00000006", "optimizer.safetensors"},
      {"step_00000005", "checksum"},
      {"step_00000004", "truncated"},
      {"step_00000003", "'0.weight'"}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NE(warnings[i].find(expected[i].first), std::string::npos) << warnings[i];
    EXPECT_NE(warnings[i].find(expected[i].second), std::string::npos) << warnings[i];
  }
  const std::vector<std::string> info = logLines(resumed, LogLevel::kInfo);
  EXPECT_TRUE(std::any_of(info.begin(), info.end(), [](const std::string& line) {
    return line.find("resuming from") != std::string::npos &&
           line.find("step_00000002") != std::string::npos &&
           line.find("skipped 4") != std::string::npos;
  })) << fmt::format("{}", fmt::join(info, "\n"));
}

// With checkpoints present but none usable, the run fails listing every one tried rather than
// silently training from the start; with only incomplete ones (killed during the first save)
// there was never a checkpoint to lose, and it starts afresh with a warning.
TEST_F(TrainerCheckpoint, ResumeWithNoGoodCheckpointFailsListingEachTried) {
  JobSpec spec = smallSpec(2);
  spec.checkpoint = CheckpointSpec{.dir = dir_.string(), .every_steps = 1};
  train(spec);
  flipDataByte(dir_ / "step_00000002" / "optimizer.safetensors");
  fs::resize_file(dir_ / "step_00000001" / "model.safetensors", 3);
  spec.checkpoint->resume = true;
  spec.train.steps = 4;
  try {
    train(spec);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    for (const char* part : {"step_00000002", "checksum", "step_00000001", "truncated"})
      EXPECT_NE(e.message().find(part), std::string::npos) << part << " in " << e.message();
  }

  fs::remove_all(dir_);
  spec.checkpoint->resume = false;
  spec.train.steps = 1;
  train(spec);
  fs::remove(dir_ / "step_00000001" / "model.safetensors");
  spec.checkpoint->resume = true;
  spec.train.steps = 2;
  TrainingRun fresh = train(spec);
  EXPECT_EQ(fresh.result.final_step, 2);
  EXPECT_EQ(fresh.result.first_loss, train(smallSpec(1)).result.first_loss) << "from step 1";
  const std::vector<std::string> warnings = logLines(fresh, LogLevel::kWarn);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("step_00000001"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("starting from step 1"), std::string::npos) << warnings[1];
}

// FSDP keeps a checkpoint per rank: the ranks agree on the newest step every rank holds intact.
TEST_F(TrainerCheckpoint, FsdpRanksResumeFromTheNewestStepGoodOnEveryRank) {
  JobSpec straight = smallSpec(6);
  straight.launch.hosts[0].ranks = 2;
  applyLegacyStrategyKind("fsdp", worldSize(straight), straight.strategy);
  straight.checkpoint = CheckpointSpec{.dir = (dir_ / "straight").string(), .consolidate = true};
  trainOnRanks(straight, 2);

  JobSpec spec = straight;
  spec.checkpoint =
      CheckpointSpec{.dir = (dir_ / "resumed").string(), .every_steps = 1, .consolidate = true};
  spec.train.steps = 4;
  trainOnRanks(spec, 2);
  flipDataByte(dir_ / "resumed" / "rank_1_of_2" / "step_00000004" / "model.safetensors");
  flipDataByte(dir_ / "resumed" / "rank_0_of_2" / "step_00000003" / "optimizer.safetensors");
  spec.checkpoint->resume = true;
  spec.train.steps = 6;
  std::vector<TrainingRun> resumed = trainOnRanks(spec, 2);
  for (const TrainingRun& run : resumed) {
    std::vector<int64_t> steps;
    for (const auto& e : run.events)
      if (const auto* step = std::get_if<StepEvent>(&e.body)) steps.push_back(step->step);
    EXPECT_EQ(steps, (std::vector<int64_t>{3, 4, 5, 6}));
  }
  EXPECT_EQ(checkpointWeights(dir_ / "resumed" / "step_00000006"),
            checkpointWeights(dir_ / "straight" / "step_00000006"));
}

// A pipeline over 2 ranks (one Linear layer each) with 4 micro-batches: each rank's checkpoint
// holds its stage, equal to one process accumulating over the same micro-batches; sched events
// cover every action; resuming per stage continues exactly.
TEST_F(TrainerCheckpoint, PipelineStagesEqualAccumulationAndResumePerStage) {
  JobSpec straight = smallSpec(5);
  straight.model.dropout = 0.1;
  straight.optimizer.clip_grad_norm.reset();  // a float32 norm across stages vs a double one
  straight.launch.hosts[0].ranks = 2;
  applyLegacyStrategyKind("pipeline", worldSize(straight), straight.strategy);
  straight.train.batch_size = 16;
  straight.train.micro_batches = 4;
  straight.checkpoint = CheckpointSpec{.dir = (dir_ / "straight").string()};
  std::vector<TrainingRun> runs = trainOnRanks(straight, 2);
  for (const TrainingRun& run : runs) {
    int sched = 0;
    for (const auto& e : run.events) sched += std::holds_alternative<SchedEvent>(e.body);
    EXPECT_EQ(sched, 5 * 4 * 2) << "an F and a B per micro-batch per step";
    EXPECT_EQ(run.result.last_loss, runs[1].result.last_loss) << "the last stage's loss";
  }

  JobSpec single = straight;
  single.launch.hosts[0].ranks = 1;
  applyLegacyStrategyKind("single", worldSize(single), single.strategy);
  single.train.batch_size = 4;
  single.train.micro_batches = 1;
  single.train.grad_accum_steps = 4;
  single.checkpoint = CheckpointSpec{.dir = (dir_ / "single").string()};
  TrainingRun reference = train(single);
  EXPECT_NEAR(runs[0].result.last_loss, reference.result.last_loss, 1e-5);
  SafetensorsFile whole =
      loadSafetensors((dir_ / "single" / "step_00000005" / "model.safetensors").string());
  for (int rank = 0; rank < 2; ++rank) {
    SafetensorsFile stage = loadSafetensors((dir_ / "straight" / fmt::format("rank_{}_of_2", rank) /
                                             "step_00000005" / "model.safetensors")
                                                .string());
    EXPECT_EQ(stage.tensors.size(), 2u) << "rank " << rank << " holds one Linear layer";
    for (const auto& [name, tensor] : stage.tensors) {
      std::vector<float> a = tensor.toFloatVector(), b = whole.tensors.at(name).toFloatVector();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 2e-6f) << name << " " << i;
    }
  }

  trainInterruptedThenResumed(straight, dir_ / "resumed", 3, 2);
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path file = fs::path(fmt::format("rank_{}_of_2", rank)) / "step_00000005";
    SafetensorsFile a = loadSafetensors((dir_ / "resumed" / file / "model.safetensors").string());
    SafetensorsFile b = loadSafetensors((dir_ / "straight" / file / "model.safetensors").string());
    for (const auto& [name, tensor] : a.tensors)
      EXPECT_EQ(tensor.toFloatVector(), b.tensors.at(name).toFloatVector()) << name;
  }
}

// Issue 33: the trainer's own custom metric. Each step event of a pipeline stage carries its wait
// for the other stage (kPipelineWaitMetric), the part of the step that is neither compute nor
// communication, so the three add up to the step's time; a single process reports none.
TEST(Trainer, APipelineStageReportsItsWaitAsACustomMetric) {
  JobSpec spec = smallSpec(3);
  spec.optimizer.clip_grad_norm.reset();
  spec.launch.hosts[0].ranks = 2;
  applyLegacyStrategyKind("pipeline", worldSize(spec), spec.strategy);
  spec.train.batch_size = 16;
  spec.train.micro_batches = 4;
  for (const TrainingRun& run : trainOnRanks(spec, 2)) {
    int steps = 0;
    for (const auto& e : run.events) {
      const auto* step = std::get_if<StepEvent>(&e.body);
      if (step == nullptr) continue;
      ++steps;
      ASSERT_EQ(step->metrics.size(), 1u);
      const double wait_ms = step->metrics.at(kPipelineWaitMetric);
      EXPECT_GE(wait_ms, 0);
      if (step->compute_ms > 0) {
        EXPECT_NEAR(step->compute_ms + step->exposed_comm_ms + wait_ms, step->step_ms,
                    1e-9 * step->step_ms);
      }
    }
    EXPECT_EQ(steps, 3);
  }
  for (const auto& e : train(smallSpec(2)).events) {
    if (const auto* step = std::get_if<StepEvent>(&e.body)) {
      EXPECT_TRUE(step->metrics.empty());
    }
  }
}

// Each distributed strategy with one rank on a CUDA device over NCCL: it trains and the loss falls.
class TrainerOnCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainerOnCuda, StrategyRunsWithWorldSizeOne) {
  if (cudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible: the strategies run on CPU";
  JobSpec spec = smallSpec(100);
  spec.device = DeviceKind::kCuda;
  applyLegacyStrategyKind(GetParam(), 1, spec.strategy);
  spec.train.micro_batches = GetParam() == "pipeline" ? 4 : 1;
  std::vector<TrainingRun> runs = trainOnRanks(spec, 1, "nccl");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].result.final_step, 100);
  EXPECT_LT(runs[0].result.last_loss, 0.8 * runs[0].result.first_loss);
  for (const auto& e : runs[0].events)
    if (const auto* hello = std::get_if<HelloEvent>(&e.body)) EXPECT_EQ(hello->device, "cuda:0");
}

INSTANTIATE_TEST_SUITE_P(Strategies, TrainerOnCuda, ::testing::Values("ddp", "fsdp", "pipeline"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ringmaster
