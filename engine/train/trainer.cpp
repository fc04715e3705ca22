// One rank's training loop under any strategy, and the builders that turn spec sections into
// engine objects.
#include "train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "data/distributed_sampler.h"
#include "optim/grad_scaler.h"
#include "parallel/strategy.h"
#include "spec/mesh_layout.h"
#include "telemetry/custom_metrics.h"
#include "tensor/allocator.h"
#include "train/checkpoint_layout.h"
#include "train/evaluation.h"
#include "train/stop_agreement.h"
#include "train/throughput.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;

// Whether any rank says yes (one all-reduce, MAX, with several ranks): every rank reaches the same
// verdict. Whether any rank's gradients overflowed (fp16: all skip the step). (Whether to stop is
// agreed without a blocking collective: train/stop_agreement.h.)
bool anyRankAgrees(bool here, Communicator* world) {
  if (world == nullptr || world->size() == 1) return here;
  Tensor flag = Tensor::fromInts({here ? 1 : 0}, {1}, world->device());
  world->allReduce(flag, ReduceOp::max())->wait();
  return flag.toFloatVector()[0] != 0;
}

// TEST ONLY: RINGMASTER_TEST_COMPUTE_DELAY="RANK:MS" makes world rank RANK sleep MS milliseconds
// in the compute of every step (before its first micro-batch's forward), so that tests can make a
// real straggler (docs/telemetry.md, "Waiting versus transfer of a collective"). Never set it in
// a real run. Unset, or another rank: no delay; malformed: a kInvalidArgument error.
std::chrono::milliseconds testComputeDelay(int rank) {
  const char* value = std::getenv("RINGMASTER_TEST_COMPUTE_DELAY");
  if (value == nullptr || *value == '\0') return std::chrono::milliseconds(0);
  int delayed_rank = -1;
  long ms = -1;
  char tail = 0;
  if (std::sscanf(value, "%d:%ld%c", &delayed_rank, &ms, &tail) != 2 || delayed_rank < 0 ||
      ms < 0 || ms > 600000) {
    RM_THROW(kInvalidArgument,
             fmt::format("RINGMASTER_TEST_COMPUTE_DELAY (test only): expected RANK:MS with MS in "
                         "[0, 600000], got \"{}\"",
                         value));
  }
  return std::chrono::milliseconds(delayed_rank == rank ? ms : 0);
}

}  // namespace

Device resolveDevice(DeviceKind kind, int local_rank) {
  // A rank on the CPU does not ask the driver how many devices there are: it maps no CUDA library.
  if (kind == DeviceKind::kCpu) return Device::cpu();
  const int devices = cudaDeviceCount();
  switch (kind) {
    case DeviceKind::kCpu:
      return Device::cpu();
    case DeviceKind::kAuto:
      return devices > 0 ? Device::cuda(local_rank % devices) : Device::cpu();
    case DeviceKind::kCuda:
      if (devices == 0) {
        RM_THROW(kUnavailable, cudaAvailable() || !RINGMASTER_HAVE_CUDA
                                   ? "device: cuda asked for, but this build has no CUDA support"
                                   : "device: cuda asked for, but no CUDA device is visible");
      }
      return Device::cuda(local_rank % devices);
  }
  RM_ENFORCE(false, "unknown device kind");
}

std::string backendFor(BackendKind kind, Device device) {
  switch (kind) {
    case BackendKind::kAuto:
      return device.isCuda() ? "nccl" : "gloo";
    case BackendKind::kGloo:
      return "gloo";
    case BackendKind::kNccl:
      RM_CHECK_ARG(device.isCuda(),
                   "backend: 'nccl' needs CUDA devices; this rank runs on the "
                   "host (use 'gloo' or 'auto')");
      return "nccl";
  }
  RM_ENFORCE(false, "unknown backend kind");
}

std::unique_ptr<Optimizer> makeOptimizer(const OptimizerSpec& spec,
                                         std::vector<NamedParameter> parameters) {
  if (spec.kind == OptimizerKind::kSgd) {
    return std::make_unique<Sgd>(std::move(parameters),
                                 SgdOptions{.lr = static_cast<float>(spec.lr),
                                            .momentum = static_cast<float>(spec.momentum),
                                            .dampening = static_cast<float>(spec.dampening),
                                            .weight_decay = static_cast<float>(spec.weight_decay),
                                            .nesterov = spec.nesterov});
  }
  return std::make_unique<Adam>(
      std::move(parameters),
      AdamOptions{.lr = static_cast<float>(spec.lr),
                  .beta1 = static_cast<float>(spec.betas[0]),
                  .beta2 = static_cast<float>(spec.betas[1]),
                  .eps = static_cast<float>(spec.eps),
                  .weight_decay = static_cast<float>(spec.weight_decay),
                  .decoupled_weight_decay = spec.kind == OptimizerKind::kAdamW});
}

Trainer::Trainer(JobSpec spec, RankContext context, TelemetryWriter& telemetry,
                 std::function<bool()> stop_requested, std::FILE* log, Communicator* world,
                 TelemetryCommObserver* comm_observer)
    : spec_(std::move(spec)),
      context_(std::move(context)),
      telemetry_(telemetry),
      stop_requested_(std::move(stop_requested)),
      log_(log),
      world_(world),
      comm_observer_(comm_observer) {}

namespace {

std::string rankCheckpointDir(const std::string& dir, const RankContext& context) {
  return fmt::format("{}/rank_{}_of_{}", dir, context.rank, context.world_size);
}

// Loads the checkpoint the ranks resume from: the newest intact one in this rank's `dir` and,
// with several ranks, the newest step intact on every rank (they agree on it, lowering it until
// every rank holds it). Each checkpoint passed over goes to `skipped`. Returns the step, or
// nullopt to start afresh: no rank has any checkpoint but incomplete ones (never read). Throws
// kFormat when checkpoints exist but none is usable, listing each one tried, on every rank.
std::optional<int64_t> loadResumeCheckpoint(
    const std::string& dir, Communicator* world, const std::vector<NamedParameter>& parameters,
    Optimizer& optimizer, GradScaler* scaler,
    const std::function<void(const SkippedCheckpoint&)>& skipped) {
  std::vector<SkippedCheckpoint> tried;
  const auto skip = [&](const SkippedCheckpoint& checkpoint) {
    for (const SkippedCheckpoint& seen : tried)
      if (seen.dir == checkpoint.dir) return;
    tried.push_back(checkpoint);
    skipped(checkpoint);
  };
  const auto noneUsable = [&] {
    std::string list;
    for (const SkippedCheckpoint& checkpoint : tried)
      list += fmt::format("\n  {}: {}", checkpoint.dir, checkpoint.reason);
    RM_THROW(kFormat,
             fmt::format("checkpoint.resume: no usable checkpoint in {}; tried:{}", dir, list));
  };
  // Steps travel as int32 in the agreement; no spec trains past 10^9 steps.
  int64_t bound = std::numeric_limits<int32_t>::max();
  std::optional<int64_t> loaded;
  for (;;) {
    if (!loaded || *loaded > bound)
      loaded = loadNewestGoodCheckpoint(dir, bound, parameters, optimizer, skip, scaler);
    const bool damaged = !loaded && std::any_of(tried.begin(), tried.end(),
                                                [](const auto& c) { return !c.incomplete; });
    if (world == nullptr || world->size() == 1) {
      if (damaged) noneUsable();
      return loaded;
    }
    // -1: nothing usable here. The ranks learn the lowest and the highest step held.
    const int32_t here = damaged ? -1 : static_cast<int32_t>(loaded.value_or(0));
    Tensor agreed = Tensor::fromInts({here, -here}, {2}, world->device());
    world->allReduce(agreed, ReduceOp::min())->wait();
    const Tensor range = agreed.to(Device::cpu());
    const int64_t lowest = range.data<int32_t>()[0], highest = -int64_t{range.data<int32_t>()[1]};
    if (damaged) noneUsable();
    if (lowest < 0) {
      RM_THROW(kFormat, "checkpoint.resume: another rank has no usable checkpoint (see its error)");
    }
    if (lowest == highest) return loaded;
    if (lowest == 0) {
      RM_THROW(kFormat, fmt::format("checkpoint.resume: no step has a checkpoint on every rank: "
                                    "{} holds step {}, another rank none",
                                    dir, *loaded));
    }
    bound = lowest;
  }
}

// Writes this rank's part of checkpoint `step` (when it writes any); FSDP with
// checkpoint.consolidate also gathers the whole model (collective) for rank 0 to write beside.
// Returns the step directory this rank wrote.
std::optional<std::string> saveCheckpoint(ParallelStrategy& runner, const CheckpointSpec& spec,
                                          const std::string& dir, bool writes,
                                          const RankContext& context, int64_t step,
                                          const std::vector<NamedParameter>& parameters,
                                          const Optimizer& optimizer, const GradScaler* scaler) {
  std::optional<std::string> written;
  if (writes) written = saveTrainingCheckpoint(dir, step, parameters, optimizer, scaler);
  if (runner.consolidates() && spec.consolidate) {
    StateDict whole = runner.fullStateDict();
    if (context.rank == 0) saveModelWeights(spec.dir, step, whole);
  }
  return written;
}

SchedPhase schedPhase(PipelinePhase phase) {
  switch (phase) {
    case PipelinePhase::kForward:
      return SchedPhase::kForward;
    case PipelinePhase::kBackward:
      return SchedPhase::kBackward;
    case PipelinePhase::kWeight:
      return SchedPhase::kWeight;
  }
  RM_ENFORCE(false, "unknown pipeline phase");
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// The run's own types: what it builds before the first step, what one step did, what the steps
// since the last report add up to, and what a reported step tells.

// Everything a run builds before its first step, in the order it is built. Built in place and
// never moved: the strategy holds the model, the evaluator the validation set.
struct Trainer::Session {
  Device device;
  CachingAllocator* allocator = nullptr;  // the device's
  std::unique_ptr<Dataset> dataset;
  ModelDescription description;
  std::unique_ptr<Sequential> model;
  int64_t parameter_count = 0;
  // The strategy of spec.strategy's mesh (parallel/strategies.cpp); the loop calls only its
  // interface.
  std::unique_ptr<ParallelStrategy> runner;
  std::vector<NamedParameter> parameters;  // what the optimizer updates (shards, stages)
  std::unique_ptr<Optimizer> optimizer;
  // fp16: dynamic loss scaling (GradScaler's semantics); bf16 and fp32 need none.
  std::optional<GradScaler> scaler;
  // Replicated models: rank 0 writes and every rank reads one checkpoint (so `dir` must be
  // reachable from every host). Sharded and staged ones: each rank its own.
  std::string checkpoint_dir;
  bool writes_checkpoints = false;
  // Resuming a checkpoint directory of another layout: the consolidated step loaded.
  std::optional<int64_t> other_layout_step;
  // The mesh's data-parallel ranks (dataParallelSize): each sees its share of every batch, and
  // the ranks that share its dp coordinate (a pipeline's stages, a tp group) the same share.
  int data_ranks = 1;
  std::optional<BatchIterator> batches;
  // The validation pass every train.eval_every steps and after the last (train/evaluation.h).
  std::unique_ptr<Dataset> validation;
  std::optional<Evaluator> evaluator;
  // Throughput: a sample's tokens are its target's elements (1 for a classifier); MFU over the
  // spec's peak, else the device's known one for the precision the matrix products run in.
  int64_t tokens_per_sample = 1;
  double flops_per_token = 0;
  std::optional<double> peak_flops;
  std::chrono::milliseconds test_compute_delay{0};  // test only: testComputeDelay
  // Where the last step ended: the next step's wall time counts from there (trainStep).
  std::optional<std::chrono::steady_clock::time_point> last_step_end;

  GradScaler* scalerOrNull() { return scaler ? &*scaler : nullptr; }
};

// What one optimizer step did: its loss and counts, its timings, and (when the step is reported)
// the pipeline actions it ran.
struct Trainer::StepOutcome {
  double loss = 0;  // the mean over the micro-batches
  int64_t samples = 0, correct = 0;
  // Wall time from the previous step's end (this step's own start for the first step run) to
  // this one's: the step and whatever the trainer did after the previous one (its report,
  // evaluation, checkpoint, the stop agreement), so that the steps' times add up to the loop's.
  double step_ms = 0;
  // The step's end, which stamps its step event (written later, after its sched events), so that
  // [t - step_ms, t] is the step on the trace's time axis.
  double end_time = 0;
  GradientSyncTiming sync;
  double pipeline_wait_ms = 0;  // blocked waiting for another stage: neither compute nor comm
  std::optional<double>
      loss_scale;                   // fp16: the scale this step's loss gradients were multiplied by
  std::optional<double> grad_norm;  // with optimizer.clip_grad_norm, before clipping
  bool update_skipped = false;      // fp16: a rank's gradients held an inf or NaN
  std::vector<SchedEvent> sched_events;
};

// A step event every `every` steps reports the timings of every step since the last one, as
// means (a lock-step pipeline's step time differs from step to step; one step in ten is no
// sample of it).
struct Trainer::IntervalTimes {
  double step_ms = 0, compute_ms = 0, comm_ms = 0, exposed_comm_ms = 0, pipeline_wait_ms = 0;
  int64_t samples = 0, skipped = 0;
  int steps = 0;

  void add(const StepOutcome& step) {
    if (step.update_skipped) ++skipped;
    step_ms += step.step_ms;
    // Never negative (the protocol refuses a negative duration), whatever the rounding of the
    // parts measured inside the step.
    compute_ms += std::max(0.0, step.step_ms - step.sync.exposed_comm_ms - step.pipeline_wait_ms);
    comm_ms += step.sync.comm_ms;
    exposed_comm_ms += step.sync.exposed_comm_ms;
    pipeline_wait_ms += step.pipeline_wait_ms;
    samples += step.samples;
    ++steps;
  }
};

// What a reported step tells: the step event (this step's loss and counts, the interval's mean
// timings, memory, throughput) with the time it is stamped with, the step's pipeline actions, and
// what the log line adds.
struct Trainer::StepReport {
  StepEvent event;
  double end_time = 0;
  std::vector<SchedEvent> sched_events;
  int64_t correct = 0;  // predicted targets, this step
  double step_ms = 0;   // this step alone (the log line's samples/s)
  bool update_skipped = false;
};

namespace {

SchedEvent schedEvent(int64_t step, const ExecutedAction& action, int micro_batch_offset) {
  return SchedEvent{.step = step,
                    .stage = action.model_stage,
                    .micro_batch = action.action.micro_batch + micro_batch_offset,
                    .phase = schedPhase(action.action.phase),
                    .start_us = action.start_us,
                    .end_us = action.end_us,
                    .ready_us = action.ready_us,
                    .transfer_us = action.transfer_us,
                    .virtual_stage = action.action.chunk};
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// The loop.

TrainingResult Trainer::run() {
  // Set-up: the device, the model and its data, the strategy and optimizer, and the checkpoint to
  // resume from.
  checkWorld();
  const auto wall_start = Clock::now();
  Session session;
  setUpDevice(session);
  setUpModel(session);
  setUpOptimizer(session);
  setUpCheckpoints(session);
  const int64_t first_step = resume(session);
  const int64_t steps_done = first_step - 1;
  setUpData(session, steps_done);

  TrainingResult result;
  result.final_step = steps_done;
  last_completed_step_ = steps_done;
  fmt::print(log_, "[rank {}] {}: {} parameters on {}, {} steps of {} x {} samples\n",
             context_.rank, spec_.name, session.parameter_count, session.device.str(),
             spec_.train.steps, spec_.train.grad_accum_steps, spec_.train.batch_size);
  session.test_compute_delay = testComputeDelay(context_.rank);
  const int64_t every = spec_.telemetry.every_steps;
  // The loop: one optimizer step, its report every telemetry.every_steps, the evaluation and the
  // checkpoint when due.
  IntervalTimes interval;
  StopAgreement stop(stop_requested_, world_, session.runner->stopFlagCarrier());
  for (int64_t step = first_step; step <= spec_.train.steps; ++step) {
    if (stop.stopBeforeStep(step, first_step)) {
      result.cancelled = true;
      break;
    }
    if (comm_observer_) comm_observer_->setStep(step);
    const bool reported = step % every == 0 || step == first_step || step == spec_.train.steps;
    StepOutcome outcome = trainStep(session, step, reported);
    if (step == first_step) result.first_loss = outcome.loss;
    result.last_loss = outcome.loss;
    result.final_step = step;
    last_completed_step_ = step;

    interval.add(outcome);
    if (reported) {
      reportStep(buildStepReport(session, step, std::move(outcome), interval));
      interval = {};
    }
    if (session.evaluator && (step % spec_.train.eval_every == 0 || step == spec_.train.steps))
      evaluate(session, step);
    if (spec_.checkpoint && spec_.checkpoint->every_steps > 0 &&
        step % spec_.checkpoint->every_steps == 0 && step != spec_.train.steps)
      saveCheckpointAt(session, step);
  }
  stop.finish();
  // The end: the last step's checkpoint (when a step ran).
  if (spec_.checkpoint && result.final_step > steps_done) {
    if (std::optional<std::string> path = saveCheckpointAt(session, result.final_step))
      fmt::print(log_, "[rank {}] checkpoint written to {}\n", context_.rank, *path);
  }
  result.wall_seconds = std::chrono::duration<double>(Clock::now() - wall_start).count();
  return result;
}

// ------------------------------------------------------------------------------------------------
// Set-up, in the order run() calls it.

void Trainer::checkWorld() const {
  const std::string strategy = strategyLabel(spec_);
  if (!needsWorldCommunicator(spec_)) {
    RM_CHECK_ARG(context_.world_size == 1, fmt::format("strategy: '{}' runs one rank, not {}",
                                                       strategy, context_.world_size));
  } else {
    RM_CHECK_ARG(world_ != nullptr && world_->size() == context_.world_size &&
                     world_->rank() == context_.rank,
                 fmt::format("strategy: '{}' needs the world communicator of rank {} of {}",
                             strategy, context_.rank, context_.world_size));
  }
  const MeshSpec& mesh = spec_.strategy.mesh;
  RM_CHECK_ARG(mesh.size() == context_.world_size,
               fmt::format("strategy.mesh: dp {} x tp {} x pp {} = {} ranks, but the world has {} "
                           "(the mesh of a spec read without launch.hosts spans one rank unless it "
                           "gives the sizes)",
                           mesh.dp, mesh.tp, mesh.pp, mesh.size(), context_.world_size));
}

// The device and its allocator, announced by the hello event.
void Trainer::setUpDevice(Session& session) {
  session.device = resolveDevice(spec_.device, context_.local_rank);
  session.allocator = &allocatorFor(session.device);
  const DeviceMemoryInfo device_memory = session.allocator->deviceMemory();
  const MeshSpec& mesh = spec_.strategy.mesh;
  const MeshCoordinates at = meshCoordinates(mesh, context_.rank);
  telemetry_.emit(HelloEvent{.world_size = context_.world_size,
                             .local_rank = context_.local_rank,
                             .host = context_.host,
                             .pid = static_cast<int64_t>(getpid()),
                             .device = session.device.str(),
                             .device_name = deviceName(session.device),
                             .device_memory_total = device_memory.total_bytes,
                             .version = RINGMASTER_VERSION,
                             .strategy = strategyLabel(spec_),
                             .attempt = context_.attempt,
                             .mesh = MeshAxes{.dp = mesh.dp, .tp = mesh.tp, .pp = mesh.pp},
                             .coords = MeshAxes{.dp = at.dp, .tp = at.tp, .pp = at.pp}});
}

// The training set and the model, checked against each other, with the model's initial weights.
void Trainer::setUpModel(Session& session) {
  session.dataset = makeDataset(spec_);
  const Dataset& dataset = *session.dataset;
  session.description = describeModel(spec_.model);
  const ModelDescription& description = session.description;
  RM_CHECK_ARG(dataset.inputShape() == description.inputShape(),
               fmt::format("data: samples of shape {}, but the model takes {}",
                           shapeStr(dataset.inputShape()), shapeStr(description.inputShape())));
  const int64_t model_outputs = shapeNumel(description.outputShape());
  const std::optional<int64_t> classes = dataset.classCount();
  RM_CHECK_ARG(!classes || *classes <= model_outputs,
               fmt::format("data: {} classes, but the model has {} outputs", classes.value_or(0),
                           model_outputs));
  session.model = buildModel(spec_.model, session.device);
  session.model->setInputGradientNeeded(false);  // its input is the data: no gradient wanted
  setAutocast(*session.model, precisionDType(spec_.train.precision));  // torch.autocast
  session.parameter_count = session.model->parameterCount();
  if (spec_.model.init_checkpoint)
    loadModelWeights(*spec_.model.init_checkpoint, session.model->namedParameters());
  // A checkpoint directory of another layout: its consolidated weights, before the strategy
  // splits the model (train/checkpoint_layout.h).
  if (spec_.checkpoint && spec_.checkpoint->resume) {
    std::string note;
    session.other_layout_step =
        resumeFromOtherLayout(spec_.checkpoint->dir, spec_, session.model->namedParameters(), note);
    if (session.other_layout_step && context_.rank == 0) {
      fmt::print(log_, "[rank {}] warning: {}\n", context_.rank, note);
      telemetry_.emit(LogEvent{.level = LogLevel::kWarn, .message = note});
    }
  }
}

// The strategy that wraps the model, the optimizer over what it updates, and the loss scaler.
void Trainer::setUpOptimizer(Session& session) {
  session.runner = makeParallelStrategy({.model = *session.model,
                                         .world = needsWorldCommunicator(spec_) ? world_ : nullptr,
                                         .spec = spec_});
  session.parameters = session.runner->optimizerParameters();
  session.optimizer = makeOptimizer(spec_.optimizer, session.parameters);
  if (spec_.train.precision == Precision::kFp16) {
    session.scaler.emplace(
        GradScalerOptions{.init_scale = spec_.train.loss_scale.init,
                          .growth_interval = spec_.train.loss_scale.growth_interval});
  }
}

// Where this rank's checkpoints go and whether it writes any, checked writable now rather than at
// the first save, which with every_steps 0 comes after all the training.
void Trainer::setUpCheckpoints(Session& session) {
  if (spec_.checkpoint) {
    session.checkpoint_dir = session.runner->perRankCheckpoints()
                                 ? rankCheckpointDir(spec_.checkpoint->dir, context_)
                                 : spec_.checkpoint->dir;
    session.writes_checkpoints = session.runner->perRankCheckpoints() || context_.rank == 0;
  }
  if (session.writes_checkpoints) checkCheckpointDirWritable(session.checkpoint_dir);
  if (spec_.checkpoint && context_.rank == 0) recordCheckpointLayout(spec_.checkpoint->dir, spec_);
  if (session.runner->consolidates() && spec_.checkpoint && spec_.checkpoint->consolidate &&
      context_.rank == 0)
    checkCheckpointDirWritable(spec_.checkpoint->dir);
}

// Resuming: weights, optimizer state, and the step count that positions the data order and the
// dropout streams where the interrupted run left them. Replicated models: every rank reads rank
// 0's checkpoint and reaches the same verdict, which rank 0 alone reports. Returns the first step
// to run.
int64_t Trainer::resume(Session& session) {
  if (!spec_.checkpoint || !spec_.checkpoint->resume) return 1;
  if (session.other_layout_step) return *session.other_layout_step + 1;
  std::vector<std::string> passed_over;
  const auto report = [&](LogLevel level, const std::string& message) {
    if (!session.writes_checkpoints) return;
    fmt::print(log_, "[rank {}] {}{}\n", context_.rank, level == LogLevel::kWarn ? "warning: " : "",
               message);
    telemetry_.emit(LogEvent{.level = level, .message = message});
  };
  const std::string& dir = session.checkpoint_dir;
  const std::optional<int64_t> resumed = loadResumeCheckpoint(
      dir, world_, session.parameters, *session.optimizer, session.scalerOrNull(),
      [&](const SkippedCheckpoint& skipped) {
        passed_over.push_back(std::filesystem::path(skipped.dir).filename().string());
        report(LogLevel::kWarn,
               fmt::format("skipping checkpoint {}: {}", skipped.dir, skipped.reason));
      });
  const std::string skipped_note =
      passed_over.empty()
          ? ""
          : fmt::format(" (skipped {}: {})", passed_over.size(), fmt::join(passed_over, ", "));
  if (resumed) {
    report(LogLevel::kInfo,
           fmt::format("resuming from {} at step {}{}", checkpointStepDir(dir, *resumed),
                       *resumed + 1, skipped_note));
    return *resumed + 1;
  }
  if (!passed_over.empty()) {
    report(LogLevel::kWarn,
           fmt::format("no complete checkpoint in {}: starting from step 1{}", dir, skipped_note));
  }
  return 1;
}

// The batches, positioned after `steps_done` steps (with the dropout streams), the evaluator, and
// the throughput's constants.
void Trainer::setUpData(Session& session, int64_t steps_done) {
  const Dataset& dataset = *session.dataset;
  // The ranks of one data-parallel replica (its tp ranks and pp stages) all see its batches.
  session.data_ranks = dataParallelSize(spec_);
  const int data_rank = meshCoordinates(spec_.strategy.mesh, context_.rank).dp;
  DistributedSampler sampler(dataset.size(), session.data_ranks, data_rank, spec_.data.shuffle,
                             spec_.train.seed, spec_.data.drop_last);
  session.batches.emplace(sampler, spec_.train.batch_size);
  // The validation set has its own samples, so the training order and the dropout streams are as
  // without it.
  if (spec_.train.eval_every > 0) {
    session.validation = makeValidationDataset(spec_);
    const Dataset* validation = session.validation.get();
    RM_CHECK_ARG(validation != nullptr,
                 fmt::format("train.eval_every: data.kind \"{}\" has no validation set here",
                             toString(spec_.data.kind)));
    RM_CHECK_ARG(
        validation->inputShape() == dataset.inputShape() &&
            validation->targetShape() == dataset.targetShape(),
        fmt::format("data: validation samples of shape {} -> {}, training ones {} -> {}",
                    shapeStr(validation->inputShape()), shapeStr(validation->targetShape()),
                    shapeStr(dataset.inputShape()), shapeStr(dataset.targetShape())));
    session.evaluator.emplace(*validation, session.data_ranks, data_rank, spec_.train.batch_size,
                              spec_.train.eval_batches);
  }
  const int accum = spec_.train.grad_accum_steps;
  session.batches->seek(steps_done * accum);
  const int forwards_per_batch = session.runner->forwardsPerBatch();
  forEachModule(session.runner->model(), [&](Module& module) {  // also the Dropouts inside blocks
    if (auto* dropout = dynamic_cast<Dropout*>(&module))
      dropout->setCalls(static_cast<uint64_t>(steps_done * accum * forwards_per_batch));
  });
  session.tokens_per_sample = std::max<int64_t>(1, shapeNumel(dataset.targetShape()));
  session.flops_per_token = trainingFlopsPerToken(session.description, session.tokens_per_sample);
  session.peak_flops =
      spec_.train.peak_tflops
          ? std::optional(*spec_.train.peak_tflops * 1e12)
          : knownPeakFlops(deviceName(session.device), spec_.train.precision == Precision::kFp32
                                                           ? MatmulPrecision::kFp32
                                                           : MatmulPrecision::kBf16);
}

// ------------------------------------------------------------------------------------------------
// One step.

// One optimizer step: the schedule's learning rate, every micro-batch's forward and backward, the
// gradients' reduction, and the update (skipped on every rank when fp16 gradients overflowed).
// Its wall time counts from the previous step's end (StepOutcome::step_ms).
Trainer::StepOutcome Trainer::trainStep(Session& session, int64_t step, bool reported) {
  StepOutcome outcome;
  const auto step_start = session.last_step_end.value_or(Clock::now());
  session.allocator->resetPeakStats();
  // The schedule's learning rate for this step, from the step alone: a resumed run continues it.
  session.optimizer->setLr(static_cast<float>(
      scheduledLr(spec_.optimizer.schedule, spec_.optimizer.lr, step, spec_.train.steps)));
  session.optimizer->zeroGrad();
  if (session.scaler) {
    outcome.loss_scale = session.scaler->scale();
    session.runner->setLossScale(static_cast<float>(*outcome.loss_scale));
  }
  runMicroBatches(session, step, reported, outcome);
  const GradientSyncTiming reduction = session.runner->finishGradientSync();
  outcome.sync.comm_ms += reduction.comm_ms;
  outcome.sync.exposed_comm_ms += reduction.exposed_comm_ms;
  // fp16: the gradients back to their true size before clipping, and the step skipped on every
  // rank when any rank's hold an inf or NaN (each checks what its optimizer updates: shards,
  // stages). The step still counts (the schedule moves on), as in PyTorch.
  if (session.scaler) {
    outcome.update_skipped = anyRankAgrees(session.scaler->unscale(session.parameters) > 0, world_);
    session.scaler->update(outcome.update_skipped);
  }
  if (spec_.optimizer.clip_grad_norm && !outcome.update_skipped)
    outcome.grad_norm = session.runner->clipGradNorm(*spec_.optimizer.clip_grad_norm);
  if (!outcome.update_skipped) session.optimizer->step();
  synchronize(session.device);
  session.last_step_end = Clock::now();
  outcome.step_ms =
      std::chrono::duration<double, std::milli>(*session.last_step_end - step_start).count();
  outcome.end_time = telemetryNow();
  if (!std::isfinite(outcome.loss)) {
    RM_THROW(kInvalidArgument, fmt::format("loss became {} at step {}; lower optimizer.lr or "
                                           "set optimizer.clip_grad_norm",
                                           outcome.loss, step));
  }
  return outcome;
}

// The step's train.grad_accum_steps micro-batches, forward and backward (the last one also starts
// the gradients' reduction): their mean loss, counts and timings into `outcome`, and, when the
// step is reported, the pipeline actions they ran.
void Trainer::runMicroBatches(Session& session, int64_t step, bool reported, StepOutcome& outcome) {
  const int accum = spec_.train.grad_accum_steps;
  const BatchMaker make_batch = [&](const std::vector<int64_t>& indices) {
    return makeBatch(*session.dataset, indices, session.device);
  };
  double loss_sum = 0.0;
  for (int micro = 0; micro < accum; ++micro) {
    if (micro == 0 && session.test_compute_delay.count() > 0)
      std::this_thread::sleep_for(session.test_compute_delay);
    BatchPass pass = session.runner->trainBatch(session.batches->next(), make_batch, accum,
                                                /*sync=*/micro == accum - 1);
    loss_sum += pass.loss;
    outcome.correct += pass.correct;
    outcome.samples += pass.samples;
    outcome.sync.comm_ms += pass.comm_ms;
    outcome.sync.exposed_comm_ms += pass.exposed_comm_ms;
    outcome.pipeline_wait_ms += pass.wait_ms;
    if (!reported) continue;
    for (const ExecutedAction& action : pass.actions) {
      outcome.sched_events.push_back(
          schedEvent(step, action, micro * session.runner->forwardsPerBatch()));
    }
  }
  outcome.loss = loss_sum / accum;
}

// ------------------------------------------------------------------------------------------------
// Reporting.

// The report of step `step`: its own loss and counts, the means of `interval` (the steps since
// the last report, this one included), the allocator's memory now, and the interval's throughput.
Trainer::StepReport Trainer::buildStepReport(Session& session, int64_t step, StepOutcome outcome,
                                             const IntervalTimes& interval) const {
  const MemoryStats memory = session.allocator->stats();
  const int64_t tokens = outcome.samples * session.tokens_per_sample;
  const double steps_in_interval = interval.steps;
  // Over the interval, as the timings: its tokens over its wall time.
  const double interval_tokens = static_cast<double>(interval.samples * session.tokens_per_sample);
  const double tokens_per_s =
      interval.step_ms > 0 ? interval_tokens * 1000.0 / interval.step_ms : 0.0;
  StepReport report{
      .event = {.step = step,
                .loss = outcome.loss,
                .lr = session.optimizer->lr(),
                .samples = outcome.samples,
                .step_ms = interval.step_ms / steps_in_interval,
                .compute_ms = interval.compute_ms / steps_in_interval,
                .comm_ms = interval.comm_ms / steps_in_interval,
                .exposed_comm_ms = interval.exposed_comm_ms / steps_in_interval,
                .mem_allocated = memory.allocated_bytes,
                .mem_peak = memory.peak_allocated_bytes,
                .mem_reserved = memory.reserved_bytes,
                .device_mem_used = session.allocator->deviceMemory().used_bytes,
                .grad_norm = outcome.grad_norm,
                // correct counts predicted targets: one per sample, or each token
                .accuracy = static_cast<double>(outcome.correct) / tokens,
                .tokens = tokens,
                .tokens_per_s = tokens_per_s,
                .mfu = modelFlopsUtilisation(session.flops_per_token, tokens_per_s,
                                             session.peak_flops),
                .loss_scale = outcome.loss_scale,
                .skipped = session.scaler ? std::optional(interval.skipped) : std::nullopt},
      .end_time = outcome.end_time,
      .sched_events = std::move(outcome.sched_events),
      .correct = outcome.correct,
      .step_ms = outcome.step_ms,
      .update_skipped = outcome.update_skipped};
  // A pipeline stage's wait for another stage (the bubble, neither compute nor communication),
  // as the interval's mean: a custom metric, so that the step's time adds up on a chart.
  if (stageCount(spec_) > 1) {
    addCustomMetric(report.event, kPipelineWaitMetric,
                    interval.pipeline_wait_ms / steps_in_interval);
  }
  return report;
}

// Writes a step's report: its pipeline actions and its step event as telemetry, and its line (two
// with fp16) to the log.
void Trainer::reportStep(const StepReport& report) {
  for (const SchedEvent& event : report.sched_events) telemetry_.emit(event);
  const StepEvent& step = report.event;
  telemetry_.emit(step, report.end_time);
  fmt::print(log_,
             "[rank {}] step {:>{}}/{} loss {:.4f} lr {:.3g} acc {:5.1f}% {:8.0f} samples/s "
             "{:8.0f} tokens/s\n",
             context_.rank, step.step, std::to_string(spec_.train.steps).size(), spec_.train.steps,
             step.loss, step.lr, 100.0 * report.correct / *step.tokens,
             step.samples * 1000.0 / report.step_ms, *step.tokens_per_s);
  if (step.loss_scale) {
    fmt::print(log_, "[rank {}] step {} loss scale {:g}{}\n", context_.rank, step.step,
               *step.loss_scale,
               report.update_skipped ? " (inf/NaN gradient: update skipped)" : "");
  }
}

// The validation pass after step `step`, written as telemetry and to the log.
void Trainer::evaluate(Session& session, int64_t step) {
  // Ranks that share samples (a pipeline's) already agree on the loss: nothing to sum.
  const EvalEvent eval =
      session.evaluator->evaluate(step, session.runner->model(), *session.runner,
                                  session.runner->dataParallelGroup(), session.device);
  telemetry_.emit(eval);
  fmt::print(log_,
             "[rank {}] eval after step {}: val loss {:.4f} perplexity {:.3f} ({} tokens, "
             "{:.0f} ms)\n",
             context_.rank, step, eval.val_loss, eval.perplexity, eval.tokens, eval.eval_ms);
}

std::optional<std::string> Trainer::saveCheckpointAt(Session& session, int64_t step) {
  // The layout that wrote the directory's newest checkpoints (a run that never saved leaves the
  // previous one's).
  if (context_.rank == 0) recordCheckpointLayout(spec_.checkpoint->dir, spec_);
  return saveCheckpoint(*session.runner, *spec_.checkpoint, session.checkpoint_dir,
                        session.writes_checkpoints, context_, step, session.parameters,
                        *session.optimizer, session.scalerOrNull());
}

}  // namespace ringmaster
