// The mesh's dp dimension at run time: each registered data-parallel plan (strategy.dp.kind, its
// spec side in spec/strategies/) has a runtime here, found by name. With pp = 1 it wraps this
// rank's whole (tp-split) model (DataParallelModel: forward, backward, gradient sync, what the
// optimizer updates); with pp > 1 the pipeline runs the stage's modules and the plan says whether
// the stage's gradients and optimizer state are sharded over dp (parallel/replica_gradients.h).
// One file per plan (ddp_runtime.cpp, fsdp_runtime.cpp), listed once in data_parallel.cpp.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "nn/layers.h"
#include "parallel/ddp.h"  // GradientSyncTiming
#include "spec/job_spec.h"

namespace ringmaster {

class DataParallelModel {
 public:
  virtual ~DataParallelModel() = default;
  virtual Tensor forward(const Tensor& input) = 0;
  // `sync`: the last backward of a step's accumulation, whose gradients are reduced over dp.
  virtual void backward(const Tensor& grad_output, bool sync) = 0;
  virtual GradientSyncTiming finishGradientSync() = 0;
  // What carries the ranks' stop flags in each step's gradient reduction over the dp group, if
  // anything does (parallel/ddp.h).
  virtual StopFlagCarrier* stopFlagCarrier() { return nullptr; }
  virtual std::vector<NamedParameter> optimizerParameters() = 0;
  // The gradients the optimizer sees of the parameters `wanted` accepts (by state_dict name): the
  // parameters' own, or the slices of flat shards that hold them.
  virtual std::vector<Tensor> gradientsOf(
      const std::function<bool(const std::string&)>& wanted) = 0;
  // Whether the dp ranks hold disjoint parts of the gradients (each counts its own in a norm),
  // rather than each the whole (dp rank 0 counts them).
  virtual bool shardsGradients() const = 0;
  // Whether the dp ranks hold different parts of the model (checkpoints per rank).
  virtual bool splitsModel() const = 0;
  // The model's parameters with the values this rank's model holds, state_dict-named (gathered
  // over dp where sharded: collective).
  virtual std::vector<std::pair<std::string, Tensor>> parameters() = 0;
};

struct DataParallelRuntime {
  std::string_view name;  // strategy.dp.kind
  // pp = 1: the plan around `model` over the dp group.
  std::unique_ptr<DataParallelModel> (*wrap)(Sequential& model, Communicator& dp,
                                             const JobSpec& spec);
  // pp > 1: whether the stage's gradients and optimizer state are sharded over dp.
  bool shards_stage = false;
};

// The runtime of strategy.dp.kind `name`; kInvalidArgument for a plan without one.
const DataParallelRuntime& dataParallelRuntime(std::string_view name);

// The slices of a flat gradient shard [start, start + shard.numel()) that lie in the parameters
// `wanted` accepts, the flat buffer holding `layout`'s parameters (name, elements) in order.
std::vector<Tensor> flatShardSlices(const std::vector<std::pair<std::string, int64_t>>& layout,
                                    const Tensor& shard, int64_t start,
                                    const std::function<bool(const std::string&)>& wanted);

}  // namespace ringmaster
