// CommDimsModel and RankDimsModel: the Communication tab's tables per mesh dimension.
#include "models/comm_dims_model.h"

#include <algorithm>
#include <iterator>

#include "data/rank_groups.h"
#include "models/format.h"
#include "telemetry/events.h"

namespace ringmaster::ui {

namespace {

// A dimension's column in RankDimsRow::ms_per_step: its place in storage's kCommDims, or -1.
int dimIndex(std::string_view dim) {
  const auto* end = std::end(kCommDims);
  const auto* found = std::find(std::begin(kCommDims), end, dim);
  return found == end ? -1 : static_cast<int>(found - std::begin(kCommDims));
}

QString optionalMs(const std::optional<double>& ms) {
  return ms ? formatMs(*ms) : QString("–");
}

}  // namespace

void CommDimsModel::setDims(std::vector<storage::DimensionComm> dims) {
  total_ms_ = 0;
  for (const storage::DimensionComm& dim : dims) total_ms_ += dim.total_ms;
  replaceRows(std::move(dims), true);
}

QVariant CommDimsModel::data(const QModelIndex& index, int role) const {
  const storage::DimensionComm* row = rowAt(index);
  if (!row) return {};
  if (role == Qt::TextAlignmentRole && index.column() != kDim)
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kDim:
      return QString::fromStdString(row->dim);
    case kRanks:
      return row->ranks;
    case kOperations:
      return QVariant::fromValue<qlonglong>(row->operations);
    case kBytes:
      return formatBytes(static_cast<double>(row->bytes));
    case kMsPerStep:
      return formatMs(row->ms_per_step);
    case kTotal:
      return formatMs(row->total_ms);
    case kShare:
      return total_ms_ > 0 ? QString("%1%").arg(100 * row->total_ms / total_ms_, 0, 'f', 1)
                           : QString("–");
    case kWait:
      return optionalMs(row->wait_ms);
    case kExposed:
      return optionalMs(row->exposed_ms);
  }
  return {};
}

QVariant CommDimsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= kColumnCount) return {};
  if (role == Qt::ToolTipRole && section == kTotal)
    return QString(
        "Summed over its ranks: each rank's time inside its operations of this dimension, "
        "overlapping ones counted once");
  if (role == Qt::ToolTipRole && section == kExposed)
    return QString(
        "Not hidden behind compute; known only where the ranks communicated in this dimension "
        "alone (the step reports its exposed communication, not by dimension)");
  if (role != Qt::DisplayRole) return {};
  static const char* names[] = {"Dimension", "Ranks",         "Operations", "Bytes",  "per step",
                                "Time",      "Share of comm", "Wait",       "Exposed"};
  return QString(names[section]);
}

std::vector<RankDimsRow> rankDimsRows(const storage::CommByDimension& comm,
                                      const std::vector<MeshCoordinates>& coordinates,
                                      const std::vector<int>& order) {
  std::vector<RankDimsRow> by_rank(coordinates.size());
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    by_rank[rank].rank = static_cast<int>(rank);
    by_rank[rank].coordinates = coordinates[rank];
  }
  for (const storage::RankDimensionComm& figure : comm.ranks) {
    const int dim = dimIndex(figure.dim);
    if (dim >= 0 && figure.rank >= 0 && static_cast<size_t>(figure.rank) < by_rank.size())
      by_rank[static_cast<size_t>(figure.rank)].ms_per_step[dim] = figure.ms_per_step;
  }
  std::vector<RankDimsRow> rows;
  for (int rank : order)
    if (rank >= 0 && static_cast<size_t>(rank) < by_rank.size())
      rows.push_back(by_rank[static_cast<size_t>(rank)]);
  return rows;
}

QVariant RankDimsModel::data(const QModelIndex& index, int role) const {
  const RankDimsRow* row = rowAt(index);
  if (!row) return {};
  if (role == Qt::TextAlignmentRole && index.column() >= kDp)
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  if (index.column() == kRank) return row->rank;
  if (index.column() == kMesh) return QString::fromStdString(coordinatesText(row->coordinates));
  return formatMs(row->ms_per_step[index.column() - kDp]);
}

QVariant RankDimsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= kColumnCount) return {};
  if (role != Qt::DisplayRole) return {};
  static const char* names[] = {"Rank",        "Mesh",        "dp per step",
                                "tp per step", "pp per step", "world per step"};
  return QString(names[section]);
}

}  // namespace ringmaster::ui
