// The strategy interface (parallel/strategy.h) on one rank: `single` through makeParallelStrategy
// trains a batch exactly as the bare model does, reports its layout (one checkpoint for all, one
// forward per batch), and its full state dict is the model's state_dict. The strategies over ranks
// are held to one process by the trainer's and the residual MLP's tests.
#include <gtest/gtest.h>

#include "core/error.h"
#include "data/synthetic_dataset.h"
#include "nn/loss.h"
#include "nn/model.h"
#include "parallel/strategy.h"
#include "tensor/ops.h"

namespace ringmaster {
namespace {

JobSpec singleSpec() {
  JobSpec spec;  // one rank: "single"
  spec.model.layers = {6, 8, 3};
  spec.model.seed = 7;
  spec.train.batch_size = 5;
  return spec;
}

TEST(ParallelStrategy, SingleTrainsABatchAsTheBareModelDoes) {
  const JobSpec spec = singleSpec();
  SyntheticTeacherDataset dataset(20, 6, 3, 1);
  const std::vector<int64_t> indices = {0, 3, 4, 9, 12};
  const BatchMaker make_batch = [&](const std::vector<int64_t>& rows) {
    return makeBatch(dataset, rows);
  };

  auto bare = buildModel(spec.model);
  Batch batch = make_batch(indices);
  SoftmaxCrossEntropy loss_fn;
  Tensor logits = bare->forward(batch.inputs);
  const double loss = loss_fn.forward(logits, batch.targets);
  bare->backward(loss_fn.backward(0.5f));

  auto model = buildModel(spec.model);
  std::unique_ptr<ParallelStrategy> single =
      makeParallelStrategy({.model = *model, .world = nullptr, .spec = spec});
  const BatchPass pass = single->trainBatch(indices, make_batch, 2, /*sync=*/true);
  EXPECT_EQ(pass.loss, loss);
  EXPECT_EQ(pass.samples, 5);
  EXPECT_EQ(pass.correct, ops::countCorrect(logits, batch.targets));
  EXPECT_TRUE(pass.actions.empty());
  EXPECT_EQ(single->finishGradientSync().comm_ms, 0);

  const std::vector<NamedParameter> expected = bare->namedParameters();
  const std::vector<NamedParameter> got = single->optimizerParameters();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, expected[i].name);
    EXPECT_EQ(got[i].parameter->grad.toFloatVector(), expected[i].parameter->grad.toFloatVector())
        << got[i].name;
  }
  EXPECT_EQ(single->forwardsPerBatch(), 1);
  EXPECT_FALSE(single->perRankCheckpoints());
  EXPECT_FALSE(single->consolidates());
  const StateDict state = single->fullStateDict();
  ASSERT_EQ(state.size(), expected.size());
  for (size_t i = 0; i < state.size(); ++i) EXPECT_EQ(state[i].first, expected[i].name);
}

TEST(ParallelStrategy, OverRanksItNeedsTheWorld) {
  JobSpec spec = singleSpec();
  spec.strategy.mesh.dp = 2;
  auto model = buildModel(spec.model);
  EXPECT_THROW(makeParallelStrategy({.model = *model, .world = nullptr, .spec = spec}), Error);
}

}  // namespace
}  // namespace ringmaster
