// The run view's Ranks tab: a row per rank (host, device, status or what it waits on, throughput,
// step split, peak memory beside the spec's estimate), stragglers flagged, copyable as CSV. It
// draws a snapshot; it reads nothing.
#pragma once

#include <QTableView>

#include "data/run_snapshot.h"

namespace ringmaster::ui {

class RankTableModel;

class RanksTab : public QTableView {
  Q_OBJECT

 public:
  explicit RanksTab(QWidget* parent = nullptr);

  void apply(const RunSnapshot& snapshot);
  RankTableModel* rankModel() const { return rank_model_; }

 private:
  RankTableModel* rank_model_ = nullptr;
};

}  // namespace ringmaster::ui
