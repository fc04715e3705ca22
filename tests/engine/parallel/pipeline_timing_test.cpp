// The pipeline's measured times on real threads: a stage made slow on purpose shows as the other
// stages' waits (not their compute, not communication), and a balanced pipeline's measured bubble
// lands near the planned one. These tests measure time, so CTest runs them alone (RUN_SERIAL): a
// test beside them on this machine's two cores would stretch each message's hops between threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <string>

#include "engine/comm/comm_harness.h"
#include "engine/parallel/equivalence.h"
#include "parallel/pipeline.h"
#include "tensor/host_gemm.h"

namespace ringmaster {
namespace {

using testing::runRanks;

// One step of a pipeline of `stages` over `world` ranks with 64-row micro-batches, after a warm-up
// step: each rank's actions and step result.
struct TimedStep {
  std::vector<std::vector<ExecutedAction>> actions;
  std::vector<PipelineStepResult> results;
  std::vector<double> wall_ms;
};

TimedStep timePipelineStep(int world, const MlpConfig& config,
                           const std::vector<std::vector<int>>& stages, int micro_batches) {
  // One BLAS thread per rank, as the node agent gives each worker: a matrix product that took
  // every core while its peer idled and half of them while both computed would stretch compute
  // exactly where the stages overlap, and hide the bubble.
  cpu::setGemmThreads(1);
  constexpr int64_t kWideRows = 64;
  TimedStep timed;
  timed.actions.resize(world);
  timed.results.resize(world);
  timed.wall_ms.resize(world);
  std::mutex mutex;
  auto failures = runRanks(world, [&](Communicator& comm) {
    SyntheticTeacherDataset data(kWideRows * micro_batches, config.layers.front(), 4, 3);
    auto model = buildMlp(config);
    PipelineParallel pipeline(*model, comm, {.micro_batches = micro_batches, .stages = stages});
    auto batchOf = [&](int micro) {
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < kWideRows; ++i) rows.push_back(micro * kWideRows + i);
      return makeBatch(data, rows);
    };
    pipeline.runStep(kWideRows, batchOf, 1.0f / micro_batches);  // warm-up
    const auto start = std::chrono::steady_clock::now();
    PipelineStepResult result = pipeline.runStep(kWideRows, batchOf, 1.0f / micro_batches);
    timed.wall_ms[comm.rank()] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard<std::mutex> lock(mutex);
    timed.actions[comm.rank()] = result.actions;
    timed.results[comm.rank()] = std::move(result);
  });
  EXPECT_ALL_RANKS_OK(failures);
  return timed;
}

int64_t totalWaitUs(const std::vector<ExecutedAction>& actions) {
  int64_t total = 0;
  for (const ExecutedAction& a : actions) total += a.ready_us - a.start_us;
  return total;
}

int64_t totalComputeUs(const std::vector<ExecutedAction>& actions) {
  int64_t total = 0;
  for (const ExecutedAction& a : actions) total += a.end_us - a.ready_us;
  return total;
}

TEST(PipelineTiming, AStageMadeSlowShowsAsTheOthersWaitsNotAsTheirComputeOrCommunication) {
  // Stage 0 holds a 1024-wide layer pair, stage 1 one narrow layer: stage 1 waits for every
  // forward input while stage 0 computes. (Two ranks: on this machine's two cores a third thread
  // would make even the fast stages' compute wait for a core.)
  const MlpConfig config{.layers = {16, 1024, 1024, 4}, .seed = 3};
  const TimedStep timed = timePipelineStep(2, config, {{0, 1}, {2}}, 6);
  EXPECT_GT(totalComputeUs(timed.actions[0]), 4 * totalComputeUs(timed.actions[1]));
  EXPECT_GT(totalWaitUs(timed.actions[1]), totalComputeUs(timed.actions[1]));
  EXPECT_GT(totalWaitUs(timed.actions[1]), totalWaitUs(timed.actions[0]));
  // The time stage 1 was blocked receiving is the pipeline's wait, not communication: the
  // transfers of 256 KiB activations are a small part of it.
  const PipelineStepResult& fast = timed.results[1];
  EXPECT_GT(fast.pipeline_wait_ms, fast.exposed_transfer_ms);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_LT(timed.results[rank].transfer_ms, timed.wall_ms[rank]);
}

TEST(PipelineTiming, TheMeasuredBubbleOfABalancedPipelineIsNearThePlannedOne) {
  // Two equal stages (as many ranks as this machine has cores in CI) and 8 micro-batches: 1F1B's
  // bubble is (p - 1) / (m + p - 1) = 1/9. Measured: each rank's share of the step's span (first
  // compute to last end) it did not compute. Counting an action's wait as compute would put it
  // near 0; overheads outside the model (each message's hops between threads, the loss) only
  // raise it, more on a loaded machine: the layers are 1024 wide so that compute dominates them
  // (0.16-0.18 measured on 2 idle cores, up to 0.34 while two compilers ran beside the test).
  const MlpConfig config{.layers = {1024, 1024, 1024, 1024, 1024}, .seed = 3};
  const int micro_batches = 8;
  const TimedStep timed = timePipelineStep(2, config, {{0, 1}, {2, 3}}, micro_batches);
  int64_t first = std::numeric_limits<int64_t>::max(), last = 0;
  for (const auto& actions : timed.actions) {
    for (const ExecutedAction& a : actions) {
      first = std::min(first, a.ready_us);
      last = std::max(last, a.end_us);
    }
  }
  const double span = static_cast<double>(last - first);
  double bubble = 0;
  for (const auto& actions : timed.actions)
    bubble += 1 - static_cast<double>(totalComputeUs(actions)) / span;
  bubble /= 2;
  const double planned = theoreticalBubbleFraction(PipelineSchedule::k1f1b, 2, micro_batches, 1);
  EXPECT_NEAR(planned, 1.0 / 9, 1e-9);
  EXPECT_GT(bubble, planned - 0.05);
  EXPECT_LT(bubble, planned + 0.25);
  ::testing::Test::RecordProperty("measured_bubble", std::to_string(bubble));
}

}  // namespace
}  // namespace ringmaster
