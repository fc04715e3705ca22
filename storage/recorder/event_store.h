// EventStore: what the recorder's writer does with each telemetry event, on its own connection:
// every statement prepared once; a replayed event recognised by (attempt, rank, seq) and skipped;
// the attempt each rank's events belong to (restarts); a step as a `steps` row and its rollup
// buckets, its custom metrics as `scalars` rows (custom_metrics.h); a comm event as a `comm_events`
// row, its wait filled once its collective is matched (collective_matching.h); evals, logs, errors,
// dumps, progress. Storing opens no transaction: the writer (recorder.cpp) wraps each batch in one
// and calls writeBatchState at its end.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "db/statement.h"
#include "db/step_columns.h"
#include "recorder/collective_matching.h"
#include "recorder/custom_metrics.h"
#include "recorder/recorder.h"
#include "recorder/rollup_accumulator.h"
#include "recorder/seq_ranges.h"
#include "telemetry/events.h"

namespace ringmaster::storage {

class Database;

class EventStore : private CommRowWriter {
 public:
  // Prepares the statements and reads what the run has stored so far (its sequence numbers, each
  // rank's attempt, the collectives missing members). Throws kInvalidArgument when the run does
  // not exist.
  EventStore(Database& db, int64_t run_id, int attempt);

  enum class Outcome { kStored, kDuplicate, kRejected };

  // kRejected, with the reason in `why`, for an event naming no rank of the run; such an event
  // leaves no trace but the count and the reason (not even a sequence number).
  Outcome store(const TelemetryEvent& e, std::string& why);
  bool inWorld(int64_t rank) const { return rank >= 0 && rank < world_size_; }
  // A line of the run's log; under the latest attempt unless it is a rank's event's.
  void log(std::optional<int64_t> rank, double t, std::string_view level,
           const std::string& message, std::optional<int> attempt = std::nullopt);
  // Writes what the batch changed besides its rows: the held comm rows, the ranges of stored
  // sequence numbers, the rollup buckets it touched (one upsert per bucket, not per point) and
  // each attempt's first and last step.
  void writeBatchState();
  // Adds to the attempt's counts; malformed and rejected lines are both its bad lines.
  void addCounts(const RecorderCounts& delta);

 private:
  // What the run stored before this recorder started (attach, a restarted launcher): its world
  // size and mesh.
  void loadWorldSize(Database& db);
  void loadStoredSeqs(Database& db);
  void loadRankAttempts(Database& db);
  // The step columns' names in `metrics`, inserted when missing.
  void registerStepMetrics(Database& db);

  int attemptOf(int64_t rank) const;
  void beginAttempt(const TelemetryEvent& e, int attempt);
  void writeSeqRanges();
  void writeRollups();
  void recomputeRestoredBuckets();
  void writeAttemptSteps();

  void storeBody(const TelemetryEvent& e, const HelloEvent& hello);
  void storeBody(const TelemetryEvent& e, const StepEvent& s);
  void storeBody(const TelemetryEvent& e, const CommEvent& c);
  void storeBody(const TelemetryEvent& e, const SchedEvent& s);
  void storeBody(const TelemetryEvent& e, const EvalEvent& v);
  void storeBody(const TelemetryEvent& e, const LogEvent& l);
  void storeBody(const TelemetryEvent& e, const ErrorEvent& error);
  void storeBody(const TelemetryEvent& e, const FlightEvent& flight);
  void storeBody(const TelemetryEvent& e, const ProgressEvent& p);
  void storeBody(const TelemetryEvent& e, const DoneEvent& done);

  // CommRowWriter, for the collective matcher (and a comm event that needs no matching).
  int64_t insertComm(const CommRow& row, std::optional<double> wait_ms) override;
  void setCommWait(int64_t rowid, double wait_ms) override;

  int64_t run_id_;
  int attempt_;             // the attempt the recorder was started for
  int latest_attempt_;      // the latest any rank's hello named (launch.max_restarts)
  int event_attempt_ = 0;   // the attempt of the event being stored
  int64_t world_size_ = 0;  // ranks are 0 .. world_size_ - 1
  MeshAxes mesh_;           // the run's, as stored (issue 34)
  Database& database_;
  Statement seq_write_, seq_erase_, rank_, run_mesh_, rank_done_, step_insert_, step_update_, comm_,
      comm_wait_, sched_, eval_, log_, root_cause_, progress_, dump_, rollup_, counts_;
  Statement attempt_begin_, attempt_end_, run_error_clear_, attempt_root_cause_, attempt_steps_;
  CollectiveMatcher collectives_{*this};
  std::map<std::pair<int, int64_t>, SeqRanges> seen_;  // by (attempt, rank)
  std::map<int64_t, int> rank_attempt_;                // by rank; absent: attempt_
  RollupAccumulator rollups_;           // the custom metrics' buckets (scalar_rollups)
  StepRollupAccumulator step_rollups_;  // the step columns' (step_rollups)
  CustomMetricStore custom_metrics_;    // the steps' custom metrics, as rows of `scalars`
  // Since the last batch: (rank, width, bucket) of the rollups holding a step stored again, and
  // each attempt's first and last step stored.
  std::set<std::tuple<int64_t, int64_t, int64_t>> restored_buckets_;
  std::map<int, std::pair<int64_t, int64_t>> attempt_steps_seen_;
  // The step_rollups upserts, by the set of step columns they write (a run has one or two).
  static_assert(kStepColumns.size() <= 32);
  std::map<uint32_t, std::unique_ptr<Statement>> step_rollup_upserts_;
  std::unique_ptr<Statement> recompute_;  // a step_rollups row from `steps`, made when first needed
};

}  // namespace ringmaster::storage
