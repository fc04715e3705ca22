// The report of one run, built once for every front end: its record and summary, each rank's
// figures merged into one row, the attempts with the steps each restart rolled back, evaluations,
// communication per op and per mesh dimension, the live hang view and the ingest counts.
// `ringmaster show`, the web API (GET /api/v1/runs/ID) and the desktop's run view only format it;
// toJson is its one JSON form (docs/run-report.md), versioned by kRunReportVersion.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "db/database.h"
#include "query/bubble_split.h"
#include "query/comm_by_dimension.h"
#include "query/comm_stats.h"
#include "query/evals.h"
#include "query/hang.h"
#include "query/runs.h"
#include "query/summary.h"
#include "spec/program.h"

namespace ringmaster::storage {

// Raised when a field changes meaning or goes away; a field added keeps the version.
inline constexpr int kRunReportVersion = 1;

// How many of a run's warnings and errors the report carries (the last ones; it counts them all).
inline constexpr int kReportedProblems = 100;

// One rank: what its step events say, what its hello said, its communication, and the estimate
// of its memory from the stored spec.
struct RankReport {
  RankSummary figures;
  std::optional<RankRecord> record;  // none before its hello was stored
  RankCommStats comm;
  // Estimated from the stored spec (spec/memory_estimate.h): none for a program job, whose
  // script's model the spec does not describe, or for a spec that does not parse.
  std::optional<double> estimated_memory;
  std::string waiting_on;  // the live hang view's state of the rank; empty once the run ended
};

struct AttemptReport {
  AttemptRecord record;
  // The steps of the attempt before that this one stored again (it resumed from an earlier
  // checkpoint than its predecessor reached): inclusive; none for the first attempt.
  std::optional<std::pair<int64_t, int64_t>> rolled_back;
};

struct RunReport {
  RunSummary summary;   // summary.run is the run's record
  nlohmann::json spec;  // the stored spec as written, or null when it is not JSON
  // A program job's section, every default filled in (issue 19); none for an engine job.
  std::optional<ProgramSpec> program;
  // The steps the spec says the run makes (train.steps, or program.steps); 0: unknown.
  int64_t planned_steps = 0;
  int64_t peak_memory = 0;        // the highest rank's, bytes
  std::vector<RankReport> ranks;  // every rank of the world, by rank
  std::vector<AttemptReport> attempts;
  std::vector<EvalPoint> evals;
  std::vector<CommOpStats> comm_ops;
  CommByDimension comm_dims;  // communication per mesh dimension (issue 34)
  // An engine pipeline run's bubble explained: planned, replayed with the measured stage costs and
  // measured, over the steps summary.bubble_fraction averages; none for other runs.
  std::optional<BubbleSplit> bubble_split;
  // While the run runs: its progress at the time of the report. Once it ended: the ranks' last
  // reports, their ages counted to the run's end (so the same database gives the same report).
  LiveProgress live;
  IngestCounts ingest;
  ProblemLines problems;  // the last kReportedProblems warnings and errors
  // The last lines the rank named by the root cause wrote on its stderr in the latest attempt
  // (loadErrorOutput: argparse's message, a traceback's end); empty without such a rank.
  std::vector<std::string> error_output;
  std::vector<std::string> metrics;  // the metrics the run recorded, sorted
};

// Throws kInvalidArgument for a run that does not exist, and as the storage queries do. `now`
// (seconds since the epoch) is the clock a running run's hang view is judged by.
RunReport buildRunReport(const Database& db, int64_t run_id, double now);

// The report's one JSON form (docs/run-report.md): non-finite numbers (a hand-edited database)
// are null.
nlohmann::json toJson(const RunReport& report);

// The run's record, as the report's "run".
nlohmann::json toJson(const RunRecord& run);

// Communication per op and size, and one rank's: the report's "comm_ops" and the communication
// part of its rank rows, and GET /api/v1/runs/ID/comm.
nlohmann::json toJson(const CommOpStats& op);
nlohmann::json toJson(const RankCommStats& rank);

// A pipeline's bubble split (the report's "bubble_split", and the split of one step in GET
// /api/v1/runs/ID/schedule): the three bubbles, the gap's two shares in percentage points, the
// slowest stage, each stage's measured costs in ms, and the split in words.
nlohmann::json toJson(const BubbleSplit& split);

// An entry of a run list (`ringmaster runs --json`, GET /api/v1/runs): the run's record with
// its final step and final loss (finalLoss).
nlohmann::json runListEntry(const Database& db, const RunRecord& run);

}  // namespace ringmaster::storage
