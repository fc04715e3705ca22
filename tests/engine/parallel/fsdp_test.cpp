// FSDP against DDP: every sharding mode, with units per layer or one for the model, on 1 to 4
// ranks (3 pads the flat parameters), with and without gradient accumulation, ends with DDP's
// parameters; and the shards really are shards (each rank holds 1/N of every unit, nothing else).
#include <gtest/gtest.h>

#include <tuple>

#include "common/parallel_cases.h"
#include "engine/comm/comm_harness.h"
#include "engine/parallel/equivalence.h"
#include "parallel/fsdp.h"

namespace ringmaster {
namespace {

using testing::kModel;
using testing::kSamples;
using testing::kTolerance;
using testing::maxDifference;
using testing::Parameters;
using testing::runRanks;
using testing::Schedule;
using testing::trainDdp;

// Every rank's full parameters (gathered) after training under FSDP like trainDdp does.
std::vector<Parameters> trainFsdp(int world, const Schedule& setup, FsdpOptions options) {
  using Fsdp = FullyShardedDataParallel;
  return testing::trainDataParallel<Fsdp>(
      world, setup,
      [&](Sequential& model, Communicator& comm) {
        return std::make_unique<Fsdp>(model, comm, options);
      },
      [](Sequential&, Fsdp& fsdp) { return fsdp.shardParameters(); },
      [](Sequential&, Fsdp& fsdp) {
        Parameters whole;
        for (auto& [name, value] : fsdp.fullParameters()) whole.push_back(value.toFloatVector());
        return whole;
      });
}

using testing::FsdpCase;
class FsdpEquivalence : public ::testing::TestWithParam<FsdpCase> {};

TEST_P(FsdpEquivalence, EqualsDdp) {
  const auto [world, sharding, units] = GetParam();
  for (const Schedule setup : {Schedule{}, Schedule{.batch_per_rank = 4, .accumulation = 3}}) {
    SCOPED_TRACE(::testing::Message() << "accumulation " << setup.accumulation);
    std::vector<Parameters> ddp = trainDdp(world, setup);
    std::vector<Parameters> fsdp = trainFsdp(world, setup, {.sharding = sharding, .units = units});
    for (int rank = 0; rank < world; ++rank)
      EXPECT_LE(maxDifference(fsdp[rank], ddp[0]), kTolerance) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, FsdpEquivalence, testing::everyFsdpCase(), testing::fsdpCaseName);

TEST(Fsdp, EachRankHoldsOnlyItsPaddedShardBetweenSteps) {
  auto failures = runRanks(3, [&](Communicator& comm) {
    auto model = buildMlp(kModel);  // Linear 12x16 (208 values), 16x16 (272), 16x4 (68)
    FullyShardedDataParallel fsdp(*model, comm, {.sharding = FsdpSharding::kFullShard});
    ASSERT_EQ(fsdp.units().size(), 3u);
    const std::vector<int64_t> padded = {210, 273, 69};
    for (size_t u = 0; u < 3; ++u) {
      EXPECT_EQ(fsdp.units()[u].padded_numel, padded[u]);
      EXPECT_EQ(fsdp.units()[u].shard.value.numel(), padded[u] / 3);
      EXPECT_FALSE(fsdp.units()[u].full.defined()) << "unit " << u << " left gathered";
    }
    for (const NamedParameter& named : model->namedParameters())
      EXPECT_FALSE(named.parameter->value.defined()) << named.name << " kept its full value";

    SyntheticTeacherDataset data(kSamples, 12, 4, 3);
    Batch batch = makeBatch(data, std::vector<int64_t>{0, 1, 2, 3});
    SoftmaxCrossEntropy loss;
    loss.forward(fsdp.forward(batch.inputs), batch.targets);
    for (size_t u = 0; u < 3; ++u) EXPECT_FALSE(fsdp.units()[u].full.defined());
    fsdp.backward(loss.backward(1.0f));
    GradientSyncTiming timing = fsdp.finishGradientSync();
    EXPECT_GT(timing.comm_ms, 0.0);
    for (size_t u = 0; u < 3; ++u) EXPECT_FALSE(fsdp.units()[u].full.defined());
    EXPECT_EQ(fsdp.parameterCount(), 208 + 272 + 68);
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST(Fsdp, ClippingUsesTheNormOfTheWholeModel) {
  // The norm across shards must be the unsharded model's norm, which DDP's replicas all see.
  std::vector<double> fsdp_norms(2), ddp_norms(2);
  auto failures = runRanks(2, [&](Communicator& comm) {
    SyntheticTeacherDataset data(kSamples, 12, 4, 3);
    Batch batch = makeBatch(data, std::vector<int64_t>{comm.rank() * 4, 1, 2, 3});
    SoftmaxCrossEntropy loss;
    auto sharded_model = buildMlp(kModel);
    FullyShardedDataParallel fsdp(*sharded_model, comm);
    loss.forward(fsdp.forward(batch.inputs), batch.targets);
    fsdp.backward(loss.backward(1.0f));
    fsdp.finishGradientSync();
    fsdp_norms[comm.rank()] = fsdp.clipGradNorm(1e-3);

    auto replicated_model = buildMlp(kModel);
    DistributedDataParallel ddp(*replicated_model, comm);
    loss.forward(ddp.forward(batch.inputs), batch.targets);
    ddp.backward(loss.backward(1.0f));
    ddp.finishGradientSync();
    ddp_norms[comm.rank()] = clipGradNorm(replicated_model->namedParameters(), 1e-3);
  });
  EXPECT_ALL_RANKS_OK(failures);
  for (int rank = 0; rank < 2; ++rank) EXPECT_NEAR(fsdp_norms[rank], ddp_norms[0], 1e-5);
}

}  // namespace
}  // namespace ringmaster
