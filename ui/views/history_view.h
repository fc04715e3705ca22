// The run history: every run in the database, newest first, filtered by name, strategy, status and
// date; double-click opens a run, selecting several and "Compare" compares them. Refreshes itself
// when the database changes.
#pragma once

#include <QWidget>
#include <memory>

class QComboBox;
class QDateEdit;
class QLineEdit;
class QPushButton;
class QTableView;
class QTimer;

namespace ringmaster::storage {
class Database;
}

namespace ringmaster::ui {

class RunListModel;

class HistoryView : public QWidget {
  Q_OBJECT

 public:
  explicit HistoryView(QWidget* parent = nullptr);
  ~HistoryView() override;

  // Shows the runs of this database (throws kIo when it cannot be opened).
  void setDatabase(const std::string& db_path);
  void refresh();
  RunListModel* model() const { return model_; }
  QTableView* table() const { return table_; }
  std::vector<int64_t> selectedRuns() const;
  void setNameFilter(const QString& text);
  void setStatusFilter(const QString& status);  // "" for any

 signals:
  void openRun(qint64 run_id);
  void compareRuns(const std::vector<int64_t>& run_ids);

 private:
  std::unique_ptr<storage::Database> db_;
  int64_t seen_version_ = -1;
  RunListModel* model_ = nullptr;
  QTableView* table_ = nullptr;
  QLineEdit* name_ = nullptr;
  QComboBox* strategy_ = nullptr;
  QComboBox* status_ = nullptr;
  QDateEdit* since_ = nullptr;
  QPushButton* compare_ = nullptr;
  QTimer* timer_ = nullptr;
};

}  // namespace ringmaster::ui
