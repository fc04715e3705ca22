// The batch pass shared by the strategies that run the whole model on every rank, and the
// parameters of those that also keep it unsharded.
#include "parallel/strategy.h"

#include "nn/loss.h"
#include "optim/optimizer.h"
#include "tensor/ops.h"

namespace ringmaster {

BatchPass WholeModelStrategy::trainBatch(const std::vector<int64_t>& indices,
                                         const BatchMaker& make_batch, int accumulation,
                                         bool sync) {
  Batch batch = make_batch(indices);
  SoftmaxCrossEntropy loss_fn;
  Tensor logits = forward(batch.inputs);
  BatchPass pass;
  pass.loss = loss_fn.forward(logits, batch.targets);
  pass.correct = ops::countCorrect(logits, batch.targets);
  pass.samples = batch.targets.numel();
  backward(loss_fn.backward(1.0f / static_cast<float>(accumulation)), sync);
  return pass;
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
