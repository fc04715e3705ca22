// The comparison's two tables as models over plain data: the summary figures (one row per figure,
// one column per run) and the spec fields that differ (one row per field, one column per run).
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "query/summary.h"

namespace ringmaster::ui {

class CompareSummaryModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Row {
    kName,
    kStrategy,
    kRanks,
    kStatus,
    kSamplesPerSecond,
    kFinalLoss,
    kMeanStep,
    kCommShare,
    kBubble,
    kPeakMemory,
    kDuration,
    kRowCount
  };
  explicit CompareSummaryModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
  void setRuns(std::vector<storage::RunSummary> runs);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::vector<storage::RunSummary> runs_;
};

class SpecDifferencesModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  explicit SpecDifferencesModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
  void setDifferences(std::vector<int64_t> run_ids, std::vector<storage::SpecDifference> rows);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::vector<int64_t> run_ids_;
  std::vector<storage::SpecDifference> rows_;
};

}  // namespace ringmaster::ui
