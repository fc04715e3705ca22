// CompareSummaryModel and SpecDifferencesModel: untrusted text escaped, numbers through format.h.
#include "models/compare_models.h"

#include <algorithm>

#include "models/format.h"
#include "models/untrusted_text.h"

namespace ringmaster::ui {

void CompareSummaryModel::setRuns(std::vector<storage::RunSummary> runs) {
  beginResetModel();
  runs_ = std::move(runs);
  endResetModel();
}

int CompareSummaryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kRowCount;
}

int CompareSummaryModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(runs_.size());
}

QVariant CompareSummaryModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
    return {};
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  const storage::RunSummary& s = runs_[static_cast<size_t>(index.column())];
  switch (index.row()) {
    case kName:
      return untrustedLine(s.run.name);
    case kStrategy:
      return untrustedLine(s.run.strategy);
    case kRanks:
      return QString::number(s.run.world_size);
    case kStatus:
      return untrustedLine(s.run.status);
    case kSamplesPerSecond:
      return formatFigure(s.samples_per_second);
    case kFinalLoss:
      return s.final_loss ? formatFigure(*s.final_loss) : "–";
    case kMeanStep:
      return formatMs(s.mean_step_ms);
    case kCommShare:
      return QString("%1%").arg(s.comm_share * 100, 0, 'f', 1);
    case kBubble:
      return s.bubble_fraction ? QString("%1%").arg(*s.bubble_fraction * 100, 0, 'f', 1) : "–";
    case kPeakMemory: {
      int64_t peak = 0;
      for (const auto& rank : s.ranks) peak = std::max(peak, rank.peak_memory);
      return formatBytes(static_cast<double>(peak));
    }
    case kDuration:
      return formatDuration(s.run.durationSeconds());
    default:
      return {};
  }
}

QVariant CompareSummaryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || section < 0) return {};
  if (orientation == Qt::Horizontal)
    return static_cast<size_t>(section) < runs_.size()
               ? QVariant(QString("run %1").arg(runs_[static_cast<size_t>(section)].run.id))
               : QVariant();
  // The figures by their names in the table of figures (storage/query/figures.h).
  static const char* const names[] = {"name",         "strategy",           "ranks",
                                      "status",       "samples_per_second", "final_loss",
                                      "mean_step_ms", "comm_share",         "bubble_fraction",
                                      "peak_memory",  "duration_s"};
  if (section >= kRowCount) return {};
  return section >= kSamplesPerSecond ? figureName(names[section]) : QString(names[section]);
}

void SpecDifferencesModel::setDifferences(std::vector<int64_t> run_ids,
                                          std::vector<storage::SpecDifference> rows) {
  beginResetModel();
  run_ids_ = std::move(run_ids);
  rows_ = std::move(rows);
  endResetModel();
}

int SpecDifferencesModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int SpecDifferencesModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(run_ids_.size());
}

QVariant SpecDifferencesModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid) ||
      role != Qt::DisplayRole)
    return {};
  const auto& values = rows_[static_cast<size_t>(index.row())].values;
  const auto column = static_cast<size_t>(index.column());
  return column < values.size() ? QVariant(untrustedLine(values[column])) : QVariant();
}

QVariant SpecDifferencesModel::headerData(int section, Qt::Orientation orientation,
                                          int role) const {
  if (role != Qt::DisplayRole || section < 0) return {};
  if (orientation == Qt::Horizontal)
    return static_cast<size_t>(section) < run_ids_.size()
               ? QVariant(QString("run %1").arg(run_ids_[static_cast<size_t>(section)]))
               : QVariant();
  return static_cast<size_t>(section) < rows_.size()
             ? QVariant(untrustedLine(rows_[static_cast<size_t>(section)].path))
             : QVariant();
}

}  // namespace ringmaster::ui
