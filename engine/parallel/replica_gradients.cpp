// Data parallelism over a pipeline stage's parameters (parallel/replica_gradients.h).
#include "parallel/replica_gradients.h"

#include <chrono>

#include "tensor/ops.h"

namespace ringmaster {

namespace {

// Points each parameter's value and gradient at its slice of the flat buffers, keeping its values.
void viewInto(std::vector<NamedParameter>& parameters, Tensor& flat_value, Tensor& flat_grad) {
  int64_t offset = 0;
  for (NamedParameter& named : parameters) {
    Parameter& p = *named.parameter;
    const int64_t numel = p.value.numel();
    Tensor value = flat_value.narrowRows(offset, numel).view(p.value.shape());
    Tensor grad = flat_grad.narrowRows(offset, numel).view(p.value.shape());
    value.copyFrom(p.value);
    if (p.grad.defined()) grad.copyFrom(p.grad);
    p.value = value;
    p.grad = grad;
    offset += numel;
  }
}

double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

ReplicaGradients::ReplicaGradients(std::vector<NamedParameter> parameters, Communicator& dp,
                                   bool sharded)
    : parameters_(std::move(parameters)), dp_(dp), sharded_(sharded) {
  for (const NamedParameter& named : parameters_) numel_ += named.parameter->value.numel();
  const int64_t shards = dp_.size();
  padded_numel_ = (numel_ + shards - 1) / shards * shards;
  const Device device = dp_.device();
  flat_value_ = Tensor::zeros({padded_numel_}, DType::kF32, device);
  flat_grad_ = Tensor::zeros({padded_numel_}, DType::kF32, device);
  viewInto(parameters_, flat_value_, flat_grad_);
  dp_.broadcast(flat_value_, 0)->wait();
  if (sharded_) {
    const int64_t shard_numel = padded_numel_ / shards;
    shard_.value = flat_value_.narrowRows(dp_.rank() * shard_numel, shard_numel).clone();
    shard_.grad = Tensor::zeros({shard_numel}, DType::kF32, device);
  }
}

GradientSyncTiming ReplicaGradients::reduce() {
  const auto start = std::chrono::steady_clock::now();
  if (!sharded_) {
    dp_.allReduce(flat_grad_, ReduceOp::avg())->wait();
  } else {
    Tensor reduced = Tensor::empty(shard_.grad.shape(), DType::kF32, dp_.device());
    dp_.reduceScatter(reduced, flat_grad_, ReduceOp::avg())->wait();
    ops::axpy(1.0f, reduced, shard_.grad);
    ops::fill(flat_grad_, 0.0f);
    stale_ = true;
  }
  const double ms = millisecondsSince(start);
  return {.comm_ms = ms, .exposed_comm_ms = ms};
}

void ReplicaGradients::gatherIfStale() {
  if (!sharded_ || !stale_) return;
  dp_.allGather(flat_value_, shard_.value)->wait();
  stale_ = false;
}

std::vector<NamedParameter> ReplicaGradients::optimizerParameters() {
  if (!sharded_) return parameters_;
  return {NamedParameter{"flat_param.stage", &shard_}};
}

}  // namespace ringmaster
