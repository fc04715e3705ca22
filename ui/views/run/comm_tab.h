// The run view's Communication tab: the per-op table (copyable as CSV), the rank × step heat map of
// exposed communication and the flight-recorder panel. It draws a snapshot; it reads nothing.
#pragma once

#include <QWidget>

#include "data/rank_groups.h"
#include "data/run_snapshot.h"

namespace ringmaster::ui {

class CommOpsModel;
class FlightRecorderPanel;
class HeatMap;

class CommTab : public QWidget {
  Q_OBJECT

 public:
  explicit CommTab(QWidget* parent = nullptr);

  void apply(const RunSnapshot& snapshot);
  // The heat map's rows from the next apply on: in rank order or grouped (data/rank_groups.h).
  void setGrouping(RankGrouping grouping) { grouping_ = grouping; }
  // The heat map's columns for its width.
  int heatMapBuckets() const;

  CommOpsModel* model() const { return comm_model_; }
  HeatMap* heatMap() const { return heat_map_; }
  FlightRecorderPanel* flightRecorder() const { return flight_recorder_; }

 private:
  CommOpsModel* comm_model_ = nullptr;
  HeatMap* heat_map_ = nullptr;
  FlightRecorderPanel* flight_recorder_ = nullptr;
  RankGrouping grouping_ = RankGrouping::kRankOrder;
};

}  // namespace ringmaster::ui
