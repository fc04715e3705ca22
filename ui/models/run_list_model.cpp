// RunListModel: the run history table.
#include "models/run_list_model.h"

#include <QColor>
#include <QDateTime>

#include "models/format.h"

namespace ringmaster::ui {

QColor statusColor(const std::string& status) {
  if (status == "running") return QColor(0x1f, 0x77, 0xb4);
  if (status == "completed") return QColor(0x2c, 0xa0, 0x2c);
  if (status == "failed") return QColor(0xd6, 0x27, 0x28);
  if (status == "cancelled" || status == "interrupted") return QColor(0xe3, 0x8a, 0x0c);
  return QColor(0x7f, 0x7f, 0x7f);
}

void RunListModel::setRuns(std::vector<storage::RunRecord> runs) {
  bool same_rows = runs.size() == runs_.size();
  for (size_t i = 0; same_rows && i < runs.size(); ++i) same_rows = runs[i].id == runs_[i].id;
  if (!same_rows) {
    beginResetModel();
    runs_ = std::move(runs);
    endResetModel();
    return;
  }
  runs_ = std::move(runs);
  if (!runs_.empty()) emit dataChanged(index(0, 0), index(rowCount() - 1, kColumnCount - 1));
}

int RunListModel::rowOfRun(int64_t run_id) const {
  for (size_t i = 0; i < runs_.size(); ++i)
    if (runs_[i].id == run_id) return static_cast<int>(i);
  return -1;
}

int RunListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(runs_.size());
}

int RunListModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant RunListModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
    return {};
  const storage::RunRecord& run = runs_[static_cast<size_t>(index.row())];
  if (role == kRunIdRole) return QVariant::fromValue<qlonglong>(run.id);
  if (role == Qt::ForegroundRole && index.column() == kStatus) return statusColor(run.status);
  if (role == Qt::TextAlignmentRole)
    return index.column() == kId || index.column() == kRanks || index.column() == kDuration
               ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
               : QVariant();
  if (role == Qt::ToolTipRole && run.error) return QString::fromStdString(*run.error);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kId:
      return QVariant::fromValue<qlonglong>(run.id);
    case kName:
      return QString::fromStdString(run.name);
    case kStrategy:
      return QString::fromStdString(run.strategy);
    case kRanks:
      return run.world_size;
    case kStatus:
      return QString::fromStdString(run.status);
    case kCreated:
      return QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(run.created_at * 1000))
          .toString("yyyy-MM-dd hh:mm");
    case kDuration:
      return formatDuration(run.durationSeconds());
  }
  return {};
}

QVariant RunListModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"ID", "Name", "Strategy", "Ranks", "Status", "Created", "Duration"};
  return section >= 0 && section < kColumnCount ? QString(names[section]) : QVariant();
}

}  // namespace ringmaster::ui
