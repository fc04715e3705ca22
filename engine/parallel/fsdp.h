// FullyShardedDataParallel in the manner of torch.distributed.fsdp: the model's parameters are
// grouped into units, each unit's parameters live in one flat buffer padded to a multiple of the
// world size, and each rank keeps (and optimizes) only its shard of every unit. full_shard (ZeRO-3)
// all-gathers a unit just before its forward and again before its backward, freeing it after each;
// shard_grad_op (ZeRO-2) keeps it gathered from forward to the end of backward; no_shard is DDP
// with one bucket per unit. Gradients are reduce-scattered (all-reduced for no_shard) per unit as
// soon as the unit's backward is done, overlapping the backward of the units before it.
// A unit is one block the model declares (units: layer) or all of them (units: model); blocks that
// share a tied parameter share a unit (the GPT's embedding and head: the root unit, as FSDP's
// transformer auto-wrap leaves them), which then stays gathered from its first block's forward to
// its last block's and from its last block's backward to its first block's.
// Mixed precision as FSDP's MixedPrecision: with a 16-bit param_dtype a unit's shard is cast to it
// and all-gathered in it (half the bytes), then widened into the float32 flat parameter the
// modules read, so they compute with the shards' values rounded to that dtype while the optimizer
// keeps updating the float32 shards (master weights); with a 16-bit reduce_dtype the gradients are
// reduced in it (ddp.h's preDividedCast) and widened into the float32 shard gradients.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "nn/layers.h"
#include "parallel/ddp.h"
#include "spec/strategies/fsdp.h"

namespace ringmaster {

struct FsdpOptions {
  FsdpSharding sharding = FsdpSharding::kFullShard;
  FsdpUnits units = FsdpUnits::kLayer;
  // full_shard: start the next unit's all-gather before running the current one (forward: the
  // next unit; backward: the previous one), as FSDP's forward_prefetch / BACKWARD_PRE.
  bool prefetch = true;
  // spec strategy.reduce_dtype: the dtype gradients are reduce-scattered (no_shard: all-reduced)
  // in; kF32, kBF16 or kF16.
  DType reduce_dtype = DType::kF32;
  // spec strategy.param_dtype: the dtype shards are all-gathered in, and so the precision of the
  // values the modules compute with (no_shard: the flat parameter rounded to it before each
  // forward, into a float32 copy of its own); kF32, kBF16 or kF16.
  DType param_dtype = DType::kF32;
};

// One FSDP unit: blocks of the model whose parameters share one flat parameter.
struct FsdpUnit {
  std::vector<size_t> blocks;              // indices into the model's blocks(), ascending
  std::vector<NamedParameter> parameters;  // the model's, state_dict names, each once
  std::vector<Shape> shapes;               // of those parameters
  int64_t numel = 0;                       // sum of the parameters' elements
  int64_t padded_numel = 0;                // numel rounded up to a multiple of the world size
  Parameter shard;      // this rank's [padded / world] slice (no_shard: the whole flat parameter)
  Tensor full;          // the gathered flat parameter, while materialised (float32)
  WorkPtr gathering;    // the all-gather filling `full` (or `gathered_low`), while in flight
  Tensor gathered_low;  // 16-bit param_dtype: what the all-gather fills, widened into `full`
  Tensor flat_grad;     // sharded: the unit's full gradient, from its backward's start to its end
};

class FullyShardedDataParallel {
 public:
  // Groups the model's blocks into units (one per block the model declares, or the whole
  // model; blocks tied by a shared parameter together), takes rank 0's values for every unit
  // (sync_module_states) and keeps this rank's shard; the modules' own parameter storage is
  // released. `model` and `comm` must outlive this object.
  FullyShardedDataParallel(Sequential& model, Communicator& comm, FsdpOptions options = {});

  Tensor forward(const Tensor& input);
  // Backward unit by unit, last first, each unit's gradient reduce-scattered into the shards' grads
  // (accumulating, so several micro-batches before one step give the accumulated gradient; FSDP's
  // no_sync would keep full gradients instead, which is the memory this strategy exists to save).
  // no_shard keeps DDP's no_sync: without `sync` the gradients only accumulate locally, and the
  // last micro-batch's backward all-reduces their sum.
  void backward(const Tensor& grad_output, bool sync = true);
  // Waits for the gradient reductions; the shards' grads then hold the average over ranks (a
  // 16-bit reduction's result widened to float32).
  GradientSyncTiming finishGradientSync();

  // What the optimizer updates: one flat shard per unit, named "flat_param.<unit>".
  std::vector<NamedParameter> shardParameters();
  // clip_grad_norm_ over the whole (sharded) model: the norm is reduced across ranks.
  double clipGradNorm(double max_norm);
  // The model's parameters with their full values, gathered on every rank (collective), named and
  // ordered as the unwrapped model's state_dict (a tied parameter once): for consolidated
  // checkpoints and for tests.
  std::vector<std::pair<std::string, Tensor>> fullParameters();
  // Elements of the unwrapped model's parameters (no padding).
  int64_t parameterCount() const;
  const std::vector<FsdpUnit>& units() const { return units_; }
  const FsdpOptions& options() const { return options_; }

 private:
  bool sharded() const { return options_.sharding != FsdpSharding::kNoShard; }
  bool lowPrecisionParameters() const { return options_.param_dtype != DType::kF32; }
  void startGather(size_t unit);
  void materialise(size_t unit);  // gathered and the modules' parameters point into it
  void release(size_t unit);      // the modules' parameters and the full buffer let go

  Sequential& model_;
  Communicator& comm_;
  FsdpOptions options_;
  std::vector<FsdpUnit> units_;
  std::vector<size_t> unit_of_block_;        // per block of the model
  std::vector<NamedParameter> state_order_;  // the model's namedParameters()
  struct PendingReduction {
    WorkPtr work;
    // The reduce-scatter's output, to be added to the shard's grad (widened first when 16-bit);
    // no_shard: undefined, or the 16-bit all-reduce whose sum replaces the shard's grad.
    Tensor reduced;
    size_t unit;
  };
  std::vector<PendingReduction> in_flight_;
};

}  // namespace ringmaster
