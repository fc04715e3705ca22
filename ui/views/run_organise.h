// What a person changes about recorded runs from the desktop (issue 33): a dialog editing one run's
// name, tags and note, and the deletion of runs, asked for in a dialog that names them and then
// saying what was deleted per table. Every write is a job of BackgroundJobs (recorder/run_edits.h,
// never on the GUI thread); the dialogs are opened, not exec()'d, so that nothing blocks.
#pragma once

#include <QDialog>
#include <functional>
#include <string>
#include <vector>

#include "query/runs.h"

class QLineEdit;
class QPlainTextEdit;
class QWidget;

namespace ringmaster::ui {

class BackgroundJobs;

// The edit dialog ("runEditDialog"): the name ("runEditName"), the tags, space-separated
// ("runEditTags"), the note ("runEditNote").
class RunEditDialog : public QDialog {
  Q_OBJECT

 public:
  RunEditDialog(const storage::RunRecord& run, QWidget* parent);
  QString name() const;
  std::vector<std::string> tags() const;
  std::string note() const;

 private:
  QLineEdit* name_ = nullptr;
  QLineEdit* tags_ = nullptr;
  QPlainTextEdit* note_ = nullptr;
};

// Opens the edit dialog for `run`; when accepted, writes what changed to `db_path` as the job
// "edit" of `jobs`, then calls `done` with "" or the error to show.
void editRun(QWidget* parent, BackgroundJobs* jobs, const std::string& db_path,
             const storage::RunRecord& run, std::function<void(const QString&)> done);

// Opens the question "deleteRunsQuestion" naming `runs`; on Yes deletes them as the job "delete",
// then calls `done` with what was deleted ("Deleted run 3 (name): 1234 rows: steps 600, ...") or
// the error that stopped it (a live run: why).
void deleteRuns(QWidget* parent, BackgroundJobs* jobs, const std::string& db_path,
                const std::vector<storage::RunRecord>& runs,
                std::function<void(const QString&)> done);

}  // namespace ringmaster::ui
