// The run history as a table model: one row per run (id, name, strategy, ranks, status, created,
// duration), newest first, with the status coloured and the run id under Qt::UserRole.
#pragma once

#include <QColor>
#include <map>
#include <optional>
#include <vector>

#include "models/row_table_model.h"
#include "query/runs.h"

namespace ringmaster::ui {

class RunListModel : public RowTableModel<storage::RunRecord> {
  Q_OBJECT

 public:
  enum Column { kId, kName, kStrategy, kRanks, kStatus, kCreated, kDuration, kTags, kColumnCount };
  static constexpr int kRunIdRole = Qt::UserRole;

  explicit RunListModel(QObject* parent = nullptr) : RowTableModel(kColumnCount, parent) {}

  // Replaces the rows; rows whose run is still there keep their identity (a refresh while the
  // user has a selection does not reset the view).
  void setRuns(std::vector<storage::RunRecord> runs);
  const storage::RunRecord& runAt(int row) const { return rows().at(static_cast<size_t>(row)); }
  int rowOfRun(int64_t run_id) const;
  // Issue 33, colour by a spec field: each run's group colour, drawn as a swatch before its name
  // (Qt::DecorationRole of the name column); runs not in the map have none.
  void setRunColours(std::map<int64_t, QColor> colours);
  std::optional<QColor> runColour(int64_t run_id) const;

  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::map<int64_t, QColor> colours_;
};

// The colour Ringmaster shows a run status in (also used by the run view's header); `pending`
// (queued in a scheduler, issue 35) has its own.
QColor statusColor(const std::string& status);
// A run's scheduler job as a person reads it (issue 35): "Slurm 4242: PENDING (Resources)", the
// nodes after "on" once allocated; its words are the scheduler's, shown as plain text.
QString schedulerLine(const storage::SchedulerJob& job);

}  // namespace ringmaster::ui
