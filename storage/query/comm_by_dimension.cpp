// Communication per mesh dimension (query/comm_by_dimension.h): one sweep of the run's comm rows
// per rank and dimension for the union of their intervals, a second over the rows of the steps,
// and the steps' own figures.
#include "query/comm_by_dimension.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <utility>

#include "db/statement.h"
#include "query/comm_intervals.h"
#include "telemetry/events.h"

namespace ringmaster::storage {

namespace {

// dp, tp, pp, world, then any other name a hand-edited database holds.
bool dimBefore(const std::string& a, const std::string& b) {
  const auto place = [](const std::string& dim) {
    const auto* at = std::find(std::begin(kCommDims), std::end(kCommDims), dim);
    return std::distance(std::begin(kCommDims), at);
  };
  return std::pair(place(a), a) < std::pair(place(b), b);
}

// Per rank and dimension: operations, bytes, the union of their intervals and of their waits, how
// many waits were measured, and the distinct steps they name; of the operations of the steps only
// when `of_steps`.
std::string perRankDimensionSql(bool of_steps) {
  return fmt::format(
      "SELECT rank, dim, count(*), total(bytes), total({}), total({}), count(wait_ms), "
      "count(DISTINCT step) FROM (SELECT *, max(start_ms + duration_ms) OVER earlier AS "
      "comm_reach, max(start_ms + waited_ms) OVER earlier AS wait_reach FROM (SELECT rank, dim, "
      "step, bytes, {} AS start_ms, duration_ms, wait_ms, {} AS waited_ms FROM comm_events WHERE "
      "run_id = ?{}) {}) GROUP BY rank, dim",
      newlyCoveredMs("start_ms", "duration_ms", "comm_reach"),
      newlyCoveredMs("start_ms", "waited_ms", "wait_reach"), kStartMs, kWaitedMs,
      of_steps ? " AND step IS NOT NULL" : "", earlierWindow("rank, dim", "start_ms"));
}

// What each rank's step events say: how many steps, and their exposed communication where any
// step reported it.
struct RankSteps {
  int64_t steps = 0;
  std::optional<double> exposed_ms;
};

std::map<int, RankSteps> stepsByRank(const Database& db, int64_t run_id) {
  Statement select(db,
                   "SELECT rank, count(*), total(exposed_comm_ms), count(exposed_comm_ms) FROM "
                   "steps WHERE run_id = ? GROUP BY rank");
  select.bind(1, run_id);
  std::map<int, RankSteps> ranks;
  while (select.run()) {
    RankSteps& rank = ranks[static_cast<int>(select.columnInt(0))];
    rank.steps = select.columnInt(1);
    if (select.columnInt(3) > 0) rank.exposed_ms = select.columnDouble(2);
  }
  return ranks;
}

std::vector<RankDimensionComm> rankRows(const Database& db, int64_t run_id) {
  std::vector<RankDimensionComm> rows;
  Statement all(db, perRankDimensionSql(false));
  all.bind(1, run_id);
  while (all.run()) {
    RankDimensionComm row{.rank = static_cast<int>(all.columnInt(0)),
                          .dim = all.columnText(1),
                          .operations = all.columnInt(2),
                          .bytes = static_cast<uint64_t>(std::max(all.columnDouble(3), 0.0)),
                          .total_ms = all.columnDouble(4)};
    if (all.columnInt(6) > 0) row.wait_ms = all.columnDouble(5);
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.rank != b.rank ? a.rank < b.rank : dimBefore(a.dim, b.dim);
  });
  return rows;
}

// Each row's time per step, and its exposed time where the rank's communication is all its.
void addStepFigures(const Database& db, int64_t run_id, std::vector<RankDimensionComm>& rows) {
  const std::map<int, RankSteps> steps = stepsByRank(db, run_id);
  std::map<std::pair<int, std::string>, std::pair<double, int64_t>> of_steps;  // ms, steps named
  Statement stepped(db, perRankDimensionSql(true));
  stepped.bind(1, run_id);
  while (stepped.run()) {
    of_steps[{static_cast<int>(stepped.columnInt(0)), stepped.columnText(1)}] = {
        stepped.columnDouble(4), stepped.columnInt(7)};
  }
  std::map<int, int> dims_of_rank;
  for (const RankDimensionComm& row : rows) ++dims_of_rank[row.rank];
  for (RankDimensionComm& row : rows) {
    const auto rank_steps = steps.find(row.rank);
    const auto stepped_row = of_steps.find({row.rank, row.dim});
    if (stepped_row != of_steps.end()) {
      const auto [ms, named] = stepped_row->second;
      const int64_t count = rank_steps != steps.end() && rank_steps->second.steps > 0
                                ? rank_steps->second.steps
                                : named;
      if (count > 0) row.ms_per_step = ms / static_cast<double>(count);
    }
    if (dims_of_rank[row.rank] == 1 && rank_steps != steps.end())
      row.exposed_ms = rank_steps->second.exposed_ms;
  }
}

// The rank rows of each dimension summed.
std::vector<DimensionComm> dimensionRows(const std::vector<RankDimensionComm>& ranks) {
  std::map<std::string, DimensionComm, decltype(&dimBefore)> dims(&dimBefore);
  std::map<std::string, bool> exposed_unknown;
  for (const RankDimensionComm& rank : ranks) {
    auto [at, added] = dims.try_emplace(rank.dim);
    DimensionComm& dim = at->second;
    dim.dim = rank.dim;
    ++dim.ranks;
    dim.operations += rank.operations;
    dim.bytes += rank.bytes;
    dim.total_ms += rank.total_ms;
    if (rank.wait_ms) dim.wait_ms = dim.wait_ms.value_or(0) + *rank.wait_ms;
    if (rank.exposed_ms) dim.exposed_ms = dim.exposed_ms.value_or(0) + *rank.exposed_ms;
    if (!rank.exposed_ms) exposed_unknown[rank.dim] = true;
    dim.ms_per_step += rank.ms_per_step;
  }
  std::vector<DimensionComm> out;
  for (auto& [name, dim] : dims) {
    dim.ms_per_step /= dim.ranks;
    if (exposed_unknown[name]) dim.exposed_ms.reset();
    out.push_back(std::move(dim));
  }
  return out;
}

nlohmann::json number(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
}

nlohmann::json optionalNumber(const std::optional<double>& value) {
  return value ? number(*value) : nlohmann::json();
}

}  // namespace

CommByDimension commByDimension(const Database& db, int64_t run_id) {
  CommByDimension result;
  result.ranks = rankRows(db, run_id);
  addStepFigures(db, run_id, result.ranks);
  result.dims = dimensionRows(result.ranks);
  return result;
}

nlohmann::json toJson(const CommByDimension& comm) {
  nlohmann::json dims = nlohmann::json::array(), ranks = nlohmann::json::array();
  for (const DimensionComm& d : comm.dims) {
    dims.push_back({{"dim", d.dim},
                    {"ranks", d.ranks},
                    {"operations", d.operations},
                    {"bytes", d.bytes},
                    {"total_ms", number(d.total_ms)},
                    {"wait_ms", optionalNumber(d.wait_ms)},
                    {"exposed_ms", optionalNumber(d.exposed_ms)},
                    {"ms_per_step", number(d.ms_per_step)}});
  }
  for (const RankDimensionComm& r : comm.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"dim", r.dim},
                     {"operations", r.operations},
                     {"bytes", r.bytes},
                     {"total_ms", number(r.total_ms)},
                     {"wait_ms", optionalNumber(r.wait_ms)},
                     {"exposed_ms", optionalNumber(r.exposed_ms)},
                     {"ms_per_step", number(r.ms_per_step)}});
  }
  return {{"dims", std::move(dims)}, {"ranks", std::move(ranks)}};
}

}  // namespace ringmaster::storage
