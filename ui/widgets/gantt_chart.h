// A stage x time Gantt chart of a pipeline schedule: one row per rank, a bar per F / B / W action's
// compute coloured by micro-batch (forward light, backward dark, weight-gradient hatched), an
// action's wait for its input as a thin grey hatched strip before its bar (waiting for the other
// stage) ending in a solid dark one (the input's transfer), the idle time between actions left
// blank, and each row's bubble fraction (idle and waiting) at its end. Draws a measured step
// (times in microseconds) and a planned one (unit costs) alike.
#pragma once

#include <QString>
#include <QWidget>
#include <vector>

namespace ringmaster::ui {

struct GanttBar {
  int row = 0;  // rank
  int micro_batch = 0;
  char phase = 'F';
  double start = 0, end = 0;
};

// A wait inside an action: the stage had reached it at `start` and waited for its input from
// another stage until `transfer_start`, then for the input's transfer until `end`.
struct GanttWait {
  int row = 0;
  int micro_batch = 0;
  char phase = 'F';
  double start = 0, transfer_start = 0, end = 0;
};

struct GanttData {
  QString time_unit;      // "ms", "unit"
  double time_scale = 1;  // bar times are divided by this for the axis labels
  int rows = 0;
  QString row_label = "stage";  // "rank" when a rank holds several stages (interleaved)
  std::vector<GanttBar> bars;      // compute
  std::vector<GanttWait> waits;    // measured schedules only; drawn within the bars' time range
  std::vector<double> row_bubble;  // per row, 0..1: idle and waiting
};

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
  QRectF barRect(int row, double start, double end, const QRectF& plot, double t0,
                 double t1) const;
  QRectF waitRect(const GanttWait& wait, const QRectF& plot, double t0, double t1) const;
  GanttData data_;
};

// The colour of a micro-batch's bars (a fixed qualitative palette, cycled).
QColor microBatchColor(int micro_batch, char phase);

}  // namespace ringmaster::ui
