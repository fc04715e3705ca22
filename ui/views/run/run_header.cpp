// RunHeader: the run view's header, drawn from a snapshot.
#include "views/run/run_header.h"

#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>
#include <algorithm>

#include "models/format.h"
#include "models/run_list_model.h"
#include "models/untrusted_text.h"

namespace ringmaster::ui {

RunHeader::RunHeader(int64_t run_id, QWidget* parent) : QWidget(parent) {
  // Title and status, progress (its text beside the bar, in the window's colours),
  // cancel, figures, root cause.
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* header = new QVBoxLayout();
  auto* first_line = new QHBoxLayout();
  title_ = new QLabel();
  title_->setTextFormat(Qt::RichText);  // its untrusted parts are escaped
  title_->setObjectName("runTitle");
  QFont title_font = title_->font();
  title_font.setPointSizeF(title_font.pointSizeF() * 1.3);
  title_font.setBold(true);
  title_->setFont(title_font);
  status_ = new QLabel();
  status_->setTextFormat(Qt::PlainText);
  status_->setObjectName("runStatus");
  progress_ = new QProgressBar();
  progress_->setObjectName("runProgress");
  progress_->setTextVisible(false);
  progress_->setFixedWidth(180);
  progress_text_ = new QLabel();
  progress_text_->setObjectName("runProgressText");
  cancel_ = new QPushButton("Cancel run…");
  cancel_->setObjectName("cancelRun");
  cancel_->setToolTip("Stop the run (Ctrl+.); what it recorded is kept");
  cancel_->hide();
  connect(cancel_, &QPushButton::clicked, this, &RunHeader::cancelClicked);
  figures_ = new QLabel();
  figures_->setObjectName("runFigures");
  figures_->setWordWrap(true);
  figures_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  title_->setText(QString("Run %1 · loading…").arg(run_id));
  first_line->addWidget(title_);
  first_line->addWidget(status_);
  scheduler_ = new QLabel();  // issue 35: the run's Slurm job, its state and why
  scheduler_->setTextFormat(Qt::PlainText);
  scheduler_->setObjectName("runScheduler");
  scheduler_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  scheduler_->hide();
  first_line->addWidget(scheduler_);
  first_line->addStretch(1);
  first_line->addWidget(progress_);
  first_line->addWidget(progress_text_);
  first_line->addWidget(cancel_);
  header->addLayout(first_line);
  header->addWidget(figures_);
  layout->addLayout(header);
  root_cause_ = new QLabel();
  root_cause_->setTextFormat(Qt::RichText);  // its untrusted parts are escaped
  root_cause_->setObjectName("rootCause");
  root_cause_->setWordWrap(true);
  root_cause_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  root_cause_->setStyleSheet(
      "QLabel { background: #fdecea; color: #8a1c1c; border: 1px solid #e6a6a1; "
      "border-radius: 4px; padding: 6px; }");
  root_cause_->hide();
  layout->addWidget(root_cause_);
  hang_ = new QLabel();
  hang_->setTextFormat(Qt::RichText);  // its untrusted parts are escaped
  hang_->setObjectName("hangBanner");
  hang_->setWordWrap(true);
  hang_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  hang_->setStyleSheet(
      "QLabel { background: #fff4e0; color: #7a4a00; border: 1px solid #f0c27a; "
      "border-radius: 4px; padding: 6px; }");
  hang_->hide();
  layout->addWidget(hang_);
}

void RunHeader::apply(const RunSnapshot& s) {
  applyTitle(s);
  applyProgress(s);
  figures_->setText(figures(s).join("  ·  "));
  applyBanners(s);
}

// The title (a program job names its script) and the status.
void RunHeader::applyTitle(const RunSnapshot& s) {
  // The command line in full on hover.
  QString script;
  if (s.report.program) {
    QStringList command = {untrustedLine(s.report.program->python),
                           untrustedLine(s.report.program->script)};
    for (const std::string& arg : s.report.program->args) command << untrustedLine(arg);
    script =
        QString(" · script %1")
            .arg(QFileInfo(untrustedLine(s.report.program->script)).fileName().toHtmlEscaped());
    title_->setToolTip(command.join(' '));
  } else {
    title_->setToolTip({});
  }
  title_->setText(QString("Run %1 · %2 · %3 · %4 rank%5%6")
                      .arg(s.run().id)
                      .arg(untrustedLine(s.run().name).toHtmlEscaped())
                      .arg(untrustedLine(s.run().strategy).toHtmlEscaped())
                      .arg(s.run().world_size)
                      .arg(s.run().world_size == 1 ? "" : "s")
                      .arg(script));
  status_->setText(untrustedLine(s.run().status));
  status_->setStyleSheet(QString("QLabel { color: white; background: %1; border-radius: 8px; "
                                 "padding: 2px 10px; font-weight: bold; }")
                             .arg(statusColor(s.run().status).name()));
  scheduler_->setText(s.run().scheduler ? schedulerLine(*s.run().scheduler) : QString());
  scheduler_->setVisible(s.run().scheduler.has_value());
}

// Steps done of those planned, with an ETA while running.
void RunHeader::applyProgress(const RunSnapshot& s) {
  const storage::RunSummary& summary = s.report.summary;
  const int64_t planned = s.report.planned_steps;
  if (planned > 0) {
    progress_->setRange(0, static_cast<int>(std::min<int64_t>(planned, INT32_MAX)));
    progress_->setValue(static_cast<int>(std::min(summary.final_step, planned)));
    QString eta;
    if (s.run().status == "running" && summary.final_step > 0 && summary.final_step < planned) {
      const double per_step = s.run().durationSeconds() / static_cast<double>(summary.final_step);
      eta = QString(" · ETA %1")
                .arg(formatDuration(per_step * static_cast<double>(planned - summary.final_step)));
    }
    progress_text_->setText(
        QString("step %1 / %2%3").arg(summary.final_step).arg(planned).arg(eta));
  } else {
    // No total known (a script that did not say how many steps it logs): no fraction and no ETA;
    // the bar is busy while the run is, full once it completed.
    const bool running = s.run().status == "running";
    progress_->setRange(0, running ? 0 : 1);
    progress_->setValue(s.run().status == "completed" ? 1 : 0);
    progress_text_->setText(QString("step %1").arg(summary.final_step));
  }
}

// The summary figures under the title (loss, validation loss, throughput, ...), each by its name
// in the table of figures (storage/query/figures.h).
QStringList RunHeader::figures(const RunSnapshot& s) {
  const storage::RunSummary& summary = s.report.summary;
  QStringList figures;
  // "Final" only for a run that completed, as on the web; a running or failed run's is its last.
  if (summary.final_loss)
    figures << QString("%1 %2").arg(
        s.run().status == "completed" ? figureName("final_loss") : QString("last loss"),
        formatFigure(*summary.final_loss));
  if (!s.report.evals.empty() && s.report.evals.back().val_loss) {
    figures << QString("val loss %1 (step %2)")
                   .arg(formatFigure(*s.report.evals.back().val_loss))
                   .arg(s.report.evals.back().step);
  }
  const auto percent = [](std::string_view id, double fraction) {
    return QString("%1 %2%").arg(figureName(id)).arg(fraction * 100, 0, 'f', 1);
  };
  if (summary.final_accuracy) figures << percent("final_accuracy", *summary.final_accuracy);
  if (summary.final_step > 0)
    figures << QString("%1 %2").arg(figureName("samples_per_second"),
                                    formatFigure(summary.samples_per_second))
            << QString("%1 %2").arg(figureName("mean_step_ms"), formatMs(summary.mean_step_ms))
            << percent("comm_share", summary.comm_share);
  else
    figures << "no step recorded";
  if (summary.bubble_fraction) figures << percent("bubble_fraction", *summary.bubble_fraction);
  // Throughput in tokens, and MFU where a peak FLOP/s was known (train.peak_tflops or the device).
  if (summary.tokens_per_second)
    figures << QString("%1 %2").arg(figureName("tokens_per_second"),
                                    formatFigure(*summary.tokens_per_second));
  if (summary.mfu) figures << percent("mfu", *summary.mfu);
  if (summary.lr) figures << QString("%1 %2").arg(figureName("lr"), formatFigure(*summary.lr));
  // fp16: the loss scale at the last step and the steps skipped on an inf or NaN gradient.
  if (summary.loss_scale) {
    const int64_t skipped = summary.skipped_steps.value_or(0);
    figures << QString("%1 %2 (%3 skipped step%4)")
                   .arg(figureName("loss_scale"))
                   .arg(*summary.loss_scale, 0, 'g', 17)  // a power of two, in full
                   .arg(skipped)
                   .arg(skipped == 1 ? "" : "s");
  }
  figures << QString("%1 %2").arg(figureName("duration_s"),
                                  formatDuration(s.run().durationSeconds()));
  return figures;
}

// The last lines the failed rank wrote on its stderr (issue 33), as a block under the root cause:
// argparse's message or a traceback's end, each line escaped as the log view escapes it.
QString RunHeader::errorOutputHtml(const std::vector<std::string>& lines) {
  if (lines.empty()) return {};
  QStringList escaped;
  for (const std::string& line : lines) escaped << untrustedMessageLine(line).toHtmlEscaped();
  return "<br>Its stderr ended:<pre style='margin: 4px 0 0 0'>" + escaped.join("\n") + "</pre>";
}

// The root cause of a failure, and the live hang view's diagnosis.
void RunHeader::applyBanners(const RunSnapshot& s) {
  if (s.run().error) {
    QString where;
    if (s.run().error_rank) where += QString("rank %1").arg(*s.run().error_rank);
    if (s.run().error_host)
      where += (where.isEmpty() ? "" : " on ") +
               QString("host %1").arg(untrustedLine(*s.run().error_host));
    root_cause_->setText(QString("<b>Root cause</b>%1: %2")
                             .arg(where.isEmpty() ? "" : " (" + where.toHtmlEscaped() + ")")
                             .arg(untrustedHtml(*s.run().error)) +
                         errorOutputHtml(s.report.error_output));
    root_cause_->show();
  } else {
    root_cause_->hide();
  }
  // The live hang view: which rank holds up which collective, long before its timeout.
  QStringList hangs;
  for (const storage::HangDiagnosis& hang : s.report.live.hangs)
    hangs << QString("<b>Hang</b>: %1").arg(untrustedHtml(hang.message));
  hang_->setText(hangs.join("<br>"));
  hang_->setToolTip(
      "From the ranks' progress reports (every 2 s): the collective some ranks have waited in "
      "for two reports or more, and the ranks that have not reached it or went silent");
  hang_->setVisible(!hangs.isEmpty());
}

void RunHeader::showReadError(const QString& error) {
  root_cause_->setText("Cannot read the run: " + error);
  root_cause_->show();
}

void RunHeader::setCancelVisible(bool visible) {
  cancel_->setVisible(visible);
}

QString RunHeader::statusText() const {
  return status_->text();
}

QString RunHeader::schedulerText() const {
  return scheduler_->isHidden() ? QString() : scheduler_->text();
}
QString RunHeader::rootCauseText() const {
  return root_cause_->isHidden() ? QString() : root_cause_->text();
}
QString RunHeader::hangText() const {
  return hang_->isHidden() ? QString() : hang_->text();
}
QString RunHeader::figuresText() const {
  return figures_->text();
}
QString RunHeader::progressText() const {
  return progress_text_->text();
}

}  // namespace ringmaster::ui
