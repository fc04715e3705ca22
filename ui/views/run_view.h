// The live run view: for a running or past run, the header (status, progress, throughput and, on
// failure, the root cause), per-rank charts (loss, step time split into compute and exposed
// communication, communication time, allocator and device memory) for chosen ranks or as an
// all-ranks band, the rank table with stragglers flagged, the communication panel (per-op table,
// rank x step wait heat map, flight-recorder dumps), the pipeline schedule and the logs.
//
// It polls the database's data_version at 25 Hz and, when something was committed, reloads a
// RunSnapshot; both on worker threads (BackgroundJobs): telemetry reaches the charts coalesced,
// never one redraw per event, and no read ever runs on the GUI thread.
//
// Cancelling is asked for (cancelRequested) and left to whoever launched the run; exporting the
// charts asks where and in which formats.
#pragma once

#include <QWidget>
#include <memory>
#include <optional>

#include "data/run_snapshot.h"
#include "widgets/metric_chart.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QDialog;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QTabWidget;
class QTableView;
class QTimer;

namespace ringmaster::storage {
class Database;
}

namespace ringmaster::ui {

class BackgroundJobs;
class CommOpsModel;
class FlightRecorderModel;
class HeatMap;
class MetricChart;
class PipelineView;
class RankTableModel;

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
  enum class RankMode { kEach, kBand, kOne };
  void showRanks(RankMode mode, int rank = 0);

  MetricChart* chart(const QString& title) const;
  std::vector<MetricChart*> charts() const { return charts_; }
  RankTableModel* rankModel() const { return rank_model_; }
  QTableView* rankTable() const { return rank_table_; }
  CommOpsModel* commModel() const { return comm_model_; }
  HeatMap* heatMap() const { return heat_map_; }
  PipelineView* pipelineView() const { return pipeline_; }
  QTabWidget* tabs() const { return tabs_; }
  QString statusText() const;
  QString rootCauseText() const;
  // The live hang view's banner ("rank 2 has not reached all_reduce #28 ..."); empty when hidden.
  QString hangText() const;
  QString logText() const;
  QString flightRecorderText() const;
  QString progressText() const;
  // The summary figures under the title (loss, validation loss, throughput, ...).
  QString figuresText() const;
  QPlainTextEdit* logView() const { return logs_; }
  QTableView* flightRecorderTable() const { return flight_recorder_; }
  FlightRecorderModel* flightRecorderModel() const { return flight_model_; }

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
  void applyHeader(const RunSnapshot& snapshot);
  void applyCharts(const RunSnapshot& snapshot);
  void updateChart(size_t index, std::vector<ChartLine> lines);
  void applyFlightRecorder(const RunSnapshot& snapshot);
  void applyLogs();
  void updateCancelButton();
  SnapshotRequest request() const;
  QWidget* buildChartsTab();
  QWidget* buildCommTab();
  QWidget* buildLogsTab();

  // The data_version watch: opened by the first poll job, used by one poll job at a time.
  struct WatchConnection {
    std::string path;
    std::unique_ptr<storage::Database> db;
  };

  std::string db_path_;
  int64_t run_id_;
  std::shared_ptr<WatchConnection> watch_;
  BackgroundJobs* jobs_ = nullptr;
  int64_t seen_version_ = -1;
  bool dirty_ = true;
  bool charts_stale_ = false;  // a snapshot arrived while the charts' tab was hidden
  std::optional<RunSnapshot> snapshot_;
  QTimer* poll_timer_ = nullptr;
  RankMode rank_mode_ = RankMode::kEach;
  int one_rank_ = 0;
  QString last_status_;
  bool cancellable_ = false;
  QString export_dir_;  // the folder of the last export

  QLabel* title_ = nullptr;
  QLabel* status_ = nullptr;
  QLabel* figures_ = nullptr;
  QLabel* root_cause_ = nullptr;
  QLabel* hang_ = nullptr;  // the live hang view's diagnosis, while the run is running
  QProgressBar* progress_ = nullptr;
  QLabel* progress_text_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QLabel* export_note_ = nullptr;
  QComboBox* rank_choice_ = nullptr;
  QDoubleSpinBox* smoothing_ = nullptr;  // every chart's smoothing weight
  QCheckBox* time_axis_ = nullptr;       // every chart's x axis in wall time
  QTabWidget* tabs_ = nullptr;
  std::vector<MetricChart*> charts_;
  std::vector<std::vector<std::string>> chart_metrics_;
  std::vector<double> chart_scales_;
  RankTableModel* rank_model_ = nullptr;
  QTableView* rank_table_ = nullptr;
  CommOpsModel* comm_model_ = nullptr;
  HeatMap* heat_map_ = nullptr;
  QTableView* flight_recorder_ = nullptr;
  FlightRecorderModel* flight_model_ = nullptr;
  QLabel* flight_summary_ = nullptr;
  PipelineView* pipeline_ = nullptr;
  QPlainTextEdit* logs_ = nullptr;
  QComboBox* log_rank_ = nullptr;
  QLineEdit* log_filter_ = nullptr;
};

}  // namespace ringmaster::ui
