// llm.c token shards through the trainer: a GPT over shards written here (uint16 training shards,
// a uint32 validation shard) trains under single and under ddp on 3 ranks (threads over loopback
// Gloo), evaluating on the validation shard, with the per-token loss falling on every rank.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/train_ranks.h"
#include "data/token_shards.h"
#include "spec/job_spec.h"
#include "train/trainer.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

// A learnable stream over a vocabulary of 64: a fixed phrase of 24 ids, repeated.
std::vector<uint32_t> phrases(size_t count, uint32_t shift) {
  std::vector<uint32_t> tokens(count);
  for (size_t i = 0; i < count; ++i) tokens[i] = (static_cast<uint32_t>(i % 24) * 11 + shift) % 64;
  return tokens;
}

class TokenShardTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("ringmaster_token_train_{}_{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    writeTokenShard((dir_ / "train_000.bin").string(), phrases(1500, 0));
    writeTokenShard((dir_ / "train_001.bin").string(), phrases(1100, 0));
    writeTokenShard((dir_ / "val_000.bin").string(), phrases(400, 0), /*wide=*/true);
  }
  void TearDown() override { fs::remove_all(dir_); }

  JobSpec spec(const std::string& strategy, int ranks) const {
    SpecParseResult parsed = parseJobSpec(fmt::format(
        R"({{
      "name": "gpt-shards", "strategy": {{"kind": "{}"}},
      "model": {{"kind": "gpt", "layers": 1, "vocab_size": 64, "context": 16, "heads": 2,
                 "dim": 32, "seed": 4}},
      "data": {{"kind": "tokens", "train": "{}", "val": "{}"}},
      "train": {{"steps": 20, "batch_size": 8, "seed": 9, "eval_every": 10, "eval_batches": 2}},
      "optimizer": {{"kind": "adamw", "lr": 0.01}},
      "launch": {{"hosts": [{{"host": "localhost", "ranks": {}}}]}},
      "device": "cpu"}})",
        strategy, (dir_ / "train_*.bin").string(), (dir_ / "val_*.bin").string(), ranks));
    EXPECT_TRUE(parsed.ok()) << parsed.describe();
    return *parsed.spec;
  }

  fs::path dir_;
};

// From ln(64) = 4.16 nats per token, 20 AdamW steps on a repeated phrase get well below 3.
void expectLossFell(const TrainingResult& result) {
  EXPECT_EQ(result.final_step, 20);
  EXPECT_GT(result.first_loss, 3.8);
  EXPECT_LT(result.last_loss, result.first_loss - 1.0)
      << "first " << result.first_loss << ", last " << result.last_loss;
}

TEST_F(TokenShardTraining, LossFallsUnderSingle) {
  expectLossFell(testing::trainRank(spec("single", 1)).result);
}

TEST_F(TokenShardTraining, LossFallsUnderDdpOnThreeRanks) {
  for (const testing::RankTraining& run : testing::trainOnRanks(spec("ddp", 3), 3))
    expectLossFell(run.result);
}

}  // namespace
}  // namespace ringmaster
