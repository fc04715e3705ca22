// Communication statistics: percentiles computed from the stored events per (op, size), per-rank
// totals from SQL (the time a rank's operations cover, overlapping ones once), step figures from
// the series summaries.
#include "query/comm_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include "db/run_mesh.h"
#include "db/statement.h"
#include "query/comm_intervals.h"
#include "query/runs.h"
#include "query/series.h"
#include "telemetry/fields.h"

namespace ringmaster::storage {

namespace {

// The q-quantile (0..1) by the nearest-rank method; the values are reordered.
double quantile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  const size_t index =
      std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size())));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(index),
                   values.end());
  return values[index];
}

double median(std::vector<double> values) {
  return quantile(values, 0.5);
}

}  // namespace

std::string newlyCoveredMs(const std::string& start, const std::string& length,
                           const std::string& reach) {
  return fmt::format(
      "CASE WHEN {2} IS NULL OR {2} <= {0} THEN {1} ELSE max({0} + {1} - {2}, 0) END", start,
      length, reach);
}

std::string earlierWindow(const std::string& partition, const std::string& start) {
  return fmt::format(
      "WINDOW earlier AS (PARTITION BY {} ORDER BY {} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 "
      "PRECEDING)",
      partition, start);
}

std::vector<CommOpStats> commStatsByOp(const Database& db, int64_t run_id) {
  Statement select(db,
                   "SELECT op, bytes, max(duration_ms - coalesce(wait_ms, 0), 0), algbw_gbps, "
                   "busbw_gbps, wait_ms FROM comm_events WHERE run_id = ? ORDER BY op, bytes");
  select.bind(1, run_id);
  std::vector<CommOpStats> stats;
  std::vector<double> durations, algbw, busbw;
  auto close = [&] {
    if (stats.empty() || durations.empty()) return;
    CommOpStats& s = stats.back();
    s.p50_ms = quantile(durations, 0.5);
    s.p99_ms = quantile(durations, 0.99);
    s.algbw_gbps = median(algbw);
    s.busbw_gbps = median(busbw);
    durations.clear();
    algbw.clear();
    busbw.clear();
  };
  while (select.run()) {
    std::string op = select.columnText(0);
    const uint64_t bytes = select.columnUnsigned(1);
    if (stats.empty() || stats.back().op != op || stats.back().bytes != bytes) {
      close();
      stats.push_back({.op = std::move(op), .bytes = bytes});
    }
    CommOpStats& s = stats.back();
    const double ms = select.columnDouble(2);
    ++s.count;
    s.total_ms += ms;
    if (!select.isNull(5)) s.wait_ms = s.wait_ms.value_or(0) + select.columnDouble(5);
    durations.push_back(ms);
    algbw.push_back(select.columnDouble(3));
    busbw.push_back(select.columnDouble(4));
  }
  close();
  std::stable_sort(stats.begin(), stats.end(), [](const CommOpStats& a, const CommOpStats& b) {
    return std::tie(a.op, a.bytes) < std::tie(b.op, b.bytes);
  });
  return stats;
}

int workGroup(const MeshAxes& mesh, const MeshAxes& coords) {
  // The replicas of one (tp, pp) position run the same part of the model on their share of the
  // batch; the ranks of another tp shard or pipeline stage run another part.
  return coords.pp * mesh.tp + coords.tp;
}

namespace {

// Each rank's work group: by its stored coordinates, else by the mesh's rank order.
std::vector<int> workGroupsOf(const Database& db, const RunRecord& run) {
  std::vector<int> groups(static_cast<size_t>(std::max(run.world_size, 0)));
  for (int r = 0; r < run.world_size; ++r)
    groups[static_cast<size_t>(r)] = workGroup(run.mesh, rankCoordinates(run.mesh, r));
  for (const RankRecord& rank : loadRanks(db, run.id)) {
    if (rank.coords && rank.rank >= 0 && rank.rank < run.world_size)
      groups[static_cast<size_t>(rank.rank)] = workGroup(run.mesh, *rank.coords);
  }
  return groups;
}

}  // namespace

std::vector<RankCommStats> commStatsByRank(const Database& db, int64_t run_id) {
  Statement exists(db, "SELECT 1 FROM runs WHERE id = ?");
  if (!exists.bind(1, run_id).run()) return {};  // no run: no ranks
  exists.reset();
  const RunRecord run = loadRun(db, run_id);
  const int world_size = run.world_size;
  const std::vector<int> work_group = workGroupsOf(db, run);
  const auto workGroupOf = [&](int rank) { return work_group[static_cast<size_t>(rank)]; };

  std::vector<RankCommStats> ranks(static_cast<size_t>(world_size));
  std::vector<double> collective_ms(static_cast<size_t>(world_size));  // mean, where measured
  for (int r = 0; r < world_size; ++r) ranks[static_cast<size_t>(r)].rank = r;
  // Columns 2 and 3: the time the rank's operations and their waits cover (the waits start with
  // their operations, so one order serves both unions). Columns 5..7: the collectives of the
  // steps with a measured wait (count, total wait, total duration), for the means per collective.
  Statement totals(
      db, fmt::format(
              "SELECT rank, count(*), total({}), total({}), count(wait_ms), count(c), "
              "total(c * wait_ms), total(c * duration_ms) FROM (SELECT *, max(start_ms + "
              "duration_ms) OVER earlier AS comm_reach, max(start_ms + waited_ms) OVER earlier "
              "AS wait_reach FROM (SELECT rank, {} AS start_ms, duration_ms, wait_ms, {} AS "
              "waited_ms, CASE WHEN wait_ms IS NOT NULL AND step IS NOT NULL AND op NOT IN "
              "('send', 'recv') THEN 1 END AS c FROM comm_events WHERE run_id = ?) {}) GROUP BY "
              "rank",
              newlyCoveredMs("start_ms", "duration_ms", "comm_reach"),
              newlyCoveredMs("start_ms", "waited_ms", "wait_reach"), kStartMs, kWaitedMs,
              earlierWindow("rank", "start_ms")));
  totals.bind(1, run_id);
  while (totals.run()) {
    const int64_t r = totals.columnInt(0);
    if (r < 0 || r >= world_size) continue;
    RankCommStats& s = ranks[static_cast<size_t>(r)];
    s.operations = totals.columnInt(1);
    s.comm_ms = totals.columnDouble(2);
    if (totals.columnInt(4) > 0) {
      s.wait_ms = totals.columnDouble(3);
      s.transfer_ms = s.comm_ms - *s.wait_ms;
    }
    s.collectives_measured = totals.columnInt(5);
    if (s.collectives_measured > 0) {
      const auto n = static_cast<double>(s.collectives_measured);
      s.mean_wait_ms = totals.columnDouble(6) / n;
      collective_ms[static_cast<size_t>(r)] = totals.columnDouble(7) / n;
    }
  }
  std::map<int, std::vector<double>> computes;  // by work group
  SeriesReader step_ms(db, run_id, step_field::kStepMs),
      compute_ms(db, run_id, step_field::kComputeMs),
      exposed_comm_ms(db, run_id, step_field::kExposedCommMs);
  for (RankCommStats& s : ranks) {
    s.mean_step_ms = step_ms.summarize(s.rank).mean();
    s.mean_compute_ms = compute_ms.summarize(s.rank).mean();
    s.mean_exposed_comm_ms = exposed_comm_ms.summarize(s.rank).mean();
    if (s.mean_step_ms > 0) computes[workGroupOf(s.rank)].push_back(s.mean_compute_ms);
  }
  // The compute rule: each rank against its work group's median.
  std::vector<bool> slow_compute(ranks.size(), false);
  std::map<int, bool> compute_decides;  // by work group: two ranks or more reported compute
  for (const auto& [group, group_computes] : computes) {
    if (group_computes.size() < 2) continue;
    compute_decides[group] = true;
    const double typical = median(group_computes);
    for (RankCommStats& s : ranks) {
      if (workGroupOf(s.rank) == group) {
        slow_compute[static_cast<size_t>(s.rank)] =
            s.mean_step_ms > 0 && s.mean_compute_ms > kStragglerRatio * typical;
      }
    }
  }
  // The wait rule: each rank against the mean of its work-group peers' waits.
  std::map<int, bool> waits_decide;  // by work group: some rank has a peer to compare with
  std::vector<bool> waited_for(ranks.size(), false);
  for (RankCommStats& s : ranks) {
    if (!s.mean_wait_ms) continue;
    const int group = workGroupOf(s.rank);
    double wait_sum = 0, duration_sum = 0;
    int peers = 0;
    for (const RankCommStats& peer : ranks) {
      if (peer.rank == s.rank || !peer.mean_wait_ms || workGroupOf(peer.rank) != group) continue;
      wait_sum += *peer.mean_wait_ms;
      duration_sum += collective_ms[static_cast<size_t>(peer.rank)];
      ++peers;
    }
    if (peers == 0) continue;
    waits_decide[group] = true;
    s.peers_mean_wait_ms = wait_sum / peers;
    const double peers_duration = duration_sum / peers;
    waited_for[static_cast<size_t>(s.rank)] =
        *s.peers_mean_wait_ms > 0 &&
        *s.peers_mean_wait_ms >= kWaitStragglerRatio * *s.mean_wait_ms &&
        *s.peers_mean_wait_ms >= kWaitStragglerShare * peers_duration;
  }
  for (RankCommStats& s : ranks) {
    const int group = workGroupOf(s.rank);
    const auto r = static_cast<size_t>(s.rank);
    const bool by_wait = waits_decide.count(group) > 0,
               by_compute = compute_decides.count(group) > 0;
    s.straggler = by_wait && by_compute ? waited_for[r] && slow_compute[r]
                  : by_wait             ? waited_for[r]
                                        : by_compute && slow_compute[r];
  }
  return ranks;
}

CommTimeByOp commTimeByOp(const Database& db, int64_t run_id, int64_t from_step, int64_t to_step,
                          int buckets, std::optional<int> rank) {
  CommTimeByOp result;
  // Steps below 0 are never read (only a hand-edited database holds them), so that every
  // difference of two steps below fits an int64.
  from_step = std::max<int64_t>(from_step, 0);
  Statement range(db,
                  "SELECT min(step), max(step) FROM comm_events WHERE run_id = ? AND step "
                  "BETWEEN ? AND ?");
  range.bind(1, run_id).bind(2, from_step).bind(3, to_step);
  if (!range.run() || range.isNull(0)) return result;
  const int64_t first = range.columnInt(0), last = range.columnInt(1);
  range.reset();
  if (first < 0 || last < first) return result;  // not integers: a hand-edited database
  // The narrowest width for which n buckets reach `last`; unsigned, since it is 2^63 for one
  // bucket over every step, and then reported as 2^63 - 1 with the bucket index capped at n - 1.
  const int64_t n = std::max(buckets, 1);
  const uint64_t width =
      (static_cast<uint64_t>(last) - static_cast<uint64_t>(first)) / static_cast<uint64_t>(n) + 1;
  result.bucket_width =
      static_cast<int64_t>(std::min<uint64_t>(width, std::numeric_limits<int64_t>::max()));
  // The (rank, step) pairs of each bucket, whatever the op: an op that runs once in a while
  // (a broadcast at the start) counts as the small share of every step it is.
  std::map<int64_t, double> rank_steps;
  // A step a later attempt ran again (launch.max_restarts: it resumed at or before it) counts
  // that attempt's operations only, not both.
  const std::string latest =
      " AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = ?3 AND a.attempt > "
      "comm_events.attempt AND a.first_step <= comm_events.step)";
  Statement pairs(
      db,
      "SELECT min((step - ?1) / ?2, ?7) AS bucket, count(DISTINCT rank * 4294967296 + step) "
      "FROM comm_events WHERE run_id = ?3 AND step BETWEEN ?4 AND ?5 "
      "AND (?6 IS NULL OR rank = ?6)" +
          latest + " GROUP BY bucket");
  // A rank's transfers of one op in one step, which overlap (DDP's buckets), count the time they
  // cover: the union of their intervals, each after its wait.
  Statement totals(
      db, fmt::format("SELECT op, bucket, total({}) FROM (SELECT *, max(start_ms + length_ms) "
                      "OVER earlier AS reach FROM (SELECT op, min((step - ?1) / ?2, ?7) AS "
                      "bucket, rank, step, {} + {} AS start_ms, max(duration_ms - "
                      "coalesce(wait_ms, 0), 0) AS length_ms FROM comm_events WHERE run_id = ?3 "
                      "AND step BETWEEN ?4 AND ?5 AND (?6 IS NULL OR rank = ?6){}) {}) GROUP BY "
                      "op, bucket ORDER BY op, bucket",
                      newlyCoveredMs("start_ms", "length_ms", "reach"), kStartMs, kWaitedMs, latest,
                      earlierWindow("op, rank, step", "start_ms")));
  for (Statement* statement : {&pairs, &totals}) {
    statement->bind(1, first).bind(2, result.bucket_width).bind(3, run_id).bind(4, first);
    statement->bind(5, last).bind(6, rank ? std::optional<int64_t>(*rank) : std::nullopt);
    statement->bind(7, n - 1);
  }
  while (pairs.run()) rank_steps[pairs.columnInt(0)] = static_cast<double>(pairs.columnInt(1));
  while (totals.run()) {
    const std::string op = totals.columnText(0);
    if (result.ops.empty() || result.ops.back().op != op) result.ops.push_back({op, {}});
    // 0 <= bucket < n and bucket * bucket_width <= step - first: the start is a step of the run.
    const int64_t bucket = totals.columnInt(1);
    result.ops.back().buckets.push_back(
        {first + bucket * result.bucket_width,
         totals.columnDouble(2) / std::max(rank_steps[bucket], 1.0)});
  }
  return result;
}

}  // namespace ringmaster::storage
