// Softmax cross-entropy over class logits with integer labels and mean reduction, as
// nn.CrossEntropyLoss() with its defaults (no weights, no label smoothing, reduction = "mean").
#pragma once

#include "tensor/tensor.h"

namespace ringmaster {

class SoftmaxCrossEntropy {
 public:
  // logits [batch, classes] F32, labels [batch] I32; returns the mean loss over the batch.
  double forward(const Tensor& logits, const Tensor& labels);
  // d(loss * loss_scale)/d(logits) for the last forward; loss_scale lets gradient accumulation
  // average over micro-steps.
  Tensor backward(float loss_scale = 1.0f);

 private:
  Tensor probs_, labels_;
};

}  // namespace ringmaster
