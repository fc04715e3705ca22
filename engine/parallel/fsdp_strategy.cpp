// `fsdp`: FullyShardedDataParallel (parallel/fsdp.h) behind the strategy interface: the optimizer
// sees the shards, checkpoints are per rank, and checkpoint.consolidate gathers the whole model.
#include "parallel/fsdp.h"
#include "parallel/strategy.h"

namespace ringmaster {

namespace {

class FsdpStrategy final : public WholeModelStrategy {
 public:
  FsdpStrategy(Sequential& model, Communicator& world, const FsdpSpec& options)
      : fsdp_(model, world,
              FsdpOptions{
                  .sharding = options.sharding,
                  .units = options.units,
                  .reduce_dtype = precisionDType(options.reduce_dtype.value_or(Precision::kFp32)),
                  .param_dtype = precisionDType(options.param_dtype.value_or(Precision::kFp32))}) {}

  GradientSyncTiming finishGradientSync() override { return fsdp_.finishGradientSync(); }
  std::vector<NamedParameter> optimizerParameters() override { return fsdp_.shardParameters(); }
  double clipGradNorm(double max_norm) override { return fsdp_.clipGradNorm(max_norm); }
  bool perRankCheckpoints() const override { return true; }
  bool consolidates() const override { return true; }
  StateDict fullStateDict() override { return fsdp_.fullParameters(); }

 protected:
  Tensor forward(const Tensor& input) override { return fsdp_.forward(input); }
  void backward(const Tensor& grad_output, bool sync) override {
    fsdp_.backward(grad_output, sync);
  }

 private:
  FullyShardedDataParallel fsdp_;
};

}  // namespace

std::unique_ptr<ParallelStrategy> makeFsdpStrategy(const StrategySetup& setup) {
  return std::make_unique<FsdpStrategy>(setup.model, *setup.world, setup.spec.strategy.fsdp);
}

}  // namespace ringmaster
