// The GPT through the trainer on a CUDA device: byte-level text batches (int32 token windows) go to
// the device, and each strategy on one rank over NCCL trains with the per-token loss falling; the
// first steps' losses equal a run of the same spec on the host. Without a CUDA device the tests
// skip and say so.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/train_ranks.h"
#include "engine/comm/comm_harness.h"
#include "spec/job_spec.h"
#include "telemetry/codec.h"
#include "tensor/cuda/cuda_runtime.h"
#include "train/trainer.h"

namespace ringmaster {
namespace {

struct TrainedRun {
  TrainingResult result;
  std::vector<double> losses;  // per step
  std::vector<std::string> devices;
  int evals = 0;
};

// Trains `spec` as the one rank of `world` (nullptr: no communicator) and reads back its
// telemetry.
TrainedRun train(const JobSpec& spec, Communicator* world) {
  testing::RankTraining trained = testing::trainRank(spec, world);
  TrainedRun run{.result = trained.result};
  for (const TelemetryEvent& event : trained.events) {
    if (const auto* step = std::get_if<StepEvent>(&event.body)) run.losses.push_back(step->loss);
    if (const auto* hello = std::get_if<HelloEvent>(&event.body))
      run.devices.push_back(hello->device);
    if (std::get_if<EvalEvent>(&event.body) != nullptr) ++run.evals;
  }
  return run;
}

class GptTrainingOnCuda : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (cudaDeviceCount() == 0) {
      GTEST_SKIP() << "no CUDA device visible: "
                   << (cuda::kBuiltWithCuda
                           ? "the driver reports none (no GPU, no driver, or CUDA_VISIBLE_DEVICES)"
                           : "this build has no CUDA support (configure with the CUDA toolkit)");
    }
    corpus_ = std::filesystem::temp_directory_path() /
              fmt::format("ringmaster_gpt_cuda_corpus_{}.txt", getpid());
    std::ofstream out(corpus_);
    const char* words[] = {"the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "dog. "};
    for (int i = 0; i < 600; ++i) out << words[(i * 7 + i / 3) % 8];
  }
  void TearDown() override {
    if (!corpus_.empty()) std::filesystem::remove(corpus_);
  }

  // A two-block byte-level GPT on the corpus; the pipeline (which takes no evaluation) cuts it in
  // micro-batches: on one rank, two interleaved virtual stages (one stage would be no pipeline).
  JobSpec spec(const std::string& strategy, const char* device, int64_t steps) const {
    const bool pipeline = strategy == "pipeline";
    const std::string block =
        pipeline
            ? R"({"mesh": {"pp": 1}, "pp": {"schedule": "interleaved_1f1b", "virtual_stages": 2}})"
            : fmt::format(R"({{"kind": "{}"}})", strategy);
    SpecParseResult parsed = parseJobSpec(fmt::format(
        R"({{
      "name": "gpt-cuda", "strategy": {},
      "model": {{"kind": "gpt", "layers": 2, "vocab_size": 256, "context": 16, "heads": 2,
                 "dim": 32, "dropout": 0.1, "seed": 4}},
      "data": {{"kind": "text", "path": "{}", "val_fraction": 0.1}},
      "train": {{"steps": {}, "batch_size": 8, "micro_batches": {}, "eval_every": {},
                 "eval_batches": 2, "seed": 9}},
      "optimizer": {{"kind": "adamw", "lr": 0.01}},
      "device": "{}"}})",
        block, corpus_.string(), steps, pipeline ? 4 : 1, pipeline ? 0 : steps, device));
    EXPECT_TRUE(parsed.ok()) << parsed.describe();
    return *parsed.spec;
  }

  TrainedRun trainOneRank(const JobSpec& spec) const {
    if (!needsWorldCommunicator(spec)) return train(spec, nullptr);
    TrainedRun run;
    EXPECT_ALL_RANKS_OK(testing::runRanks(
        1, [&](Communicator& comm) { run = train(spec, &comm); }, {},
        spec.device == DeviceKind::kCuda ? "nccl" : "gloo"));
    return run;
  }

  std::filesystem::path corpus_;
};

TEST_P(GptTrainingOnCuda, LossFallsOnOneGpu) {
  const JobSpec cuda_spec = spec(GetParam(), "cuda", 40);
  const TrainedRun run = trainOneRank(cuda_spec);
  ASSERT_EQ(run.result.final_step, 40);
  ASSERT_EQ(run.devices, std::vector<std::string>{"cuda:0"});
  std::printf("  %s on cuda:0: loss %.4f at step 1, %.4f at step 40\n", GetParam(),
              run.result.first_loss, run.result.last_loss);
  // ln 256 = 5.55 at the start; the corpus is eight words in a fixed rotation.
  EXPECT_LT(run.result.last_loss, 0.6 * run.result.first_loss);
  EXPECT_EQ(run.evals, stageCount(cuda_spec) > 1 ? 0 : 1);
}

// The same spec on the host: same data order, weights and dropout masks, so the first steps'
// losses agree to within the kernels' rounding differences (tests/engine/nn/gpt_cuda_test.cpp's
// bound), compounded over three AdamW updates: 1e-3 relative.
TEST_P(GptTrainingOnCuda, FirstStepsEqualTheHost) {
  const TrainedRun on_cuda = trainOneRank(spec(GetParam(), "cuda", 3));
  const TrainedRun on_cpu = trainOneRank(spec(GetParam(), "cpu", 3));
  ASSERT_EQ(on_cuda.losses.size(), 3u);
  ASSERT_EQ(on_cpu.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const double error = std::abs(on_cuda.losses[i] - on_cpu.losses[i]) / on_cpu.losses[i];
    std::printf("  %s step %zu: cuda %.7f, host %.7f, relative error %.1e\n", GetParam(), i + 1,
                on_cuda.losses[i], on_cpu.losses[i], error);
    EXPECT_LE(error, i == 0 ? 2e-4 : 1e-3) << "step " << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, GptTrainingOnCuda,
                         ::testing::Values("single", "ddp", "fsdp", "pipeline"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace ringmaster
