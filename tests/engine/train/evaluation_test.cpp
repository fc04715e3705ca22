// The evaluation pass (train/evaluation.h) against a reference computed directly: on one rank the
// mean loss over every validation sample in eval mode, dropout off and its stream untouched; over
// 1..4 ranks under ddp and fsdp, disjoint samples per rank and the same averaged loss on each.
#include "train/evaluation.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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

}  // namespace
}  // namespace ringmaster
