// The live run view: a run's header (RunHeader: status, progress, figures, the root cause of a
// failure, a hang's diagnosis) over its tabs, one class each under views/run/: Charts (the chart
// table's charts for chosen ranks or as an all-ranks band), Ranks (stragglers flagged),
// Communication (per-op table, rank x step wait heat map, flight-recorder dumps), Pipeline (the
// schedule, for a pipeline run) and Logs. A control beside the tabs groups and orders the ranks by
// their mesh coordinates (data/rank_groups.h) in the rank table, the band charts and the heat map.
//
// It polls the database's data_version at 25 Hz and, when something was committed, reloads a
// RunSnapshot; both on worker threads (BackgroundJobs): telemetry reaches the charts coalesced,
// never one redraw per event, and no read ever runs on the GUI thread. Each tab only draws the
// snapshot it is given.
//
// Cancelling is asked for (cancelRequested) and left to whoever launched the run; exporting the
// charts asks where and in which formats.
#pragma once

#include <QWidget>
#include <memory>
#include <optional>

#include "data/data_version_watch.h"
#include "data/rank_groups.h"
#include "data/run_snapshot.h"
#include "views/run/charts_tab.h"

class QComboBox;
class QDialog;
class QPlainTextEdit;
class QTabWidget;
class QTableView;
class QTimer;

namespace ringmaster::storage {
class Database;
}

namespace ringmaster::ui {

class BackgroundJobs;
class CommOpsModel;
class CommTab;
class FlightRecorderModel;
class HeatMap;
class LogsTab;
class MetricChart;
class PipelineView;
class RankTableModel;
class RanksTab;
class RunHeader;

class RunView : public QWidget {
  Q_OBJECT

 public:
  // A database that cannot be read is said in the root-cause banner once the first read failed.
  RunView(std::string db_path, int64_t run_id, QWidget* parent = nullptr);
  ~RunView() override;

  int64_t runId() const { return run_id_; }
  // The snapshot on screen; nullptr before the first load finished.
  const RunSnapshot* snapshot() const { return snapshot_ ? &*snapshot_ : nullptr; }

  // Which ranks the charts show: every rank, one rank, or the min / median / max band.
  using RankMode = ChartsTab::RankMode;
  void showRanks(RankMode mode, int rank = 0);

  // Groups and orders the ranks by a mesh coordinate in the rank table, the band charts and the
  // heat map (the control beside the tabs, "rankGrouping"); rank order by default.
  void setRankGrouping(RankGrouping grouping);
  RankGrouping rankGrouping() const { return grouping_; }

  MetricChart* chart(const QString& title) const;
  std::vector<MetricChart*> charts() const;
  ChartsTab* chartsTab() const { return charts_; }
  RankTableModel* rankModel() const;
  QTableView* rankTable() const;
  CommOpsModel* commModel() const;
  HeatMap* heatMap() const;
  PipelineView* pipelineView() const { return pipeline_; }
  QTabWidget* tabs() const { return tabs_; }
  QString statusText() const;
  // A run handed to a scheduler: its job there ("Slurm 4242: PENDING (Resources)"); else empty.
  QString schedulerText() const;
  QString rootCauseText() const;
  // The live hang view's banner ("rank 2 has not reached all_reduce #28 ..."); empty when hidden.
  QString hangText() const;
  QString logText() const;
  QString flightRecorderText() const;
  QString progressText() const;
  // The summary figures under the title (loss, validation loss, throughput, ...).
  QString figuresText() const;
  QPlainTextEdit* logView() const;
  QTableView* flightRecorderTable() const;
  FlightRecorderModel* flightRecorderModel() const;

  // Whether the header offers "Cancel run…" while the run is running (its launcher can cancel).
  void setCancellable(bool cancellable);
  bool cancellable() const { return cancellable_; }

  // Writes every chart as NAME.EXT for each format ("png", "svg") into `directory` (made when
  // missing); the files written.
  QStringList exportCharts(const QString& directory, const QStringList& formats = {"png", "svg"});
  // The dialog "Export charts…" opens (format and folder); exporting is its accept button.
  QDialog* openExportDialog();
  // Starts a reload now (tests, and after the user changed what is shown).
  void reload();
  BackgroundJobs* jobs() const { return jobs_; }

 signals:
  // A snapshot reached the screen.
  void refreshed();
  // The run's status changed (to "completed", "failed", ...).
  void statusChanged(const QString& status);
  // The user asked to cancel the run (the launcher asks for confirmation).
  void cancelRequested(qint64 run_id);
  // Charts were exported by the dialog: the files written, or the reason none were.
  void chartsExported(const QStringList& files, const QString& error);

 private:
  void poll();
  void startLoad();
  void apply(RunSnapshot snapshot);
  void updateCancelButton();
  void openOnFailure();
  void applyGrouping();
  SnapshotRequest request() const;

  std::string db_path_;
  int64_t run_id_;
  DataVersionWatch watch_;
  BackgroundJobs* jobs_ = nullptr;
  bool dirty_ = true;
  bool charts_stale_ = false;  // a snapshot arrived while the charts' tab was hidden
  std::optional<RunSnapshot> snapshot_;
  QTimer* poll_timer_ = nullptr;
  QString last_status_;
  bool cancellable_ = false;
  RankGrouping grouping_ = RankGrouping::kRankOrder;
  QComboBox* grouping_choice_ = nullptr;

  RunHeader* header_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  ChartsTab* charts_ = nullptr;
  RanksTab* ranks_ = nullptr;
  CommTab* comm_ = nullptr;
  PipelineView* pipeline_ = nullptr;
  LogsTab* logs_ = nullptr;
};

}  // namespace ringmaster::ui
