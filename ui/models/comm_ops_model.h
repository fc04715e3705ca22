// Communication statistics per operation and message size, as nccl-tests reports them: count,
// size, p50 / p99 time, algbw and busbw; and the time all ranks waited in them for the last rank
// to arrive, where measured.
#pragma once

#include <vector>

#include "models/row_table_model.h"
#include "query/comm_stats.h"

namespace ringmaster::ui {

class CommOpsModel : public RowTableModel<storage::CommOpStats> {
  Q_OBJECT

 public:
  enum Column { kOp, kSize, kCount, kP50, kP99, kAlgbw, kBusbw, kWait, kColumnCount };
  explicit CommOpsModel(QObject* parent = nullptr) : RowTableModel(kColumnCount, parent) {}

  // Rows of the same size are refreshed in place.
  void setStats(std::vector<storage::CommOpStats> stats) { replaceRows(std::move(stats), true); }

  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
};

}  // namespace ringmaster::ui
