// The run edit dialog and the deletion question (views/run_organise.h), and the jobs that write.
#include "views/run_organise.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QStringList>
#include <algorithm>

#include "core/error.h"
#include "data/background_jobs.h"
#include "db/database.h"
#include "models/untrusted_text.h"
#include "recorder/run_edits.h"

namespace ringmaster::ui {

RunEditDialog::RunEditDialog(const storage::RunRecord& run, QWidget* parent) : QDialog(parent) {
  setObjectName("runEditDialog");
  setWindowTitle(QString("Edit run %1").arg(run.id));
  auto* form = new QFormLayout(this);
  name_ = new QLineEdit(QString::fromStdString(run.name));
  name_->setObjectName("runEditName");
  QStringList tags;
  for (const std::string& tag : run.tags) tags << QString::fromStdString(tag);
  tags_ = new QLineEdit(tags.join(' '));
  tags_->setObjectName("runEditTags");
  tags_->setPlaceholderText("baseline lr-sweep ...");
  note_ = new QPlainTextEdit(QString::fromStdString(run.note.value_or("")));
  note_->setObjectName("runEditNote");
  note_->setPlaceholderText("what this run was for, what it showed");
  form->addRow("Name", name_);
  form->addRow("Tags", tags_);
  form->addRow("Note", note_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel);
  form->addRow(buttons);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
}

QString RunEditDialog::name() const {
  return name_->text();
}

std::vector<std::string> RunEditDialog::tags() const {
  std::vector<std::string> tags;
  for (const QString& tag : tags_->text().split(' ', Qt::SkipEmptyParts))
    tags.push_back(tag.toStdString());
  return tags;
}

std::string RunEditDialog::note() const {
  return note_->toPlainText().toStdString();
}

void editRun(QWidget* parent, BackgroundJobs* jobs, const std::string& db_path,
             const storage::RunRecord& run, std::function<void(const QString&)> done) {
  auto* dialog = new RunEditDialog(run, parent);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  QObject::connect(dialog, &QDialog::accepted, jobs, [=] {
    const std::string name = dialog->name().toStdString();
    const std::vector<std::string> tags = dialog->tags();
    const std::string note = dialog->note();
    std::vector<std::string> removed;
    for (const std::string& tag : run.tags)
      if (std::find(tags.begin(), tags.end(), tag) == tags.end()) removed.push_back(tag);
    jobs->run<bool>(
        "edit",
        [=](const JobToken&) {
          storage::Database db(db_path);
          if (name != run.name) storage::renameRun(db, run.id, name);
          storage::setRunTags(db, run.id, tags, removed);
          if (note != run.note.value_or("")) storage::setRunNote(db, run.id, note);
          return true;
        },
        [done](bool) { done({}); }, [done](const QString& error) { done(error); });
  });
  dialog->open();
}

namespace {

// "Deleted run 3 (name): 1234 rows: steps 600, comm_events 400, ..."
QString deletedText(const storage::RunRecord& run, const storage::DeletedRows& deleted) {
  QStringList tables;
  for (const auto& [table, rows] : deleted.per_table)
    if (rows > 0) tables << QString("%1 %2").arg(QString::fromStdString(table)).arg(rows);
  return QString("Deleted run %1 (%2): %3 rows: %4")
      .arg(run.id)
      .arg(untrustedLine(run.name))
      .arg(deleted.total())
      .arg(tables.join(", "));
}

}  // namespace

void deleteRuns(QWidget* parent, BackgroundJobs* jobs, const std::string& db_path,
                const std::vector<storage::RunRecord>& runs,
                std::function<void(const QString&)> done) {
  if (runs.empty()) return;
  QStringList names;
  for (const storage::RunRecord& run : runs)
    names << QString("run %1 (%2, %3)")
                 .arg(run.id)
                 .arg(untrustedLine(run.name), untrustedLine(run.status));
  auto* question = new QMessageBox(
      QMessageBox::Warning, "Delete runs",
      QString("Delete %1 and every row of %2 (steps, communication, logs, ...)? This cannot be "
              "undone.\n\n%3")
          .arg(runs.size() == 1 ? QString("this run") : QString("these %1 runs").arg(runs.size()),
               runs.size() == 1 ? "it" : "them", names.join("\n")),
      QMessageBox::Yes | QMessageBox::Cancel, parent);
  question->setObjectName("deleteRunsQuestion");
  question->setDefaultButton(QMessageBox::Cancel);
  question->setAttribute(Qt::WA_DeleteOnClose);
  QObject::connect(question, &QMessageBox::finished, jobs, [=](int answer) {
    if (answer != QMessageBox::Yes) return;
    jobs->run<QStringList>(
        "delete",
        [=](const JobToken&) {
          storage::Database db(db_path);
          QStringList lines;
          for (const storage::RunRecord& run : runs) {
            try {
              lines << deletedText(run, storage::deleteRun(db, run.id));
            } catch (const Error& e) {
              lines << QString("Run %1 not deleted: %2")
                           .arg(run.id)
                           .arg(QString::fromStdString(e.message()));
            }
          }
          return lines;
        },
        [done](QStringList lines) { done(lines.join('\n')); },
        [done](const QString& error) { done(error); });
  });
  question->open();
}

}  // namespace ringmaster::ui
