// The evaluation pass: this rank's validation batches, fixed at construction, run forward in eval
// mode; the loss sum and the token count all-reduced in one float32 operation.
#include "train/evaluation.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "data/distributed_sampler.h"

namespace ringmaster {

Evaluator::Evaluator(const Dataset& validation, int data_ranks, int data_rank, int64_t batch_size,
                     int64_t max_batches)
    : validation_(validation) {
  RM_CHECK_ARG(validation.size() > 0, "train.eval_every: the validation set has no samples");
  RM_CHECK_ARG(
      batch_size > 0 && max_batches > 0,
      fmt::format("train.eval_batches: {} batches of {} samples", max_batches, batch_size));
  // Disjoint samples per rank where there are enough (drop_last); otherwise PyTorch's padding by
  // repetition, so that every rank still has a sample and runs the same batches.
  const bool drop_last = validation.size() >= data_ranks;
  const DistributedSampler sampler(validation.size(), data_ranks, data_rank, /*shuffle=*/false,
                                   /*seed=*/0, drop_last);
  const std::vector<int64_t> indices = sampler.indices();
  for (size_t begin = 0;
       begin < indices.size() && static_cast<int64_t>(batches_.size()) < max_batches;
       begin += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(indices.size(), begin + static_cast<size_t>(batch_size));
    batches_.emplace_back(indices.begin() + static_cast<std::ptrdiff_t>(begin),
                          indices.begin() + static_cast<std::ptrdiff_t>(end));
  }
}

EvalEvent Evaluator::evaluate(int64_t step, Sequential& model, ParallelStrategy& runner,
                              Communicator* world, Device device) const {
  const auto start = std::chrono::steady_clock::now();
  const bool was_training = model.training();
  model.setTraining(false);
  double loss_sum = 0;
  int64_t tokens = 0;
  try {
    const BatchMaker make_batch = [&](const std::vector<int64_t>& indices) {
      return makeBatch(validation_, indices, device);
    };
    for (const std::vector<int64_t>& batch : batches_) {
      const EvalBatchPass pass = runner.evaluateBatch(batch, make_batch);
      loss_sum += pass.loss_sum;
      tokens += pass.tokens;
    }
  } catch (...) {
    model.setTraining(was_training);
    throw;
  }
  model.setTraining(was_training);
  if (world != nullptr && world->size() > 1) {
    // Sums over the ranks: float32 keeps the loss to about 7 digits and counts up to 2^24 exactly.
    Tensor totals = Tensor::fromVector({static_cast<float>(loss_sum), static_cast<float>(tokens)},
                                       {2}, world->device());
    world->allReduce(totals, ReduceOp::sum())->wait();
    const std::vector<float> summed = totals.toFloatVector();
    loss_sum = summed[0];
    tokens = std::llround(static_cast<double>(summed[1]));
  }
  const double val_loss = tokens > 0 ? loss_sum / static_cast<double>(tokens) : 0.0;
  synchronize(device);
  return EvalEvent{
      .step = step,
      .val_loss = val_loss,
      .perplexity = std::exp(val_loss),
      .tokens = tokens,
      .eval_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count()};
}

}  // namespace ringmaster
