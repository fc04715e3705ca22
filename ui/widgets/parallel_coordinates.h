// A parallel-coordinates chart of runs (issue 37, the sweep view): one vertical axis per
// comparison axis (query/compare_axes.h: the swept fields, then the chosen figure), numeric ones
// placed by value with ticks, others by category, as the scatter places them; one polyline per run
// across them, coloured by its value of the last axis on a sequential scale with a legend. Hovering
// a line names its run. Runs without a value on some axis (a run that has not reached its figure
// yet) are left out, and a note under the axes names them. Painted with QPainter; plain data in.
#pragma once

#include <QColor>
#include <QPointF>
#include <QString>
#include <QWidget>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "query/compare_axes.h"

namespace ringmaster::ui {

// The sequential colour scale (viridis): t = 0 dark purple, 1 yellow.
QColor sequentialColour(double t);

class ParallelCoordinatesChart : public QWidget {
  Q_OBJECT

 public:
  // What was drawn, in widget coordinates, for tests and hover.
  struct DrawnAxis {
    QString title;
    double x = 0;
    double top = 0, bottom = 0;  // the span a value lies on: fraction 1 at top, 0 at bottom
    bool numeric = false;
    std::vector<std::pair<double, QString>> ticks;  // (y, text)
  };
  struct DrawnPolyline {
    int64_t run_id = 0;
    size_t index = 0;               // the run's point in the axes
    std::vector<QPointF> points;    // one per axis, left to right
    std::vector<double> fractions;  // each point's place along its axis, in [0, 1]
    QColor colour;
  };

  explicit ParallelCoordinatesChart(QWidget* parent = nullptr);

  // `axes`: every axis left to right, the last one colouring the lines; one point per run, in
  // `run_ids`' order.
  void setData(std::vector<storage::ComparisonAxis> axes, std::vector<int64_t> run_ids);
  // This run's line drawn wider (the best run); none for no run.
  void setHighlightedRun(std::optional<int64_t> run_id);

  std::vector<DrawnAxis> axes() const;
  std::vector<DrawnPolyline> polylines() const;
  // The runs left out, and why ("" when none is).
  QString note() const;
  // The run whose line passes within a few pixels of `at`, the nearest; none for none.
  std::optional<int64_t> runAt(QPointF at) const;
  // What hovering a run's line says: its id and its value on each axis.
  QString hoverText(int64_t run_id) const;
  // The legend's range: the colouring axis's lowest and highest value (none without lines).
  std::optional<std::pair<double, double>> colourRange() const;

  QSize sizeHint() const override { return {560, 320}; }

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void leaveEvent(QEvent* event) override;

 private:
  QRectF plotArea() const;
  double axisX(size_t axis) const;
  // The lines placed, not yet coloured.
  std::vector<DrawnPolyline> placeLines() const;
  void paintAxes(QPainter& painter) const;
  void paintLegend(QPainter& painter) const;

  std::vector<storage::ComparisonAxis> axes_;
  std::vector<int64_t> run_ids_;
  std::optional<int64_t> highlighted_, hovered_;
};

}  // namespace ringmaster::ui
