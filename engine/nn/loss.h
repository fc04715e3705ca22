// Softmax cross-entropy over class logits with integer labels and mean reduction, as
// nn.CrossEntropyLoss() with its defaults (no weights, no label smoothing, reduction = "mean").
#pragma once

#include "tensor/tensor.h"

namespace ringmaster {

class SoftmaxCrossEntropy {
 public:
  // logits [batch, classes] F32, labels [batch] I32; returns the mean loss over the batch. Or
  // logits [batch, tokens, vocabulary] and labels [batch, tokens]: the mean over every token (as
  // F.cross_entropy over logits.view(-1, V)); the backward's gradient has the logits' shape.
  double forward(const Tensor& logits, const Tensor& labels);
  // d(loss * loss_scale)/d(logits) for the last forward; loss_scale lets gradient accumulation
  // average over micro-steps.
  Tensor backward(float loss_scale = 1.0f);

 private:
  Tensor probs_, labels_;  // [rows, classes], [rows]
  Shape logits_shape_;
};

}  // namespace ringmaster
