// The loss interface the strategies hold (LossFunction) and its one-process implementation:
// softmax cross-entropy over class logits with integer labels and mean reduction, as
// nn.CrossEntropyLoss() with its defaults (no weights, no label smoothing, reduction = "mean").
// The vocabulary-parallel cross-entropy (parallel/tensor_parallel/) is the other implementation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "tensor/tensor.h"

namespace ringmaster {

// A loss over logits [rows, classes] (or [batch, tokens, vocabulary]) and integer labels, with
// the backward of its last forward.
class LossFunction {
 public:
  virtual ~LossFunction() = default;
  // The mean loss over every label.
  virtual double forward(const Tensor& logits, const Tensor& labels) = 0;
  // d(loss * loss_scale)/d(logits) for the last forward, in the logits' shape; loss_scale lets
  // gradient accumulation average over micro-steps.
  virtual Tensor backward(float loss_scale = 1.0f) = 0;
  // The labels of the last forward whose logit is the largest of their row (accuracy).
  virtual int64_t correct() const = 0;
};

using LossFactory = std::function<std::unique_ptr<LossFunction>()>;

class SoftmaxCrossEntropy : public LossFunction {
 public:
  // logits [batch, classes] F32, labels [batch] I32; returns the mean loss over the batch. Or
  // logits [batch, tokens, vocabulary] and labels [batch, tokens]: the mean over every token (as
  // F.cross_entropy over logits.view(-1, V)); the backward's gradient has the logits' shape.
  double forward(const Tensor& logits, const Tensor& labels) override;
  Tensor backward(float loss_scale = 1.0f) override;
  int64_t correct() const override;

 private:
  Tensor probs_, labels_;  // [rows, classes], [rows]
  Shape logits_shape_;
};

}  // namespace ringmaster
