// PipelineView: a step picker, the measured, planned and replayed Gantt charts, the bubble figures
// and their split; a step's schedule is read and replayed by one background job ("step"), the
// newest choice winning.
#include "views/pipeline_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "core/error.h"
#include "data/background_jobs.h"
#include "db/database.h"
#include "models/untrusted_text.h"
#include "widgets/gantt_chart.h"

namespace ringmaster::ui {

PipelineView::PipelineView(QWidget* parent) : QWidget(parent) {
  jobs_ = new BackgroundJobs(this);
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout();
  bar->addWidget(new QLabel("Step:"));
  steps_ = new QComboBox();
  steps_->setObjectName("pipelineStep");
  steps_->setMinimumContentsLength(8);
  bar->addWidget(steps_);
  bubble_ = new QLabel();
  bubble_->setObjectName("pipelineBubble");
  bubble_->setWordWrap(true);  // the figures are long: they wrap rather than widen the window
  bar->addWidget(bubble_, 1);
  layout->addLayout(bar);
  split_label_ = new QLabel();
  split_label_->setObjectName("pipelineBubbleSplit");
  split_label_->setWordWrap(true);
  layout->addWidget(split_label_);
  auto* measured_title = new QLabel(
      "<b>Measured</b> (times on rank 0's clock): bars are compute; a grey hatched strip "
      "before one is its wait for another stage, a dark one its input's transfer");
  measured_title->setWordWrap(true);
  layout->addWidget(measured_title);
  measured_ = new GanttChart();
  measured_->setObjectName("measuredGantt");
  layout->addWidget(measured_, 3);
  planned_title_ = new QLabel("<b>Planned</b> (the engine's schedule with unit costs)");
  layout->addWidget(planned_title_);
  planned_ = new GanttChart();
  planned_->setObjectName("plannedGantt");
  layout->addWidget(planned_, 2);
  auto* replayed_title = new QLabel(
      "<b>Planned with measured costs</b> (the planned schedule replayed with each stage's median "
      "compute time in this step: no waits, no transfers)");
  replayed_title->setWordWrap(true);
  layout->addWidget(replayed_title);
  replayed_ = new GanttChart();
  replayed_->setObjectName("replayedGantt");
  layout->addWidget(replayed_, 2);
  connect(steps_, &QComboBox::activated, this,
          [this](int index) { showStep(steps_->itemData(index).toLongLong()); });
}

void PipelineView::setRun(const std::string& db_path, int64_t run_id, const std::string& spec_json,
                          const std::vector<int64_t>& scheduled_steps) {
  const bool new_run = db_path != db_path_ || run_id != run_id_;
  db_path_ = db_path;
  run_id_ = run_id;
  if (new_run) {
    plan_.reset();
    shown_step_.reset();
    split_.reset();
    replayed_->setData({});
    split_label_->clear();
    SpecParseResult parsed = parseJobSpec(spec_json);
    // The measured schedule needs only the ranks: the recorded mesh's where the spec does not
    // parse (written by a later version); the plan needs the spec.
    ranks_ = mesh_.size();
    if (parsed.ok()) {
      ranks_ = worldSize(*parsed.spec);
      try {
        plan_ = plannedSchedule(*parsed.spec);
      } catch (const Error& e) {
        planned_title_->setText(QString("<b>Planned</b>: %1").arg(untrustedHtml(e.message())));
      }
    }
    planned_->setData(plan_ ? plan_->gantt : GanttData{});
  }
  if (static_cast<size_t>(steps_->count()) != scheduled_steps.size()) {
    steps_->clear();
    for (int64_t step : scheduled_steps)
      steps_->addItem(QString::number(step), QVariant::fromValue<qlonglong>(step));
  }
  if (shown_step_) {
    // Reloaded with every snapshot: while the run records, a step's actions arrive rank by rank
    // across the recorder's transactions, so what was read before may have been part of the step.
    showStep(*shown_step_);
  } else if (!scheduled_steps.empty()) {
    // The second scheduled step: the first includes the warm-up.
    showStep(scheduled_steps.size() > 1 ? scheduled_steps[1] : scheduled_steps[0]);
  } else {
    bubble_->setText(bubbleText());
  }
}

void PipelineView::showStep(int64_t step) {
  shown_step_ = step;
  const int index = steps_->findData(QVariant::fromValue<qlonglong>(step));
  if (index >= 0) steps_->setCurrentIndex(index);
  std::optional<PipelinePlan> plan;
  if (plan_) plan = plan_->plan;
  jobs_->run<LoadedStep>(
      "step",
      [path = db_path_, run_id = run_id_, step, plan](const JobToken&) {
        storage::Database db(path, storage::readingOptions(path));
        LoadedStep loaded{storage::loadStepSchedule(db, run_id, step), std::nullopt};
        if (loaded.schedule && plan) loaded.split = storage::splitBubble(*plan, {*loaded.schedule});
        return loaded;
      },
      [this](const LoadedStep& loaded) { applyStep(loaded); },
      [this](const QString& error) {
        applyStep({});
        bubble_->setText("Cannot read the step: " + untrustedLine(error.toStdString()));
      });
}

void PipelineView::applyStep(const LoadedStep& step) {
  const std::optional<storage::StepSchedule>& schedule = step.schedule;
  measured_->setData(schedule ? byReplica(measuredGantt(*schedule, ranks_), mesh_) : GanttData{});
  split_ = step.split;
  replayed_->setData(split_ && plan_ ? replayedGantt(*split_, plan_->plan) : GanttData{});
  split_label_->setText(splitText());
  shown_wait_ms_ = shown_transfer_ms_ = 0;
  if (schedule) {
    for (const storage::RankBubble& rank : schedule->ranks) {
      shown_wait_ms_ += rank.wait_us / 1000;
      shown_transfer_ms_ += rank.transfer_us / 1000;
    }
  }
  bubble_->setText(bubbleText());
}

QString PipelineView::bubbleText() const {
  QStringList parts;
  if (shown_step_) {
    double sum = 0;
    const auto& rows = measured_->data().row_bubble;
    for (double b : rows) sum += b;
    if (!rows.empty())
      parts << QString(
                   "measured bubble %1% (step %2: idle or waiting; all stages waited %3 ms "
                   "for others, %4 ms for transfers)")
                   .arg(sum / static_cast<double>(rows.size()) * 100, 0, 'f', 1)
                   .arg(*shown_step_)
                   .arg(shown_wait_ms_, 0, 'f', 1)
                   .arg(shown_transfer_ms_, 0, 'f', 1);
  }
  if (plan_)
    parts << QString("planned %1%").arg(plan_->bubble_fraction * 100, 0, 'f', 1)
          << QString("theoretical %1%").arg(plan_->theoretical_bubble * 100, 0, 'f', 1);
  return parts.join(" · ");
}

QString PipelineView::splitText() const {
  if (!split_) return {};
  const QString sentence = QString::fromStdString(storage::describeBubbleSplit(*split_));
  return QString(
             "Bubble: measured %1% · planned with measured costs %2% · planned (unit costs) "
             "%3%. The gap of %4 pts is %5.")
      .arg(split_->measured * 100, 0, 'f', 1)
      .arg(split_->replayed * 100, 0, 'f', 1)
      .arg(split_->planned * 100, 0, 'f', 1)
      .arg((split_->measured - split_->planned) * 100, 0, 'f', 1)
      .arg(sentence);
}

}  // namespace ringmaster::ui
