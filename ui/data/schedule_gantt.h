// Pipeline schedules as Gantt data: the planned one (the engine's schedule played with unit costs,
// as the job editor shows it before launch) and a measured step from the run database.
#pragma once

#include "query/schedule.h"
#include "spec/job_spec.h"
#include "widgets/gantt_chart.h"

namespace ringmaster::ui {

struct PlannedSchedule {
  GanttData gantt;
  double bubble_fraction = 0;     // of the unit-cost play
  double theoretical_bubble = 0;  // the textbook formula
};

// Throws kInvalidArgument (the engine's message) for a pipeline the engine would refuse.
PlannedSchedule plannedSchedule(PipelineSchedule schedule, int ranks, int micro_batches,
                                int virtual_stages);
// For a pipeline spec; nullopt for the other strategies.
std::optional<PlannedSchedule> plannedSchedule(const JobSpec& spec);

// A measured step: compute bars and waits, times from the step's first compute.
GanttData measuredGantt(const storage::StepSchedule& step, int ranks);

}  // namespace ringmaster::ui
