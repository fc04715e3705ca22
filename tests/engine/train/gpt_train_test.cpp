// The GPT through the trainer on the host: a byte-level GPT on a small repetitive text trains
// under strategy single and under ddp on 2 and 3 ranks (threads over loopback Gloo) with the
// per-token loss falling on every rank.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/train_ranks.h"
#include "spec/job_spec.h"
#include "telemetry/codec.h"
#include "train/trainer.h"

namespace ringmaster {
namespace {

class GptTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    corpus_ = std::filesystem::temp_directory_path() /
              fmt::format("ringmaster_gpt_corpus_{}.txt", getpid());
    std::ofstream out(corpus_);
    const char* words[] = {"the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "dog. "};
    for (int i = 0; i < 400; ++i) out << words[(i * 7 + i / 3) % 8];
  }
  void TearDown() override { std::filesystem::remove(corpus_); }

  JobSpec spec(const std::string& strategy, int ranks) const {
    SpecParseResult parsed = parseJobSpec(fmt::format(
        R"({{
      "name": "gpt-cpu", "strategy": {{"kind": "{}"}},
      "model": {{"kind": "gpt", "layers": 1, "vocab_size": 256, "context": 16, "heads": 2,
                 "dim": 32, "seed": 4}},
      "data": {{"kind": "text", "path": "{}", "val_fraction": 0.1}},
      "train": {{"steps": 25, "batch_size": 8, "seed": 9}},
      "optimizer": {{"kind": "adamw", "lr": 0.01}},
      "launch": {{"hosts": [{{"host": "localhost", "ranks": {}}}]}},
      "device": "cpu"}})",
        strategy, corpus_.string(), ranks));
    EXPECT_TRUE(parsed.ok()) << parsed.describe();
    return *parsed.spec;
  }

  std::filesystem::path corpus_;
};

// From ln(256) = 5.5 nats per byte, 25 AdamW steps bring a one-block GPT to about 3 on this text.
void expectLossFell(const TrainingResult& result) {
  EXPECT_EQ(result.final_step, 25);
  EXPECT_GT(result.first_loss, 5.0);
  EXPECT_LT(result.last_loss, result.first_loss - 1.5)
      << "first " << result.first_loss << ", last " << result.last_loss;
}

TEST_F(GptTraining, LossFallsUnderSingle) {
  expectLossFell(testing::trainRank(spec("single", 1)).result);
}

void expectDdpLossFell(const JobSpec& ddp, int world) {
  for (const testing::RankTraining& run : testing::trainOnRanks(ddp, world))
    expectLossFell(run.result);
}

TEST_F(GptTraining, LossFallsUnderDdpOnTwoRanks) {
  expectDdpLossFell(spec("ddp", 2), 2);
}

TEST_F(GptTraining, LossFallsUnderDdpOnThreeRanks) {
  expectDdpLossFell(spec("ddp", 3), 3);
}

}  // namespace
}  // namespace ringmaster
