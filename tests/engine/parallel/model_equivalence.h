// Any model (built by a factory, fed by a batch maker) trained in one process against the same
// training under DDP, FSDP and the pipeline: each step's loss and the final parameters by name, for
// the models the MLP harness (equivalence.h) does not cover: a tied test model and the GPT.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm/comm_harness.h"
#include "nn/loss.h"
#include "optim/optimizer.h"
#include "parallel/ddp.h"
#include "parallel/fsdp.h"
#include "parallel/pipeline.h"

namespace ringmaster::testing {

using ModelFactory = std::function<std::unique_ptr<Sequential>()>;
// The batch of the samples `indices` (any index >= 0: the maker wraps or generates).
using SampleBatch = std::function<Batch(const std::vector<int64_t>& indices)>;

struct TrainedModel {
  std::vector<double> losses;                        // per step, over the whole global batch
  std::map<std::string, std::vector<float>> values;  // final parameters by state_dict name
};

struct Training {
  int64_t global_batch = 12;  // samples per step, split over ranks or micro-batches
  int steps = 3;
};

inline std::vector<int64_t> stepIndices(const Training& training, int step) {
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < training.global_batch; ++i)
    indices.push_back(step * training.global_batch + i);
  return indices;
}

// Softmax cross-entropy over the last axis, the mean over every target (a classifier's logits
// [b, classes] and labels [b]; a language model's [b, T, V] and [b, T]), as nanoGPT's
// F.cross_entropy(logits.view(-1, V), targets.view(-1)).
class FlatLoss {
 public:
  double forward(const Tensor& logits, const Tensor& targets) {
    shape_ = logits.shape();
    const int64_t classes = shape_.back();
    return loss_.forward(logits.view({logits.numel() / classes, classes}),
                         targets.view({targets.numel()}));
  }
  Tensor backward(float scale) { return loss_.backward(scale).view(shape_); }

 private:
  SoftmaxCrossEntropy loss_;
  Shape shape_;
};

inline Sgd makeSgd(std::vector<NamedParameter> parameters) {
  return Sgd(std::move(parameters), {.lr = 0.1f, .momentum = 0.9f});
}

inline std::map<std::string, std::vector<float>> valuesOf(
    const std::vector<std::pair<std::string, Tensor>>& state) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, value] : state) out[name] = value.toFloatVector();
  return out;
}

inline std::map<std::string, std::vector<float>> valuesOf(const std::vector<NamedParameter>& ps) {
  std::map<std::string, std::vector<float>> out;
  for (const NamedParameter& p : ps) out[p.name] = p.parameter->value.toFloatVector();
  return out;
}

// One process, the whole global batch per step.
inline TrainedModel trainWhole(const ModelFactory& make_model, const SampleBatch& make_batch,
                               const Training& training) {
  auto model = make_model();
  Sgd sgd = makeSgd(model->namedParameters());
  FlatLoss loss;
  TrainedModel out;
  for (int step = 0; step < training.steps; ++step) {
    sgd.zeroGrad();
    Batch batch = make_batch(stepIndices(training, step));
    out.losses.push_back(loss.forward(model->forward(batch.inputs), batch.targets));
    model->backward(loss.backward(1.0f));
    sgd.step();
  }
  out.values = valuesOf(model->namedParameters());
  return out;
}

// A data-parallel wrapper over `world` ranks, each with global_batch / world samples of every step.
// Rank 0's final parameters and the mean of the ranks' losses.
template <typename Wrapper>
TrainedModel trainDataParallelModel(
    int world, const ModelFactory& make_model, const SampleBatch& make_batch,
    const Training& training,
    const std::function<std::unique_ptr<Wrapper>(Sequential&, Communicator&)>& wrap,
    const std::function<std::vector<NamedParameter>(Sequential&, Wrapper&)>& optimized,
    const std::function<std::map<std::string, std::vector<float>>(Sequential&, Wrapper&)>&
        final_values) {
  EXPECT_EQ(training.global_batch % world, 0);
  const int64_t local = training.global_batch / world;
  std::vector<std::vector<double>> losses(world);
  std::vector<std::map<std::string, std::vector<float>>> finals(world);
  auto failures = runRanks(world, [&](Communicator& comm) {
    auto model = make_model();
    std::unique_ptr<Wrapper> parallel = wrap(*model, comm);
    Sgd sgd = makeSgd(optimized(*model, *parallel));
    FlatLoss loss;
    for (int step = 0; step < training.steps; ++step) {
      sgd.zeroGrad();
      const std::vector<int64_t> all = stepIndices(training, step);
      Batch batch = make_batch(std::vector<int64_t>(all.begin() + comm.rank() * local,
                                                    all.begin() + (comm.rank() + 1) * local));
      losses[comm.rank()].push_back(loss.forward(parallel->forward(batch.inputs), batch.targets));
      parallel->backward(loss.backward(1.0f), /*sync=*/true);
      parallel->finishGradientSync();
      sgd.step();
    }
    finals[comm.rank()] = final_values(*model, *parallel);
  });
  EXPECT_ALL_RANKS_OK(failures);
  TrainedModel out;
  for (int step = 0; step < training.steps; ++step) {
    double sum = 0;
    for (int rank = 0; rank < world; ++rank) sum += losses[rank].at(step);
    out.losses.push_back(sum / world);
  }
  for (int rank = 1; rank < world; ++rank)
    EXPECT_EQ(finals[rank], finals[0]) << "rank " << rank << " ended with other parameters";
  out.values = finals[0];
  return out;
}

inline TrainedModel trainDdpModel(int world, const ModelFactory& make_model,
                                  const SampleBatch& make_batch, const Training& training) {
  using Ddp = DistributedDataParallel;
  return trainDataParallelModel<Ddp>(
      world, make_model, make_batch, training,
      [](Sequential& model, Communicator& comm) { return std::make_unique<Ddp>(model, comm); },
      [](Sequential& model, Ddp&) { return model.namedParameters(); },
      [](Sequential& model, Ddp&) { return valuesOf(model.namedParameters()); });
}

inline TrainedModel trainFsdpModel(int world, const ModelFactory& make_model,
                                   const SampleBatch& make_batch, const Training& training,
                                   FsdpOptions options) {
  using Fsdp = FullyShardedDataParallel;
  return trainDataParallelModel<Fsdp>(
      world, make_model, make_batch, training,
      [&](Sequential& model, Communicator& comm) {
        return std::make_unique<Fsdp>(model, comm, options);
      },
      [](Sequential&, Fsdp& fsdp) { return fsdp.shardParameters(); },
      [](Sequential&, Fsdp& fsdp) { return valuesOf(fsdp.fullParameters()); });
}

// The pipeline over `world` ranks, global_batch / micro_batches rows per micro-batch. Every
// parameter's value from the rank holding it; a tied parameter's copies must be equal (checked).
inline TrainedModel trainPipelineModel(int world, const ModelFactory& make_model,
                                       const SampleBatch& make_batch, const Training& training,
                                       PipelineOptions options) {
  EXPECT_EQ(training.global_batch % options.micro_batches, 0);
  const int64_t rows = training.global_batch / options.micro_batches;
  std::mutex mutex;
  TrainedModel out;
  std::map<std::string, int> copies;
  auto failures = runRanks(world, [&](Communicator& comm) {
    auto model = make_model();
    PipelineParallel pipeline(*model, comm, options);
    Sgd sgd = makeSgd(pipeline.parameters());
    std::vector<double> losses;
    for (int step = 0; step < training.steps; ++step) {
      sgd.zeroGrad();
      const std::vector<int64_t> all = stepIndices(training, step);
      PipelineStepResult result = pipeline.runStep(
          rows,
          [&](int micro) {
            return make_batch(
                std::vector<int64_t>(all.begin() + micro * rows, all.begin() + (micro + 1) * rows));
          },
          1.0f / static_cast<float>(options.micro_batches));
      pipeline.reduceTiedGradients();
      sgd.step();
      losses.push_back(result.loss_sum / options.micro_batches);
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (comm.rank() == 0) out.losses = losses;
    for (const NamedParameter& p : pipeline.parameters()) {
      std::vector<float> value = p.parameter->value.toFloatVector();
      if (copies[p.name]++ > 0) {
        EXPECT_EQ(value, out.values[p.name]) << p.name << ": a tied parameter's copies differ";
      }
      out.values[p.name] = std::move(value);
    }
  });
  EXPECT_ALL_RANKS_OK(failures);
  return out;
}

// The largest |a - b| over parameters of the same name; every name of `expected` must be there.
inline float maxParameterDifference(const TrainedModel& actual, const TrainedModel& expected) {
  float worst = 0;
  EXPECT_EQ(actual.values.size(), expected.values.size());
  for (const auto& [name, values] : expected.values) {
    const auto it = actual.values.find(name);
    if (it == actual.values.end()) {
      ADD_FAILURE() << "no parameter " << name;
      continue;
    }
    EXPECT_EQ(it->second.size(), values.size()) << name;
    for (size_t i = 0; i < values.size() && i < it->second.size(); ++i)
      worst = std::max(worst, std::fabs(it->second[i] - values[i]));
  }
  return worst;
}

inline double maxLossDifference(const TrainedModel& actual, const TrainedModel& expected) {
  double worst = 0;
  EXPECT_EQ(actual.losses.size(), expected.losses.size());
  for (size_t i = 0; i < actual.losses.size() && i < expected.losses.size(); ++i)
    worst = std::max(worst, std::fabs(actual.losses[i] - expected.losses[i]));
  return worst;
}

}  // namespace ringmaster::testing
