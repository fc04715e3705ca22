// LogsTab: the run's log lines, filtered by rank and text.
#include "views/run/logs_tab.h"

#include <QComboBox>
#include <QDateTime>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QTextBlock>
#include <QVBoxLayout>
#include <algorithm>

#include "models/untrusted_text.h"

namespace ringmaster::ui {

LogsTab::LogsTab(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout();
  bar->addWidget(new QLabel("Rank:"));
  log_rank_ = new QComboBox();
  log_rank_->setObjectName("logRank");
  log_rank_->addItem("all", -2);
  log_rank_->addItem("recorder", -1);
  bar->addWidget(log_rank_);
  log_filter_ = new QLineEdit();
  log_filter_->setObjectName("logFilter");
  log_filter_->setPlaceholderText("filter (text in the line)");
  log_filter_->setClearButtonEnabled(true);
  bar->addWidget(log_filter_, 1);
  layout->addLayout(bar);
  logs_ = new QPlainTextEdit();
  logs_->setObjectName("logs");
  logs_->setReadOnly(true);
  logs_->setFont(QFont("monospace", font().pointSize() - 1));
  logs_->setLineWrapMode(QPlainTextEdit::NoWrap);
  layout->addWidget(logs_, 1);
  connect(log_rank_, &QComboBox::activated, this, [this] { showLines(); });
  connect(log_filter_, &QLineEdit::textChanged, this, [this] { showLines(); });
}

void LogsTab::apply(const RunSnapshot& snapshot) {
  const bool changed = !applied_ || logs_seen_.size() != snapshot.logs.size() ||
                       (!snapshot.logs.empty() && logs_seen_.back().t != snapshot.logs.back().t);
  applied_ = true;
  world_size_ = snapshot.run().world_size;
  if (!changed) return;
  logs_seen_ = snapshot.logs;
  showLines();
}

void LogsTab::showLines() {
  const int rank = log_rank_->currentData().toInt();
  const QString filter = log_filter_->text();
  QStringList lines;
  int first_error = -1;
  for (const auto& line : logs_seen_) {
    if (rank == -1 && line.rank) continue;
    if (rank >= 0 && line.rank != rank) continue;
    const QString who = line.rank ? QString("rank %1").arg(*line.rank) : QString("recorder");
    const QString text = QString("%1  %2  %3: %4")
                             .arg(QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(line.t * 1000))
                                      .toString("hh:mm:ss.zzz"))
                             .arg(who, -8)
                             .arg(untrustedLine(line.level))
                             .arg(untrustedMessageLine(line.message));
    if (!filter.isEmpty() && !text.contains(filter, Qt::CaseInsensitive)) continue;
    if (first_error < 0 && line.level == "error") first_error = static_cast<int>(lines.size());
    lines << text;
  }
  // An entry per rank, after "all" and "recorder", in rank order: only the ones not there yet are
  // added (looking each rank up among the entries, as this did, took seconds of the GUI thread
  // for 16,384 ranks).
  for (int r = std::max(log_rank_->count() - 2, 0); r < world_size_; ++r)
    log_rank_->addItem(QString("rank %1").arg(r), r);
  logs_->setPlainText(lines.join('\n'));
  // At the first error when there is one (where a failure starts), else at the last line; at
  // the start of the line either way, so the view opens at the left edge, never scrolled to the
  // end of a long line.
  const int line_shown = first_error >= 0 ? first_error : static_cast<int>(lines.size()) - 1;
  QTextCursor cursor(logs_->document()->findBlockByNumber(std::max(line_shown, 0)));
  logs_->setTextCursor(cursor);
  logs_->ensureCursorVisible();
  logs_->horizontalScrollBar()->setValue(logs_->horizontalScrollBar()->minimum());
}

QString LogsTab::text() const {
  return logs_->toPlainText();
}

}  // namespace ringmaster::ui
