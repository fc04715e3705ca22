// Pipeline schedules as Gantt data, the plain data a GanttChart only draws (bars, waits, each row's
// bubble, the bars' time range): the planned one (the engine's schedule played with unit costs, as
// the job editor shows it before launch), a measured step from the run database, and the planned
// one replayed with a step's measured stage costs (query/bubble_split.h).
#pragma once

#include <QString>
#include <utility>
#include <vector>

#include "query/bubble_split.h"
#include "query/schedule.h"
#include "spec/job_spec.h"
#include "spec/mesh_layout.h"

namespace ringmaster::ui {

struct GanttBar {
  int row = 0;  // rank
  int micro_batch = 0;
  char phase = 'F';
  double start = 0, end = 0;
};

// A wait inside an action: the stage had reached it at `start` and waited for its input from
// another stage until `transfer_start`, then for the input's transfer until `end`.
struct GanttWait {
  int row = 0;
  int micro_batch = 0;
  char phase = 'F';
  double start = 0, transfer_start = 0, end = 0;
};

struct GanttData {
  QString time_unit;      // "ms", "unit"
  double time_scale = 1;  // bar times are divided by this for the axis labels
  int rows = 0;
  QString row_label = "stage";     // "rank" when a rank holds several stages (interleaved)
  std::vector<GanttBar> bars;      // compute
  std::vector<GanttWait> waits;    // measured schedules only; drawn within the bars' time range
  std::vector<double> row_bubble;  // per row, 0..1: idle and waiting
  // Each row's name where rows are not numbered by row_label (byReplica's); empty: "stage 2".
  std::vector<QString> row_names;
  QString rowName(int row) const;
};

// The time range of a schedule's bars (compute); waits are drawn clipped to it. {0, 0} for none.
std::pair<double, double> barTimeRange(const GanttData& data);

// "forward", "backward", "weight grad" for 'F', 'B', 'W'.
const char* phaseName(char phase);

struct PlannedSchedule {
  PipelinePlan plan;
  GanttData gantt;
  double bubble_fraction = 0;     // of the unit-cost play
  double theoretical_bubble = 0;  // the textbook formula
};

// Throws kInvalidArgument (the engine's message) for a pipeline the engine would refuse.
PlannedSchedule plannedSchedule(PipelineSchedule schedule, int ranks, int micro_batches,
                                int virtual_stages);
// For a pipeline spec; nullopt for the other strategies and for a program job (its script plans).
std::optional<PlannedSchedule> plannedSchedule(const JobSpec& spec);

// A measured step: compute bars and waits, times from the step's first compute.
GanttData measuredGantt(const storage::StepSchedule& step, int ranks);

// A measured schedule (rows by rank) of a mesh with several replicas or tp ranks (dp or tp > 1,
// spec/mesh_layout.h): each replica's stages together, rows ordered by replica, stage, then tp
// rank, named "replica 1 · stage 0" (and " · tp 1"). Unchanged for a mesh of one replica without
// tp.
GanttData byReplica(GanttData gantt, const MeshSpec& mesh);

// "Planned with measured costs": the split's replay of the plan, in ms.
GanttData replayedGantt(const storage::BubbleSplit& split, const PipelinePlan& plan);

}  // namespace ringmaster::ui
