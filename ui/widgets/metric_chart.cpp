// MetricChart: Qt Charts line + area series over a value axis of steps.
#include "widgets/metric_chart.h"

#include <QAreaSeries>
#include <QChart>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QMouseEvent>
#include <QPainter>
#include <QSvgGenerator>
#include <QValueAxis>
#include <QWheelEvent>
#include <cmath>
#include <limits>

namespace ringmaster::ui {

struct MetricChart::Drawn {
  QLineSeries* centre = nullptr;
  QLineSeries* low = nullptr;
  QLineSeries* high = nullptr;
  QAreaSeries* envelope = nullptr;
};

MetricChart::MetricChart(const QString& title, const QString& value_label, QWidget* parent)
    // Given its chart at construction: setChart() would release (not delete) a default one.
    : QChartView(new QChart(), parent), value_label_(value_label) {
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
  setToolTip("Drag to zoom into steps (re-read at full resolution); double-click to show all");
}

MetricChart::~MetricChart() = default;

int MetricChart::bucketsWanted() const {
  const int width = static_cast<int>(chart()->plotArea().width());
  return std::clamp(width > 0 ? width : this->width() - 80, 50, 4000);
}

void MetricChart::setLines(const std::vector<ChartLine>& lines) {
  QChart* chart = this->chart();
  QAbstractAxis* x = chart->axes(Qt::Horizontal).first();
  QAbstractAxis* y = chart->axes(Qt::Vertical).first();
  std::map<QString, bool> wanted;
  qsizetype points = 0;
  data_min_x_ = data_min_y_ = std::numeric_limits<double>::infinity();
  data_max_x_ = data_max_y_ = -std::numeric_limits<double>::infinity();
  for (const ChartLine& line : lines) {
    wanted[line.name] = true;
    std::unique_ptr<Drawn>& drawn = drawn_[line.name];
    if (!drawn) {
      drawn = std::make_unique<Drawn>();
      if (!line.low.isEmpty()) {
        drawn->low = new QLineSeries(this);
        drawn->high = new QLineSeries(this);
        drawn->envelope = new QAreaSeries(drawn->high, drawn->low);
        QColor fill = line.color;
        fill.setAlpha(50);
        drawn->envelope->setBrush(fill);
        drawn->envelope->setPen(Qt::NoPen);
        chart->addSeries(drawn->envelope);
        drawn->envelope->attachAxis(x);
        drawn->envelope->attachAxis(y);
      }
      drawn->centre = new QLineSeries();
      drawn->centre->setName(line.name);
      drawn->centre->setPen(QPen(line.color, 1.5));
      chart->addSeries(drawn->centre);
      drawn->centre->attachAxis(x);
      drawn->centre->attachAxis(y);
      if (drawn->envelope)
        for (QLegendMarker* marker : chart->legend()->markers(drawn->envelope))
          marker->setVisible(false);
    }
    // Replacing a series re-lays the chart out: skip what did not change (a live run's refresh
    // mostly appends to a few lines, a finished run's changes nothing).
    if (drawn->centre->points() != line.centre) drawn->centre->replace(line.centre);
    if (drawn->low) {
      if (drawn->low->points() != line.low) drawn->low->replace(line.low);
      if (drawn->high->points() != line.high) drawn->high->replace(line.high);
    }
    points += line.centre.size() + line.low.size() + line.high.size();
    auto extend = [&](const QList<QPointF>& points) {
      for (const QPointF& p : points) {
        if (!std::isfinite(p.y())) continue;
        data_min_x_ = std::min(data_min_x_, p.x());
        data_max_x_ = std::max(data_max_x_, p.x());
        data_min_y_ = std::min(data_min_y_, p.y());
        data_max_y_ = std::max(data_max_y_, p.y());
      }
    };
    extend(line.centre);
    extend(line.low);
    extend(line.high);
  }
  for (auto it = drawn_.begin(); it != drawn_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    chart->removeSeries(it->second->centre);
    delete it->second->centre;
    if (it->second->envelope) {
      chart->removeSeries(it->second->envelope);
      delete it->second->envelope;
      delete it->second->low;
      delete it->second->high;
    }
    it = drawn_.erase(it);
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

namespace {

// A round tick interval giving about `ticks` ticks over `span`.
double niceInterval(double span, int ticks) {
  const double raw = std::max(span, 1.0) / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double step : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= step * magnitude) return step * magnitude;
  return 10 * magnitude;
}

}  // namespace

void MetricChart::fitAxes() {
  auto* x = static_cast<QValueAxis*>(chart()->axes(Qt::Horizontal).first());
  auto* y = static_cast<QValueAxis*>(chart()->axes(Qt::Vertical).first());
  const QString title = chart()->title().section(" — ", 0, 0);
  if (!std::isfinite(data_min_x_)) {
    chart()->setTitle(title + " — no data yet");
    x->setRange(0, 10);
    y->setRange(0, 1);
    return;
  }
  chart()->setTitle(title);
  if (!zoomed_) x->setRange(data_min_x_, std::max(data_max_x_, data_min_x_ + 1));
  x->setTickType(QValueAxis::TicksDynamic);
  x->setTickAnchor(0);
  x->setTickInterval(niceInterval(x->max() - x->min(), 5));
  double pad = (data_max_y_ - data_min_y_) * 0.05;
  if (pad <= 0) pad = std::max(std::abs(data_max_y_) * 0.05, 1e-9);
  // Quantities that cannot be negative keep their axis at zero.
  const double low = data_min_y_ >= 0 ? std::max(0.0, data_min_y_ - pad) : data_min_y_ - pad;
  y->setRange(low, data_max_y_ + pad);
  y->applyNiceNumbers();
  if (data_min_y_ >= 0 && y->min() < 0) y->setMin(0);
}

void MetricChart::mouseReleaseEvent(QMouseEvent* event) {
  QChartView::mouseReleaseEvent(event);  // the rubber band zooms the axis
  if (event->button() != Qt::LeftButton) return;
  auto* x = static_cast<QValueAxis*>(chart()->axes(Qt::Horizontal).first());
  const auto from = static_cast<int64_t>(std::floor(x->min()));
  const auto to = static_cast<int64_t>(std::ceil(x->max()));
  if (std::abs(x->min() - data_min_x_) < 1e-9 && std::abs(x->max() - data_max_x_) < 1e-9) return;
  zoomed_ = true;
  zoom_range_ = {from, to};
  emit rangeChanged();
}

void MetricChart::mouseDoubleClickEvent(QMouseEvent*) {
  resetZoom();
}

void MetricChart::wheelEvent(QWheelEvent* event) {
  // Wheel pans a zoomed chart along the steps.
  if (!zoomed_) return QChartView::wheelEvent(event);
  const int64_t span = zoom_range_.second - zoom_range_.first;
  const int64_t shift = std::max<int64_t>(span / 10, 1) * (event->angleDelta().y() > 0 ? -1 : 1);
  zoom_range_ = {std::max<int64_t>(0, zoom_range_.first + shift),
                 std::max<int64_t>(0, zoom_range_.first + shift) + span};
  auto* x = static_cast<QValueAxis*>(chart()->axes(Qt::Horizontal).first());
  x->setRange(static_cast<double>(zoom_range_.first), static_cast<double>(zoom_range_.second));
  emit rangeChanged();
}

void MetricChart::resetZoom() {
  if (!zoomed_) return;
  zoomed_ = false;
  chart()->zoomReset();
  fitAxes();
  emit rangeChanged();
}

bool MetricChart::exportTo(const QString& path) {
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

}  // namespace ringmaster::ui
