// The evaluation pass on the validation set (train.eval_every): each data-parallel rank takes its
// own samples of the validation set (a DistributedSampler without shuffling, so the ranks' samples
// are disjoint), runs eval_batches batches forward in eval mode through the strategy, and the
// ranks average the loss over every token in one all-reduce. It draws nothing from the training
// streams (data order, dropout), so a run trains exactly as it would without it.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "data/dataset.h"
#include "nn/layers.h"
#include "parallel/strategy.h"
#include "telemetry/events.h"

namespace ringmaster {

class Evaluator {
 public:
  // `validation` must outlive the evaluator. Rank `data_rank` of `data_ranks` evaluates up to
  // `max_batches` batches of `batch_size` of its share (the last may be smaller; every rank runs
  // the same number). kInvalidArgument for an empty validation set.
  Evaluator(const Dataset& validation, int data_ranks, int data_rank, int64_t batch_size,
            int64_t max_batches);

  // Evaluates `model` (wrapped by `runner`) after optimizer step `step`: eval mode for the pass,
  // the model's training mode restored after. `world` (nullptr or one rank: no communication)
  // averages the loss over the ranks. Every rank gets the same val_loss and token count.
  EvalEvent evaluate(int64_t step, Sequential& model, ParallelStrategy& runner, Communicator* world,
                     Device device) const;

  // The batches of indices each evaluation runs on this rank.
  const std::vector<std::vector<int64_t>>& batches() const { return batches_; }

 private:
  const Dataset& validation_;
  std::vector<std::vector<int64_t>> batches_;
};

}  // namespace ringmaster
