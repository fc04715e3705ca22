// Communication statistics per operation and message size, as nccl-tests reports them: count,
// size, p50 / p99 time, algbw and busbw.
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "query/comm_stats.h"

namespace ringmaster::ui {

class CommOpsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { kOp, kSize, kCount, kP50, kP99, kAlgbw, kBusbw, kColumnCount };
  using QAbstractTableModel::QAbstractTableModel;

  void setStats(std::vector<storage::CommOpStats> stats);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::vector<storage::CommOpStats> stats_;
};

}  // namespace ringmaster::ui
