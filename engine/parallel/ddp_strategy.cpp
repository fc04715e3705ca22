// `ddp`: DistributedDataParallel (parallel/ddp.h) behind the strategy interface.
#include "optim/optimizer.h"
#include "parallel/ddp.h"
#include "parallel/strategy.h"

namespace ringmaster {

namespace {

class DdpStrategy final : public WholeModelStrategy {
 public:
  DdpStrategy(Sequential& model, Communicator& world, const DdpSpec& options)
      : model_(model), ddp_(model, world, DdpOptions{.bucket_cap_mb = options.bucket_cap_mb}) {}

  GradientSyncTiming finishGradientSync() override { return ddp_.finishGradientSync(); }
  std::vector<NamedParameter> optimizerParameters() override { return model_.namedParameters(); }
  double clipGradNorm(double max_norm) override {
    return ringmaster::clipGradNorm(model_.namedParameters(), max_norm);
  }
  StateDict fullStateDict() override {
    StateDict state;
    for (const NamedParameter& p : model_.namedParameters())
      state.emplace_back(p.name, p.parameter->value);
    return state;
  }

 protected:
  Tensor forward(const Tensor& input) override { return ddp_.forward(input); }
  void backward(const Tensor& grad_output, bool sync) override { ddp_.backward(grad_output, sync); }

 private:
  Sequential& model_;
  DistributedDataParallel ddp_;
};

}  // namespace

std::unique_ptr<ParallelStrategy> makeDdpStrategy(const StrategySetup& setup) {
  return std::make_unique<DdpStrategy>(setup.model, *setup.world, setup.spec.strategy.ddp);
}

}  // namespace ringmaster
