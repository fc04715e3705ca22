// Builds Gantt data from the engine's schedule simulation, the schedule query and the bubble
// split's replay.
#include "data/schedule_gantt.h"

#include <algorithm>

#include "spec/strategies/pipeline_schedule.h"

namespace ringmaster::ui {

namespace {

// A played plan's actions as bars, one row per rank, with each rank's bubble.
GanttData timelineGantt(const ScheduleTimeline& timeline, const PipelinePlan& plan) {
  GanttData gantt;
  gantt.rows = plan.ranks;
  if (plan.virtual_stages > 1) gantt.row_label = "rank";
  for (const auto& actions : timeline.per_rank)
    for (const TimedAction& timed : actions)
      gantt.bars.push_back(GanttBar{timed.rank, timed.action.micro_batch,
                                    phaseLetter(timed.action.phase), timed.start, timed.end});
  gantt.row_bubble = timeline.bubble_fraction;
  return gantt;
}

}  // namespace

PlannedSchedule plannedSchedule(PipelineSchedule schedule, int ranks, int micro_batches,
                                int virtual_stages) {
  const PipelinePlan plan = makePipelinePlan(ranks, micro_batches, schedule, virtual_stages);
  const ScheduleTimeline timeline = simulateSchedule(plan);
  PlannedSchedule planned;
  planned.plan = plan;
  planned.gantt = timelineGantt(timeline, plan);
  planned.gantt.time_unit = "units";
  planned.bubble_fraction = timeline.bubbleFraction();
  planned.theoretical_bubble =
      theoreticalBubbleFraction(schedule, ranks, micro_batches, virtual_stages);
  return planned;
}

std::optional<PlannedSchedule> plannedSchedule(const JobSpec& spec) {
  // A program job's script schedules its own micro-batches: its spec has none to plan from.
  if (spec.program || stageCount(spec) == 1) return std::nullopt;
  return plannedSchedule(spec.strategy.pipeline.schedule, spec.strategy.mesh.pp,
                         spec.train.micro_batches, spec.strategy.pipeline.virtual_stages);
}

std::pair<double, double> barTimeRange(const GanttData& data) {
  if (data.bars.empty()) return {0, 0};
  double t0 = data.bars.front().start, t1 = data.bars.front().end;
  for (const GanttBar& bar : data.bars) {
    t0 = std::min(t0, bar.start);
    t1 = std::max(t1, bar.end);
  }
  return {t0, t1};
}

const char* phaseName(char phase) {
  return phase == 'F' ? "forward" : phase == 'B' ? "backward" : "weight grad";
}

GanttData measuredGantt(const storage::StepSchedule& step, int ranks) {
  GanttData gantt;
  gantt.time_unit = "ms";
  gantt.time_scale = 1000;  // µs on the bars
  gantt.rows = ranks;
  for (const auto& action : step.actions) {
    gantt.bars.push_back(GanttBar{action.rank, action.micro_batch, action.phase,
                                  static_cast<double>(action.ready_us - step.start_us),
                                  static_cast<double>(action.end_us - step.start_us)});
    if (action.ready_us > action.start_us)
      gantt.waits.push_back(
          GanttWait{action.rank, action.micro_batch, action.phase,
                    static_cast<double>(action.start_us - step.start_us),
                    static_cast<double>(action.ready_us - action.transfer_us - step.start_us),
                    static_cast<double>(action.ready_us - step.start_us)});
  }
  gantt.row_bubble.assign(static_cast<size_t>(ranks), 0.0);
  for (const auto& rank : step.ranks)
    if (rank.rank >= 0 && rank.rank < ranks)
      gantt.row_bubble[static_cast<size_t>(rank.rank)] = rank.bubble_fraction;
  return gantt;
}

QString GanttData::rowName(int row) const {
  if (row >= 0 && static_cast<size_t>(row) < row_names.size())
    return row_names[static_cast<size_t>(row)];
  return QString("%1 %2").arg(row_label).arg(row);
}

GanttData byReplica(GanttData gantt, const MeshSpec& mesh) {
  if ((mesh.dp <= 1 && mesh.tp <= 1) || mesh.size() != gantt.rows) return gantt;
  // The row of each rank: replicas outermost, then stages, then tp ranks.
  std::vector<int> row_of(static_cast<size_t>(gantt.rows));
  std::vector<QString> names(row_of.size());
  std::vector<double> bubble(row_of.size(), 0.0);
  for (int rank = 0; rank < gantt.rows; ++rank) {
    const MeshCoordinates c = meshCoordinates(mesh, rank);
    const int row = (c.dp * mesh.pp + c.pp) * mesh.tp + c.tp;
    row_of[static_cast<size_t>(rank)] = row;
    names[static_cast<size_t>(row)] = QString("replica %1 · stage %2").arg(c.dp).arg(c.pp) +
                                      (mesh.tp > 1 ? QString(" · tp %1").arg(c.tp) : QString());
    if (static_cast<size_t>(rank) < gantt.row_bubble.size())
      bubble[static_cast<size_t>(row)] = gantt.row_bubble[static_cast<size_t>(rank)];
  }
  for (GanttBar& bar : gantt.bars) bar.row = row_of[static_cast<size_t>(bar.row)];
  for (GanttWait& wait : gantt.waits) wait.row = row_of[static_cast<size_t>(wait.row)];
  gantt.row_names = std::move(names);
  gantt.row_bubble = std::move(bubble);
  return gantt;
}

GanttData replayedGantt(const storage::BubbleSplit& split, const PipelinePlan& plan) {
  GanttData gantt = timelineGantt(split.replay, plan);
  gantt.time_unit = "ms";
  gantt.time_scale = 1000;  // µs on the bars
  return gantt;
}

}  // namespace ringmaster::ui
