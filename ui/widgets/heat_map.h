// A rank x step heat map of communication wait: one row per rank, one column per step bucket,
// darker where a rank spent longer waiting in exposed communication. A straggler shows as the
// row its peers are not (the others wait for it); a hang as columns that stop. The rows are in rank
// order, or grouped by a mesh coordinate (data/rank_groups.h): each group's ranks together, a line
// between groups, each group's label at its first row.
#pragma once

#include <QWidget>

#include "data/rank_groups.h"
#include "data/run_snapshot.h"

namespace ringmaster::ui {

class HeatMap : public QWidget {
  Q_OBJECT

 public:
  explicit HeatMap(QWidget* parent = nullptr);
  void setMap(WaitHeatMap map);
  const WaitHeatMap& map() const { return map_; }
  // The rows' groups, top to bottom; empty: every rank in rank order.
  void setGroups(std::vector<RankGroup> groups);
  // The rank of each row, top to bottom, and each row's label as drawn.
  std::vector<int> rowRanks() const;
  QStringList rowLabels() const;
  QSize sizeHint() const override { return {480, 160}; }

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;  // tool tips: rank, steps and value under the cursor

 private:
  QRect plotRect() const;
  WaitHeatMap map_;
  std::vector<RankGroup> groups_;
  double max_value_ = 0;
};

}  // namespace ringmaster::ui
