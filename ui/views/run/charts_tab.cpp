// ChartsTab: the charts a run shows in their panels, their shared controls, what they ask to read
// and how a snapshot becomes their lines (bands, a line per rank, the validation loss, one line per
// op).
#include "views/run/charts_tab.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QVBoxLayout>
#include <algorithm>
#include <set>

#include "models/untrusted_text.h"
#include "views/run/run_colors.h"

namespace ringmaster::ui {

namespace {

constexpr double kMiB = 1.0 / (1 << 20);

// The desktop shows bytes as MiB.
QString shownUnit(std::string_view unit) {
  return unit == "bytes" ? QString("MiB") : QString::fromUtf8(unit.data(), unit.size());
}

QString metricLabel(const ChartSpec& spec, const std::string& metric) {
  for (const ChartMetric& m : spec.metrics)
    if (m.key == metric) return untrustedLine(m.label);
  return untrustedLine(metric);
}

// A chart's object name, which its exported files are named after: its title with anything but
// letters, digits, '_' and '-' as '_' (a metric's own name may hold '/').
QString chartObjectName(const QString& title) {
  static const QRegularExpression kNotAFileNameCharacter("[^A-Za-z0-9_-]");
  return QString(title).replace(kNotAFileNameCharacter, "_");
}

// Buckets to chart points: x at the bucket's middle step, the envelope only when a bucket holds
// more than one step.
void addSeries(ChartLine& line, const storage::Series& series, double scale, bool envelope) {
  line.steps_per_point = series.bucket_width;
  line.centre_label = "mean";
  for (const auto& bucket : series.buckets) {
    const double x = bucket.summary.count == 1
                         ? static_cast<double>(bucket.summary.first_step)
                         : static_cast<double>(bucket.start) + series.bucket_width / 2.0;
    line.centre.append({x, bucket.summary.mean() * scale});
    if (envelope && series.bucket_width > 1) {
      line.low.append({x, bucket.summary.min * scale});
      line.high.append({x, bucket.summary.max * scale});
    }
  }
}

ChartLine bandLine(const storage::Band& band, const QString& name, QColor color, double scale) {
  ChartLine line;
  line.name = name;
  line.steps_per_point = band.bucket_width;
  line.centre_label = "median";
  line.color = color;
  for (const auto& bucket : band.buckets) {
    const double x = static_cast<double>(bucket.start) + band.bucket_width / 2.0;
    line.centre.append({x, bucket.median * scale});
    line.low.append({x, bucket.min * scale});
    line.high.append({x, bucket.max * scale});
  }
  return line;
}

// The loss chart's validation loss (the eval events): one point per evaluation, as evaluated
// (every rank reports the same), within the chart's zoom; nullopt for a run without evaluations.
std::optional<ChartLine> validationLossLine(const std::vector<storage::EvalPoint>& evals,
                                            const MetricChart& chart) {
  if (evals.empty()) return std::nullopt;
  ChartLine line;
  line.name = "validation loss";
  line.color = QColor(0x20, 0x20, 0x20);
  line.centre_label = "evaluated";
  for (const storage::EvalPoint& eval : evals) {
    if (!eval.val_loss) continue;  // diverged: nothing to draw
    if (chart.zoomed() &&
        (eval.step < chart.zoomRange().first || eval.step > chart.zoomRange().second))
      continue;
    line.centre.append({static_cast<double>(eval.step), *eval.val_loss});
  }
  return line;
}

// Steps to seconds since the start: each bucket's first and last step at its earliest and latest
// wall time.
StepClock stepClock(const RunSnapshot& s) {
  std::vector<std::pair<double, double>> knots;
  for (const auto& bucket : s.wall_clock.buckets) {
    knots.emplace_back(static_cast<double>(bucket.summary.first_step),
                       bucket.summary.min - s.wall_clock_origin);
    knots.emplace_back(static_cast<double>(bucket.summary.last_step),
                       bucket.summary.max - s.wall_clock_origin);
  }
  return StepClock(std::move(knots));
}

// Each restart: where its attempt began, and the earlier attempt's steps it ran again (the run
// report's rolled_back).
std::vector<AttemptMark> attemptMarks(const RunSnapshot& s) {
  std::vector<AttemptMark> marks;
  for (size_t i = 1; i < s.report.attempts.size(); ++i) {
    const storage::AttemptReport& attempt = s.report.attempts[i];
    if (!attempt.record.first_step) continue;
    marks.push_back({.attempt = attempt.record.attempt,
                     .first_step = *attempt.record.first_step,
                     .rolled_back = attempt.rolled_back});
  }
  return marks;
}

}  // namespace

ChartsTab::ChartsTab(int64_t run_id, QWidget* parent) : QWidget(parent), run_id_(run_id) {
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(buildControls());
  // The charts scroll when the window is too short for them at their least readable size,
  // rather than setting the window's minimum height (issue 15: the window grew 60 px when a
  // failure banner appeared).
  page_ = new QWidget();
  page_layout_ = new QVBoxLayout(page_);
  page_layout_->setContentsMargins(0, 0, 0, 0);
  layOutCharts(chartsFor(facts_));  // before the first snapshot: the charts of every run
  auto* scroll = new QScrollArea();
  scroll->setObjectName("chartsScroll");
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(page_);
  layout->addWidget(scroll, 1);
}

QLayout* ChartsTab::buildControls() {
  auto* bar = new QHBoxLayout();
  bar->addWidget(new QLabel("Ranks:"));
  rank_choice_ = new QComboBox();
  rank_choice_->setObjectName("rankChoice");
  rank_choice_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  bar->addWidget(rank_choice_);
  // One smoothing and one x axis for every chart of the run.
  bar->addSpacing(12);
  bar->addWidget(new QLabel("Smoothing:"));
  smoothing_ = new QDoubleSpinBox();
  smoothing_->setObjectName("chartSmoothing");
  smoothing_->setRange(0, 0.99);
  smoothing_->setSingleStep(0.05);
  smoothing_->setDecimals(2);
  smoothing_->setToolTip(
      "TensorBoard's smoothing: a debiased exponential moving average of the points shown, "
      "weight 0 (off) to 0.99; the raw line stays faint behind");
  bar->addWidget(smoothing_);
  time_axis_ = new QCheckBox("Wall time");
  time_axis_->setObjectName("chartTimeAxis");
  time_axis_->setToolTip(
      "The x axis in seconds since the run started (rank 0's clock) instead "
      "of steps");
  bar->addWidget(time_axis_);
  connect(smoothing_, &QDoubleSpinBox::valueChanged, this, [this](double weight) {
    for (const TableChart& c : table_) c.chart->setSmoothing(weight);
  });
  connect(time_axis_, &QCheckBox::toggled, this, [this](bool on) {
    for (const TableChart& c : table_) c.chart->setTimeAxis(on);
  });
  auto* export_button = new QPushButton("Export charts…");
  export_button->setObjectName("exportCharts");
  // What the last export wrote, in the bar's spare width (a long folder must not widen the
  // window; the whole text is its tooltip).
  export_note_ = new QLabel();
  export_note_->setObjectName("exportNote");
  export_note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  export_note_->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
  export_note_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  bar->addWidget(export_note_, 1);
  bar->addWidget(export_button);
  connect(rank_choice_, &QComboBox::activated, this, [this](int index) {
    const int data = rank_choice_->itemData(index).toInt();
    if (data == -1)
      showRanks(RankMode::kEach);
    else if (data == -2)
      showRanks(RankMode::kBand);
    else
      showRanks(RankMode::kOne, data);
  });
  connect(export_button, &QPushButton::clicked, this, &ChartsTab::openExportDialog);
  return bar;
}

// The chart of this id, made the first time a run shows it, with the shared controls' settings and
// the other charts' zoom.
ChartsTab::TableChart& ChartsTab::chartFor(const ChartSpec& spec) {
  for (TableChart& made : table_)
    if (made.spec.id == spec.id) return made;
  const QString title = untrustedLine(spec.title);
  auto* chart = new MetricChart(title, shownUnit(spec.unit), page_);
  chart->setObjectName(chartObjectName(title));
  chart->setSmoothing(smoothing_->value());
  chart->setTimeAxis(time_axis_->isChecked());
  if (!shown_.empty() && shown_.front()->chart->zoomed())
    chart->setZoomRange(shown_.front()->chart->zoomRange().first,
                        shown_.front()->chart->zoomRange().second);
  table_.push_back({spec, chart, spec.unit == "bytes" ? kMiB : 1.0});
  linkZoom(chart);
  return table_.back();
}

// A panel's group box, titled by its prefix (the default one "Charts"), made when first needed.
ChartsTab::Panel& ChartsTab::panelFor(const std::string& name) {
  if (auto it = panels_.find(name); it != panels_.end()) return it->second;
  auto* box = new QGroupBox(
      name.empty() ? QString::fromUtf8(kDefaultPanelTitle.data(), kDefaultPanelTitle.size())
                   : untrustedLine(name),
      page_);
  box->setObjectName("chartPanel_" + chartObjectName(QString::fromStdString(name)));
  auto* grid = new QGridLayout(box);
  grid->setContentsMargins(4, 4, 4, 4);
  // Two columns of equal width, a panel of one chart included.
  grid->setColumnStretch(0, 1);
  grid->setColumnStretch(1, 1);
  return panels_.emplace(name, Panel{box, grid}).first->second;
}

// Zoom is linked: every chart follows the one zoomed and each re-reads that range.
void ChartsTab::linkZoom(MetricChart* chart) {
  connect(chart, &MetricChart::rangeChanged, this, [this, chart] {
    for (const TableChart& other : table_) {
      if (other.chart == chart) continue;
      if (chart->zoomed())
        other.chart->setZoomRange(chart->zoomRange().first, chart->zoomRange().second);
      else
        other.chart->clearZoom();
    }
    emit reloadWanted();
  });
}

// The run's charts, two to a row in their panels, the panels in order; the others hidden.
void ChartsTab::layOutCharts(const std::vector<ChartSpec>& charts) {
  shown_.clear();
  for (const ChartSpec& spec : charts) shown_.push_back(&chartFor(spec));
  for (TableChart& c : table_) {
    if (QLayout* grid = c.chart->parentWidget() ? c.chart->parentWidget()->layout() : nullptr)
      grid->removeWidget(c.chart);
    c.chart->setVisible(false);
  }
  for (auto& [name, panel] : panels_) {
    page_layout_->removeWidget(panel.box);
    panel.box->setVisible(false);
  }
  panels_shown_.clear();
  std::map<std::string, int> placed;  // charts per panel so far
  for (const TableChart* c : shown_) {
    Panel& panel = panelFor(c->spec.panel);
    int& index = placed[c->spec.panel];
    if (index == 0) {
      panels_shown_.push_back(c->spec.panel);
      page_layout_->addWidget(panel.box);
      panel.box->setVisible(true);
    }
    panel.grid->addWidget(c->chart, index / 2, index % 2);
    c->chart->setVisible(true);
    ++index;
  }
}

bool ChartsTab::setRunFacts(const ChartRunFacts& facts) {
  const std::vector<ChartSpec> charts = chartsFor(facts);
  facts_ = facts;
  bool changed = charts.size() != shown_.size();
  for (size_t i = 0; !changed && i < charts.size(); ++i)
    changed = charts[i].id != shown_[i]->spec.id;
  if (changed) layOutCharts(charts);
  return changed;
}

void ChartsTab::setWorldSize(int world_size, bool first_snapshot) {
  rank_choice_->clear();
  rank_choice_->addItem("Every rank", -1);
  rank_choice_->addItem("All ranks: min / median / max", -2);
  for (int r = 0; r < world_size; ++r) rank_choice_->addItem(QString("Rank %1").arg(r), r);
  if (first_snapshot && world_size > 8) rank_mode_ = RankMode::kBand;
  const int data = rank_mode_ == RankMode::kEach   ? -1
                   : rank_mode_ == RankMode::kBand ? -2
                                                   : one_rank_;
  rank_choice_->setCurrentIndex(std::max(rank_choice_->findData(data), 0));
}

void ChartsTab::setStepsPerEvent(int64_t every) {
  // A step event every N steps carries the means of the steps since the previous one: say so.
  for (const TableChart& c : table_)
    if (c.spec.id == "step")
      c.chart->setTitleNote(every > 1 ? QString(" (mean of every %1 steps)").arg(every)
                                      : QString(" (every step)"));
}

void ChartsTab::showRanks(RankMode mode, int rank) {
  rank_mode_ = mode;
  one_rank_ = rank;
  const int data = mode == RankMode::kEach ? -1 : mode == RankMode::kBand ? -2 : rank;
  const int index = rank_choice_->findData(data);
  if (index >= 0) rank_choice_->setCurrentIndex(index);
  emit reloadWanted();
}

void ChartsTab::addRequests(SnapshotRequest& request, int world_size) const {
  for (const TableChart* shown : shown_) {
    ChartRequest chart;
    for (const ChartMetric& metric : shown->spec.metrics) chart.metrics.emplace_back(metric.key);
    chart.range.buckets = shown->chart->bucketsWanted();
    if (shown->chart->zoomed()) {
      chart.range.from_step = shown->chart->zoomRange().first;
      chart.range.to_step = shown->chart->zoomRange().second;
    }
    if (shown->spec.source == ChartSource::kCommByOp) {
      request.comm_by_op = CommByOpRequest{chart.range, std::nullopt};
      if (rank_mode_ == RankMode::kOne) request.comm_by_op->rank = one_rank_;
      continue;
    }
    // Every rank: a line each, or the band where the table says so (several metrics).
    if (rank_mode_ == RankMode::kOne) {
      chart.ranks = {one_rank_};
    } else if (rank_mode_ == RankMode::kEach && shown->spec.every_rank == EveryRank::kLinePerRank) {
      for (int r = 0; r < std::max(world_size, 1); ++r) chart.ranks.push_back(r);
    } else {
      for (const RankGroup& group : rank_groups_)
        chart.band_groups.emplace_back(group.label, group.ranks);
    }
    request.charts.push_back(std::move(chart));
  }
  // Wall times over the charts' steps (linked, so one range), at the finest chart's resolution.
  storage::SeriesRange clock{.buckets = 1};
  for (const TableChart* shown : shown_) {
    clock.buckets = std::max(clock.buckets, shown->chart->bucketsWanted());
    if (shown->chart->zoomed()) {
      clock.from_step = shown->chart->zoomRange().first;
      clock.to_step = shown->chart->zoomRange().second;
    }
  }
  request.wall_clock = clock;
}

void ChartsTab::apply(const RunSnapshot& s) {
  const StepClock clock = stepClock(s);
  const std::vector<AttemptMark> marks = attemptMarks(s);
  for (const TableChart& c : table_) {
    c.chart->setStepClock(clock);
    c.chart->setAttemptMarks(marks);
  }
  // A run that ended without a series never will have one: its charts say so.
  const bool ended = !stillGoing(s.run().status);
  size_t next = 0;  // snapshot.charts holds the metrics of every chart shown, in order
  for (const TableChart* shown : shown_) {
    std::vector<ChartLine> lines = shown->spec.source == ChartSource::kCommByOp
                                       ? commByOpLines(s)
                                       : metricLines(*shown, s, next);
    updateChart(shown->chart, std::move(lines), ended);
  }
}

// Communication time by op: one line per op.
std::vector<ChartLine> ChartsTab::commByOpLines(const RunSnapshot& s) const {
  std::vector<ChartLine> lines;
  int colour = 0;
  for (const auto& op : s.comm_by_op.ops) {
    ChartLine line{untrustedLine(op.op), rankColor(colour++), {}, {}, {}};
    line.steps_per_point = s.comm_by_op.bucket_width;
    for (const auto& bucket : op.buckets)
      line.centre.append({static_cast<double>(bucket.start) + (s.comm_by_op.bucket_width - 1) / 2.0,
                          bucket.ms_per_step});
    lines.push_back(std::move(line));
  }
  return lines;
}

// A chart's metrics from snapshot.charts[next...]: each as a band, or a line per rank.
std::vector<ChartLine> ChartsTab::metricLines(const TableChart& shown, const RunSnapshot& s,
                                              size_t& next) const {
  std::vector<ChartLine> lines;
  const ChartSpec& spec = shown.spec;
  const bool several = spec.metrics.size() > 1;
  for (size_t m = 0; m < spec.metrics.size() && next < s.charts.size(); ++m, ++next) {
    const MetricSeries& series = s.charts[next];
    if (series.metric != spec.metrics[m].key) break;  // read before this chart applied
    const QString metric = metricLabel(spec, series.metric);
    if (series.band)
      lines.push_back(
          bandLine(*series.band,
                   several ? metric + " (median, min–max of ranks)" : "median, min–max of ranks",
                   rankColor(static_cast<int>(m) * 3), shown.scale));
    int group_colour = static_cast<int>(m) * 3;
    for (const auto& [label, band] : series.group_bands)
      lines.push_back(bandLine(band,
                               QString::fromStdString(label) +
                                   (several ? ", " + metric : QString()) + " (median, min–max)",
                               rankColor(group_colour++), shown.scale));
    for (const auto& [rank, ranked] : series.per_rank) {
      ChartLine line;
      line.name =
          several ? QString("%1, rank %2").arg(metric).arg(rank) : QString("rank %1").arg(rank);
      QColor colour = rankColor(rank);
      line.color = m == 0 ? colour : colour.lighter(150);
      // Envelopes for a few ranks; past that they hide each other and cost most of the
      // drawing (the band shows the spread instead).
      addSeries(line, ranked, shown.scale, series.per_rank.size() <= 8);
      lines.push_back(std::move(line));
    }
  }
  if (spec.validation_loss) {
    if (std::optional<ChartLine> line = validationLossLine(s.report.evals, *shown.chart))
      lines.push_back(std::move(*line));
  }
  return lines;
}

void ChartsTab::updateChart(MetricChart* chart, std::vector<ChartLine> lines, bool ended) {
  // Each chart is updated and painted in its own turn of the event loop, so the GUI thread never
  // lays out and paints every chart of a refresh in one go: the longest stall is one chart's.
  QMetaObject::invokeMethod(
      this,
      [chart, ended, lines = std::move(lines)] {
        chart->setEmptyNote(ended ? "not recorded in this run" : "no data yet");
        chart->setLines(lines);
        if (chart->isVisible()) chart->repaint();
      },
      Qt::QueuedConnection);
}

QGroupBox* ChartsTab::panel(const std::string& name) const {
  const auto it = panels_.find(name);
  return it == panels_.end() ? nullptr : it->second.box;
}

std::vector<std::string> ChartsTab::panelsShown() const {
  return panels_shown_;
}

std::vector<MetricChart*> ChartsTab::charts() const {
  std::vector<MetricChart*> charts;
  for (const TableChart* shown : shown_) charts.push_back(shown->chart);
  return charts;
}

MetricChart* ChartsTab::chart(const QString& title) const {
  // By the title as given: the one shown may carry a note ("… — not recorded in this run").
  for (const TableChart* shown : shown_)
    if (shown->chart->title() == title) return shown->chart;
  return nullptr;
}

QStringList ChartsTab::exportCharts(const QString& directory, const QStringList& formats) {
  QDir().mkpath(directory);
  QStringList written;
  std::set<QString> bases;  // two names may read the same as file names ("a/b", "a_b")
  for (const TableChart* shown : shown_) {
    QString base = QDir(directory).filePath(shown->chart->objectName().toLower());
    for (int n = 2; !bases.insert(base).second; ++n)
      base = QDir(directory).filePath(
          QString("%1-%2").arg(shown->chart->objectName().toLower()).arg(n));
    for (const QString& format : formats)
      if (shown->chart->exportTo(base + "." + format)) written << base + "." + format;
  }
  return written;
}

QDialog* ChartsTab::openExportDialog() {
  auto* dialog = new QDialog(this);
  dialog->setObjectName("exportChartsDialog");
  dialog->setWindowTitle(QString("Export the charts of run %1").arg(run_id_));
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  auto* form = new QFormLayout(dialog);
  auto* formats = new QHBoxLayout();
  auto* png = new QCheckBox("PNG (image)");
  png->setObjectName("exportPng");
  png->setChecked(true);
  auto* svg = new QCheckBox("SVG (vector)");
  svg->setObjectName("exportSvg");
  formats->addWidget(png);
  formats->addWidget(svg);
  formats->addStretch(1);
  form->addRow("Formats", formats);
  auto* folder_row = new QHBoxLayout();
  auto* folder = new QLineEdit(
      export_dir_.isEmpty() ? QDir::homePath() + QString("/ringmaster-run-%1-charts").arg(run_id_)
                            : export_dir_);
  folder->setObjectName("exportFolder");
  folder->setMinimumWidth(folder->fontMetrics().horizontalAdvance(folder->text()) + 24);
  auto* browse = new QPushButton("Browse…");
  folder_row->addWidget(folder, 1);
  folder_row->addWidget(browse);
  form->addRow("Folder", folder_row);
  auto* note = new QLabel(QString("One file per chart and format (%1 charts), named after the "
                                  "chart; files of the same name are replaced.")
                              .arg(shown_.size()));
  note->setWordWrap(true);
  form->addRow(note);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons->button(QDialogButtonBox::Ok)->setText("Export");
  form->addRow(buttons);
  auto validate = [png, svg, folder, buttons] {
    buttons->button(QDialogButtonBox::Ok)
        ->setEnabled((png->isChecked() || svg->isChecked()) && !folder->text().trimmed().isEmpty());
  };
  connect(png, &QCheckBox::toggled, dialog, validate);
  connect(svg, &QCheckBox::toggled, dialog, validate);
  connect(folder, &QLineEdit::textChanged, dialog, validate);
  connect(browse, &QPushButton::clicked, dialog, [dialog, folder] {
    const QString chosen =
        QFileDialog::getExistingDirectory(dialog, "Export the charts into", folder->text());
    if (!chosen.isEmpty()) folder->setText(chosen);
  });
  connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::reject);
  connect(buttons, &QDialogButtonBox::accepted, dialog, [this, dialog, png, svg, folder] {
    QStringList chosen;
    if (png->isChecked()) chosen << "png";
    if (svg->isChecked()) chosen << "svg";
    const QString dir = QDir::cleanPath(folder->text().trimmed());
    showExported(exportCharts(dir, chosen), dir);
    dialog->accept();
  });
  dialog->open();
  return dialog;
}

// The bar's note on what an export wrote, and chartsExported.
void ChartsTab::showExported(const QStringList& written, const QString& dir) {
  const QString error =
      written.isEmpty() ? QString("nothing could be written to %1").arg(dir) : QString();
  if (written.isEmpty()) {
    export_note_->setStyleSheet("color: #b3261e;");
    export_note_->setText("Export failed: " + error);
  } else {
    export_dir_ = dir;
    export_note_->setStyleSheet({});
    export_note_->setText(QString("Exported %1 files to %2").arg(written.size()).arg(dir));
  }
  export_note_->setToolTip(export_note_->text());
  emit chartsExported(written, error);
}

}  // namespace ringmaster::ui
