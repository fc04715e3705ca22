// Communication per mesh dimension (issue 34): for each dimension a run's comm events name ("dp",
// "tp", "pp", "world"), its operations, bytes and time, over the run and per rank. A rank's time
// in a dimension is counted as commStatsByRank counts a rank's time: the union of the intervals of
// its operations there, so overlapping ones (DDP's buckets) count once. It does not split a step's
// exposed communication by dimension where the step event does not (see exposed_ms).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "db/database.h"

namespace ringmaster::storage {

// One rank's communication in one dimension.
struct RankDimensionComm {
  int rank = 0;
  std::string dim;         // "dp", "tp", "pp", "world"
  int64_t operations = 0;  // its operations there (setup's included)
  uint64_t bytes = 0;      // their message sizes summed, as nccl-tests counts each
  double total_ms = 0;     // time inside them: the union of their intervals
  // Of which waiting for peers, where measured (collectives once every member's row is stored,
  // Gloo's receives): the union of the waits.
  std::optional<double> wait_ms;
  // Communication not hidden behind compute: the rank's exposed_comm_ms summed over its steps,
  // known only where every operation of the rank is this dimension's (the step event does not
  // split it by dimension); absent otherwise and where the steps do not report it.
  std::optional<double> exposed_ms;
  // Time per step: the union of its operations that belong to a step, over the steps the rank
  // reported (or, without step events, the steps its operations name); 0 without steps.
  double ms_per_step = 0;
};

// One dimension over the run: its ranks' figures summed (operations, bytes, total_ms, wait_ms,
// exposed_ms, each as the rank rows say) and ms_per_step their mean over the ranks with
// operations there.
struct DimensionComm {
  std::string dim;
  int ranks = 0;  // ranks with operations in it
  int64_t operations = 0;
  uint64_t bytes = 0;
  double total_ms = 0;
  std::optional<double> wait_ms;
  std::optional<double> exposed_ms;  // where every one of its ranks' is known
  double ms_per_step = 0;
};

struct CommByDimension {
  std::vector<DimensionComm> dims;       // dp, tp, pp, world: those with operations only
  std::vector<RankDimensionComm> ranks;  // by rank, then dimension in the same order
};

// The run's communication per dimension, every attempt's events together (as commStatsByRank).
// Empty for a run without comm events; throws as the storage queries do.
CommByDimension commByDimension(const Database& db, int64_t run_id);

// Its JSON form: the run report's "comm_dims" and GET /api/v1/runs/ID/comm_dims
// (docs/run-report.md): {"dims": [{dim, ranks, operations, bytes, total_ms, wait_ms, exposed_ms,
// ms_per_step}], "ranks": [{rank, dim, operations, bytes, total_ms, wait_ms, exposed_ms,
// ms_per_step}]}, unknown figures null.
nlohmann::json toJson(const CommByDimension& comm);

}  // namespace ringmaster::storage
