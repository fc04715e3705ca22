// The flight-recorder table of a run view: per rank that dumped, its last completed collective,
// what it had in flight, and the furthest collective any rank reached when it did not reach it.
// Cells show whole on hover (their tooltip).
#pragma once

#include <QString>
#include <vector>

#include "models/row_table_model.h"

namespace ringmaster::ui {

struct FlightRecorderRow {
  int rank = 0;
  QString completed;
  QString in_flight;
  QString did_not_reach;  // empty when it reached the furthest collective
};

class FlightRecorderModel : public RowTableModel<FlightRecorderRow> {
  Q_OBJECT

 public:
  enum Column { kRank, kCompleted, kInFlight, kDidNotReach, kColumnCount };
  explicit FlightRecorderModel(QObject* parent = nullptr) : RowTableModel(kColumnCount, parent) {}

  void setRows(std::vector<FlightRecorderRow> rows) { replaceRows(std::move(rows), false); }

  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
};

}  // namespace ringmaster::ui
