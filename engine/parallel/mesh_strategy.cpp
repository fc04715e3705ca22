// `mesh`: any dp x tp x pp layout behind the strategy interface, composed from the dimensions'
// runtimes over the device mesh (parallel/device_mesh.h). tp splits the model's layers
// (parallel/mesh_model.h); pp runs the pipeline (parallel/pipeline.h) over the pp group; dp is the
// registered data-parallel plan's runtime over the dp group (parallel/data_parallel.h): with
// pp = 1 around the (tp-split) model, with pp > 1 the stage's gradients averaged after the
// schedule, sharded where the plan shards (parallel/replica_gradients.h). The gradient norm counts
// every element once across the mesh, and the full state dict gathers tp's slices and pp's stages
// into the plain model's names.
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "core/error.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"
#include "parallel/grad_norm.h"
#include "parallel/mesh_model.h"
#include "parallel/pipeline.h"
#include "parallel/replica_gradients.h"
#include "parallel/strategy.h"
#include "parallel/tensor_parallel/mappings.h"
#include "spec/strategies/plan.h"
#include "tensor/ops.h"

namespace ringmaster {

namespace {

// The pipeline's partition of the model's blocks: the spec's, or balanced by the whole model's
// parameter counts, so that every tp rank, and the memory estimate, cut where one process would
// (a tp rank's own counts, its vocabulary slice, would cut elsewhere).
std::vector<std::vector<int>> stagePartition(const JobSpec& spec) {
  const PipelineSpec& pipeline = spec.strategy.pipeline;
  if (!pipeline.stages.empty() || spec.strategy.mesh.tp == 1) return pipeline.stages;
  std::vector<int64_t> weights;
  for (const ModelBlock& block : describeModel(spec.model).blocks)
    weights.push_back(block.parameters);
  const int stages = spec.strategy.mesh.pp * pipeline.virtual_stages;
  std::vector<size_t> firsts = pipelineStageStarts(spec, weights, stages);
  firsts.push_back(weights.size());
  std::vector<std::vector<int>> partition(static_cast<size_t>(stages));
  for (size_t s = 0; s < partition.size(); ++s)
    for (size_t block = firsts[s]; block < firsts[s + 1]; ++block)
      partition[s].push_back(static_cast<int>(block));
  return partition;
}

// The whole model's parameters, names and full shapes in its order: the model's own, or with
// tp > 1 (the GPT's split, whose shapes are slices) the description's.
std::vector<ParameterInfo> wholeModelParameters(const JobSpec& spec, Sequential& model) {
  if (spec.strategy.mesh.tp > 1) return describeModel(spec.model).parameters;
  std::vector<ParameterInfo> out;
  for (const NamedParameter& p : model.namedParameters())
    out.push_back({p.name, p.parameter->value.shape()});
  return out;
}

// Communication the caller waited on at once (tensor parallelism's): all of it is exposed.
template <typename Timing>
void addBlockingComm(Timing& timing, double ms) {
  timing.comm_ms += ms;
  timing.exposed_comm_ms += ms;
}

// What every mesh runtime shares: the mesh, this rank's model and the rule of which tp rank
// counts a parameter.
class MeshParts {
 public:
  MeshParts(const StrategySetup& setup)
      : spec_(setup.spec),
        mesh_(*setup.world, setup.spec.strategy.mesh),
        model_(makeMeshModel(setup.model, setup.spec, mesh_)) {
    model_.model->setActivationCheckpointing(spec_.train.activation_checkpointing);
  }

  DeviceMesh& mesh() { return mesh_; }
  const DeviceMesh& mesh() const { return mesh_; }
  Sequential& model() { return *model_.model; }
  const MeshModel& meshModel() const { return model_; }
  Communicator& group(MeshDim dim) { return mesh_.group(dim); }
  const DataParallelRuntime& dataParallel() const {
    return dataParallelRuntime(spec_.strategy.data_parallel);
  }
  // tp's share of the rule: a parameter every tp rank holds whole counts on tp rank 0 only.
  bool tpCounts(const std::string& name) const {
    return mesh_.coordinates().tp == 0 || !model_.tp_whole(name);
  }
  bool sequenceParallel() const {
    return spec_.strategy.tp.sequence_parallel && mesh_.size(MeshDim::kTp) > 1;
  }
  // Sequence parallelism: each tp rank's gradients of the parameters every tp rank holds whole
  // (`whole_gradients`, in any holder: the parameters' own, a flat shard's slices) are its
  // tokens' share; summed over tp they are the gradient.
  // Returns the time spent in the all-reduce (exposed: it is waited on at once).
  double sumSequenceParallelGradients(const std::vector<Tensor>& whole_gradients) {
    const double before = tensorParallelMs();
    allReduceSumPacked(whole_gradients, mesh_.group(MeshDim::kTp));
    return tensorParallelMs() - before;
  }
  // The time this rank has spent in tensor-parallel collectives so far. Every one is waited on at
  // once (parallel/tensor_parallel/mappings.h), so all of it is exposed communication: a step
  // counts it there, not as compute.
  double tensorParallelMs() { return mesh_.group(MeshDim::kTp).completedCollectiveMs(); }
  bool tpWhole(const std::string& name) const { return model_.tp_whole(name); }
  // `local` (this rank's parameters, by name) with tp's slices gathered to full values.
  StateDict gatherTensorParallel(StateDict local) {
    for (auto& [name, value] : local) value = model_.gather_full(name, value);
    return local;
  }

 private:
  const JobSpec& spec_;
  DeviceMesh mesh_;
  MeshModel model_;
};

// pp = 1: the whole model on every rank of a replica (split by tp), the data-parallel plan's
// runtime around it.
class MeshModelStrategy final : public WholeModelStrategy {
 public:
  explicit MeshModelStrategy(const StrategySetup& setup)
      : parts_(setup),
        dp_(parts_.dataParallel().wrap(parts_.model(), parts_.group(MeshDim::kDp), setup.spec)) {}

  Sequential& model() override { return parts_.model(); }
  Communicator* dataParallelGroup() override { return &parts_.group(MeshDim::kDp); }
  // The pass's tensor-parallel collectives (the layers', the vocabulary-parallel loss's) are its
  // communication, all of it exposed.
  BatchPass trainBatch(const std::vector<int64_t>& indices, const BatchMaker& make_batch,
                       int accumulation, bool sync) override {
    const double tp_before = parts_.tensorParallelMs();
    BatchPass pass = WholeModelStrategy::trainBatch(indices, make_batch, accumulation, sync);
    addBlockingComm(pass, parts_.tensorParallelMs() - tp_before);
    return pass;
  }
  GradientSyncTiming finishGradientSync() override {
    GradientSyncTiming timing = dp_->finishGradientSync();
    if (parts_.sequenceParallel()) {
      addBlockingComm(timing, parts_.sumSequenceParallelGradients(dp_->gradientsOf(
                                  [&](const std::string& name) { return parts_.tpWhole(name); })));
    }
    return timing;
  }
  StopFlagCarrier* stopFlagCarrier() override {
    const bool spans_world = parts_.group(MeshDim::kDp).size() == parts_.mesh().world().size();
    return spans_world ? dp_->stopFlagCarrier() : nullptr;
  }
  std::vector<NamedParameter> optimizerParameters() override { return dp_->optimizerParameters(); }
  // Each gradient element on exactly one rank: dp's shards are disjoint (unsharded replicas all
  // hold it, and dp rank 0 counts it), and of what every tp rank holds whole tp rank 0 counts it.
  double clipGradNorm(double max_norm) override {
    // Whole replicas (DDP without tp) hold the same averaged gradients on every rank: each
    // computes the norm alone, as clip_grad_norm_ does under PyTorch's DDP, with no collective.
    if (!dp_->shardsGradients() && parts_.mesh().size(MeshDim::kTp) == 1)
      return ringmaster::clipGradNorm(optimizerParameters(), max_norm);
    std::vector<Tensor> counted;
    if (dp_->shardsGradients() || parts_.mesh().coordinates().dp == 0)
      counted = dp_->gradientsOf([&](const std::string& name) { return parts_.tpCounts(name); });
    return clipGradNormCountedOnce(counted, optimizerParameters(), parts_.mesh().world(), max_norm);
  }
  bool perRankCheckpoints() const override { return split(); }
  bool consolidates() const override { return split(); }
  StateDict fullStateDict() override { return parts_.gatherTensorParallel(dp_->parameters()); }

 protected:
  Tensor forward(const Tensor& input) override { return dp_->forward(input); }
  void backward(const Tensor& grad_output, bool sync) override { dp_->backward(grad_output, sync); }
  std::unique_ptr<LossFunction> makeLoss() const override {
    const LossFactory& make = parts_.meshModel().make_loss;
    return make ? make() : WholeModelStrategy::makeLoss();
  }

 private:
  // Whether the model is anything but whole on every rank.
  bool split() const { return dp_->splitsModel() || parts_.mesh().size(MeshDim::kTp) > 1; }

  MeshParts parts_;
  std::unique_ptr<DataParallelModel> dp_;
};

// pp > 1: the pipeline over the pp group, each stage's model split by tp; dp averages the
// stage's gradients across replicas after the schedule (sharding them under FSDP).
class MeshPipelineStrategy final : public ParallelStrategy {
 public:
  explicit MeshPipelineStrategy(const StrategySetup& setup)
      : parts_(setup),
        micro_batches_(setup.spec.train.micro_batches),
        full_names_(wholeModelParameters(setup.spec, parts_.model())),
        pipeline_(parts_.model(), parts_.group(MeshDim::kPp),
                  PipelineOptions{.schedule = setup.spec.strategy.pipeline.schedule,
                                  .virtual_stages = setup.spec.strategy.pipeline.virtual_stages,
                                  .micro_batches = setup.spec.train.micro_batches,
                                  .stages = stagePartition(setup.spec),
                                  .make_loss = parts_.meshModel().make_loss}) {
    const bool shards = parts_.dataParallel().shards_stage;
    if (parts_.group(MeshDim::kDp).size() > 1 || shards)
      replicas_.emplace(pipeline_.parameters(), parts_.group(MeshDim::kDp), shards);
  }

  Sequential& model() override { return parts_.model(); }
  Communicator* dataParallelGroup() override { return &parts_.group(MeshDim::kDp); }

  BatchPass trainBatch(const std::vector<int64_t>& indices, const BatchMaker& make_batch,
                       int accumulation, bool sync) override {
    if (replicas_) replicas_->gatherIfStale();
    sync_pending_ = sync_pending_ || sync;
    const double tp_before = parts_.tensorParallelMs();
    const auto rows = static_cast<int64_t>(indices.size()) / micro_batches_;
    PipelineStepResult step = pipeline_.runStep(
        rows,
        [&](int i) {
          return make_batch(
              std::vector<int64_t>(indices.begin() + i * rows, indices.begin() + (i + 1) * rows));
        },
        lossScale() / static_cast<float>(accumulation * micro_batches_));
    // The stages' transfers, and their layers' tensor-parallel collectives (all exposed).
    const double tp_ms = parts_.tensorParallelMs() - tp_before;
    return BatchPass{.loss = step.loss_sum / micro_batches_,
                     .correct = step.correct,
                     .samples = step.samples,
                     .comm_ms = step.transfer_ms + tp_ms,
                     .exposed_comm_ms = step.exposed_transfer_ms + tp_ms,
                     .wait_ms = step.pipeline_wait_ms,
                     .actions = std::move(step.actions)};
  }
  // Forward only, the whole batch at once (no micro-batches: nothing to overlap without a
  // backward).
  EvalBatchPass evaluateBatch(const std::vector<int64_t>& indices,
                              const BatchMaker& make_batch) override {
    if (replicas_) replicas_->gatherIfStale();
    const PipelineParallel::EvalResult result = pipeline_.evaluate(
        static_cast<int64_t>(indices.size()), [&] { return make_batch(indices); });
    return {.loss_sum = result.loss_sum, .tokens = result.tokens};
  }
  // The tied parameters' copies summed across stages, then the replicas' average.
  GradientSyncTiming finishGradientSync() override {
    if (!sync_pending_) return {};
    sync_pending_ = false;
    const double tied_ms = pipeline_.reduceTiedGradients();
    GradientSyncTiming timing{.comm_ms = tied_ms, .exposed_comm_ms = tied_ms};
    if (replicas_) {
      const GradientSyncTiming replica = replicas_->reduce();
      timing.comm_ms += replica.comm_ms;
      timing.exposed_comm_ms += replica.exposed_comm_ms;
    }
    if (parts_.sequenceParallel()) {
      addBlockingComm(timing, parts_.sumSequenceParallelGradients(gradientsOf(
                                  [&](const std::string& name) { return parts_.tpWhole(name); })));
    }
    return timing;
  }
  std::vector<NamedParameter> optimizerParameters() override {
    return replicas_ ? replicas_->optimizerParameters() : pipeline_.parameters();
  }
  double clipGradNorm(double max_norm) override {
    return clipGradNormCountedOnce(countedGradients(), optimizerParameters(), parts_.mesh().world(),
                                   max_norm);
  }
  int forwardsPerBatch() const override { return micro_batches_; }
  bool perRankCheckpoints() const override { return true; }
  bool consolidates() const override { return true; }
  // Each stage's parameters with tp's slices gathered, then every stage's broadcast over the pp
  // group from the rank that holds it, in the plain model's order.
  StateDict fullStateDict() override {
    if (replicas_) replicas_->gatherIfStale();
    StateDict held;
    for (const NamedParameter& p : heldParameters()) held.emplace_back(p.name, p.parameter->value);
    held = parts_.gatherTensorParallel(std::move(held));
    return assembleStages(held);
  }

 private:
  // The parameters this rank's stages own (not the tied copies, which their owner counts).
  std::vector<NamedParameter> heldParameters() {
    std::vector<NamedParameter> held;
    for (const NamedParameter& p : pipeline_.parameters()) {
      bool copy = false;
      for (const NamedParameter& c : pipeline_.copies()) copy = copy || c.parameter == p.parameter;
      if (!copy) held.push_back(p);
    }
    return held;
  }

  // The gradients the optimizer sees of the parameters `wanted` accepts: the parameters' own, or
  // the slices of the replicas' flat shard that hold them.
  std::vector<Tensor> gradientsOf(const std::function<bool(const std::string&)>& wanted) {
    if (replicas_ && replicas_->sharded()) {
      std::vector<std::pair<std::string, int64_t>> layout;
      for (const NamedParameter& p : replicas_->parameters())
        layout.emplace_back(p.name, p.parameter->value.numel());
      return flatShardSlices(layout, replicas_->shardGrad(), replicas_->shardStart(), wanted);
    }
    std::vector<Tensor> out;
    for (const NamedParameter& p : pipeline_.parameters())
      if (wanted(p.name)) out.push_back(p.parameter->grad);
    return out;
  }
  // Each gradient element on exactly one rank: as MeshModelStrategy's, and a tied parameter's
  // copy is counted by the stage that owns it.
  std::vector<Tensor> countedGradients() {
    if (!(replicas_ && replicas_->sharded()) && parts_.mesh().coordinates().dp != 0) return {};
    return gradientsOf([&](const std::string& name) {
      if (!parts_.tpCounts(name)) return false;
      for (const NamedParameter& c : pipeline_.copies())
        if (c.name == name) return false;
      return true;
    });
  }

  StateDict assembleStages(const StateDict& held) {
    Communicator& pp = parts_.group(MeshDim::kPp);
    const Device device = pp.device();
    std::vector<float> owner(full_names_.size(), -1.0f);
    for (size_t i = 0; i < full_names_.size(); ++i)
      for (const auto& [name, value] : held)
        if (name == full_names_[i].name) owner[i] = static_cast<float>(pp.rank());
    Tensor owners = Tensor::fromVector(owner, {static_cast<int64_t>(owner.size())}, device);
    pp.allReduce(owners, ReduceOp::max())->wait();
    const std::vector<float> root = owners.toFloatVector();
    StateDict full;
    for (size_t i = 0; i < full_names_.size(); ++i) {
      const ParameterInfo& info = full_names_[i];
      RM_ENFORCE(root[i] >= 0, fmt::format("no pipeline stage holds {}", info.name));
      Tensor value = Tensor::empty(info.shape, DType::kF32, device);
      for (const auto& [name, local] : held)
        if (name == info.name) value.copyFrom(local);
      pp.broadcast(value, static_cast<int>(root[i]))->wait();
      full.emplace_back(info.name, value);
    }
    return full;
  }

  MeshParts parts_;
  int micro_batches_;
  std::vector<ParameterInfo> full_names_;  // the plain model's parameters, in its order
  PipelineParallel pipeline_;
  std::optional<ReplicaGradients> replicas_;  // dp > 1, or FSDP
  bool sync_pending_ = false;  // a synchronised batch ran since the last finishGradientSync
};

}  // namespace

std::unique_ptr<ParallelStrategy> makeMeshStrategy(const StrategySetup& setup) {
  // Pipeline stages: pp > 1, or one rank running interleaved virtual stages.
  if (stageCount(setup.spec) > 1) return std::make_unique<MeshPipelineStrategy>(setup);
  return std::make_unique<MeshModelStrategy>(setup);
}

}  // namespace ringmaster
