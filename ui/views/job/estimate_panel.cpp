// EstimatePanel: the memory estimate per rank as a table (ranks with the same figures share a
// column) and the planned pipeline schedule.
#include "views/job/estimate_panel.h"

#include <QGroupBox>
#include <QLabel>
#include <QTextDocument>
#include <QVBoxLayout>

#include "data/schedule_gantt.h"
#include "models/format.h"
#include "widgets/gantt_chart.h"

namespace ringmaster::ui {

EstimatePanel::EstimatePanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* memory_box = new QGroupBox("Memory per rank (estimate; hover for the formula)");
  auto* memory_layout = new QVBoxLayout(memory_box);
  memory_ = new QLabel();
  memory_->setObjectName("memoryEstimate");
  memory_->setTextFormat(Qt::RichText);
  memory_->setWordWrap(true);  // the parts' names wrap in a narrow column
  memory_layout->addWidget(memory_);
  layout->addWidget(memory_box);
  planned_label_ = new QLabel();
  planned_label_->setObjectName("plannedBubble");
  planned_label_->setWordWrap(true);
  layout->addWidget(planned_label_);
  bubble_hint_ = new QLabel();
  bubble_hint_->setObjectName("bubbleHint");
  bubble_hint_->setWordWrap(true);
  bubble_hint_->setStyleSheet("color: #8a5300;");
  bubble_hint_->hide();
  layout->addWidget(bubble_hint_);
  planned_ = new GanttChart();
  planned_->setObjectName("editorPlannedGantt");
  layout->addWidget(planned_, 1);
}

void EstimatePanel::showEstimates(const nlohmann::json& document,
                                  const std::optional<JobSpec>& spec) {
  bubble_hint_->hide();
  if (jobKindOf(document) == JobKind::kProgram) {
    // The script builds its own model: nothing here describes it, and the engine's defaults are
    // no estimate of it. The run view shows what each rank measured.
    memory_->setText(
        "<i>Does not apply to a program job</i>: the script builds its own model. "
        "The run view shows each rank's measured memory.");
    memory_->setToolTip({});
    planned_label_->setText(
        "<b>Planned schedule</b>: does not apply to a program job (the "
        "script runs its own schedule).");
    planned_label_->show();
    planned_->hide();
    return;
  }
  if (!spec) {
    memory_->setText("<i>fix the spec to see the estimate</i>");
    memory_->setToolTip({});
    planned_label_->hide();
    planned_->hide();
    return;
  }
  // A pipeline the parser accepts can still be one the engine's plan refuses (interleaved_1f1b
  // with micro-batches not a multiple of the ranks): its message, here, for both estimates.
  try {
    showMemory(estimateMemory(*spec));
  } catch (const std::exception& e) {
    memory_->setText("<i>no estimate</i>: " + QString::fromUtf8(e.what()).toHtmlEscaped());
    memory_->setToolTip({});
  }
  try {
    if (auto planned = ui::plannedSchedule(*spec)) {
      planned_->setData(planned->gantt);
      planned_label_->setText(QString("<b>Planned schedule</b> (unit costs): bubble %1%, "
                                      "textbook %2%")
                                  .arg(planned->bubble_fraction * 100, 0, 'f', 1)
                                  .arg(planned->theoretical_bubble * 100, 0, 'f', 1));
      planned_label_->show();
      planned_->show();
      showBubbleHint(planned->bubble_fraction, spec->train.micro_batches);
      return;
    }
  } catch (const std::exception& e) {
    planned_label_->setText(
        QString("Planned schedule: %1").arg(QString::fromUtf8(e.what()).toHtmlEscaped()));
    planned_label_->show();
    planned_->hide();
    return;
  }
  planned_label_->hide();
  planned_->hide();
}

void EstimatePanel::showMemory(const std::vector<RankMemoryEstimate>& estimates) {
  // Ranks with the same figures share a column, so a big world stays readable.
  struct Column {
    int first_rank, last_rank;
    const RankMemoryEstimate* estimate;
    QString label() const {
      return first_rank == last_rank ? QString("rank %1").arg(first_rank)
                                     : QString("ranks %1–%2").arg(first_rank).arg(last_rank);
    }
  };
  std::vector<Column> columns;
  for (const auto& estimate : estimates) {
    if (!columns.empty() && columns.back().estimate->total() == estimate.total())
      columns.back().last_rank = estimate.rank;
    else
      columns.push_back({estimate.rank, estimate.rank, &estimate});
  }
  QString html = "<table cellspacing='0' cellpadding='3'><tr><th></th>";
  for (const Column& column : columns) html += "<th align='right'>" + column.label() + "</th>";
  html += "</tr>";
  QStringList formulas;
  const auto& first = *columns.front().estimate;
  for (size_t p = 0; p < first.parts.size(); ++p) {
    html += "<tr><td>" + QString::fromStdString(first.parts[p].name) + "</td>";
    for (const Column& column : columns)
      html += "<td align='right'>" +
              (p < column.estimate->parts.size() ? formatBytes(column.estimate->parts[p].bytes)
                                                 : QString()) +
              "</td>";
    html += "</tr>";
    formulas << QString("%1: %2").arg(QString::fromStdString(first.parts[p].name),
                                      QString::fromStdString(first.parts[p].formula));
  }
  html += "<tr><td><b>total</b></td>";
  for (const Column& column : columns)
    html += "<td align='right'><b>" + formatBytes(column.estimate->total()) + "</b></td>";
  html += "</tr></table>";
  memory_->setText(html);
  memory_->setToolTip(formulas.join('\n'));
}

// Above half the step idle, a hint at what shrinks the bubble.
void EstimatePanel::showBubbleHint(double bubble_fraction, int64_t micro_batches) {
  if (bubble_fraction <= kBubbleHintAbove) return;
  bubble_hint_->setText(
      QString("The planned bubble is %1% of the step, above %2%: each stage idles more than it "
              "computes. More micro-batches (now %3, beside the schedule in the form) or the "
              "interleaved schedule shrink it.")
          .arg(bubble_fraction * 100, 0, 'f', 1)
          .arg(kBubbleHintAbove * 100, 0, 'f', 0)
          .arg(micro_batches));
  bubble_hint_->show();
}

QString EstimatePanel::memoryText() const {
  QTextDocument doc;
  doc.setHtml(memory_->text());
  return doc.toPlainText();
}

QString EstimatePanel::plannedText() const {
  return planned_label_->isHidden() ? QString() : planned_label_->text();
}

QString EstimatePanel::bubbleHintText() const {
  return bubble_hint_->isHidden() ? QString() : bubble_hint_->text();
}

}  // namespace ringmaster::ui
