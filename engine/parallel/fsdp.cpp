// Unit construction, the gather / release cycle around each unit's forward and backward, and the
// per-unit gradient reduction of FSDP.
#include "parallel/fsdp.h"

#include <chrono>

#include <fmt/format.h>

#include "core/error.h"
#include "optim/optimizer.h"
#include "parallel/grad_norm.h"
#include "tensor/ops.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;

// Where each of a unit's parameters sits in its flat buffer, shaped like the parameter.
std::vector<Tensor> parameterViews(const FsdpUnit& unit, const Tensor& flat) {
  std::vector<Tensor> views;
  int64_t offset = 0;
  for (const Shape& shape : unit.shapes) {
    const int64_t numel = shapeNumel(shape);
    views.push_back(flat.narrowRows(offset, numel).view(shape));
    offset += numel;
  }
  return views;
}

}  // namespace

FullyShardedDataParallel::FullyShardedDataParallel(Sequential& model, Communicator& comm,
                                                   FsdpOptions options)
    : model_(model), comm_(comm), options_(options) {
  // One unit per block the model declares (nn/model.h), or one for the whole model.
  RM_CHECK_ARG(!model_.blocks().empty(), "FSDP: the model declares no blocks");
  for (const ModelBlock& block : model_.blocks()) {
    if (units_.empty() || options_.units == FsdpUnits::kLayer) {
      units_.emplace_back();
      units_.back().first_module = block.first_child;
    }
    units_.back().end_module = block.end_child;
    for (size_t m = block.first_child; m < block.end_child; ++m)
      model_.child(m).collectParameters(fmt::format("{}.", m), units_.back().parameters);
  }

  const int shards = sharded() ? comm_.size() : 1;
  for (FsdpUnit& unit : units_) {
    RM_CHECK_ARG(!unit.parameters.empty(), fmt::format("FSDP: modules {}..{} hold no parameters",
                                                       unit.first_module, unit.end_module - 1));
    const Device device = unit.parameters.front().parameter->value.device();
    for (const NamedParameter& named : unit.parameters) {
      RM_CHECK_ARG(named.parameter->value.dtype() == DType::kF32,
                   fmt::format("FSDP: parameter {} must be float32", named.name));
      unit.shapes.push_back(named.parameter->value.shape());
      unit.numel += named.parameter->value.numel();
    }
    unit.padded_numel = (unit.numel + shards - 1) / shards * shards;
    // Every rank starts from rank 0's values (sync_module_states), carried by one broadcast of
    // the flat parameter; the padding is zeros and stays zeros (its gradient is zero).
    Tensor flat = Tensor::zeros({unit.padded_numel}, DType::kF32, device);
    std::vector<Tensor> views = parameterViews(unit, flat);
    for (size_t i = 0; i < views.size(); ++i)
      views[i].copyFrom(unit.parameters[i].parameter->value);
    comm_.broadcast(flat, 0)->wait();
    if (sharded()) {
      const int64_t shard_numel = unit.padded_numel / shards;
      unit.shard = makeParameter(flat.narrowRows(comm_.rank() * shard_numel, shard_numel).clone());
      for (const NamedParameter& named : unit.parameters) {
        named.parameter->value = Tensor();  // lives in the shards now
        named.parameter->grad = Tensor();
      }
    } else {
      unit.shard = makeParameter(flat);
      unit.full = flat;
      std::vector<Tensor> grads = parameterViews(unit, unit.shard.grad);
      for (size_t i = 0; i < views.size(); ++i) {
        unit.parameters[i].parameter->value = views[i];
        unit.parameters[i].parameter->grad = grads[i];
      }
    }
  }
}

void FullyShardedDataParallel::startGather(size_t index) {
  FsdpUnit& unit = units_[index];
  if (unit.full.defined() || unit.gathering) return;
  const Device device = unit.shard.value.device();
  if (device.isCuda()) synchronize(device);  // the optimizer's update must be in the shard
  unit.full = Tensor::empty({unit.padded_numel}, DType::kF32, device);
  unit.gathering = comm_.allGather(unit.full, unit.shard.value);
}

void FullyShardedDataParallel::materialise(size_t index) {
  if (!sharded()) return;
  startGather(index);
  FsdpUnit& unit = units_[index];
  if (unit.gathering) {
    unit.gathering->wait();
    unit.gathering = nullptr;
    std::vector<Tensor> views = parameterViews(unit, unit.full);
    for (size_t i = 0; i < views.size(); ++i) unit.parameters[i].parameter->value = views[i];
  }
}

void FullyShardedDataParallel::release(size_t index) {
  if (!sharded()) return;
  FsdpUnit& unit = units_[index];
  for (const NamedParameter& named : unit.parameters) named.parameter->value = Tensor();
  unit.full = Tensor();
}

Tensor FullyShardedDataParallel::forward(const Tensor& input) {
  const bool reshard_after_forward = options_.sharding == FsdpSharding::kFullShard;
  Tensor x = input;
  for (size_t u = 0; u < units_.size(); ++u) {
    materialise(u);
    if (sharded() && options_.prefetch && u + 1 < units_.size()) startGather(u + 1);
    for (size_t m = units_[u].first_module; m < units_[u].end_module; ++m)
      x = model_.forwardChild(m, x);
    if (reshard_after_forward) release(u);
  }
  return x;
}

void FullyShardedDataParallel::backward(const Tensor& grad_output, bool sync) {
  Tensor grad = grad_output;
  for (size_t u = units_.size(); u-- > 0;) {
    FsdpUnit& unit = units_[u];
    materialise(u);
    if (sharded() && options_.prefetch && u > 0) startGather(u - 1);
    Tensor flat_grad;
    if (sharded()) {
      flat_grad = Tensor::zeros({unit.padded_numel}, DType::kF32, unit.shard.value.device());
      std::vector<Tensor> grads = parameterViews(unit, flat_grad);
      for (size_t i = 0; i < grads.size(); ++i) unit.parameters[i].parameter->grad = grads[i];
    }
    for (size_t m = unit.end_module; m-- > unit.first_module;) grad = model_.backwardChild(m, grad);
    if (!sharded() && !sync) continue;
    if (unit.shard.value.device().isCuda()) synchronize(unit.shard.value.device());
    if (sharded()) {
      Tensor reduced =
          Tensor::empty({unit.shard.value.numel()}, DType::kF32, unit.shard.value.device());
      in_flight_.push_back({comm_.reduceScatter(reduced, flat_grad, ReduceOp::avg()), reduced, u});
      for (const NamedParameter& named : unit.parameters) named.parameter->grad = Tensor();
      release(u);
    } else {
      in_flight_.push_back({comm_.allReduce(unit.shard.grad, ReduceOp::avg()), Tensor(), u});
    }
  }
}

GradientSyncTiming FullyShardedDataParallel::finishGradientSync() {
  GradientSyncTiming timing;
  const auto start = Clock::now();
  for (const PendingReduction& pending : in_flight_) pending.work->wait();
  timing.exposed_comm_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  for (const PendingReduction& pending : in_flight_) {
    timing.comm_ms += pending.work->durationMs().value_or(0);
    if (pending.reduced.defined())
      ops::axpy(1.0f, pending.reduced, units_[pending.unit].shard.grad);
  }
  in_flight_.clear();
  return timing;
}

std::vector<NamedParameter> FullyShardedDataParallel::shardParameters() {
  std::vector<NamedParameter> out;
  for (size_t u = 0; u < units_.size(); ++u)
    out.push_back({fmt::format("flat_param.{}", u), &units_[u].shard});
  return out;
}

double FullyShardedDataParallel::clipGradNorm(double max_norm) {
  // no_shard: every rank holds the whole (averaged) gradient already.
  if (!sharded()) return ringmaster::clipGradNorm(shardParameters(), max_norm);
  return clipDistributedGradNorm(shardParameters(), comm_, max_norm);
}

std::vector<std::pair<std::string, Tensor>> FullyShardedDataParallel::fullParameters() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (FsdpUnit& unit : units_) {
    Tensor full = unit.full;
    if (sharded()) {
      full = Tensor::empty({unit.padded_numel}, DType::kF32, unit.shard.value.device());
      comm_.allGather(full, unit.shard.value)->wait();
    }
    std::vector<Tensor> views = parameterViews(unit, full);
    for (size_t i = 0; i < views.size(); ++i)
      out.emplace_back(unit.parameters[i].name, views[i].clone());
  }
  return out;
}

int64_t FullyShardedDataParallel::parameterCount() const {
  int64_t count = 0;
  for (const FsdpUnit& unit : units_) count += unit.numel;
  return count;
}

}  // namespace ringmaster
