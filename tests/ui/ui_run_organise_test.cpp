// Issue 33, runs a person can organise, in the desktop's run list (HistoryView): Edit… renames a
// run and sets its tags and note (shown in the Tags column), the search line finds runs by tag,
// note, spec field and status (a term that is none is said), and Delete… asks first (Cancel keeps
// the run), then deletes the run with every row of it and says what per table, keeping the other
// run; a run whose recorder is live is not deleted and the list says why. Real SQLite files; every
// write goes through the view's jobs.
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <string>

#include "data/background_jobs.h"
#include "db/database.h"
#include "db/statement.h"
#include "models/run_list_model.h"
#include "query/runs.h"
#include "recorder/run_lifecycle.h"
#include "views/history_view.h"
#include "views/run_organise.h"

using namespace ringmaster;
using namespace ringmaster::ui;

class UiRunOrganiseTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string db_;
  int64_t small_ = 0, large_ = 0;

  int64_t count(const std::string& sql) {
    storage::AllowQueriesOnThisThread allowed;
    storage::Database db(db_);
    storage::Statement statement(db, sql);
    return statement.run() ? statement.columnInt(0) : -1;
  }
  storage::RunRecord run(int64_t id) {
    storage::AllowQueriesOnThisThread allowed;
    storage::Database db(db_);
    return storage::loadRun(db, id);
  }
  static bool settle(HistoryView& view) {
    // The refresh a write starts, and the one the data_version poll starts after it.
    QTest::qWait(50);
    return view.jobs()->waitForIdle(30000);
  }
  static void select(HistoryView& view, int64_t id) {
    view.table()->clearSelection();
    view.table()->selectRow(view.model()->rowOfRun(id));
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db").toStdString();
    storage::AllowQueriesOnThisThread allowed;
    storage::Database db(db_);
    small_ = storage::createRun(db, {.name = "gpt-small",
                                     .spec_json = R"({"optimizer":{"lr":0.0003}})",
                                     .strategy = "ddp",
                                     .world_size = 2});
    storage::finishRun(db, small_, "completed");
    large_ = storage::createRun(db, {.name = "gpt-large",
                                     .spec_json = R"({"optimizer":{"lr":0.001}})",
                                     .strategy = "fsdp",
                                     .world_size = 2});
    storage::finishRun(db, large_, "failed");
  }

  void editSetsNameTagsAndNote() {
    HistoryView view;
    view.setDatabase(db_);
    QVERIFY(settle(view));
    QCOMPARE(view.model()->rowCount(), 2);
    auto* edit = view.findChild<QPushButton*>("historyEditButton");
    QVERIFY(edit && !edit->isEnabled());
    select(view, small_);
    QVERIFY(edit->isEnabled());
    edit->click();
    auto* dialog = view.findChild<RunEditDialog*>("runEditDialog");
    QVERIFY(dialog && dialog->isVisible());
    dialog->findChild<QLineEdit*>("runEditName")->setText("gpt-small lr 3e-4");
    dialog->findChild<QLineEdit*>("runEditTags")->setText("baseline  keep");
    dialog->findChild<QPlainTextEdit*>("runEditNote")->setPlainText("the reference run");
    dialog->accept();
    QVERIFY(settle(view));
    QCOMPARE(view.noticeText(), QString("Saved."));
    const storage::RunRecord saved = run(small_);
    QCOMPARE(saved.name, std::string("gpt-small lr 3e-4"));
    QCOMPARE(saved.tags, (std::vector<std::string>{"baseline", "keep"}));
    QCOMPARE(saved.note.value_or(""), std::string("the reference run"));
    const int row = view.model()->rowOfRun(small_);
    QCOMPARE(view.model()->index(row, RunListModel::kTags).data().toString(),
             QString("baseline keep"));
    QCOMPARE(view.model()->index(row, RunListModel::kName).data().toString(),
             QString("gpt-small lr 3e-4"));
    // A tag taken out in the dialog is removed; a bad one is refused and said, nothing changed.
    select(view, small_);
    edit->click();
    dialog = view.findChild<RunEditDialog*>("runEditDialog");
    QVERIFY(dialog);
    dialog->findChild<QLineEdit*>("runEditTags")->setText("baseline bad,tag");
    dialog->accept();
    QVERIFY(settle(view));
    QVERIFY2(view.noticeText().contains("bad,tag"), qPrintable(view.noticeText()));
    QCOMPARE(run(small_).tags, (std::vector<std::string>{"baseline", "keep"}));
  }

  void searchFindsByTagNoteSpecFieldAndStatus() {
    HistoryView view;
    view.setDatabase(db_);
    QVERIFY(settle(view));
    const auto shown = [&](const QString& search) {
      view.setSearch(search);
      settle(view);
      std::vector<int64_t> ids;
      for (int row = 0; row < view.model()->rowCount(); ++row)
        ids.push_back(view.model()->runAt(row).id);
      return ids;
    };
    QCOMPARE(shown("tag:baseline"), std::vector<int64_t>{small_});
    QCOMPARE(shown("REFERENCE"), std::vector<int64_t>{small_});
    QCOMPARE(shown("optimizer.lr=1e-3"), std::vector<int64_t>{large_});
    QCOMPARE(shown("status:failed"), std::vector<int64_t>{large_});
    QCOMPARE(shown("gpt since:1d"), (std::vector<int64_t>{large_, small_}));
    QVERIFY(view.searchProblems().isEmpty());
    shown("status:done");
    QVERIFY2(view.searchProblems().contains("status:done"), qPrintable(view.searchProblems()));
    QCOMPARE(shown(""), (std::vector<int64_t>{large_, small_}));
  }

  void deleteAsksThenDeletesEveryRowAndKeepsTheOtherRun() {
    HistoryView view;
    view.setDatabase(db_);
    QVERIFY(settle(view));
    auto* remove = view.findChild<QPushButton*>("historyDeleteButton");
    select(view, large_);
    QVERIFY(remove->isEnabled());
    remove->click();
    auto* question = view.findChild<QMessageBox*>("deleteRunsQuestion");
    QVERIFY(question && question->isVisible());
    QVERIFY(question->text().contains("gpt-large"));
    question->button(QMessageBox::Cancel)->click();
    QVERIFY(settle(view));
    QCOMPARE(count("SELECT count(*) FROM runs"), 2);

    const int64_t attempts =
        count("SELECT count(*) FROM attempts WHERE run_id = " + std::to_string(large_));
    QCOMPARE(attempts, 1);
    select(view, large_);
    remove->click();
    question = view.findChild<QMessageBox*>("deleteRunsQuestion");
    QVERIFY(question);
    question->button(QMessageBox::Yes)->click();
    QVERIFY(settle(view));
    QVERIFY2(
        view.noticeText().contains(QString("Deleted run %1 (gpt-large): 2 rows: ").arg(large_)),
        qPrintable(view.noticeText()));
    QVERIFY(view.noticeText().contains("attempts 1"));
    QVERIFY(view.noticeText().contains("runs 1"));
    QCOMPARE(count("SELECT count(*) FROM runs WHERE id = " + std::to_string(large_)), 0);
    QCOMPARE(count("SELECT count(*) FROM attempts WHERE run_id = " + std::to_string(large_)), 0);
    QCOMPARE(count("SELECT count(*) FROM run_tags WHERE run_id = " + std::to_string(small_)), 2);
    QCOMPARE(view.model()->rowCount(), 1);

    // A run this process records (live): refused, and why is said.
    int64_t live = 0;
    {
      storage::AllowQueriesOnThisThread allowed;
      storage::Database db(db_);
      live = storage::createRun(db, {.name = "live", .spec_json = "{}", .strategy = "ddp"});
    }
    view.refresh();
    QVERIFY(settle(view));
    QVERIFY(view.model()->rowOfRun(live) >= 0);
    select(view, live);
    remove->click();
    question = view.findChild<QMessageBox*>("deleteRunsQuestion");
    QVERIFY(question);
    question->button(QMessageBox::Yes)->click();
    QVERIFY(settle(view));
    QVERIFY2(view.noticeText().contains("still live"), qPrintable(view.noticeText()));
    QCOMPARE(count("SELECT count(*) FROM runs WHERE id = " + std::to_string(live)), 1);
  }
};

QTEST_MAIN(UiRunOrganiseTest)
#include "ui_run_organise_test.moc"
