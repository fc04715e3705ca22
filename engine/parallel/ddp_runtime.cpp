// strategy.dp.kind `ddp` at run time: DistributedDataParallel (parallel/ddp.h) around the model
// over the dp group (nothing to synchronise when the group is one rank); under pp the stage's
// gradients are averaged whole.
#include "parallel/data_parallel.h"

#include <optional>

namespace ringmaster {

namespace {

class DdpModel final : public DataParallelModel {
 public:
  DdpModel(Sequential& model, Communicator& dp, const DdpSpec& options) : model_(model) {
    if (dp.size() > 1)
      ddp_.emplace(model, dp,
                   DdpOptions{.bucket_cap_mb = options.bucket_cap_mb,
                              .reduce_dtype =
                                  precisionDType(options.reduce_dtype.value_or(Precision::kFp32))});
  }

  Tensor forward(const Tensor& input) override { return model_.forward(input); }
  void backward(const Tensor& grad_output, bool sync) override {
    if (ddp_)
      ddp_->backward(grad_output, sync);
    else
      model_.backward(grad_output);
  }
  GradientSyncTiming finishGradientSync() override {
    return ddp_ ? ddp_->finishGradientSync() : GradientSyncTiming{};
  }
  StopFlagCarrier* stopFlagCarrier() override {
    return ddp_ && !ddp_->buckets().empty() ? &*ddp_ : nullptr;
  }
  std::vector<NamedParameter> optimizerParameters() override { return model_.namedParameters(); }
  std::vector<Tensor> gradientsOf(const std::function<bool(const std::string&)>& wanted) override {
    std::vector<Tensor> out;
    for (const NamedParameter& p : model_.namedParameters())
      if (wanted(p.name)) out.push_back(p.parameter->grad);
    return out;
  }
  bool shardsGradients() const override { return false; }
  bool splitsModel() const override { return false; }
  std::vector<std::pair<std::string, Tensor>> parameters() override {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const NamedParameter& p : model_.namedParameters())
      out.emplace_back(p.name, p.parameter->value);
    return out;
  }

 private:
  Sequential& model_;
  std::optional<DistributedDataParallel> ddp_;
};

std::unique_ptr<DataParallelModel> wrapDdp(Sequential& model, Communicator& dp,
                                           const JobSpec& spec) {
  return std::make_unique<DdpModel>(model, dp, spec.strategy.ddp);
}

}  // namespace

const DataParallelRuntime& ddpRuntime() {
  static const DataParallelRuntime runtime{.name = "ddp", .wrap = wrapDdp, .shards_stage = false};
  return runtime;
}

}  // namespace ringmaster
