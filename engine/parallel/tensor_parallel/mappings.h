// The tensor-parallel region mappings of Megatron-LM (megatron/core/tensor_parallel/mappings.py),
// each written once as a forward and its backward twin over the tensor-parallel group: every
// collective a tensor-parallel layer makes goes through one of these. Activations are [B, T, C];
// sequence shards are T / tp consecutive tokens, rank r holding tokens [r T / tp, (r + 1) T / tp).
// Each call waits for its collective; a one-rank group returns its input.
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "tensor/tensor.h"

namespace ringmaster {

// Into a tensor-parallel region whose ranks each hold the whole input (Megatron's
// copy_to_tensor_model_parallel_region, f in the paper): identity forward, all-reduce backward
// (each rank's region contributes part of the input's gradient).
struct CopyToTensorParallelRegion {
  static Tensor forward(const Tensor& x, Communicator& tp);
  static Tensor backward(const Tensor& grad, Communicator& tp);
};

// Out of a tensor-parallel region whose ranks each hold a partial sum
// (reduce_from_tensor_model_parallel_region, g): all-reduce forward, identity backward.
struct ReduceFromTensorParallelRegion {
  static Tensor forward(const Tensor& x, Communicator& tp);
  static Tensor backward(const Tensor& grad, Communicator& tp);
};

// From sequence shards [B, T/tp, C] into a region that needs every token
// (gather_from_sequence_parallel_region): all-gather along T forward [B, T, C], reduce-scatter
// backward (the region's ranks each contribute part of every token's gradient).
struct GatherFromSequenceParallelRegion {
  static Tensor forward(const Tensor& shard, Communicator& tp);
  static Tensor backward(const Tensor& grad, Communicator& tp);
};

// Out of a region of partial sums into sequence shards
// (reduce_scatter_to_sequence_parallel_region): reduce-scatter along T forward [B, T, C] -> [B,
// T/tp, C], all-gather backward.
struct ReduceScatterToSequenceParallelRegion {
  static Tensor forward(const Tensor& x, Communicator& tp);
  static Tensor backward(const Tensor& shard_grad, Communicator& tp);
};

// The collectives behind them, along the sequence axis of [B, T, C] activations.
// All-reduce (sum) into a new tensor.
Tensor allReduceSum(const Tensor& x, Communicator& tp);
// Sums each of `tensors` over `comm` in place with one all-reduce of them packed into one buffer
// (small ones: the gradients every tp rank holds whole, under sequence parallelism).
void allReduceSumPacked(const std::vector<Tensor>& tensors, Communicator& comm);
// [B, T/tp, C] on each rank -> [B, T, C], rank r's tokens at [r T / tp, (r + 1) T / tp).
Tensor allGatherSequence(const Tensor& shard, Communicator& tp);
// [B, T, C] partial sums on each rank -> rank r's tokens of their sum, [B, T/tp, C]. T must be a
// multiple of tp (kInvalidArgument otherwise).
Tensor reduceScatterSequence(const Tensor& x, Communicator& tp);

}  // namespace ringmaster
