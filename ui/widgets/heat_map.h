// A rank x step heat map of communication wait: one row per rank, one column per step bucket,
// darker where a rank spent longer waiting in exposed communication. A straggler shows as the
// row its peers are not (the others wait for it); a hang as columns that stop.
#pragma once

#include <QWidget>

#include "data/run_snapshot.h"

namespace ringmaster::ui {

class HeatMap : public QWidget {
  Q_OBJECT

 public:
  explicit HeatMap(QWidget* parent = nullptr);
  void setMap(WaitHeatMap map);
  const WaitHeatMap& map() const { return map_; }
  QSize sizeHint() const override { return {480, 160}; }

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;  // tool tips: rank, steps and value under the cursor

 private:
  QRect plotRect() const;
  WaitHeatMap map_;
  double max_value_ = 0;
};

}  // namespace ringmaster::ui
