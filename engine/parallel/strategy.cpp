// The batch pass shared by the strategies that run the whole model on every rank.
#include "parallel/strategy.h"

#include "nn/loss.h"
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

}  // namespace ringmaster
