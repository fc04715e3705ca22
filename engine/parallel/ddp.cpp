// Bucket assignment, the start-up broadcast, and the overlapped gradient all-reduce of DDP (in
// float32, or in a 16-bit reduce dtype through a pre-divided copy of each bucket).
#include "parallel/ddp.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/error.h"
#include "tensor/ops.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<Parameter*> moduleParameters(Module& module) {
  std::vector<NamedParameter> named;
  module.collectParameters("", named);
  std::vector<Parameter*> out;
  for (const NamedParameter& p : named) out.push_back(p.parameter);
  return out;
}

// Slices of `buffer`, one per parameter, shaped like the parameter.
std::vector<Tensor> slices(const GradientBucket& bucket) {
  std::vector<Tensor> out;
  int64_t offset = 0;
  for (Parameter* p : bucket.parameters) {
    out.push_back(bucket.buffer.narrowRows(offset, p->value.numel()).view(p->value.shape()));
    offset += p->value.numel();
  }
  return out;
}

// The last bucket's last element, which no gradient occupies.
Tensor stopFlagOf(const GradientBucket& bucket) {
  return bucket.buffer.narrowRows(bucket.buffer.numel() - 1, 1);
}

}  // namespace

void checkReduceDType(DType dtype, const char* option) {
  RM_CHECK_ARG(dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
               fmt::format("{}: gradients reduce in float32, bfloat16 or float16, not {}", option,
                           dtypeName(dtype)));
}

Tensor preDividedCast(Tensor& grad, int world, DType dtype) {
  if (world > 1) ops::scale(grad, 1.0f / static_cast<float>(world));
  Tensor low = Tensor::empty(grad.shape(), dtype, grad.device());
  ops::cast(grad, low);
  return low;
}

DistributedDataParallel::DistributedDataParallel(Sequential& model, Communicator& comm,
                                                 DdpOptions options)
    : model_(model), comm_(comm), options_(options) {
  RM_CHECK_ARG(options.bucket_cap_mb > 0,
               fmt::format("strategy.bucket_cap_mb: {} is not positive", options.bucket_cap_mb));
  checkReduceDType(options.reduce_dtype, "strategy.reduce_dtype");
  assignBuckets();
  // Every replica starts from rank 0's parameters: each bucket's buffer carries its parameters'
  // values through one broadcast (fewer, larger messages than one per tensor), then becomes the
  // gradient storage.
  for (GradientBucket& bucket : buckets_) {
    std::vector<Tensor> views = slices(bucket);
    for (size_t i = 0; i < views.size(); ++i) views[i].copyFrom(bucket.parameters[i]->value);
    comm_.broadcast(bucket.buffer, 0)->wait();
    for (size_t i = 0; i < views.size(); ++i) {
      bucket.parameters[i]->value.copyFrom(views[i]);
      views[i].copyFrom(bucket.parameters[i]->grad);
      bucket.parameters[i]->grad = views[i];  // gradient_as_bucket_view
    }
  }
}

void DistributedDataParallel::assignBuckets() {
  // Reverse parameter order approximates the order backward produces gradients in, so the first
  // bucket fills first.
  const size_t modules = model_.size();
  module_buckets_.assign(modules, {});
  double cap_bytes = options_.first_bucket_mb * 1024 * 1024;
  int64_t bucket_bytes = 0;
  for (size_t m = modules; m-- > 0;) {
    std::vector<Parameter*> params = moduleParameters(model_.child(m));
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      Parameter* p = *it;
      RM_CHECK_ARG(p->value.dtype() == DType::kF32,
                   "DDP: parameters must be float32 (mixed precision keeps float32 masters)");
      if (buckets_.empty() || bucket_bytes >= cap_bytes) {
        if (!buckets_.empty()) cap_bytes = options_.bucket_cap_mb * 1024 * 1024;
        buckets_.emplace_back();
        bucket_bytes = 0;
      }
      buckets_.back().parameters.push_back(p);
      bucket_bytes += static_cast<int64_t>(p->value.nbytes());
      module_buckets_[m].push_back(buckets_.size() - 1);
    }
  }
  for (size_t m = 0; m < modules; ++m) {
    auto& list = module_buckets_[m];
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  for (GradientBucket& bucket : buckets_) {
    int64_t numel = &bucket == &buckets_.back() ? 1 : 0;  // the stop flag
    for (Parameter* p : bucket.parameters) numel += p->value.numel();
    bucket.buffer = Tensor::zeros({numel}, DType::kF32, bucket.parameters.front()->value.device());
  }
}

void DistributedDataParallel::backward(const Tensor& grad_output, bool sync) {
  RM_ENFORCE(in_flight_.empty(), "DDP: backward called before finishGradientSync()");
  if (sync) {
    for (GradientBucket& bucket : buckets_) bucket.modules_pending = 0;
    for (const auto& list : module_buckets_)
      for (size_t b : list) ++buckets_[b].modules_pending;
  }
  Tensor grad = grad_output;
  size_t next_bucket = 0;  // buckets start in index order on every rank
  for (size_t m = model_.size(); m-- > 0;) {
    grad = model_.backwardChild(m, grad);
    if (!sync) continue;
    for (size_t b : module_buckets_[m]) --buckets_[b].modules_pending;
    while (next_bucket < buckets_.size() && buckets_[next_bucket].modules_pending == 0) {
      const size_t b = next_bucket++;
      GradientBucket& bucket = buckets_[b];
      bucket.ready_after_module = static_cast<int>(m);
      if (b + 1 == buckets_.size()) {
        Tensor flag = stopFlagOf(bucket);
        ops::fill(flag, stop_flag_ ? 1.0f : 0.0f);
      }
      if (options_.reduce_dtype == DType::kF32) {
        // The communicator's stream must see the finished gradients.
        if (bucket.buffer.device().isCuda()) synchronize(bucket.buffer.device());
        in_flight_.push_back({comm_.allReduce(bucket.buffer, ReduceOp::avg()), b});
        continue;
      }
      bucket.reduce_buffer = preDividedCast(bucket.buffer, comm_.size(), options_.reduce_dtype);
      if (bucket.buffer.device().isCuda()) synchronize(bucket.buffer.device());
      in_flight_.push_back({comm_.allReduce(bucket.reduce_buffer, ReduceOp::sum()), b});
    }
  }
}

GradientSyncTiming DistributedDataParallel::finishGradientSync() {
  GradientSyncTiming timing;
  const auto start = Clock::now();
  for (const PendingReduction& pending : in_flight_) pending.work->wait();
  timing.exposed_comm_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  for (const PendingReduction& pending : in_flight_) {
    timing.comm_ms += pending.work->durationMs().value_or(0);
    GradientBucket& bucket = buckets_[pending.bucket];
    if (!bucket.reduce_buffer.defined()) continue;
    ops::cast(bucket.reduce_buffer, bucket.buffer);  // widening: exact
    bucket.reduce_buffer = Tensor();
  }
  in_flight_.clear();
  return timing;
}

bool DistributedDataParallel::anyRankOfferedStop() const {
  // Each rank's 0 or 1, averaged or pre-divided: positive exactly when some rank's was 1.
  return stopFlagOf(buckets_.back()).toFloatVector()[0] > 0.0f;
}

}  // namespace ringmaster
