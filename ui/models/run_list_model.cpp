// RunListModel: the run history table.
#include "models/run_list_model.h"

#include <QColor>
#include <QDateTime>
#include <QStringList>

#include "models/format.h"
#include "models/untrusted_text.h"

namespace ringmaster::ui {

QColor statusColor(const std::string& status) {
  if (status == "running") return QColor(0x1f, 0x77, 0xb4);
  if (status == "completed") return QColor(0x2c, 0xa0, 0x2c);
  if (status == "failed") return QColor(0xd6, 0x27, 0x28);
  if (status == "cancelled" || status == "interrupted") return QColor(0xe3, 0x8a, 0x0c);
  if (status == "pending") return QColor(0x94, 0x67, 0xbd);
  return QColor(0x7f, 0x7f, 0x7f);
}

QString schedulerLine(const storage::SchedulerJob& job) {
  QString kind = untrustedLine(job.kind);
  if (!kind.isEmpty()) kind[0] = kind[0].toUpper();
  QString line = QString("%1 %2").arg(kind, untrustedLine(job.job_id));
  if (!job.state.empty()) line += ": " + untrustedLine(job.state);
  if (!job.reason.empty()) line += QString(" (%1)").arg(untrustedLine(job.reason));
  if (!job.nodes.empty()) line += " on " + untrustedLine(job.nodes);
  return line;
}

void RunListModel::setRuns(std::vector<storage::RunRecord> runs) {
  bool same_runs = runs.size() == rows().size();
  for (size_t i = 0; same_runs && i < runs.size(); ++i) same_runs = runs[i].id == rows()[i].id;
  replaceRows(std::move(runs), same_runs);
}

int RunListModel::rowOfRun(int64_t run_id) const {
  for (size_t i = 0; i < rows().size(); ++i)
    if (rows()[i].id == run_id) return static_cast<int>(i);
  return -1;
}

void RunListModel::setRunColours(std::map<int64_t, QColor> colours) {
  colours_ = std::move(colours);
  if (rowCount() > 0)
    emit dataChanged(index(0, kName), index(rowCount() - 1, kName), {Qt::DecorationRole});
}

std::optional<QColor> RunListModel::runColour(int64_t run_id) const {
  const auto colour = colours_.find(run_id);
  return colour == colours_.end() ? std::nullopt : std::optional<QColor>(colour->second);
}

QVariant RunListModel::data(const QModelIndex& index, int role) const {
  const storage::RunRecord* found = rowAt(index);
  if (!found) return {};
  const storage::RunRecord& run = *found;
  if (role == kRunIdRole) return QVariant::fromValue<qlonglong>(run.id);
  if (role == Qt::ForegroundRole && index.column() == kStatus) return statusColor(run.status);
  if (role == Qt::TextAlignmentRole)
    return index.column() == kId || index.column() == kRanks || index.column() == kDuration
               ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
               : QVariant();
  if (role == Qt::ToolTipRole && run.error) return richTextShowingPlain(untrustedBlock(*run.error));
  if (role == Qt::DecorationRole && index.column() == kName) {
    const auto colour = colours_.find(run.id);
    return colour == colours_.end() ? QVariant() : QVariant(colour->second);
  }
  if (role == Qt::ToolTipRole && run.note) return richTextShowingPlain(untrustedBlock(*run.note));
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kId:
      return QVariant::fromValue<qlonglong>(run.id);
    case kName:
      return untrustedLine(run.name);
    case kStrategy:
      return untrustedLine(run.strategy);
    case kRanks:
      return run.world_size;
    case kStatus: {
      const QString status = run.detached && run.status == "running" ? QString("running (detached)")
                                                                     : untrustedLine(run.status);
      // A run handed to a scheduler: its job there beside the status (issue 35).
      return run.scheduler ? QString("%1 · %2").arg(status, schedulerLine(*run.scheduler)) : status;
    }
    case kCreated:
      return QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(run.created_at * 1000))
          .toString("yyyy-MM-dd hh:mm");
    case kDuration:
      return formatDuration(run.durationSeconds());
    case kTags: {  // issue 33: the tags a person gave the run
      QStringList tags;
      for (const std::string& tag : run.tags) tags << untrustedLine(tag);
      return tags.join(' ');
    }
  }
  return {};
}

QVariant RunListModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"ID",     "Name",    "Strategy", "Ranks",
                                "Status", "Created", "Duration", "Tags"};
  return section >= 0 && section < kColumnCount ? QString(names[section]) : QVariant();
}

}  // namespace ringmaster::ui
