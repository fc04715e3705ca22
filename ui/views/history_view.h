// The run history: every run in the database, newest first, filtered by name, strategy, status and
// date, and by the search line (words, tag:, note:, spec fields: query/run_search.h); a run's
// name, tags and note are edited and runs deleted (asked first) here; double-click opens a run,
// selecting several and "Compare" compares them; a running detached run (ringmaster run --detach)
// can be attached to or cancelled. Refreshes itself when the database changes. Every read and write
// (listing, the data_version poll, reconciling interrupted runs) runs off the GUI thread through
// BackgroundJobs. Issue 33: "colour by" a spec
// field gives runs with the same value one colour (a swatch before the name), with a legend.
// Issue 37: a run of a sweep has "Open sweep N" in its row's context menu.
#pragma once

#include <QWidget>
#include <map>
#include <memory>
#include <optional>

#include "data/data_version_watch.h"
#include "query/sweeps.h"

class QComboBox;
class QDateEdit;
class QLabel;
class QLineEdit;
class QHBoxLayout;
class QMenu;
class QPushButton;
class QTableView;
class QTimer;
class QVBoxLayout;

namespace ringmaster::storage {
class Database;
}

namespace ringmaster::ui {

class BackgroundJobs;
class RunListModel;

class HistoryView : public QWidget {
  Q_OBJECT

 public:
  explicit HistoryView(QWidget* parent = nullptr);
  ~HistoryView() override;

  // Shows the runs of this database, once read; marks the runs whose recorder died as interrupted
  // first. A database that cannot be opened is said in the view (errorText()).
  void setDatabase(const std::string& db_path);
  void refresh();
  RunListModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  std::vector<int64_t> selectedRuns() const;
  // The one selected run when it is detached and running or pending (queued in Slurm: issue 35),
  // what Attach and Cancel run act on.
  std::optional<int64_t> selectedDetachedRun() const;
  void setNameFilter(const QString& text);
  void setStatusFilter(const QString& status);  // "" for any
  QString errorText() const;
  // Issue 33: the search line (query/run_search.h), what it could not read, and what the last edit
  // or deletion said.
  void setSearch(const QString& text);
  QString searchProblems() const;
  QString noticeText() const;
  BackgroundJobs* jobs() const { return jobs_; }
  // The spec fields of the listed runs (item data: the path; the first item, data "", colours
  // nothing), and the legend of the groups' colours as plain text.
  QComboBox* colourPicker() const { return colour_by_; }
  QString legendText() const;
  struct SpecGroups;  // what a list read says of the runs' specs (history_view.cpp)
  // Issue 37: the sweep a listed run belongs to (none for a run of no sweep), and the context
  // menu of a row: Open, and "Open sweep N" for a run of a sweep (the caller owns the menu).
  std::optional<storage::SweepMembership> sweepOf(int64_t run_id) const;
  QMenu* rowMenu(int row);

 signals:
  void openRun(qint64 run_id);
  void compareRuns(const std::vector<int64_t>& run_ids);
  // Attach to / cancel a detached run (the window runs `ringmaster attach` / `cancel`).
  void attachRun(qint64 run_id);
  void cancelDetachedRun(qint64 run_id);
  void openSweep(qint64 sweep_id);

 private:
  void addFilters(QVBoxLayout* layout);
  void addRunTable(QVBoxLayout* layout);
  QPushButton* addButtons(QVBoxLayout* layout);
  void connectControls(QPushButton* open);
  void poll();
  void showError(const QString& error);
  // The colour-by picker's fields and the runs' colours from a list's spec groups.
  void applySpecGroups(const SpecGroups& groups);
  // The Edit and Delete buttons and the search line (issue 33).
  void addOrganising(QVBoxLayout* layout, QHBoxLayout* buttons);
  void showNotice(const QString& text);
  // The row's context menu on a right click (rowMenu).
  void addRowMenu();

  std::string db_path_;
  ListWatch watch_;
  BackgroundJobs* jobs_ = nullptr;
  QLabel* error_ = nullptr;
  RunListModel* model_ = nullptr;
  QTableView* table_ = nullptr;
  QLineEdit* name_ = nullptr;
  QComboBox* strategy_ = nullptr;
  QComboBox* status_ = nullptr;
  QDateEdit* since_ = nullptr;
  QComboBox* colour_by_ = nullptr;
  QLabel* legend_ = nullptr;
  QPushButton* compare_ = nullptr;
  QPushButton* attach_ = nullptr;
  QPushButton* cancel_detached_ = nullptr;
  QLineEdit* search_ = nullptr;
  QLabel* search_problems_ = nullptr;
  QLabel* notice_ = nullptr;
  QPushButton* edit_ = nullptr;
  QPushButton* delete_ = nullptr;
  QTimer* timer_ = nullptr;
  std::map<int64_t, storage::SweepMembership> sweep_of_run_;
};

}  // namespace ringmaster::ui
