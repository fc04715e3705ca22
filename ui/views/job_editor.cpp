// JobEditor: a JSON document is the single source of truth; the form (SpecForm, with the hosts
// table) and the JSON text both edit it, and the engine's parser checks it after every edit; the
// estimate panel shows what the checked spec needs. Switching the kind of job keeps the sections
// of the kind left for a switch back.
#include "views/job_editor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QShortcut>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>

#include "core/bounded_file.h"
#include "models/format.h"
#include "run/run_session.h"
#include "spec/spec_fields.h"
#include "spec/strategies/plan.h"
#include "views/job/estimate_panel.h"
#include "views/job/mesh_view.h"
#include "views/job/plan_view.h"
#include "views/job/slurm_section.h"
#include "views/job/spec_document.h"
#include "views/job/spec_form.h"
#include "widgets/one_line_label.h"
#include "widgets/wheel_guard.h"

namespace ringmaster::ui {

namespace {

// The engine's sections of the smallest shipped example: what an engine job starts from when a
// program job is switched to one with none kept.
nlohmann::json exampleEngineSections() {
  nlohmann::json sections = nlohmann::json::object();
  const std::vector<ExampleSpec> examples = exampleSpecs();
  for (const ExampleSpec& example : examples) {
    QFile in(example.path);
    if (!in.open(QIODevice::ReadOnly)) continue;
    const auto document = nlohmann::json::parse(in.readAll().toStdString(), nullptr, false);
    if (!document.is_object() || jobKindOf(document) != JobKind::kEngine) continue;
    for (std::string_view section : kEngineOnlySections)
      if (document.contains(section)) sections[std::string(section)] = document[section];
    break;
  }
  return sections;
}

}  // namespace

std::vector<ExampleSpec> exampleSpecs() {
  // The order a new user meets them in: one rank first, then each strategy, then real data.
  static const QStringList kOrder = {"single_mlp", "ddp_mlp", "fsdp_mlp", "pipeline_mlp",
                                     "idx_mnist"};
  std::vector<ExampleSpec> examples;
  const QDir dir(":/examples");
  for (const QString& file : dir.entryList({"*.json"}, QDir::Files, QDir::Name)) {
    QFile in(dir.filePath(file));
    if (!in.open(QIODevice::ReadOnly)) continue;
    const auto parsed = nlohmann::json::parse(in.readAll().toStdString(), nullptr, false);
    if (!parsed.is_object()) continue;
    examples.push_back({QFileInfo(file).completeBaseName(),
                        QString::fromStdString(parsed.value("description", std::string())),
                        dir.filePath(file)});
  }
  auto rank = [](const ExampleSpec& e) {
    const auto i = kOrder.indexOf(e.name);
    return i < 0 ? kOrder.size() : i;
  };
  std::stable_sort(examples.begin(), examples.end(),
                   [&](const ExampleSpec& a, const ExampleSpec& b) { return rank(a) < rank(b); });
  return examples;
}

JobEditor::JobEditor(QWidget* parent) : QWidget(parent) {
  choose_path_ = [this](const SpecField& field, const QString& current) {
    const QString title = QString("Choose %1").arg(QString::fromStdString(field.label));
    if (field.type == FieldType::kDirectory)
      return QFileDialog::getExistingDirectory(this, title, current);
    return QFileDialog::getOpenFileName(
        this, title, current,
        field.path == "program.script" ? "Python scripts (*.py);;All files (*)" : QString());
  };
  auto* outer = new QVBoxLayout(this);
  outer->addLayout(buildExamplesRow());
  auto* splitter = new QSplitter(Qt::Horizontal);
  outer->addWidget(splitter, 1);
  splitter->addWidget(buildFormSide());
  splitter->addWidget(buildSpecSide());
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 1);
  connect(json_, &QPlainTextEdit::textChanged, this, &JobEditor::jsonEdited);
  connect(launch_, &QPushButton::clicked, this, [this] {
    if (spec_) emit launchRequested(document_);
  });
  auto* shortcut = new QShortcut(QKeySequence("Ctrl+Return"), this);
  connect(shortcut, &QShortcut::activated, launch_, &QPushButton::click);
  // The wheel scrolls the form; a menu changes only when chosen (focused) first.
  guardWheel(this);
  // The first window is launchable at once: the smallest example.
  if (examples_->count() > 0)
    startFromExample(examples_->itemText(0));
  else
    setDocument(nlohmann::json::object());
}

// Where a new user starts: the shipped examples, one of them already loaded.
QLayout* JobEditor::buildExamplesRow() {
  auto* start = new QHBoxLayout();
  start->addWidget(new QLabel("<b>Start from an example:</b>"));
  examples_ = new QComboBox();
  examples_->setObjectName("exampleChoice");
  examples_->setToolTip("Replace the spec with one of the examples shipped with Ringmaster");
  // As wide as the name it shows (a file's too), up to a bound: a long file name is elided.
  examples_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  examples_->setMaximumWidth(examples_->fontMetrics().averageCharWidth() * 36);
  for (const ExampleSpec& example : exampleSpecs()) {
    examples_->addItem(example.name, example.path);
    examples_->setItemData(examples_->count() - 1, example.description, Qt::ToolTipRole);
  }
  start->addWidget(examples_);
  example_note_ = new QLabel();
  example_note_->setObjectName("exampleNote");
  example_note_->setWordWrap(true);
  start->addWidget(example_note_, 1);
  connect(examples_, &QComboBox::activated, this, [this](int index) {
    // The spec open now, when it is not an example: its file read again, if it has one.
    const QString file = examples_->itemData(index, kOpenSpecRole).toString();
    if (examples_->itemData(index, kOpenSpecRole).isValid()) {
      if (!file.isEmpty()) loadFile(file);
      return;
    }
    startFromExample(examples_->itemText(index));
  });
  return start;
}

// The form, in a scroll area as wide as the form's narrowest layout.
QWidget* JobEditor::buildFormSide() {
  auto* scroll = new QScrollArea();
  scroll->setObjectName("formScroll");
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  form_ = new SpecForm(document_, [this](const SpecField& field, const QString& current) {
    return choose_path_(field, current);
  });
  connect(form_, &SpecForm::edited, this, [this] {
    refreshJson();
    check();
  });
  connect(form_, &SpecForm::jobKindChosen, this, &JobEditor::jobKindChosen);
  mesh_ = new MeshView(document_);
  form_->addAfterSection("Strategy", mesh_);
  connect(mesh_, &MeshView::edited, this, [this] {
    form_->refresh();  // a flat strategy was written in the mesh's form
    refreshJson();
    check();
  });
  // Issue 35: hosts or Slurm above the scheduler's fields, where sbatch runs above the login
  // node's, the batch script under them.
  slurm_ = new SlurmSection(document_);
  const std::string slurm_group(kSlurmSection);
  form_->addToSection(slurm_group, slurm_, SpecForm::RowPlace::kTop,
                      [](const nlohmann::json&) { return true; });
  form_->addToSection(slurm_group, slurm_->submitFromRow(), SpecForm::RowPlace::kBefore,
                      &slurmChosen, "launch.scheduler.submit_from.");
  form_->addToSection(slurm_group, slurm_->scriptPreview(), SpecForm::RowPlace::kBottom,
                      &slurmChosen);
  connect(slurm_, &SlurmSection::edited, this, [this] {
    form_->refresh();
    refreshJson();
    check();
  });
  scroll->setWidget(form_);
  // The form never needs a horizontal scroll bar: the scroll area is as wide as the form's
  // narrowest layout plus the vertical bar.
  scroll->setMinimumWidth(form_->minimumSizeHint().width() +
                          scroll->verticalScrollBar()->sizeHint().width() +
                          2 * scroll->frameWidth());
  return scroll;
}

// The spec's JSON text, the estimate panel and the launch row.
QWidget* JobEditor::buildSpecSide() {
  auto* right = new QWidget();
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  auto* title = new QLabel("<b>Spec (JSON)</b>, kept in sync with the form");
  title->setWordWrap(true);
  right_layout->addWidget(title);
  // The JSON text over the estimates, the line between them movable; the estimates scroll when
  // the window is low.
  auto* split = new QSplitter(Qt::Vertical);
  split->setChildrenCollapsible(false);
  auto* json_side = new QWidget();
  auto* json_layout = new QVBoxLayout(json_side);
  json_layout->setContentsMargins(0, 0, 0, 0);
  json_ = new QPlainTextEdit();
  json_->setObjectName("specJson");
  json_->setFont(QFont("monospace", font().pointSize() - 1));
  json_->setMinimumHeight(json_->fontMetrics().lineSpacing() * 4);
  json_layout->addWidget(json_, 1);
  json_error_ = new OneLineLabel();  // one line, there when empty: the pane never jumps
  json_error_->setObjectName("jsonError");
  json_error_->setStyleSheet("color: #b3261e;");
  json_layout->addWidget(json_error_);
  split->addWidget(json_side);
  auto* estimates_scroll = new QScrollArea();
  estimates_scroll->setObjectName("estimateScroll");
  estimates_scroll->setWidgetResizable(true);
  estimates_scroll->setFrameShape(QFrame::NoFrame);
  estimates_ = new EstimatePanel();
  estimates_scroll->setWidget(estimates_);
  split->addWidget(estimates_scroll);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  right_layout->addWidget(split, 1);
  right_layout->addLayout(buildLaunchRow());
  return right;
}

// Launch, and beside it every reason it is disabled.
QLayout* JobEditor::buildLaunchRow() {
  auto* launch_row = new QHBoxLayout();
  launch_status_ = new QLabel();
  launch_status_->setObjectName("launchStatus");
  launch_status_->setWordWrap(true);
  launch_status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  launch_status_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  // At most four lines high: a long list of reasons scrolls rather than pushing Launch away.
  auto* status_scroll = new QScrollArea();
  status_scroll->setObjectName("launchStatusScroll");
  status_scroll->setWidgetResizable(true);
  status_scroll->setFrameShape(QFrame::NoFrame);
  status_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  status_scroll->setWidget(launch_status_);
  status_scroll->setFixedHeight(launch_status_->fontMetrics().lineSpacing() * 4 + 4);
  launch_row->addWidget(status_scroll, 1);
  launch_ = new QPushButton("Launch");
  launch_->setObjectName("launchButton");
  launch_->setDefault(true);
  launch_->setToolTip("Launch this job (Ctrl+Return)");
  detach_ = new QCheckBox("Detached");
  detach_->setObjectName("detachBox");
  detach_->setToolTip(
      "Keep the job running when this window, the launch or the SSH connection goes away; "
      "Attach or Cancel run in the run list take it again (ringmaster run --detach)");
  plan_ = new QPushButton("Plan layouts…");
  plan_->setObjectName("planLayoutsButton");
  plan_->setToolTip(
      "The layout advisor: every valid layout of this spec's world ranked by a cost model, "
      "short trials of the best, and launch the winner (ringmaster plan)");
  connect(plan_, &QPushButton::clicked, this, &JobEditor::openPlanView);
  launch_row->addWidget(plan_, 0, Qt::AlignTop);
  launch_row->addWidget(detach_, 0, Qt::AlignTop);
  launch_row->addWidget(launch_, 0, Qt::AlignTop);
  return launch_row;
}

JobEditor::~JobEditor() = default;

void JobEditor::setDocument(const nlohmann::json& document) {
  showDocument(document, nlohmann::ordered_json());
  const nlohmann::json* name = getPath(document_, "name");
  nameOpenSpec(QString("spec %1").arg(name && name->is_string() ? textOf(*name) : "(no name)"),
               QString());
}

// Shows a document whose JSON text keeps the key order of `key_order` (the text it was read
// from).
void JobEditor::showDocument(const nlohmann::json& document, nlohmann::ordered_json key_order) {
  document_ = document.is_object() ? document : nlohmann::json::object();
  key_order_ = std::move(key_order);
  // Another spec: nothing of the previous one's other kind of job is kept for it.
  kept_engine_ = nlohmann::json::object();
  kept_program_ = nullptr;
  slurm_->forgetKept();
  form_->refresh();
  refreshJson();
  check();
}

bool JobEditor::loadFile(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    file_error_ = QString("cannot read %1: %2").arg(path, file.errorString());
    return false;
  }
  // Bounded before it is read or parsed: a device, a FIFO, a huge or deeply nested file is refused.
  if (file.isSequential() || file.size() > static_cast<qint64>(kMaxSpecBytes)) {
    file_error_ = QString("%1: %2, not a job spec of at most %3")
                      .arg(path,
                           file.isSequential() ? QString("not a regular file")
                                               : QString("%1 bytes").arg(file.size()),
                           QString::fromStdString(describeBytes(kMaxSpecBytes)));
    return false;
  }
  const std::string text = file.readAll().toStdString();
  if (const std::optional<SpecProblem> problem = checkSpecText(text)) {
    file_error_ = QString("%1: %2").arg(path, QString::fromStdString(problem->message));
    return false;
  }
  auto parsed = nlohmann::ordered_json::parse(text, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    file_error_ = QString("%1 is not a JSON object").arg(path);
    return false;
  }
  showDocument(nlohmann::json(parsed), parsed);
  if (!path.startsWith(":/")) {
    example_note_->setText(QString("Opened <tt>%1</tt>.").arg(path.toHtmlEscaped()));
    nameOpenSpec(QFileInfo(path).fileName(), path);
  }
  return true;
}

bool JobEditor::startFromExample(const QString& name) {
  for (const ExampleSpec& example : exampleSpecs()) {
    if (example.name != name) continue;
    if (!loadFile(example.path)) return false;
    nameOpenSpec({}, {});
    examples_->setCurrentIndex(examples_->findText(name));
    example_note_->setText(
        QString("<i>%1</i>: %2 Edit any field, or open a spec of your own (Ctrl+O).")
            .arg(name.toHtmlEscaped(), example.description.toHtmlEscaped()));
    return true;
  }
  return false;
}

bool JobEditor::saveFile(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
      file.write(QByteArray::fromStdString(inKeyOrder(document_, key_order_).dump(2) + "\n")) < 0) {
    file_error_ = QString("cannot write %1: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

void JobEditor::jobKindChosen(JobKind kind) {
  if (kind == jobKindOf(document_)) return;
  if (kind == JobKind::kProgram) {
    // The engine's sections and the strategy's mesh and options go, kept for a switch back; the
    // strategy kind stays (what the script does, for the history), named from the mesh where the
    // document has the mesh form.
    const std::string program_kind = programStrategyKindOf(document_);
    kept_engine_ = nlohmann::json::object();
    for (std::string_view name : kEngineOnlySections) {
      const std::string section(name);
      if (!document_.contains(section)) continue;
      kept_engine_[section] = std::move(document_[section]);
      document_.erase(section);
    }
    if (document_.contains("strategy") && document_["strategy"].is_object()) {
      nlohmann::json& strategy = document_["strategy"];
      for (auto it = strategy.begin(); it != strategy.end();) {
        if (it.key() == "kind") {
          ++it;
          continue;
        }
        kept_engine_["strategy"][it.key()] = it.value();
        it = strategy.erase(it);
      }
    }
    if (!getPath(document_, "strategy.kind")) setPath(document_, "strategy.kind", program_kind);
    nlohmann::json program = kept_program_.is_object() ? kept_program_ : nlohmann::json::object();
    if (!program.contains("script")) {
      // The one field a program job cannot do without: asked for at once (left out when the
      // dialog is cancelled, and then marked required next to it).
      const QString script = choose_path_(*findSpecField("program.script"), QString());
      if (!script.isEmpty()) program["script"] = script.toStdString();
    }
    document_["program"] = std::move(program);
  } else {
    kept_program_ = document_["program"];
    document_.erase("program");
    // The strategy: the kept one as it was when it has the mesh form; else the kind the program
    // job was recorded with (the legacy form, valid for the engine) with the kept options of that
    // kind. An example's strategy (no kept sections) is not this job's.
    const bool kept = !kept_engine_.empty();
    const nlohmann::json engine = kept ? std::move(kept_engine_) : exampleEngineSections();
    kept_engine_ = nlohmann::json::object();
    const nlohmann::json* kept_strategy = kept ? getPath(engine, "strategy") : nullptr;
    if (kept_strategy && isMeshForm(*kept_strategy)) {
      document_["strategy"] = *kept_strategy;
    } else if (!getPath(document_, "strategy.kind")) {
      setPath(document_, "strategy.kind", programStrategyKind(document_));
    }
    for (const auto& [section, value] : engine.items()) {
      if (section != "strategy") {
        document_[section] = value;
        continue;
      }
      if (!kept_strategy || isMeshForm(value)) continue;
      // The kept options of the legacy kind now chosen (another kind's would be refused).
      const nlohmann::json* kind = getPath(document_, "strategy.kind");
      const std::string name = kind && kind->is_string() ? kind->get<std::string>() : "";
      const DimensionPlan* plan =
          name == "pipeline" ? &pipelineParallelPlan() : findDataParallelPlan(name);
      const std::vector<std::string_view> keys =
          plan ? plan->optionKeys() : std::vector<std::string_view>{};
      for (const auto& [option, option_value] : value.items())
        if (std::find(keys.begin(), keys.end(), option) != keys.end())
          document_["strategy"][option] = option_value;
    }
  }
  form_->refresh();
  refreshJson();
  check();
}

void JobEditor::jsonEdited() {
  if (updating_) return;
  nlohmann::ordered_json parsed;
  const std::string text = json_->toPlainText().toStdString();
  if (const std::optional<SpecProblem> problem = checkSpecText(text);
      problem && !problem->message.starts_with("invalid JSON")) {
    json_error_->setMessage(QString::fromStdString(problem->message));
    launch_->setEnabled(false);
    showLaunchStatus({"the JSON text is beyond what a job spec may be (see under it)"});
    return;
  }
  try {
    parsed = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    json_error_->setMessage(QString("JSON: %1").arg(e.what()));
    launch_->setEnabled(false);
    showLaunchStatus({"the JSON text does not parse (see under it)"});
    return;
  }
  if (!parsed.is_object()) {
    json_error_->setMessage("the spec must be a JSON object");
    launch_->setEnabled(false);
    showLaunchStatus({"the JSON text is not an object (see under it)"});
    return;
  }
  json_error_->setMessage({});
  document_ = nlohmann::json(parsed);
  key_order_ = std::move(parsed);  // as typed
  form_->refresh();
  check();
}

void JobEditor::refreshJson() {
  updating_ = true;
  key_order_ = inKeyOrder(document_, key_order_);
  json_->setPlainText(QString::fromStdString(key_order_.dump(2)));
  json_error_->setMessage({});
  updating_ = false;
}

void JobEditor::check() {
  SpecParseResult result = parseJobSpec(document_);
  spec_ = result.ok() ? result.spec : std::nullopt;
  problems_ = result.problems;
  QStringList reasons;
  for (const SpecProblem& problem : problems_) {
    const QString message = QString::fromStdString(problem.message);
    const QString path = QString::fromStdString(problem.path);
    reasons << (path.isEmpty() ? message : QString("%1: %2").arg(path, message));
  }
  form_->showProblems(problems_);
  mesh_->showMesh(spec_, problems_);
  slurm_->showDocument(spec_);
  launch_->setEnabled(spec_.has_value());
  plan_->setEnabled(spec_.has_value() && jobKindOf(document_) == JobKind::kEngine &&
                    !plan_ringmaster_.isEmpty());
  // A program job's model is the user's script: nothing to plan, no button.
  plan_->setVisible(jobKindOf(document_) == JobKind::kEngine);
  showLaunchStatus(reasons);
  estimates_->showEstimates(document_, spec_);
}

// The example picker names the spec open when it is not an example: an item of its own, last,
// replaced by the next ("" takes it out).
void JobEditor::nameOpenSpec(const QString& name, const QString& file) {
  const int last = examples_->count() - 1;
  if (last >= 0 && examples_->itemData(last, kOpenSpecRole).isValid()) examples_->removeItem(last);
  if (name.isEmpty()) return;
  examples_->addItem(name);
  examples_->setItemData(examples_->count() - 1, file, kOpenSpecRole);
  examples_->setItemData(examples_->count() - 1,
                         file.isEmpty() ? QString("The spec open now (not from a file)") : file,
                         Qt::ToolTipRole);
  examples_->setCurrentIndex(examples_->count() - 1);
}

void JobEditor::setPlanCommand(const QString& ringmaster, const QString& db_path) {
  plan_ringmaster_ = ringmaster;
  plan_db_path_ = db_path;
  check();
}

PlanView* JobEditor::openPlanView() {
  if (!plan_->isEnabled()) return nullptr;
  if (plan_view_) plan_view_->deleteLater();  // stops a plan still running
  plan_view_ = new PlanView({plan_ringmaster_, plan_db_path_}, document_, this);
  connect(plan_view_, &PlanView::useLayout, this, &JobEditor::applyOverrides);
  connect(plan_view_, &PlanView::launchLayout, this, &JobEditor::launchWithOverrides);
  plan_view_->show();
  plan_view_->startPlan();
  return plan_view_;
}

void JobEditor::applyOverrides(const nlohmann::json& overrides) {
  std::vector<std::string> arguments;
  for (const auto& [field, value] : overrides.items())
    arguments.push_back(field + "=" + value.dump());
  nlohmann::json document = document_;
  try {
    session::applyOverrides(document, arguments);
  } catch (const std::exception& e) {  // the plan's overrides are well formed; never expected
    json_error_->setMessage(QString("cannot apply the layout: %1").arg(e.what()));
    return;
  }
  document_ = std::move(document);
  form_->refresh();
  refreshJson();
  check();
}

void JobEditor::launchWithOverrides(const nlohmann::json& overrides) {
  applyOverrides(overrides);
  if (spec_) emit launchRequested(document_);
}

QString JobEditor::openSpecName() const {
  return examples_->currentText();
}

QString JobEditor::bubbleHintText() const {
  return estimates_->bubbleHintText();
}

void JobEditor::showLaunchStatus(const QStringList& reasons) {
  if (reasons.isEmpty()) {
    launch_status_->setStyleSheet("color: #2c6e2c;");
    launch_status_->setText("Ready to launch (Ctrl+Return).");
    return;
  }
  launch_status_->setStyleSheet("color: #b3261e;");
  launch_status_->setText(QString("Launch is disabled until %1 fixed:\n%2")
                              .arg(reasons.size() == 1 ? "this is" : "these are")
                              .arg(reasons.join('\n')));
}

QString JobEditor::launchStatusText() const {
  return launch_status_->text();
}

bool JobEditor::detachChosen() const {
  return detach_->isChecked();
}

QString JobEditor::fieldError(const std::string& path) const {
  if (path == "strategy.mesh" || path.starts_with("strategy.mesh.")) return mesh_->errorText();
  return form_->fieldError(path);
}

QWidget* JobEditor::field(const std::string& path) const {
  for (MeshDim dim : kMeshDims)
    if (path == "strategy.mesh." + std::string(toString(dim))) return mesh_->sizeBox(dim);
  return form_->field(path);
}

QComboBox* JobEditor::jobKindChoice() const {
  return form_->jobKindChoice();
}

QString JobEditor::memoryText() const {
  return estimates_->memoryText();
}

QString JobEditor::plannedText() const {
  return estimates_->plannedText();
}

const GanttChart& JobEditor::plannedSchedule() const {
  return estimates_->plannedSchedule();
}

}  // namespace ringmaster::ui
