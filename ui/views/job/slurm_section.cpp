// SlurmSection: the two choices (hosts or Slurm; this machine or a login node) written into the
// document, what each switch takes out kept for the switch back, and the batch script of the
// parsed spec.
#include "views/job/slurm_section.h"

#include <QComboBox>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QVBoxLayout>

#include "core/error.h"
#include "slurm/slurm_script.h"
#include "views/job/spec_document.h"

namespace ringmaster::ui {

namespace {

// The run's directory is named at launch (beside the run database): the script shows it so.
constexpr char kRunDir[] = "<run-dir>";

// The ranks the document's hosts give (at least 1): a switch to Slurm keeps the world size.
int ranksOfHosts(const nlohmann::json& document) {
  const nlohmann::json* hosts = getPath(document, "launch.hosts");
  int ranks = 0;
  if (hosts && hosts->is_array())
    for (const nlohmann::json& host : *hosts)
      if (host.is_object() && host.contains("ranks") && host["ranks"].is_number_integer())
        ranks += host["ranks"].get<int>();
  return std::max(ranks, 1);
}

// A menu of two items, the first for "no", the second for "yes", each with its help on hover.
QComboBox* twoWayChoice(const QString& name, const QString& no, const QString& no_help,
                        const QString& yes, const QString& yes_help) {
  auto* choice = new QComboBox();
  choice->setObjectName(name);
  choice->addItem(no);
  choice->setItemData(0, no_help, Qt::ToolTipRole);
  choice->addItem(yes);
  choice->setItemData(1, yes_help, Qt::ToolTipRole);
  return choice;
}

// A label and its menu on one line.
QWidget* choiceRow(const QString& label, QComboBox* choice) {
  auto* row = new QWidget();
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(new QLabel(label));
  layout->addWidget(choice, 1);
  return row;
}

}  // namespace

bool slurmChosen(const nlohmann::json& document) {
  const nlohmann::json* scheduler = getPath(document, "launch.scheduler");
  return scheduler && !scheduler->is_null();
}

bool slurmFieldApplies(const nlohmann::json& document, const std::string& path) {
  if (!slurmChosen(document)) return false;
  if (!path.starts_with("launch.scheduler.submit_from.")) return true;
  const nlohmann::json* submit_from = getPath(document, "launch.scheduler.submit_from");
  return submit_from && !submit_from->is_null();
}

SlurmSection::SlurmSection(nlohmann::json& document, QWidget* parent)
    : QWidget(parent), document_(document) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  runs_on_ = twoWayChoice(
      "slurmRunsOn", "the hosts listed under Where",
      "Ringmaster starts the workers on each host of launch.hosts (over SSH but for this machine)",
      "a Slurm cluster (sbatch)",
      "The job is submitted to Slurm with sbatch, which allocates the nodes; the fields below are "
      "its options (launch.scheduler)");
  layout->addWidget(choiceRow("The job runs on", runs_on_));
  submit_from_ = twoWayChoice(
      "slurmSubmitFrom", "this machine",
      "sbatch, squeue, sacct and scancel run here (a login node of the cluster)",
      "a login node over SSH",
      "sbatch, squeue, sacct and scancel run on a login node reached over SSH, its host key "
      "verified as for launch.hosts (launch.scheduler.submit_from)");
  submit_from_row_ = choiceRow("sbatch runs on", submit_from_);
  connect(runs_on_, &QComboBox::activated, this, [this](int index) { chooseSlurm(index == 1); });
  connect(submit_from_, &QComboBox::activated, this,
          [this](int index) { chooseLoginNode(index == 1); });

  // The script, in a monospace font, as sbatch would be given it; scrolled, never wrapped.
  preview_ = new QWidget();
  preview_->setObjectName("slurmScriptPreview");
  auto* preview_layout = new QVBoxLayout(preview_);
  preview_layout->setContentsMargins(0, 4, 0, 0);
  note_ = new QLabel();
  note_->setObjectName("slurmScriptNote");
  note_->setWordWrap(true);
  preview_layout->addWidget(note_);
  script_ = new QPlainTextEdit();
  script_->setObjectName("slurmScript");
  script_->setReadOnly(true);
  script_->setLineWrapMode(QPlainTextEdit::NoWrap);
  script_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  script_->setMinimumHeight(script_->fontMetrics().lineSpacing() * 8);
  script_->setMinimumWidth(0);
  preview_layout->addWidget(script_);
}

void SlurmSection::chooseSlurm(bool slurm) {
  if (slurm == slurmChosen(document_)) return;
  if (slurm) {
    // The hosts go (the parser refuses them beside a scheduler), kept for a switch back; a first
    // switch asks for as many ranks as the hosts gave, on one node.
    nlohmann::json scheduler =
        kept_scheduler_
            ? *kept_scheduler_
            : nlohmann::json{
                  {"kind", "slurm"}, {"nodes", 1}, {"ranks_per_node", ranksOfHosts(document_)}};
    if (const nlohmann::json* hosts = getPath(document_, "launch.hosts")) kept_hosts_ = *hosts;
    setPath(document_, "launch.hosts", std::nullopt);
    setPath(document_, "launch.scheduler", std::move(scheduler));
  } else {
    kept_scheduler_ = *getPath(document_, "launch.scheduler");
    setPath(document_, "launch.scheduler", std::nullopt);
    if (kept_hosts_) setPath(document_, "launch.hosts", *kept_hosts_);
  }
  emit edited();
}

void SlurmSection::chooseLoginNode(bool login_node) {
  if (!slurmChosen(document_) ||
      login_node == slurmFieldApplies(document_, "launch.scheduler.submit_from.host"))
    return;
  if (login_node) {
    // An empty host, which the parser asks for next to its field.
    setPath(document_, "launch.scheduler.submit_from",
            kept_submit_from_ ? *kept_submit_from_ : nlohmann::json{{"host", ""}});
  } else {
    kept_submit_from_ = *getPath(document_, "launch.scheduler.submit_from");
    setPath(document_, "launch.scheduler.submit_from", std::nullopt);
  }
  emit edited();
}

void SlurmSection::forgetKept() {
  kept_hosts_.reset();
  kept_scheduler_.reset();
  kept_submit_from_.reset();
}

void SlurmSection::showDocument(const std::optional<JobSpec>& spec) {
  const bool slurm = slurmChosen(document_);
  runs_on_->setCurrentIndex(slurm ? 1 : 0);
  submit_from_->setCurrentIndex(
      slurmFieldApplies(document_, "launch.scheduler.submit_from.host") ? 1 : 0);
  if (!slurm) return;
  if (!spec || !spec->launch.slurm) {
    // The last script stays, greyed: what changes is seen once the problems are fixed.
    script_->setEnabled(false);
    note_->setText(script_->toPlainText().isEmpty()
                       ? QString("The batch script is shown once the spec has no problems.")
                       : QString("Out of date until the spec's problems are fixed: the batch "
                                 "script as it last was."));
    return;
  }
  slurm::SlurmScriptPaths paths;
  paths.job_dir = std::string(kRunDir) + "/job";
  paths.spec_path = std::string(kRunDir) + "/spec.json";
  paths.node_binary = spec->launch.node_binary.value_or("ringmaster-node");
  QString script;
  try {
    script = QString::fromStdString(slurm::slurmBatchScript(*spec, paths));
  } catch (const Error& e) {
    script_->setEnabled(false);
    note_->setText(QString("No batch script: %1").arg(QString::fromStdString(e.message())));
    return;
  }
  if (script_->toPlainText() != script) script_->setPlainText(script);
  script_->setEnabled(true);
  note_->setText(QString("The batch script Launch submits with <tt>sbatch --parsable</tt> "
                         "(<tt>%1</tt>: the run's directory, named at launch):")
                     .arg(QString(kRunDir).toHtmlEscaped()));
}

QString SlurmSection::scriptText() const {
  return script_->toPlainText();
}

QString SlurmSection::scriptNote() const {
  return note_->text();
}

}  // namespace ringmaster::ui
