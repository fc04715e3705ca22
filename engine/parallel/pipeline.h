// Pipeline parallelism at run time: the model's layers split into stages, this rank keeps only its
// stages (chunks), and one training step executes this rank's list of the schedule's F / B / W
// actions, activations going forward and gradients backward by point-to-point messages ([rows,
// shape the block declares]: [b, features] for an MLP, [b, T, C] for a transformer). Each
// action's start and end are kept on a clock aligned to rank 0's, for sched events.
//
// A tied parameter (ModelBlock::tied_parameters: the GPT's token embedding, which its LM head also
// reads) is kept on every rank whose stages hold or read it; as Megatron-LM's embedding group,
// those ranks start from the owner's value and sum the copies' gradients (reduceTiedGradients)
// before the optimizer step, so the copies stay equal.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "data/dataset.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "spec/strategies/pipeline_schedule.h"

namespace ringmaster {

// Modules [first, end) of the model form each model stage: a stage is a run of consecutive blocks
// of those the model declares (nn/model.h). `linear_layers` (from the spec: stage s holds these
// block indices, consecutive; for the MLP a block is a Linear layer)
// or, when empty, a partition balanced by
// parameter count (the largest stage as small as possible; balancedSplit in
// spec/strategies/pipeline.h). The partition's rules are the spec's, written once there.
std::vector<std::pair<size_t, size_t>> partitionStages(
    Sequential& model, int stages, const std::vector<std::vector<int>>& linear_layers = {});

struct PipelineOptions {
  PipelineSchedule schedule = PipelineSchedule::k1f1b;
  int virtual_stages = 1;
  int micro_batches = 1;
  std::vector<std::vector<int>> stages;  // explicit partition; empty: balanced
  // The last stage's loss (empty: softmax cross-entropy); tensor parallelism's is
  // vocabulary-parallel.
  LossFactory make_loss;
};

// One executed action: phase, micro-batch, model stage, chunk, and its times in microseconds on
// rank 0's clock (Communicator::alignedNowUs). The action was reached at start_us; its input (the
// previous stage's activations or the next stage's gradients) had arrived at ready_us, when its
// compute began (start_us when it needed nothing from another rank); it ended at end_us, before
// its output was sent. [start_us, ready_us) is waiting for the input, of which the last
// transfer_us were its transfer (exposed communication), the rest waiting for the other stage
// (the bubble); [ready_us, end_us) is computing.
struct ExecutedAction {
  PipelineAction action;
  int model_stage = 0;
  int64_t start_us = 0, ready_us = 0, end_us = 0;
  int64_t transfer_us = 0;
};

struct PipelineStepResult {
  // Summed over the step's micro-batches, from the last stage (broadcast to every rank).
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t samples = 0;
  // Time this rank was blocked receiving activations and gradients, split into the part that
  // was the message's transfer (exposed communication) and the part spent waiting for the sending
  // stage to produce it (the pipeline's bubble: counted once, here, and never as communication).
  double exposed_transfer_ms = 0;
  double pipeline_wait_ms = 0;
  // The step's point-to-point transfer time on this rank (its receives' transfers and its sends),
  // overlapped with compute or not.
  double transfer_ms = 0;
  std::vector<ExecutedAction> actions;
};

class PipelineParallel {
 public:
  // Splits `model` into comm.size() * virtual_stages stages and releases the parameters of the
  // stages other ranks run. Aligns the communicator's clock to rank 0's (collective over the
  // group).
  PipelineParallel(Sequential& model, Communicator& comm, PipelineOptions options);

  // One pass over the step's micro-batches of `rows` samples each: `micro_batch(i)` gives
  // micro-batch i; only the ranks of the first and last stages ask for it. Each micro-batch's loss
  // gradient is scaled by `grad_scale` (1 / micro_batches, as gradient accumulation over the same
  // micro-batches would), and the parameter gradients accumulate on this rank's stages.
  PipelineStepResult runStep(int64_t rows, const std::function<Batch(int)>& micro_batch,
                             float grad_scale);

  // One evaluation batch of `rows` samples, forward only (Megatron-LM's forward-only schedule):
  // stage by stage in model order, each rank running its stages as their input arrives; the last
  // stage's loss summed over its target elements, broadcast to every rank. `batch()` is called
  // only by the ranks of the first and last stages. Touches no gradient; collective.
  struct EvalResult {
    double loss_sum = 0;
    int64_t tokens = 0;
  };
  EvalResult evaluate(int64_t rows, const std::function<Batch()>& batch);

  // Sums the gradients of the tied parameters' copies across the ranks that hold them (collective
  // over those ranks; every rank calls it). Call it once per optimizer step, after the step's last
  // runStep. Returns the time it took, in milliseconds.
  double reduceTiedGradients();
  // This rank's parameters, named as in the whole model's state_dict (a tied parameter's copy
  // under its owner's name).
  std::vector<NamedParameter> parameters();
  // clip_grad_norm_ over the whole model: the stages' squared norms are summed across ranks, each
  // tied parameter counted once.
  double clipGradNorm(double max_norm);
  // The tied parameters' copies this rank holds (their owners' ranks count them in the norm).
  const std::vector<NamedParameter>& copies() const { return copies_; }
  const PipelinePlan& plan() const { return plan_; }
  const std::vector<std::pair<size_t, size_t>>& stages() const { return stages_; }
  int64_t clockOffsetUs() const { return comm_.clockOffsetUs(); }
  // Half the round trip the offset was measured over: the offset is right to within this much.
  int64_t clockUncertaintyUs() const { return comm_.clockUncertaintyUs(); }

 private:
  class StepRun;  // one runStep's execution on this rank (pipeline.cpp)
  std::unique_ptr<LossFunction> makeLoss() const {
    return options_.make_loss ? options_.make_loss() : std::make_unique<SoftmaxCrossEntropy>();
  }

  int modelStage(int chunk) const { return plan_.modelStage(comm_.rank(), chunk); }
  int rankOf(int model_stage) const { return model_stage % comm_.size(); }
  bool isFirst(int model_stage) const { return model_stage == 0; }
  bool isLast(int model_stage) const { return model_stage == plan_.modelStages() - 1; }
  int64_t nowUs() const { return comm_.alignedNowUs(); }

  Sequential& model_;
  Communicator& comm_;
  PipelineOptions options_;
  PipelinePlan plan_;
  std::vector<std::pair<size_t, size_t>> stages_;  // modules of every model stage
  std::vector<Shape> stage_input_shape_;           // per sample, entering each model stage
  std::vector<Shape> stage_output_shape_;
  std::vector<NamedParameter> held_;    // the parameters this rank's stages hold
  std::vector<NamedParameter> copies_;  // tied parameters this rank's stages read, held elsewhere
  struct TiedGroup {
    NamedParameter parameter;
    std::unique_ptr<Communicator> group;  // the ranks holding a copy; null where this rank has none
  };
  std::vector<TiedGroup> tied_;  // the tied parameters whose copies span more than one rank
};

}  // namespace ringmaster
