// HeatMap: painted cell by cell with QPainter.
#include "widgets/heat_map.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

#include "models/format.h"

namespace ringmaster::ui {

HeatMap::HeatMap(QWidget* parent) : QWidget(parent) {
  setMinimumHeight(90);
  setMouseTracking(true);
}

void HeatMap::setMap(WaitHeatMap map) {
  map_ = std::move(map);
  max_value_ = 0;
  for (const auto& row : map_.values)
    for (const auto& v : row)
      if (v) max_value_ = std::max(max_value_, *v);
  update();
}

void HeatMap::setGroups(std::vector<RankGroup> groups) {
  groups_ = std::move(groups);
  update();
}

std::vector<int> HeatMap::rowRanks() const {
  const int ranks = static_cast<int>(map_.values.size());
  std::vector<int> rows;
  for (int rank : rankOrder(groups_))
    if (rank < ranks) rows.push_back(rank);
  if (rows.size() != static_cast<size_t>(ranks)) {  // no groups, or groups of another world
    rows.resize(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) rows[static_cast<size_t>(r)] = r;
  }
  return rows;
}

QStringList HeatMap::rowLabels() const {
  QStringList labels;
  for (int rank : rowRanks()) labels << QString("rank %1").arg(rank);
  // Each group's label at its first row.
  if (groups_.size() > 1 && rankOrder(groups_).size() == static_cast<size_t>(labels.size())) {
    int row = 0;
    for (const RankGroup& group : groups_) {
      labels[row] = QString::fromStdString(group.label) + " · " + labels[row];
      row += static_cast<int>(group.ranks.size());
    }
  }
  return labels;
}

QRect HeatMap::plotRect() const {
  return rect().adjusted(groups_.size() > 1 ? 170 : 54, 6, -8, -20);
}

void HeatMap::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.fillRect(rect(), palette().base());
  const QRect plot = plotRect();
  const int ranks = static_cast<int>(map_.values.size());
  const int columns = static_cast<int>(map_.bucket_starts.size());
  painter.setPen(palette().text().color());
  if (ranks == 0 || columns == 0) {
    painter.drawText(rect(), Qt::AlignCenter, "no communication recorded yet");
    return;
  }
  const double cell_w = static_cast<double>(plot.width()) / columns;
  const double cell_h = static_cast<double>(plot.height()) / ranks;
  const std::vector<int> rows = rowRanks();
  for (int r = 0; r < ranks; ++r) {
    for (int c = 0; c < columns; ++c) {
      const auto& v =
          map_.values[static_cast<size_t>(rows[static_cast<size_t>(r)])][static_cast<size_t>(c)];
      QRectF cell(plot.left() + c * cell_w, plot.top() + r * cell_h, cell_w + 0.5, cell_h + 0.5);
      if (!v) {
        painter.fillRect(cell, palette().alternateBase());
        continue;
      }
      const double t = max_value_ > 0 ? *v / max_value_ : 0;  // 0 pale .. 1 deep red
      painter.fillRect(cell, QColor::fromHsvF(0.02, 0.1 + 0.85 * t, 1.0 - 0.35 * t));
    }
  }
  QFont small = font();
  small.setPointSizeF(font().pointSizeF() * 0.85);
  painter.setFont(small);
  const int label_every = std::max(1, static_cast<int>(14 / std::max(cell_h, 1.0)));
  const QStringList labels = rowLabels();
  for (int r = 0; r < ranks; r += label_every)
    painter.drawText(QRectF(0, plot.top() + r * cell_h, plot.left() - 6, cell_h),
                     Qt::AlignRight | Qt::AlignVCenter, labels[r]);
  // A line between groups.
  int group_end = 0;
  for (size_t g = 0; g + 1 < groups_.size() && labels.size() == ranks; ++g) {
    group_end += static_cast<int>(groups_[g].ranks.size());
    const double y = plot.top() + group_end * cell_h;
    painter.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
  }
  painter.drawText(QRect(plot.left(), plot.bottom() + 2, plot.width(), 18),
                   Qt::AlignLeft | Qt::AlignVCenter,
                   QString("step %1").arg(map_.bucket_starts.front()));
  painter.drawText(QRect(plot.left(), plot.bottom() + 2, plot.width(), 18),
                   Qt::AlignRight | Qt::AlignVCenter,
                   QString("step %1 · darkest %2 exposed comm per step")
                       .arg(map_.lastStepOf(map_.bucket_starts.back()))
                       .arg(formatMs(max_value_)));
}

bool HeatMap::event(QEvent* event) {
  if (event->type() != QEvent::ToolTip) return QWidget::event(event);
  auto* help = static_cast<QHelpEvent*>(event);
  const QRect plot = plotRect();
  const int ranks = static_cast<int>(map_.values.size());
  const int columns = static_cast<int>(map_.bucket_starts.size());
  if (ranks == 0 || columns == 0 || !plot.contains(help->pos())) {
    QToolTip::hideText();
    return true;
  }
  const int c = std::min(columns - 1, (help->pos().x() - plot.left()) * columns / plot.width());
  const int r = std::min(ranks - 1, (help->pos().y() - plot.top()) * ranks / plot.height());
  const QStringList labels = rowLabels();
  const int rank = rowRanks()[static_cast<size_t>(r)];
  const auto& v = map_.values[static_cast<size_t>(rank)][static_cast<size_t>(c)];
  const int64_t start = map_.bucket_starts[static_cast<size_t>(c)];
  QToolTip::showText(help->globalPos(),
                     QString("%1, steps %2–%3: %4")
                         .arg(labels[r])
                         .arg(start)
                         .arg(map_.lastStepOf(start))
                         .arg(v ? formatMs(*v) + " exposed comm per step" : QString("no data")));
  return true;
}

}  // namespace ringmaster::ui
