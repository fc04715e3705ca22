// The single-rank training loop and the builders that turn spec sections into engine objects.
#include "train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "data/distributed_sampler.h"
#include "data/idx_dataset.h"
#include "data/synthetic_dataset.h"
#include "nn/loss.h"
#include "parallel/ddp.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Whether to stop before the next step. With several ranks, any rank's request stops all of them
// after the same step (a rank that stopped alone would leave the others waiting in a collective).
bool stopAgreed(bool requested_here, Communicator* world) {
  if (world == nullptr || world->size() == 1) return requested_here;
  Tensor flag = Tensor::fromInts({requested_here ? 1 : 0}, {1}, world->device());
  world->allReduce(flag, ReduceOp::max())->wait();
  return flag.toFloatVector()[0] != 0;
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

std::unique_ptr<Dataset> makeDataset(const DataSpec& spec) {
  if (spec.kind == DataKind::kIdx)
    return std::make_unique<IdxDataset>(IdxDataset::load(spec.images, spec.labels));
  return std::make_unique<SyntheticTeacherDataset>(spec.samples, spec.features, spec.classes,
                                                   spec.seed);
}

MlpConfig mlpConfig(const ModelSpec& spec) {
  return MlpConfig{.layers = spec.layers,
                   .activation = spec.activation == ActivationKind::kGelu ? Activation::kGelu
                                                                          : Activation::kRelu,
                   .dropout = static_cast<float>(spec.dropout),
                   .layer_norm = spec.layer_norm,
                   .seed = spec.seed};
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

TrainingResult Trainer::run() {
  const StrategyKind strategy = spec_.strategy.kind;
  if (strategy == StrategyKind::kFsdp || strategy == StrategyKind::kPipeline) {
    RM_THROW(kUnavailable, fmt::format("strategy.kind: '{}' is not in this build yet; use 'ddp'",
                                       toString(strategy)));
  }
  if (strategy == StrategyKind::kSingle) {
    RM_CHECK_ARG(context_.world_size == 1,
                 fmt::format("strategy.kind: 'single' runs one rank, not {}", context_.world_size));
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
                             .strategy = std::string(toString(spec_.strategy.kind))});

  std::unique_ptr<Dataset> dataset = makeDataset(spec_.data);
  RM_CHECK_ARG(dataset->features() == spec_.model.layers.front(),
               fmt::format("data: {} features per sample, but model.layers[0] is {}",
                           dataset->features(), spec_.model.layers.front()));
  RM_CHECK_ARG(dataset->classes() <= spec_.model.layers.back(),
               fmt::format("data: {} classes, but the model has {} outputs", dataset->classes(),
                           spec_.model.layers.back()));
  auto model = buildMlp(mlpConfig(spec_.model), device);
  std::vector<NamedParameter> parameters = model->namedParameters();
  if (spec_.model.init_checkpoint) loadModelWeights(*spec_.model.init_checkpoint, parameters);
  std::unique_ptr<DistributedDataParallel> ddp;
  if (strategy == StrategyKind::kDdp) {
    ddp = std::make_unique<DistributedDataParallel>(
        *model, *world_, DdpOptions{.bucket_cap_mb = spec_.strategy.ddp.bucket_cap_mb});
  }
  // Rank 0 writes the checkpoints of a replicated model; every rank holds the same state.
  const bool writes_checkpoints = context_.rank == 0;
  std::unique_ptr<Optimizer> optimizer = makeOptimizer(spec_.optimizer, parameters);
  // Resuming: weights, optimizer state, and the step count that positions the data order and the
  // dropout streams where the interrupted run left them. (DDP: every rank reads rank 0's files.)
  int64_t first_step = 1;
  if (spec_.checkpoint && spec_.checkpoint->resume) {
    if (std::optional<std::string> newest = newestCheckpoint(spec_.checkpoint->dir)) {
      loadModelWeights(*newest, parameters);
      first_step = loadOptimizerState(*newest, *optimizer) + 1;
      fmt::print(log_, "[rank {}] resuming from {} at step {}\n", context_.rank, *newest,
                 first_step);
    }
  }

  DistributedSampler sampler(dataset->size(), context_.world_size, context_.rank,
                             spec_.data.shuffle, spec_.train.seed, spec_.data.drop_last);
  BatchIterator batches(sampler, spec_.train.batch_size);
  SoftmaxCrossEntropy loss_fn;
  const int accum = spec_.train.grad_accum_steps;
  const int64_t steps_done = first_step - 1;
  batches.seek(steps_done * accum);
  for (size_t i = 0; i < model->size(); ++i) {
    if (auto* dropout = dynamic_cast<Dropout*>(&model->child(i)))
      dropout->setCalls(static_cast<uint64_t>(steps_done * accum));
  }
  const int64_t every = spec_.telemetry.every_steps;

  TrainingResult result;
  result.final_step = steps_done;
  fmt::print(log_, "[rank {}] {}: {} parameters on {}, {} steps of {} x {} samples\n",
             context_.rank, spec_.name, model->parameterCount(), device.str(), spec_.train.steps,
             accum, spec_.train.batch_size);
  for (int64_t step = first_step; step <= spec_.train.steps; ++step) {
    if (stopAgreed(stop_requested_(), world_)) {
      result.cancelled = true;
      break;
    }
    if (comm_observer_) comm_observer_->setStep(step);
    const auto step_start = Clock::now();
    allocator.resetPeakStats();
    optimizer->zeroGrad();
    double loss_sum = 0.0;
    int64_t samples = 0, correct = 0;
    for (int micro = 0; micro < accum; ++micro) {
      Batch batch = makeBatch(*dataset, batches.next(), device);
      Tensor logits = model->forward(batch.features);
      loss_sum += loss_fn.forward(logits, batch.labels);
      correct += ops::countCorrect(logits, batch.labels);
      samples += batch.labels.numel();
      Tensor grad_logits = loss_fn.backward(1.0f / static_cast<float>(accum));
      if (ddp) {
        // no_sync for all but the last micro-batch: gradients accumulate locally, and only the
        // last backward all-reduces their sum.
        ddp->backward(grad_logits, /*sync=*/micro == accum - 1);
      } else {
        model->backward(grad_logits);
      }
    }
    GradientSyncTiming sync;
    if (ddp) sync = ddp->finishGradientSync();
    std::optional<double> grad_norm;
    if (spec_.optimizer.clip_grad_norm) {
      grad_norm = clipGradNorm(parameters, *spec_.optimizer.clip_grad_norm);
    }
    optimizer->step();
    synchronize(device);
    const double step_ms = millisecondsSince(step_start);
    const double loss = loss_sum / accum;
    if (!std::isfinite(loss)) {
      RM_THROW(kInvalidArgument, fmt::format("loss became {} at step {}; lower optimizer.lr or "
                                             "set optimizer.clip_grad_norm",
                                             loss, step));
    }
    if (step == first_step) result.first_loss = loss;
    result.last_loss = loss;
    result.final_step = step;

    if (step % every == 0 || step == first_step || step == spec_.train.steps) {
      const MemoryStats memory = allocator.stats();
      telemetry_.emit(StepEvent{.step = step,
                                .loss = loss,
                                .lr = optimizer->lr(),
                                .samples = samples,
                                .step_ms = step_ms,
                                .compute_ms = step_ms - sync.exposed_comm_ms,
                                .comm_ms = sync.comm_ms,
                                .exposed_comm_ms = sync.exposed_comm_ms,
                                .mem_allocated = memory.allocated_bytes,
                                .mem_peak = memory.peak_allocated_bytes,
                                .mem_reserved = memory.reserved_bytes,
                                .device_mem_used = allocator.deviceMemory().used_bytes,
                                .grad_norm = grad_norm,
                                .accuracy = static_cast<double>(correct) / samples});
      fmt::print(log_, "[rank {}] step {:>{}}/{} loss {:.4f} acc {:5.1f}% {:8.0f} samples/s\n",
                 context_.rank, step, std::to_string(spec_.train.steps).size(), spec_.train.steps,
                 loss, 100.0 * correct / samples, samples * 1000.0 / step_ms);
    }
    if (spec_.checkpoint && spec_.checkpoint->every_steps > 0 &&
        step % spec_.checkpoint->every_steps == 0 && step != spec_.train.steps &&
        writes_checkpoints) {
      saveTrainingCheckpoint(spec_.checkpoint->dir, step, parameters, *optimizer);
    }
  }
  if (spec_.checkpoint && result.final_step > steps_done && writes_checkpoints) {
    const std::string path =
        saveTrainingCheckpoint(spec_.checkpoint->dir, result.final_step, parameters, *optimizer);
    fmt::print(log_, "[rank {}] checkpoint written to {}\n", context_.rank, path);
  }
  result.wall_seconds = std::chrono::duration<double>(Clock::now() - wall_start).count();
  return result;
}

}  // namespace ringmaster
