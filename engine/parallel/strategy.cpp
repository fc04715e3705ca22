// The batch pass shared by the strategies that run the whole model on every rank, and the
// parameters of those that also keep it unsharded.
#include "parallel/strategy.h"

#include "core/error.h"
#include "nn/loss.h"
#include "optim/optimizer.h"
#include "tensor/ops.h"

namespace ringmaster {

BatchPass WholeModelStrategy::trainBatch(const std::vector<int64_t>& indices,
                                         const BatchMaker& make_batch, int accumulation,
                                         bool sync) {
  Batch batch = make_batch(indices);
  const std::unique_ptr<LossFunction> loss_fn = makeLoss();
  Tensor logits = forward(batch.inputs);
  BatchPass pass;
  pass.loss = loss_fn->forward(logits, batch.targets);
  // Logits [samples, classes], or [samples, tokens, vocabulary] for a language model: the loss
  // is the mean over every target, correct counts targets, samples counts samples.
  pass.correct = loss_fn->correct();
  pass.samples = batch.targets.dim(0);
  backward(loss_fn->backward(lossScale() / static_cast<float>(accumulation)), sync);
  return pass;
}

EvalBatchPass ParallelStrategy::evaluateBatch(const std::vector<int64_t>&, const BatchMaker&) {
  RM_THROW(kInvalidArgument,
           "train.eval_every: this strategy does not evaluate (its ranks do not all hold the "
           "loss); set train.eval_every to 0");
}

EvalBatchPass WholeModelStrategy::evaluateBatch(const std::vector<int64_t>& indices,
                                                const BatchMaker& make_batch) {
  Batch batch = make_batch(indices);
  const std::unique_ptr<LossFunction> loss_fn = makeLoss();
  const Tensor logits = forward(batch.inputs);
  const int64_t tokens = batch.targets.numel();
  return {.loss_sum = loss_fn->forward(logits, batch.targets) * static_cast<double>(tokens),
          .tokens = tokens};
}

std::unique_ptr<LossFunction> WholeModelStrategy::makeLoss() const {
  return std::make_unique<SoftmaxCrossEntropy>();
}

std::vector<NamedParameter> ReplicatedModelStrategy::optimizerParameters() {
  return model_.namedParameters();
}

double ReplicatedModelStrategy::clipGradNorm(double max_norm) {
  return ringmaster::clipGradNorm(model_.namedParameters(), max_norm);
}

StateDict ReplicatedModelStrategy::fullStateDict() {
  StateDict state;
  for (const NamedParameter& p : model_.namedParameters())
    state.emplace_back(p.name, p.parameter->value);
  return state;
}

}  // namespace ringmaster
