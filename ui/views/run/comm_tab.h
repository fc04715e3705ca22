// The run view's Communication tab: the communication per mesh dimension (dp, tp, pp, world: over
// the run, and per rank in the rank grouping's order), the per-op table (each copyable as CSV), the
// rank × step heat map of exposed communication and the flight-recorder panel. It draws a
// snapshot; it reads nothing.
#pragma once

#include <QWidget>

#include "data/rank_groups.h"
#include "data/run_snapshot.h"

namespace ringmaster::ui {

class CommDimsModel;
class CommOpsModel;
class RankDimsModel;
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
  CommDimsModel* dimsModel() const { return dims_model_; }
  RankDimsModel* rankDimsModel() const { return rank_dims_model_; }
  HeatMap* heatMap() const { return heat_map_; }
  FlightRecorderPanel* flightRecorder() const { return flight_recorder_; }

 private:
  CommOpsModel* comm_model_ = nullptr;
  CommDimsModel* dims_model_ = nullptr;
  RankDimsModel* rank_dims_model_ = nullptr;
  HeatMap* heat_map_ = nullptr;
  FlightRecorderPanel* flight_recorder_ = nullptr;
  RankGrouping grouping_ = RankGrouping::kRankOrder;
};

}  // namespace ringmaster::ui
