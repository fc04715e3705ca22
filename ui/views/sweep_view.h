// One sweep (issue 37): its members in a table (each swept field's value, the member's state, run
// and run status, the run figures and any error; sortable), the best run by a chosen figure ("Rank
// by") highlighted in it, with its spec differences from the others' beside it, a
// parallel-coordinates chart of the swept fields and that figure, and a scatter of any figure
// against any axis (the compare view's ScatterChart and pickers). Double-clicking a member with a
// run opens the run. Read through BackgroundJobs (data/sweep_data.h: storage's sweepReport); while
// the sweep runs it polls data_version and reloads what changed, as the run view does a live run.
#pragma once

#include <QWidget>
#include <memory>
#include <optional>
#include <string>

#include "data/data_version_watch.h"
#include "data/sweep_data.h"

class QComboBox;
class QLabel;
class QTableView;
class QTimer;

namespace ringmaster::storage {
class Database;
}

namespace ringmaster::ui {

class BackgroundJobs;
class ParallelCoordinatesChart;
class ScatterChart;
class SweepDifferencesModel;
class SweepMembersModel;

class SweepView : public QWidget {
  Q_OBJECT

 public:
  // An unknown sweep or an unreadable database is said in the view (errorText()) once read.
  SweepView(std::string db_path, int64_t sweep_id, QWidget* parent = nullptr);
  ~SweepView() override;

  int64_t sweepId() const { return sweep_id_; }
  // The sweep on screen; nullptr before the first read.
  const SweepData* sweep() const { return data_ ? &*data_ : nullptr; }
  QTableView* table() const { return table_; }
  SweepMembersModel* model() const { return model_; }
  // Every run figure (item data: its id); picking one re-reads the best run by it.
  QComboBox* rankByPicker() const { return rank_by_; }
  void setRankBy(const QString& figure_id);
  QString headerText() const;
  QString bestText() const;
  SweepDifferencesModel* differencesModel() const { return differences_model_; }
  ParallelCoordinatesChart* parallelChart() const { return parallel_; }
  // The scatter and its pickers (item data: a swept field's path or a figure's id).
  ScatterChart* scatter() const { return scatter_; }
  QComboBox* xPicker() const { return x_picker_; }
  QComboBox* yPicker() const { return y_picker_; }
  QString errorText() const;
  BackgroundJobs* jobs() const { return jobs_; }
  // Whether it still watches the database: until the sweep and its members' runs have ended.
  bool watching() const;

 signals:
  void openRun(qint64 run_id);
  // The sweep's status, as read ("running", "completed", ...).
  void statusChanged(const QString& status);

 private:
  void poll();
  void reload();
  void startLoad();
  void apply(SweepData data);
  QWidget* makeBestBox();
  QWidget* makeChartsBox();
  // The scatter's pickers: the swept fields, then the figures; what was picked is kept.
  void fillPickers();
  // The parallel coordinates (the fields and the ranking figure) and the scatter, coloured by it.
  void redrawCharts();

  std::string db_path_;
  int64_t sweep_id_ = 0;
  DataVersionWatch watch_;
  BackgroundJobs* jobs_ = nullptr;
  bool dirty_ = true;
  bool reconciled_ = false;  // the first read marks a sweep whose driver died
  std::optional<SweepData> data_;
  QLabel* header_ = nullptr;
  QLabel* error_ = nullptr;
  QComboBox* rank_by_ = nullptr;
  QTableView* table_ = nullptr;
  SweepMembersModel* model_ = nullptr;
  QLabel* best_ = nullptr;
  SweepDifferencesModel* differences_model_ = nullptr;
  ParallelCoordinatesChart* parallel_ = nullptr;
  ScatterChart* scatter_ = nullptr;
  QComboBox* x_picker_ = nullptr;
  QComboBox* y_picker_ = nullptr;
  QTimer* poll_timer_ = nullptr;
};

}  // namespace ringmaster::ui
