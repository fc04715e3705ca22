// RanksTab: the rank table of a run.
#include "views/run/ranks_tab.h"

#include <QHeaderView>
#include <algorithm>

#include "models/rank_table_model.h"
#include "telemetry/fields.h"
#include "views/table_copy.h"

namespace ringmaster::ui {

RanksTab::RanksTab(QWidget* parent) : QTableView(parent) {
  setObjectName("rankTable");
  rank_model_ = new RankTableModel(this);
  setModel(rank_model_);
  horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  horizontalHeader()->setStretchLastSection(true);
  verticalHeader()->hide();
  setAlternatingRowColors(true);
  setSelectionBehavior(QAbstractItemView::SelectRows);
  enableCsvCopy(this);
}

void RanksTab::apply(const RunSnapshot& snapshot) {
  std::vector<RankRow> rows = rankRows(snapshot);
  if (grouping_ != RankGrouping::kRankOrder && rows.size() == snapshot.coordinates.size()) {
    std::vector<RankRow> grouped;
    for (int rank : rankOrder(groupRanks(snapshot.coordinates, grouping_)))
      grouped.push_back(rows[static_cast<size_t>(rank)]);
    rows = std::move(grouped);
  }
  rank_model_->setRows(std::move(rows));
  // A program job's spec describes no model: there is no estimate to put beside the peaks.
  setColumnHidden(RankTableModel::kEstimatedMemory, snapshot.report.program.has_value());
  // Tokens/s only for a model with tokens (issue 33): a run that recorded none has no column.
  const auto& metrics = snapshot.report.metrics;
  setColumnHidden(
      RankTableModel::kTokensPerSecond,
      std::find(metrics.begin(), metrics.end(), step_field::kTokensPerS) == metrics.end());
}

}  // namespace ringmaster::ui
