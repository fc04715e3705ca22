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
#include "spec/strategies/plan.h"
#include "tensor/allocator.h"
#include "train/evaluation.h"
#include "train/throughput.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Whether any rank says yes (one all-reduce, MAX, with several ranks): every rank reaches the same
// verdict. Whether to stop before the next step (a rank that stopped alone would leave the others
// waiting in a collective), and whether any rank's gradients overflowed (fp16: all skip the step).
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

TrainingResult Trainer::run() {
  const StrategyKind strategy = spec_.strategy.kind;
  if (!strategyPlan(strategy).needsWorld()) {
    RM_CHECK_ARG(context_.world_size == 1, fmt::format("strategy.kind: '{}' runs one rank, not {}",
                                                       toString(strategy), context_.world_size));
  } else {
    RM_CHECK_ARG(world_ != nullptr && world_->size() == context_.world_size &&
                     world_->rank() == context_.rank,
                 fmt::format("strategy.kind: '{}' needs the world communicator of rank {} of {}",
                             toString(strategy), context_.rank, context_.world_size));
  }
  const auto wall_start = Clock::now();
  const Device device = resolveDevice(spec_.device, context_.local_rank);
  CachingAllocator& allocator = allocatorFor(device);
  const DeviceMemoryInfo device_memory = allocator.deviceMemory();

  telemetry_.emit(HelloEvent{.world_size = context_.world_size,
                             .local_rank = context_.local_rank,
                             .host = context_.host,
                             .pid = static_cast<int64_t>(getpid()),
                             .device = device.str(),
                             .device_name = deviceName(device),
                             .device_memory_total = device_memory.total_bytes,
                             .version = RINGMASTER_VERSION,
                             .strategy = std::string(toString(spec_.strategy.kind)),
                             .attempt = context_.attempt});

  std::unique_ptr<Dataset> dataset = makeDataset(spec_);
  const ModelDescription description = describeModel(spec_.model);
  RM_CHECK_ARG(dataset->inputShape() == description.inputShape(),
               fmt::format("data: samples of shape {}, but the model takes {}",
                           shapeStr(dataset->inputShape()), shapeStr(description.inputShape())));
  const int64_t model_outputs = shapeNumel(description.outputShape());
  const std::optional<int64_t> classes = dataset->classCount();
  RM_CHECK_ARG(!classes || *classes <= model_outputs,
               fmt::format("data: {} classes, but the model has {} outputs", classes.value_or(0),
                           model_outputs));
  auto model = buildModel(spec_.model, device);
  setAutocast(*model, precisionDType(spec_.train.precision));  // torch.autocast: nn/autocast.h
  const int64_t parameter_count = model->parameterCount();
  if (spec_.model.init_checkpoint)
    loadModelWeights(*spec_.model.init_checkpoint, model->namedParameters());
  // The strategy of spec.strategy.kind (parallel/strategies.cpp); the loop below calls only its
  // interface.
  std::unique_ptr<ParallelStrategy> runner =
      makeParallelStrategy({.model = *model,
                            .world = strategyPlan(strategy).needsWorld() ? world_ : nullptr,
                            .spec = spec_});
  std::vector<NamedParameter> parameters = runner->optimizerParameters();
  std::unique_ptr<Optimizer> optimizer = makeOptimizer(spec_.optimizer, parameters);
  // fp16: dynamic loss scaling (GradScaler's semantics); bf16 and fp32 need none.
  std::optional<GradScaler> scaler;
  if (spec_.train.precision == Precision::kFp16) {
    scaler.emplace(GradScalerOptions{.init_scale = spec_.train.loss_scale.init,
                                     .growth_interval = spec_.train.loss_scale.growth_interval});
  }
  GradScaler* const scaler_or_null = scaler ? &*scaler : nullptr;
  // Replicated models: rank 0 writes and every rank reads one checkpoint (so `dir` must be
  // reachable from every host). Sharded and staged ones: each rank its own.
  std::string checkpoint_dir;
  bool writes_checkpoints = false;
  if (spec_.checkpoint) {
    checkpoint_dir = runner->perRankCheckpoints()
                         ? rankCheckpointDir(spec_.checkpoint->dir, context_)
                         : spec_.checkpoint->dir;
    writes_checkpoints = runner->perRankCheckpoints() || context_.rank == 0;
  }
  // Found now rather than at the first save, which with every_steps 0 comes after all the
  // training.
  if (writes_checkpoints) checkCheckpointDirWritable(checkpoint_dir);
  if (runner->consolidates() && spec_.checkpoint && spec_.checkpoint->consolidate &&
      context_.rank == 0)
    checkCheckpointDirWritable(spec_.checkpoint->dir);
  // Resuming: weights, optimizer state, and the step count that positions the data order and the
  // dropout streams where the interrupted run left them. Replicated models: every rank reads
  // rank 0's checkpoint and reaches the same verdict, which rank 0 alone reports.
  int64_t first_step = 1;
  if (spec_.checkpoint && spec_.checkpoint->resume) {
    std::vector<std::string> passed_over;
    const auto report = [&](LogLevel level, const std::string& message) {
      if (!writes_checkpoints) return;
      fmt::print(log_, "[rank {}] {}{}\n", context_.rank,
                 level == LogLevel::kWarn ? "warning: " : "", message);
      telemetry_.emit(LogEvent{.level = level, .message = message});
    };
    const std::optional<int64_t> resumed = loadResumeCheckpoint(
        checkpoint_dir, world_, parameters, *optimizer, scaler_or_null,
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
      first_step = *resumed + 1;
      report(LogLevel::kInfo,
             fmt::format("resuming from {} at step {}{}",
                         checkpointStepDir(checkpoint_dir, *resumed), first_step, skipped_note));
    } else if (!passed_over.empty()) {
      report(LogLevel::kWarn, fmt::format("no complete checkpoint in {}: starting from step 1{}",
                                          checkpoint_dir, skipped_note));
    }
  }

  // Ranks that share samples (a pipeline's stages: StrategyPlan::ranksShareSamples) all see the
  // same batches; the data-parallel strategies' ranks each their share.
  const int data_ranks = dataParallelSize(spec_);
  const int data_rank = data_ranks == 1 ? 0 : context_.rank;
  DistributedSampler sampler(dataset->size(), data_ranks, data_rank, spec_.data.shuffle,
                             spec_.train.seed, spec_.data.drop_last);
  BatchIterator batches(sampler, spec_.train.batch_size);
  // The validation pass every train.eval_every steps and after the last (train/evaluation.h): its
  // own samples, so the training order and the dropout streams are as without it.
  std::unique_ptr<Dataset> validation;
  std::optional<Evaluator> evaluator;
  if (spec_.train.eval_every > 0) {
    validation = makeValidationDataset(spec_);
    RM_CHECK_ARG(validation != nullptr,
                 fmt::format("train.eval_every: data.kind \"{}\" has no validation set here",
                             toString(spec_.data.kind)));
    RM_CHECK_ARG(
        validation->inputShape() == dataset->inputShape() &&
            validation->targetShape() == dataset->targetShape(),
        fmt::format("data: validation samples of shape {} -> {}, training ones {} -> {}",
                    shapeStr(validation->inputShape()), shapeStr(validation->targetShape()),
                    shapeStr(dataset->inputShape()), shapeStr(dataset->targetShape())));
    evaluator.emplace(*validation, data_ranks, data_rank, spec_.train.batch_size,
                      spec_.train.eval_batches);
  }
  const int accum = spec_.train.grad_accum_steps;
  const int64_t steps_done = first_step - 1;
  batches.seek(steps_done * accum);
  forEachModule(*model, [&](Module& module) {  // also the Dropouts inside blocks
    if (auto* dropout = dynamic_cast<Dropout*>(&module))
      dropout->setCalls(static_cast<uint64_t>(steps_done * accum * runner->forwardsPerBatch()));
  });
  const int64_t every = spec_.telemetry.every_steps;
  // Throughput: a sample's tokens are its target's elements (1 for a classifier); MFU over the
  // spec's peak, else the device's known one for the precision the matrix products run in.
  const int64_t tokens_per_sample = std::max<int64_t>(1, shapeNumel(dataset->targetShape()));
  const double flops_per_token = trainingFlopsPerToken(description, tokens_per_sample);
  const std::optional<double> peak_flops =
      spec_.train.peak_tflops
          ? std::optional(*spec_.train.peak_tflops * 1e12)
          : knownPeakFlops(deviceName(device), spec_.train.precision == Precision::kFp32
                                                   ? MatmulPrecision::kFp32
                                                   : MatmulPrecision::kBf16);

  TrainingResult result;
  result.final_step = steps_done;
  last_completed_step_ = steps_done;
  fmt::print(log_, "[rank {}] {}: {} parameters on {}, {} steps of {} x {} samples\n",
             context_.rank, spec_.name, parameter_count, device.str(), spec_.train.steps, accum,
             spec_.train.batch_size);
  // A step event every `every` steps reports the timings of every step since the last one, as
  // means (a lock-step pipeline's step time differs from step to step; one step in ten is no
  // sample of it).
  struct IntervalTimes {
    double step_ms = 0, compute_ms = 0, comm_ms = 0, exposed_comm_ms = 0;
    int64_t samples = 0, skipped = 0;
    int steps = 0;
  } interval;
  const std::chrono::milliseconds test_delay = testComputeDelay(context_.rank);  // test only
  for (int64_t step = first_step; step <= spec_.train.steps; ++step) {
    if (anyRankAgrees(stop_requested_(), world_)) {
      result.cancelled = true;
      break;
    }
    if (comm_observer_) comm_observer_->setStep(step);
    const bool reported = step % every == 0 || step == first_step || step == spec_.train.steps;
    const auto step_start = Clock::now();
    allocator.resetPeakStats();
    // The schedule's learning rate for this step, from the step alone: a resumed run continues it.
    optimizer->setLr(static_cast<float>(
        scheduledLr(spec_.optimizer.schedule, spec_.optimizer.lr, step, spec_.train.steps)));
    optimizer->zeroGrad();
    // The scale this step's loss gradients are multiplied by (fp16), reported with the step.
    std::optional<double> loss_scale;
    if (scaler) {
      loss_scale = scaler->scale();
      runner->setLossScale(static_cast<float>(*loss_scale));
    }
    double loss_sum = 0.0;
    int64_t samples = 0, correct = 0;
    GradientSyncTiming sync;
    double pipeline_wait_ms = 0;  // blocked waiting for another stage: neither compute nor comm
    std::vector<SchedEvent> sched_events;
    const BatchMaker make_batch = [&](const std::vector<int64_t>& indices) {
      return makeBatch(*dataset, indices, device);
    };
    for (int micro = 0; micro < accum; ++micro) {
      if (micro == 0 && test_delay.count() > 0) std::this_thread::sleep_for(test_delay);
      BatchPass pass = runner->trainBatch(batches.next(), make_batch, accum,
                                          /*sync=*/micro == accum - 1);
      loss_sum += pass.loss;
      correct += pass.correct;
      samples += pass.samples;
      sync.comm_ms += pass.comm_ms;
      sync.exposed_comm_ms += pass.exposed_comm_ms;
      pipeline_wait_ms += pass.wait_ms;
      if (!reported) continue;
      for (const ExecutedAction& action : pass.actions) {
        sched_events.push_back(SchedEvent{
            .step = step,
            .stage = action.model_stage,
            .micro_batch = action.action.micro_batch + micro * runner->forwardsPerBatch(),
            .phase = schedPhase(action.action.phase),
            .start_us = action.start_us,
            .end_us = action.end_us,
            .ready_us = action.ready_us,
            .transfer_us = action.transfer_us,
            .virtual_stage = action.action.chunk});
      }
    }
    const GradientSyncTiming reduction = runner->finishGradientSync();
    sync.comm_ms += reduction.comm_ms;
    sync.exposed_comm_ms += reduction.exposed_comm_ms;
    // fp16: the gradients back to their true size before clipping, and the step skipped on every
    // rank when any rank's hold an inf or NaN (each checks what its optimizer updates: shards,
    // stages). The step still counts (the schedule moves on), as in PyTorch.
    bool skip_update = false;
    if (scaler) {
      skip_update = anyRankAgrees(scaler->unscale(parameters) > 0, world_);
      scaler->update(skip_update);
      if (skip_update) ++interval.skipped;
    }
    std::optional<double> grad_norm;
    if (spec_.optimizer.clip_grad_norm && !skip_update)
      grad_norm = runner->clipGradNorm(*spec_.optimizer.clip_grad_norm);
    if (!skip_update) optimizer->step();
    synchronize(device);
    const double step_ms = millisecondsSince(step_start);
    // The step event is stamped with the step's end, not the later moment it is written (after
    // the step's sched events), so that [t - step_ms, t] is the step on the trace's time axis.
    const double step_end_time = telemetryNow();
    const double loss = loss_sum / accum;
    if (!std::isfinite(loss)) {
      RM_THROW(kInvalidArgument, fmt::format("loss became {} at step {}; lower optimizer.lr or "
                                             "set optimizer.clip_grad_norm",
                                             loss, step));
    }
    if (step == first_step) result.first_loss = loss;
    result.last_loss = loss;
    result.final_step = step;
    last_completed_step_ = step;

    interval.step_ms += step_ms;
    // Never negative (the protocol refuses a negative duration), whatever the rounding of the
    // parts measured inside the step.
    interval.compute_ms += std::max(0.0, step_ms - sync.exposed_comm_ms - pipeline_wait_ms);
    interval.comm_ms += sync.comm_ms;
    interval.exposed_comm_ms += sync.exposed_comm_ms;
    interval.samples += samples;
    ++interval.steps;
    if (reported) {
      for (const SchedEvent& event : sched_events) telemetry_.emit(event);
      const MemoryStats memory = allocator.stats();
      const double steps_in_interval = interval.steps;
      // Over the interval, as the timings: its tokens over its wall time.
      const double interval_tokens = static_cast<double>(interval.samples * tokens_per_sample);
      const double tokens_per_s =
          interval.step_ms > 0 ? interval_tokens * 1000.0 / interval.step_ms : 0.0;
      telemetry_.emit(
          StepEvent{.step = step,
                    .loss = loss,
                    .lr = optimizer->lr(),
                    .samples = samples,
                    .step_ms = interval.step_ms / steps_in_interval,
                    .compute_ms = interval.compute_ms / steps_in_interval,
                    .comm_ms = interval.comm_ms / steps_in_interval,
                    .exposed_comm_ms = interval.exposed_comm_ms / steps_in_interval,
                    .mem_allocated = memory.allocated_bytes,
                    .mem_peak = memory.peak_allocated_bytes,
                    .mem_reserved = memory.reserved_bytes,
                    .device_mem_used = allocator.deviceMemory().used_bytes,
                    .grad_norm = grad_norm,
                    // correct counts predicted targets: one per sample, or each token
                    .accuracy = static_cast<double>(correct) / (samples * tokens_per_sample),
                    .tokens = samples * tokens_per_sample,
                    .tokens_per_s = tokens_per_s,
                    .mfu = modelFlopsUtilisation(flops_per_token, tokens_per_s, peak_flops),
                    .loss_scale = loss_scale,
                    .skipped = scaler ? std::optional(interval.skipped) : std::nullopt},
          step_end_time);
      fmt::print(log_,
                 "[rank {}] step {:>{}}/{} loss {:.4f} lr {:.3g} acc {:5.1f}% {:8.0f} samples/s "
                 "{:8.0f} tokens/s\n",
                 context_.rank, step, std::to_string(spec_.train.steps).size(), spec_.train.steps,
                 loss, optimizer->lr(), 100.0 * correct / (samples * tokens_per_sample),
                 samples * 1000.0 / step_ms, tokens_per_s);
      if (scaler) {
        fmt::print(log_, "[rank {}] step {} loss scale {:g}{}\n", context_.rank, step, *loss_scale,
                   skip_update ? " (inf/NaN gradient: update skipped)" : "");
      }
      interval = {};
    }
    if (evaluator && (step % spec_.train.eval_every == 0 || step == spec_.train.steps)) {
      // Ranks that share samples (a pipeline's) already agree on the loss: nothing to sum.
      const EvalEvent eval =
          evaluator->evaluate(step, *model, *runner, data_ranks > 1 ? world_ : nullptr, device);
      telemetry_.emit(eval);
      fmt::print(log_,
                 "[rank {}] eval after step {}: val loss {:.4f} perplexity {:.3f} ({} tokens, "
                 "{:.0f} ms)\n",
                 context_.rank, step, eval.val_loss, eval.perplexity, eval.tokens, eval.eval_ms);
    }
    if (spec_.checkpoint && spec_.checkpoint->every_steps > 0 &&
        step % spec_.checkpoint->every_steps == 0 && step != spec_.train.steps) {
      saveCheckpoint(*runner, *spec_.checkpoint, checkpoint_dir, writes_checkpoints, context_, step,
                     parameters, *optimizer, scaler_or_null);
    }
  }
  if (spec_.checkpoint && result.final_step > steps_done) {
    if (std::optional<std::string> path =
            saveCheckpoint(*runner, *spec_.checkpoint, checkpoint_dir, writes_checkpoints, context_,
                           result.final_step, parameters, *optimizer, scaler_or_null)) {
      fmt::print(log_, "[rank {}] checkpoint written to {}\n", context_.rank, *path);
    }
  }
  result.wall_seconds = std::chrono::duration<double>(Clock::now() - wall_start).count();
  return result;
}

}  // namespace ringmaster
