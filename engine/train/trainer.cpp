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
#include "tensor/allocator.h"
#include "tensor/ops.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

Device resolveDevice(DeviceKind kind, int local_rank) {
  const int devices = cudaDeviceCount();
  switch (kind) {
    case DeviceKind::kCpu: return Device::cpu();
    case DeviceKind::kAuto: return devices > 0 ? Device::cuda(local_rank % devices) : Device::cpu();
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

std::unique_ptr<Dataset> makeDataset(const DataSpec& spec) {
  if (spec.kind == DataKind::kIdx) return std::make_unique<IdxDataset>(IdxDataset::load(spec.images, spec.labels));
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
                 std::function<bool()> stop_requested, std::FILE* log)
    : spec_(std::move(spec)),
      context_(std::move(context)),
      telemetry_(telemetry),
      stop_requested_(std::move(stop_requested)),
      log_(log) {}

TrainingResult Trainer::run() {
  if (spec_.strategy.kind != StrategyKind::kSingle || context_.world_size != 1) {
    RM_THROW(kUnavailable,
             fmt::format("strategy.kind: '{}' with world size {} needs the communication layer, "
                         "which this build does not have yet; use 'single' with one rank",
                         toString(spec_.strategy.kind), context_.world_size));
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
  std::unique_ptr<Optimizer> optimizer = makeOptimizer(spec_.optimizer, parameters);

  DistributedSampler sampler(dataset->size(), context_.world_size, context_.rank,
                             spec_.data.shuffle, spec_.train.seed, spec_.data.drop_last);
  BatchIterator batches(sampler, spec_.train.batch_size);
  SoftmaxCrossEntropy loss_fn;
  const int accum = spec_.train.grad_accum_steps;
  const int64_t every = spec_.telemetry.every_steps;

  TrainingResult result;
  fmt::print(log_, "[rank {}] {}: {} parameters on {}, {} steps of {} x {} samples\n",
             context_.rank, spec_.name, model->parameterCount(), device.str(), spec_.train.steps,
             accum, spec_.train.batch_size);
  for (int64_t step = 1; step <= spec_.train.steps; ++step) {
    if (stop_requested_()) {
      result.cancelled = true;
      break;
    }
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
      model->backward(loss_fn.backward(1.0f / static_cast<float>(accum)));
    }
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
    if (step == 1) result.first_loss = loss;
    result.last_loss = loss;
    result.final_step = step;

    if (step % every == 0 || step == 1 || step == spec_.train.steps) {
      const MemoryStats memory = allocator.stats();
      telemetry_.emit(StepEvent{.step = step,
                                .loss = loss,
                                .lr = optimizer->lr(),
                                .samples = samples,
                                .step_ms = step_ms,
                                .compute_ms = step_ms,
                                .comm_ms = 0,
                                .exposed_comm_ms = 0,
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
        step % spec_.checkpoint->every_steps == 0 && step != spec_.train.steps) {
      saveTrainingCheckpoint(spec_.checkpoint->dir, step, parameters, *optimizer);
    }
  }
  if (spec_.checkpoint && result.final_step > 0) {
    const std::string path =
        saveTrainingCheckpoint(spec_.checkpoint->dir, result.final_step, parameters, *optimizer);
    fmt::print(log_, "[rank {}] checkpoint written to {}\n", context_.rank, path);
  }
  result.wall_seconds = std::chrono::duration<double>(Clock::now() - wall_start).count();
  return result;
}

}  // namespace ringmaster
