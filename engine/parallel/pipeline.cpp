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

PipelineStepResult PipelineParallel::runStep(int64_t rows,
                                             const std::function<Batch(int)>& micro_batch,
                                             float grad_scale) {
  const int rank = comm_.rank();
  const Device device = comm_.device();
  const bool split_backward = plan_.schedule == PipelineSchedule::kZbH1;
  // Messages are told apart by tag: direction, micro-batch and the receiving model stage.
  auto tag = [&](PipelinePhase phase, int micro, int stage) {
    return (micro * plan_.modelStages() + stage) * 2 + (phase == PipelinePhase::kForward ? 0 : 1);
  };
  // Every receive of the step is posted before any action runs, so that a send always meets a
  // posted receive and completes without waiting for the receiver to reach that action.
  // A message between two chunks of this rank (one rank, interleaved) is handed over in `local`.
  std::map<std::tuple<PipelinePhase, int, int>, std::pair<Tensor, WorkPtr>> receives;
  std::map<std::tuple<PipelinePhase, int, int>, Tensor> local;
  for (const PipelineAction& a : plan_.actions[rank]) {
    const int stage = modelStage(a.chunk);
    const int peer_stage = a.phase == PipelinePhase::kForward ? stage - 1 : stage + 1;
    if (peer_stage < 0 || peer_stage >= plan_.modelStages() || rankOf(peer_stage) == rank) continue;
    if (a.phase == PipelinePhase::kForward) {
      Tensor buffer =
          Tensor::empty(batchShape(rows, stage_input_shape_[stage]), DType::kF32, device);
      receives[{a.phase, a.micro_batch, a.chunk}] = {
          buffer, comm_.irecv(buffer, rankOf(stage - 1), tag(a.phase, a.micro_batch, stage))};
    } else if (a.phase == PipelinePhase::kBackward) {
      Tensor buffer =
          Tensor::empty(batchShape(rows, stage_output_shape_[stage]), DType::kF32, device);
      receives[{a.phase, a.micro_batch, a.chunk}] = {
          buffer, comm_.irecv(buffer, rankOf(stage + 1), tag(a.phase, a.micro_batch, stage))};
    }
  }
  PipelineStepResult result;
  double last_exposed_ms = 0;  // of the latest receive: its transfer the caller waited for
  auto receive = [&](const PipelineAction& a) {
    last_exposed_ms = 0;
    if (auto it = local.find({a.phase, a.micro_batch, a.chunk}); it != local.end()) {
      Tensor handed = it->second;
      local.erase(it);
      return handed;
    }
    auto& [buffer, work] = receives.at({a.phase, a.micro_batch, a.chunk});
    const auto start = Clock::now();
    work->wait();
    const double blocked_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    // Of the time blocked, at most the message's transfer is communication; the rest waited for
    // the sending stage (the receive's own wait, measured from the sender's launch time).
    const double transfer_ms =
        std::max(0.0, work->durationMs().value_or(0.0) - work->waitMs().value_or(0.0));
    const double exposed_ms = std::min(blocked_ms, transfer_ms);
    last_exposed_ms = exposed_ms;
    result.exposed_transfer_ms += exposed_ms;
    result.pipeline_wait_ms += blocked_ms - exposed_ms;
    result.transfer_ms += transfer_ms;
    return buffer;
  };
  std::vector<WorkPtr> sends;
  auto send = [&](PipelinePhase phase, int micro, int to_stage, const Tensor& tensor) {
    if (rankOf(to_stage) == rank) {
      local[{phase, micro, to_stage / comm_.size()}] = tensor;
      return;
    }
    if (device.isCuda()) synchronize(device);
    sends.push_back(comm_.isend(tensor, rankOf(to_stage), tag(phase, micro, to_stage)));
  };
  // What each (chunk, micro-batch) keeps between its F and B (and B and W): the modules' contexts
  // and, on the last stage, the loss gradient.
  std::map<std::pair<int, int>, ChildrenContext> contexts;
  std::map<std::pair<int, int>, Tensor> loss_grads;
  SoftmaxCrossEntropy loss_fn;
  auto save = [&](size_t first, size_t end) { return model_.saveChildContexts(first, end); };
  auto restore = [&](size_t first, const ChildrenContext& saved) {
    model_.restoreChildContexts(first, saved);
  };

  for (const PipelineAction& a : plan_.actions[rank]) {
    const int stage = modelStage(a.chunk);
    const auto [first, end] = stages_[stage];
    const std::pair<int, int> key{a.chunk, a.micro_batch};
    ExecutedAction executed{a, stage, nowUs(), 0, 0};
    if (a.phase == PipelinePhase::kForward) {
      // Only a receive is waiting: reading the micro-batch (the first stage's features, the last
      // stage's labels) is part of the action's work.
      Batch batch;
      Tensor x;
      if (isFirst(stage)) {
        executed.ready_us = executed.start_us;
        batch = micro_batch(a.micro_batch);
        x = batch.inputs;
      } else {
        x = receive(a);
        executed.ready_us = nowUs();
        executed.transfer_us = inputTransferUs(executed, last_exposed_ms);
        if (isLast(stage)) batch = micro_batch(a.micro_batch);
      }
      for (size_t m = first; m < end; ++m) x = model_.forwardChild(m, x);
      contexts[key] = save(first, end);
      if (isLast(stage)) {
        // Per-token logits [rows, T, V] against targets [rows, T]: the mean over every target (as
        // WholeModelStrategy::trainBatch); correct counts targets, samples counts samples.
        const int64_t classes = x.shape().back();
        const Tensor logits = x.view({x.numel() / classes, classes});
        const Tensor targets = batch.targets.view({batch.targets.numel()});
        result.loss_sum += loss_fn.forward(logits, targets);
        result.correct += ops::countCorrect(logits, targets);
        result.samples += batch.targets.dim(0);
        loss_grads[key] = loss_fn.backward(grad_scale).view(x.shape());
      } else {
        executed.end_us = nowUs();  // the send is communication, not part of the action
        send(a.phase, a.micro_batch, stage + 1, x);
      }
    } else if (a.phase == PipelinePhase::kBackward) {
      Tensor grad = isLast(stage) ? loss_grads.at(key) : receive(a);
      executed.ready_us = isLast(stage) ? executed.start_us : nowUs();
      executed.transfer_us = isLast(stage) ? 0 : inputTransferUs(executed, last_exposed_ms);
      loss_grads.erase(key);
      restore(first, contexts.at(key));
      for (size_t m = end; m-- > first;)
        grad = split_backward ? model_.backwardInputChild(m, grad) : model_.backwardChild(m, grad);
      if (split_backward)
        contexts[key] = save(first, end);  // what the W action needs
      else
        contexts.erase(key);
      if (!isFirst(stage)) {
        executed.end_us = nowUs();
        send(a.phase, a.micro_batch, stage - 1, grad);
      }
    } else {
      executed.ready_us = executed.start_us;
      restore(first, contexts.at(key));
      for (size_t m = end; m-- > first;) model_.child(m).backwardWeights();
      contexts.erase(key);
    }
    if (executed.end_us == 0) executed.end_us = nowUs();
    result.actions.push_back(executed);
  }
  for (const WorkPtr& send : sends) {
    send->wait();
    result.transfer_ms += send->durationMs().value_or(0.0);
  }
  // The loss lives on the last stage's rank; every rank reports it.
  Tensor totals =
      Tensor::fromVector({static_cast<float>(result.loss_sum), static_cast<float>(result.correct),
                          static_cast<float>(result.samples)},
                         {3}, device);
  comm_.broadcast(totals, rankOf(plan_.modelStages() - 1))->wait();
  const std::vector<float> values = totals.toFloatVector();
  result.loss_sum = values[0];
  result.correct = static_cast<int64_t>(values[1]);
  result.samples = static_cast<int64_t>(values[2]);
  return result;
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
      SoftmaxCrossEntropy loss_fn;
      result.tokens = targets.numel();
      result.loss_sum = loss_fn.forward(x.view({x.numel() / classes, classes}), targets) *
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
