// The cross-entropy of a vocabulary-parallel LM head (Megatron-LM's cross_entropy.py): each
// tensor-parallel rank holds its vocabulary columns of the logits, and the full logits are never
// gathered: per token the maximum, the sum of exponentials and the target's logit are each
// all-reduced over the group, and the backward gives the rank's columns of the gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "nn/loss.h"

namespace ringmaster {

class VocabParallelCrossEntropy : public LossFunction {
 public:
  // `vocab_start`: the first vocabulary id of this rank's logits (rank * V / tp).
  VocabParallelCrossEntropy(Communicator& tp, int64_t vocab_start);
  // local_logits [..., V/tp] (this rank's columns), labels [...] I32 of global ids (the same on
  // every rank of the group); the mean loss over every label, equal on every rank. Collective.
  double forward(const Tensor& local_logits, const Tensor& labels) override;
  // d(loss * loss_scale)/d(local logits): softmax minus one-hot on the rank's columns, over the
  // labels' count. No collective.
  Tensor backward(float loss_scale = 1.0f) override;
  // Labels whose logit is the row's largest over the whole vocabulary.
  int64_t correct() const override { return correct_; }

 private:
  Communicator& tp_;
  int64_t vocab_start_;
  // From the last forward, on the host: the rank's softmax columns and the labels' local columns
  // (-1 where the label is another rank's).
  std::vector<float> probs_;
  std::vector<int64_t> label_columns_;
  Shape logits_shape_;
  Device device_;
  int64_t correct_ = 0;
};

}  // namespace ringmaster
