// PlanView: QProcess around `ringmaster --db DB plan SPEC --json [--trials K]`, its output read
// from files when it ends, shown through the plan models.
#include "views/job/plan_view.h"

#include <sys/prctl.h>
#include <csignal>

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

namespace ringmaster::ui {

namespace {

constexpr int kCancelGraceMs = 15000;

// The spec file's name: the spec's name where it is a plain word (the trials' sweep is named
// "plan NAME" after it), else "spec".
QString specFileName(const nlohmann::json& document) {
  const auto name = document.find("name");
  QString base = name != document.end() && name->is_string()
                     ? QString::fromStdString(name->get<std::string>())
                     : QString();
  static const QRegularExpression kPlain("^[A-Za-z0-9_.-]{1,64}$");
  if (!kPlain.match(base).hasMatch() || base.startsWith('.')) base = "spec";
  return base + ".json";
}

QTableView* tableOver(QAbstractItemModel* model, const QString& name) {
  auto* table = new QTableView();
  table->setObjectName(name);
  table->setModel(model);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  table->setSelectionMode(QAbstractItemView::SingleSelection);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->verticalHeader()->hide();
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  return table;
}

}  // namespace

QStringList planArguments(const PlanCommand& command, const QString& spec_path, int top, int trials,
                          int trial_steps) {
  QStringList args{"--db",  command.db_path,     "plan", spec_path, "--json",
                   "--top", QString::number(top)};
  if (trials > 0)
    args << "--trials" << QString::number(trials) << "--trial-steps"
         << QString::number(trial_steps);
  return args;
}

PlanView::PlanView(PlanCommand command, nlohmann::json document, QWidget* parent)
    : QDialog(parent), command_(std::move(command)), document_(std::move(document)) {
  setObjectName("planView");
  setWindowTitle("Layout advisor");
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(buildControls());
  status_ = new QLabel();
  status_->setObjectName("planStatus");
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(status_);

  layouts_ = new PlanLayoutModel(this);
  sorted_ = new QSortFilterProxyModel(this);
  sorted_->setSourceModel(layouts_);
  sorted_->setSortRole(PlanLayoutModel::kSortRole);
  layouts_table_ = tableOver(sorted_, "planLayouts");
  layouts_table_->setSortingEnabled(true);
  layouts_table_->sortByColumn(PlanLayoutModel::kRank, Qt::AscendingOrder);
  trial_terms_ = new TrialTermsModel(this);
  trials_table_ = tableOver(trial_terms_, "planTrials");
  dropped_ = new QPlainTextEdit();
  dropped_->setObjectName("planDropped");
  dropped_->setReadOnly(true);
  trials_summary_ = new QLabel();
  trials_summary_->setObjectName("planTrialsSummary");
  trials_summary_->setWordWrap(true);

  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(layouts_table_);
  auto* trials_side = new QWidget();
  auto* trials_layout = new QVBoxLayout(trials_side);
  trials_layout->setContentsMargins(0, 0, 0, 0);
  trials_layout->addWidget(new QLabel("<b>Trials</b>: predicted against measured, term by term"));
  trials_layout->addWidget(trials_summary_);
  trials_layout->addWidget(trials_table_, 1);
  split->addWidget(trials_side);
  split->addWidget(dropped_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setStretchFactor(2, 1);
  layout->addWidget(split, 1);
  resize(1200, 800);

  connect(layouts_table_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          &PlanView::refreshButtons);
  process_.setStandardInputFile(QProcess::nullDevice());
  connect(&process_, &QProcess::finished, this, &PlanView::processEnded);
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
    if (error == QProcess::FailedToStart) processEnded(-1, QProcess::CrashExit);
  });
  kill_timer_.setSingleShot(true);
  connect(&kill_timer_, &QTimer::timeout, this, [this] {
    if (running()) ::kill(static_cast<pid_t>(pid_), SIGKILL);
  });
  refreshButtons();
}

PlanView::~PlanView() {
  if (!running()) return;
  disconnect(&process_, nullptr, this, nullptr);
  ::kill(static_cast<pid_t>(pid_), SIGTERM);
  if (!process_.waitForFinished(kCancelGraceMs)) {
    ::kill(static_cast<pid_t>(pid_), SIGKILL);
    process_.waitForFinished(5000);
  }
}

// Plan again, the trials' count and length and Run trials, Cancel; Use this layout, Launch best.
QWidget* PlanView::buildControls() {
  auto* row = new QWidget();
  auto* controls = new QHBoxLayout(row);
  controls->setContentsMargins(0, 0, 0, 0);
  plan_button_ = new QPushButton("Plan again");
  plan_button_->setObjectName("planAgainButton");
  connect(plan_button_, &QPushButton::clicked, this, [this] { startPlan(0); });
  controls->addWidget(plan_button_);
  controls->addWidget(new QLabel("Trials of the top"));
  trials_box_ = new QSpinBox();
  trials_box_->setObjectName("planTrialsCount");
  trials_box_->setRange(1, 64);
  trials_box_->setValue(4);
  controls->addWidget(trials_box_);
  controls->addWidget(new QLabel("layouts,"));
  trial_steps_box_ = new QSpinBox();
  trial_steps_box_->setObjectName("planTrialSteps");
  trial_steps_box_->setRange(1, 100000);
  trial_steps_box_->setValue(20);
  trial_steps_box_->setSuffix(" steps");
  controls->addWidget(trial_steps_box_);
  trials_button_ = new QPushButton("Run trials");
  trials_button_->setObjectName("planTrialsButton");
  trials_button_->setToolTip(
      "Run the top K layouts as a sweep of short runs and put their measured terms beside the "
      "predicted ones");
  connect(trials_button_, &QPushButton::clicked, this, [this] { startPlan(trials_box_->value()); });
  controls->addWidget(trials_button_);
  cancel_button_ = new QPushButton("Cancel");
  cancel_button_->setObjectName("planCancelButton");
  connect(cancel_button_, &QPushButton::clicked, this, &PlanView::cancel);
  controls->addWidget(cancel_button_);
  controls->addStretch(1);
  use_button_ = new QPushButton("Use this layout");
  use_button_->setObjectName("planUseButton");
  use_button_->setToolTip("Set the selected layout's fields in the job editor's spec");
  connect(use_button_, &QPushButton::clicked, this, [this] {
    if (const PlanLayoutRow* row = selectedLayout()) emit useLayout(row->overrides);
  });
  controls->addWidget(use_button_);
  launch_best_button_ = new QPushButton("Launch best");
  launch_best_button_->setObjectName("planLaunchBestButton");
  launch_best_button_->setToolTip(
      "Launch the winner as a normal run: the trials' fastest measured where trials ran, else "
      "the best predicted");
  connect(launch_best_button_, &QPushButton::clicked, this, [this] {
    if (const PlanLayoutRow* winner = result_ ? winnerOf(*result_) : nullptr)
      emit launchLayout(winner->overrides);
  });
  controls->addWidget(launch_best_button_);
  return row;
}

bool PlanView::startPlan(int trials) {
  if (running()) return false;
  work_dir_ = std::make_unique<QTemporaryDir>();  // 0700
  const QString spec_path = work_dir_->filePath(specFileName(document_));
  QFile spec(spec_path);
  if (!work_dir_->isValid() || !spec.open(QIODevice::WriteOnly) ||
      !spec.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner) ||
      spec.write(QByteArray::fromStdString(document_.dump(2))) < 0) {
    showStatus("Cannot write the spec to a temporary file", true);
    return false;
  }
  spec.close();
  // Files rather than pipes: a plan left running when this window dies must not fail on a
  // broken pipe before its trials have recorded how they ended.
  process_.setStandardOutputFile(work_dir_->filePath("plan.json"));
  process_.setStandardErrorFile(work_dir_->filePath("plan.log"));
  // The plan must not outlive the window: the kernel sends SIGTERM, which it forwards to its
  // trials, when this process dies.
  process_.setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });
  process_.start(command_.ringmaster, planArguments(command_, spec_path, trials_box_->value(),
                                                    trials, trial_steps_box_->value()));
  if (!process_.waitForStarted(10000)) {
    showStatus("Cannot run ringmaster plan: " + process_.errorString(), true);
    return false;
  }
  pid_ = process_.processId();
  showStatus(trials > 0 ? QString("Running trials of the top %1 layouts, %2 steps each…")
                              .arg(trials)
                              .arg(trial_steps_box_->value())
                        : QString("Planning…"));
  refreshButtons();
  return true;
}

void PlanView::cancel() {
  if (!running()) return;
  ::kill(static_cast<pid_t>(pid_), SIGTERM);
  kill_timer_.start(kCancelGraceMs);
  showStatus("Cancelling…");
}

void PlanView::processEnded(int exit_code, QProcess::ExitStatus status) {
  kill_timer_.stop();
  const int code = status == QProcess::NormalExit ? exit_code : 128 + SIGKILL;
  QFile out(work_dir_ ? work_dir_->filePath("plan.json") : QString());
  QFile log(work_dir_ ? work_dir_->filePath("plan.log") : QString());
  const QByteArray output = out.open(QIODevice::ReadOnly) ? out.readAll() : QByteArray();
  const QString errors =
      log.open(QIODevice::ReadOnly) ? QString::fromUtf8(log.readAll()).trimmed() : QString();
  const auto document = nlohmann::json::parse(output.toStdString(), nullptr, false);
  std::optional<PlanResult> read;
  QString why = QString("ringmaster plan ended without a plan (exit code %1)").arg(code);
  try {
    if (document.is_object()) read = parsePlanJson(document);
  } catch (const nlohmann::json::exception& e) {
    why = QString("The plan's output is not what this window reads: %1").arg(e.what());
  }
  work_dir_.reset();
  if (read) {
    result_ = std::move(read);
    showResult();
  } else {
    showStatus(why + (errors.isEmpty() ? QString() : ":\n" + errors.right(2000)), true);
  }
  refreshButtons();
  emit planFinished(code);
}

void PlanView::showResult() {
  const PlanResult& plan = *result_;
  layouts_->setLayouts(plan.layouts);
  layouts_table_->sortByColumn(PlanLayoutModel::kRank, Qt::AscendingOrder);
  if (!plan.layouts.empty()) layouts_table_->selectRow(0);
  QString dropped = QString("Dropped for memory (%1):\n").arg(plan.dropped.size());
  for (const PlanLayoutRow& row : plan.dropped)
    dropped += QString("  %1: %2\n").arg(row.label, row.dropped);
  dropped += QString("Refused by the spec validation (%1):\n").arg(plan.refused.size());
  for (const QString& refused : plan.refused) dropped += "  " + refused + "\n";
  dropped_->setPlainText(dropped);
  trial_terms_->setTerms(plan.trials ? plan.trials->terms : std::vector<TrialTermRow>{});
  QString summary;
  if (plan.trials) {
    const TrialsSummary& trials = *plan.trials;
    summary = QString("Rank correlation of predicted and measured rates: %1.")
                  .arg(trials.rank_correlation ? QString::number(*trials.rank_correlation, 'f', 2)
                                               : QString("- (fewer than 2 trials measured)"));
    if (!trials.furthest_term.isEmpty()) {
      summary += QString(" Furthest off: %1 (measured / predicted x%2 on average).")
                     .arg(trials.furthest_term)
                     .arg(trials.furthest_ratio.value_or(0), 0, 'f', 2);
    }
  }
  trials_summary_->setText(summary);
  const PlanLayoutRow* winner = winnerOf(plan);
  showStatus(QString("%1 ranks: %2 valid layout(s), %3 dropped for memory, %4 refused. Best: %5%6.")
                 .arg(plan.world)
                 .arg(plan.layouts.size())
                 .arg(plan.dropped.size())
                 .arg(plan.refused.size())
                 .arg(winner ? winner->label : QString("none"))
                 .arg(plan.trials && winner ? " (the trials' fastest measured)"
                      : winner              ? " (predicted)"
                                            : ""));
}

void PlanView::showStatus(const QString& text, bool error) {
  status_->setStyleSheet(error ? "color: #b3261e;" : "");
  status_->setText(text);
}

void PlanView::refreshButtons() {
  const bool busy = running();
  plan_button_->setEnabled(!busy);
  trials_button_->setEnabled(!busy);
  cancel_button_->setEnabled(busy);
  use_button_->setEnabled(!busy && selectedLayout() != nullptr);
  launch_best_button_->setEnabled(!busy && result_ && winnerOf(*result_) != nullptr);
}

const PlanLayoutRow* PlanView::selectedLayout() const {
  const QModelIndexList rows = layouts_table_->selectionModel()->selectedRows();
  if (rows.isEmpty()) return nullptr;
  const int index = sorted_->data(rows.front(), PlanLayoutModel::kLayoutRole).toInt();
  return index >= 0 && size_t(index) < layouts_->layouts().size()
             ? &layouts_->layouts()[size_t(index)]
             : nullptr;
}

QString PlanView::statusText() const {
  return status_->text();
}

QString PlanView::droppedText() const {
  return dropped_->toPlainText();
}

QString PlanView::trialsSummaryText() const {
  return trials_summary_->text();
}

}  // namespace ringmaster::ui
