// The evaluation pass (train/evaluation.h) against a reference computed directly: on one rank the
// mean loss over every validation sample in eval mode, dropout off and its stream untouched; over
// 1..4 ranks under ddp and fsdp, disjoint samples per rank and the same averaged loss on each; and
// through the trainer, a gpt on text trains bit for bit as without evaluation.
#include "train/evaluation.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "data/synthetic_dataset.h"
#include "engine/comm/comm_harness.h"
#include "nn/loss.h"
#include "nn/mlp.h"
#include "parallel/strategy.h"
#include "spec/job_spec.h"
#include "telemetry/codec.h"
#include "train/trainer.h"

namespace ringmaster {
namespace {

constexpr int64_t kFeatures = 8, kClasses = 4;

JobSpec strategySpec(const char* kind, int ranks) {
  SpecParseResult parsed = parseJobSpec(fmt::format(R"({{
    "name": "eval", "strategy": {{"kind": "{}"}},
    "model": {{"kind": "mlp", "layers": [8, 16, 4], "dropout": 0.5, "seed": 3}},
    "data": {{"kind": "synthetic", "samples": 64, "features": 8, "classes": 4}},
    "train": {{"steps": 1, "batch_size": 4}},
    "optimizer": {{"kind": "sgd", "lr": 0.1}},
    "launch": {{"hosts": [{{"host": "localhost", "ranks": {}}}]}},
    "device": "cpu"}})",
                                                    kind, ranks));
  EXPECT_TRUE(parsed.ok()) << parsed.describe();
  return *parsed.spec;
}

std::unique_ptr<Sequential> model() {
  return buildMlp({.layers = {kFeatures, 16, kClasses}, .dropout = 0.5f, .seed = 3});
}

// The mean loss over all of `data` in one forward of a fresh model in eval mode.
double referenceLoss(const Dataset& data) {
  auto reference = model();
  reference->setTraining(false);
  std::vector<int64_t> all(static_cast<size_t>(data.size()));
  std::iota(all.begin(), all.end(), 0);
  const Batch batch = makeBatch(data, all);
  SoftmaxCrossEntropy loss;
  return loss.forward(reference->forward(batch.inputs), batch.targets);
}

uint64_t dropoutCalls(Sequential& m) {
  uint64_t calls = 0;
  for (size_t i = 0; i < m.size(); ++i)
    if (auto* dropout = dynamic_cast<Dropout*>(&m.child(i))) calls += dropout->calls();
  return calls;
}

TEST(Evaluation, OneRankIsTheMeanLossOverTheSamplesInEvalMode) {
  const SyntheticTeacherDataset validation(23, kFeatures, kClasses, 7);
  auto net = model();
  const JobSpec spec = strategySpec("single", 1);
  auto runner = makeParallelStrategy({.model = *net, .world = nullptr, .spec = spec});

  const Evaluator evaluator(validation, 1, 0, /*batch_size=*/5, /*max_batches=*/100);
  ASSERT_EQ(evaluator.batches().size(), 5u);  // 5, 5, 5, 5 and the last 3: every sample
  EXPECT_EQ(evaluator.batches().back().size(), 3u);

  const EvalEvent eval = evaluator.evaluate(12, *net, *runner, nullptr, Device::cpu());
  EXPECT_EQ(eval.step, 12);
  EXPECT_EQ(eval.tokens, 23);
  EXPECT_NEAR(eval.val_loss, referenceLoss(validation), 1e-5);
  EXPECT_DOUBLE_EQ(eval.perplexity, std::exp(eval.val_loss));
  EXPECT_GE(eval.eval_ms, 0.0);
  // Dropout was off (the same value again) and drew nothing; training mode is back.
  EXPECT_EQ(dropoutCalls(*net), 0u);
  EXPECT_TRUE(net->training());
  EXPECT_EQ(evaluator.evaluate(12, *net, *runner, nullptr, Device::cpu()).val_loss, eval.val_loss);
  // eval_batches caps the samples.
  const Evaluator capped(validation, 1, 0, 5, 2);
  EXPECT_EQ(capped.evaluate(1, *net, *runner, nullptr, Device::cpu()).tokens, 10);
}

TEST(Evaluation, AnEmptyValidationSetIsRefused) {
  const SyntheticTeacherDataset empty(0, kFeatures, kClasses, 7);
  try {
    Evaluator(empty, 1, 0, 4, 10);
    FAIL() << "accepted an empty validation set";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("train.eval_every"), std::string::npos) << e.what();
  }
}

// Every data-parallel strategy over 1..4 ranks: each rank evaluates its own samples (together all
// of them, none twice) and reports the loss over all of them.
TEST(Evaluation, RanksTakeDisjointSamplesAndAgreeOnTheAveragedLoss) {
  const SyntheticTeacherDataset validation(24, kFeatures, kClasses, 7);
  const double expected = referenceLoss(validation);
  for (const char* kind : {"ddp", "fsdp"}) {
    for (int world = 1; world <= 4; ++world) {
      SCOPED_TRACE(fmt::format("{} on {} ranks", kind, world));
      const JobSpec spec = strategySpec(kind, world);
      std::mutex mutex;
      std::vector<int64_t> seen;
      std::vector<EvalEvent> evals;
      auto failures = testing::runRanks(world, [&](Communicator& comm) {
        auto net = model();
        auto runner = makeParallelStrategy({.model = *net, .world = &comm, .spec = spec});
        const Evaluator evaluator(validation, world, comm.rank(), 4, 100);
        const EvalEvent eval = evaluator.evaluate(3, *net, *runner, &comm, Device::cpu());
        std::lock_guard lock(mutex);
        for (const auto& batch : evaluator.batches())
          seen.insert(seen.end(), batch.begin(), batch.end());
        evals.push_back(eval);
      });
      EXPECT_ALL_RANKS_OK(failures);
      std::sort(seen.begin(), seen.end());
      std::vector<int64_t> all(24);
      std::iota(all.begin(), all.end(), 0);
      EXPECT_EQ(seen, all);
      ASSERT_EQ(evals.size(), static_cast<size_t>(world));
      for (const EvalEvent& eval : evals) {
        EXPECT_EQ(eval.tokens, 24);
        EXPECT_NEAR(eval.val_loss, expected, 1e-5);
        EXPECT_EQ(eval.val_loss, evals.front().val_loss) << "every rank reports the same";
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Through the trainer: a small gpt on byte-level text.

struct RankEvents {
  std::vector<StepEvent> steps;
  std::vector<EvalEvent> evals;
};

// Trains `spec` on `world` ranks (threads over loopback Gloo; one rank: no communicator) and
// returns each rank's step and eval events.
std::vector<RankEvents> trainAndCollect(const JobSpec& spec, int world) {
  std::vector<RankEvents> ranks(static_cast<size_t>(world));
  const auto body = [&](Communicator* comm) {
    const int rank = comm ? comm->rank() : 0;
    std::FILE* stream = std::tmpfile();
    {
      TelemetryWriter telemetry(stream, rank);
      std::FILE* log = std::fopen("/dev/null", "w");
      Trainer trainer(
          spec, {.rank = rank, .world_size = world, .host = "test"}, telemetry,
          [] { return false; }, log, comm);
      trainer.run();
      std::fclose(log);
    }
    std::rewind(stream);
    char line[1 << 16];
    while (std::fgets(line, sizeof line, stream) != nullptr) {
      const DecodeResult decoded = decodeEvent(line);
      ASSERT_TRUE(decoded.ok()) << line;
      if (const auto* step = std::get_if<StepEvent>(&decoded.event().body))
        ranks[static_cast<size_t>(rank)].steps.push_back(*step);
      if (const auto* eval = std::get_if<EvalEvent>(&decoded.event().body))
        ranks[static_cast<size_t>(rank)].evals.push_back(*eval);
    }
    std::fclose(stream);
  };
  if (world == 1) {
    body(nullptr);
  } else {
    EXPECT_ALL_RANKS_OK(testing::runRanks(world, [&](Communicator& comm) { body(&comm); }));
  }
  return ranks;
}

class EvaluationInTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    corpus_ = std::filesystem::temp_directory_path() /
              fmt::format("ringmaster_eval_corpus_{}.txt", getpid());
    std::ofstream out(corpus_);
    const char* words[] = {"the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "dog. "};
    for (int i = 0; i < 600; ++i) out << words[(i * 7 + i / 3) % 8];
  }
  void TearDown() override { std::filesystem::remove(corpus_); }

  JobSpec spec(const char* strategy, int ranks, int64_t eval_every) const {
    SpecParseResult parsed =
        parseJobSpec(fmt::format(R"({{
      "name": "eval", "strategy": {{"kind": "{}"}},
      "model": {{"kind": "gpt", "layers": 1, "vocab_size": 256, "context": 8, "heads": 2,
                 "dim": 16, "dropout": 0.2, "seed": 4}},
      "data": {{"kind": "text", "path": "{}", "val_fraction": 0.2}},
      "train": {{"steps": 6, "batch_size": 2, "eval_every": {}, "eval_batches": 2, "seed": 9}},
      "optimizer": {{"kind": "adamw", "lr": 0.01}},
      "launch": {{"hosts": [{{"host": "localhost", "ranks": {}}}]}},
      "device": "cpu"}})",
                                 strategy, corpus_.string(), eval_every, ranks));
    EXPECT_TRUE(parsed.ok()) << parsed.describe();
    return *parsed.spec;
  }

  std::filesystem::path corpus_;
};

// The evaluation reads its own samples in eval mode: the training's losses are bit for bit those of
// the same run without it (data order and dropout streams untouched), on 1 to 3 ranks. A
// pipeline's ranks share their samples: each evaluates the same batches, and every stage reports
// the last stage's loss.
TEST_F(EvaluationInTraining, TrainsExactlyAsWithoutItAndReportsEveryRankAlike) {
  for (const auto& [strategy, world] : std::vector<std::pair<const char*, int>>{
           {"single", 1}, {"ddp", 2}, {"fsdp", 3}, {"pipeline", 2}, {"pipeline", 3}}) {
    const int data_ranks = std::string(strategy) == "pipeline" ? 1 : world;
    SCOPED_TRACE(fmt::format("{} on {} ranks", strategy, world));
    const std::vector<RankEvents> with = trainAndCollect(spec(strategy, world, 4), world);
    const std::vector<RankEvents> without = trainAndCollect(spec(strategy, world, 0), world);
    for (int rank = 0; rank < world; ++rank) {
      const RankEvents& a = with[static_cast<size_t>(rank)];
      const RankEvents& b = without[static_cast<size_t>(rank)];
      ASSERT_EQ(a.steps.size(), 6u);
      ASSERT_EQ(b.steps.size(), 6u);
      for (size_t i = 0; i < a.steps.size(); ++i)
        EXPECT_EQ(a.steps[i].loss, b.steps[i].loss) << "rank " << rank << " step " << i + 1;
      EXPECT_TRUE(b.evals.empty());
      // After step 4 (eval_every) and after the last; 2 batches of 2 windows of 8 tokens a rank.
      ASSERT_EQ(a.evals.size(), 2u);
      EXPECT_EQ(a.evals[0].step, 4);
      EXPECT_EQ(a.evals[1].step, 6);
      for (size_t i = 0; i < a.evals.size(); ++i) {
        const EvalEvent& eval = a.evals[i];
        EXPECT_EQ(eval.tokens, data_ranks * 2 * 2 * 8);
        EXPECT_TRUE(std::isfinite(eval.val_loss));
        EXPECT_GT(eval.val_loss, 0.0);
        EXPECT_DOUBLE_EQ(eval.perplexity, std::exp(eval.val_loss));
        EXPECT_EQ(eval.val_loss, with[0].evals[i].val_loss) << "rank " << rank << " differs";
      }
    }
  }
}

// A pipeline trains as one process does, so its evaluations (forward only, stage after stage) give
// the one process's validation losses: on 2 and 3 stages (the embedding, the block, the head).
TEST_F(EvaluationInTraining, ThePipelinesValidationLossIsOneProcesss) {
  const std::vector<RankEvents> single = trainAndCollect(spec("single", 1, 3), 1);
  ASSERT_EQ(single[0].evals.size(), 2u);
  for (int world : {2, 3}) {
    SCOPED_TRACE(fmt::format("pipeline on {} ranks", world));
    const std::vector<RankEvents> pipeline = trainAndCollect(spec("pipeline", world, 3), world);
    for (const RankEvents& rank : pipeline) {
      ASSERT_EQ(rank.evals.size(), 2u);
      for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(rank.evals[i].step, single[0].evals[i].step);
        EXPECT_EQ(rank.evals[i].tokens, single[0].evals[i].tokens);
        // fp32 training on differently grouped GEMMs: equal to a few ulps of the loss.
        EXPECT_NEAR(rank.evals[i].val_loss, single[0].evals[i].val_loss,
                    1e-5 * single[0].evals[i].val_loss);
      }
    }
  }
}

}  // namespace
}  // namespace ringmaster
