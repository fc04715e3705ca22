// CommTab: the communication per mesh dimension, per op, the wait heat map and the flight recorder,
// one above another.
#include "views/run/comm_tab.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

#include "models/comm_dims_model.h"
#include "models/comm_ops_model.h"
#include "views/run/flight_recorder_panel.h"
#include "views/table_copy.h"
#include "widgets/heat_map.h"

namespace ringmaster::ui {

namespace {

// A table of figures: rows selected whole, copyable as CSV.
QTableView* statsTable(const char* name, QAbstractItemModel* model) {
  auto* table = new QTableView();
  table->setObjectName(name);
  table->setModel(model);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->horizontalHeader()->setStretchLastSection(true);
  table->verticalHeader()->hide();
  table->setAlternatingRowColors(true);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  enableCsvCopy(table);
  return table;
}

}  // namespace

CommTab::CommTab(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* splitter = new QSplitter(Qt::Vertical);
  layout->addWidget(splitter);
  dims_model_ = new CommDimsModel(this);
  rank_dims_model_ = new RankDimsModel(this);
  auto* dims_box = new QWidget();
  auto* dims_layout = new QHBoxLayout(dims_box);
  dims_layout->setContentsMargins(0, 0, 0, 0);
  dims_layout->addWidget(statsTable("commDimsTable", dims_model_), 3);
  dims_layout->addWidget(statsTable("rankDimsTable", rank_dims_model_), 2);
  splitter->addWidget(dims_box);
  comm_model_ = new CommOpsModel(this);
  splitter->addWidget(statsTable("commTable", comm_model_));
  auto* map_box = new QWidget();
  auto* map_layout = new QVBoxLayout(map_box);
  map_layout->setContentsMargins(0, 0, 0, 0);
  map_layout->addWidget(
      new QLabel("<b>Exposed communication per step</b>, rank × step: a row "
                 "its peers are not is a straggler, columns that stop are a hang"));
  heat_map_ = new HeatMap();
  heat_map_->setObjectName("waitHeatMap");
  map_layout->addWidget(heat_map_, 1);
  splitter->addWidget(map_box);
  flight_recorder_ = new FlightRecorderPanel();
  splitter->addWidget(flight_recorder_);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 2);
  splitter->setStretchFactor(2, 2);
  splitter->setStretchFactor(3, 1);
}

void CommTab::apply(const RunSnapshot& snapshot) {
  comm_model_->setStats(snapshot.report.comm_ops);
  dims_model_->setDims(snapshot.report.comm_dims.dims);
  const std::vector<RankGroup> groups = grouping_ == RankGrouping::kRankOrder
                                            ? std::vector<RankGroup>{}
                                            : groupRanks(snapshot.coordinates, grouping_);
  rank_dims_model_->setRows(rankDimsRows(snapshot.report.comm_dims, snapshot.coordinates,
                                         rankOrder(groupRanks(snapshot.coordinates, grouping_))));
  heat_map_->setGroups(groups);
  heat_map_->setMap(snapshot.wait_map);
  flight_recorder_->apply(snapshot);
}

int CommTab::heatMapBuckets() const {
  return std::clamp(heat_map_->width() / 6, 20, 200);
}

}  // namespace ringmaster::ui
