// MeshGrid: the bands, rows and boxes placed for the widget's width (the tp ranks of a row wrap
// onto more lines only when the row is wider than the widget), then painted; or the explanation.
#include "widgets/mesh_grid.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

namespace ringmaster::ui {

namespace {

constexpr int kMargin = 2;   // around everything
constexpr int kBandPad = 4;  // inside a stage's band
constexpr int kCellPad = 4;  // inside a rank's box
constexpr int kTpGap = 2;    // between the tp ranks of a row: adjacent
constexpr int kRowGap = 5;   // between the replicas (dp) of a band
constexpr int kBandGap = 8;  // between the stages (pp)
constexpr int kMinCellWidth = 48;

// Each stage's band in its own tint, alternating, so that neighbouring stages stand apart.
QColor bandColor(int pp) {
  return pp % 2 == 0 ? QColor(232, 240, 254) : QColor(253, 242, 222);
}

}  // namespace

MeshGrid::MeshGrid(QWidget* parent) : QWidget(parent) {
  QSizePolicy policy(QSizePolicy::Preferred, QSizePolicy::Preferred);
  policy.setHeightForWidth(true);
  setSizePolicy(policy);
}

void MeshGrid::setGrid(MeshGridData grid) {
  grid_ = std::move(grid);
  last_grid_ = grid_;
  title_.clear();
  reasons_.clear();
  updateGeometry();
  update();
}

void MeshGrid::setExplanation(const QString& title, const QStringList& reasons) {
  grid_ = {};
  title_ = title;
  reasons_ = reasons;
  updateGeometry();
  update();
}

QStringList MeshGrid::rankLines(int rank) const {
  if (rank < 0 || rank >= rankCount()) return {};
  return grid_.cells[static_cast<size_t>(rank)].lines;
}

QRect MeshGrid::rankRect(int rank) const {
  if (rank < 0 || rank >= rankCount()) return {};
  return place(width(), grid_).cells[static_cast<size_t>(rank)];
}

QRect MeshGrid::stageRect(int pp) const {
  const Placement placement = place(width(), grid_);
  if (pp < 0 || static_cast<size_t>(pp) >= placement.bands.size()) return {};
  return placement.bands[static_cast<size_t>(pp)];
}

bool MeshGrid::rankLinesFit(int rank) const {
  const QRect box = rankRect(rank);
  QFont bold = font();
  bold.setBold(true);
  const QStringList lines = rankLines(rank);
  for (qsizetype i = 0; i < lines.size(); ++i) {
    const QFontMetrics metrics(i == 0 ? bold : font());
    if (metrics.elidedText(lines[i], Qt::ElideRight, box.width() - 2 * kCellPad) != lines[i])
      return false;
  }
  return !lines.isEmpty();
}

QString MeshGrid::explanation() const {
  if (title_.isEmpty()) return {};
  return (QStringList{title_} + reasons_).join('\n');
}

// The widest line of any rank (the first in bold): every box is as wide, so the rows line up.
// Measured in fractions of a pixel and rounded up: a width rounded down elides the line drawn.
int MeshGrid::cellWidth(const MeshGridData& grid) const {
  QFont bold = font();
  bold.setBold(true);
  qreal widest = 0;
  for (const MeshGridCell& cell : grid.cells)
    for (qsizetype i = 0; i < cell.lines.size(); ++i)
      widest =
          std::max(widest, QFontMetricsF(i == 0 ? bold : font()).horizontalAdvance(cell.lines[i]));
  return static_cast<int>(std::ceil(widest)) + 1 + 2 * kCellPad;
}

int MeshGrid::cellHeight(const MeshGridData& grid) const {
  qsizetype lines = 1;
  for (const MeshGridCell& cell : grid.cells) lines = std::max(lines, cell.lines.size());
  return static_cast<int>(lines) * fontMetrics().lineSpacing() + 2 * kCellPad;
}

int MeshGrid::labelWidth(const MeshGridData& grid) const {
  return fontMetrics().horizontalAdvance(QString("dp %1").arg(std::max(grid.dp - 1, 0))) + 8;
}

MeshGrid::Placement MeshGrid::place(int width, const MeshGridData& grid) const {
  Placement placement;
  if (grid.cells.empty()) return placement;
  const int line = fontMetrics().lineSpacing();
  const int label_width = labelWidth(grid);
  const int left = kMargin + kBandPad + label_width;
  const int room = std::max(width - left - kMargin - kBandPad, kMinCellWidth);
  const int cell_width = std::min(cellWidth(grid), room);
  const int cell_height = cellHeight(grid);
  const int per_line = std::clamp((room + kTpGap) / (cell_width + kTpGap), 1, grid.tp);
  const int lines_per_row = (grid.tp + per_line - 1) / per_line;
  const int row_height = lines_per_row * cell_height + (lines_per_row - 1) * kTpGap;
  placement.cells.resize(grid.cells.size());
  int y = kMargin;
  for (int p = 0; p < grid.pp; ++p) {
    const int top = y;
    placement.band_titles.emplace_back(kMargin + kBandPad, y + kBandPad,
                                       width - 2 * (kMargin + kBandPad), line);
    y += kBandPad + line + 4;
    for (int d = 0; d < grid.dp; ++d) {
      placement.row_labels.emplace_back(kMargin + kBandPad, y, label_width, cell_height);
      for (const MeshGridCell& cell : grid.cells) {
        if (cell.pp != p || cell.dp != d) continue;
        const int x = left + (cell.tp % per_line) * (cell_width + kTpGap);
        const int cell_y = y + (cell.tp / per_line) * (cell_height + kTpGap);
        placement.cells[static_cast<size_t>(cell.rank)] = QRect(x, cell_y, cell_width, cell_height);
      }
      y += row_height + (d + 1 < grid.dp ? kRowGap : 0);
    }
    y += kBandPad;
    placement.bands.emplace_back(kMargin, top, width - 2 * kMargin, y - top);
    y += kBandGap;
  }
  placement.height = y - kBandGap + kMargin;
  return placement;
}

QRect MeshGrid::explanationRect(int width) const {
  const QFontMetrics metrics = fontMetrics();
  const int inner = std::max(width - 2 * kMargin - 2 * kCellPad, 40);
  int height = metrics.lineSpacing();
  for (const QString& reason : reasons_)
    height +=
        4 + metrics.boundingRect(QRect(0, 0, inner, 100000), Qt::TextWordWrap, reason).height();
  return QRect(kMargin, kMargin, width - 2 * kMargin, height + 2 * kCellPad);
}

int MeshGrid::heightForWidth(int width) const {
  const int grid = std::max(place(width, last_grid_).height, fontMetrics().lineSpacing());
  if (title_.isEmpty()) return grid;
  return std::max(explanationRect(width).height() + 2 * kMargin, grid);
}

QSize MeshGrid::sizeHint() const {
  const int width = 2 * (kMargin + kBandPad) + labelWidth(last_grid_) +
                    last_grid_.tp * (std::max(cellWidth(last_grid_), kMinCellWidth) + kTpGap);
  const int hint = std::clamp(width, 200, 520);
  return {hint, heightForWidth(hint)};
}

QSize MeshGrid::minimumSizeHint() const {
  const int width = 2 * (kMargin + kBandPad) + labelWidth(last_grid_) + kMinCellWidth;
  return {width, fontMetrics().lineSpacing()};
}

void MeshGrid::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  if (title_.isEmpty()) {
    paintGrid(painter);
    return;
  }
  // No grid: why, in a box the colour of the editor's errors.
  const QRect box = explanationRect(width());
  painter.setPen(QColor(0xb3, 0x26, 0x1e));
  painter.setBrush(QColor(252, 238, 236));
  painter.drawRect(box.adjusted(0, 0, -1, -1));
  QRect text = box.adjusted(kCellPad, kCellPad, -kCellPad, -kCellPad);
  QFont bold = font();
  bold.setBold(true);
  painter.setFont(bold);
  painter.drawText(text, Qt::AlignLeft | Qt::AlignTop, title_);
  painter.setFont(font());
  text.setTop(text.top() + fontMetrics().lineSpacing());
  for (const QString& reason : reasons_) {
    text.setTop(text.top() + 4);
    QRect used;
    painter.drawText(text, Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, reason, &used);
    text.setTop(used.bottom() + 1);
  }
}

void MeshGrid::paintGrid(QPainter& painter) const {
  const Placement placement = place(width(), grid_);
  const QFontMetrics metrics = fontMetrics();
  QFont bold = font();
  bold.setBold(true);
  for (size_t p = 0; p < placement.bands.size(); ++p) {
    const QColor tint = bandColor(static_cast<int>(p));
    painter.setPen(tint.darker(130));
    painter.setBrush(tint);
    painter.drawRoundedRect(placement.bands[p].adjusted(0, 0, -1, -1), 4, 4);
    painter.setPen(palette().color(QPalette::WindowText));
    painter.setFont(bold);
    const QRect title = placement.band_titles[p];
    const QString text = static_cast<int>(p) < grid_.stage_titles.size()
                             ? grid_.stage_titles[static_cast<qsizetype>(p)]
                             : QString("pp %1").arg(p);
    painter.drawText(title, Qt::AlignLeft | Qt::AlignVCenter,
                     QFontMetrics(bold).elidedText(text, Qt::ElideRight, title.width()));
  }
  painter.setFont(font());
  painter.setPen(QColor(90, 90, 90));
  for (size_t i = 0; i < placement.row_labels.size(); ++i)
    painter.drawText(placement.row_labels[i], Qt::AlignLeft | Qt::AlignVCenter,
                     QString("dp %1").arg(static_cast<int>(i) % std::max(grid_.dp, 1)));
  for (const MeshGridCell& cell : grid_.cells) {
    const QRect box = placement.cells[static_cast<size_t>(cell.rank)];
    painter.setPen(bandColor(cell.pp).darker(160));
    painter.setBrush(palette().color(QPalette::Base));
    painter.drawRect(box.adjusted(0, 0, -1, -1));
    painter.setPen(palette().color(QPalette::Text));
    int y = box.top() + kCellPad;
    for (qsizetype i = 0; i < cell.lines.size(); ++i) {
      painter.setFont(i == 0 ? bold : font());
      const QRect line(box.left() + kCellPad, y, box.width() - 2 * kCellPad, metrics.lineSpacing());
      painter.drawText(
          line, Qt::AlignLeft | Qt::AlignVCenter,
          painter.fontMetrics().elidedText(cell.lines[i], Qt::ElideRight, line.width()));
      y += metrics.lineSpacing();
    }
  }
}

bool MeshGrid::event(QEvent* event) {
  if (event->type() != QEvent::ToolTip) return QWidget::event(event);
  const auto* help = static_cast<QHelpEvent*>(event);
  const Placement placement = place(width(), grid_);
  for (const MeshGridCell& cell : grid_.cells) {
    if (!placement.cells[static_cast<size_t>(cell.rank)].contains(help->pos())) continue;
    QToolTip::showText(help->globalPos(), cell.tooltip, this);
    return true;
  }
  QToolTip::hideText();
  event->ignore();
  return true;
}

}  // namespace ringmaster::ui
