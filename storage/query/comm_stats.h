// Communication statistics of a run, as nccl-tests reports them: per operation and message size
// (count, bytes, p50 / p99 duration, algbw and busbw), and per rank (time in collectives, time
// waiting for peers where measured, compute time) with the straggler ranks named. One rank's
// operations may overlap in time (posted receives, DDP's bucket all-reduces, FSDP's prefetch): a
// rank's time counts the time they cover once (the union of their intervals); a per-op total sums
// over operations, overlapping ones counted each, as a profiler's per-kernel total does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "db/database.h"
#include "telemetry/events.h"

namespace ringmaster::storage {

struct CommOpStats {
  std::string op;      // "all_reduce", ...
  uint64_t bytes = 0;  // message size, as nccl-tests counts it
  int64_t count = 0;   // operations over all ranks
  // Transfer time summed over the operations of every rank, overlapping ones counted each (not a
  // share of wall time: the rank figures below are): each op's duration less the time it waited
  // for a peer where that was measured (a receive posted before its sender launched spends most
  // of its duration waiting).
  double total_ms = 0;
  double p50_ms = 0, p99_ms = 0;  // per operation
  // Wait for peers summed the same way, where measured: a pipeline stage's receives posted
  // together all wait at once, so this may exceed the run's wall time.
  std::optional<double> wait_ms;
  double algbw_gbps = 0, busbw_gbps = 0;  // medians, GB/s
};
// By op, then size (sizes above 2^63 - 1, kept in SQLite's signed integer, sort last as they
// should).
std::vector<CommOpStats> commStatsByOp(const Database& db, int64_t run_id);

struct RankCommStats {
  int rank = 0;
  int64_t operations = 0;
  // Time inside operations: the union of their intervals ([t - duration_ms, t]), so overlapping
  // operations count once and it never exceeds the time the rank ran.
  double comm_ms = 0;
  // Of which waiting for peers, where measured: the union of the waits (each at the start of its
  // operation), a moment when several operations wait counted once.
  std::optional<double> wait_ms;
  std::optional<double> transfer_ms;  // comm_ms - wait_ms: in operations, none of them waiting
  double mean_step_ms = 0;            // over the steps it reported
  double mean_compute_ms = 0;         // step time not spent in exposed communication
  double mean_exposed_comm_ms = 0;
  // Collectives of the training steps (those with a step: the setup's are left out, where the
  // ranks' start-up skew dominates) whose wait was measured (storage splits it from the members'
  // starts, docs/telemetry.md): how many, this rank's mean wait per such collective, and the mean
  // of its work-group peers' (workGroup; absent when no peer has a measured wait).
  int64_t collectives_measured = 0;
  std::optional<double> mean_wait_ms;
  std::optional<double> peers_mean_wait_ms;
  // The rank the others wait for. Two rules:
  // - the wait rule, where the waits of collectives are measured for this rank and a peer of its
  //   work group: its peers' mean wait per collective is at least kWaitStragglerRatio times its
  //   own, and at least kWaitStragglerShare of their mean collective duration (they spend much of
  //   their collective time waiting, mostly for it);
  // - the compute rule: its compute time per step stands out (by more than kStragglerRatio) from
  //   the median of its work group's.
  // Where the waits are measured a straggler satisfies both: the wait says the others lose time
  // to it, the compute that the cause is its own work (data, compute, a busy host) and not the
  // skew with which a collective's completion reaches the ranks of a loaded host, which makes
  // the same rank last to the next collective by a few milliseconds without it being slower.
  // Where they are not (runs recorded before, and a group whose steps report no compute), one
  // rule decides alone. A pipeline rank is its own work group, so neither names one: its
  // stages' waits and compute are its own.
  bool straggler = false;
};
inline constexpr double kStragglerRatio = 1.25;
inline constexpr double kWaitStragglerRatio = 4.0;
inline constexpr double kWaitStragglerShare = 0.25;

// Ranks of one work group run the same computation, so their compute times compare: the ranks of
// the mesh that differ only in their dp coordinate (issue 34: the run's stored mesh, not its
// strategy's name). Every rank of a data-parallel run is in one; a pipeline rank (a 1 x 1 x world
// mesh) only with itself, as is a tp rank of a 1 x tp x 1 one.
int workGroup(const MeshAxes& mesh, const MeshAxes& coords);

// Every rank of the run, by rank.
std::vector<RankCommStats> commStatsByRank(const Database& db, int64_t run_id);

// Time spent transferring in each operation per step (waits for peers left out), over a step
// range reduced to at most `buckets` buckets of `bucket_width` steps: per bucket, the mean over
// ranks and steps of the milliseconds a rank spent in that op during a step (one rank's when `rank`
// is given): the union of the op's transfers in the step, overlapping ones (DDP's buckets) counted
// once. Different ops of a step may overlap each other, so the ops' figures may add up to more
// than the step. Events without a step are left out.
struct OpTimeBucket {
  int64_t start = 0;
  double ms_per_step = 0;
};
struct OpTimeSeries {
  std::string op;
  std::vector<OpTimeBucket> buckets;
};
struct CommTimeByOp {
  int64_t bucket_width = 1;
  std::vector<OpTimeSeries> ops;  // by op name
};
CommTimeByOp commTimeByOp(const Database& db, int64_t run_id, int64_t from_step, int64_t to_step,
                          int buckets, std::optional<int> rank = std::nullopt);

}  // namespace ringmaster::storage
