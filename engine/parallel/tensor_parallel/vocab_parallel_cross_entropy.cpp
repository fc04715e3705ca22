// Vocabulary-parallel cross-entropy: three all-reduces of one value per token (maximum, then the
// sum of exponentials and the target's logit in one buffer). The per-token statistics are computed
// on the host from a copy of the rank's logits; a device kernel for them is future work.
#include "parallel/tensor_parallel/vocab_parallel_cross_entropy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace ringmaster {

namespace {

// values all-reduced with `op` over the group (on the communicator's device), back on the host.
std::vector<float> allReduced(const std::vector<float>& values, ReduceOp op, Communicator& tp) {
  if (tp.size() == 1) return values;
  Tensor t = Tensor::fromVector(values, {static_cast<int64_t>(values.size())}, tp.device());
  tp.allReduce(t, op)->wait();
  return t.toFloatVector();
}

}  // namespace

VocabParallelCrossEntropy::VocabParallelCrossEntropy(Communicator& tp, int64_t vocab_start)
    : tp_(tp), vocab_start_(vocab_start) {}

double VocabParallelCrossEntropy::forward(const Tensor& local_logits, const Tensor& labels) {
  RM_CHECK_ARG(local_logits.rank() >= 2 && local_logits.dtype() == DType::kF32,
               "cross-entropy expects F32 logits [batch, ..., classes]");
  const int64_t columns = local_logits.dim(static_cast<int>(local_logits.rank() - 1));
  const int64_t rows = local_logits.numel() / columns;
  RM_CHECK_ARG(labels.numel() == rows && labels.dtype() == DType::kI32,
               fmt::format("cross-entropy: {} labels for logits {}", labels.numel(),
                           shapeStr(local_logits.shape())));
  logits_shape_ = local_logits.shape();
  device_ = local_logits.device();
  const std::vector<float> x = local_logits.toFloatVector();
  const std::vector<float> label_ids = labels.toFloatVector();

  std::vector<float> maxima(static_cast<size_t>(rows), -std::numeric_limits<float>::infinity());
  label_columns_.assign(static_cast<size_t>(rows), -1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = &x[static_cast<size_t>(r * columns)];
    maxima[r] = *std::max_element(row, row + columns);
    const auto label = static_cast<int64_t>(label_ids[r]);
    RM_CHECK_ARG(label >= 0 && label < columns * tp_.size(),
                 fmt::format("label {} of row {} is outside the vocabulary [0, {})", label, r,
                             columns * tp_.size()));
    const int64_t column = label - vocab_start_;
    if (column >= 0 && column < columns) label_columns_[r] = column;
  }
  maxima = allReduced(maxima, ReduceOp::max(), tp_);

  // Per row: the sum of exp(x - max) over the rank's columns, and the label's logit where held.
  std::vector<float> sums_and_targets(static_cast<size_t>(2 * rows), 0.0f);
  probs_.resize(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < columns; ++c) {
      const size_t at = static_cast<size_t>(r * columns + c);
      probs_[at] = std::exp(x[at] - maxima[r]);
      sum += probs_[at];
    }
    sums_and_targets[r] = static_cast<float>(sum);
    if (label_columns_[r] >= 0)
      sums_and_targets[rows + r] = x[static_cast<size_t>(r * columns + label_columns_[r])];
  }
  sums_and_targets = allReduced(sums_and_targets, ReduceOp::sum(), tp_);

  double loss = 0;
  correct_ = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float sum = sums_and_targets[r], target = sums_and_targets[rows + r];
    loss += std::log(static_cast<double>(sum)) + maxima[r] - target;
    if (target >= maxima[r]) ++correct_;
    for (int64_t c = 0; c < columns; ++c) probs_[static_cast<size_t>(r * columns + c)] /= sum;
  }
  return rows > 0 ? loss / static_cast<double>(rows) : 0.0;
}

Tensor VocabParallelCrossEntropy::backward(float loss_scale) {
  RM_CHECK_ARG(!logits_shape_.empty(), "VocabParallelCrossEntropy::backward before forward");
  const auto rows = static_cast<int64_t>(label_columns_.size());
  const int64_t columns = rows > 0 ? static_cast<int64_t>(probs_.size()) / rows : 0;
  const float scale = rows > 0 ? loss_scale / static_cast<float>(rows) : 0.0f;
  std::vector<float> grad(probs_.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < columns; ++c) {
      const size_t at = static_cast<size_t>(r * columns + c);
      grad[at] = (probs_[at] - (c == label_columns_[r] ? 1.0f : 0.0f)) * scale;
    }
  }
  return Tensor::fromVector(grad, logits_shape_, device_);
}

}  // namespace ringmaster
