// RunView: layout, the 25 Hz poll, the worker-thread load and applying a snapshot to the widgets.
#include "views/run_view.h"

#include <sys/resource.h>
#include <unistd.h>
#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTextBlock>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/background_jobs.h"
#include "db/database.h"
#include "models/comm_ops_model.h"
#include "models/flight_recorder_model.h"
#include "models/format.h"
#include "models/rank_table_model.h"
#include "models/run_list_model.h"
#include "models/untrusted_text.h"
#include "telemetry/fields.h"
#include "views/pipeline_view.h"
#include "views/table_copy.h"
#include "widgets/heat_map.h"
#include "widgets/metric_chart.h"

namespace ringmaster::ui {

namespace {

constexpr int kPollMs = 40;  // 25 Hz
constexpr double kMiB = 1.0 / (1 << 20);

QString metricLabel(const std::string& metric) {
  static const std::map<std::string, QString> labels = {
      {step_field::kStepMs, "step"},
      {step_field::kComputeMs, "compute"},
      {step_field::kExposedCommMs, "exposed comm"},
      {step_field::kMemAllocated, "allocated"},
      {step_field::kMemPeak, "peak"},
      {step_field::kCommMs, "communication"},
      {step_field::kDeviceMemUsed, "device memory"},
      {step_field::kLr, "learning rate"},
      {step_field::kLossScale, "loss scale"}};
  auto it = labels.find(metric);
  return it == labels.end() ? QString::fromStdString(metric) : it->second;
}

// Whether a run in this status may still record.
bool stillGoing(const std::string& status) {
  return status == "pending" || status == "running";
}

QColor rankColor(int rank) {
  static const QColor palette[] = {{0x1f, 0x77, 0xb4}, {0xff, 0x7f, 0x0e}, {0x2c, 0xa0, 0x2c},
                                   {0xd6, 0x27, 0x28}, {0x94, 0x67, 0xbd}, {0x8c, 0x56, 0x4b},
                                   {0xe3, 0x77, 0xc2}, {0x7f, 0x7f, 0x7f}, {0xbc, 0xbd, 0x22},
                                   {0x17, 0xbe, 0xcf}};
  return palette[static_cast<size_t>(rank) % std::size(palette)];
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

}  // namespace

RunView::RunView(std::string db_path, int64_t run_id, QWidget* parent)
    : QWidget(parent),
      db_path_(std::move(db_path)),
      run_id_(run_id),
      watch_(std::make_shared<WatchConnection>(WatchConnection{db_path_, nullptr})) {
  jobs_ = new BackgroundJobs(this);
  setObjectName(QString("runView%1").arg(run_id));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);

  // Header: title and status, progress (its text beside the bar, in the window's colours),
  // cancel, figures, root cause.
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
  connect(cancel_, &QPushButton::clicked, this, [this] { emit cancelRequested(run_id_); });
  figures_ = new QLabel();
  figures_->setObjectName("runFigures");
  figures_->setWordWrap(true);
  figures_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  title_->setText(QString("Run %1 · loading…").arg(run_id_));
  first_line->addWidget(title_);
  first_line->addWidget(status_);
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

  tabs_ = new QTabWidget();
  tabs_->setObjectName("runTabs");
  tabs_->addTab(buildChartsTab(), "Charts");
  auto* ranks = rank_table_ = new QTableView();
  ranks->setObjectName("rankTable");
  rank_model_ = new RankTableModel(this);
  ranks->setModel(rank_model_);
  ranks->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  ranks->horizontalHeader()->setStretchLastSection(true);
  ranks->verticalHeader()->hide();
  ranks->setAlternatingRowColors(true);
  ranks->setSelectionBehavior(QAbstractItemView::SelectRows);
  enableCsvCopy(ranks);
  tabs_->addTab(ranks, "Ranks");
  tabs_->addTab(buildCommTab(), "Communication");
  pipeline_ = new PipelineView();
  tabs_->addTab(pipeline_, "Pipeline");
  tabs_->addTab(buildLogsTab(), "Logs");
  layout->addWidget(tabs_, 1);
  connect(tabs_, &QTabWidget::currentChanged, this, [this](int index) {
    if (index == 0 && charts_stale_ && snapshot_) {
      charts_stale_ = false;
      applyCharts(*snapshot_);
    }
  });

  poll_timer_ = new QTimer(this);
  poll_timer_->setInterval(kPollMs);
  connect(poll_timer_, &QTimer::timeout, this, &RunView::poll);
  poll_timer_->start();
  startLoad();
}

RunView::~RunView() {
  delete jobs_;  // cancels and waits for the reads in flight, before the widgets go
}

QWidget* RunView::buildChartsTab() {
  auto* page = new QWidget();
  auto* layout = new QVBoxLayout(page);
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
    for (MetricChart* chart : charts_) chart->setSmoothing(weight);
  });
  connect(time_axis_, &QCheckBox::toggled, this, [this](bool on) {
    for (MetricChart* chart : charts_) chart->setTimeAxis(on);
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
  layout->addLayout(bar);
  connect(rank_choice_, &QComboBox::activated, this, [this](int index) {
    const int data = rank_choice_->itemData(index).toInt();
    if (data == -1)
      showRanks(RankMode::kEach);
    else if (data == -2)
      showRanks(RankMode::kBand);
    else
      showRanks(RankMode::kOne, data);
  });
  connect(export_button, &QPushButton::clicked, this, &RunView::openExportDialog);

  auto* grid = new QGridLayout();
  struct Spec {
    const char* title;
    const char* unit;
    std::vector<std::string> metrics;
    double scale;
  };
  const Spec specs[] = {
      {"Loss", "loss", {step_field::kLoss}, 1.0},
      // The step, and what it was spent on: a pipeline stage's wait for another stage is the gap
      // between the step and its compute plus exposed communication.
      {"Step time",
       "ms",
       {step_field::kStepMs, step_field::kComputeMs, step_field::kExposedCommMs},
       1.0},
      {"Communication time by op", "ms per step", {}, 1.0},  // from the comm events
      {"Allocator memory", "MiB", {step_field::kMemAllocated, step_field::kMemPeak}, kMiB},
      {"Device memory", "MiB", {step_field::kDeviceMemUsed}, kMiB},
      // optimizer.schedule's value at each step, as the step events report it.
      {"Learning rate", "lr", {step_field::kLr}, 1.0},
      // fp16's dynamic loss scale at each step: a drop is a step skipped on an inf or NaN
      // gradient (empty for fp32 and bf16 runs, which scale nothing).
      {"Loss scale", "scale", {step_field::kLossScale}, 1.0},
  };
  int i = 0;
  for (const Spec& spec : specs) {
    auto* chart = new MetricChart(spec.title, spec.unit);
    chart->setObjectName(QString(spec.title).replace(' ', '_'));
    charts_.push_back(chart);
    chart_metrics_.push_back(spec.metrics);
    chart_scales_.push_back(spec.scale);
    grid->addWidget(chart, i / 2, i % 2);
    ++i;
    // Zoom is linked: every chart follows the one zoomed and each re-reads that range.
    connect(chart, &MetricChart::rangeChanged, this, [this, chart] {
      for (MetricChart* other : charts_) {
        if (other == chart) continue;
        if (chart->zoomed())
          other->setZoomRange(chart->zoomRange().first, chart->zoomRange().second);
        else
          other->clearZoom();
      }
      reload();
    });
  }
  // The charts scroll when the window is too short for them at their least readable size,
  // rather than setting the window's minimum height (issue 15: the window grew 60 px when a
  // failure banner appeared).
  auto* grid_page = new QWidget();
  grid_page->setLayout(grid);
  grid->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea();
  scroll->setObjectName("chartsScroll");
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(grid_page);
  layout->addWidget(scroll, 1);
  return page;
}

QWidget* RunView::buildCommTab() {
  auto* splitter = new QSplitter(Qt::Vertical);
  auto* ops = new QTableView();
  ops->setObjectName("commTable");
  comm_model_ = new CommOpsModel(this);
  ops->setModel(comm_model_);
  ops->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  ops->horizontalHeader()->setStretchLastSection(true);
  ops->verticalHeader()->hide();
  ops->setAlternatingRowColors(true);
  ops->setSelectionBehavior(QAbstractItemView::SelectRows);
  enableCsvCopy(ops);
  splitter->addWidget(ops);
  auto* map_box = new QWidget();
  auto* map_layout = new QVBoxLayout(map_box);
  map_layout->setContentsMargins(0, 0, 0, 0);
  map_layout->addWidget(
      new QLabel("<b>Exposed communication per step</b>, rank × step: a row "
                 "its peers are not is a straggler, columns that stop are a hang"));
  heat_map_ = new HeatMap();
  heat_map_->setObjectName("waitHeatMap");
  map_layout->addWidget(heat_map_, 1);
  splitter->addWidget(map_box);
  auto* recorder_box = new QWidget();
  auto* recorder_layout = new QVBoxLayout(recorder_box);
  recorder_layout->setContentsMargins(0, 0, 0, 0);
  flight_summary_ = new QLabel(
      "<b>Flight recorder</b>: no dump (dumps arrive when a collective "
      "fails or times out)");
  flight_summary_->setObjectName("flightSummary");
  flight_summary_->setTextFormat(Qt::RichText);  // its op names are escaped
  flight_summary_->setWordWrap(true);
  recorder_layout->addWidget(flight_summary_);
  flight_recorder_ = new QTableView();
  flight_recorder_->setObjectName("flightRecorder");
  flight_model_ = new FlightRecorderModel(this);
  flight_recorder_->setModel(flight_model_);
  // Each column as wide as what it holds (the table scrolls when they do not fit), no empty
  // column stretched over the rest; long cells show whole on hover.
  flight_recorder_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  flight_recorder_->horizontalHeader()->setStretchLastSection(false);
  flight_recorder_->verticalHeader()->hide();
  flight_recorder_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  recorder_layout->addWidget(flight_recorder_, 1);
  splitter->addWidget(recorder_box);
  splitter->setStretchFactor(0, 2);
  splitter->setStretchFactor(1, 2);
  splitter->setStretchFactor(2, 1);
  return splitter;
}

QWidget* RunView::buildLogsTab() {
  auto* page = new QWidget();
  auto* layout = new QVBoxLayout(page);
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
  connect(log_rank_, &QComboBox::activated, this, [this] { applyLogs(); });
  connect(log_filter_, &QLineEdit::textChanged, this, [this] { applyLogs(); });
  return page;
}

void RunView::showRanks(RankMode mode, int rank) {
  rank_mode_ = mode;
  one_rank_ = rank;
  const int data = mode == RankMode::kEach ? -1 : mode == RankMode::kBand ? -2 : rank;
  const int index = rank_choice_->findData(data);
  if (index >= 0) rank_choice_->setCurrentIndex(index);
  reload();
}

SnapshotRequest RunView::request() const {
  SnapshotRequest request;
  const int world = snapshot_ ? snapshot_->run.world_size : 0;
  for (size_t i = 0; i < charts_.size(); ++i) {
    ChartRequest chart;
    chart.metrics = chart_metrics_[i];
    chart.range.buckets = charts_[i]->bucketsWanted();
    if (charts_[i]->zoomed()) {
      chart.range.from_step = charts_[i]->zoomRange().first;
      chart.range.to_step = charts_[i]->zoomRange().second;
    }
    if (chart.metrics.empty()) {  // communication time by op
      request.comm_by_op = CommByOpRequest{chart.range, std::nullopt};
      if (rank_mode_ == RankMode::kOne) request.comm_by_op->rank = one_rank_;
      continue;
    }
    // A chart of several metrics shows each as a band unless one rank is chosen: eight lines
    // of two metrics over four ranks read as noise.
    if (rank_mode_ == RankMode::kOne) {
      chart.ranks = {one_rank_};
    } else if (rank_mode_ == RankMode::kEach && chart.metrics.size() == 1) {
      for (int r = 0; r < std::max(world, 1); ++r) chart.ranks.push_back(r);
    }
    request.charts.push_back(std::move(chart));
  }
  // Wall times over the charts' steps (linked, so one range), at the finest chart's resolution.
  storage::SeriesRange clock{.buckets = 1};
  for (const MetricChart* chart : charts_) {
    clock.buckets = std::max(clock.buckets, chart->bucketsWanted());
    if (chart->zoomed()) {
      clock.from_step = chart->zoomRange().first;
      clock.to_step = chart->zoomRange().second;
    }
  }
  request.wall_clock = clock;
  request.heat_map_buckets = std::clamp(heat_map_->width() / 6, 20, 200);
  return request;
}

void RunView::reload() {
  dirty_ = true;
  if (!jobs_->busy("load")) startLoad();
}

void RunView::poll() {
  if (dirty_ && !jobs_->busy("load")) startLoad();
  if (jobs_->busy("poll")) return;
  // data_version on a connection of its own, opened and read by one poll job at a time.
  jobs_->run<int64_t>(
      "poll",
      [watch = watch_](const JobToken&) {
        if (!watch->db)
          watch->db = std::make_unique<storage::Database>(watch->path,
                                                          storage::readingOptions(watch->path));
        return watch->db->dataVersion();
      },
      [this](int64_t version) {
        if (version == seen_version_) return;
        seen_version_ = version;
        dirty_ = true;
        if (!jobs_->busy("load")) startLoad();
      },
      [this](const QString&) {
        dirty_ = true;  // the load reports what is wrong
        if (!jobs_->busy("load")) startLoad();
      });
}

void RunView::startLoad() {
  dirty_ = false;
  SnapshotRequest request = this->request();
  const std::string path = db_path_;
  const int64_t run_id = run_id_;
  jobs_->run<RunSnapshot>(
      "load",
      [path, run_id, request](const JobToken&) {
        // Reading yields to the GUI thread: on a busy machine a load may take longer, the window
        // must not.
        static thread_local bool lowered = false;
        if (!lowered) lowered = ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10) == 0;
        return loadRunSnapshot(path, run_id, request);
      },
      [this](RunSnapshot snapshot) {
        apply(std::move(snapshot));
        if (dirty_) startLoad();
      },
      [this](const QString& error) {
        root_cause_->setText("Cannot read the run: " + error);
        root_cause_->show();
        if (dirty_) startLoad();
      });
}

void RunView::apply(RunSnapshot snapshot) {
  if (!snapshot_ || snapshot_->run.world_size != snapshot.run.world_size) {
    // First snapshot: pick the rank choice by the world size (a band for large worlds).
    rank_choice_->clear();
    rank_choice_->addItem("Every rank", -1);
    rank_choice_->addItem("All ranks: min / median / max", -2);
    for (int r = 0; r < snapshot.run.world_size; ++r)
      rank_choice_->addItem(QString("Rank %1").arg(r), r);
    if (!snapshot_ && snapshot.run.world_size > 8) rank_mode_ = RankMode::kBand;
    dirty_ = true;  // this snapshot was read before the world size was known
    const int data = rank_mode_ == RankMode::kEach   ? -1
                     : rank_mode_ == RankMode::kBand ? -2
                                                     : one_rank_;
    rank_choice_->setCurrentIndex(std::max(rank_choice_->findData(data), 0));
  }
  applyHeader(snapshot);
  // Charts on a hidden tab are brought up to date when it is shown.
  charts_stale_ = tabs_->currentIndex() != 0;
  if (!charts_stale_) applyCharts(snapshot);
  rank_model_->setRows(rankRows(snapshot));
  // A program job's spec describes no model: there is no estimate to put beside the peaks.
  rank_table_->setColumnHidden(RankTableModel::kEstimatedMemory, snapshot.program.has_value());
  comm_model_->setStats(snapshot.comm_ops);
  heat_map_->setMap(snapshot.wait_map);
  applyFlightRecorder(snapshot);
  const bool pipeline = snapshot.run.strategy == "pipeline";
  tabs_->setTabVisible(tabs_->indexOf(pipeline_), pipeline);
  // A step event every N steps carries the means of the steps since the previous one: say so.
  const nlohmann::json spec = nlohmann::json::parse(snapshot.run.spec_json, nullptr, false);
  const int64_t every = spec.is_object() ? spec.value("/telemetry/every_steps"_json_pointer, 1) : 1;
  for (MetricChart* chart : charts_) {
    if (chart->title() == "Step time")
      chart->setTitleNote(every > 1 ? QString(" (mean of every %1 steps)").arg(every)
                                    : QString(" (every step)"));
  }
  if (pipeline)
    pipeline_->setRun(db_path_, run_id_, snapshot.run.spec_json, snapshot.scheduled_steps);
  const bool logs_changed =
      !snapshot_ || snapshot_->logs.size() != snapshot.logs.size() ||
      (!snapshot.logs.empty() && snapshot_->logs.back().t != snapshot.logs.back().t);
  snapshot_ = std::move(snapshot);
  if (logs_changed) applyLogs();
  updateCancelButton();
  const QString status = QString::fromStdString(snapshot_->run.status);
  if (status != last_status_) {
    last_status_ = status;
    emit statusChanged(status);
  }
  emit refreshed();
}

void RunView::applyHeader(const RunSnapshot& s) {
  // A program job names its script (the command line in full on hover).
  QString script;
  if (s.program) {
    QStringList command = {untrustedLine(s.program->python), untrustedLine(s.program->script)};
    for (const std::string& arg : s.program->args) command << untrustedLine(arg);
    script = QString(" · script %1")
                 .arg(QFileInfo(untrustedLine(s.program->script)).fileName().toHtmlEscaped());
    title_->setToolTip(command.join(' '));
  } else {
    title_->setToolTip({});
  }
  title_->setText(QString("Run %1 · %2 · %3 · %4 rank%5%6")
                      .arg(s.run.id)
                      .arg(untrustedLine(s.run.name).toHtmlEscaped())
                      .arg(untrustedLine(s.run.strategy).toHtmlEscaped())
                      .arg(s.run.world_size)
                      .arg(s.run.world_size == 1 ? "" : "s")
                      .arg(script));
  status_->setText(untrustedLine(s.run.status));
  status_->setStyleSheet(QString("QLabel { color: white; background: %1; border-radius: 8px; "
                                 "padding: 2px 10px; font-weight: bold; }")
                             .arg(statusColor(s.run.status).name()));
  const int64_t planned = s.planned_steps;
  if (planned > 0) {
    progress_->setRange(0, static_cast<int>(std::min<int64_t>(planned, INT32_MAX)));
    progress_->setValue(static_cast<int>(std::min(s.summary.final_step, planned)));
    QString eta;
    if (s.run.status == "running" && s.summary.final_step > 0 && s.summary.final_step < planned) {
      const double per_step = s.run.durationSeconds() / static_cast<double>(s.summary.final_step);
      eta =
          QString(" · ETA %1")
              .arg(formatDuration(per_step * static_cast<double>(planned - s.summary.final_step)));
    }
    progress_text_->setText(
        QString("step %1 / %2%3").arg(s.summary.final_step).arg(planned).arg(eta));
  } else {
    // No total known (a script that did not say how many steps it logs): no fraction and no ETA;
    // the bar is busy while the run is, full once it completed.
    const bool running = s.run.status == "running";
    progress_->setRange(0, running ? 0 : 1);
    progress_->setValue(s.run.status == "completed" ? 1 : 0);
    progress_text_->setText(QString("step %1").arg(s.summary.final_step));
  }
  QStringList figures;
  if (s.summary.final_loss) figures << QString("loss %1").arg(formatFigure(*s.summary.final_loss));
  if (!s.evals.empty() && s.evals.back().val_loss) {
    figures << QString("val loss %1 (step %2)")
                   .arg(formatFigure(*s.evals.back().val_loss))
                   .arg(s.evals.back().step);
  }
  if (s.summary.final_accuracy)
    figures << QString("accuracy %1%").arg(*s.summary.final_accuracy * 100, 0, 'f', 1);
  if (s.summary.final_step > 0)
    figures << QString("%1 samples/s").arg(formatFigure(s.summary.samples_per_second))
            << QString("step %1").arg(formatMs(s.summary.mean_step_ms))
            << QString("communication %1% of step time").arg(s.summary.comm_share * 100, 0, 'f', 1);
  else
    figures << "no step recorded";
  if (s.summary.bubble_fraction)
    figures << QString("bubble %1%").arg(*s.summary.bubble_fraction * 100, 0, 'f', 1);
  // Throughput in tokens, and MFU where a peak FLOP/s was known (train.peak_tflops or the device).
  if (s.summary.tokens_per_second)
    figures << QString("%1 tokens/s").arg(formatFigure(*s.summary.tokens_per_second));
  if (s.summary.mfu) figures << QString("MFU %1%").arg(*s.summary.mfu * 100, 0, 'f', 1);
  if (s.summary.lr) figures << QString("lr %1").arg(formatFigure(*s.summary.lr));
  // fp16: the loss scale at the last step and the steps skipped on an inf or NaN gradient.
  if (s.summary.loss_scale) {
    const int64_t skipped = s.summary.skipped_steps.value_or(0);
    figures << QString("loss scale %1 (%2 skipped step%3)")
                   .arg(*s.summary.loss_scale, 0, 'g', 17)  // a power of two, in full
                   .arg(skipped)
                   .arg(skipped == 1 ? "" : "s");
  }
  figures << QString("duration %1").arg(formatDuration(s.run.durationSeconds()));
  figures_->setText(figures.join("  ·  "));
  if (s.run.error) {
    QString where;
    if (s.run.error_rank) where += QString("rank %1").arg(*s.run.error_rank);
    if (s.run.error_host)
      where += (where.isEmpty() ? "" : " on ") +
               QString("host %1").arg(untrustedLine(*s.run.error_host));
    root_cause_->setText(QString("<b>Root cause</b>%1: %2")
                             .arg(where.isEmpty() ? "" : " (" + where.toHtmlEscaped() + ")")
                             .arg(untrustedHtml(*s.run.error)));
    root_cause_->show();
  } else {
    root_cause_->hide();
  }
  // The live hang view: which rank holds up which collective, long before its timeout.
  QStringList hangs;
  for (const storage::HangDiagnosis& hang : s.live.hangs)
    hangs << QString("<b>Hang</b>: %1").arg(untrustedHtml(hang.message));
  hang_->setText(hangs.join("<br>"));
  hang_->setToolTip(
      "From the ranks' progress reports (every 2 s): the collective some ranks have waited in "
      "for two reports or more, and the ranks that have not reached it or went silent");
  hang_->setVisible(!hangs.isEmpty());
}

void RunView::applyCharts(const RunSnapshot& s) {
  // Steps to seconds since the start: each bucket's first and last step at its earliest and
  // latest wall time.
  std::vector<std::pair<double, double>> knots;
  for (const auto& bucket : s.wall_clock.buckets) {
    knots.emplace_back(static_cast<double>(bucket.summary.first_step),
                       bucket.summary.min - s.wall_clock_origin);
    knots.emplace_back(static_cast<double>(bucket.summary.last_step),
                       bucket.summary.max - s.wall_clock_origin);
  }
  const StepClock clock(std::move(knots));
  for (MetricChart* chart : charts_) chart->setStepClock(clock);
  // Each restart: where its attempt began, and the earlier attempt's steps it ran again.
  std::vector<AttemptMark> marks;
  for (size_t i = 1; i < s.attempts.size(); ++i) {
    const storage::AttemptRecord& attempt = s.attempts[i];
    if (!attempt.first_step) continue;
    AttemptMark mark{.attempt = attempt.attempt, .first_step = *attempt.first_step};
    const std::optional<int64_t> before = s.attempts[i - 1].last_step;
    if (before && *before >= *attempt.first_step) mark.rolled_back = {*attempt.first_step, *before};
    marks.push_back(mark);
  }
  for (MetricChart* chart : charts_) chart->setAttemptMarks(marks);
  size_t next = 0;  // snapshot.charts holds the metrics of every chart in order
  for (size_t i = 0; i < charts_.size(); ++i) {
    std::vector<ChartLine> lines;
    const auto& metrics = chart_metrics_[i];
    if (metrics.empty()) {  // communication time by op: one line per op
      int colour = 0;
      for (const auto& op : s.comm_by_op.ops) {
        ChartLine line{untrustedLine(op.op), rankColor(colour++), {}, {}, {}};
        line.steps_per_point = s.comm_by_op.bucket_width;
        for (const auto& bucket : op.buckets)
          line.centre.append(
              {static_cast<double>(bucket.start) + (s.comm_by_op.bucket_width - 1) / 2.0,
               bucket.ms_per_step});
        lines.push_back(std::move(line));
      }
      updateChart(i, std::move(lines));
      continue;
    }
    const bool several = metrics.size() > 1;
    for (size_t m = 0; m < metrics.size() && next < s.charts.size(); ++m, ++next) {
      const MetricSeries& series = s.charts[next];
      const QString metric = metricLabel(series.metric);
      if (series.band) {
        ChartLine line;
        line.name = several ? metric + " (median, min–max of ranks)" : "median, min–max of ranks";
        line.steps_per_point = series.band->bucket_width;
        line.centre_label = "median";
        line.color = rankColor(static_cast<int>(m) * 3);
        for (const auto& bucket : series.band->buckets) {
          const double x = static_cast<double>(bucket.start) + series.band->bucket_width / 2.0;
          line.centre.append({x, bucket.median * chart_scales_[i]});
          line.low.append({x, bucket.min * chart_scales_[i]});
          line.high.append({x, bucket.max * chart_scales_[i]});
        }
        lines.push_back(std::move(line));
      }
      for (const auto& [rank, ranked] : series.per_rank) {
        ChartLine line;
        line.name =
            several ? QString("%1, rank %2").arg(metric).arg(rank) : QString("rank %1").arg(rank);
        QColor colour = rankColor(rank);
        line.color = m == 0 ? colour : colour.lighter(150);
        // Envelopes for a few ranks; past that they hide each other and cost most of the
        // drawing (the band shows the spread instead).
        addSeries(line, ranked, chart_scales_[i], series.per_rank.size() <= 8);
        lines.push_back(std::move(line));
      }
    }
    if (metrics == std::vector<std::string>{step_field::kLoss}) {
      if (std::optional<ChartLine> line = validationLossLine(s.evals, *charts_[i]))
        lines.push_back(std::move(*line));
    }
    updateChart(i, std::move(lines));
  }
}

void RunView::updateChart(size_t index, std::vector<ChartLine> lines) {
  // Each chart is updated and painted in its own turn of the event loop, so the GUI thread never
  // lays out and paints every chart of a refresh in one go: the longest stall is one chart's.
  QMetaObject::invokeMethod(
      this,
      [this, index, lines = std::move(lines)] {
        MetricChart* chart = charts_[index];
        // A run that ended without a series never will have one: say so, not "no data yet".
        chart->setEmptyNote(snapshot_ && !stillGoing(snapshot_->run.status)
                                ? "not recorded in this run"
                                : "no data yet");
        chart->setLines(lines);
        if (chart->isVisible()) chart->repaint();
      },
      Qt::QueuedConnection);
}

void RunView::applyFlightRecorder(const RunSnapshot& s) {
  flight_model_->setRows({});
  if (s.dumps.empty()) return;
  // The furthest collective any rank reached; ranks that did not reach it are what blocks.
  struct RankState {
    QString completed, in_flight;
    int64_t furthest = 0;
  };
  std::map<int, RankState> states;
  int64_t furthest = 0;
  QString furthest_name;
  for (const auto& dump : s.dumps) {
    RankState& state = states[dump.rank];
    auto entries = nlohmann::json::parse(dump.dump_json, nullptr, false);
    if (!entries.is_array()) continue;
    QStringList in_flight;
    for (const auto& e : entries) {
      const int64_t seq = e.value("seq", int64_t{0});
      const QString name =
          QString("%1 #%2").arg(untrustedLine(e.value("op", std::string("?")))).arg(seq);
      const std::string st = e.value("state", std::string());
      if (st == "completed")
        state.completed = name;
      else
        in_flight << QString("%1 (%2)").arg(name, untrustedLine(st));
      if (e.contains("peer")) continue;  // point-to-point: not a collective every rank reaches
      state.furthest = std::max(state.furthest, seq);
      if (seq > furthest) {
        furthest = seq;
        furthest_name = name;
      }
    }
    state.in_flight = in_flight.join(", ");
  }
  QStringList missing;
  for (int r = 0; r < s.run.world_size; ++r) {
    auto it = states.find(r);
    if (it == states.end() || it->second.furthest < furthest) missing << QString::number(r);
  }
  flight_summary_->setText(
      QString("<b>Flight recorder</b>: %1 dump%2; furthest collective %3; ranks that did not reach "
              "it: %4")
          .arg(s.dumps.size())
          .arg(s.dumps.size() == 1 ? "" : "s")
          .arg(furthest_name.isEmpty() ? "none" : furthest_name.toHtmlEscaped())
          .arg(missing.isEmpty() ? "none" : missing.join(", ")));
  std::vector<FlightRecorderRow> rows;
  for (const auto& [rank, state] : states)
    rows.push_back({rank, state.completed, state.in_flight,
                    state.furthest < furthest ? furthest_name : QString()});
  flight_model_->setRows(std::move(rows));
}

void RunView::applyLogs() {
  if (!snapshot_) return;
  const int rank = log_rank_->currentData().toInt();
  const QString filter = log_filter_->text();
  QStringList lines;
  int first_error = -1;
  for (const auto& line : snapshot_->logs) {
    if (rank == -1 && line.rank) continue;
    if (rank >= 0 && line.rank != rank) continue;
    const QString who = line.rank ? QString("rank %1").arg(*line.rank) : QString("recorder");
    const QString text = QString("%1  %2  %3: %4")
                             .arg(QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(line.t * 1000))
                                      .toString("hh:mm:ss.zzz"))
                             .arg(who, -8)
                             .arg(untrustedLine(line.level))
                             .arg(untrustedLine(line.message));
    if (!filter.isEmpty() && !text.contains(filter, Qt::CaseInsensitive)) continue;
    if (first_error < 0 && line.level == "error") first_error = static_cast<int>(lines.size());
    lines << text;
  }
  // Rank entries for the ranks seen.
  for (int r = 0; r < snapshot_->run.world_size; ++r)
    if (log_rank_->findData(r) < 0) log_rank_->addItem(QString("rank %1").arg(r), r);
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

MetricChart* RunView::chart(const QString& title) const {
  // By the title as given: the one shown may carry a note ("… — not recorded in this run").
  for (MetricChart* c : charts_)
    if (c->title() == title) return c;
  return nullptr;
}

QString RunView::statusText() const {
  return status_->text();
}
QString RunView::rootCauseText() const {
  return root_cause_->isHidden() ? QString() : root_cause_->text();
}
QString RunView::hangText() const {
  return hang_->isHidden() ? QString() : hang_->text();
}
QString RunView::logText() const {
  return logs_->toPlainText();
}
QString RunView::flightRecorderText() const {
  return flight_summary_->text();
}
QString RunView::figuresText() const {
  return figures_->text();
}

QString RunView::progressText() const {
  return progress_text_->text();
}

void RunView::setCancellable(bool cancellable) {
  cancellable_ = cancellable;
  updateCancelButton();
}

void RunView::updateCancelButton() {
  cancel_->setVisible(cancellable_ && snapshot_ && stillGoing(snapshot_->run.status));
}

QStringList RunView::exportCharts(const QString& directory, const QStringList& formats) {
  QDir().mkpath(directory);
  QStringList written;
  for (MetricChart* chart : charts_) {
    const QString base = QDir(directory).filePath(chart->objectName().toLower());
    for (const QString& format : formats)
      if (chart->exportTo(base + "." + format)) written << base + "." + format;
  }
  return written;
}

QDialog* RunView::openExportDialog() {
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
                              .arg(charts_.size()));
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
    const QStringList written = exportCharts(dir, chosen);
    const QString error =
        written.isEmpty() ? QString("nothing could be written to %1").arg(dir) : QString();
    if (written.isEmpty()) {
      export_note_->setStyleSheet("color: #b3261e;");
      export_note_->setText("Export failed: " + error);
      export_note_->setToolTip(export_note_->text());
    } else {
      export_dir_ = dir;
      export_note_->setStyleSheet({});
      export_note_->setText(QString("Exported %1 files to %2").arg(written.size()).arg(dir));
      export_note_->setToolTip(export_note_->text());
    }
    emit chartsExported(written, error);
    dialog->accept();
  });
  dialog->open();
  return dialog;
}

}  // namespace ringmaster::ui
