// SpecForm: a row per field of the spec's description, each editor chosen by the field's type; an
// edit is written into the document at the field's path, and the document's values are shown back.
#include "views/job/spec_form.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>

#include "views/job/hosts_table.h"
#include "views/job/slurm_section.h"
#include "views/job/spec_document.h"
#include "widgets/one_line_label.h"

namespace ringmaster::ui {

namespace {

// Whether the form has an editor for the field: the host entries are the hosts table's columns,
// the mesh's sizes the mesh view's (views/job/mesh_view.h), nested lists (strategy.pp.stages) are
// edited in the JSON text, and a choice of one is no choice.
bool inForm(const SpecField& field) {
  if (field.path.find("[]") != std::string::npos) return false;
  if (field.path.starts_with("strategy.mesh.")) return false;
  if (field.type == FieldType::kIntegerListList) return false;
  return field.type != FieldType::kChoice || field.choices.size() > 1;
}

// The group a field's row is in: its section, but launch.scheduler's (issue 35) are together in
// the Slurm group whatever their section.
std::string groupOf(const SpecField& field) {
  return field.path.starts_with("launch.scheduler.") ? std::string(kSlurmSection) : field.section;
}

// Fields the form shows away from their section, each after another field: what is read
// together (the pipeline's micro-batches with its schedule).
const std::map<std::string, std::string>& placedAfter() {
  static const std::map<std::string, std::string> kPlacedAfter = {
      {"train.micro_batches", "strategy.pp.schedule"}};
  return kPlacedAfter;
}

// The editor a field's type asks for: a menu of its choices, a check box (what it does written
// beside it), or text (one item or NAME=VALUE per line for a list or map of text), with its help
// on hover.
QWidget* makeEditor(const SpecField& spec) {
  const QString help = QString::fromStdString(spec.help);
  QWidget* editor = nullptr;
  if (spec.type == FieldType::kChoice) {
    auto* combo = new QComboBox();
    for (const std::string& choice : spec.choices) combo->addItem(QString::fromStdString(choice));
    editor = combo;
  } else if (spec.type == FieldType::kBoolean) {
    editor = new QCheckBox();
    editor->setToolTip(help);
  } else if (spec.type == FieldType::kTextList || spec.type == FieldType::kTextMap) {
    // One item (or NAME=VALUE) per line: an argument or a value may hold spaces, commas and
    // quotes, taken as they are.
    auto* lines = new QPlainTextEdit();
    lines->setTabChangesFocus(true);
    lines->setLineWrapMode(QPlainTextEdit::NoWrap);
    lines->setFixedHeight(lines->fontMetrics().lineSpacing() * 4 + 2 * lines->frameWidth() + 8);
    editor = lines;
  } else {
    editor = new QLineEdit();
  }
  if (spec.type != FieldType::kBoolean)
    editor->setToolTip(spec.type == FieldType::kTextList  ? help + "; one per line"
                       : spec.type == FieldType::kTextMap ? help + "; one NAME=VALUE per line"
                                                          : help);
  return editor;
}

}  // namespace

struct SpecForm::Field {
  const SpecField* spec = nullptr;  // its description (spec_fields.h)
  QWidget* editor = nullptr;
  QLabel* error = nullptr;
  QFormLayout* form = nullptr;
  QLabel* label = nullptr;
  QWidget* cell = nullptr;  // the row's field side: the editor (and its Choose button), the error
  bool shown = true;        // whether its row should be in the form
};

SpecForm::SpecForm(nlohmann::json& document, PathChooser choose_path, QWidget* parent)
    : QWidget(parent), document_(document), choose_path_(std::move(choose_path)) {
  buildForm();
}

SpecForm::~SpecForm() = default;

void SpecForm::buildForm() {
  // One group per section of the spec's description, one row per field the form can edit, in
  // the description's order.
  auto* layout = new QVBoxLayout(this);
  // First, what the job runs: the form below shows that kind's fields.
  auto* kind_row = new QHBoxLayout();
  kind_row->addWidget(new QLabel("<b>The job runs:</b>"));
  job_kind_ = new QComboBox();
  job_kind_->setObjectName("jobKind");
  for (JobKind kind : kJobKinds) {
    job_kind_->addItem(kind == JobKind::kProgram ? "your PyTorch script" : "Ringmaster's engine",
                       QString::fromUtf8(toString(kind).data(), toString(kind).size()));
    job_kind_->setItemData(
        job_kind_->count() - 1,
        kind == JobKind::kProgram
            ? "Every rank runs your Python script (the program section) with torchrun's "
              "environment, reporting through the ringmaster package"
            : "Every rank runs Ringmaster's engine on the model, data and training the spec "
              "describes",
        Qt::ToolTipRole);
  }
  kind_row->addWidget(job_kind_);
  kind_row->addStretch(1);
  layout->addLayout(kind_row);
  connect(job_kind_, &QComboBox::activated, this, [this](int index) {
    if (!updating_) emit jobKindChosen(kJobKinds.at(static_cast<size_t>(index)));
  });
  QFormLayout* form = nullptr;
  std::string section;
  for (const SpecField& field : specFields()) {
    if (!form || groupOf(field) != section) {
      section = groupOf(field);
      form = addGroup(section);
    }
    if (field.type == FieldType::kHostList)
      addHostsRow(form, field);
    else if (inForm(field) && !placedAfter().contains(field.path))
      addField(form, field);
    for (const auto& [placed, after] : placedAfter())
      if (after == field.path) addField(form, *findSpecField(placed));
  }
  layout->addStretch(1);
}

// A group box for `section`, last in the column, with its form.
QFormLayout* SpecForm::addGroup(const std::string& section) {
  auto* box = new QGroupBox(QString::fromStdString(section));
  box->setObjectName(QString::fromStdString(section + "Group"));
  auto* form = new QFormLayout(box);
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  auto* column = static_cast<QVBoxLayout*>(layout());
  // Before the stretch that ends the column, once it is there.
  const bool ended = column->count() > 0 && column->itemAt(column->count() - 1)->spacerItem();
  column->insertWidget(ended ? column->count() - 1 : column->count(), box);
  boxes_[form] = box;
  section_forms_.try_emplace(section, form);
  return form;
}

void SpecForm::addToSection(const std::string& section, QWidget* widget, RowPlace place,
                            std::function<bool(const nlohmann::json&)> shown,
                            const std::string& before) {
  auto found = section_forms_.find(section);
  QFormLayout* form = found != section_forms_.end() ? found->second : addGroup(section);
  auto row = std::make_unique<Field>(Field{.form = form, .cell = widget});
  std::vector<Field*>& rows = form_rows_[form];
  auto at = place == RowPlace::kTop ? rows.begin() : rows.end();
  if (place == RowPlace::kBefore)
    at = std::find_if(rows.begin(), rows.end(), [&](const Field* other) {
      return other->spec && other->spec->path.starts_with(before);
    });
  // Rows are laid out in this order (layOutRows), and the form holds them so until then.
  form->insertRow(static_cast<int>(at - rows.begin()), widget);
  rows.insert(at, row.get());
  // A form laid out already is laid out again, whole, next time.
  if (auto it = laid_out_.find(form); it != laid_out_.end()) it->second = {nullptr};
  whole_rows_.emplace_back(std::move(row), std::move(shown));
}

void SpecForm::addAfterSection(const std::string& section, QWidget* widget) {
  auto* group = findChild<QGroupBox*>(QString::fromStdString(section + "Group"));
  auto* column = static_cast<QVBoxLayout*>(layout());
  column->insertWidget(group ? column->indexOf(group) + 1 : column->count() - 1, widget);
}

void SpecForm::addField(QFormLayout* form, const SpecField& spec) {
  QWidget* editor = makeEditor(spec);
  const std::string path = spec.path;
  // The error line is there, empty, when the field has no problem: showing one moves nothing.
  auto owned = std::make_unique<Field>(Field{&spec, editor, new OneLineLabel(), form,
                                             new QLabel(QString::fromStdString(spec.label))});
  Field* field = owned.get();
  editor->setObjectName(QString::fromStdString(path));
  field->error->setObjectName(QString::fromStdString(path + ".error"));
  field->error->setStyleSheet("color: #b3261e; font-size: small;");
  field->error->hide();
  auto* cell = new QWidget();
  auto* cell_layout = new QVBoxLayout(cell);
  cell_layout->setContentsMargins(0, 0, 0, 0);
  cell_layout->setSpacing(1);
  if (spec.type == FieldType::kPath || spec.type == FieldType::kDirectory) {
    // A file or directory here: typed, or chosen in a dialog.
    auto* row = new QHBoxLayout();
    row->setContentsMargins(0, 0, 0, 0);
    row->addWidget(editor, 1);
    auto* choose = new QPushButton("Choose…");
    choose->setObjectName(QString::fromStdString(path + ".choose"));
    choose->setToolTip(QString("Choose the %1 in a dialog")
                           .arg(spec.type == FieldType::kDirectory ? "directory" : "file"));
    row->addWidget(choose);
    cell_layout->addLayout(row);
    connect(choose, &QPushButton::clicked, this, [this, path] { choosePath(path); });
  } else if (auto* check = qobject_cast<QCheckBox*>(editor)) {
    // What the box does, beside it and wrapped to the form's width; a click on it toggles it.
    auto* row = new QHBoxLayout();
    row->setContentsMargins(0, 0, 0, 0);
    row->addWidget(check, 0, Qt::AlignTop);
    auto* help = new QLabel(QString::fromStdString(spec.help));
    help->setObjectName(QString::fromStdString(path + ".help"));
    help->setWordWrap(true);
    help->installEventFilter(this);
    check_help_[help] = check;
    row->addWidget(help, 1);
    cell_layout->addLayout(row);
  } else {
    cell_layout->addWidget(editor);
  }
  cell_layout->addWidget(field->error);
  field->cell = cell;
  form->addRow(field->label, cell);
  form_rows_[form].push_back(field);
  fields_[path] = std::move(owned);
  if (auto* line = qobject_cast<QLineEdit*>(editor))
    connect(line, &QLineEdit::textEdited, this, [this, path] { formEdited(path); });
  else if (auto* combo = qobject_cast<QComboBox*>(editor))
    connect(combo, &QComboBox::activated, this, [this, path] { formEdited(path); });
  else if (auto* check = qobject_cast<QCheckBox*>(editor))
    connect(check, &QCheckBox::toggled, this, [this, path] {
      if (!updating_) formEdited(path);
    });
  else if (auto* lines = qobject_cast<QPlainTextEdit*>(editor))
    connect(lines, &QPlainTextEdit::textChanged, this, [this, path] {
      if (!updating_) formEdited(path);
    });
}

// The hosts table's row: shown for both kinds of job, laid out again with the form's others.
void SpecForm::addHostsRow(QFormLayout* form, const SpecField& spec) {
  hosts_ = new HostsTable(spec);
  hosts_row_ =
      std::make_unique<Field>(Field{.spec = &spec,
                                    .editor = hosts_->table(),
                                    .form = form,
                                    .label = new QLabel(QString::fromStdString(spec.label)),
                                    .cell = hosts_});
  form->addRow(hosts_row_->label, hosts_);
  form_rows_[form].push_back(hosts_row_.get());
  connect(hosts_, &HostsTable::edited, this, [this] {
    setPath(document_, "launch.hosts", hosts_->hosts());
    emit edited();
  });
}

void SpecForm::formEdited(const std::string& path) {
  if (updating_) return;
  Field* field = fields_.at(path).get();
  std::optional<nlohmann::json> value;
  if (auto* line = qobject_cast<QLineEdit*>(field->editor)) {
    const QString text = line->text().trimmed();
    if (isList(typeIn(*field->spec, document_))) {
      nlohmann::json list = nlohmann::json::array();
      for (const QString& part : text.split(',', Qt::SkipEmptyParts))
        list.push_back(valueFromText(part));
      value = list;
    } else if (!text.isEmpty()) {
      value = valueFromText(text);
    }
  } else if (auto* combo = qobject_cast<QComboBox*>(field->editor)) {
    value = combo->currentText().toStdString();
  } else if (auto* check = qobject_cast<QCheckBox*>(field->editor)) {
    value = check->isChecked();
  } else if (auto* lines = qobject_cast<QPlainTextEdit*>(field->editor)) {
    // Every line an item, the empty ones too, but for the line break that ends the last.
    QString text = lines->toPlainText();
    if (text.endsWith('\n')) text.chop(1);
    if (field->spec->type == FieldType::kTextMap) {
      if (nlohmann::json map = mapOfLines(text); !map.empty()) value = std::move(map);
    } else if (!text.isEmpty()) {
      nlohmann::json list = nlohmann::json::array();
      for (const QString& line : text.split('\n')) list.push_back(line.toStdString());
      value = list;
    }
  }
  setPath(document_, path, value);
  // The fields of the kinds no longer chosen go (the parser would call them unknown).
  bool controls = false;
  for (const auto& [option, other] : fields_) {
    if (!other->spec->shown_when || other->spec->shown_when->controller != path) continue;
    controls = true;
    if (!appliesTo(*other->spec, document_)) setPath(document_, option, std::nullopt);
  }
  if (controls) refresh();
  emit edited();
}

void SpecForm::choosePath(const std::string& path) {
  const Field& field = *fields_.at(path);
  const nlohmann::json* value = getPath(document_, path);
  QString chosen =
      choose_path_(*field.spec, value && value->is_string() ? textOf(*value) : QString());
  if (chosen.isEmpty()) return;
  // The script inside program.workdir is written relative to it, as the spec reads it.
  if (path == "program.script") {
    const nlohmann::json* workdir = getPath(document_, "program.workdir");
    if (workdir && workdir->is_string() && !workdir->get<std::string>().empty()) {
      const QDir dir(textOf(*workdir));
      const QString relative = dir.relativeFilePath(chosen);
      if (!relative.startsWith("..") && QFileInfo(relative).isRelative()) chosen = relative;
    }
  }
  auto* line = qobject_cast<QLineEdit*>(field.editor);
  line->setText(chosen);
  formEdited(path);
}

void SpecForm::refresh() {
  updating_ = true;
  for (auto& [path, field] : fields_) {
    const nlohmann::json* value = getPath(document_, path);
    if (auto* line = qobject_cast<QLineEdit*>(field->editor)) {
      const QString text = value ? textOf(*value) : QString();
      if (line->text() != text && !line->hasFocus()) line->setText(text);
    } else if (auto* combo = qobject_cast<QComboBox*>(field->editor)) {
      // A program job without a strategy kind is recorded with the parser's choice: show that.
      const std::string choice =
          path == "strategy.kind" && !value && jobKindOf(document_) == JobKind::kProgram
              ? programStrategyKind(document_)
              : choiceIn(document_, path);
      const int index = combo->findText(QString::fromStdString(choice));
      combo->setCurrentIndex(std::max(index, 0));
    } else if (auto* check = qobject_cast<QCheckBox*>(field->editor)) {
      check->setChecked(value && value->is_boolean() && value->get<bool>());
    } else if (auto* lines = qobject_cast<QPlainTextEdit*>(field->editor)) {
      // A list the lines cannot give back is shown as JSON, to be edited in the JSON text.
      const FieldType type = field->spec->type;
      const std::optional<QString> text = value ? editorLinesOf(type, *value) : QString();
      const QString shown = text ? *text : QString::fromStdString(value->dump());
      if (lines->toPlainText() != shown && (!lines->hasFocus() || !text))
        lines->setPlainText(shown);
      lines->setReadOnly(!text);
      const bool map = type == FieldType::kTextMap;
      lines->setToolTip(
          text ? QString::fromStdString(field->spec->help) +
                     (map ? "; one NAME=VALUE per line" : "; one per line")
          : map ? QString("Not editable as NAME=VALUE lines (a value holds a line break or is not "
                          "a string): edit it in the JSON text")
                : QString("Not editable one per line (an item holds a line break or the last is "
                          "empty): edit it in the JSON text"));
    }
    // A field of another kind of job, or of a kind not chosen, is hidden unless the spec holds
    // it (the parser then says why it does not belong, next to it).
    if (field->spec->shown_when || field->spec->job)
      field->shown = appliesTo(*field->spec, document_) || value;
    if (path.starts_with("launch.scheduler."))
      field->shown = slurmFieldApplies(document_, path) || value;
  }
  // The hosts table, unless the job goes to a scheduler (where the parser refuses hosts).
  hosts_row_->shown = !slurmChosen(document_) || getPath(document_, "launch.hosts");
  for (auto& [row, shown] : whole_rows_) row->shown = shown(document_);
  const JobKind job = jobKindOf(document_);
  job_kind_->setCurrentIndex(
      static_cast<int>(std::find(kJobKinds.begin(), kJobKinds.end(), job) - kJobKinds.begin()));
  hosts_->showHosts(getPath(document_, "launch.hosts"));
  updating_ = false;
}

void SpecForm::showProblems(const std::vector<SpecProblem>& problems) {
  for (auto& [path, field] : fields_) field->error->hide();
  hosts_->setError({});
  for (const SpecProblem& problem : problems) {
    const QString message = QString::fromStdString(problem.message);
    const QString path = QString::fromStdString(problem.path);
    auto it = fields_.find(problem.path);
    // An entry of a list field ("model.layers[2]") is shown at the list.
    if (it == fields_.end() && problem.path.find('[') != std::string::npos) {
      it = fields_.find(problem.path.substr(0, problem.path.find('[')));
      if (it != fields_.end() && !isList(it->second->spec->type) &&
          it->second->spec->type != FieldType::kTextList)
        it = fields_.end();
    }
    // A variable of a map ("launch.env.HF_TOKEN") is shown at the map, with its name.
    QString shown_message = message;
    if (it == fields_.end()) {
      for (const auto& [map_path, map_field] : fields_) {
        if (map_field->spec->type != FieldType::kTextMap ||
            !problem.path.starts_with(map_path + "."))
          continue;
        it = fields_.find(map_path);
        shown_message =
            QString::fromStdString(problem.path.substr(map_path.size() + 1)) + ": " + message;
        break;
      }
    }
    // A whole section ("model": not read by a program job) is shown at its first field.
    if (it == fields_.end() && !problem.path.empty() &&
        problem.path.find_first_of(".[") == std::string::npos) {
      for (const SpecField& spec : specFields()) {
        if (!spec.path.starts_with(problem.path + ".")) continue;
        it = fields_.find(spec.path);
        if (it != fields_.end()) break;
      }
    }
    if (it != fields_.end()) {
      Field& field = *it->second;
      static_cast<OneLineLabel*>(field.error)->setMessage(shown_message);
      field.error->show();
      // A field with a problem is never hidden.
      field.shown = true;
    } else if (problem.path.rfind("launch.hosts", 0) == 0) {
      hosts_->setError(hosts_->errorText() + QString("%1: %2\n").arg(path, message));
    }
  }
  layOutRows();
}

void SpecForm::layOutRows() {
  // A hidden row is taken out of its form, not hidden in it: Qt 6.4's QFormLayout sizes rows of
  // wrapped text from stale indices of hidden rows and squeezed other rows to 0 px (issue 15:
  // Data > Kind from idx to synthetic left Classes and Seed invisible).
  for (auto& [form, fields] : form_rows_) {
    std::vector<Field*> wanted;
    for (Field* field : fields)
      if (field->shown) wanted.push_back(field);
    boxes_.at(form)->setVisible(!wanted.empty());
    // Before the first lay-out, the form holds every row, as built (and a form may later hold
    // none: a section of the other kind of job).
    std::vector<Field*>& current = laid_out_.try_emplace(form, fields).first->second;
    if (wanted == current) continue;
    while (form->rowCount() > 0) {
      const QFormLayout::TakeRowResult row = form->takeRow(0);
      delete row.labelItem;  // the items, not their widgets
      delete row.fieldItem;
    }
    for (Field* field : fields) {
      if (field->label) field->label->setVisible(field->shown);
      field->cell->setVisible(field->shown);
      if (field->shown && field->label)
        form->addRow(field->label, field->cell);
      else if (field->shown)
        form->addRow(field->cell);  // a row of the whole width (addToSection)
    }
    current = wanted;
  }
}

bool SpecForm::eventFilter(QObject* watched, QEvent* event) {
  auto it = check_help_.find(watched);
  if (it != check_help_.end() && event->type() == QEvent::MouseButtonRelease &&
      it->second->isEnabled())
    it->second->click();
  return QWidget::eventFilter(watched, event);
}

QString SpecForm::fieldError(const std::string& path) const {
  auto it = fields_.find(path);
  if (it != fields_.end())
    return it->second->error->isHidden() ? QString() : it->second->error->text();
  if (path.rfind("launch.hosts", 0) == 0) return hosts_->errorText();
  return {};
}

QWidget* SpecForm::field(const std::string& path) const {
  auto it = fields_.find(path);
  return it == fields_.end() ? nullptr : it->second->editor;
}

}  // namespace ringmaster::ui
