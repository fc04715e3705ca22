// A stage x time Gantt chart of a pipeline schedule: one row per rank, a bar per F / B / W action's
// compute coloured by micro-batch (forward light, backward dark, weight-gradient hatched), an
// action's wait for its input as a thin grey hatched strip before its bar (waiting for the other
// stage) ending in a solid dark one (the input's transfer), the idle time between actions left
// blank, and each row's bubble fraction (idle and waiting) at its end. Draws a measured step
// (times in microseconds) and a planned one (unit costs) alike. Its data (GanttData) is built in
// data/schedule_gantt.
#pragma once

#include <QWidget>

#include "data/schedule_gantt.h"

namespace ringmaster::ui {

class GanttChart : public QWidget {
  Q_OBJECT

 public:
  explicit GanttChart(QWidget* parent = nullptr);
  void setData(GanttData data);
  const GanttData& data() const { return data_; }
  QSize sizeHint() const override { return {640, 60 + 34 * std::max(data_.rows, 2)}; }
  QSize minimumSizeHint() const override { return {320, 40 + 20 * std::max(data_.rows, 2)}; }

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;

 private:
  QRectF barRect(int row, double start, double end, const QRectF& plot, double t0, double t1) const;
  QRectF waitRect(const GanttWait& wait, const QRectF& plot, double t0, double t1) const;
  GanttData data_;
};

// The colour of a micro-batch's bars (a fixed qualitative palette, cycled).
QColor microBatchColor(int micro_batch, char phase);

}  // namespace ringmaster::ui
