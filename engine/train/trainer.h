// The training loop of one rank: builds the model, data, sampler and optimizer a job spec
// describes, trains for train.steps under the spec's strategy (single, or DDP, FSDP or a pipeline
// over the world communicator), and reports every step (and every pipeline action) as telemetry.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "comm/communicator.h"
#include "data/dataset.h"
#include "nn/layers.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "spec/job_spec.h"
#include "telemetry/writer.h"
#include "train/comm_telemetry.h"
#include "train/datasets.h"  // makeDataset, makeValidationDataset

namespace ringmaster {

// Who this process is in the job: the torchrun environment, read by app/.
struct RankContext {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string host;
  int attempt = 0;  // TORCHELASTIC_RESTART_COUNT: restarts before this one (launch.max_restarts)
};

struct TrainingResult {
  bool cancelled = false;
  int64_t final_step = 0;  // the last completed optimizer step
  double first_loss = 0;   // loss of the first step run (1, or the first after resuming)
  double last_loss = 0;    // loss of final_step
  double wall_seconds = 0;
};

// The custom metric (the step event's "metrics") a pipeline stage reports each step: the mean
// milliseconds it waited for another stage (the bubble: neither compute nor communication), so
// that compute_ms + exposed_comm_ms + pipeline/wait_ms is the step's time.
inline constexpr char kPipelineWaitMetric[] = "pipeline/wait_ms";

// The device a spec's `device` asks for on this machine: auto picks CUDA when a device is visible.
// Throws kUnavailable when cuda is asked for and there is none.
Device resolveDevice(DeviceKind kind, int local_rank);

// The collective backend for a spec's `backend` on `device`: auto is nccl on CUDA, gloo on the
// host. Throws kInvalidArgument for nccl on the host.
std::string backendFor(BackendKind kind, Device device);

std::unique_ptr<Optimizer> makeOptimizer(const OptimizerSpec& spec,
                                         std::vector<NamedParameter> parameters);

class Trainer {
 public:
  // `stop_requested` is polled between steps (SIGINT / SIGTERM; with several ranks they agree, so
  // all stop after the same step); `log` receives one human-readable line per telemetry step.
  // `world` is the job's communicator, required by every strategy but `single`; its
  // `comm_observer`, when given, is told the step each operation belongs to.
  Trainer(JobSpec spec, RankContext context, TelemetryWriter& telemetry,
          std::function<bool()> stop_requested, std::FILE* log = stderr,
          Communicator* world = nullptr, TelemetryCommObserver* comm_observer = nullptr);

  TrainingResult run();
  // The last optimizer step completed (resumed from included), also after run() threw: what a
  // failure report says the rank got to.
  int64_t lastCompletedStep() const { return last_completed_step_; }

 private:
  // trainer.cpp: what a run builds before its first step, what one step did, the steps since the
  // last report, and what a reported step tells.
  struct Session;
  struct StepOutcome;
  struct IntervalTimes;
  struct StepReport;

  // Set-up, in the order run() calls it.
  void checkWorld() const;
  void setUpDevice(Session& session);
  void setUpModel(Session& session);
  void setUpOptimizer(Session& session);
  void setUpCheckpoints(Session& session);
  int64_t resume(Session& session);
  void setUpData(Session& session, int64_t steps_done);
  // One step.
  StepOutcome trainStep(Session& session, int64_t step, bool reported);
  void runMicroBatches(Session& session, int64_t step, bool reported, StepOutcome& outcome);
  // Reporting.
  StepReport buildStepReport(Session& session, int64_t step, StepOutcome outcome,
                             const IntervalTimes& interval) const;
  void reportStep(const StepReport& report);
  void evaluate(Session& session, int64_t step);
  std::optional<std::string> saveCheckpointAt(Session& session, int64_t step);

  JobSpec spec_;
  RankContext context_;
  TelemetryWriter& telemetry_;
  std::function<bool()> stop_requested_;
  std::FILE* log_;
  Communicator* world_;
  TelemetryCommObserver* comm_observer_;
  int64_t last_completed_step_ = 0;
};

}  // namespace ringmaster
