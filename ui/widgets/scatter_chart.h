// A scatter of runs on two comparison axes (storage/query/compare_axes.h: any run figure or spec
// field), painted with QPainter: a numeric axis placed by value, any other by category, each run
// a dot in its colour labelled with its id. The compare view's "runs on two axes" (issue 33).
// Plain data in, no database.
#pragma once

#include <QColor>
#include <QPointF>
#include <QRectF>
#include <QString>
#include <QWidget>
#include <cstdint>
#include <vector>

#include "query/compare_axes.h"

namespace ringmaster::ui {

class ScatterChart : public QWidget {
  Q_OBJECT

 public:
  explicit ScatterChart(QWidget* parent = nullptr);

  // One point per run that has both values; `colours` one per run.
  void setPoints(storage::ComparisonAxis x, storage::ComparisonAxis y, std::vector<int64_t> run_ids,
                 std::vector<QColor> colours);

  int pointCount() const;
  // Where run `index`'s dot is drawn, in the widget's coordinates; none for a run left out.
  std::optional<QPointF> pointPosition(size_t index) const;
  QColor pointColour(size_t index) const;
  QString xTitle() const { return title(x_); }
  QString yTitle() const { return title(y_); }

  QSize sizeHint() const override { return {420, 300}; }

  // How a chart of comparison axes reads one (the sweep view's parallel coordinates too): its
  // title (a figure's name with its unit, a spec field's path), where a run's value lies along it
  // in [0, 1] (none where the run has none), and its ticks (fraction, text).
  static QString title(const storage::ComparisonAxis& axis);
  static std::optional<double> fraction(const storage::ComparisonAxis& axis, size_t index);
  static std::vector<std::pair<double, QString>> ticks(const storage::ComparisonAxis& axis);

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QRectF plotArea() const;

  storage::ComparisonAxis x_, y_;
  std::vector<int64_t> run_ids_;
  std::vector<QColor> colours_;
};

}  // namespace ringmaster::ui
