// CommOpsModel: the communication panel's table.
#include "models/comm_ops_model.h"

#include "models/format.h"
#include "models/untrusted_text.h"

namespace ringmaster::ui {

QVariant CommOpsModel::data(const QModelIndex& index, int role) const {
  const storage::CommOpStats* row = rowAt(index);
  if (!row) return {};
  const storage::CommOpStats& s = *row;
  if (role == Qt::TextAlignmentRole && index.column() != kOp)
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kOp:
      return untrustedLine(s.op);
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
    case kWait:
      return s.wait_ms ? formatMs(*s.wait_ms) : QString("–");
  }
  return {};
}

QVariant CommOpsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= kColumnCount) return {};
  if (role == Qt::ToolTipRole && (section == kP50 || section == kP99 || section == kAlgbw))
    return QString(
        "Of the transfer: an op's time waiting for its peer (a receive posted before "
        "its sender launched) is left out");
  if (role == Qt::ToolTipRole && section == kWait)
    return QString(
        "All ranks' time in these ops waiting for the last rank to arrive (measured from the "
        "ranks' starts; – where not measured), summed over the operations: ones that overlap "
        "are counted each, so it may exceed the run's time; the rank table counts them once");
  if (role != Qt::DisplayRole) return {};
  static const char* names[] = {"Op",           "Size",       "Count",      "p50 transfer",
                                "p99 transfer", "algbw GB/s", "busbw GB/s", "wait"};
  return QString(names[section]);
}

}  // namespace ringmaster::ui
