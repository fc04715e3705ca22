// SweepView: the header and "Rank by" over the members' table and the best run's box, the
// parallel coordinates and the scatter below; the jobs are "poll" (data_version) and "load" (the
// sweep's report).
#include "views/sweep_view.h"

#include <QComboBox>
#include <QDateTime>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSignalBlocker>
#include <QSplitter>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>
#include <map>

#include "data/background_jobs.h"
#include "db/database.h"
#include "models/format.h"
#include "models/sweep_models.h"
#include "models/untrusted_text.h"
#include "query/figures.h"
#include "query/sweep_report.h"
#include "views/axis_picker.h"
#include "views/table_copy.h"
#include "widgets/parallel_coordinates.h"
#include "widgets/scatter_chart.h"

namespace ringmaster::ui {

namespace {

// A live sweep's report is read again at most this often (its runs commit every step).
constexpr int kPollMs = 250;

// A run the ranking figure does not colour (it has no value yet).
const QColor kNoValue(0x99, 0x99, 0x99);

QTableView* makeTable(const QString& name, QAbstractItemModel* model) {
  auto* table = new QTableView();
  table->setObjectName(name);
  table->setModel(model);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  table->setAlternatingRowColors(true);
  table->verticalHeader()->hide();
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table->horizontalHeader()->setStretchLastSection(true);
  enableCsvCopy(table);
  return table;
}

QLabel* boldLabel(const QString& text) {
  auto* label = new QLabel(QString("<b>%1</b>").arg(text));
  label->setTextFormat(Qt::RichText);
  return label;
}

}  // namespace

SweepView::SweepView(std::string db_path, int64_t sweep_id, QWidget* parent)
    : QWidget(parent), db_path_(std::move(db_path)), sweep_id_(sweep_id), watch_(db_path_) {
  jobs_ = new BackgroundJobs(this);
  setObjectName(QString("sweepView%1").arg(sweep_id));
  auto* layout = new QVBoxLayout(this);
  auto* top = new QHBoxLayout();
  header_ = new QLabel(QString("Sweep %1").arg(sweep_id));
  header_->setObjectName("sweepHeader");
  header_->setTextFormat(Qt::PlainText);
  top->addWidget(header_, 1);
  top->addWidget(new QLabel("Rank by"));
  rank_by_ = new QComboBox();
  rank_by_->setObjectName("sweepRankBy");
  rank_by_->setToolTip(
      "The figure that picks the best run (lowest, or highest for rates and MFU) and colours the "
      "charts");
  for (const storage::Figure& figure : storage::figureTable())
    if (storage::isRunFigure(figure))
      rank_by_->addItem(figureHeading(figure.id),
                        QString::fromUtf8(figure.id.data(), std::ssize(figure.id)));
  rank_by_->setCurrentIndex(rank_by_->findData("final_loss"));
  connect(rank_by_, &QComboBox::currentIndexChanged, this, [this] { reload(); });
  top->addWidget(rank_by_);
  layout->addLayout(top);
  error_ = new QLabel();
  error_->setObjectName("sweepError");
  error_->setWordWrap(true);
  error_->setTextFormat(Qt::PlainText);
  error_->hide();
  layout->addWidget(error_);

  model_ = new SweepMembersModel(this);
  table_ = makeTable("sweepMembers", model_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(0, Qt::AscendingOrder);
  connect(table_, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
    if (const std::optional<int64_t> run = model_->runAt(index.row())) emit openRun(*run);
  });
  auto* upper = new QSplitter(Qt::Horizontal);
  upper->addWidget(table_);
  upper->addWidget(makeBestBox());
  upper->setStretchFactor(0, 3);
  upper->setStretchFactor(1, 1);
  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(upper);
  splitter->addWidget(makeChartsBox());
  layout->addWidget(splitter, 1);

  poll_timer_ = new QTimer(this);
  poll_timer_->setInterval(kPollMs);
  connect(poll_timer_, &QTimer::timeout, this, &SweepView::poll);
  poll_timer_->start();
  startLoad();
}

SweepView::~SweepView() {
  delete jobs_;  // cancels and waits for the reads in flight, before the widgets go
}

QWidget* SweepView::makeBestBox() {
  auto* box = new QWidget();
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  best_ = new QLabel();
  best_->setObjectName("sweepBest");
  best_->setWordWrap(true);
  best_->setTextFormat(Qt::PlainText);
  layout->addWidget(boldLabel("Best run"));
  layout->addWidget(best_);
  differences_model_ = new SweepDifferencesModel(this);
  layout->addWidget(makeTable("sweepBestDifferences", differences_model_), 1);
  return box;
}

QWidget* SweepView::makeChartsBox() {
  auto* charts = new QSplitter(Qt::Horizontal);
  parallel_ = new ParallelCoordinatesChart();
  parallel_->setObjectName("sweepParallel");
  charts->addWidget(parallel_);
  auto* box = new QWidget();
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* pickers = new QHBoxLayout();
  const auto picker = [&](const QString& name, const QString& label) {
    QComboBox* combo = addAxisPicker(pickers, name, label);
    connect(combo, &QComboBox::currentIndexChanged, this, [this] { redrawCharts(); });
    return combo;
  };
  x_picker_ = picker("sweepX", "X");
  y_picker_ = picker("sweepY", "Y");
  layout->addLayout(pickers);
  scatter_ = new ScatterChart();
  scatter_->setObjectName("sweepScatter");
  layout->addWidget(scatter_, 1);
  charts->addWidget(box);
  return charts;
}

void SweepView::setRankBy(const QString& figure_id) {
  rank_by_->setCurrentIndex(rank_by_->findData(figure_id));
}

QString SweepView::headerText() const {
  return header_->text();
}

QString SweepView::bestText() const {
  return best_->text();
}

QString SweepView::errorText() const {
  return error_->isHidden() ? QString() : error_->text();
}

bool SweepView::watching() const {
  return poll_timer_->isActive();
}

void SweepView::reload() {
  dirty_ = true;
  if (!jobs_->busy("load")) startLoad();
}

void SweepView::poll() {
  if (dirty_ && !jobs_->busy("load")) startLoad();
  watch_.poll(jobs_, [this] { reload(); });
}

void SweepView::startLoad() {
  dirty_ = false;
  const std::string rank_by = rank_by_->currentData().toString().toStdString();
  jobs_->run<SweepData>(
      "load",
      [path = db_path_, id = sweep_id_, rank_by, reconcile = !reconciled_](const JobToken&) {
        const double now = static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000;
        return loadSweepData(path, id, rank_by, now, reconcile);
      },
      [this](SweepData data) {
        reconciled_ = true;
        apply(std::move(data));
        if (dirty_) startLoad();
      },
      [this](const QString& error) {
        error_->setText(QString("Cannot show sweep %1: %2").arg(sweep_id_).arg(error));
        error_->show();
        if (dirty_) startLoad();
      });
}

void SweepView::apply(SweepData data) {
  data_ = std::move(data);
  error_->hide();
  const nlohmann::json sweep = data_->report.value("sweep", nlohmann::json::object());
  QStringList fields;
  for (const std::string& field : data_->fields) fields << untrustedLine(field);
  const std::string status = sweep.value("status", "");
  header_->setText(
      QString("Sweep %1 · %2 · %3 · %4 of %5 members ended · %6 over %7")
          .arg(sweep_id_)
          .arg(untrustedLine(sweep.value("name", "")), untrustedLine(status))
          .arg(sweep.value("ended", 0))
          .arg(sweep.value("members", 0))
          .arg(untrustedLine(sweep.value("plan", nlohmann::json::object()).value("method", "grid")),
               fields.join(" × ")));
  model_->setReport(data_->report, data_->rank_by);
  // The header's arrow stays on the sorted column when the columns move (a new ranking figure).
  if (const int sorted = model_->sortColumn();
      sorted >= 0 && sorted != table_->horizontalHeader()->sortIndicatorSection())
    table_->horizontalHeader()->setSortIndicator(sorted, model_->sortOrder());
  const nlohmann::json& best = data_->report.value("best", nlohmann::json());
  differences_model_->setBest(best);
  const QString figure = figureName(data_->rank_by);
  if (best.is_object() && best.value("value", nlohmann::json()).is_number())
    best_->setText(QString("By %1 (%2 is better): run %3, member %4, %5")
                       .arg(figure, best.value("higher_is_better", false) ? "higher" : "lower")
                       .arg(best.value("run", int64_t{0}))
                       .arg(best.value("position", 0) + 1)
                       .arg(formatFigureValue(data_->rank_by, best["value"].get<double>())));
  else
    best_->setText(QString("No run has its %1 yet.").arg(figure));
  fillPickers();
  redrawCharts();
  if (!data_->live()) poll_timer_->stop();
  emit statusChanged(QString::fromStdString(status));
}

void SweepView::fillPickers() {
  const auto fill = [&](QComboBox* combo, bool fields_first, const QString& fallback) {
    const QString picked = combo->count() > 0 ? combo->currentData().toString() : fallback;
    const QSignalBlocker quiet(combo);
    combo->clear();
    const auto addFields = [&] {
      for (const std::string& field : data_->fields)
        combo->addItem(untrustedLine(field), QString::fromStdString(field));
    };
    if (fields_first) addFields();
    for (const storage::ComparisonAxis& axis : data_->axes)
      if (axis.is_figure) combo->addItem(figureHeading(axis.key), QString::fromStdString(axis.key));
    if (!fields_first) addFields();
    combo->setCurrentIndex(std::max(combo->findData(picked), 0));
  };
  fill(x_picker_, true,
       data_->fields.empty() ? QString() : QString::fromStdString(data_->fields.front()));
  fill(y_picker_, false, QString::fromStdString(data_->rank_by));
}

void SweepView::redrawCharts() {
  if (!data_) return;
  std::vector<storage::ComparisonAxis> axes;
  for (const std::string& field : data_->fields)
    if (const storage::ComparisonAxis* axis = data_->axis(field)) axes.push_back(*axis);
  if (const storage::ComparisonAxis* figure = data_->axis(data_->rank_by)) axes.push_back(*figure);
  parallel_->setData(std::move(axes), data_->runs);
  const nlohmann::json& best = data_->report.value("best", nlohmann::json());
  const nlohmann::json best_run =
      best.is_object() ? best.value("run", nlohmann::json()) : nlohmann::json();
  parallel_->setHighlightedRun(best_run.is_number_integer()
                                   ? std::optional<int64_t>(best_run.get<int64_t>())
                                   : std::nullopt);
  // The scatter's dots in the colours of their lines.
  std::map<int64_t, QColor> line_colours;
  for (const ParallelCoordinatesChart::DrawnPolyline& line : parallel_->polylines())
    line_colours[line.run_id] = line.colour;
  std::vector<QColor> colours;
  for (int64_t run : data_->runs)
    colours.push_back(line_colours.contains(run) ? line_colours[run] : kNoValue);
  const storage::ComparisonAxis* x = data_->axis(x_picker_->currentData().toString().toStdString());
  const storage::ComparisonAxis* y = data_->axis(y_picker_->currentData().toString().toStdString());
  if (x && y) scatter_->setPoints(*x, *y, data_->runs, std::move(colours));
}

}  // namespace ringmaster::ui
