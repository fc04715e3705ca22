// `pipeline`: PipelineParallel (parallel/pipeline.h) behind the strategy interface. Each batch is
// sliced here into train.micro_batches micro-batches that the schedule runs; every rank sees the
// same batches (its ranks share one dp coordinate), and checkpoints are per rank (per stage). The
// tied parameters' gradients are summed across their copies once per step, in finishGradientSync.
#include "core/error.h"
#include "parallel/pipeline.h"
#include "parallel/strategy.h"

namespace ringmaster {

namespace {

class PipelineStrategy final : public ParallelStrategy {
 public:
  PipelineStrategy(Sequential& model, Communicator& world, const PipelineSpec& options,
                   int micro_batches)
      : micro_batches_(micro_batches),
        pipeline_(model, world,
                  PipelineOptions{.schedule = options.schedule,
                                  .virtual_stages = options.virtual_stages,
                                  .micro_batches = micro_batches,
                                  .stages = options.stages}) {}

  BatchPass trainBatch(const std::vector<int64_t>& indices, const BatchMaker& make_batch,
                       int accumulation, bool sync) override {
    tied_pending_ = tied_pending_ || sync;
    const auto rows = static_cast<int64_t>(indices.size()) / micro_batches_;
    PipelineStepResult step = pipeline_.runStep(
        rows,
        [&](int i) {
          return make_batch(
              std::vector<int64_t>(indices.begin() + i * rows, indices.begin() + (i + 1) * rows));
        },
        lossScale() / static_cast<float>(accumulation * micro_batches_));
    return BatchPass{.loss = step.loss_sum / micro_batches_,
                     .correct = step.correct,
                     .samples = step.samples,
                     .comm_ms = step.transfer_ms,
                     .exposed_comm_ms = step.exposed_transfer_ms,
                     .wait_ms = step.pipeline_wait_ms,
                     .actions = std::move(step.actions)};
  }
  // Forward only, the whole batch at once (no micro-batches: nothing to overlap without a
  // backward).
  EvalBatchPass evaluateBatch(const std::vector<int64_t>& indices,
                              const BatchMaker& make_batch) override {
    const PipelineParallel::EvalResult result = pipeline_.evaluate(
        static_cast<int64_t>(indices.size()), [&] { return make_batch(indices); });
    return {.loss_sum = result.loss_sum, .tokens = result.tokens};
  }
  GradientSyncTiming finishGradientSync() override {
    if (!tied_pending_) return {};
    tied_pending_ = false;
    const double ms = pipeline_.reduceTiedGradients();
    return {.comm_ms = ms, .exposed_comm_ms = ms};
  }
  std::vector<NamedParameter> optimizerParameters() override { return pipeline_.parameters(); }
  double clipGradNorm(double max_norm) override { return pipeline_.clipGradNorm(max_norm); }
  int forwardsPerBatch() const override { return micro_batches_; }
  bool perRankCheckpoints() const override { return true; }
  StateDict fullStateDict() override {
    RM_THROW(kUnavailable,
             "pipeline: the whole model is never on one rank; its checkpoints are "
             "per stage");
  }

 private:
  int micro_batches_;
  PipelineParallel pipeline_;
  bool tied_pending_ = false;  // a synchronised batch ran since the last finishGradientSync
};

}  // namespace

std::unique_ptr<ParallelStrategy> makePipelineStrategy(const StrategySetup& setup) {
  return std::make_unique<PipelineStrategy>(setup.model, *setup.world, setup.spec.strategy.pipeline,
                                            setup.spec.train.micro_batches);
}

}  // namespace ringmaster
