// ScatterChart: the axes' ranges (numbers padded by 8 %, categories evenly spaced), ticks formatted
// as the figure's kind is, and the dots.
#include "widgets/scatter_chart.h"

#include <QPainter>
#include <algorithm>
#include <cmath>

#include "models/format.h"

namespace ringmaster::ui {

namespace {

// The numeric axis's range, padded; a single value gets a range around it.
std::pair<double, double> rangeOf(const storage::ComparisonAxis& axis) {
  double lo = INFINITY, hi = -INFINITY;
  for (const storage::AxisPoint& point : axis.points)
    if (point.number) lo = std::min(lo, *point.number), hi = std::max(hi, *point.number);
  if (!(hi > lo)) {
    const double pad = std::isfinite(lo) && lo != 0 ? std::fabs(lo) * 0.1 : 1;
    lo = std::isfinite(lo) ? lo - pad : 0;
    hi = lo + 2 * pad;
  }
  const double pad = (hi - lo) * 0.08;
  return {lo - pad, hi + pad};
}

QString valueText(const storage::ComparisonAxis& axis, double value) {
  if (axis.is_figure) return formatFigureValue(axis.key, value);
  // Below 1, a spec field's ticks to 3 significant digits: learning rates 0.00138 and 0.002 stay
  // apart (3 decimals would write both 0.002).
  return std::fabs(value) < 1 && value != 0 ? QString::number(value, 'g', 3) : formatFigure(value);
}

}  // namespace

ScatterChart::ScatterChart(QWidget* parent) : QWidget(parent) {
  setMinimumSize(260, 200);
}

void ScatterChart::setPoints(storage::ComparisonAxis x, storage::ComparisonAxis y,
                             std::vector<int64_t> run_ids, std::vector<QColor> colours) {
  x_ = std::move(x);
  y_ = std::move(y);
  run_ids_ = std::move(run_ids);
  colours_ = std::move(colours);
  update();
}

QString ScatterChart::title(const storage::ComparisonAxis& axis) {
  if (!axis.is_figure) return QString::fromStdString(axis.key);
  const QString heading = figureHeading(axis.key);
  return axis.unit.empty() || axis.unit == axis.name
             ? heading
             : QString("%1 (%2)").arg(heading, QString::fromStdString(axis.unit));
}

std::optional<double> ScatterChart::fraction(const storage::ComparisonAxis& axis, size_t index) {
  if (index >= axis.points.size() || axis.points[index].category < 0) return std::nullopt;
  const storage::AxisPoint& point = axis.points[index];
  if (axis.numeric && point.number) {
    const auto [lo, hi] = rangeOf(axis);
    return (*point.number - lo) / (hi - lo);
  }
  return (point.category + 0.5) / static_cast<double>(std::max<size_t>(1, axis.categories.size()));
}

std::vector<std::pair<double, QString>> ScatterChart::ticks(const storage::ComparisonAxis& axis) {
  std::vector<std::pair<double, QString>> out;
  if (axis.numeric) {
    const auto [lo, hi] = rangeOf(axis);
    for (double f : {0.1, 0.3, 0.5, 0.7, 0.9})
      out.emplace_back(f, valueText(axis, lo + (hi - lo) * f));
    return out;
  }
  const double n = static_cast<double>(std::max<size_t>(1, axis.categories.size()));
  for (size_t i = 0; i < axis.categories.size(); ++i)
    out.emplace_back((static_cast<double>(i) + 0.5) / n,
                     QString::fromStdString(axis.categories[i]).left(24));
  return out;
}

QRectF ScatterChart::plotArea() const {
  return QRectF(rect()).adjusted(78, 12, -16, -44);
}

int ScatterChart::pointCount() const {
  int count = 0;
  for (size_t i = 0; i < run_ids_.size(); ++i) count += pointPosition(i).has_value();
  return count;
}

std::optional<QPointF> ScatterChart::pointPosition(size_t index) const {
  const std::optional<double> fx = fraction(x_, index), fy = fraction(y_, index);
  if (!fx || !fy) return std::nullopt;
  const QRectF area = plotArea();
  return QPointF(area.left() + *fx * area.width(), area.bottom() - *fy * area.height());
}

QColor ScatterChart::pointColour(size_t index) const {
  return index < colours_.size() ? colours_[index] : QColor(Qt::black);
}

void ScatterChart::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing);
  painter.fillRect(rect(), palette().base());
  const QRectF area = plotArea();
  painter.setPen(QColor(0xd1, 0xd5, 0xdb));
  painter.drawRect(area);
  painter.setPen(palette().text().color());
  for (const auto& [at, text] : ticks(x_)) {
    const double x = area.left() + at * area.width();
    painter.drawLine(QPointF(x, area.bottom()), QPointF(x, area.bottom() + 4));
    painter.drawText(QRectF(x - 60, area.bottom() + 5, 120, 16), Qt::AlignHCenter, text);
  }
  for (const auto& [at, text] : ticks(y_)) {
    const double y = area.bottom() - at * area.height();
    painter.drawLine(QPointF(area.left() - 4, y), QPointF(area.left(), y));
    painter.drawText(QRectF(0, y - 8, area.left() - 6, 16), Qt::AlignRight | Qt::AlignVCenter,
                     text);
  }
  painter.drawText(QRectF(area.left(), height() - 20, area.width(), 18), Qt::AlignHCenter,
                   xTitle());
  painter.save();
  painter.translate(12, area.center().y());
  painter.rotate(-90);
  painter.drawText(QRectF(-area.height() / 2, -8, area.height(), 16), Qt::AlignHCenter, yTitle());
  painter.restore();
  for (size_t i = 0; i < run_ids_.size(); ++i) {
    const std::optional<QPointF> at = pointPosition(i);
    if (!at) continue;
    painter.setPen(QPen(Qt::white, 1.5));
    painter.setBrush(pointColour(i));
    painter.drawEllipse(*at, 6, 6);
    painter.setPen(palette().text().color());
    painter.drawText(*at + QPointF(8, -6), QString("#%1").arg(run_ids_[i]));
  }
}

}  // namespace ringmaster::ui
