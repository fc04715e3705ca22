// Communication per mesh dimension as the command line prints it (cli/comm_dims_output.h).
#include "cli/comm_dims_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "cli/terminal.h"
#include "core/display_text.h"

namespace ringmaster::cli {

using storage::CommByDimension;
using storage::DimensionComm;
using storage::RankDimensionComm;

namespace {

std::string optionalMs(const std::optional<double>& ms) {
  return ms ? formatNumber(*ms) : "-";
}

// The dimensions in the order the runs first name them (each run's are dp, tp, pp, world).
std::vector<std::string> dimensionsOf(const std::vector<CommByDimension>& runs) {
  static const std::vector<std::string> kOrder = {"dp", "tp", "pp", "world"};
  std::vector<std::string> dims;
  for (const std::string& dim : kOrder) {
    for (const CommByDimension& run : runs) {
      if (std::any_of(run.dims.begin(), run.dims.end(),
                      [&](const DimensionComm& d) { return d.dim == dim; })) {
        dims.push_back(dim);
        break;
      }
    }
  }
  for (const CommByDimension& run : runs)  // names a hand-edited database holds
    for (const DimensionComm& d : run.dims)
      if (std::find(dims.begin(), dims.end(), d.dim) == dims.end()) dims.push_back(d.dim);
  return dims;
}

void printRankTable(const CommByDimension& comm, std::FILE* out) {
  const std::vector<std::string> dims = dimensionsOf({comm});
  std::vector<std::string> headers = {"RANK"};
  for (const std::string& dim : dims) headers.push_back(displaySafeLine(dim) + " MS/STEP");
  Table table(headers);
  std::vector<size_t> right;
  for (size_t i = 0; i < headers.size(); ++i) right.push_back(i);
  table.alignRight(right);
  std::map<int, std::vector<std::string>> rows;
  for (const RankDimensionComm& r : comm.ranks) {
    auto& cells = rows[r.rank];
    cells.resize(dims.size(), "-");
    const auto at = std::find(dims.begin(), dims.end(), r.dim) - dims.begin();
    cells[static_cast<size_t>(at)] = formatNumber(r.ms_per_step, 3);
  }
  for (auto& [rank, cells] : rows) {
    cells.insert(cells.begin(), std::to_string(rank));
    table.addRow(std::move(cells));
  }
  table.print(out);
}

}  // namespace

void printCommByDimension(const CommByDimension& comm, std::FILE* out) {
  if (comm.dims.empty()) return;
  fmt::print(out, "\nCommunication per mesh dimension\n");
  // A rank's overlapping operations count once; exposed only where the rank's communication is
  // all one dimension's (the step event does not split it).
  Table table({"DIM", "RANKS", "OPS", "BYTES", "TOTAL MS", "WAIT MS", "EXPOSED MS", "MS/STEP"});
  table.alignRight({1, 2, 3, 4, 5, 6, 7});
  for (const DimensionComm& d : comm.dims) {
    table.addRow({displaySafeLine(d.dim), std::to_string(d.ranks), std::to_string(d.operations),
                  formatBytes(static_cast<double>(d.bytes)), formatNumber(d.total_ms),
                  optionalMs(d.wait_ms), optionalMs(d.exposed_ms), formatNumber(d.ms_per_step, 3)});
  }
  table.print(out);
  if (comm.dims.size() > 1) {
    fmt::print(out, "\n");
    printRankTable(comm, out);
  }
}

void printCommByDimensionComparison(const storage::Database& db,
                                    const std::vector<storage::RunSummary>& summaries,
                                    const std::vector<std::string>& run_headers, std::FILE* out) {
  std::vector<CommByDimension> runs;
  for (const storage::RunSummary& summary : summaries)
    runs.push_back(storage::commByDimension(db, summary.run.id));
  const std::vector<std::string> dims = dimensionsOf(runs);
  if (dims.empty()) return;
  fmt::print(out, "\nCommunication per mesh dimension (ms per step, total ms)\n");
  std::vector<std::string> headers = {"DIM"};
  headers.insert(headers.end(), run_headers.begin(), run_headers.end());
  Table table(headers);
  std::vector<size_t> right;
  for (size_t i = 1; i < headers.size(); ++i) right.push_back(i);
  table.alignRight(right);
  for (const std::string& dim : dims) {
    std::vector<std::string> cells = {displaySafeLine(dim)};
    for (const CommByDimension& run : runs) {
      const auto d = std::find_if(run.dims.begin(), run.dims.end(),
                                  [&](const DimensionComm& each) { return each.dim == dim; });
      cells.push_back(d == run.dims.end() ? "-"
                                          : fmt::format("{} ({})", formatNumber(d->ms_per_step, 3),
                                                        formatNumber(d->total_ms)));
    }
    table.addRow(std::move(cells));
  }
  table.print(out);
}

std::string formatMesh(const MeshAxes& mesh) {
  return fmt::format("{} x {} x {}", mesh.dp, mesh.tp, mesh.pp);
}

}  // namespace ringmaster::cli
