// The region mappings' forwards and backwards, and the sequence-axis collectives behind them: the
// communicator's all-gather and reduce-scatter work on contiguous blocks of the flat tensor, so a
// [B, T, C] activation is permuted to [tp, B, T/tp, C] (the blocks are then the sequence shards)
// and back.
#include "parallel/tensor_parallel/mappings.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tensor/ops.h"

namespace ringmaster {

namespace {

void checkActivation(const Tensor& x, const char* what) {
  RM_CHECK_ARG(x.rank() == 3 && x.dtype() == DType::kF32,
               fmt::format("{} expects an F32 activation [batch, tokens, width], got {}", what,
                           shapeStr(x.shape())));
}

}  // namespace

Tensor allReduceSum(const Tensor& x, Communicator& tp) {
  if (tp.size() == 1) return x;
  Tensor sum = x.clone();
  tp.allReduce(sum)->wait();
  return sum;
}

Tensor allGatherSequence(const Tensor& shard, Communicator& tp) {
  checkActivation(shard, "the sequence all-gather");
  if (tp.size() == 1) return shard;
  const int64_t B = shard.dim(0), S = shard.dim(1), C = shard.dim(2), P = tp.size();
  Tensor blocks = Tensor::empty({P, B, S * C}, DType::kF32, shard.device());  // rank-major
  tp.allGather(blocks, shard)->wait();
  Tensor full = Tensor::empty({1, B, P, S * C}, DType::kF32, shard.device());
  ops::permute0213(blocks.view({1, P, B, S * C}), full);
  return full.view({B, P * S, C});
}

Tensor reduceScatterSequence(const Tensor& x, Communicator& tp) {
  checkActivation(x, "the sequence reduce-scatter");
  const int64_t B = x.dim(0), T = x.dim(1), C = x.dim(2), P = tp.size();
  RM_CHECK_ARG(T % P == 0, fmt::format("sequence parallelism splits the {} tokens of a sample "
                                       "over {} tensor-parallel ranks: not a multiple",
                                       T, P));
  if (P == 1) return x;
  const int64_t S = T / P;
  Tensor blocks = Tensor::empty({1, P, B, S * C}, DType::kF32, x.device());
  ops::permute0213(x.view({1, B, P, S * C}), blocks);
  Tensor shard = Tensor::empty({B, S, C}, DType::kF32, x.device());
  tp.reduceScatter(shard, blocks)->wait();
  return shard;
}

Tensor CopyToTensorParallelRegion::forward(const Tensor& x, Communicator&) {
  return x;
}
Tensor CopyToTensorParallelRegion::backward(const Tensor& grad, Communicator& tp) {
  return allReduceSum(grad, tp);
}

Tensor ReduceFromTensorParallelRegion::forward(const Tensor& x, Communicator& tp) {
  return allReduceSum(x, tp);
}
Tensor ReduceFromTensorParallelRegion::backward(const Tensor& grad, Communicator&) {
  return grad;
}

Tensor GatherFromSequenceParallelRegion::forward(const Tensor& shard, Communicator& tp) {
  return allGatherSequence(shard, tp);
}
Tensor GatherFromSequenceParallelRegion::backward(const Tensor& grad, Communicator& tp) {
  return reduceScatterSequence(grad, tp);
}

Tensor ReduceScatterToSequenceParallelRegion::forward(const Tensor& x, Communicator& tp) {
  return reduceScatterSequence(x, tp);
}
Tensor ReduceScatterToSequenceParallelRegion::backward(const Tensor& shard_grad, Communicator& tp) {
  return allGatherSequence(shard_grad, tp);
}

void allReduceSumPacked(const std::vector<Tensor>& tensors, Communicator& comm) {
  int64_t total = 0;
  for (const Tensor& t : tensors) total += t.numel();
  if (total == 0) return;
  Tensor packed = Tensor::empty({total}, DType::kF32, comm.device());
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    packed.narrowRows(offset, t.numel()).copyFrom(t.view({t.numel()}));
    offset += t.numel();
  }
  comm.allReduce(packed)->wait();
  offset = 0;
  for (const Tensor& t : tensors) {
    Tensor(t).view({t.numel()}).copyFrom(packed.narrowRows(offset, t.numel()));
    offset += t.numel();
  }
}

}  // namespace ringmaster
