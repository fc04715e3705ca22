// JobEditor: a JSON document is the single source of truth; the form and the JSON text both edit
// it, and the engine's parser checks it after every edit. The form shows the fields of the
// document's kind of job (spec_fields.h's JobKind) and of the kinds its choices hold.
#include "views/job_editor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QShortcut>
#include <QSplitter>
#include <QTableWidget>
#include <QTextDocument>
#include <QVBoxLayout>
#include <algorithm>
#include <set>

#include "core/bounded_file.h"
#include "data/schedule_gantt.h"
#include "models/format.h"
#include "spec/memory_estimate.h"
#include "spec/spec_fields.h"
#include "widgets/gantt_chart.h"

namespace ringmaster::ui {

namespace {

std::vector<std::string> splitPath(const std::string& path) {
  std::vector<std::string> keys;
  size_t start = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1)
    keys.push_back(path.substr(start, dot - start));
  keys.push_back(path.substr(start));
  return keys;
}

const nlohmann::json* getPath(const nlohmann::json& doc, const std::string& path) {
  const nlohmann::json* node = &doc;
  for (const auto& key : splitPath(path)) {
    if (!node->is_object() || !node->contains(key)) return nullptr;
    node = &(*node)[key];
  }
  return node;
}

void setPath(nlohmann::json& doc, const std::string& path, std::optional<nlohmann::json> value) {
  const auto keys = splitPath(path);
  if (!value) {
    // Walked without creating anything: erasing a field that is not there changes nothing.
    std::vector<nlohmann::json*> chain = {&doc};  // chain[i + 1] is the object at keys[i]
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
      nlohmann::json* node = chain.back();
      if (!node->is_object() || !node->contains(keys[i])) return;
      chain.push_back(&(*node)[keys[i]]);
    }
    if (!chain.back()->is_object()) return;
    chain.back()->erase(keys.back());
    // Objects left empty go too: an optional section (checkpoint with no dir), a nested block
    // (train.loss_scale once precision is no longer fp16).
    for (size_t i = keys.size() - 1; i-- > 0;) {
      if (!chain[i + 1]->empty()) break;
      chain[i]->erase(keys[i]);
    }
    return;
  }
  nlohmann::json* node = &doc;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    if (!node->is_object()) *node = nlohmann::json::object();
    node = &(*node)[keys[i]];
  }
  if (!node->is_object()) *node = nlohmann::json::object();
  (*node)[keys.back()] = std::move(*value);
}

// A typed value from text: JSON when it parses as a number, true / false or a list, else a string
// (so the parser, not the form, says what is wrong with "abc" in a number field).
nlohmann::json valueFromText(const QString& text) {
  const std::string s = text.trimmed().toStdString();
  auto parsed = nlohmann::json::parse(s, nullptr, false);
  if (!parsed.is_discarded() && (parsed.is_number() || parsed.is_boolean())) return parsed;
  return s;
}

QString textOf(const nlohmann::json& value) {
  if (value.is_string()) return QString::fromStdString(value.get<std::string>());
  if (value.is_array()) {
    QStringList parts;
    for (const auto& v : value) parts << textOf(v);
    return parts.join(", ");
  }
  return QString::fromStdString(value.dump());
}

// The fields of one launch host (the "launch.hosts[]." entries), one hosts-table column each,
// with the key they have in a host object.
std::vector<std::pair<std::string, const SpecField*>> hostColumns() {
  static const std::string kPrefix = "launch.hosts[].";
  std::vector<std::pair<std::string, const SpecField*>> columns;
  for (const SpecField& field : specFields())
    if (field.path.starts_with(kPrefix))
      columns.emplace_back(field.path.substr(kPrefix.size()), &field);
  return columns;
}

bool isList(FieldType type) {
  return type == FieldType::kIntegerList || type == FieldType::kNumberList;
}

// A text list (program.args) as the form shows it, one item per line; nullopt when the lines
// cannot give it back (not a list of strings, an item with a line break, a last item empty).
std::optional<QString> linesOf(const nlohmann::json& value) {
  if (!value.is_array()) return std::nullopt;
  QStringList lines;
  for (const auto& item : value) {
    if (!item.is_string()) return std::nullopt;
    const QString line = QString::fromStdString(item.get<std::string>());
    if (line.contains('\n') || line.contains('\r')) return std::nullopt;
    lines << line;
  }
  if (!lines.isEmpty() && lines.back().isEmpty()) return std::nullopt;
  return lines.join('\n');
}

// A text map (launch.env) as the form shows it, one NAME=VALUE per line (a name without a value,
// null, as NAME alone); nullopt when the lines cannot give it back (not an object, a name with
// '=' or a line break, a value that is not a string or holds a line break).
std::optional<QString> mapLinesOf(const nlohmann::json& value) {
  if (!value.is_object()) return std::nullopt;
  QStringList lines;
  for (const auto& [name, item] : value.items()) {
    const QString key = QString::fromStdString(name);
    if (key.isEmpty() || key.contains('=') || key.contains('\n') || key.contains('\r'))
      return std::nullopt;
    if (item.is_null()) {
      lines << key;
      continue;
    }
    if (!item.is_string()) return std::nullopt;
    const QString text = QString::fromStdString(item.get<std::string>());
    if (text.contains('\n') || text.contains('\r')) return std::nullopt;
    lines << key + "=" + text;
  }
  return lines.join('\n');
}

// The object NAME=VALUE lines give (blank lines skipped; a line without '=' is its name with a
// null value, which the parser then calls not a string, next to the field).
nlohmann::json mapOfLines(const QString& text) {
  nlohmann::json map = nlohmann::json::object();
  for (const QString& line : text.split('\n')) {
    if (line.trimmed().isEmpty()) continue;
    const qsizetype equals = line.indexOf('=');
    if (equals < 0)
      map[line.toStdString()] = nullptr;
    else
      map[line.left(equals).toStdString()] = line.mid(equals + 1).toStdString();
  }
  return map;
}

// The lines of a text list or a text map as the form shows them.
std::optional<QString> editorLinesOf(FieldType type, const nlohmann::json& value) {
  return type == FieldType::kTextMap ? mapLinesOf(value) : linesOf(value);
}

// The strategy kind a program job is recorded with when it names none: the parser's rule (ddp on
// several ranks, single on one), from the document's hosts.
std::string programStrategyKind(const nlohmann::json& document) {
  int64_t ranks = 0;
  const nlohmann::json* hosts = getPath(document, "launch.hosts");
  if (!hosts) return "single";  // the default hosts: localhost, one rank
  if (hosts->is_array())
    for (const auto& host : *hosts)
      if (host.is_object() && host.contains("ranks") && host["ranks"].is_number_integer())
        ranks += host["ranks"].get<int64_t>();
  return ranks > 1 ? "ddp" : "single";
}

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

// Job kind choice's items, in JobKind order.
constexpr std::array<JobKind, 2> kJobKinds = {JobKind::kEngine, JobKind::kProgram};

// Whether the form has an editor for the field: the host entries are the hosts table's columns,
// nested lists (strategy.stages) are edited in the JSON text, and a choice of one is no choice.
bool inForm(const SpecField& field) {
  if (field.path.find("[]") != std::string::npos) return false;
  if (field.type == FieldType::kIntegerListList) return false;
  return field.type != FieldType::kChoice || field.choices.size() > 1;
}

// Row `row` of the hosts table from a host object: text cells, and a check box for a boolean.
void fillHostRow(QTableWidget* hosts, int row, const nlohmann::json& host) {
  const auto columns = hostColumns();
  for (size_t c = 0; c < columns.size(); ++c) {
    const auto& [key, field] = columns[c];
    const nlohmann::json* value = host.is_object() && host.contains(key) ? &host[key] : nullptr;
    auto* item = new QTableWidgetItem();
    if (field->type == FieldType::kBoolean) {
      item->setFlags(Qt::ItemIsUserCheckable | Qt::ItemIsEnabled | Qt::ItemIsSelectable);
      item->setCheckState(value && *value == true ? Qt::Checked : Qt::Unchecked);
    } else if (value) {
      item->setText(textOf(*value));
    }
    hosts->setItem(row, static_cast<int>(c), item);
  }
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

struct JobEditor::Field {
  const SpecField* spec = nullptr;  // its description (spec_fields.h)
  QWidget* editor = nullptr;
  QLabel* error = nullptr;
  QFormLayout* form = nullptr;
  QLabel* label = nullptr;
  QWidget* cell = nullptr;  // the row's field side: the editor (and its Choose button), the error
  bool shown = true;        // whether its row should be in the form
};

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
  // Where a new user starts: the shipped examples, one of them already loaded.
  auto* start = new QHBoxLayout();
  start->addWidget(new QLabel("<b>Start from an example:</b>"));
  examples_ = new QComboBox();
  examples_->setObjectName("exampleChoice");
  examples_->setToolTip("Replace the spec with one of the examples shipped with Ringmaster");
  for (const ExampleSpec& example : exampleSpecs()) {
    examples_->addItem(example.name, example.path);
    examples_->setItemData(examples_->count() - 1, example.description, Qt::ToolTipRole);
  }
  start->addWidget(examples_);
  example_note_ = new QLabel();
  example_note_->setObjectName("exampleNote");
  example_note_->setWordWrap(true);
  start->addWidget(example_note_, 1);
  outer->addLayout(start);
  connect(examples_, &QComboBox::activated, this,
          [this](int index) { startFromExample(examples_->itemText(index)); });

  auto* splitter = new QSplitter(Qt::Horizontal);
  outer->addWidget(splitter, 1);

  auto* scroll = new QScrollArea();
  scroll->setObjectName("formScroll");
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* form_page = new QWidget();
  buildForm(form_page);
  scroll->setWidget(form_page);
  // The form never needs a horizontal scroll bar: the scroll area is as wide as the form's
  // narrowest layout plus the vertical bar.
  scroll->setMinimumWidth(form_page->minimumSizeHint().width() +
                          scroll->verticalScrollBar()->sizeHint().width() +
                          2 * scroll->frameWidth());
  splitter->addWidget(scroll);

  auto* right = new QWidget();
  auto* right_layout = new QVBoxLayout(right);
  right_layout->addWidget(new QLabel("<b>Spec (JSON)</b>, kept in sync with the form"));
  json_ = new QPlainTextEdit();
  json_->setObjectName("specJson");
  json_->setFont(QFont("monospace", font().pointSize() - 1));
  right_layout->addWidget(json_, 3);
  json_error_ = new QLabel();
  json_error_->setTextFormat(Qt::PlainText);  // quotes the text typed or pasted
  json_error_->setObjectName("jsonError");
  json_error_->setStyleSheet("color: #b3261e;");
  json_error_->setWordWrap(true);
  right_layout->addWidget(json_error_);
  auto* memory_box = new QGroupBox("Memory per rank (estimate; hover for the formula)");
  auto* memory_layout = new QVBoxLayout(memory_box);
  memory_ = new QLabel();
  memory_->setObjectName("memoryEstimate");
  memory_->setTextFormat(Qt::RichText);
  memory_layout->addWidget(memory_);
  right_layout->addWidget(memory_box);
  planned_label_ = new QLabel();
  planned_label_->setObjectName("plannedBubble");
  right_layout->addWidget(planned_label_);
  planned_ = new GanttChart();
  planned_->setObjectName("editorPlannedGantt");
  right_layout->addWidget(planned_, 2);
  // Launch, and beside it every reason it is disabled.
  auto* launch_row = new QHBoxLayout();
  launch_status_ = new QLabel();
  launch_status_->setObjectName("launchStatus");
  launch_status_->setWordWrap(true);
  launch_status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  launch_status_->setAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  launch_row->addWidget(launch_status_, 1);
  launch_ = new QPushButton("Launch");
  launch_->setObjectName("launchButton");
  launch_->setDefault(true);
  launch_->setToolTip("Launch this job (Ctrl+Return)");
  detach_ = new QCheckBox("Detached");
  detach_->setObjectName("detachBox");
  detach_->setToolTip(
      "Keep the job running when this window, the launch or the SSH connection goes away; "
      "Attach or Cancel run in the run list take it again (ringmaster run --detach)");
  launch_row->addWidget(detach_, 0, Qt::AlignTop);
  launch_row->addWidget(launch_, 0, Qt::AlignTop);
  right_layout->addLayout(launch_row);
  splitter->addWidget(right);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 1);

  connect(json_, &QPlainTextEdit::textChanged, this, &JobEditor::jsonEdited);
  connect(launch_, &QPushButton::clicked, this, [this] {
    if (spec_) emit launchRequested(document_);
  });
  auto* shortcut = new QShortcut(QKeySequence("Ctrl+Return"), this);
  connect(shortcut, &QShortcut::activated, launch_, &QPushButton::click);
  // The first window is launchable at once: the smallest example.
  if (examples_->count() > 0)
    startFromExample(examples_->itemText(0));
  else
    setDocument(nlohmann::json::object());
}

JobEditor::~JobEditor() = default;

void JobEditor::addField(QFormLayout* form, const SpecField& spec) {
  // The editor its type asks for: a menu of its choices, a check box saying what it does, or text.
  const QString help = QString::fromStdString(spec.help);
  QWidget* editor = nullptr;
  if (spec.type == FieldType::kChoice) {
    auto* combo = new QComboBox();
    for (const std::string& choice : spec.choices) combo->addItem(QString::fromStdString(choice));
    editor = combo;
  } else if (spec.type == FieldType::kBoolean) {
    editor = new QCheckBox(help);
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
  if (!help.isEmpty() && spec.type != FieldType::kBoolean)
    editor->setToolTip(spec.type == FieldType::kTextList  ? help + "; one per line"
                       : spec.type == FieldType::kTextMap ? help + "; one NAME=VALUE per line"
                                                          : help);
  const std::string path = spec.path;
  auto owned = std::make_unique<Field>(
      Field{&spec, editor, new QLabel(), form, new QLabel(QString::fromStdString(spec.label))});
  Field* field = owned.get();
  editor->setObjectName(QString::fromStdString(path));
  field->error->setStyleSheet("color: #b3261e; font-size: small;");
  field->error->setWordWrap(true);
  field->error->setTextFormat(Qt::PlainText);  // quotes names and values from the document
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

void JobEditor::buildForm(QWidget* page) {
  // One group per section of the spec's description, one row per field the form can edit, in
  // the description's order.
  auto* layout = new QVBoxLayout(page);
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
  connect(job_kind_, &QComboBox::activated, this,
          [this](int index) { jobKindChosen(kJobKinds.at(static_cast<size_t>(index))); });
  QFormLayout* form = nullptr;
  std::string section;
  for (const SpecField& field : specFields()) {
    if (!form || field.section != section) {
      section = field.section;
      auto* box = new QGroupBox(QString::fromStdString(section));
      box->setObjectName(QString::fromStdString(section + "Group"));
      form = new QFormLayout(box);
      form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
      layout->addWidget(box);
      boxes_[form] = box;
    }
    if (field.type == FieldType::kHostList)
      addHostsTable(form, field);
    else if (inForm(field))
      addField(form, field);
  }
  layout->addStretch(1);
}

void JobEditor::addHostsTable(QFormLayout* where, const SpecField& spec) {
  const auto columns = hostColumns();
  hosts_ = new QTableWidget(0, static_cast<int>(columns.size()));
  hosts_->setObjectName("hostsTable");
  for (size_t c = 0; c < columns.size(); ++c) {
    const SpecField& column = *columns[c].second;
    auto* header = new QTableWidgetItem(QString::fromStdString(column.label));
    if (column.type == FieldType::kBoolean) header->setToolTip(QString::fromStdString(column.help));
    hosts_->setHorizontalHeaderItem(static_cast<int>(c), header);
  }
  hosts_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  hosts_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  hosts_->verticalHeader()->hide();
  hosts_->setMinimumHeight(90);
  // The table, its buttons and its problems are one row, laid out again with the form's others.
  auto* cell = new QWidget();
  auto* cell_layout = new QVBoxLayout(cell);
  cell_layout->setContentsMargins(0, 0, 0, 0);
  cell_layout->addWidget(hosts_);
  auto* host_buttons = new QHBoxLayout();
  auto* add = new QPushButton("Add host");
  auto* remove = new QPushButton("Remove host");
  host_buttons->addWidget(add);
  host_buttons->addWidget(remove);
  host_buttons->addStretch(1);
  cell_layout->addLayout(host_buttons);
  hosts_error_ = new QLabel();
  hosts_error_->setObjectName("hostsError");
  hosts_error_->setStyleSheet("color: #b3261e; font-size: small;");
  hosts_error_->setWordWrap(true);
  cell_layout->addWidget(hosts_error_);
  hosts_row_ =
      std::make_unique<Field>(Field{.spec = &spec,
                                    .editor = hosts_,
                                    .error = hosts_error_,
                                    .form = where,
                                    .label = new QLabel(QString::fromStdString(spec.label)),
                                    .cell = cell});
  where->addRow(hosts_row_->label, cell);
  form_rows_[where].push_back(hosts_row_.get());
  connect(hosts_, &QTableWidget::itemChanged, this, [this] {
    if (!updating_) hostsEdited();
  });
  // A new host is the default list's entry (localhost, 1 rank).
  const nlohmann::json fresh = spec.default_value.at(0);
  connect(add, &QPushButton::clicked, this, [this, fresh] {
    updating_ = true;
    const int row = hosts_->rowCount();
    hosts_->insertRow(row);
    fillHostRow(hosts_, row, fresh);
    updating_ = false;
    hostsEdited();
  });
  connect(remove, &QPushButton::clicked, this, [this] {
    if (hosts_->rowCount() == 0) return;
    hosts_->removeRow(hosts_->currentRow() >= 0 ? hosts_->currentRow() : hosts_->rowCount() - 1);
    hostsEdited();
  });
}

void JobEditor::setDocument(const nlohmann::json& document) {
  document_ = document.is_object() ? document : nlohmann::json::object();
  // Another spec: nothing of the previous one's other kind of job is kept for it.
  kept_engine_ = nlohmann::json::object();
  kept_program_ = nullptr;
  refreshForm();
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
  auto parsed = nlohmann::json::parse(text, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    file_error_ = QString("%1 is not a JSON object").arg(path);
    return false;
  }
  setDocument(parsed);
  if (!path.startsWith(":/"))
    example_note_->setText(QString("Opened <tt>%1</tt>.").arg(path.toHtmlEscaped()));
  return true;
}

bool JobEditor::startFromExample(const QString& name) {
  for (const ExampleSpec& example : exampleSpecs()) {
    if (example.name != name) continue;
    if (!loadFile(example.path)) return false;
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
      file.write(QByteArray::fromStdString(document_.dump(2) + "\n")) < 0) {
    file_error_ = QString("cannot write %1: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

void JobEditor::formEdited(const std::string& path) {
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
  if (controls) refreshForm();
  refreshJson();
  check();
}

void JobEditor::jobKindChosen(JobKind kind) {
  if (updating_ || kind == jobKindOf(document_)) return;
  if (kind == JobKind::kProgram) {
    // The engine's sections and the strategy's options go, kept for a switch back; the strategy
    // kind stays (what the script does, for the history).
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
    // The strategy kind the program job was recorded with, written: the engine requires it.
    if (!getPath(document_, "strategy.kind"))
      setPath(document_, "strategy.kind", programStrategyKind(document_));
    const nlohmann::json engine =
        kept_engine_.empty() ? exampleEngineSections() : std::move(kept_engine_);
    kept_engine_ = nlohmann::json::object();
    for (const auto& [section, value] : engine.items()) {
      if (section != "strategy") {
        document_[section] = value;
        continue;
      }
      // The kept options of the strategy kind now chosen (another kind's would be unknown).
      for (const auto& [option, option_value] : value.items()) {
        const SpecField* field = findSpecField("strategy." + option);
        document_["strategy"][option] = option_value;
        if (field && !appliesTo(*field, document_)) document_["strategy"].erase(option);
      }
    }
  }
  refreshForm();
  refreshJson();
  check();
}

void JobEditor::choosePath(const std::string& path) {
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

void JobEditor::hostsEdited() {
  // A host field with a default or required is always written; the others only when filled in
  // (a check box when checked).
  const auto columns = hostColumns();
  nlohmann::json hosts = nlohmann::json::array();
  for (int r = 0; r < hosts_->rowCount(); ++r) {
    nlohmann::json host = nlohmann::json::object();
    for (size_t c = 0; c < columns.size(); ++c) {
      const auto& [key, field] = columns[c];
      const QTableWidgetItem* item = hosts_->item(r, static_cast<int>(c));
      if (field->type == FieldType::kBoolean) {
        if (item && item->checkState() == Qt::Checked) host[key] = true;
        continue;
      }
      const QString text = item ? item->text().trimmed() : QString();
      if (text.isEmpty() && !field->required && field->default_value.is_null()) continue;
      const bool numeric = field->type == FieldType::kInteger || field->type == FieldType::kNumber;
      host[key] = numeric ? valueFromText(text) : nlohmann::json(text.toStdString());
    }
    hosts.push_back(std::move(host));
  }
  setPath(document_, "launch.hosts", hosts);
  refreshJson();
  check();
}

void JobEditor::jsonEdited() {
  if (updating_) return;
  nlohmann::json parsed;
  const std::string text = json_->toPlainText().toStdString();
  if (const std::optional<SpecProblem> problem = checkSpecText(text);
      problem && !problem->message.starts_with("invalid JSON")) {
    json_error_->setText(QString::fromStdString(problem->message));
    launch_->setEnabled(false);
    showLaunchStatus({"the JSON text is beyond what a job spec may be (see under it)"});
    return;
  }
  try {
    parsed = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    json_error_->setText(QString("JSON: %1").arg(e.what()));
    launch_->setEnabled(false);
    showLaunchStatus({"the JSON text does not parse (see under it)"});
    return;
  }
  if (!parsed.is_object()) {
    json_error_->setText("the spec must be a JSON object");
    launch_->setEnabled(false);
    showLaunchStatus({"the JSON text is not an object (see under it)"});
    return;
  }
  json_error_->clear();
  document_ = std::move(parsed);
  refreshForm();
  check();
}

void JobEditor::refreshForm() {
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
  }
  const JobKind job = jobKindOf(document_);
  job_kind_->setCurrentIndex(
      static_cast<int>(std::find(kJobKinds.begin(), kJobKinds.end(), job) - kJobKinds.begin()));
  const nlohmann::json* hosts = getPath(document_, "launch.hosts");
  hosts_->setRowCount(0);
  if (hosts && hosts->is_array()) {
    for (const auto& host : *hosts) {
      const int row = hosts_->rowCount();
      hosts_->insertRow(row);
      fillHostRow(hosts_, row, host);
    }
  }
  updating_ = false;
}

void JobEditor::refreshJson() {
  updating_ = true;
  json_->setPlainText(QString::fromStdString(document_.dump(2)));
  json_error_->clear();
  updating_ = false;
}

void JobEditor::check() {
  SpecParseResult result = parseJobSpec(document_);
  spec_ = result.ok() ? result.spec : std::nullopt;
  problems_ = result.problems;
  for (auto& [path, field] : fields_) field->error->hide();
  hosts_error_->clear();
  QStringList reasons;
  for (const SpecProblem& problem : problems_) {
    const QString message = QString::fromStdString(problem.message);
    const QString path = QString::fromStdString(problem.path);
    reasons << (path.isEmpty() ? message : QString("%1: %2").arg(path, message));
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
      field.error->setText(shown_message);
      field.error->show();
      // A field with a problem is never hidden.
      field.shown = true;
    } else if (problem.path.rfind("launch.hosts", 0) == 0) {
      hosts_error_->setText(hosts_error_->text() + QString("%1: %2\n").arg(path, message));
    }
  }
  layOutRows();
  launch_->setEnabled(spec_.has_value());
  showLaunchStatus(reasons);
  updateEstimates();
}

void JobEditor::layOutRows() {
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
      field->label->setVisible(field->shown);
      field->cell->setVisible(field->shown);
      if (field->shown) form->addRow(field->label, field->cell);
    }
    current = wanted;
  }
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

QString JobEditor::fieldError(const std::string& path) const {
  auto it = fields_.find(path);
  if (it != fields_.end())
    return it->second->error->isHidden() ? QString() : it->second->error->text();
  if (path.rfind("launch.hosts", 0) == 0) return hosts_error_->text();
  return {};
}

QWidget* JobEditor::field(const std::string& path) const {
  auto it = fields_.find(path);
  return it == fields_.end() ? nullptr : it->second->editor;
}

void JobEditor::updateEstimates() {
  if (jobKindOf(document_) == JobKind::kProgram) {
    // The script builds its own model: nothing here describes it, and the engine's defaults are
    // no estimate of it. The run view shows what each rank measured.
    memory_->setText(
        "<i>Does not apply to a program job</i>: the script builds its own model. "
        "The run view shows each rank's measured memory.");
    memory_->setToolTip({});
    planned_label_->setText(
        "<b>Planned schedule</b>: does not apply to a program job (the "
        "script runs its own schedule).");
    planned_label_->show();
    planned_->hide();
    return;
  }
  if (!spec_) {
    memory_->setText("<i>fix the spec to see the estimate</i>");
    memory_->setToolTip({});
    planned_label_->hide();
    planned_->hide();
    return;
  }
  const auto estimates = estimateMemory(*spec_);
  // Ranks with the same figures share a column, so a big world stays readable.
  struct Column {
    int first_rank, last_rank;
    const RankMemoryEstimate* estimate;
    QString label() const {
      return first_rank == last_rank ? QString("rank %1").arg(first_rank)
                                     : QString("ranks %1–%2").arg(first_rank).arg(last_rank);
    }
  };
  std::vector<Column> columns;
  for (const auto& estimate : estimates) {
    if (!columns.empty() && columns.back().estimate->total() == estimate.total())
      columns.back().last_rank = estimate.rank;
    else
      columns.push_back({estimate.rank, estimate.rank, &estimate});
  }
  QString html = "<table cellspacing='0' cellpadding='3'><tr><th></th>";
  for (const Column& column : columns) html += "<th align='right'>" + column.label() + "</th>";
  html += "</tr>";
  QStringList formulas;
  const auto& first = *columns.front().estimate;
  for (size_t p = 0; p < first.parts.size(); ++p) {
    html += "<tr><td>" + QString::fromStdString(first.parts[p].name) + "</td>";
    for (const Column& column : columns)
      html += "<td align='right'>" +
              (p < column.estimate->parts.size() ? formatBytes(column.estimate->parts[p].bytes)
                                                 : QString()) +
              "</td>";
    html += "</tr>";
    formulas << QString("%1: %2").arg(QString::fromStdString(first.parts[p].name),
                                      QString::fromStdString(first.parts[p].formula));
  }
  html += "<tr><td><b>total</b></td>";
  for (const Column& column : columns)
    html += "<td align='right'><b>" + formatBytes(column.estimate->total()) + "</b></td>";
  html += "</tr></table>";
  memory_->setText(html);
  memory_->setToolTip(formulas.join('\n'));

  try {
    if (auto planned = ui::plannedSchedule(*spec_)) {
      planned_->setData(planned->gantt);
      planned_label_->setText(QString("<b>Planned schedule</b> (unit costs): bubble %1%, "
                                      "textbook %2%")
                                  .arg(planned->bubble_fraction * 100, 0, 'f', 1)
                                  .arg(planned->theoretical_bubble * 100, 0, 'f', 1));
      planned_label_->show();
      planned_->show();
      return;
    }
  } catch (const std::exception& e) {
    planned_label_->setText(QString("Planned schedule: %1").arg(e.what()));
    planned_label_->show();
    planned_->hide();
    return;
  }
  planned_label_->hide();
  planned_->hide();
}

QString JobEditor::memoryText() const {
  QTextDocument doc;
  doc.setHtml(memory_->text());
  return doc.toPlainText();
}

QString JobEditor::plannedText() const {
  return planned_label_->isHidden() ? QString() : planned_label_->text();
}

bool JobEditor::detachChosen() const {
  return detach_->isChecked();
}

}  // namespace ringmaster::ui
