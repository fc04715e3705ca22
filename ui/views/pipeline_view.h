// The pipeline schedule view: the measured stage x time Gantt of a chosen step (F and B per
// micro-batch, idle time visible), its bubble per stage beside the theoretical one, the planned
// schedule (the engine's, with unit costs) below for comparison, and the planned schedule
// replayed with the step's measured stage costs, which splits the gap between the planned and the
// measured bubble into stage imbalance and runtime overhead. The step is read off the GUI thread
// (BackgroundJobs).
#pragma once

#include <QWidget>
#include <optional>

#include "data/schedule_gantt.h"

class QComboBox;
class QLabel;

namespace ringmaster::ui {

class BackgroundJobs;
class GanttChart;

class PipelineView : public QWidget {
  Q_OBJECT

 public:
  explicit PipelineView(QWidget* parent = nullptr);

  // The run to show: its database, id, spec and the steps that have schedule events (the step
  // list grows while the run is live; the chosen step stays chosen and is read again).
  void setRun(const std::string& db_path, int64_t run_id, const std::string& spec_json,
              const std::vector<int64_t>& scheduled_steps);
  void showStep(int64_t step);
  // The run's mesh (RunSnapshot's meshOf), before setRun: with several replicas or tp ranks, the
  // measured rows by replica (byReplica).
  void setMesh(const MeshSpec& mesh) { mesh_ = mesh; }

  std::optional<int64_t> shownStep() const { return shown_step_; }
  const GanttChart& measured() const { return *measured_; }
  const GanttChart& planned() const { return *planned_; }
  // "Planned with measured costs": empty when the step's split cannot be made.
  const GanttChart& replayed() const { return *replayed_; }
  QString bubbleText() const;
  // The three bubbles and the gap's split in words; empty without a split.
  QString splitText() const;
  BackgroundJobs* jobs() const { return jobs_; }

 private:
  // A step as read: its schedule, and the split of its bubble when the plan is known.
  struct LoadedStep {
    std::optional<storage::StepSchedule> schedule;
    std::optional<storage::BubbleSplit> split;
  };
  void applyStep(const LoadedStep& step);

  BackgroundJobs* jobs_ = nullptr;
  std::string db_path_;
  int64_t run_id_ = 0;
  int ranks_ = 0;
  MeshSpec mesh_;  // the measured rows by replica where dp or tp > 1 (byReplica)
  std::optional<PlannedSchedule> plan_;
  std::optional<int64_t> shown_step_;
  // The shown step's time across ranks spent waiting for other stages and receiving inputs, ms.
  double shown_wait_ms_ = 0, shown_transfer_ms_ = 0;
  QComboBox* steps_ = nullptr;
  QLabel* bubble_ = nullptr;
  GanttChart* measured_ = nullptr;
  GanttChart* planned_ = nullptr;
  QLabel* planned_title_ = nullptr;
  std::optional<storage::BubbleSplit> split_;
  QLabel* split_label_ = nullptr;
  GanttChart* replayed_ = nullptr;
};

}  // namespace ringmaster::ui
