// `ddp`: DistributedDataParallel (parallel/ddp.h) behind the strategy interface.
#include "parallel/ddp.h"
#include "parallel/strategy.h"

namespace ringmaster {

namespace {

class DdpStrategy final : public ReplicatedModelStrategy {
 public:
  DdpStrategy(Sequential& model, Communicator& world, const DdpSpec& options)
      : ReplicatedModelStrategy(model),
        ddp_(model, world,
             DdpOptions{.bucket_cap_mb = options.bucket_cap_mb,
                        .reduce_dtype =
                            precisionDType(options.reduce_dtype.value_or(Precision::kFp32))}) {}

  GradientSyncTiming finishGradientSync() override { return ddp_.finishGradientSync(); }

 protected:
  Tensor forward(const Tensor& input) override { return ddp_.forward(input); }
  void backward(const Tensor& grad_output, bool sync) override { ddp_.backward(grad_output, sync); }

 private:
  DistributedDataParallel ddp_;
};

}  // namespace

std::unique_ptr<ParallelStrategy> makeDdpStrategy(const StrategySetup& setup) {
  return std::make_unique<DdpStrategy>(setup.model, *setup.world, setup.spec.strategy.ddp);
}

}  // namespace ringmaster
