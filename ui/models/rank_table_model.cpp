// RankTableModel: the live run view's per-rank table.
#include "models/rank_table_model.h"

#include <QColor>

#include "data/rank_groups.h"
#include "models/format.h"
#include "models/untrusted_text.h"

namespace ringmaster::ui {

std::vector<RankRow> rankRows(const RunSnapshot& snapshot) {
  const std::string& status = snapshot.run().status;
  std::vector<RankRow> rows;
  for (const storage::RankReport& rank : snapshot.report.ranks) {
    const storage::RankSummary& figures = rank.figures;
    const storage::RankCommStats& comm = rank.comm;
    RankRow row{.rank = figures.rank,
                .last_step = figures.last_step,
                .samples_per_second = figures.samples_per_second,
                .mean_step_ms = figures.mean_step_ms,
                .mean_exposed_comm_ms = comm.mean_exposed_comm_ms,
                .mean_wait_ms = comm.mean_wait_ms,
                .peers_mean_wait_ms = comm.peers_mean_wait_ms,
                .tokens_per_second = figures.tokens_per_second,
                .mfu = figures.mfu,
                .peak_memory = figures.peak_memory,
                .estimated_memory = rank.estimated_memory.value_or(0),
                .straggler = comm.straggler,
                .waiting_on = rank.waiting_on};
    if (static_cast<size_t>(figures.rank) < snapshot.coordinates.size())
      row.coordinates = snapshot.coordinates[static_cast<size_t>(figures.rank)];
    if (const std::optional<storage::RankRecord>& record = rank.record) {
      row.host = record->host;
      row.device = record->device_name.empty() ? record->device
                                               : record->device + " (" + record->device_name + ")";
      row.status = record->status.value_or(status == "running" ? "running" : "–");
    } else {
      // Not heard from yet.
      row.status = status == "running" || status == "pending" ? "starting" : "–";
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

QVariant RankTableModel::data(const QModelIndex& index, int role) const {
  const RankRow* found = rowAt(index);
  if (!found) return {};
  const RankRow& row = *found;
  if (role == Qt::ForegroundRole && index.column() == kStraggler && row.straggler)
    return QColor(0xd6, 0x27, 0x28);
  if (role == Qt::ToolTipRole && index.column() == kStraggler && row.straggler) {
    if (row.peers_mean_wait_ms && row.mean_wait_ms) {
      return QString("the other ranks wait %1 per collective for it, it waits %2")
          .arg(formatMs(*row.peers_mean_wait_ms), formatMs(*row.mean_wait_ms));
    }
    return QString("compute per step stands out from the median rank's: the others wait for it");
  }
  if (!row.waiting_on.empty() && index.column() == kStatus) {
    if (role == Qt::ForegroundRole) return QColor(0xb3, 0x6b, 0x00);
    if (role == Qt::ToolTipRole)
      return QString("live hang view: %1").arg(QString::fromStdString(row.waiting_on));
  }
  if (role == Qt::ToolTipRole && index.column() == kWait) {
    return row.mean_wait_ms
               ? QString(
                     "mean wait per collective for the last rank to arrive (measured); the "
                     "rest of each collective is transfer")
               : QString("exposed communication per step (no wait measured in this run)");
  }
  if (role == Qt::ToolTipRole && index.column() == kMfu) {
    return row.mfu ? QString(
                         "model FLOPs utilisation: the model's training FLOPs per token x "
                         "tokens/s over the rank's peak FLOP/s")
                   : QString("no peak FLOP/s known for this device: set train.peak_tflops");
  }
  if (role == Qt::ToolTipRole &&
      (index.column() == kPeakMemory || index.column() == kEstimatedMemory) &&
      row.estimated_memory > 0 && row.peak_memory > 0) {
    return QString("measured peak %1 = %2% of the estimate %3 (spec/memory_estimate.h)")
        .arg(formatBytes(static_cast<double>(row.peak_memory)))
        .arg(100.0 * static_cast<double>(row.peak_memory) / row.estimated_memory, 0, 'f', 0)
        .arg(formatBytes(row.estimated_memory));
  }
  if (role == Qt::TextAlignmentRole && index.column() >= kLastStep && index.column() < kStraggler)
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kRank:
      return row.rank;
    case kHost:
      return untrustedLine(row.host);
    case kDevice:
      return untrustedLine(row.device);
    case kStatus:
      if (!row.waiting_on.empty())
        return untrustedLine(row.status) + " · " + untrustedLine(row.waiting_on);
      return untrustedLine(row.status);
    case kLastStep:
      return QVariant::fromValue<qlonglong>(row.last_step);
    case kSamplesPerSecond:
      return formatFigure(row.samples_per_second);
    case kTokensPerSecond:
      return row.tokens_per_second ? formatFigure(*row.tokens_per_second) : QString("–");
    case kMfu:
      return row.mfu ? QString("%1%").arg(*row.mfu * 100, 0, 'f', 1) : QString("–");
    case kStepTime:
      return formatMs(row.mean_step_ms);
    case kWait:
      return formatMs(row.mean_wait_ms.value_or(row.mean_exposed_comm_ms));
    case kPeakMemory:
      return formatBytes(static_cast<double>(row.peak_memory));
    case kEstimatedMemory:
      return row.estimated_memory > 0 ? formatBytes(row.estimated_memory) : QString("–");
    case kStraggler:
      return row.straggler ? QString("straggler") : QString();
    case kMesh:
      return QString::fromStdString(coordinatesText(row.coordinates));
  }
  return {};
}

QVariant RankTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  // The figures' columns by their names in the table of figures (storage/query/figures.h); the
  // wait column shows one of two figures (data()'s tooltip says which).
  switch (section) {
    case kLastStep:
      return figureHeading("last_step");
    case kSamplesPerSecond:
      return figureHeading("samples_per_second");
    case kTokensPerSecond:
      return figureHeading("tokens_per_second");
    case kMfu:
      return figureHeading("mfu");
    case kStepTime:
      return figureHeading("mean_step_ms");
    case kPeakMemory:
      return figureHeading("peak_memory");
    case kEstimatedMemory:
      return figureHeading("estimated_memory");
    default:
      break;
  }
  static const char* names[] = {"Rank", "Host", "Device", "Status", "", "",          "",
                                "",     "",     "Wait",   "",       "", "Straggler", "Mesh"};
  return section >= 0 && section < kColumnCount ? QString(names[section]) : QVariant();
}

}  // namespace ringmaster::ui
