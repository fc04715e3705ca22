// GanttChart: painted with QPainter, bars scaled to the widget's width.
#include "widgets/gantt_chart.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

namespace ringmaster::ui {

QColor microBatchColor(int micro_batch, char phase) {
  static const QColor palette[] = {{0x4e, 0x79, 0xa7}, {0xf2, 0x8e, 0x2b}, {0x59, 0xa1, 0x4f},
                                   {0xe1, 0x57, 0x59}, {0x76, 0xb7, 0xb2}, {0xed, 0xc9, 0x48},
                                   {0xb0, 0x7a, 0xa1}, {0x9c, 0x75, 0x5f}, {0xff, 0x9d, 0xa7},
                                   {0xba, 0xb0, 0xac}};
  QColor c = palette[static_cast<size_t>(std::max(micro_batch, 0)) % std::size(palette)];
  if (phase == 'F') return c.lighter(125);
  if (phase == 'B') return c.darker(135);
  return c;
}

GanttChart::GanttChart(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
}

void GanttChart::setData(GanttData data) {
  data_ = std::move(data);
  updateGeometry();
  update();
}

QRectF GanttChart::barRect(int row, double start, double end, const QRectF& plot, double t0,
                           double t1) const {
  const double row_h = plot.height() / std::max(data_.rows, 1);
  const double scale = plot.width() / std::max(t1 - t0, 1e-12);
  return QRectF(plot.left() + (start - t0) * scale, plot.top() + row * row_h + 3,
                std::max((end - start) * scale, 1.0), row_h - 6);
}

QRectF GanttChart::waitRect(const GanttWait& wait, const QRectF& plot, double t0, double t1) const {
  const QRectF full =
      barRect(wait.row, std::max(wait.start, t0), std::min(wait.end, t1), plot, t0, t1);
  // A thin strip at the row's middle: waiting is not work, but it belongs to the action after it.
  const double h = std::max(4.0, full.height() / 4);
  return QRectF(full.left(), full.center().y() - h / 2, full.width(), h);
}

void GanttChart::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing);
  painter.fillRect(rect(), palette().base());
  if (data_.bars.empty() || data_.rows == 0) {
    painter.setPen(palette().text().color());
    painter.drawText(rect(), Qt::AlignCenter, "no schedule to show");
    return;
  }
  const auto [t0, t1] = barTimeRange(data_);
  const QRectF plot = QRectF(rect()).adjusted(data_.row_names.empty() ? 64 : 150, 8, -92, -26);
  const double row_h = plot.height() / data_.rows;
  QFont small = font();
  small.setPointSizeF(font().pointSizeF() * 0.85);
  painter.setFont(small);
  for (int r = 0; r < data_.rows; ++r) {
    QRectF row(plot.left(), plot.top() + r * row_h, plot.width(), row_h);
    painter.fillRect(row, (r % 2) ? palette().alternateBase() : palette().base());
    painter.setPen(palette().text().color());
    painter.drawText(QRectF(0, row.top(), plot.left() - 8, row_h),
                     Qt::AlignRight | Qt::AlignVCenter, data_.rowName(r));
    if (static_cast<size_t>(r) < data_.row_bubble.size())
      painter.drawText(
          QRectF(plot.right() + 8, row.top(), 84, row_h), Qt::AlignLeft | Qt::AlignVCenter,
          QString("bubble %1%").arg(data_.row_bubble[static_cast<size_t>(r)] * 100, 0, 'f', 1));
  }
  for (const GanttWait& wait : data_.waits) {
    if (wait.end <= t0 || wait.start >= t1 || wait.end <= wait.start) continue;
    const QRectF strip = waitRect(wait, plot, t0, t1);
    const double scale = plot.width() / std::max(t1 - t0, 1e-12);
    const double transfer_x =
        std::clamp(plot.left() + (wait.transfer_start - t0) * scale, strip.left(), strip.right());
    const QRectF waiting(strip.left(), strip.top(), transfer_x - strip.left(), strip.height());
    const QRectF transfer(transfer_x, strip.top(), strip.right() - transfer_x, strip.height());
    painter.setPen(Qt::NoPen);
    painter.setBrush(QColor(0x9e, 0x9e, 0x9e));
    painter.drawRect(waiting);
    painter.setBrush(QBrush(QColor(0x61, 0x61, 0x61), Qt::BDiagPattern));
    painter.drawRect(waiting);
    painter.setBrush(QColor(0x37, 0x47, 0x4f));
    painter.drawRect(transfer);
  }
  for (const GanttBar& bar : data_.bars) {
    const QRectF box = barRect(bar.row, bar.start, bar.end, plot, t0, t1);
    painter.setPen(QPen(palette().base().color(), 1));
    painter.setBrush(microBatchColor(bar.micro_batch, bar.phase));
    painter.drawRect(box);
    if (bar.phase == 'W') {
      painter.setBrush(QBrush(Qt::white, Qt::BDiagPattern));
      painter.drawRect(box);
    }
    const QString label = QString("%1%2").arg(bar.phase).arg(bar.micro_batch);
    if (painter.fontMetrics().horizontalAdvance(label) + 4 < box.width()) {
      painter.setPen(bar.phase == 'B' ? Qt::white : Qt::black);
      painter.drawText(box, Qt::AlignCenter, label);
    }
  }
  painter.setPen(palette().text().color());
  painter.drawLine(plot.bottomLeft(), plot.bottomRight());
  for (int tick = 0; tick <= 4; ++tick) {
    const double x = plot.left() + plot.width() * tick / 4;
    const double t = (t1 - t0) * tick / 4 / data_.time_scale;
    painter.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 4));
    painter.drawText(QRectF(x - 50, plot.bottom() + 4, 100, 18), Qt::AlignCenter,
                     QString("%1 %2").arg(t, 0, 'g', 4).arg(data_.time_unit));
  }
}

bool GanttChart::event(QEvent* event) {
  if (event->type() != QEvent::ToolTip || data_.bars.empty()) return QWidget::event(event);
  auto* help = static_cast<QHelpEvent*>(event);
  const auto [t0, t1] = barTimeRange(data_);
  const QRectF plot = QRectF(rect()).adjusted(data_.row_names.empty() ? 64 : 150, 8, -92, -26);
  for (const GanttWait& wait : data_.waits) {
    if (wait.end <= t0 || wait.start >= t1 || !waitRect(wait, plot, t0, t1).contains(help->pos()))
      continue;
    const double waited = std::max(0.0, wait.transfer_start - std::max(wait.start, t0));
    const double transferred = wait.end - std::max(wait.transfer_start, t0);
    QToolTip::showText(help->globalPos(),
                       QString("%1: the input of %2 of micro-batch %3: waited %4 %6 for the "
                               "other stage, %5 %6 for its transfer")
                           .arg(data_.rowName(wait.row))
                           .arg(phaseName(wait.phase))
                           .arg(wait.micro_batch)
                           .arg(waited / data_.time_scale, 0, 'g', 4)
                           .arg(transferred / data_.time_scale, 0, 'g', 4)
                           .arg(data_.time_unit));
    return true;
  }
  for (const GanttBar& bar : data_.bars) {
    if (!barRect(bar.row, bar.start, bar.end, plot, t0, t1).contains(help->pos())) continue;
    QToolTip::showText(help->globalPos(), QString("%1: %2 of micro-batch %3, %4–%5 %6")
                                              .arg(data_.rowName(bar.row))
                                              .arg(phaseName(bar.phase))
                                              .arg(bar.micro_batch)
                                              .arg((bar.start - t0) / data_.time_scale, 0, 'g', 4)
                                              .arg((bar.end - t0) / data_.time_scale, 0, 'g', 4)
                                              .arg(data_.time_unit));
    return true;
  }
  QToolTip::hideText();
  return true;
}

}  // namespace ringmaster::ui
