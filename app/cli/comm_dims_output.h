// `ringmaster show`'s and `compare`'s communication per mesh dimension (issue 34), as text: the
// report's comm_dims (query/comm_by_dimension.h) formatted; --json carries them in the report.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "query/comm_by_dimension.h"
#include "query/summary.h"

namespace ringmaster::cli {

// A run's dimensions (operations, bytes, time, wait, exposed time, time per step), and, where it
// has more than one, each rank's time per step in each. Prints nothing without comm events.
void printCommByDimension(const storage::CommByDimension& comm, std::FILE* out);

// Several runs side by side: per dimension any of them has, each run's time per step and total
// time ("-" where the run has none); `run_headers` name the runs' columns.
void printCommByDimensionComparison(const storage::Database& db,
                                    const std::vector<storage::RunSummary>& runs,
                                    const std::vector<std::string>& run_headers, std::FILE* out);

// A run's mesh as the tables show it: "2 x 2 x 1" (dp x tp x pp).
std::string formatMesh(const MeshAxes& mesh);

}  // namespace ringmaster::cli
