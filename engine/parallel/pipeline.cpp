// Stage partitioning, the clock offset to rank 0, and the execution of one step's pipeline actions
// over point-to-point messages.
#include "parallel/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "nn/loss.h"
#include "parallel/grad_norm.h"
#include "parallel/tied_parameters.h"
#include "tensor/ops.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;

// The exposed transfer of an action's input, in whole microseconds within its wait.
int64_t inputTransferUs(const ExecutedAction& action, double exposed_ms) {
  const auto transfer = static_cast<int64_t>(std::llround(exposed_ms * 1000));
  return std::clamp<int64_t>(transfer, 0, action.ready_us - action.start_us);
}

// [rows, per-sample shape...]: a micro-batch's activations.
Shape batchShape(int64_t rows, const Shape& sample) {
  Shape shape{rows};
  shape.insert(shape.end(), sample.begin(), sample.end());
  return shape;
}

// The blocks the model declares (nn/model.h): the pieces a stage is made of.
const std::vector<ModelBlock>& modelBlocks(const Sequential& model) {
  RM_CHECK_ARG(!model.blocks().empty(), "pipeline: the model declares no blocks");
  return model.blocks();
}

// The block of `model` that starts (or, with `ending`, ends) at child `child`.
const ModelBlock& blockAt(const Sequential& model, size_t child, bool ending) {
  for (const ModelBlock& block : model.blocks()) {
    if ((ending ? block.end_child : block.first_child) == child) return block;
  }
  RM_ENFORCE(false,
             fmt::format("pipeline: no block {} at child {}", ending ? "ends" : "starts", child));
  return model.blocks().front();
}

}  // namespace

std::vector<std::pair<size_t, size_t>> partitionStages(
    Sequential& model, int stages, const std::vector<std::vector<int>>& linear_layers) {
  const std::vector<ModelBlock>& blocks = modelBlocks(model);
  RM_CHECK_ARG(stages >= 1, fmt::format("pipeline: {} stages; at least 1 is needed", stages));
  // The rules the spec parser reports (spec/strategies/pipeline.h), refused here.
  const auto refuse = [](const std::optional<PipelineRuleProblem>& problem) {
    if (problem) RM_THROW(kInvalidArgument, fmt::format("{}: {}", problem->path, problem->message));
  };
  const auto linear = static_cast<int64_t>(blocks.size());
  refuse(stageCountProblem(stages, std::to_string(stages), linear));
  std::vector<size_t> starts;
  if (!linear_layers.empty()) {
    refuse(partitionProblem(linear_layers, stages, "the schedule's model stages", linear));
    for (const std::vector<int>& stage : linear_layers)
      starts.push_back(static_cast<size_t>(stage.front()));
  } else {
    std::vector<int64_t> weights;
    for (const ModelBlock& block : blocks) weights.push_back(block.parameters);
    starts = balancedSplit(weights, stages);
  }
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t s = 0; s < starts.size(); ++s) {
    const size_t last_block = s + 1 < starts.size() ? starts[s + 1] - 1 : blocks.size() - 1;
    out.emplace_back(blocks[starts[s]].first_child, blocks[last_block].end_child);
  }
  return out;
}

PipelineParallel::PipelineParallel(Sequential& model, Communicator& comm, PipelineOptions options)
    : model_(model),
      comm_(comm),
      options_(std::move(options)),
      plan_(makePipelinePlan(comm.size(), options_.micro_batches, options_.schedule,
                             options_.virtual_stages)) {
  stages_ = partitionStages(model_, plan_.modelStages(), options_.stages);
  // A stage's per-sample shapes are those its first and last blocks declare.
  for (const auto& [first, end] : stages_) {
    stage_input_shape_.push_back(blockAt(model_, first, false).input_shape);
    stage_output_shape_.push_back(blockAt(model_, end, true).output_shape);
  }
  // Each parameter lives on the rank of the stage that holds it and, when tied, on the ranks of
  // the stages that read it; the other ranks never run those stages: let their storage go.
  const ModelParameters names(model_);
  std::map<const Parameter*, int> owner_rank;
  std::map<const Parameter*, std::set<int>> holders;
  for (size_t s = 0; s < stages_.size(); ++s) {
    const int rank = rankOf(static_cast<int>(s));
    for (const NamedParameter& p : names.held(stages_[s].first, stages_[s].second)) {
      owner_rank[p.parameter] = rank;
      holders[p.parameter].insert(rank);
    }
    for (const NamedParameter& p : names.tiedInto(stages_[s].first, stages_[s].second))
      holders[p.parameter].insert(rank);
  }
  for (const NamedParameter& p : names.all()) {
    if (!holders[p.parameter].contains(comm_.rank()))
      *p.parameter = Parameter{};
    else
      (owner_rank.at(p.parameter) == comm_.rank() ? held_ : copies_).push_back(p);
  }
  // Megatron-LM's embedding group: the ranks holding copies of a tied parameter start from its
  // owner's value (every rank creates the groups, in the model's order, as newGroup requires).
  for (const NamedParameter& p : names.all()) {
    const std::set<int>& ranks = holders[p.parameter];
    if (ranks.size() < 2) continue;
    const std::vector<int> members(ranks.begin(), ranks.end());
    std::unique_ptr<Communicator> group = comm_.newGroup(members);
    if (group) {
      if (comm_.device().isCuda()) synchronize(comm_.device());  // initialised first
      const auto root = std::find(members.begin(), members.end(), owner_rank.at(p.parameter));
      group->broadcast(p.parameter->value, static_cast<int>(root - members.begin()))->wait();
    }
    tied_.push_back({p, std::move(group)});
  }
  comm_.alignClockToRankZero();
}

// ------------------------------------------------------------------------------------------------
// One step's execution on this rank.

// What runs one step's actions on this rank: the receives posted ahead, the messages handed
// between this rank's own chunks, the sends in flight, what each (chunk, micro-batch) keeps
// between its actions, and the step's totals.
class PipelineParallel::StepRun {
 public:
  StepRun(PipelineParallel& pipeline, int64_t rows, const std::function<Batch(int)>& micro_batch,
          float grad_scale)
      : p_(pipeline),
        loss_fn_(pipeline.makeLoss()),
        rank_(pipeline.comm_.rank()),
        device_(pipeline.comm_.device()),
        rows_(rows),
        micro_batch_(micro_batch),
        grad_scale_(grad_scale),
        split_backward_(pipeline.plan_.schedule == PipelineSchedule::kZbH1) {}

  // Every receive of the step is posted before any action runs, so that a send always meets a
  // posted receive and completes without waiting for the receiver to reach that action.
  void postReceives() {
    for (const PipelineAction& a : p_.plan_.actions[rank_]) {
      const int stage = p_.modelStage(a.chunk);
      const int peer_stage = a.phase == PipelinePhase::kForward ? stage - 1 : stage + 1;
      if (peer_stage < 0 || peer_stage >= p_.plan_.modelStages() || p_.rankOf(peer_stage) == rank_)
        continue;
      if (a.phase == PipelinePhase::kForward) {
        Tensor buffer =
            Tensor::empty(batchShape(rows_, p_.stage_input_shape_[stage]), DType::kF32, device_);
        receives_[{a.phase, a.micro_batch, a.chunk}] = {
            buffer,
            p_.comm_.irecv(buffer, p_.rankOf(stage - 1), tag(a.phase, a.micro_batch, stage))};
      } else if (a.phase == PipelinePhase::kBackward) {
        Tensor buffer =
            Tensor::empty(batchShape(rows_, p_.stage_output_shape_[stage]), DType::kF32, device_);
        receives_[{a.phase, a.micro_batch, a.chunk}] = {
            buffer,
            p_.comm_.irecv(buffer, p_.rankOf(stage + 1), tag(a.phase, a.micro_batch, stage))};
      }
    }
  }

  // Runs one action and records when it started, when its input was ready and when it ended.
  void run(const PipelineAction& a) {
    const int stage = p_.modelStage(a.chunk);
    ExecutedAction executed{a, stage, p_.nowUs(), 0, 0};
    switch (a.phase) {
      case PipelinePhase::kForward:
        forward(a, executed);
        break;
      case PipelinePhase::kBackward:
        backward(a, executed);
        break;
      case PipelinePhase::kWeight:
        weight(a, executed);
        break;
    }
    if (executed.end_us == 0) executed.end_us = p_.nowUs();
    result_.actions.push_back(executed);
  }

  void waitForSends() {
    for (const WorkPtr& send : sends_) {
      send->wait();
      result_.transfer_ms += send->durationMs().value_or(0.0);
    }
  }

  // The loss lives on the last stage's rank; every rank reports it (collective).
  PipelineStepResult shareTotals() {
    Tensor totals = Tensor::fromVector(
        {static_cast<float>(result_.loss_sum), static_cast<float>(result_.correct),
         static_cast<float>(result_.samples)},
        {3}, device_);
    p_.comm_.broadcast(totals, p_.rankOf(p_.plan_.modelStages() - 1))->wait();
    const std::vector<float> values = totals.toFloatVector();
    result_.loss_sum = values[0];
    result_.correct = static_cast<int64_t>(values[1]);
    result_.samples = static_cast<int64_t>(values[2]);
    return std::move(result_);
  }

 private:
  using Key = std::pair<int, int>;  // (chunk, micro-batch)

  // F: the stage's forward, from the micro-batch (the first stage) or the previous stage's
  // activations; the last stage computes the loss and its gradient, the others send on.
  void forward(const PipelineAction& a, ExecutedAction& executed) {
    const int stage = executed.model_stage;
    const auto [first, end] = p_.stages_[stage];
    // Only a receive is waiting: reading the micro-batch (the first stage's features, the last
    // stage's labels) is part of the action's work.
    Batch batch;
    Tensor x;
    if (p_.isFirst(stage)) {
      executed.ready_us = executed.start_us;
      batch = micro_batch_(a.micro_batch);
      x = batch.inputs;
    } else {
      x = receive(a);
      executed.ready_us = p_.nowUs();
      executed.transfer_us = inputTransferUs(executed, last_exposed_ms_);
      if (p_.isLast(stage)) batch = micro_batch_(a.micro_batch);
    }
    for (size_t m = first; m < end; ++m) x = p_.model_.forwardChild(m, x);
    const Key key{a.chunk, a.micro_batch};
    contexts_[key] = p_.model_.saveChildContexts(first, end);
    if (p_.isLast(stage)) {
      addLoss(batch, x, key);
    } else {
      executed.end_us = p_.nowUs();  // the send is communication, not part of the action
      send(a.phase, a.micro_batch, stage + 1, x);
    }
  }

  // The last stage's loss over the micro-batch, and its gradient for the B action. Per-token
  // logits [rows, T, V] against targets [rows, T]: the mean over every target (as
  // WholeModelStrategy::trainBatch); correct counts targets, samples counts samples.
  void addLoss(const Batch& batch, const Tensor& x, const Key& key) {
    const int64_t classes = x.shape().back();
    const Tensor logits = x.view({x.numel() / classes, classes});
    const Tensor targets = batch.targets.view({batch.targets.numel()});
    result_.loss_sum += loss_fn_->forward(logits, targets);
    result_.correct += loss_fn_->correct();
    result_.samples += batch.targets.dim(0);
    loss_grads_[key] = loss_fn_->backward(grad_scale_).view(x.shape());
  }

  // B: the input gradient through the stage (and, unless ZB-H1 splits it off into W, the weight
  // gradients), from the loss gradient (the last stage) or the next stage's; sent back unless
  // this is the first stage.
  void backward(const PipelineAction& a, ExecutedAction& executed) {
    const int stage = executed.model_stage;
    const auto [first, end] = p_.stages_[stage];
    const Key key{a.chunk, a.micro_batch};
    Tensor grad = p_.isLast(stage) ? loss_grads_.at(key) : receive(a);
    executed.ready_us = p_.isLast(stage) ? executed.start_us : p_.nowUs();
    executed.transfer_us = p_.isLast(stage) ? 0 : inputTransferUs(executed, last_exposed_ms_);
    loss_grads_.erase(key);
    p_.model_.restoreChildContexts(first, contexts_.at(key));
    for (size_t m = end; m-- > first;) {
      grad = split_backward_ ? p_.model_.backwardInputChild(m, grad)
                             : p_.model_.backwardChild(m, grad);
    }
    if (split_backward_)
      contexts_[key] = p_.model_.saveChildContexts(first, end);  // what the W action needs
    else
      contexts_.erase(key);
    if (!p_.isFirst(stage)) {
      executed.end_us = p_.nowUs();
      send(a.phase, a.micro_batch, stage - 1, grad);
    }
  }

  // W (ZB-H1): the weight gradients the B action left.
  void weight(const PipelineAction& a, ExecutedAction& executed) {
    const auto [first, end] = p_.stages_[executed.model_stage];
    const Key key{a.chunk, a.micro_batch};
    executed.ready_us = executed.start_us;
    p_.model_.restoreChildContexts(first, contexts_.at(key));
    for (size_t m = end; m-- > first;) p_.model_.child(m).backwardWeights();
    contexts_.erase(key);
  }

  // Messages are told apart by tag: direction, micro-batch and the receiving model stage.
  int tag(PipelinePhase phase, int micro, int stage) const {
    return (micro * p_.plan_.modelStages() + stage) * 2 +
           (phase == PipelinePhase::kForward ? 0 : 1);
  }

  // The action's input: handed over by this rank's own chunk, or its posted receive, waited for.
  // Of the time blocked, the message's transfer is communication, the rest pipeline wait.
  Tensor receive(const PipelineAction& a) {
    last_exposed_ms_ = 0;
    if (auto it = local_.find({a.phase, a.micro_batch, a.chunk}); it != local_.end()) {
      Tensor handed = it->second;
      local_.erase(it);
      return handed;
    }
    auto& [buffer, work] = receives_.at({a.phase, a.micro_batch, a.chunk});
    const auto start = Clock::now();
    work->wait();
    const double blocked_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    // Of the time blocked, at most the message's transfer is communication; the rest waited for
    // the sending stage (the receive's own wait, measured from the sender's launch time).
    const double transfer_ms =
        std::max(0.0, work->durationMs().value_or(0.0) - work->waitMs().value_or(0.0));
    const double exposed_ms = std::min(blocked_ms, transfer_ms);
    last_exposed_ms_ = exposed_ms;
    result_.exposed_transfer_ms += exposed_ms;
    result_.pipeline_wait_ms += blocked_ms - exposed_ms;
    result_.transfer_ms += transfer_ms;
    return buffer;
  }

  void send(PipelinePhase phase, int micro, int to_stage, const Tensor& tensor) {
    if (p_.rankOf(to_stage) == rank_) {
      local_[{phase, micro, to_stage / p_.comm_.size()}] = tensor;
      return;
    }
    if (device_.isCuda()) synchronize(device_);
    sends_.push_back(p_.comm_.isend(tensor, p_.rankOf(to_stage), tag(phase, micro, to_stage)));
  }

  PipelineParallel& p_;
  std::unique_ptr<LossFunction> loss_fn_;  // the last stage's
  const int rank_;
  const Device device_;
  const int64_t rows_;
  const std::function<Batch(int)>& micro_batch_;
  const float grad_scale_;
  const bool split_backward_;  // ZB-H1: B computes the input gradients, W the weights'
  using MessageKey = std::tuple<PipelinePhase, int, int>;  // (phase, micro-batch, chunk)
  std::map<MessageKey, std::pair<Tensor, WorkPtr>> receives_;
  // A message between two chunks of this rank (one rank, interleaved) is handed over here.
  std::map<MessageKey, Tensor> local_;
  std::vector<WorkPtr> sends_;
  // What each (chunk, micro-batch) keeps between its F and B (and B and W): the modules' contexts
  // and, on the last stage, the loss gradient.
  std::map<Key, ChildrenContext> contexts_;
  std::map<Key, Tensor> loss_grads_;
  double last_exposed_ms_ = 0;  // of the latest receive: its transfer the caller waited for
  PipelineStepResult result_;
};

PipelineStepResult PipelineParallel::runStep(int64_t rows,
                                             const std::function<Batch(int)>& micro_batch,
                                             float grad_scale) {
  StepRun step(*this, rows, micro_batch, grad_scale);
  step.postReceives();
  for (const PipelineAction& action : plan_.actions[comm_.rank()]) step.run(action);
  step.waitForSends();
  return step.shareTotals();
}

PipelineParallel::EvalResult PipelineParallel::evaluate(int64_t rows,
                                                        const std::function<Batch()>& batch) {
  const int rank = comm_.rank();
  const Device device = comm_.device();
  std::optional<Batch> read;
  auto input = [&]() -> const Batch& {
    if (!read) read = batch();
    return *read;
  };
  EvalResult result;
  Tensor x;  // the activations leaving this rank's previous stage
  std::vector<WorkPtr> sends;
  for (int stage = 0; stage < plan_.modelStages(); ++stage) {
    if (rankOf(stage) != rank) continue;
    if (isFirst(stage)) {
      x = input().inputs;
    } else if (rankOf(stage - 1) != rank) {
      x = Tensor::empty(batchShape(rows, stage_input_shape_[stage]), DType::kF32, device);
      comm_.irecv(x, rankOf(stage - 1), stage)->wait();
    }  // else: this rank ran the previous stage too (one rank holds every chunk)
    const auto [first, end] = stages_[stage];
    for (size_t m = first; m < end; ++m) x = model_.forwardChild(m, x);
    if (isLast(stage)) {
      // As WholeModelStrategy::evaluateBatch: the mean over every target element, times their
      // count.
      const int64_t classes = x.shape().back();
      const Tensor targets = input().targets.view({input().targets.numel()});
      const std::unique_ptr<LossFunction> loss_fn = makeLoss();
      result.tokens = targets.numel();
      result.loss_sum = loss_fn->forward(x.view({x.numel() / classes, classes}), targets) *
                        static_cast<double>(result.tokens);
    } else if (rankOf(stage + 1) != rank) {
      if (device.isCuda()) synchronize(device);
      sends.push_back(comm_.isend(x, rankOf(stage + 1), stage + 1));
    }
  }
  for (const WorkPtr& send : sends) send->wait();
  // Float64 would be exact, but the broadcast carries what the training step's does: float32.
  Tensor totals = Tensor::fromVector(
      {static_cast<float>(result.loss_sum), static_cast<float>(result.tokens)}, {2}, device);
  comm_.broadcast(totals, rankOf(plan_.modelStages() - 1))->wait();
  const std::vector<float> values = totals.toFloatVector();
  result.loss_sum = values[0];
  result.tokens = std::llround(static_cast<double>(values[1]));
  return result;
}

double PipelineParallel::reduceTiedGradients() {
  const auto start = Clock::now();
  for (const TiedGroup& tied : tied_) {
    if (!tied.group) continue;
    const Device device = tied.parameter.parameter->grad.device();
    if (device.isCuda()) synchronize(device);
    tied.group->allReduce(tied.parameter.parameter->grad, ReduceOp::sum())->wait();
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double PipelineParallel::clipGradNorm(double max_norm) {
  // A tied parameter's copies carry the same (summed) gradient: its owner counts it.
  return clipDistributedGradNorm(held_, comm_, max_norm, copies_);
}

std::vector<NamedParameter> PipelineParallel::parameters() {
  std::vector<NamedParameter> out = held_;
  out.insert(out.end(), copies_.begin(), copies_.end());
  return out;
}

}  // namespace ringmaster
