// Checkpoints across mesh layouts through the trainer (ranks as threads over loopback Gloo): a
// consolidated checkpoint written by one dp x tp x pp layout resumes in another and continues the
// loss the first layout went on to; without a consolidated one the resume says why it cannot; and
// the consolidated file of a tensor- and pipeline-parallel run loads into a Hugging Face GPT-2
// layout by name in PyTorch with the engine's logits (consolidated_gpt2.py).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "checkpoint/safetensors.h"
#include "checkpoint/training_checkpoint.h"
#include "common/test_paths.h"
#include "common/train_ranks.h"
#include "core/error.h"
#include "nn/gpt.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

class MeshCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("ringmaster_mesh_checkpoint_{}", getpid());
    fs::create_directories(dir_);
    std::ofstream out(dir_ / "corpus.txt");
    const char* words[] = {"the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "dog. "};
    for (int i = 0; i < 400; ++i) out << words[(i * 7 + i / 3) % 8];
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A byte-level GPT on the corpus, SGD without momentum (no optimizer state: what a resume in
  // another layout starts afresh carries nothing), the same global batch of 8 on every layout.
  JobSpec spec(int dp, int tp, int pp, const std::string& data_parallel, int steps) const {
    SpecParseResult parsed = parseJobSpec(fmt::format(
        R"({{
      "name": "mesh-checkpoint",
      "strategy": {{"mesh": {{"dp": {}, "tp": {}, "pp": {}}}, "dp": {{"kind": "{}"}}}},
      "model": {{"kind": "gpt", "layers": 2, "vocab_size": 256, "context": 16, "heads": 4,
                 "dim": 32, "seed": 4}},
      "data": {{"kind": "text", "path": "{}"}},
      "train": {{"steps": {}, "batch_size": {}, "micro_batches": {}, "seed": 9}},
      "optimizer": {{"kind": "sgd", "lr": 0.5}},
      "checkpoint": {{"dir": "{}", "consolidate": true}},
      "launch": {{"hosts": [{{"host": "localhost", "ranks": {}}}]}},
      "device": "cpu"}})",
        dp, tp, pp, data_parallel, (dir_ / "corpus.txt").string(), steps, 8 / dp, pp,
        (dir_ / "checkpoints").string(), dp * tp * pp));
    EXPECT_TRUE(parsed.ok()) << parsed.describe();
    return *parsed.spec;
  }

  fs::path dir_;
};

// Each step's loss over the whole global batch: the mean of every rank's (each reports its
// replica's, and every replica has as many ranks).
std::map<int64_t, double> stepLosses(const std::vector<testing::RankTraining>& runs) {
  std::map<int64_t, double> losses;
  for (const testing::RankTraining& run : runs)
    for (const TelemetryEvent& event : run.events)
      if (const auto* step = std::get_if<StepEvent>(&event.body))
        losses[step->step] += step->loss / static_cast<double>(runs.size());
  return losses;
}

std::vector<std::string> warnings(const std::vector<testing::RankTraining>& runs) {
  std::vector<std::string> out;
  for (const testing::RankTraining& run : runs)
    for (const TelemetryEvent& event : run.events)
      if (const auto* log = std::get_if<LogEvent>(&event.body))
        if (log->level == LogLevel::kWarn) out.push_back(log->message);
  return out;
}

TEST_F(MeshCheckpoint, AConsolidatedCheckpointResumesInAnotherLayoutAndContinuesTheLoss) {
  // The reference: 2 x 1 x 2 with FSDP, four steps straight.
  JobSpec straight = spec(2, 1, 2, "fsdp", 4);
  straight.checkpoint->dir = (dir_ / "straight").string();
  const std::map<int64_t, double> reference = stepLosses(testing::trainOnRanks(straight, 4));
  ASSERT_EQ(reference.size(), 4u);

  // The same layout stopped after two steps (its consolidated checkpoint at step 2) ...
  JobSpec first = spec(2, 1, 2, "fsdp", 2);
  testing::trainOnRanks(first, 4);
  ASSERT_TRUE(fs::exists(dir_ / "checkpoints" / "step_00000002" / "model.safetensors"));
  // ... resumed as 1 x 2 x 2 with DDP: tensor-parallel slices and other stages of the same weights.
  JobSpec second = spec(1, 2, 2, "ddp", 4);
  second.checkpoint->resume = true;
  const std::vector<testing::RankTraining> resumed = testing::trainOnRanks(second, 4);
  const std::map<int64_t, double> losses = stepLosses(resumed);
  ASSERT_EQ(losses.size(), 2u) << "steps 3 and 4 only";
  // float32 sums in another order (tp's slices, the stages' micro-batches, FSDP's shards) differ
  // by a few ulp per step; a wrong slice or a restart from step 1 moves the loss by 1e-2 and more.
  for (const auto& [step, loss] : losses) EXPECT_NEAR(loss, reference.at(step), 1e-4) << step;
  const std::vector<std::string> warned = warnings(resumed);
  ASSERT_EQ(warned.size(), 1u) << "rank 0 says it once";
  EXPECT_NE(warned[0].find("dp 2 x tp 1 x pp 2, dp as fsdp"), std::string::npos) << warned[0];
  EXPECT_NE(warned[0].find("optimizer state starts afresh"), std::string::npos) << warned[0];
}

TEST_F(MeshCheckpoint, AnotherLayoutWithoutAConsolidatedCheckpointIsRefusedSayingWhy) {
  JobSpec first = spec(2, 1, 2, "fsdp", 2);
  first.checkpoint->consolidate = false;
  testing::trainOnRanks(first, 4);
  // One process: the refusal comes before any communication.
  JobSpec one = spec(1, 1, 1, "ddp", 4);
  one.checkpoint->resume = true;
  try {
    testing::trainRank(one);
    ADD_FAILURE() << "expected the resume to be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only a consolidated checkpoint"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("written by layout dp 2 x tp 1 x pp 2, dp as fsdp"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(MeshCheckpoint, TheConsolidatedFileLoadsIntoAHuggingFaceGpt2LayoutInPyTorch) {
  const std::string probe =
      fmt::format("{} -c 'import torch' 2>/dev/null", RINGMASTER_PYTHON_TORCH);
  ASSERT_EQ(std::system(probe.c_str()), 0)
      << RINGMASTER_PYTHON_TORCH << " cannot import torch: install python3-torch";
  const JobSpec run = spec(1, 2, 2, "ddp", 2);
  testing::trainOnRanks(run, 4);
  const std::string consolidated =
      (dir_ / "checkpoints" / "step_00000002" / "model.safetensors").string();

  // The engine's logits for a batch, from one process loaded with the file.
  auto model = buildGpt(gptConfig(run.model));
  loadModelWeights(consolidated, model->namedParameters());
  std::vector<int32_t> ids;
  for (int i = 0; i < 2 * 16; ++i) ids.push_back((i * 37 + 11) % 256);
  const Tensor input = Tensor::fromInts(ids, {2, 16});
  const std::string engine = (dir_ / "engine.safetensors").string();
  saveSafetensors(engine, {{"ids", input}, {"logits", model->forward(input)}});

  const std::string script =
      fmt::format("{}/tests/engine/train/consolidated_gpt2.py", testSourceDir());
  const std::string command =
      fmt::format("{} '{}' '{}' '{}' 2 4", RINGMASTER_PYTHON_TORCH, script, consolidated, engine);
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

}  // namespace
}  // namespace ringmaster
