// The flight recorder's panel of the Communication tab: from the ranks' dumps (a collective failed
// or timed out), the furthest collective any rank reached and the ranks that did not, with each
// rank's last completed and in-flight collectives in a table.
#pragma once

#include <QWidget>

#include "data/run_snapshot.h"

class QLabel;
class QTableView;

namespace ringmaster::ui {

class FlightRecorderModel;

class FlightRecorderPanel : public QWidget {
  Q_OBJECT

 public:
  explicit FlightRecorderPanel(QWidget* parent = nullptr);

  void apply(const RunSnapshot& snapshot);
  QString summaryText() const;
  QTableView* table() const { return flight_recorder_; }
  FlightRecorderModel* model() const { return flight_model_; }

 private:
  QLabel* flight_summary_ = nullptr;
  QTableView* flight_recorder_ = nullptr;
  FlightRecorderModel* flight_model_ = nullptr;
};

}  // namespace ringmaster::ui
