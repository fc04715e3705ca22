// A chart of step-indexed series: each line is drawn with its min / max envelope per bucket (the
// storage queries reduce to one bucket per pixel column, so no spike disappears), zooming with a
// horizontal rubber band asks for the new step range at full resolution, and the chart exports
// to PNG or SVG.
#pragma once

#include <QChartView>
#include <QColor>
#include <QString>
#include <map>
#include <memory>
#include <vector>

namespace ringmaster::ui {

struct ChartLine {
  QString name;
  QColor color;
  QList<QPointF> centre;     // mean (or median) per bucket
  QList<QPointF> low, high;  // the envelope; empty for none
};

class MetricChart : public QChartView {
  Q_OBJECT

 public:
  MetricChart(const QString& title, const QString& value_label, QWidget* parent = nullptr);
  ~MetricChart() override;

  // Shows these lines; series are reused by name, so a live refresh does not rebuild the chart.
  // The x axis follows the data unless the user zoomed in.
  void setLines(const std::vector<ChartLine>& lines);
  // Buckets the data should be reduced to: one per pixel column of the plot area.
  int bucketsWanted() const;
  bool zoomed() const { return zoomed_; }
  // The zoomed step range; meaningless unless zoomed().
  std::pair<int64_t, int64_t> zoomRange() const { return zoom_range_; }
  void resetZoom();
  // Writes the chart as PNG or SVG by the file's extension; false when it cannot be written.
  bool exportTo(const QString& path);
  int lineCount() const;
  qsizetype pointCount() const;

 signals:
  // The user zoomed or reset: the data should be re-queried for this range (or all of it).
  void rangeChanged();

 protected:
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;

 private:
  struct Drawn;
  void fitAxes();

  QString value_label_;
  std::map<QString, std::unique_ptr<Drawn>> drawn_;
  bool zoomed_ = false;
  std::pair<int64_t, int64_t> zoom_range_{0, 0};
  double data_min_x_ = 0, data_max_x_ = 1, data_min_y_ = 0, data_max_y_ = 1;
};

}  // namespace ringmaster::ui
