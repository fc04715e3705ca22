// `single`: the model as built, on one rank; nothing to synchronise.
#include "parallel/strategy.h"

namespace ringmaster {

namespace {

class SingleStrategy final : public ReplicatedModelStrategy {
 public:
  using ReplicatedModelStrategy::ReplicatedModelStrategy;

 protected:
  Tensor forward(const Tensor& input) override { return model_.forward(input); }
  void backward(const Tensor& grad_output, bool) override { model_.backward(grad_output); }
};

}  // namespace

std::unique_ptr<ParallelStrategy> makeSingleStrategy(const StrategySetup& setup) {
  return std::make_unique<SingleStrategy>(setup.model);
}

}  // namespace ringmaster
