// Unit construction, the gather / release cycle around each unit's forward and backward, and the
// per-unit gradient reduction of FSDP, in float32 or in the 16-bit dtypes of its MixedPrecision.
#include "parallel/fsdp.h"

#include <chrono>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "optim/optimizer.h"
#include "parallel/grad_norm.h"
#include "parallel/tied_parameters.h"
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
  checkReduceDType(options_.reduce_dtype, "strategy.reduce_dtype");
  RM_CHECK_ARG(options_.param_dtype == DType::kF32 || options_.param_dtype == DType::kBF16 ||
                   options_.param_dtype == DType::kF16,
               fmt::format("strategy.param_dtype: shards are gathered in float32, bfloat16 or "
                           "float16, not {}",
                           dtypeName(options_.param_dtype)));
  // One unit per block the model declares (nn/model.h), or one for the whole model; a block that
  // reads another's parameter (a tie) joins that block's unit, so that the parameter is gathered
  // for both and its gradient from both is reduced once.
  const std::vector<ModelBlock>& blocks = model_.blocks();
  RM_CHECK_ARG(!blocks.empty(), "FSDP: the model declares no blocks");
  const ModelParameters names(model_);
  state_order_ = names.all();
  std::vector<size_t> label(blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) label[b] = options_.units == FsdpUnits::kLayer ? b : 0;
  for (size_t b = 0; b < blocks.size(); ++b) {
    for (const NamedParameter& tied : names.tiedInto(blocks[b].first_child, blocks[b].end_child)) {
      const size_t from = label[b], to = label[names.ownerBlock(tied.parameter)];
      for (size_t& l : label) l = l == from ? to : l;
    }
  }
  unit_of_block_.assign(blocks.size(), 0);
  std::vector<size_t> unit_of_label(blocks.size(), blocks.size());
  for (size_t b = 0; b < blocks.size(); ++b) {
    if (unit_of_label[label[b]] == blocks.size()) {
      unit_of_label[label[b]] = units_.size();
      units_.emplace_back();
    }
    FsdpUnit& unit = units_[unit_of_label[label[b]]];
    unit_of_block_[b] = unit_of_label[label[b]];
    unit.blocks.push_back(b);
    for (const NamedParameter& named : names.held(blocks[b].first_child, blocks[b].end_child))
      unit.parameters.push_back(named);
  }

  const int shards = sharded() ? comm_.size() : 1;
  for (FsdpUnit& unit : units_) {
    std::string unit_blocks;
    for (size_t b : unit.blocks) unit_blocks += (unit_blocks.empty() ? "" : ", ") + blocks[b].name;
    RM_CHECK_ARG(!unit.parameters.empty(),
                 fmt::format("FSDP: the unit of blocks {} holds no parameters", unit_blocks));
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
      // With a 16-bit param_dtype the modules read a rounded copy (forward() refreshes it).
      unit.full = lowPrecisionParameters() ? flat.clone() : flat;
      views = parameterViews(unit, unit.full);
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
  if (!lowPrecisionParameters()) {
    if (device.isCuda()) synchronize(device);  // the optimizer's update must be in the shard
    unit.full = Tensor::empty({unit.padded_numel}, DType::kF32, device);
    unit.gathering = comm_.allGather(unit.full, unit.shard.value);
    return;
  }
  // The communicator keeps the cast shard alive until the all-gather is done.
  const Tensor low = ops::cast(unit.shard.value, options_.param_dtype);
  if (device.isCuda()) synchronize(device);
  unit.gathered_low = Tensor::empty({unit.padded_numel}, options_.param_dtype, device);
  unit.gathering = comm_.allGather(unit.gathered_low, low);
}

void FullyShardedDataParallel::materialise(size_t index) {
  if (!sharded()) return;
  startGather(index);
  FsdpUnit& unit = units_[index];
  if (unit.gathering) {
    unit.gathering->wait();
    unit.gathering = nullptr;
    if (unit.gathered_low.defined()) {
      unit.full = Tensor::empty({unit.padded_numel}, DType::kF32, unit.shard.value.device());
      ops::cast(unit.gathered_low, unit.full);  // widening: exact
      unit.gathered_low = Tensor();
    }
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
  const std::vector<ModelBlock>& blocks = model_.blocks();
  Tensor x = input;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const size_t u = unit_of_block_[b];
    materialise(u);
    if (!sharded() && lowPrecisionParameters() && b == units_[u].blocks.front()) {
      // no_shard: the flat parameter as the modules compute with it, after the last step.
      units_[u].full.copyFrom(units_[u].shard.value);
      ops::roundThrough(units_[u].full, options_.param_dtype);
    }
    if (sharded() && options_.prefetch && b + 1 < blocks.size()) startGather(unit_of_block_[b + 1]);
    for (size_t m = blocks[b].first_child; m < blocks[b].end_child; ++m)
      x = model_.forwardChild(m, x);
    if (reshard_after_forward && b == units_[u].blocks.back()) release(u);
  }
  return x;
}

void FullyShardedDataParallel::backward(const Tensor& grad_output, bool sync) {
  const std::vector<ModelBlock>& blocks = model_.blocks();
  Tensor grad = grad_output;
  for (size_t b = blocks.size(); b-- > 0;) {
    const size_t u = unit_of_block_[b];
    FsdpUnit& unit = units_[u];
    if (b == unit.blocks.back()) {  // the unit's backward starts
      materialise(u);
      if (sharded()) {
        unit.flat_grad = Tensor::zeros({unit.padded_numel}, DType::kF32, unit.shard.value.device());
        std::vector<Tensor> grads = parameterViews(unit, unit.flat_grad);
        for (size_t i = 0; i < grads.size(); ++i) unit.parameters[i].parameter->grad = grads[i];
      }
    }
    if (sharded() && options_.prefetch && b > 0) startGather(unit_of_block_[b - 1]);
    for (size_t m = blocks[b].end_child; m-- > blocks[b].first_child;)
      grad = model_.backwardChild(m, grad);
    if (b != unit.blocks.front()) continue;  // the unit's backward goes on in an earlier block
    if (!sharded() && !sync) continue;
    const Device device = unit.shard.value.device();
    const DType reduce_dtype = options_.reduce_dtype;
    if (sharded()) {
      // The unit's full gradient goes (cast to the reduce dtype when 16-bit, the float32 one
      // dropped here); the communicator keeps its input alive until the reduction is done.
      const Tensor input = reduce_dtype == DType::kF32
                               ? unit.flat_grad
                               : preDividedCast(unit.flat_grad, comm_.size(), reduce_dtype);
      if (device.isCuda()) synchronize(device);
      Tensor reduced = Tensor::empty({unit.shard.value.numel()}, reduce_dtype, device);
      const ReduceOp op = reduce_dtype == DType::kF32 ? ReduceOp::avg() : ReduceOp::sum();
      in_flight_.push_back({comm_.reduceScatter(reduced, input, op), reduced, u});
      unit.flat_grad = Tensor();
      for (const NamedParameter& named : unit.parameters) named.parameter->grad = Tensor();
      release(u);
    } else if (reduce_dtype == DType::kF32) {
      if (device.isCuda()) synchronize(device);
      in_flight_.push_back({comm_.allReduce(unit.shard.grad, ReduceOp::avg()), Tensor(), u});
    } else {
      Tensor low = preDividedCast(unit.shard.grad, comm_.size(), reduce_dtype);
      if (device.isCuda()) synchronize(device);
      in_flight_.push_back({comm_.allReduce(low, ReduceOp::sum()), low, u});
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
    if (!pending.reduced.defined()) continue;
    Parameter& shard = units_[pending.unit].shard;
    if (!sharded())
      ops::cast(pending.reduced, shard.grad);  // the 16-bit sum, widened (exact)
    else if (pending.reduced.dtype() == DType::kF32)
      ops::axpy(1.0f, pending.reduced, shard.grad);
    else
      ops::axpy(1.0f, ops::cast(pending.reduced, DType::kF32), shard.grad);
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
  std::map<const Parameter*, Tensor> values;
  for (FsdpUnit& unit : units_) {
    Tensor full = unit.shard.value;  // no_shard: the whole flat parameter (full may be rounded)
    if (sharded()) {
      full = Tensor::empty({unit.padded_numel}, DType::kF32, unit.shard.value.device());
      comm_.allGather(full, unit.shard.value)->wait();
    }
    std::vector<Tensor> views = parameterViews(unit, full);
    for (size_t i = 0; i < views.size(); ++i)
      values[unit.parameters[i].parameter] = views[i].clone();
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (const NamedParameter& named : state_order_)
    out.emplace_back(named.name, values.at(named.parameter));
  return out;
}

int64_t FullyShardedDataParallel::parameterCount() const {
  int64_t count = 0;
  for (const FsdpUnit& unit : units_) count += unit.numel;
  return count;
}

}  // namespace ringmaster
