// The run view's Ranks tab: a row per rank (host, device, status or what it waits on, throughput,
// step split, peak memory beside the spec's estimate, mesh coordinates), stragglers flagged,
// copyable as CSV, the rows in rank order or grouped by a mesh coordinate. It draws a snapshot; it
// reads nothing.
#pragma once

#include <QTableView>

#include "data/rank_groups.h"
#include "data/run_snapshot.h"

namespace ringmaster::ui {

class RankTableModel;

class RanksTab : public QTableView {
  Q_OBJECT

 public:
  explicit RanksTab(QWidget* parent = nullptr);

  void apply(const RunSnapshot& snapshot);
  // The rows' order from the next apply on: the groups one after another (data/rank_groups.h).
  void setGrouping(RankGrouping grouping) { grouping_ = grouping; }
  RankTableModel* rankModel() const { return rank_model_; }

 private:
  RankTableModel* rank_model_ = nullptr;
  RankGrouping grouping_ = RankGrouping::kRankOrder;
};

}  // namespace ringmaster::ui
