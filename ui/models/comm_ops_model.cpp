// CommOpsModel: the communication panel's table.
#include "models/comm_ops_model.h"

#include "models/format.h"

namespace ringmaster::ui {

void CommOpsModel::setStats(std::vector<storage::CommOpStats> stats) {
  if (stats.size() != stats_.size()) {
    beginResetModel();
    stats_ = std::move(stats);
    endResetModel();
    return;
  }
  stats_ = std::move(stats);
  if (!stats_.empty()) emit dataChanged(index(0, 0), index(rowCount() - 1, kColumnCount - 1));
}

int CommOpsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(stats_.size());
}

int CommOpsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant CommOpsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
    return {};
  const storage::CommOpStats& s = stats_[static_cast<size_t>(index.row())];
  if (role == Qt::TextAlignmentRole && index.column() != kOp)
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kOp:
      return QString::fromStdString(s.op);
    case kSize:
      return formatBytes(static_cast<double>(s.bytes));
    case kCount:
      return QVariant::fromValue<qlonglong>(s.count);
    case kP50:
      return formatMs(s.p50_ms);
    case kP99:
      return formatMs(s.p99_ms);
    case kAlgbw:
      return formatFigure(s.algbw_gbps);
    case kBusbw:
      return formatFigure(s.busbw_gbps);
  }
  return {};
}

QVariant CommOpsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Op", "Size", "Count", "p50", "p99", "algbw GB/s", "busbw GB/s"};
  return section >= 0 && section < kColumnCount ? QString(names[section]) : QVariant();
}

}  // namespace ringmaster::ui
