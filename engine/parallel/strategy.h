// The running half of a parallel strategy: the model wrapped for training on this rank (forward,
// loss and backward over a batch, gradient sync, the parameters the optimizer updates, gradient
// clipping, checkpoint layout, the full state dict). The trainer calls only this interface; each
// strategy implements it in its own <name>_strategy.cpp, and parallel/strategies.cpp lists them.
// What a strategy is before it runs (options, checks, memory) is its plan: spec/strategies/plan.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "data/dataset.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "parallel/ddp.h"  // GradientSyncTiming
#include "parallel/pipeline.h"
#include "spec/job_spec.h"

namespace ringmaster {

// The whole model's parameters, named as the unwrapped model's state_dict.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

// Makes the batch of the samples `indices` (dataset indices) on the rank's device.
using BatchMaker = std::function<Batch(const std::vector<int64_t>& indices)>;

// One batch's forward and backward on this rank.
struct BatchPass {
  double loss = 0;  // mean loss over the batch's samples
  int64_t correct = 0;
  int64_t samples = 0;
  // Communication inside the pass (a pipeline's transfers; the data-parallel strategies' gradient
  // reductions come from finishGradientSync), and the time blocked waiting for another stage.
  double comm_ms = 0;
  double exposed_comm_ms = 0;
  double wait_ms = 0;
  // The schedule's actions this rank ran (a pipeline), micro-batches numbered within the batch.
  std::vector<ExecutedAction> actions;
};

// One batch's forward and loss alone (an evaluation): no backward, no gradient, no optimizer.
struct EvalBatchPass {
  double loss_sum = 0;  // the loss summed over the batch's target tokens (mean x tokens)
  int64_t tokens = 0;   // target elements: samples x tokens per sample (1 for a classifier)
};

class ParallelStrategy {
 public:
  virtual ~ParallelStrategy() = default;

  // Forward, loss and backward over the batch of `indices`, one of `accumulation` batches whose
  // gradients sum to one step's (each loss gradient scaled by lossScale() / accumulation; the
  // loss reported is the true one). `sync`: the last
  // of them, whose backward reduces the gradients across ranks (the others only accumulate them:
  // no_sync).
  virtual BatchPass trainBatch(const std::vector<int64_t>& indices, const BatchMaker& make_batch,
                               int accumulation, bool sync) = 0;
  // Forward and loss over the batch of `indices` with the model as it is set (the trainer sets
  // eval mode first): touches no gradient. Collective where the forward is (FSDP's gathers, a
  // pipeline's stages): every rank calls it the same number of times, and a pipeline's every rank
  // returns the last stage's loss. The default throws: a strategy that cannot evaluate.
  virtual EvalBatchPass evaluateBatch(const std::vector<int64_t>& indices,
                                      const BatchMaker& make_batch);
  // Waits for the gradient reductions the last synchronised backward started.
  virtual GradientSyncTiming finishGradientSync() { return {}; }
  // What carries the ranks' stop flags with each step's own traffic across every rank of the
  // world (DDP over the whole world: its last gradient bucket), so that the trainer's stop
  // agreement needs no collective of its own; nullptr where the traffic cannot (FSDP, a pipeline,
  // tp, a dp group smaller than the world, one rank): the trainer then agrees asynchronously
  // (train/stop_agreement.h).
  virtual StopFlagCarrier* stopFlagCarrier() { return nullptr; }
  // What the optimizer updates on this rank, state_dict-named (a shard, a stage, or everything).
  virtual std::vector<NamedParameter> optimizerParameters() = 0;
  // clip_grad_norm_ over the whole model, across ranks where it is split.
  virtual double clipGradNorm(double max_norm) = 0;
  // Forward passes each module makes per batch (a pipeline's micro-batches): the dropout streams
  // advance this much per batch.
  virtual int forwardsPerBatch() const { return 1; }
  // Checkpoint layout: one checkpoint per rank (sharded or staged models), or one for all that
  // rank 0 writes (replicated ones).
  virtual bool perRankCheckpoints() const { return false; }
  // Whether checkpoint.consolidate applies: rank 0 also writes fullStateDict() beside the shards.
  virtual bool consolidates() const { return false; }
  // The whole model's parameters with their full values (collective where the model is split).
  virtual StateDict fullStateDict() = 0;
  // The model this rank runs (a tensor-parallel split of the built one, or the built one): the
  // trainer sets its mode and rewinds its dropout streams.
  virtual Sequential& model() = 0;
  // The ranks that split each batch's data between them, for sums over the data (the evaluation
  // loss); nullptr where there is one.
  virtual Communicator* dataParallelGroup() { return nullptr; }

  // The factor every loss gradient is multiplied by from the next batch on: fp16's loss scale
  // (optim/grad_scaler.h; the trainer unscales the gradients after the sync), 1 otherwise.
  void setLossScale(float scale) { loss_scale_ = scale; }
  float lossScale() const { return loss_scale_; }

 private:
  float loss_scale_ = 1.0f;
};

// What a strategy is made from: the built model, the world communicator (nullptr for `single`)
// and the spec, whose strategy options it reads.
struct StrategySetup {
  Sequential& model;
  Communicator* world = nullptr;
  const JobSpec& spec;
};

// The strategy of spec.strategy's mesh around `setup.model` (parallel/strategies.cpp).
std::unique_ptr<ParallelStrategy> makeParallelStrategy(const StrategySetup& setup);

// For the strategies that run the model whole on every rank: forward, softmax cross-entropy and
// backward over one batch, through forward() and backward() below.
class WholeModelStrategy : public ParallelStrategy {
 public:
  BatchPass trainBatch(const std::vector<int64_t>& indices, const BatchMaker& make_batch,
                       int accumulation, bool sync) override;
  EvalBatchPass evaluateBatch(const std::vector<int64_t>& indices,
                              const BatchMaker& make_batch) override;

 protected:
  virtual Tensor forward(const Tensor& input) = 0;
  virtual void backward(const Tensor& grad_output, bool sync) = 0;
  // The loss over forward()'s output: softmax cross-entropy unless the output is split.
  virtual std::unique_ptr<LossFunction> makeLoss() const;
};

// For the strategies that keep every parameter whole and identical on every rank (`single`,
// `ddp`): the optimizer, clipping and the full state dict see the model's own parameters.
class ReplicatedModelStrategy : public WholeModelStrategy {
 public:
  explicit ReplicatedModelStrategy(Sequential& model) : model_(model) {}

  std::vector<NamedParameter> optimizerParameters() override;
  double clipGradNorm(double max_norm) override;
  StateDict fullStateDict() override;
  Sequential& model() override { return model_; }

 protected:
  Sequential& model_;
};

}  // namespace ringmaster
