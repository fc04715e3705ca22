// MetricChart: Qt Charts line + area series over a value axis of steps (or seconds) and a linear or
// logarithmic value axis; the hover label is a graphics item in the chart's scene.
#include "widgets/metric_chart.h"

#include <QAreaSeries>
#include <QChart>
#include <QContextMenuEvent>
#include <QGraphicsEllipseItem>
#include <QGraphicsRectItem>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QMenu>
#include <QMouseEvent>
#include <QPainter>
#include <QSvgGenerator>
#include <QValueAxis>
#include <QWheelEvent>
#include <cmath>
#include <limits>

#include "models/format.h"
#include "widgets/smoothing.h"

namespace ringmaster::ui {

struct MetricChart::Drawn {
  ChartLine line;                 // as given, x in steps
  QLineSeries* centre = nullptr;  // in the legend; the smoothed line while smoothing
  QLineSeries* raw = nullptr;     // the unsmoothed line, faint behind, while smoothing
  QLineSeries* low = nullptr;     // the envelope's edges
  QLineSeries* high = nullptr;
  QAreaSeries* envelope = nullptr;
  std::vector<double> smoothed;  // per line.centre point
  std::vector<qsizetype> shown;  // index into line.centre of each point of `centre`
};

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A round tick interval giving about `ticks` ticks over `span`, no finer than `finest`.
double niceInterval(double span, int ticks, double finest) {
  const double raw = std::max(span / ticks, finest);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double step : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= step * magnitude) return step * magnitude;
  return 10 * magnitude;
}

QString number(double v) {
  if (v == 0 || !std::isfinite(v)) return QString::number(v);
  const double a = std::abs(v);
  if (a >= 1e6 || a < 1e-3) return QString::number(v, 'g', 4);
  return formatFigure(v);
}

void replaceIfChanged(QLineSeries* series, const QList<QPointF>& points) {
  // Replacing a series re-lays the chart out: skip what did not change (a live run's refresh
  // mostly appends to a few lines, a finished run's changes nothing).
  if (series->points() != points) series->replace(points);
}

}  // namespace

MetricChart::MetricChart(const QString& title, const QString& value_label, QWidget* parent)
    // Given its chart at construction: setChart() would release (not delete) a default one.
    : QChartView(new QChart(), parent), title_(title), value_label_(value_label) {
  QChart* chart = this->chart();
  chart->setTitle(title);
  chart->setMargins(QMargins(4, 4, 4, 4));
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->legend()->setFont(QFont(font().family(), 8));
  auto* x = new QValueAxis();
  x->setTitleText("step");
  x->setLabelFormat("%d");
  auto* y = new QValueAxis();
  y->setTitleText(value_label);
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  chart->setAnimationOptions(QChart::NoAnimation);
  setRenderHint(QPainter::Antialiasing);
  setRubberBand(QChartView::HorizontalRubberBand);
  setMinimumSize(320, 220);
  setMouseTracking(true);
  viewport()->setMouseTracking(true);

  hover_marker_ = new QGraphicsEllipseItem(-4, -4, 8, 8);
  hover_marker_->setPen(QPen(Qt::black, 1));
  hover_marker_->setZValue(100);
  hover_box_ = new QGraphicsRectItem();
  hover_box_->setBrush(QColor(255, 255, 255, 235));
  hover_box_->setPen(QPen(QColor(0x99, 0x99, 0x99)));
  hover_box_->setZValue(101);
  hover_label_ = new QGraphicsSimpleTextItem(hover_box_);
  hover_label_->setFont(QFont(font().family(), 8));
  scene()->addItem(hover_marker_);
  scene()->addItem(hover_box_);
  hideHover();
}

MetricChart::~MetricChart() = default;

int MetricChart::bucketsWanted() const {
  const int width = static_cast<int>(chart()->plotArea().width());
  return std::clamp(width > 0 ? width : this->width() - 80, 50, 4000);
}

// ---- Lines ----------------------------------------------------------------------------------

void MetricChart::setLines(const std::vector<ChartLine>& lines) {
  QChart* chart = this->chart();
  QAbstractAxis* x = chart->axes(Qt::Horizontal).first();
  QAbstractAxis* y = chart->axes(Qt::Vertical).first();
  std::map<QString, bool> wanted;
  qsizetype points = 0;
  // The envelope goes in before its line, so the line is drawn over it; a line that had none
  // gets one when its buckets grow wider than a step (a live run's, as it gets longer).
  auto addEnvelope = [&](Drawn& drawn, const QColor& colour) {
    drawn.low = new QLineSeries(this);
    drawn.high = new QLineSeries(this);
    drawn.envelope = new QAreaSeries(drawn.high, drawn.low);
    QColor fill = colour;
    fill.setAlpha(50);
    drawn.envelope->setBrush(fill);
    drawn.envelope->setPen(Qt::NoPen);
    chart->addSeries(drawn.envelope);
    drawn.envelope->attachAxis(x);
    drawn.envelope->attachAxis(y);
    for (QLegendMarker* marker : chart->legend()->markers(drawn.envelope))
      marker->setVisible(false);
  };
  for (const ChartLine& line : lines) {
    wanted[line.name] = true;
    std::unique_ptr<Drawn>& drawn = drawn_[line.name];
    if (!drawn) {
      drawn = std::make_unique<Drawn>();
      if (!line.low.isEmpty()) addEnvelope(*drawn, line.color);
      drawn->raw = new QLineSeries();
      QColor faint = line.color;
      faint.setAlpha(70);
      drawn->raw->setPen(QPen(faint, 1));
      chart->addSeries(drawn->raw);
      drawn->raw->attachAxis(x);
      drawn->raw->attachAxis(y);
      for (QLegendMarker* marker : chart->legend()->markers(drawn->raw)) marker->setVisible(false);
      drawn->centre = new QLineSeries();
      drawn->centre->setName(line.name);
      drawn->centre->setPen(QPen(line.color, 1.5));
      chart->addSeries(drawn->centre);
      drawn->centre->attachAxis(x);
      drawn->centre->attachAxis(y);
    } else if (drawn->line.centre == line.centre && drawn->line.low == line.low &&
               drawn->line.high == line.high) {
      points += line.centre.size() + line.low.size() + line.high.size();
      continue;  // nothing to redraw
    } else if (!drawn->envelope && !line.low.isEmpty()) {
      addEnvelope(*drawn, line.color);
    }
    drawn->line = line;
    redraw(*drawn);
    points += line.centre.size() + line.low.size() + line.high.size();
  }
  for (auto it = drawn_.begin(); it != drawn_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    for (QLineSeries* series : {it->second->centre, it->second->raw}) {
      chart->removeSeries(series);
      delete series;
    }
    if (it->second->envelope) {
      chart->removeSeries(it->second->envelope);
      delete it->second->envelope;
      delete it->second->low;
      delete it->second->high;
    }
    it = drawn_.erase(it);
  }
  if (!zoomed_) {
    // Remember the whole range, for the wheel's zooming out.
    double first = kInf, last = -kInf;
    for (const auto& [name, drawn] : drawn_)
      if (!drawn->line.centre.isEmpty()) {
        first = std::min(first, drawn->line.centre.front().x());
        last = std::max(last, drawn->line.centre.back().x());
      }
    if (first <= last)
      full_steps_ = {static_cast<int64_t>(std::floor(first)),
                     static_cast<int64_t>(std::ceil(last))};
  }
  // Antialiasing thousands of segments costs more than it shows at one point per pixel, and so
  // do wide pens: many lines are drawn one pixel wide (a cosmetic pen, the raster engine's fast
  // path).
  setRenderHint(QPainter::Antialiasing, points < 1500);
  const double width = points < 20000 ? 1.5 : 0.0;
  for (const auto& [name, drawn] : drawn_) {
    if (drawn->centre->pen().widthF() == width) continue;
    QPen pen = drawn->centre->pen();
    pen.setWidthF(width);
    drawn->centre->setPen(pen);
  }
  fitAxes();
}

void MetricChart::redraw(Drawn& d) {
  const ChartLine& line = d.line;
  std::vector<double> values(static_cast<size_t>(line.centre.size()));
  for (qsizetype i = 0; i < line.centre.size(); ++i)
    values[static_cast<size_t>(i)] = line.centre[i].y();
  d.smoothed = smoothEma(values, smoothing_);
  // On a log axis only positive values can be drawn; the envelope's low edge is cut at a floor
  // below every positive value (fitAxes puts the axis there).
  const bool log = log_shown_;
  const double floor = min_positive_y_ > 0 ? min_positive_y_ / 10 : 1e-300;
  QList<QPointF> centre, raw, low, high;
  d.shown.clear();
  for (qsizetype i = 0; i < line.centre.size(); ++i) {
    const double x = toX(line.centre[i].x());
    const double value = d.smoothed[static_cast<size_t>(i)];
    const double original = line.centre[i].y();
    if (std::isfinite(value) && (!log || value > 0)) {
      centre.append({x, value});
      d.shown.push_back(i);
    }
    if (smoothing_ > 0 && std::isfinite(original) && (!log || original > 0))
      raw.append({x, original});
    if (d.low && i < line.low.size() && i < line.high.size()) {
      const double lo = line.low[i].y(), hi = line.high[i].y();
      if (!std::isfinite(lo) || !std::isfinite(hi) || (log && hi <= 0)) continue;
      low.append({x, log ? std::max(lo, floor) : lo});
      high.append({x, hi});
    }
  }
  replaceIfChanged(d.centre, centre);
  replaceIfChanged(d.raw, raw);
  if (d.raw->isVisible() != (smoothing_ > 0)) {
    d.raw->setVisible(smoothing_ > 0);
    // A series shown again shows its legend marker again: the raw line has none.
    for (QLegendMarker* marker : chart()->legend()->markers(d.raw)) marker->setVisible(false);
  }
  if (d.low) {
    replaceIfChanged(d.low, low);
    replaceIfChanged(d.high, high);
  }
}

void MetricChart::redrawAll() {
  for (auto& [name, drawn] : drawn_) redraw(*drawn);
  fitAxes();
}

// ---- Axes -----------------------------------------------------------------------------------

double MetricChart::toX(double step) const {
  return time_axis_ && !clock_.empty() ? clock_.seconds(step) : step;
}

double MetricChart::toStep(double x) const {
  return time_axis_ && !clock_.empty() ? clock_.step(x) : x;
}

// The log axis spans whole decades around the positive values, labelled every `logStep()`
// decades: Qt elides every label of a log axis whose labels do not fit the plot's height, so a
// wide range is labelled at 1e-4, 1e-2, 1, ... rather than not at all.
int MetricChart::logStep() const {
  const double low = std::floor(std::log10(min_positive_y_ > 0 ? min_positive_y_ : 1.0));
  const double high = std::ceil(std::log10(std::max(data_max_y_, std::pow(10.0, low))));
  const int labels = std::max(2, static_cast<int>(chart()->plotArea().height() / 24));
  return std::max(1, static_cast<int>(std::ceil((high - low) / (labels - 1))));
}

double MetricChart::logLow() const {
  const int step = logStep();
  const double decade = std::floor(std::log10(min_positive_y_ > 0 ? min_positive_y_ : 1.0));
  return std::pow(10.0, std::floor(decade / step) * step);
}

double MetricChart::logHigh() const {
  const int step = logStep();
  const double decade = std::ceil(std::log10(std::max(data_max_y_, logLow())));
  const double high = std::pow(10.0, std::ceil(decade / step) * step);
  return high > logLow() ? high : logLow() * std::pow(10.0, step);
}

void MetricChart::setYAxisLog(bool log) {
  QAbstractAxis* old = chart()->axes(Qt::Vertical).first();
  if ((old->type() == QAbstractAxis::AxisTypeLogValue) == log) return;
  QAbstractAxis* axis = nullptr;
  if (log) {
    auto* y = new QLogValueAxis();
    y->setBase(std::pow(10.0, logStep()));
    y->setLabelFormat("%.3g");
    y->setMinorTickCount(0);
    // Its range before it joins the chart: the chart sizes the labels' column when it does.
    y->setRange(logLow(), logHigh());
    axis = y;
  } else {
    axis = new QValueAxis();
  }
  axis->setTitleText(log ? value_label_ + " (log)" : value_label_);
  chart()->removeAxis(old);
  delete old;
  chart()->addAxis(axis, Qt::AlignLeft);
  for (QAbstractSeries* series : chart()->series()) series->attachAxis(axis);
}

void MetricChart::setTitleNote(const QString& note) {
  if (note == title_note_) return;
  title_note_ = note;
  fitAxes();
}

QString MetricChart::shownTitle() const {
  return chart()->title();
}

void MetricChart::fitAxes() {
  // The extent of what is drawn, and on the log axis what could not be.
  data_min_x_ = data_min_y_ = kInf;
  data_max_x_ = data_max_y_ = -kInf;
  left_out_ = 0;
  double min_positive = kInf;
  for (const auto& [name, drawn] : drawn_) {
    const ChartLine& line = drawn->line;
    for (qsizetype i = 0; i < line.centre.size(); ++i) {
      const double x = line.centre[i].x();
      for (double y : {drawn->smoothed[static_cast<size_t>(i)], line.centre[i].y(),
                       i < line.low.size() ? line.low[i].y() : kInf,
                       i < line.high.size() ? line.high[i].y() : kInf}) {
        if (!std::isfinite(y)) continue;
        data_min_x_ = std::min(data_min_x_, x);
        data_max_x_ = std::max(data_max_x_, x);
        data_min_y_ = std::min(data_min_y_, y);
        data_max_y_ = std::max(data_max_y_, y);
        if (y > 0) min_positive = std::min(min_positive, y);
      }
      const double v = drawn->smoothed[static_cast<size_t>(i)];
      if (std::isfinite(v) && v <= 0) ++left_out_;
    }
  }
  const double floor_before = min_positive_y_;
  min_positive_y_ = std::isfinite(min_positive) ? min_positive : 0;
  // The log axis needs a positive value; the lines are redrawn when that changes, or when the
  // floor its envelopes are cut at moved.
  const bool log = log_wanted_ && min_positive_y_ > 0;
  if (log != log_shown_ || (log && floor_before != min_positive_y_)) {
    // The log axis is attached only once its series hold positive values alone.
    const bool swap = log != log_shown_;
    log_shown_ = log;
    if (swap && !log) setYAxisLog(false);
    for (auto& [name, drawn] : drawn_) redraw(*drawn);
    if (swap && log) setYAxisLog(true);
  }

  auto* x = static_cast<QValueAxis*>(chart()->axes(Qt::Horizontal).first());
  QAbstractAxis* y = chart()->axes(Qt::Vertical).first();
  const bool time = time_axis_ && !clock_.empty();
  x->setTitleText(time         ? "seconds since the run started"
                  : time_axis_ ? "step (no wall time)"
                               : "step");
  if (!std::isfinite(data_min_x_)) {
    chart()->setTitle(title_ + title_note_ + " — " + empty_note_);
    x->setTickType(QValueAxis::TicksFixed);
    x->setRange(0, 10);
    if (!log_shown_) static_cast<QValueAxis*>(y)->setRange(0, 1);
    return;
  }
  QString note;
  if (log_wanted_ && !log_shown_)
    note = " — no positive value for a log scale";
  else if (log_shown_ && left_out_ > 0)
    note = QString(" — %1 point%2 ≤ 0 not on the log scale")
               .arg(left_out_)
               .arg(left_out_ == 1 ? "" : "s");
  chart()->setTitle(title_ + title_note_ + note);

  double from = toX(data_min_x_), to = toX(data_max_x_);
  if (zoomed_) {
    from = toX(static_cast<double>(zoom_range_.first));
    to = toX(static_cast<double>(zoom_range_.second));
  }
  if (to <= from) to = from + 1.0;
  // Fixed ticks while the range moves: a dynamic axis would first lay out the new range at the
  // old interval (a step axis of 2,000 at a time axis's 0.05 s is 40,000 tick items).
  x->setTickType(QValueAxis::TicksFixed);
  x->setRange(from, to);
  x->setLabelFormat(time ? (to - from < 1 ? "%.3f" : to - from < 10 ? "%.1f" : "%.0f") : "%d");
  x->setTickAnchor(0);
  x->setTickInterval(niceInterval(to - from, 5, time ? 1e-3 : 1.0));
  x->setTickType(QValueAxis::TicksDynamic);

  if (log_shown_) {
    auto* ly = static_cast<QLogValueAxis*>(y);
    ly->setBase(std::pow(10.0, logStep()));
    ly->setRange(logLow(), logHigh());
    return;
  }
  auto* ly = static_cast<QValueAxis*>(y);
  double pad = (data_max_y_ - data_min_y_) * 0.05;
  if (pad <= 0) pad = std::max(std::abs(data_max_y_) * 0.05, 1e-9);
  // Quantities that cannot be negative keep their axis at zero.
  const double low = data_min_y_ >= 0 ? std::max(0.0, data_min_y_ - pad) : data_min_y_ - pad;
  ly->setRange(low, data_max_y_ + pad);
  ly->applyNiceNumbers();
  if (data_min_y_ >= 0 && ly->min() < 0) ly->setMin(0);
  if (!attempt_marks_.empty()) viewport()->update();  // the marks follow the axes
}

void MetricChart::setEmptyNote(const QString& note) {
  if (note == empty_note_) return;
  empty_note_ = note;
  fitAxes();
}

void MetricChart::setLogScale(bool on) {
  if (on == log_wanted_) return;
  log_wanted_ = on;
  hideHover();
  fitAxes();
}

void MetricChart::setSmoothing(double weight) {
  weight = std::clamp(weight, 0.0, 0.99);
  if (weight == smoothing_) return;
  smoothing_ = weight;
  hideHover();
  redrawAll();
}

void MetricChart::setStepClock(StepClock clock) {
  clock_ = std::move(clock);
  if (time_axis_) {
    hideHover();
    redrawAll();
  }
}

void MetricChart::setTimeAxis(bool on) {
  if (on == time_axis_) return;
  time_axis_ = on;
  hideHover();
  redrawAll();
}

std::pair<double, double> MetricChart::xAxisRange() const {
  auto* x = static_cast<QValueAxis*>(chart()->axes(Qt::Horizontal).first());
  return {x->min(), x->max()};
}

// ---- Zoom -----------------------------------------------------------------------------------

void MetricChart::setZoomRange(int64_t from, int64_t to) {
  from = std::max<int64_t>(from, 0);
  to = std::max(to, from + 1);
  zoomed_ = true;
  zoom_range_ = {from, to};
  hideHover();
  fitAxes();
}

void MetricChart::zoomTo(int64_t from, int64_t to) {
  setZoomRange(from, to);
  emit rangeChanged();
}

void MetricChart::clearZoom() {
  if (!zoomed_) return;
  zoomed_ = false;
  chart()->zoomReset();
  hideHover();
  fitAxes();
}

void MetricChart::resetZoom() {
  if (!zoomed_) return;
  clearZoom();
  emit rangeChanged();
}

double MetricChart::stepAt(QPointF pos) const {
  const QPointF at = chart()->mapFromScene(mapToScene(pos.toPoint()));
  const QRectF plot = chart()->plotArea();
  const auto [from, to] = xAxisRange();
  const double x = from + (at.x() - plot.left()) / std::max(plot.width(), 1.0) * (to - from);
  return toStep(x);
}

void MetricChart::mousePressEvent(QMouseEvent* event) {
  hideHover();
  press_x_ = event->position().x();
  QChartView::mousePressEvent(event);
}

void MetricChart::mouseReleaseEvent(QMouseEvent* event) {
  // A right click opens the menu (Qt Charts would zoom out behind our back).
  if (event->button() != Qt::LeftButton) return;
  const auto before = xAxisRange();
  QChartView::mouseReleaseEvent(event);  // the rubber band zooms the axis
  const auto after = xAxisRange();
  if (after == before) return;
  if (std::abs(event->position().x() - press_x_) < 4) {  // a click, not a drag
    fitAxes();
    return;
  }
  zoomTo(static_cast<int64_t>(std::floor(toStep(after.first))),
         static_cast<int64_t>(std::ceil(toStep(after.second))));
}

void MetricChart::mouseDoubleClickEvent(QMouseEvent*) {
  resetZoom();
}

void MetricChart::wheelEvent(QWheelEvent* event) {
  event->accept();
  hideHover();
  const auto [first, last] = full_steps_;
  const auto [from, to] = zoomed_ ? zoom_range_ : full_steps_;
  const double span = static_cast<double>(to - from);
  if (event->modifiers() & Qt::ShiftModifier || event->angleDelta().x() != 0) {
    // Shift + wheel (or a sideways one) pans a zoomed chart along the steps.
    if (!zoomed_) return;
    const int delta =
        event->angleDelta().x() != 0 ? event->angleDelta().x() : event->angleDelta().y();
    const int64_t shift =
        std::max<int64_t>(static_cast<int64_t>(span / 10), 1) * (delta > 0 ? -1 : 1);
    const int64_t start = std::max<int64_t>(0, from + shift);
    zoomTo(start, start + (to - from));
    return;
  }
  // The wheel zooms around the step under the mouse; zooming out past every step shows all.
  const double notches = event->angleDelta().y() / 120.0;
  if (notches == 0 || last <= first) return;
  const double factor = std::pow(0.8, notches);
  const double anchor =
      std::clamp(stepAt(event->position()), static_cast<double>(from), static_cast<double>(to));
  const double new_from = anchor - (anchor - static_cast<double>(from)) * factor;
  const double new_to = anchor + (static_cast<double>(to) - anchor) * factor;
  if (new_from <= static_cast<double>(first) && new_to >= static_cast<double>(last)) {
    resetZoom();
    return;
  }
  auto lo = static_cast<int64_t>(std::floor(new_from));
  auto hi = static_cast<int64_t>(std::ceil(new_to));
  if (hi - lo < 2) hi = lo + 2;
  if (zoomed_ && lo == from && hi == to) return;
  zoomTo(std::max(lo, first), std::min(hi, std::max(last, lo + 2)));
}

// ---- Hover ----------------------------------------------------------------------------------

void MetricChart::hideHover() {
  if (!hover_box_) return;
  hover_box_->hide();
  hover_marker_->hide();
  hover_label_->setText(QString());
}

QString MetricChart::hoverText() const {
  return hover_box_->isVisible() ? hover_label_->text() : QString();
}

void MetricChart::mouseMoveEvent(QMouseEvent* event) {
  QChartView::mouseMoveEvent(event);
  if (event->buttons() != Qt::NoButton) return;  // dragging a rubber band
  hoverAt(event->position());
}

void MetricChart::leaveEvent(QEvent* event) {
  hideHover();
  QChartView::leaveEvent(event);
}

QString MetricChart::hoverAt(QPointF pos) {
  hideHover();
  const QPointF at = chart()->mapFromScene(mapToScene(pos.toPoint()));
  if (!chart()->plotArea().contains(at)) return {};
  // The nearest drawn point, in pixels: per line the two points either side of the mouse's x.
  const Drawn* best = nullptr;
  qsizetype best_point = -1;
  double best_distance = kInf;
  QPointF best_position;
  for (const auto& [name, drawn] : drawn_) {
    const QList<QPointF> points = drawn->centre->points();
    if (points.isEmpty() || !drawn->centre->isVisible()) continue;
    const double x = chart()->mapToValue(at, drawn->centre).x();
    auto it = std::lower_bound(points.begin(), points.end(), x,
                               [](const QPointF& p, double v) { return p.x() < v; });
    const qsizetype i = it - points.begin();
    for (qsizetype k : {i - 1, i}) {
      if (k < 0 || k >= points.size()) continue;
      const QPointF position = chart()->mapToPosition(points[k], drawn->centre);
      const double distance = std::hypot(position.x() - at.x(), position.y() - at.y());
      if (distance < best_distance) {
        best_distance = distance;
        best = drawn.get();
        best_point = k;
        best_position = position;
      }
    }
  }
  if (!best) return {};
  const ChartLine& line = best->line;
  const qsizetype i = best->shown[static_cast<size_t>(best_point)];
  const double step = line.centre[i].x();
  QStringList text;
  if (line.steps_per_point > 1) {
    const auto start = static_cast<int64_t>(
        std::floor(step - static_cast<double>(line.steps_per_point) / 2 + 0.5));
    text << QString("%1 · steps %2–%3")
                .arg(line.name)
                .arg(start)
                .arg(start + line.steps_per_point - 1);
  } else {
    text << QString("%1 · step %2").arg(line.name).arg(std::llround(step));
  }
  const QString unit = value_label_.isEmpty() ? QString() : " " + value_label_;
  const QString value = number(line.centre[i].y()) + unit;
  if (i < line.low.size() && i < line.high.size())
    text << QString("%1 %2 (min %3, max %4)")
                .arg(line.centre_label.isEmpty() ? "mean" : line.centre_label, value,
                     number(line.low[i].y()), number(line.high[i].y()));
  else
    text << value;
  if (smoothing_ > 0)
    text << QString("smoothed %1%2").arg(number(best->smoothed[static_cast<size_t>(i)]), unit);
  if (!clock_.empty())
    text << QString("%1 s after the run started").arg(number(clock_.seconds(step)));
  hover_label_->setText(text.join('\n'));
  // The label beside the mouse, kept inside the chart.
  const QPointF scene_at = chart()->mapToScene(at);
  const QRectF label = hover_label_->boundingRect();
  hover_label_->setPos(4, 3);
  QRectF box(0, 0, label.width() + 8, label.height() + 6);
  QPointF corner = scene_at + QPointF(14, 14);
  const QRectF area = chart()->mapRectToScene(chart()->rect());
  if (corner.x() + box.width() > area.right()) corner.setX(scene_at.x() - 14 - box.width());
  if (corner.y() + box.height() > area.bottom()) corner.setY(scene_at.y() - 14 - box.height());
  hover_box_->setRect(box);
  hover_box_->setPos(corner);
  hover_box_->show();
  hover_marker_->setBrush(line.color);
  hover_marker_->setPos(chart()->mapToScene(best_position));
  hover_marker_->show();
  return hover_label_->text();
}

// ---- Menu and export ------------------------------------------------------------------------

void MetricChart::contextMenuEvent(QContextMenuEvent* event) {
  hideHover();
  QMenu menu(this);
  QAction* log = menu.addAction("Log scale");
  log->setCheckable(true);
  log->setChecked(log_wanted_);
  connect(log, &QAction::toggled, this, [this](bool on) { setLogScale(on); });
  QAction* all = menu.addAction("Show all steps");
  all->setEnabled(zoomed_);
  connect(all, &QAction::triggered, this, &MetricChart::resetZoom);
  menu.addSeparator();
  menu.addAction("Drag or wheel: zoom · Shift+wheel: pan · double-click: all")->setEnabled(false);
  menu.exec(event->globalPos());
}

// ---- Attempt marks --------------------------------------------------------------------------

void MetricChart::setAttemptMarks(std::vector<AttemptMark> marks) {
  if (marks == attempt_marks_) return;
  attempt_marks_ = std::move(marks);
  viewport()->update();
}

void MetricChart::drawForeground(QPainter* painter, const QRectF& rect) {
  QChartView::drawForeground(painter, rect);
  if (attempt_marks_.empty() || drawn_.empty()) return;
  const QRectF plot = chart()->mapRectToScene(chart()->plotArea());
  const std::pair<double, double> range = xAxisRange();
  const double from = range.first, to = range.second;  // (clang 14 captures no structured binding)
  if (!(to > from) || plot.width() <= 0) return;
  // A step's x in the scene; half steps put the edges between steps.
  const auto sceneX = [&](double step) {
    return plot.left() + (toX(step) - from) / (to - from) * plot.width();
  };
  painter->save();
  painter->setClipRect(plot);
  painter->setFont(QFont(font().family(), 8));
  for (const AttemptMark& mark : attempt_marks_) {
    if (mark.rolled_back) {
      const double left = sceneX(static_cast<double>(mark.rolled_back->first) - 0.5);
      const double right = sceneX(static_cast<double>(mark.rolled_back->second) + 0.5);
      painter->fillRect(QRectF(left, plot.top(), std::max(right - left, 1.0), plot.height()),
                        QColor(220, 60, 60, 40));
    }
    const double x = sceneX(static_cast<double>(mark.first_step) - 0.5);
    painter->setPen(QPen(QColor(120, 40, 40), 1, Qt::DashLine));
    painter->drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    painter->setPen(QColor(120, 40, 40));
    painter->drawText(QPointF(x + 3, plot.top() + 11), QString("attempt %1").arg(mark.attempt));
  }
  painter->restore();
}

bool MetricChart::exportTo(const QString& path) {
  hideHover();
  if (path.endsWith(".svg", Qt::CaseInsensitive)) {
    QSvgGenerator svg;
    svg.setFileName(path);
    svg.setSize(size());
    svg.setViewBox(rect());
    svg.setTitle(chart()->title());
    QPainter painter;
    if (!painter.begin(&svg)) return false;
    render(&painter);
    return painter.end();
  }
  return grab().save(path);
}

int MetricChart::lineCount() const {
  return static_cast<int>(drawn_.size());
}

qsizetype MetricChart::pointCount() const {
  qsizetype n = 0;
  for (const auto& [name, drawn] : drawn_) n += drawn->centre->count();
  return n;
}

QList<QPointF> MetricChart::linePoints(const QString& name) const {
  auto it = drawn_.find(name);
  return it == drawn_.end() ? QList<QPointF>() : it->second->line.centre;
}

QList<QPointF> MetricChart::drawnPoints(const QString& name) const {
  auto it = drawn_.find(name);
  return it == drawn_.end() ? QList<QPointF>() : it->second->centre->points();
}

std::vector<QString> MetricChart::lineNames() const {
  std::vector<QString> names;
  for (const auto& [name, drawn] : drawn_) names.push_back(name);
  return names;
}

}  // namespace ringmaster::ui
