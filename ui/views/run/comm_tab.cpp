// CommTab: the communication per op, the wait heat map and the flight recorder, one above another.
#include "views/run/comm_tab.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

#include "models/comm_ops_model.h"
#include "views/run/flight_recorder_panel.h"
#include "views/table_copy.h"
#include "widgets/heat_map.h"

namespace ringmaster::ui {

CommTab::CommTab(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* splitter = new QSplitter(Qt::Vertical);
  layout->addWidget(splitter);
  auto* ops = new QTableView();
  ops->setObjectName("commTable");
  comm_model_ = new CommOpsModel(this);
  ops->setModel(comm_model_);
  ops->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  ops->horizontalHeader()->setStretchLastSection(true);
  ops->verticalHeader()->hide();
  ops->setAlternatingRowColors(true);
  ops->setSelectionBehavior(QAbstractItemView::SelectRows);
  enableCsvCopy(ops);
  splitter->addWidget(ops);
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
  splitter->setStretchFactor(0, 2);
  splitter->setStretchFactor(1, 2);
  splitter->setStretchFactor(2, 1);
}

void CommTab::apply(const RunSnapshot& snapshot) {
  comm_model_->setStats(snapshot.report.comm_ops);
  heat_map_->setGroups(grouping_ == RankGrouping::kRankOrder
                           ? std::vector<RankGroup>{}
                           : groupRanks(snapshot.coordinates, grouping_));
  heat_map_->setMap(snapshot.wait_map);
  flight_recorder_->apply(snapshot);
}

int CommTab::heatMapBuckets() const {
  return std::clamp(heat_map_->width() / 6, 20, 200);
}

}  // namespace ringmaster::ui
