// The device mesh as a grid of ranks: a band per pipeline stage (pp), top to bottom, titled with
// what it holds; in each band a row per data-parallel replica (dp), labelled; in each row the
// tensor-parallel ranks (tp) side by side. Each rank is a box of text lines given by its owner
// (its coordinates, blocks, vocabulary rows, memory), with a tool tip. When the layout is
// invalid the widget draws why instead of a grid, in the grid's place. It only draws; it computes
// nothing of the mesh.
#pragma once

#include <QStringList>
#include <QWidget>
#include <vector>

class QPainter;

namespace ringmaster::ui {

struct MeshGridCell {
  int rank = 0;
  int dp = 0, tp = 0, pp = 0;  // its coordinates: which band, row and place in the row
  QStringList lines;           // drawn in its box, one per line
  QString tooltip;
};

struct MeshGridData {
  int dp = 1, tp = 1, pp = 1;
  std::vector<MeshGridCell> cells;  // one per rank
  QStringList stage_titles;         // per pp coordinate, above its band
};

class MeshGrid : public QWidget {
  Q_OBJECT

 public:
  explicit MeshGrid(QWidget* parent = nullptr);

  // Draws the grid.
  void setGrid(MeshGridData grid);
  // Draws no grid but `title` and each reason under it (an invalid layout).
  void setExplanation(const QString& title, const QStringList& reasons);

  // What is drawn: the ranks of the grid (none while an explanation is drawn), each rank's lines
  // and its box at the widget's width, and the explanation ("" while a grid is drawn).
  int rankCount() const { return static_cast<int>(grid_.cells.size()); }
  QStringList rankLines(int rank) const;
  QRect rankRect(int rank) const;
  QRect stageRect(int pp) const;
  // Whether each of the rank's lines is drawn whole in its box at the widget's width (not elided).
  bool rankLinesFit(int rank) const;
  QString explanation() const;

  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;  // a rank's tool tip under the cursor

 private:
  // Where everything goes at a width.
  struct Placement {
    std::vector<QRect> cells;        // by rank
    std::vector<QRect> bands;        // by pp coordinate
    std::vector<QRect> band_titles;  // by pp coordinate
    std::vector<QRect> row_labels;   // by pp * dp + dp
    int height = 0;
  };
  Placement place(int width, const MeshGridData& grid) const;
  int cellWidth(const MeshGridData& grid) const;
  int cellHeight(const MeshGridData& grid) const;
  int labelWidth(const MeshGridData& grid) const;
  QRect explanationRect(int width) const;
  void paintGrid(QPainter& painter) const;

  MeshGridData grid_;
  // The last grid drawn: an explanation takes its place, at least as high, so that an invalid
  // layout moves nothing below the drawing.
  MeshGridData last_grid_;
  QString title_;
  QStringList reasons_;
};

}  // namespace ringmaster::ui
