// A run's summary figures (throughput, final loss, peak memory per rank, communication share,
// pipeline bubble) and the comparison of runs: those figures side by side and the differences
// between their specs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "db/database.h"
#include "query/runs.h"

namespace ringmaster::storage {

struct RankSummary {
  int rank = 0;
  int64_t last_step = 0;          // its last reported step
  double samples_per_second = 0;  // the samples it reported over its step time
  double mean_step_ms = 0;
  int64_t peak_memory = 0;  // the allocator's peak over the run, bytes, in [0, 2^63 - 1]
  // The tokens it reported over the step time of those steps; nullopt for runs recorded before
  // the step event carried tokens.
  std::optional<double> tokens_per_second;
  std::optional<double> mfu;  // mean over its step events; nullopt where no peak was known
  std::optional<double> lr;   // the learning rate of its last reported step
  // fp16 runs (nullopt otherwise): the loss scale of its last reported step, and the steps whose
  // update it skipped on an inf or NaN gradient (the sum of its events' `skipped`).
  std::optional<double> loss_scale;
  std::optional<int64_t> skipped_steps;
};

struct RunSummary {
  RunRecord run;
  int64_t final_step = 0;            // the last step any rank reported
  std::optional<double> final_loss;  // finalLoss(): the loss of the global batch at final_step
  std::optional<double> final_accuracy;
  double samples_per_second = 0;            // the whole job's, over the steps reported
  std::optional<double> tokens_per_second;  // the whole job's, as samples_per_second
  std::optional<double> mfu;                // mean over the ranks that report one
  std::optional<double> lr;                 // rank 0's at its last reported step
  // fp16 runs: rank 0's last loss scale, and the most skipped steps any rank counted (the ranks
  // agree on every skip, so they count the same unless some rank's events are missing).
  std::optional<double> loss_scale;
  std::optional<int64_t> skipped_steps;
  double mean_step_ms = 0;                // mean over ranks and steps
  std::vector<RankSummary> ranks;         // every rank of the world, by rank
  double comm_share = 0;                  // exposed communication / step time, all ranks
  std::optional<double> bubble_fraction;  // pipeline runs: measured, mean over steps
};

RunSummary summarizeRun(const Database& db, int64_t run_id);

// The final loss, as every front end names it: the loss of the global batch at the last step any
// rank reported, that is the ranks' losses at that step weighted by the samples each computed it
// over (data-parallel ranks each hold a share of the batch; pipeline stages all report the last
// stage's loss of the whole batch, so their mean is that loss). Ranks whose loss was not finite
// or missing at that step are left out; where no rank says how many samples (a script that logs
// its loss without samples=), the ranks' mean; nullopt when no rank has one. One index seek per
// rank.
struct FinalLoss {
  int64_t step = 0;
  double loss = 0;
};
std::optional<FinalLoss> finalLoss(const Database& db, int64_t run_id, int world_size);

// A spec field whose value differs between runs, one value per run ("" where a run lacks it).
struct SpecDifference {
  std::string path;  // "strategy.kind", "launch.hosts[0].ranks", ...
  std::vector<std::string> values;
};
// Fields of the specs (JSON texts) that differ; identical specs give none. Throws kFormat naming
// the run index for a spec that is not JSON.
std::vector<SpecDifference> specDifferences(const std::vector<std::string>& spec_jsons);

struct RunComparison {
  std::vector<RunSummary> runs;
  std::vector<SpecDifference> differences;
};
RunComparison compareRuns(const Database& db, const std::vector<int64_t>& run_ids);

}  // namespace ringmaster::storage
