// strategy.dp.kind `fsdp` at run time: FullyShardedDataParallel (parallel/fsdp.h) around the model
// over the dp group; under pp the stage's gradients and optimizer state are sharded (ZeRO-2, as
// torchtitan runs FSDP with pipeline parallelism).
#include "parallel/data_parallel.h"
#include "parallel/fsdp.h"

namespace ringmaster {

namespace {

class FsdpModel final : public DataParallelModel {
 public:
  FsdpModel(Sequential& model, Communicator& dp, const FsdpSpec& options)
      : dp_(dp),
        fsdp_(model, dp,
              FsdpOptions{
                  .sharding = options.sharding,
                  .units = options.units,
                  .reduce_dtype = precisionDType(options.reduce_dtype.value_or(Precision::kFp32)),
                  .param_dtype = precisionDType(options.param_dtype.value_or(Precision::kFp32))}) {}

  Tensor forward(const Tensor& input) override { return fsdp_.forward(input); }
  void backward(const Tensor& grad_output, bool sync) override {
    fsdp_.backward(grad_output, sync);
  }
  GradientSyncTiming finishGradientSync() override { return fsdp_.finishGradientSync(); }
  std::vector<NamedParameter> optimizerParameters() override { return fsdp_.shardParameters(); }
  // Each unit's flat shard (no_shard: the whole flat gradient), sliced by parameter.
  std::vector<Tensor> gradientsOf(const std::function<bool(const std::string&)>& wanted) override {
    std::vector<Tensor> out;
    for (const FsdpUnit& unit : fsdp_.units()) {
      std::vector<std::pair<std::string, int64_t>> layout;
      for (size_t i = 0; i < unit.parameters.size(); ++i)
        layout.emplace_back(unit.parameters[i].name, shapeNumel(unit.shapes[i]));
      const Tensor& shard = unit.shard.grad;
      const int64_t start = shardsGradients() ? dp_.rank() * shard.numel() : 0;
      for (Tensor& t : flatShardSlices(layout, shard, start, wanted)) out.push_back(std::move(t));
    }
    return out;
  }
  bool shardsGradients() const override {
    return fsdp_.options().sharding != FsdpSharding::kNoShard;
  }
  bool splitsModel() const override { return true; }
  std::vector<std::pair<std::string, Tensor>> parameters() override {
    return fsdp_.fullParameters();
  }

 private:
  Communicator& dp_;
  FullyShardedDataParallel fsdp_;
};

std::unique_ptr<DataParallelModel> wrapFsdp(Sequential& model, Communicator& dp,
                                            const JobSpec& spec) {
  return std::make_unique<FsdpModel>(model, dp, spec.strategy.fsdp);
}

}  // namespace

const DataParallelRuntime& fsdpRuntime() {
  static const DataParallelRuntime runtime{.name = "fsdp", .wrap = wrapFsdp, .shards_stage = true};
  return runtime;
}

}  // namespace ringmaster
