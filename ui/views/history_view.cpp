// HistoryView: filters above a table of RunListModel, refreshed when data_version moves; the jobs
// are "open" (connect and reconcile), "poll" (data_version) and "list" (the filtered runs).
#include "views/history_view.h"

#include <QComboBox>
#include <QDateEdit>
#include <QDateTime>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPushButton>
#include <QSignalBlocker>
#include <QTableView>
#include <QTextDocument>
#include <QTimer>
#include <QVBoxLayout>
#include <set>

#include "core/error.h"
#include "data/background_jobs.h"
#include "db/database.h"
#include "models/run_list_model.h"
#include "models/untrusted_text.h"
#include "query/compare_axes.h"
#include "query/run_search.h"
#include "recorder/recorder.h"
#include "views/run/run_colors.h"
#include "views/run_organise.h"
#include "views/table_copy.h"

namespace ringmaster::ui {

// What a list read says of the runs' specs: the fields they have (those that differ first) and,
// when a field colours them, each run's group (query/compare_axes.h). Computed off the GUI thread
// with the list: it parses every listed run's spec.
struct HistoryView::SpecGroups {
  std::vector<std::string> fields;
  std::vector<int64_t> run_ids;
  std::optional<storage::ComparisonAxis> axis;
};

namespace {

HistoryView::SpecGroups specGroups(const std::vector<storage::RunRecord>& runs,
                                   const std::string& field) {
  std::vector<nlohmann::json> specs;
  HistoryView::SpecGroups groups;
  for (const storage::RunRecord& run : runs) {
    specs.push_back(storage::specOnlyReport(run.spec_json));
    groups.run_ids.push_back(run.id);
  }
  groups.fields = storage::axisChoices(specs).spec_fields;
  if (!field.empty() &&
      std::find(groups.fields.begin(), groups.fields.end(), field) != groups.fields.end())
    groups.axis = storage::comparisonAxis(specs, field);
  return groups;
}

// Which sweep each run of a sweep belongs to (issue 37).
std::map<int64_t, storage::SweepMembership> sweepsOfRuns(const storage::Database& db) {
  std::map<int64_t, storage::SweepMembership> of_run;
  for (const storage::SweepRecord& sweep : storage::listSweeps(db))
    for (const storage::SweepMember& member : sweep.members)
      if (member.run_id) of_run[*member.run_id] = {sweep.id, member.position};
  return of_run;
}

// The status filter's items: any, then every run status (pending: queued in Slurm, issue 35).
QStringList statusChoices() {
  return {"any status", "pending", "running", "completed", "failed", "cancelled", "interrupted"};
}

}  // namespace

HistoryView::HistoryView(QWidget* parent) : QWidget(parent) {
  jobs_ = new BackgroundJobs(this);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  addFilters(layout);
  addRunTable(layout);
  QPushButton* open = addButtons(layout);
  connectControls(open);
}

// The error line, the name filter, the strategy, status and date filters, colour-by and its legend.
void HistoryView::addFilters(QVBoxLayout* layout) {
  error_ = new QLabel();
  error_->setObjectName("historyError");
  error_->setWordWrap(true);
  error_->hide();
  layout->addWidget(error_);
  name_ = new QLineEdit();
  name_->setObjectName("historyName");
  name_->setPlaceholderText("filter by name");
  name_->setClearButtonEnabled(true);
  layout->addWidget(name_);
  auto* filters = new QHBoxLayout();
  strategy_ = new QComboBox();
  strategy_->setObjectName("historyStrategy");
  strategy_->addItems({"any strategy", "single", "ddp", "fsdp", "pipeline"});
  status_ = new QComboBox();
  status_->setObjectName("historyStatus");
  status_->addItems(statusChoices());
  since_ = new QDateEdit(QDate(2000, 1, 1));
  since_->setObjectName("historySince");
  since_->setDisplayFormat("yyyy-MM-dd");
  since_->setCalendarPopup(true);
  since_->setToolTip("runs created on or after this date");
  filters->addWidget(strategy_);
  filters->addWidget(status_);
  filters->addWidget(since_);
  layout->addLayout(filters);
  colour_by_ = new QComboBox();
  colour_by_->setObjectName("historyColourBy");
  colour_by_->addItem("colour by: nothing", QString());
  colour_by_->setToolTip("runs with the same value of this spec field share a colour");
  colour_by_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  colour_by_->setMinimumContentsLength(12);
  layout->addWidget(colour_by_);
  legend_ = new QLabel();
  legend_->setObjectName("historyLegend");
  legend_->setTextFormat(Qt::RichText);  // its untrusted parts are escaped
  legend_->setWordWrap(true);
  legend_->hide();
  layout->addWidget(legend_);
}

void HistoryView::addRunTable(QVBoxLayout* layout) {
  table_ = new QTableView();
  table_->setObjectName("historyTable");
  model_ = new RunListModel(this);
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->verticalHeader()->hide();
  // Every column as wide as what it holds, the name included (issue 15: a stretched name column
  // was left two letters in a narrow dock); the table scrolls sideways when the dock is narrow.
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setAlternatingRowColors(true);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  enableCsvCopy(table_);
  layout->addWidget(table_, 1);
}

// Open, Compare, Attach, Cancel run and the organising buttons; returns Open.
QPushButton* HistoryView::addButtons(QVBoxLayout* layout) {
  auto* buttons = new QHBoxLayout();
  auto* open = new QPushButton("Open");
  compare_ = new QPushButton("Compare");
  compare_->setObjectName("compareButton");
  compare_->setToolTip("Compare the selected runs (select two or more)");
  compare_->setEnabled(false);
  // A detached run (ringmaster run --detach) goes on with no recorder: these take it again.
  attach_ = new QPushButton("Attach");
  attach_->setObjectName("attachButton");
  attach_->setToolTip(
      "Follow the selected detached run: record what it did since it was last recorded, then "
      "live to its end");
  attach_->setEnabled(false);
  cancel_detached_ = new QPushButton("Cancel run");
  cancel_detached_->setObjectName("cancelDetachedButton");
  cancel_detached_->setToolTip(
      "Stop the selected detached run on every host, record it to its end as cancelled and check "
      "that none of its processes is left");
  cancel_detached_->setEnabled(false);
  buttons->addWidget(open);
  buttons->addWidget(compare_);
  buttons->addWidget(attach_);
  buttons->addWidget(cancel_detached_);
  addOrganising(layout, buttons);
  layout->addLayout(buttons);

  return open;
}

// The filters refresh the list; the buttons follow the selection; the list polls every 500 ms.
void HistoryView::connectControls(QPushButton* open) {
  connect(name_, &QLineEdit::textChanged, this, &HistoryView::refresh);
  connect(strategy_, &QComboBox::currentIndexChanged, this, &HistoryView::refresh);
  connect(status_, &QComboBox::currentIndexChanged, this, &HistoryView::refresh);
  connect(since_, &QDateEdit::dateChanged, this, &HistoryView::refresh);
  connect(colour_by_, &QComboBox::currentIndexChanged, this, &HistoryView::refresh);
  connect(table_, &QTableView::doubleClicked, this,
          [this](const QModelIndex& index) { emit openRun(model_->runAt(index.row()).id); });
  addRowMenu();
  connect(open, &QPushButton::clicked, this, [this] {
    for (int64_t id : selectedRuns()) emit openRun(id);
  });
  connect(compare_, &QPushButton::clicked, this, [this] {
    if (selectedRuns().size() >= 2) emit compareRuns(selectedRuns());
  });
  connect(attach_, &QPushButton::clicked, this, [this] {
    if (const std::optional<int64_t> run = selectedDetachedRun()) emit attachRun(*run);
  });
  connect(cancel_detached_, &QPushButton::clicked, this, [this] {
    if (const std::optional<int64_t> run = selectedDetachedRun()) emit cancelDetachedRun(*run);
  });
  const auto updateButtons = [this] {
    compare_->setEnabled(selectedRuns().size() >= 2);
    const bool detached = selectedDetachedRun().has_value();
    attach_->setEnabled(detached);
    cancel_detached_->setEnabled(detached);
    edit_->setEnabled(selectedRuns().size() == 1);
    delete_->setEnabled(!selectedRuns().empty());
  };
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, updateButtons);
  // A selected run's status changes under the selection as the list refreshes.
  connect(model_, &QAbstractItemModel::modelReset, this, updateButtons);
  connect(model_, &QAbstractItemModel::dataChanged, this, updateButtons);
  connect(model_, &QAbstractItemModel::layoutChanged, this, updateButtons);
  connect(model_, &QAbstractItemModel::rowsInserted, this, updateButtons);
  connect(model_, &QAbstractItemModel::rowsRemoved, this, updateButtons);
  timer_ = new QTimer(this);
  timer_->setInterval(500);
  connect(timer_, &QTimer::timeout, this, &HistoryView::poll);
  timer_->start();
}

HistoryView::~HistoryView() = default;

void HistoryView::setDatabase(const std::string& db_path) {
  db_path_ = db_path;
  watch_.open(
      jobs_, db_path, [](storage::Database& db) { storage::reconcileInterruptedRuns(db); },
      [this] { refresh(); }, [this](const QString& error) { showError(error); });
}

void HistoryView::poll() {
  watch_.poll(jobs_, [this] { refresh(); });
}

void HistoryView::refresh() {
  if (db_path_.empty()) return;
  storage::RunSearch search = storage::parseRunSearch(
      search_->text().toStdString(), static_cast<double>(QDateTime::currentSecsSinceEpoch()));
  QStringList problems;
  for (const std::string& problem : search.problems) problems << QString::fromStdString(problem);
  search_problems_->setText(problems.join('\n'));
  search_problems_->setVisible(!problems.isEmpty());
  storage::RunFilter filter = std::move(search.filter);
  if (!name_->text().trimmed().isEmpty())
    filter.name_contains = name_->text().trimmed().toStdString();
  if (strategy_->currentIndex() > 0) filter.strategy = strategy_->currentText().toStdString();
  if (status_->currentIndex() > 0) filter.status = status_->currentText().toStdString();
  if (since_->date() > QDate(2000, 1, 1))
    filter.created_after = static_cast<double>(since_->date().startOfDay().toSecsSinceEpoch());
  struct Listed {
    std::vector<storage::RunRecord> runs;
    SpecGroups groups;
    std::map<int64_t, storage::SweepMembership> sweeps;
  };
  jobs_->run<Listed>(
      "list",
      [path = db_path_, filter,
       field = colour_by_->currentData().toString().toStdString()](const JobToken&) {
        storage::Database db(path, storage::readingOptions(path));
        Listed listed{storage::listRuns(db, filter), {}};
        listed.groups = specGroups(listed.runs, field);
        listed.sweeps = sweepsOfRuns(db);
        return listed;
      },
      [this](Listed listed) {
        error_->hide();
        applySpecGroups(listed.groups);
        sweep_of_run_ = std::move(listed.sweeps);
        // Keep the selection across the refresh by run id.
        const std::vector<int64_t> selected = selectedRuns();
        model_->setRuns(std::move(listed.runs));
        for (int64_t id : selected)
          if (const int row = model_->rowOfRun(id); row >= 0)
            table_->selectionModel()->select(
                model_->index(row, 0), QItemSelectionModel::Select | QItemSelectionModel::Rows);
      },
      [this](const QString& error) { showError(error); });
}

void HistoryView::applySpecGroups(const SpecGroups& groups) {
  {
    const QSignalBlocker quiet(colour_by_);
    const QString picked = colour_by_->currentData().toString();
    colour_by_->clear();
    colour_by_->addItem("colour by: nothing", QString());
    for (const std::string& path : groups.fields)
      colour_by_->addItem("colour by " + untrustedLine(path), untrustedLine(path));
    colour_by_->setCurrentIndex(std::max(colour_by_->findData(picked), 0));
  }
  std::map<int64_t, QColor> colours;
  QStringList items;
  if (groups.axis) {
    const storage::ComparisonAxis& axis = *groups.axis;
    for (size_t i = 0; i < groups.run_ids.size(); ++i) {
      const int category = axis.points[i].category;
      colours[groups.run_ids[i]] = category < 0 ? QColor(0x99, 0x99, 0x99) : rankColor(category);
    }
    for (size_t k = 0; k < axis.categories.size(); ++k) {
      const auto count = std::count_if(axis.points.begin(), axis.points.end(),
                                       [&](const auto& p) { return p.category == int(k); });
      items << QString("<span style=\"color:%1\">&#9632;</span>&nbsp;%2 = %3 (%4)")
                   .arg(rankColor(static_cast<int>(k)).name(),
                        untrustedLine(axis.key).toHtmlEscaped(),
                        untrustedLine(axis.categories[k]).toHtmlEscaped())
                   .arg(count);
    }
  }
  model_->setRunColours(std::move(colours));
  legend_->setText(items.join("&nbsp;&nbsp; "));
  legend_->setVisible(!items.isEmpty());
}

std::optional<storage::SweepMembership> HistoryView::sweepOf(int64_t run_id) const {
  const auto found = sweep_of_run_.find(run_id);
  return found == sweep_of_run_.end() ? std::nullopt
                                      : std::optional<storage::SweepMembership>(found->second);
}

void HistoryView::addRowMenu() {
  table_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(table_, &QTableView::customContextMenuRequested, this, [this](const QPoint& at) {
    const QModelIndex index = table_->indexAt(at);
    if (!index.isValid()) return;
    QMenu* menu = rowMenu(index.row());
    menu->setAttribute(Qt::WA_DeleteOnClose);
    menu->popup(table_->viewport()->mapToGlobal(at));
  });
}

QMenu* HistoryView::rowMenu(int row) {
  const int64_t run_id = model_->runAt(row).id;
  auto* menu = new QMenu(this);
  menu->addAction(QString("Open run %1").arg(run_id), this,
                  [this, run_id] { emit openRun(run_id); });
  if (const std::optional<storage::SweepMembership> sweep = sweepOf(run_id))
    menu->addAction(
        QString("Open sweep %1 (member %2)").arg(sweep->sweep_id).arg(sweep->position + 1), this,
        [this, id = sweep->sweep_id] { emit openSweep(id); });
  return menu;
}

QString HistoryView::legendText() const {
  if (legend_->isHidden()) return {};
  QTextDocument document;
  document.setHtml(legend_->text());
  return document.toPlainText();
}

void HistoryView::addOrganising(QVBoxLayout* layout, QHBoxLayout* buttons) {
  search_ = new QLineEdit();
  search_->setObjectName("historySearch");
  search_->setPlaceholderText("search: words, tag:T, note:T, since:7d, optimizer.lr=3e-4");
  search_->setToolTip(
      "Words are looked for in the name, the tags and the note. Terms: tag:T, note:TEXT, "
      "status:S, strategy:S, name:TEXT, since:DATE, until:DATE (2026-11-28, 7d, 12h), and a spec "
      "field's value: optimizer.lr=3e-4");
  search_->setClearButtonEnabled(true);
  search_problems_ = new QLabel();
  search_problems_->setObjectName("historySearchProblems");
  search_problems_->setWordWrap(true);
  search_problems_->setStyleSheet("color: #b91c1c");
  search_problems_->hide();
  notice_ = new QLabel();
  notice_->setObjectName("historyNotice");
  notice_->setWordWrap(true);
  notice_->setTextFormat(Qt::PlainText);
  notice_->hide();
  layout->insertWidget(layout->indexOf(name_), search_);
  layout->insertWidget(layout->indexOf(name_), search_problems_);
  layout->addWidget(notice_);
  edit_ = new QPushButton("Edit…");
  edit_->setObjectName("historyEditButton");
  edit_->setToolTip("Rename the selected run, change its tags and its note");
  edit_->setEnabled(false);
  delete_ = new QPushButton("Delete…");
  delete_->setObjectName("historyDeleteButton");
  delete_->setToolTip("Delete the selected runs and every row of them (asks first)");
  delete_->setEnabled(false);
  buttons->addWidget(edit_);
  buttons->addWidget(delete_);
  connect(search_, &QLineEdit::textChanged, this, &HistoryView::refresh);
  connect(edit_, &QPushButton::clicked, this, [this] {
    const std::vector<int64_t> ids = selectedRuns();
    if (ids.size() != 1) return;
    editRun(this, jobs_, db_path_, model_->runAt(model_->rowOfRun(ids.front())),
            [this](const QString& error) {
              showNotice(error.isEmpty() ? QString("Saved.") : error);
              refresh();
            });
  });
  connect(delete_, &QPushButton::clicked, this, [this] {
    std::vector<storage::RunRecord> runs;
    for (int64_t id : selectedRuns()) runs.push_back(model_->runAt(model_->rowOfRun(id)));
    deleteRuns(this, jobs_, db_path_, runs, [this](const QString& said) {
      showNotice(said);
      refresh();
    });
  });
}

void HistoryView::showNotice(const QString& text) {
  notice_->setText(text);
  notice_->setVisible(!text.isEmpty());
}

void HistoryView::setSearch(const QString& text) {
  search_->setText(text);
}

QString HistoryView::searchProblems() const {
  return search_problems_->isHidden() ? QString() : search_problems_->text();
}

QString HistoryView::noticeText() const {
  return notice_->isHidden() ? QString() : notice_->text();
}

void HistoryView::showError(const QString& error) {
  error_->setText("Cannot read the runs: " + error);
  error_->show();
}

QString HistoryView::errorText() const {
  return error_->isHidden() ? QString() : error_->text();
}

std::optional<int64_t> HistoryView::selectedDetachedRun() const {
  const QModelIndexList rows = table_->selectionModel()->selectedRows();
  if (rows.size() != 1) return std::nullopt;
  const storage::RunRecord& run = model_->runAt(rows.front().row());
  // Pending too: a job waiting in Slurm's queue is attached to and cancelled as a live one.
  if (!run.detached || !stillGoing(run.status)) return std::nullopt;
  return run.id;
}

std::vector<int64_t> HistoryView::selectedRuns() const {
  std::set<int> rows;
  for (const QModelIndex& index : table_->selectionModel()->selectedRows())
    rows.insert(index.row());
  std::vector<int64_t> ids;
  for (int row : rows) ids.push_back(model_->runAt(row).id);
  return ids;
}

void HistoryView::setNameFilter(const QString& text) {
  name_->setText(text);
}

void HistoryView::setStatusFilter(const QString& status) {
  status_->setCurrentIndex(status.isEmpty() ? 0 : std::max(status_->findText(status), 0));
}

}  // namespace ringmaster::ui
