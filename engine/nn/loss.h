// Softmax cross-entropy over class logits with integer labels and mean reduction, as
// nn.CrossEntropyLoss() with its defaults (no weights, no label smoothing, reduction = "mean").
#pragma once

#include <functional>
#include <memory>

#include "tensor/tensor.h"

namespace ringmaster {

// A loss over a model's output that the strategies hold: its forward gives the mean loss, its
// backward the output's gradient. Tensor parallelism's vocabulary-parallel cross-entropy is one
// (its logits are this rank's slice of the vocabulary).
class LossFunction {
 public:
  virtual ~LossFunction() = default;
  virtual double forward(const Tensor& logits, const Tensor& labels) = 0;
  virtual Tensor backward(float loss_scale = 1.0f) = 0;
  // Whether the logits hold every class, so that the argmax counts correct predictions.
  virtual bool wholeLogits() const { return true; }
};
using LossFactory = std::function<std::unique_ptr<LossFunction>()>;

class SoftmaxCrossEntropy final : public LossFunction {
 public:
  // logits [batch, classes] F32, labels [batch] I32; returns the mean loss over the batch. Or
  // logits [batch, tokens, vocabulary] and labels [batch, tokens]: the mean over every token (as
  // F.cross_entropy over logits.view(-1, V)); the backward's gradient has the logits' shape.
  double forward(const Tensor& logits, const Tensor& labels) override;
  // d(loss * loss_scale)/d(logits) for the last forward; loss_scale lets gradient accumulation
  // average over micro-steps.
  Tensor backward(float loss_scale = 1.0f) override;

 private:
  Tensor probs_, labels_;  // [rows, classes], [rows]
  Shape logits_shape_;
};

}  // namespace ringmaster
