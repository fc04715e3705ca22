// The training loop in process: the loss falls on teacher data, cancellation stops between steps,
// telemetry is a well-formed stream, and checkpoints round-trip model and optimizer state and
// seed a new run through model.init_checkpoint.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <unistd.h>
#include <cstdio>

#include <filesystem>

#include "checkpoint/safetensors.h"
#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "engine/comm/comm_harness.h"
#include "telemetry/codec.h"
#include "tensor/ops.h"
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

// Runs a trainer writing telemetry into a temporary file; returns the result and the events.
struct TrainingRun {
  TrainingResult result;
  std::vector<TelemetryEvent> events;
};

// With `world`, the run is that communicator's rank.
TrainingRun train(
    const JobSpec& spec, std::function<bool()> stop = [] { return false; },
    Communicator* world = nullptr) {
  std::FILE* stream = std::tmpfile();
  TrainingRun run;
  {
    const RankContext context{
        .rank = world ? world->rank() : 0, .world_size = world ? world->size() : 1, .host = "test"};
    TelemetryWriter telemetry(stream, context.rank);
    std::FILE* log = std::fopen("/dev/null", "w");
    Trainer trainer(spec, context, telemetry, std::move(stop), log, world);
    run.result = trainer.run();
    std::fclose(log);
  }
  std::rewind(stream);
  char line[1 << 16];
  while (std::fgets(line, sizeof line, stream) != nullptr) {
    DecodeResult decoded = decodeEvent(line);
    EXPECT_TRUE(decoded.ok()) << line;
    if (decoded.ok()) run.events.push_back(decoded.event());
  }
  std::fclose(stream);
  return run;
}

// The spec trained on `world` ranks as threads over loopback Gloo (or `backend`); each rank's run.
std::vector<TrainingRun> trainOnRanks(const JobSpec& spec, int world,
                                      const std::string& backend = "gloo") {
  std::vector<TrainingRun> runs(static_cast<size_t>(world));
  auto failures = testing::runRanks(
      world,
      [&](Communicator& comm) {
        runs[static_cast<size_t>(comm.rank())] = train(
            spec, [] { return false; }, &comm);
      },
      {}, backend);
  EXPECT_ALL_RANKS_OK(failures);
  return runs;
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
  EXPECT_TRUE(std::holds_alternative<HelloEvent>(run.events[0].body));
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
  spec.strategy.kind = StrategyKind::kDdp;
  spec.launch.hosts[0].ranks = 2;
  try {
    train(spec);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("strategy.kind: 'ddp' needs the world communicator"),
              std::string::npos)
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
  ddp.strategy.kind = StrategyKind::kDdp;
  ddp.launch.hosts[0].ranks = 3;
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
  single.strategy.kind = StrategyKind::kSingle;
  single.launch.hosts[0].ranks = 1;
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

TEST_F(TrainerCheckpoint, DdpResumesFromRankZerosCheckpoint) {
  JobSpec straight = smallSpec(6);
  straight.strategy.kind = StrategyKind::kDdp;
  straight.launch.hosts[0].ranks = 2;
  straight.checkpoint = CheckpointSpec{.dir = (dir_ / "straight").string()};
  trainOnRanks(straight, 2);
  trainInterruptedThenResumed(straight, dir_ / "resumed", 4, 2);
  EXPECT_EQ(checkpointWeights(dir_ / "resumed" / "step_00000006"),
            checkpointWeights(dir_ / "straight" / "step_00000006"));
}

TEST_F(TrainerCheckpoint, FsdpResumesFromItsShardsAndConsolidatesTheModel) {
  JobSpec straight = smallSpec(6);
  straight.strategy.kind = StrategyKind::kFsdp;
  straight.launch.hosts[0].ranks = 3;  // 32x64+64 and 64x10+10 values: both padded for 3 ranks
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

// A pipeline over 2 ranks (one Linear layer each) with 4 micro-batches: each rank's checkpoint
// holds its stage, equal to one process accumulating over the same micro-batches; sched events
// cover every action; resuming per stage continues exactly.
TEST_F(TrainerCheckpoint, PipelineStagesEqualAccumulationAndResumePerStage) {
  JobSpec straight = smallSpec(5);
  straight.model.dropout = 0.1;
  straight.optimizer.clip_grad_norm.reset();  // a float32 norm across stages vs a double one
  straight.strategy.kind = StrategyKind::kPipeline;
  straight.launch.hosts[0].ranks = 2;
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
  single.strategy.kind = StrategyKind::kSingle;
  single.launch.hosts[0].ranks = 1;
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

// Each distributed strategy with one rank on a CUDA device over NCCL: it trains and the loss falls.
class TrainerOnCuda : public ::testing::TestWithParam<StrategyKind> {};

TEST_P(TrainerOnCuda, StrategyRunsWithWorldSizeOne) {
  if (cudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible: the strategies run on CPU";
  JobSpec spec = smallSpec(100);
  spec.device = DeviceKind::kCuda;
  spec.strategy.kind = GetParam();
  spec.train.micro_batches = GetParam() == StrategyKind::kPipeline ? 4 : 1;
  std::vector<TrainingRun> runs = trainOnRanks(spec, 1, "nccl");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].result.final_step, 100);
  EXPECT_LT(runs[0].result.last_loss, 0.8 * runs[0].result.first_loss);
  for (const auto& e : runs[0].events)
    if (const auto* hello = std::get_if<HelloEvent>(&e.body)) EXPECT_EQ(hello->device, "cuda:0");
}

INSTANTIATE_TEST_SUITE_P(Strategies, TrainerOnCuda,
                         ::testing::Values(StrategyKind::kDdp, StrategyKind::kFsdp,
                                           StrategyKind::kPipeline),
                         [](const auto& info) { return std::string(toString(info.param)); });

}  // namespace
}  // namespace ringmaster
