// ParallelCoordinatesChart: the axes evenly spaced, each value placed as the scatter places it
// (ScatterChart::fraction and ticks), the lines coloured along the last axis's range, hover by the
// nearest line within a few pixels.
#include "widgets/parallel_coordinates.h"

#include <QFontMetrics>
#include <QLinearGradient>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>
#include <cmath>
#include <map>

#include "models/format.h"
#include "models/untrusted_text.h"
#include "widgets/scatter_chart.h"

namespace ringmaster::ui {

namespace {

// A line passes "at" the pointer within this many pixels.
constexpr double kHoverPixels = 5;

double distanceToSegment(QPointF p, QPointF a, QPointF b) {
  const QPointF ab = b - a;
  const double length2 = QPointF::dotProduct(ab, ab);
  const double t =
      length2 > 0 ? std::clamp(QPointF::dotProduct(p - a, ab) / length2, 0.0, 1.0) : 0.0;
  const QPointF nearest = a + t * ab;
  return std::hypot(p.x() - nearest.x(), p.y() - nearest.y());
}

QString axisValueText(const storage::ComparisonAxis& axis, const storage::AxisPoint& point) {
  if (axis.is_figure && point.number) return formatFigureValue(axis.key, *point.number);
  return untrustedLine(point.text).left(40);
}

}  // namespace

QColor sequentialColour(double t) {
  static const QColor stops[] = {{0x44, 0x01, 0x54},
                                 {0x3b, 0x52, 0x8b},
                                 {0x21, 0x91, 0x8c},
                                 {0x5e, 0xc9, 0x62},
                                 {0xfd, 0xe7, 0x25}};
  t = std::isfinite(t) ? std::clamp(t, 0.0, 1.0) : 0.5;
  const double scaled = t * (std::size(stops) - 1);
  const size_t low = std::min(static_cast<size_t>(scaled), std::size(stops) - 2);
  const double f = scaled - static_cast<double>(low);
  const QColor &a = stops[low], &b = stops[low + 1];
  return QColor::fromRgbF(static_cast<float>(a.redF() + (b.redF() - a.redF()) * f),
                          static_cast<float>(a.greenF() + (b.greenF() - a.greenF()) * f),
                          static_cast<float>(a.blueF() + (b.blueF() - a.blueF()) * f));
}

ParallelCoordinatesChart::ParallelCoordinatesChart(QWidget* parent) : QWidget(parent) {
  setMinimumSize(320, 220);
  setMouseTracking(true);
}

void ParallelCoordinatesChart::setData(std::vector<storage::ComparisonAxis> axes,
                                       std::vector<int64_t> run_ids) {
  axes_ = std::move(axes);
  run_ids_ = std::move(run_ids);
  hovered_.reset();
  update();
}

void ParallelCoordinatesChart::setHighlightedRun(std::optional<int64_t> run_id) {
  highlighted_ = run_id;
  update();
}

// Room on the left for the first axis's ticks, on the right for the legend, above for the axes'
// titles and below for the note.
QRectF ParallelCoordinatesChart::plotArea() const {
  return QRectF(rect()).adjusted(64, 36, -112, -40);
}

double ParallelCoordinatesChart::axisX(size_t axis) const {
  const QRectF area = plotArea();
  if (axes_.size() < 2) return area.center().x();
  return area.left() + area.width() * static_cast<double>(axis) / (axes_.size() - 1);
}

std::vector<ParallelCoordinatesChart::DrawnAxis> ParallelCoordinatesChart::axes() const {
  const QRectF area = plotArea();
  std::vector<DrawnAxis> drawn;
  for (size_t a = 0; a < axes_.size(); ++a) {
    DrawnAxis axis{.title = ScatterChart::title(axes_[a]),
                   .x = axisX(a),
                   .top = area.top(),
                   .bottom = area.bottom(),
                   .numeric = axes_[a].numeric};
    for (const auto& [fraction, text] : ScatterChart::ticks(axes_[a]))
      axis.ticks.emplace_back(area.bottom() - fraction * area.height(), text);
    drawn.push_back(std::move(axis));
  }
  return drawn;
}

std::vector<ParallelCoordinatesChart::DrawnPolyline> ParallelCoordinatesChart::placeLines() const {
  std::vector<DrawnPolyline> lines;
  if (axes_.empty()) return lines;
  const QRectF area = plotArea();
  for (size_t i = 0; i < run_ids_.size(); ++i) {
    DrawnPolyline line{.run_id = run_ids_[i], .index = i};
    for (size_t a = 0; a < axes_.size(); ++a) {
      const std::optional<double> fraction = ScatterChart::fraction(axes_[a], i);
      if (!fraction) break;
      line.fractions.push_back(*fraction);
      line.points.emplace_back(axisX(a), area.bottom() - *fraction * area.height());
    }
    if (line.points.size() == axes_.size()) lines.push_back(std::move(line));
  }
  return lines;
}

std::optional<std::pair<double, double>> ParallelCoordinatesChart::colourRange() const {
  double lo = INFINITY, hi = -INFINITY;
  for (const DrawnPolyline& line : placeLines()) {
    const std::optional<double>& value = axes_.back().points[line.index].number;
    if (value) lo = std::min(lo, *value), hi = std::max(hi, *value);
  }
  if (!std::isfinite(lo)) return std::nullopt;
  return std::pair{lo, hi};
}

std::vector<ParallelCoordinatesChart::DrawnPolyline> ParallelCoordinatesChart::polylines() const {
  std::vector<DrawnPolyline> lines = placeLines();
  if (lines.empty()) return lines;
  const std::optional<std::pair<double, double>> range = colourRange();
  const storage::ComparisonAxis& by = axes_.back();
  for (DrawnPolyline& line : lines) {
    const storage::AxisPoint& point = by.points[line.index];
    double t = 0.5;
    if (by.numeric && point.number && range && range->second > range->first)
      t = (*point.number - range->first) / (range->second - range->first);
    else if (!by.numeric && by.categories.size() > 1)
      t = point.category / static_cast<double>(by.categories.size() - 1);
    line.colour = sequentialColour(t);
  }
  return lines;
}

QString ParallelCoordinatesChart::note() const {
  // Each left-out run under the first axis it has no value on.
  std::map<size_t, QStringList> missing;
  for (size_t i = 0; i < run_ids_.size(); ++i)
    for (size_t a = 0; a < axes_.size(); ++a)
      if (!ScatterChart::fraction(axes_[a], i)) {
        missing[a] << QString("#%1").arg(run_ids_[i]);
        break;
      }
  QStringList parts;
  for (const auto& [axis, runs] : missing)
    parts << QString("%1 (no %2)").arg(runs.join(", "), ScatterChart::title(axes_[axis]));
  return parts.isEmpty() ? QString() : "Not drawn: runs " + parts.join("; ");
}

std::optional<int64_t> ParallelCoordinatesChart::runAt(QPointF at) const {
  std::optional<int64_t> nearest;
  double best = kHoverPixels;
  for (const DrawnPolyline& line : placeLines())
    for (size_t k = 0; k + 1 < line.points.size(); ++k)
      if (const double d = distanceToSegment(at, line.points[k], line.points[k + 1]); d <= best) {
        best = d;
        nearest = line.run_id;
      }
  return nearest;
}

QString ParallelCoordinatesChart::hoverText(int64_t run_id) const {
  const auto at = std::find(run_ids_.begin(), run_ids_.end(), run_id);
  if (at == run_ids_.end()) return {};
  const auto index = static_cast<size_t>(at - run_ids_.begin());
  QStringList lines = {QString("run %1").arg(run_id)};
  for (const storage::ComparisonAxis& axis : axes_)
    lines << QString("%1: %2").arg(ScatterChart::title(axis),
                                   axisValueText(axis, axis.points[index]));
  return lines.join('\n');
}

void ParallelCoordinatesChart::mouseMoveEvent(QMouseEvent* event) {
  const std::optional<int64_t> run = runAt(event->position());
  if (run != hovered_) {
    hovered_ = run;
    update();
  }
  if (run)
    QToolTip::showText(event->globalPosition().toPoint(), richTextShowingPlain(hoverText(*run)),
                       this);
  else
    QToolTip::hideText();
}

void ParallelCoordinatesChart::leaveEvent(QEvent*) {
  if (hovered_) {
    hovered_.reset();
    update();
  }
}

void ParallelCoordinatesChart::paintAxes(QPainter& painter) const {
  const QFontMetrics metrics(painter.font());
  const double spacing =
      axes_.size() < 2 ? plotArea().width() : plotArea().width() / (axes_.size() - 1);
  for (const DrawnAxis& axis : axes()) {
    painter.setPen(QPen(QColor(0x6b, 0x72, 0x80), 1));
    painter.drawLine(QPointF(axis.x, axis.top), QPointF(axis.x, axis.bottom));
    painter.setPen(palette().text().color());
    const QString title =
        metrics.elidedText(axis.title, Qt::ElideMiddle, static_cast<int>(spacing - 8));
    painter.drawText(QRectF(axis.x - spacing / 2, axis.top - 30, spacing, 16), Qt::AlignHCenter,
                     title);
    for (const auto& [y, text] : axis.ticks) {
      painter.drawLine(QPointF(axis.x - 4, y), QPointF(axis.x, y));
      painter.drawText(QRectF(axis.x - 62, y - 8, 56, 16), Qt::AlignRight | Qt::AlignVCenter,
                       metrics.elidedText(text, Qt::ElideRight, 56));
    }
  }
}

// A vertical colour bar right of the last axis: the highest value at the top.
void ParallelCoordinatesChart::paintLegend(QPainter& painter) const {
  const std::optional<std::pair<double, double>> range = colourRange();
  if (!range || axes_.empty()) return;
  const QRectF area = plotArea();
  const QRectF bar(area.right() + 40, area.top(), 12, area.height());
  QLinearGradient gradient(bar.bottomLeft(), bar.topLeft());
  for (double t : {0.0, 0.25, 0.5, 0.75, 1.0}) gradient.setColorAt(t, sequentialColour(t));
  painter.fillRect(bar, gradient);
  painter.setPen(palette().text().color());
  const storage::ComparisonAxis& by = axes_.back();
  const auto text = [&](double value) {
    return by.is_figure ? formatFigureValue(by.key, value) : formatFigure(value);
  };
  painter.drawText(QRectF(bar.right() + 4, bar.top() - 8, 56, 16), Qt::AlignLeft | Qt::AlignVCenter,
                   text(range->second));
  painter.drawText(QRectF(bar.right() + 4, bar.bottom() - 8, 56, 16),
                   Qt::AlignLeft | Qt::AlignVCenter, text(range->first));
}

void ParallelCoordinatesChart::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing);
  painter.fillRect(rect(), palette().base());
  if (axes_.empty()) return;
  paintAxes(painter);
  // The highlighted and the hovered lines last, on top, wider.
  std::vector<DrawnPolyline> lines = polylines();
  std::stable_partition(lines.begin(), lines.end(), [&](const DrawnPolyline& line) {
    return line.run_id != highlighted_ && line.run_id != hovered_;
  });
  for (const DrawnPolyline& line : lines) {
    const bool marked = line.run_id == highlighted_ || line.run_id == hovered_;
    painter.setPen(
        QPen(line.colour, marked ? 3.5 : 1.8, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin));
    painter.drawPolyline(line.points.data(), static_cast<int>(line.points.size()));
    if (marked)
      painter.drawText(line.points.back() + QPointF(6, -4), QString("#%1").arg(line.run_id));
  }
  paintLegend(painter);
  painter.setPen(palette().placeholderText().color());
  painter.drawText(QRectF(8, height() - 22, width() - 16, 18), Qt::AlignLeft | Qt::AlignVCenter,
                   QFontMetrics(painter.font()).elidedText(note(), Qt::ElideRight, width() - 16));
}

}  // namespace ringmaster::ui
