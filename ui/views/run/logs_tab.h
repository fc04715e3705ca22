// The run view's Logs tab: the run's log lines (the recorder's and each rank's), filtered by rank
// and by text, opened at the first error. It draws a snapshot; it reads nothing.
#pragma once

#include <QWidget>
#include <vector>

#include "data/run_snapshot.h"

class QComboBox;
class QLineEdit;
class QPlainTextEdit;

namespace ringmaster::ui {

class LogsTab : public QWidget {
  Q_OBJECT

 public:
  explicit LogsTab(QWidget* parent = nullptr);

  // Shows the snapshot's lines when they changed.
  void apply(const RunSnapshot& snapshot);
  QString text() const;
  QPlainTextEdit* view() const { return logs_; }

 private:
  void showLines();

  bool applied_ = false;
  std::vector<storage::LogLine> logs_seen_;
  int world_size_ = 0;
  QPlainTextEdit* logs_ = nullptr;
  QComboBox* log_rank_ = nullptr;
  QLineEdit* log_filter_ = nullptr;
};

}  // namespace ringmaster::ui
