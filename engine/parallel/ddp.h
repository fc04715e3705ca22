// DistributedDataParallel in the manner of torch.nn.parallel.DistributedDataParallel: replicas
// start from rank 0's parameters, gradients live in flat buckets (reverse parameter order, size
// capped), and a bucket's all-reduce starts as soon as backward has produced all of its gradients,
// so communication overlaps the backward of the earlier layers. With a 16-bit reduce dtype (FSDP's
// MixedPrecision.reduce_dtype, DDP's bf16 / fp16 compress hooks) a bucket is divided by the world
// size, cast to that dtype and summed across ranks in it, then widened back into the fp32 buffer.
// The last bucket has one element more, no gradient's: the ranks' stop flags, which the trainer's
// stop agreement sends with the gradients instead of in a collective of its own.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "nn/layers.h"
#include "spec/strategies/ddp.h"

namespace ringmaster {

struct DdpOptions {
  double bucket_cap_mb = 25.0;                 // spec strategy.bucket_cap_mb
  double first_bucket_mb = kDdpFirstBucketMb;  // spec/strategies/ddp.h
  // The dtype buckets are reduced in (spec strategy.reduce_dtype): kF32 (each bucket's own buffer
  // all-reduced as it is), kBF16 or kF16 (a 16-bit copy: half the bytes on the wire).
  DType reduce_dtype = DType::kF32;
};

// One bucket: a flat gradient buffer whose slices are the gradients of `parameters`.
struct GradientBucket {
  std::vector<Parameter*> parameters;  // in the order they occupy the buffer
  // 1-D, float32, on the model's device; the last bucket's last element is the stop flag.
  Tensor buffer;
  // 16-bit reduce dtype: the buffer divided by the world size and cast, from the bucket's
  // all-reduce start until finishGradientSync() widens the sum back into `buffer` (else undefined).
  Tensor reduce_buffer;
  int modules_pending = 0;  // during backward: modules whose gradients are not ready
  // The model module whose backward completed this bucket in the last synchronised backward, and
  // so started its all-reduce while the modules before it were still to run (-1: not yet).
  int ready_after_module = -1;
};

// What one synchronised backward cost in communication.
struct GradientSyncTiming {
  double comm_ms = 0;          // the all-reduces' own durations, summed over buckets
  double exposed_comm_ms = 0;  // time the caller waited for them after backward had finished
};

// The ranks' stop flags carried by a strategy's own per-step traffic (a reduction that spans every
// rank of the world each step), so that the trainer's stop agreement (train/stop_agreement.h)
// needs no collective of its own.
class StopFlagCarrier {
 public:
  virtual ~StopFlagCarrier() = default;
  // This rank's flag for the next synchronised backward's reduction (kept until changed).
  virtual void offerStopFlag(bool stop) = 0;
  // After finishGradientSync(): whether any rank offered true to that reduction. Every rank reads
  // the same verdict: the flags are summed with the gradients.
  virtual bool anyRankOfferedStop() const = 0;
};

// strategy.reduce_dtype for DDP and FSDP: kF32, or a 16-bit format (kBF16, kF16) whose reduction
// sums pre-divided copies. Throws kInvalidArgument naming `option` for any other dtype.
void checkReduceDType(DType dtype, const char* option);
// What a rank contributes to a 16-bit SUM that averages over `world` ranks: `grad` (float32) is
// divided by `world` in place (in fp32, so one rounding in all: the cast's) and cast to `dtype`.
// Dividing first, as PyTorch's compress hooks do, keeps an fp16 sum from overflowing where the
// average would not.
Tensor preDividedCast(Tensor& grad, int world, DType dtype);

class DistributedDataParallel final : public StopFlagCarrier {
 public:
  // Broadcasts rank 0's parameters to every rank (blocking) and moves the gradients into
  // buckets. `model` and `comm` must outlive this object.
  DistributedDataParallel(Sequential& model, Communicator& comm, DdpOptions options = {});

  Tensor forward(const Tensor& input) { return model_.forward(input); }
  // Backward module by module, last first. With `sync` (the last micro-batch of an accumulation,
  // or every one without accumulation), each bucket's average all-reduce starts as soon as its
  // gradients are complete; without it (no_sync) gradients only accumulate locally.
  void backward(const Tensor& grad_output, bool sync = true);
  // Waits for the all-reduces the last synchronised backward started. The gradients then hold the
  // average over ranks, as every rank's optimizer expects (a 16-bit reduction's sum widened back
  // into the buckets).
  GradientSyncTiming finishGradientSync();
  // The stop flag rides in the last bucket, the last to start in every synchronised backward: a
  // 1 or a 0 averaged (or pre-divided and summed) with the gradients, positive when any rank
  // offered 1.
  void offerStopFlag(bool stop) override { stop_flag_ = stop; }
  bool anyRankOfferedStop() const override;

  const std::vector<GradientBucket>& buckets() const { return buckets_; }

 private:
  void assignBuckets();

  Sequential& model_;
  Communicator& comm_;
  DdpOptions options_;
  std::vector<GradientBucket> buckets_;
  // For module i of the model: the buckets holding its parameters (with multiplicity).
  std::vector<std::vector<size_t>> module_buckets_;
  struct PendingReduction {
    WorkPtr work;
    size_t bucket;
  };
  std::vector<PendingReduction> in_flight_;
  bool stop_flag_ = false;
};

}  // namespace ringmaster
