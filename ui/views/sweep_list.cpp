// SweepListView: a table of SweepListModel, refreshed when data_version moves; the jobs are
// "open" (connect and reconcile), "poll" (data_version) and "list" (the sweeps).
#include "views/sweep_list.h"

#include <QDateTime>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include "data/background_jobs.h"
#include "db/database.h"
#include "models/sweep_models.h"
#include "query/sweeps.h"
#include "recorder/sweep_records.h"
#include "sweep/sweep_runner.h"
#include "views/table_copy.h"

namespace ringmaster::ui {

SweepListView::SweepListView(QWidget* parent) : QWidget(parent) {
  jobs_ = new BackgroundJobs(this);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  error_ = new QLabel();
  error_->setObjectName("sweepListError");
  error_->setWordWrap(true);
  error_->setTextFormat(Qt::PlainText);
  error_->hide();
  layout->addWidget(error_);
  auto* hint = new QLabel("Double-click a sweep to see its runs side by side.");
  layout->addWidget(hint);
  table_ = new QTableView();
  table_->setObjectName("sweepList");
  model_ = new SweepListModel(this);
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  enableCsvCopy(table_);
  layout->addWidget(table_, 1);
  connect(table_, &QTableView::doubleClicked, this,
          [this](const QModelIndex& index) { emit openSweep(model_->sweepAt(index.row()).id); });
  timer_ = new QTimer(this);
  timer_->setInterval(500);
  connect(timer_, &QTimer::timeout, this, &SweepListView::poll);
  timer_->start();
}

SweepListView::~SweepListView() {
  delete jobs_;  // cancels and waits for the reads in flight, before the widgets go
}

void SweepListView::setDatabase(const std::string& db_path) {
  db_path_ = db_path;
  watch_.open(
      jobs_, db_path,
      [](storage::Database& db) {
        storage::reconcileInterruptedSweeps(
            db, static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000,
            session::sweepDriverRuns);
      },
      [this] { refresh(); }, [this](const QString& error) { showError(error); });
}

void SweepListView::poll() {
  watch_.poll(jobs_, [this] { refresh(); });
}

void SweepListView::refresh() {
  if (db_path_.empty()) return;
  jobs_->run<std::vector<storage::SweepRecord>>(
      "list",
      [path = db_path_](const JobToken&) {
        storage::Database db(path, storage::readingOptions(path));
        return storage::listSweeps(db);
      },
      [this](std::vector<storage::SweepRecord> sweeps) {
        error_->hide();
        model_->setSweeps(std::move(sweeps));
      },
      [this](const QString& error) { showError(error); });
}

void SweepListView::showError(const QString& error) {
  error_->setText("Cannot read the sweeps: " + error);
  error_->show();
}

QString SweepListView::errorText() const {
  return error_->isHidden() ? QString() : error_->text();
}

}  // namespace ringmaster::ui
