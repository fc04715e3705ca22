// DistributedDataParallel in the manner of torch.nn.parallel.DistributedDataParallel: replicas
// start from rank 0's parameters, gradients live in flat buckets (reverse parameter order, size
// capped), and a bucket's all-reduce starts as soon as backward has produced all of its gradients,
// so communication overlaps the backward of the earlier layers.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "nn/layers.h"

namespace ringmaster {

struct DdpOptions {
  double bucket_cap_mb = 25.0;   // spec strategy.bucket_cap_mb
  double first_bucket_mb = 1.0;  // PyTorch's _DEFAULT_FIRST_BUCKET_BYTES: the first bucket
                                 // (the last layers) is small so that communication starts early
};

// One bucket: a flat gradient buffer whose slices are the gradients of `parameters`.
struct GradientBucket {
  std::vector<Parameter*> parameters;  // in the order they occupy the buffer
  Tensor buffer;                       // 1-D, float32, on the model's device
  int modules_pending = 0;             // during backward: modules whose gradients are not ready
  // The model module whose backward completed this bucket in the last synchronised backward, and
  // so started its all-reduce while the modules before it were still to run (-1: not yet).
  int ready_after_module = -1;
};

// What one synchronised backward cost in communication.
struct GradientSyncTiming {
  double comm_ms = 0;          // the all-reduces' own durations, summed over buckets
  double exposed_comm_ms = 0;  // time the caller waited for them after backward had finished
};

class DistributedDataParallel {
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
  // average over ranks, as every rank's optimizer expects.
  GradientSyncTiming finishGradientSync();

  const std::vector<GradientBucket>& buckets() const { return buckets_; }

 private:
  void assignBuckets();

  Sequential& model_;
  Communicator& comm_;
  DdpOptions options_;
  std::vector<GradientBucket> buckets_;
  // For module i of the model: the buckets holding its parameters (with multiplicity).
  std::vector<std::vector<size_t>> module_buckets_;
  std::vector<WorkPtr> in_flight_;
};

}  // namespace ringmaster
