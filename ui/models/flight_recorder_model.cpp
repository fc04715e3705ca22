// FlightRecorderModel: the rows' text as they are (escaped by whoever built them).
#include "models/flight_recorder_model.h"

namespace ringmaster::ui {

QVariant FlightRecorderModel::data(const QModelIndex& index, int role) const {
  const FlightRecorderRow* row = rowAt(index);
  if (row == nullptr || (role != Qt::DisplayRole && role != Qt::ToolTipRole)) return {};
  switch (index.column()) {
    case kRank:
      return QString::number(row->rank);
    case kCompleted:
      return row->completed;
    case kInFlight:
      return row->in_flight;
    case kDidNotReach:
      return row->did_not_reach;
    default:
      return {};
  }
}

QVariant FlightRecorderModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal) return {};
  static const char* const names[] = {"Rank", "Last completed", "In flight when it dumped",
                                      "Did not reach"};
  return section >= 0 && section < kColumnCount ? QVariant(QString(names[section])) : QVariant();
}

}  // namespace ringmaster::ui
