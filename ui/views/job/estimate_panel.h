// The job editor's estimate panel: before launch, the memory each rank will need
// (spec/memory_estimate.h, the formula of each part on hover) and, for a pipeline, the planned
// schedule with its bubble (data/schedule_gantt.h), and a hint when that bubble is above half the
// step. A program job gets neither: its script builds
// its own model. It shows a spec; it edits nothing.
#pragma once

#include <QWidget>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "spec/job_spec.h"
#include "spec/memory_estimate.h"
#include "spec/spec_fields.h"

class QLabel;

namespace ringmaster::ui {

class GanttChart;

class EstimatePanel : public QWidget {
  Q_OBJECT

 public:
  explicit EstimatePanel(QWidget* parent = nullptr);

  // The estimates of the document's spec (nullopt while it has problems).
  void showEstimates(const nlohmann::json& document, const std::optional<JobSpec>& spec);

  QString memoryText() const;
  // The planned schedule's line ("" when hidden) and its chart.
  QString plannedText() const;
  const GanttChart& plannedSchedule() const { return *planned_; }
  // The hint shown when the planned bubble is above kBubbleHintAbove of the step ("" when none).
  QString bubbleHintText() const;
  static constexpr double kBubbleHintAbove = 0.5;

 private:
  void showMemory(const std::vector<RankMemoryEstimate>& estimates);
  void showBubbleHint(double bubble_fraction, int64_t micro_batches);

  QLabel* memory_ = nullptr;
  QLabel* planned_label_ = nullptr;
  QLabel* bubble_hint_ = nullptr;
  GanttChart* planned_ = nullptr;
};

}  // namespace ringmaster::ui
