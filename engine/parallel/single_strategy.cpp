// `single`: the model as built, on one rank; nothing to synchronise.
#include "optim/optimizer.h"
#include "parallel/strategy.h"

namespace ringmaster {

namespace {

class SingleStrategy final : public WholeModelStrategy {
 public:
  explicit SingleStrategy(Sequential& model) : model_(model) {}

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
  Tensor forward(const Tensor& input) override { return model_.forward(input); }
  void backward(const Tensor& grad_output, bool) override { model_.backward(grad_output); }

 private:
  Sequential& model_;
};

}  // namespace

std::unique_ptr<ParallelStrategy> makeSingleStrategy(const StrategySetup& setup) {
  return std::make_unique<SingleStrategy>(setup.model);
}

}  // namespace ringmaster
