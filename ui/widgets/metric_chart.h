// A chart of step-indexed series: each line is drawn with its min / max envelope per bucket (the
// storage queries reduce to one bucket per pixel column, so no spike disappears). Hovering shows
// the nearest point's step, line, value and wall time; the y axis can be logarithmic; lines can be
// smoothed with TensorBoard's debiased EMA (the raw line kept faint behind); the x axis shows
// steps or, given a StepClock, seconds since the run started. Dragging or the wheel zooms into a
// step range and says so (rangeChanged), so the owner re-queries that range at full resolution and
// can zoom its other charts alike. Exports to PNG or SVG. It draws only: it never reads storage.
#pragma once

#include <QChartView>
#include <QColor>
#include <QString>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "widgets/step_clock.h"

class QGraphicsEllipseItem;
class QGraphicsRectItem;
class QGraphicsSimpleTextItem;

namespace ringmaster::ui {

struct ChartLine {
  QString name;  // the legend's text, and the line's name on hover ("rank 2")
  QColor color;
  QList<QPointF> centre;        // x: step (a bucket's middle), y: the bucket's mean (or median)
  QList<QPointF> low, high;     // the envelope, one per centre point; empty for none
  int64_t steps_per_point = 1;  // the buckets' width in steps
  QString centre_label;         // what the centre is when there is an envelope ("mean", "median")
};

// Where a restarted attempt (launch.max_restarts) began: a dashed line at its first step, and the
// steps of the attempt before that it ran again (rolled back), shaded.
struct AttemptMark {
  int attempt = 0;
  int64_t first_step = 0;
  std::optional<std::pair<int64_t, int64_t>> rolled_back;  // inclusive
  bool operator==(const AttemptMark&) const = default;
};

class MetricChart : public QChartView {
  Q_OBJECT

 public:
  MetricChart(const QString& title, const QString& value_label, QWidget* parent = nullptr);
  ~MetricChart() override;

  // The title as given (the chart's own title may carry a note such as "no data yet").
  QString title() const { return title_; }
  // A note the title always carries after the title as given ("mean of every 10 steps").
  void setTitleNote(const QString& note);
  // The title as shown, notes included.
  QString shownTitle() const;

  // Shows these lines; series are reused by name, so a live refresh does not rebuild the chart.
  // The x axis follows the data unless the user zoomed in.
  void setLines(const std::vector<ChartLine>& lines);
  // What the title says while there is no point ("no data yet" by default; a finished run's
  // owner may say it was not recorded).
  void setEmptyNote(const QString& note);
  // Buckets the data should be reduced to: one per pixel column of the plot area.
  int bucketsWanted() const;

  // Zoom, in steps. zoomTo() is what a drag or the wheel does (it emits rangeChanged);
  // setZoomRange() and clearZoom() follow another chart's zoom without emitting.
  bool zoomed() const { return zoomed_; }
  // The zoomed step range, inclusive; meaningless unless zoomed().
  std::pair<int64_t, int64_t> zoomRange() const { return zoom_range_; }
  void zoomTo(int64_t from, int64_t to);
  void setZoomRange(int64_t from, int64_t to);
  void resetZoom();  // shows every step; emits rangeChanged when it was zoomed
  void clearZoom();

  // A logarithmic y axis. Points at or below zero cannot be drawn on one: they are left out (the
  // title says how many) and an envelope reaching below the axis is cut at its bottom; with no
  // positive value at all the axis stays linear and the title says why.
  void setLogScale(bool on);
  bool logScale() const { return log_wanted_; }
  bool logScaleShown() const { return log_shown_; }

  // TensorBoard's smoothing weight, 0 (off) to 0.99; see smoothEma().
  void setSmoothing(double weight);
  double smoothing() const { return smoothing_; }

  // Steps to seconds since the run started; with it the x axis can show time (setTimeAxis) and
  // hovering shows each point's wall time.
  void setStepClock(StepClock clock);
  void setTimeAxis(bool on);
  bool timeAxis() const { return time_axis_; }

  // The restarts to mark (none: no marks).
  void setAttemptMarks(std::vector<AttemptMark> marks);
  const std::vector<AttemptMark>& attemptMarks() const { return attempt_marks_; }

  // Writes the chart as PNG or SVG by the file's extension; false when it cannot be written.
  bool exportTo(const QString& path);
  int lineCount() const;
  qsizetype pointCount() const;
  // A line's data as given to setLines (x in steps); empty for an unknown name.
  QList<QPointF> linePoints(const QString& name) const;
  std::vector<QString> lineNames() const;
  // A line's centre as drawn: x in the axis's unit, y smoothed, points a log axis cannot show
  // left out.
  QList<QPointF> drawnPoints(const QString& name) const;
  // The x axis's range, in its own unit (steps, or seconds on a time axis).
  std::pair<double, double> xAxisRange() const;
  // What hovering shows now (empty when nothing), and what it shows with the mouse at `pos`
  // (viewport coordinates).
  QString hoverText() const;
  QString hoverAt(QPointF pos);

 signals:
  // The user zoomed or reset: the data should be re-queried for this range (or all of it).
  void rangeChanged();

 protected:
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void leaveEvent(QEvent* event) override;
  void contextMenuEvent(QContextMenuEvent* event) override;
  // The attempt marks, over the series, in scene coordinates.
  void drawForeground(QPainter* painter, const QRectF& rect) override;

 private:
  struct Drawn;
  void redraw(Drawn& drawn);
  void redrawAll();
  void fitAxes();
  void setYAxisLog(bool log);
  int logStep() const;
  double logLow() const;
  double logHigh() const;
  double toX(double step) const;     // a step to the x axis's unit
  double toStep(double x) const;     // and back
  double stepAt(QPointF pos) const;  // the step under a viewport position
  void hideHover();

  QString title_;
  QString title_note_;
  QString value_label_;
  QString empty_note_ = "no data yet";
  std::map<QString, std::unique_ptr<Drawn>> drawn_;
  bool zoomed_ = false;
  std::pair<int64_t, int64_t> zoom_range_{0, 0};
  std::pair<int64_t, int64_t> full_steps_{0, 0};  // the data's steps when last shown whole
  bool log_wanted_ = false, log_shown_ = false;
  double smoothing_ = 0;
  StepClock clock_;
  bool time_axis_ = false;
  double data_min_x_ = 0, data_max_x_ = 1, data_min_y_ = 0, data_max_y_ = 1;
  double press_x_ = 0;         // where the left button went down (viewport x)
  double min_positive_y_ = 0;  // the smallest value above zero, 0 when none
  qsizetype left_out_ = 0;     // points not drawn on the log axis (at or below zero)
  QGraphicsRectItem* hover_box_ = nullptr;
  QGraphicsSimpleTextItem* hover_label_ = nullptr;
  QGraphicsEllipseItem* hover_marker_ = nullptr;
  std::vector<AttemptMark> attempt_marks_;
};

}  // namespace ringmaster::ui
