// RunView: the header over the tabs, the 25 Hz poll, the worker-thread load, and each snapshot
// handed to the header and the tabs.
#include "views/run_view.h"

#include <sys/resource.h>
#include <unistd.h>
#include <QComboBox>
#include <QTabWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "data/background_jobs.h"
#include "db/database.h"
#include "views/pipeline_view.h"
#include "views/run/charts_tab.h"
#include "views/run/comm_tab.h"
#include "views/run/flight_recorder_panel.h"
#include "views/run/logs_tab.h"
#include "views/run/ranks_tab.h"
#include "views/run/run_colors.h"
#include "views/run/run_header.h"

namespace ringmaster::ui {

namespace {

constexpr int kPollMs = 40;  // 25 Hz

}  // namespace

RunView::RunView(std::string db_path, int64_t run_id, QWidget* parent)
    : QWidget(parent), db_path_(std::move(db_path)), run_id_(run_id), watch_(db_path_) {
  jobs_ = new BackgroundJobs(this);
  setObjectName(QString("runView%1").arg(run_id));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);

  header_ = new RunHeader(run_id_);
  connect(header_, &RunHeader::cancelClicked, this, [this] { emit cancelRequested(run_id_); });
  layout->addWidget(header_);
  tabs_ = new QTabWidget();
  tabs_->setObjectName("runTabs");
  charts_ = new ChartsTab(run_id_);
  charts_->setObjectName("chartsTab");
  connect(charts_, &ChartsTab::reloadWanted, this, &RunView::reload);
  connect(charts_, &ChartsTab::chartsExported, this, &RunView::chartsExported);
  tabs_->addTab(charts_, "Charts");
  ranks_ = new RanksTab();
  tabs_->addTab(ranks_, "Ranks");
  comm_ = new CommTab();
  tabs_->addTab(comm_, "Communication");
  pipeline_ = new PipelineView();
  tabs_->addTab(pipeline_, "Pipeline");
  logs_ = new LogsTab();
  tabs_->addTab(logs_, "Logs");
  grouping_choice_ = new QComboBox();
  grouping_choice_->setObjectName("rankGrouping");
  grouping_choice_->setToolTip(
      "Group and order the ranks by their mesh coordinates (dp, tp, pp) in the rank table, the "
      "band charts and the heat map");
  for (RankGrouping grouping : kRankGroupings)
    grouping_choice_->addItem(QString("Ranks: %1").arg(groupingName(grouping)),
                              static_cast<int>(grouping));
  connect(grouping_choice_, &QComboBox::activated, this, [this](int index) {
    setRankGrouping(static_cast<RankGrouping>(grouping_choice_->itemData(index).toInt()));
  });
  tabs_->setCornerWidget(grouping_choice_);
  layout->addWidget(tabs_, 1);
  connect(tabs_, &QTabWidget::currentChanged, this, [this](int index) {
    if (index == 0 && charts_stale_ && snapshot_) {
      charts_stale_ = false;
      charts_->apply(*snapshot_);
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

void RunView::setRankGrouping(RankGrouping grouping) {
  grouping_ = grouping;
  grouping_choice_->setCurrentIndex(
      std::max(grouping_choice_->findData(static_cast<int>(grouping)), 0));
  applyGrouping();
  if (snapshot_) {
    ranks_->apply(*snapshot_);
    comm_->apply(*snapshot_);
  }
  reload();  // the band charts read a band per group
}

// The grouping handed to the tabs that show ranks, with the groups of the snapshot on screen.
void RunView::applyGrouping() {
  ranks_->setGrouping(grouping_);
  comm_->setGrouping(grouping_);
  charts_->setRankGroups(grouping_ == RankGrouping::kRankOrder || !snapshot_
                             ? std::vector<RankGroup>{}
                             : groupRanks(snapshot_->coordinates, grouping_));
}

void RunView::showRanks(RankMode mode, int rank) {
  charts_->showRanks(mode, rank);
}

SnapshotRequest RunView::request() const {
  SnapshotRequest request;
  charts_->addRequests(request, snapshot_ ? snapshot_->run().world_size : 0);
  request.heat_map_buckets = comm_->heatMapBuckets();
  return request;
}

void RunView::reload() {
  dirty_ = true;
  if (!jobs_->busy("load")) startLoad();
}

void RunView::poll() {
  if (dirty_ && !jobs_->busy("load")) startLoad();
  watch_.poll(jobs_, [this] { reload(); });
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
        header_->showReadError(error);
        if (dirty_) startLoad();
      });
}

void RunView::apply(RunSnapshot snapshot) {
  if (!snapshot_ || snapshot_->run().world_size != snapshot.run().world_size) {
    charts_->setWorldSize(snapshot.run().world_size, !snapshot_);
    dirty_ = true;  // this snapshot was read before the world size was known
  }
  // The charts of the metrics the run recorded (a metric's first points bring its chart): new
  // ones are read again.
  if (charts_->setRunFacts({.metrics = snapshot.report.metrics})) dirty_ = true;
  header_->apply(snapshot);
  // Charts on a hidden tab are brought up to date when it is shown.
  charts_stale_ = tabs_->currentIndex() != 0;
  if (!charts_stale_) charts_->apply(snapshot);
  ranks_->apply(snapshot);
  comm_->apply(snapshot);
  logs_->apply(snapshot);
  // A pipeline run, or a mesh with pipeline stages (issue 34: "ddp+pipeline", ...).
  const MeshSpec mesh = meshOf(snapshot.run());
  const bool pipeline = snapshot.run().strategy == "pipeline" || mesh.pp > 1;
  tabs_->setTabVisible(tabs_->indexOf(pipeline_), pipeline);
  const nlohmann::json spec = nlohmann::json::parse(snapshot.run().spec_json, nullptr, false);
  charts_->setStepsPerEvent(spec.is_object() ? spec.value("/telemetry/every_steps"_json_pointer, 1)
                                             : 1);
  pipeline_->setMesh(mesh);
  if (pipeline)
    pipeline_->setRun(db_path_, run_id_, snapshot.run().spec_json, snapshot.scheduled_steps);
  const bool groups_unknown = grouping_ != RankGrouping::kRankOrder &&
                              (!snapshot_ || snapshot_->coordinates != snapshot.coordinates);
  snapshot_ = std::move(snapshot);
  if (groups_unknown) {
    applyGrouping();
    dirty_ = true;  // the bands were read without these groups
  }
  updateCancelButton();
  const QString status = QString::fromStdString(snapshot_->run().status);
  if (status != last_status_) {
    last_status_ = status;
    openOnFailure();
    emit statusChanged(status);
  }
  emit refreshed();
}

// A run that failed before any step (a bad argument, an import error) opens on its logs, the
// root cause above them, not on empty charts (issue 33); once, when it is seen failed, and only
// from the Charts tab, so a tab the user chose stays.
void RunView::openOnFailure() {
  if (snapshot_->run().status != "failed" || snapshot_->report.summary.final_step > 0) return;
  if (tabs_->currentWidget() == charts_) tabs_->setCurrentWidget(logs_);
}

MetricChart* RunView::chart(const QString& title) const {
  return charts_->chart(title);
}

std::vector<MetricChart*> RunView::charts() const {
  return charts_->charts();
}

QString RunView::statusText() const {
  return header_->statusText();
}
QString RunView::schedulerText() const {
  return header_->schedulerText();
}
QString RunView::rootCauseText() const {
  return header_->rootCauseText();
}
QString RunView::hangText() const {
  return header_->hangText();
}
QString RunView::figuresText() const {
  return header_->figuresText();
}
QString RunView::progressText() const {
  return header_->progressText();
}
QString RunView::logText() const {
  return logs_->text();
}
QPlainTextEdit* RunView::logView() const {
  return logs_->view();
}
QString RunView::flightRecorderText() const {
  return comm_->flightRecorder()->summaryText();
}
QTableView* RunView::flightRecorderTable() const {
  return comm_->flightRecorder()->table();
}
FlightRecorderModel* RunView::flightRecorderModel() const {
  return comm_->flightRecorder()->model();
}
RankTableModel* RunView::rankModel() const {
  return ranks_->rankModel();
}
QTableView* RunView::rankTable() const {
  return ranks_;
}
CommOpsModel* RunView::commModel() const {
  return comm_->model();
}
HeatMap* RunView::heatMap() const {
  return comm_->heatMap();
}

void RunView::setCancellable(bool cancellable) {
  cancellable_ = cancellable;
  updateCancelButton();
}

void RunView::updateCancelButton() {
  header_->setCancelVisible(cancellable_ && snapshot_ && stillGoing(snapshot_->run().status));
}

QStringList RunView::exportCharts(const QString& directory, const QStringList& formats) {
  return charts_->exportCharts(directory, formats);
}

QDialog* RunView::openExportDialog() {
  return charts_->openExportDialog();
}

}  // namespace ringmaster::ui
