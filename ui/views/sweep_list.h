// The sweeps of the database (issue 37), newest first: each one's name, status, members ended and
// swept fields; double-clicking one opens its sweep view. Refreshes when the database changes; a
// sweep whose driver died is marked interrupted when the list is first read (storage's
// reconcileInterruptedSweeps). Every read runs off the GUI thread through BackgroundJobs.
#pragma once

#include <QWidget>
#include <memory>
#include <string>

#include "data/data_version_watch.h"

class QLabel;
class QTableView;
class QTimer;

namespace ringmaster::storage {
class Database;
}

namespace ringmaster::ui {

class BackgroundJobs;
class SweepListModel;

class SweepListView : public QWidget {
  Q_OBJECT

 public:
  explicit SweepListView(QWidget* parent = nullptr);
  ~SweepListView() override;

  // Shows the sweeps of this database once read; one that cannot be read is said (errorText()).
  void setDatabase(const std::string& db_path);
  void refresh();
  SweepListModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  QString errorText() const;
  BackgroundJobs* jobs() const { return jobs_; }

 signals:
  void openSweep(qint64 sweep_id);

 private:
  void poll();
  void showError(const QString& error);

  std::string db_path_;
  ListWatch watch_;
  BackgroundJobs* jobs_ = nullptr;
  QLabel* error_ = nullptr;
  SweepListModel* model_ = nullptr;
  QTableView* table_ = nullptr;
  QTimer* timer_ = nullptr;
};

}  // namespace ringmaster::ui
