// What the parallel strategies are checked against: one process (or DDP) training the test MLP on
// the same data with SGD + momentum, its final parameters, and the distance between two results.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "data/distributed_sampler.h"
#include "data/synthetic_dataset.h"
#include "engine/comm/comm_harness.h"
#include "nn/loss.h"
#include "nn/mlp.h"
#include "optim/optimizer.h"
#include "parallel/ddp.h"

namespace ringmaster::testing {

// float32 sums taken in another order (per-rank partial sums, then the all-reduce) differ from the
// one-process sum by a few ulp per element (~1e-7 relative); five SGD steps with momentum carry
// that into the parameters without amplifying it much. 2e-6 absolute on parameters of magnitude
// ~0.1 is ~20 ulp of headroom, far below what any wrong sample, scale or missing rank would give
// (those change parameters by 1e-3 and more).
inline constexpr float kTolerance = 2e-6f;

inline constexpr int64_t kSamples = 960;  // divisible by every N * B * accumulation used here
inline const MlpConfig kModel{.layers = {12, 16, 16, 4}, .seed = 11};

struct Schedule {  // how many samples per rank, micro-batches and steps
  int64_t batch_per_rank = 8;
  int accumulation = 1;
  int steps = 5;
};

using Parameters = std::vector<std::vector<float>>;

inline Parameters snapshot(Sequential& model) {
  Parameters out;
  for (auto& p : model.namedParameters()) out.push_back(p.parameter->value.toFloatVector());
  return out;
}

// One optimizer step per iteration over `world` ranks' worth of data, in one process:
// batch world * B, the gradient scaled for `accumulation` micro-batches.
inline Parameters trainOneProcess(int world, const Schedule& setup,
                                  const MlpConfig& config = kModel) {
  SyntheticTeacherDataset data(kSamples, 12, 4, 3);
  auto model = buildMlp(config);
  Sgd sgd(model->namedParameters(), {.lr = 0.1f, .momentum = 0.9f});
  BatchIterator batches(DistributedSampler(kSamples, 1, 0, true, 7, false),
                        world * setup.batch_per_rank);
  SoftmaxCrossEntropy loss;
  for (int step = 0; step < setup.steps; ++step) {
    sgd.zeroGrad();
    for (int micro = 0; micro < setup.accumulation; ++micro) {
      Batch batch = makeBatch(data, batches.next());
      loss.forward(model->forward(batch.inputs), batch.targets);
      model->backward(loss.backward(1.0f / static_cast<float>(setup.accumulation)));
    }
    sgd.step();
  }
  return snapshot(*model);
}

inline float maxDifference(const Parameters& a, const Parameters& b) {
  float worst = 0;
  EXPECT_EQ(a.size(), b.size());
  for (size_t t = 0; t < a.size() && t < b.size(); ++t) {
    EXPECT_EQ(a[t].size(), b[t].size());
    for (size_t i = 0; i < a[t].size() && i < b[t].size(); ++i)
      worst = std::max(worst, std::fabs(a[t][i] - b[t][i]));
  }
  return worst;
}

// Trains like trainOneProcess, but on `world` ranks each taking its share of the batch through a
// data-parallel wrapper (DDP, FSDP) that `wrap` builds around the rank's model. Rank r > 0 starts
// from deliberately different parameters, which the wrapper's start-up broadcast must replace.
// `optimized` gives what the optimizer updates, `final_parameters` a rank's whole model at the end.
template <typename Wrapper>
std::vector<Parameters> trainDataParallel(
    int world, const Schedule& setup,
    const std::function<std::unique_ptr<Wrapper>(Sequential&, Communicator&)>& wrap,
    const std::function<std::vector<NamedParameter>(Sequential&, Wrapper&)>& optimized,
    const std::function<Parameters(Sequential&, Wrapper&)>& final_parameters) {
  std::vector<Parameters> finals(world);
  auto failures = runRanks(world, [&](Communicator& comm) {
    SyntheticTeacherDataset data(kSamples, 12, 4, 3);
    MlpConfig config = kModel;
    config.seed += comm.rank();
    auto model = buildMlp(config);
    std::unique_ptr<Wrapper> parallel = wrap(*model, comm);
    Sgd sgd(optimized(*model, *parallel), {.lr = 0.1f, .momentum = 0.9f});
    BatchIterator batches(DistributedSampler(kSamples, world, comm.rank(), true, 7, false),
                          setup.batch_per_rank);
    SoftmaxCrossEntropy loss;
    for (int step = 0; step < setup.steps; ++step) {
      sgd.zeroGrad();
      for (int micro = 0; micro < setup.accumulation; ++micro) {
        Batch batch = makeBatch(data, batches.next());
        loss.forward(parallel->forward(batch.inputs), batch.targets);
        parallel->backward(loss.backward(1.0f / static_cast<float>(setup.accumulation)),
                           /*sync=*/micro == setup.accumulation - 1);
      }
      parallel->finishGradientSync();
      sgd.step();
    }
    finals[comm.rank()] = final_parameters(*model, *parallel);
  });
  EXPECT_ALL_RANKS_OK(failures);
  return finals;
}

// trainDataParallel under DDP: every rank's final parameters.
inline std::vector<Parameters> trainDdp(int world, const Schedule& setup, DdpOptions options = {}) {
  using Ddp = DistributedDataParallel;
  return trainDataParallel<Ddp>(
      world, setup,
      [&](Sequential& model, Communicator& comm) {
        return std::make_unique<Ddp>(model, comm, options);
      },
      [](Sequential& model, Ddp&) { return model.namedParameters(); },
      [](Sequential& model, Ddp&) { return snapshot(model); });
}

}  // namespace ringmaster::testing
