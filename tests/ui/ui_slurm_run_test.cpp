// Issue 35, a run handed to Slurm in the window, from a real SQLite file written through storage's
// own functions (createRun, recordSchedulerJob, recordSchedulerState): while the job waits in the
// queue the run view's header says "pending" with "Slurm 4242: PENDING (Resources)" and the run
// list says the same in the Status column (pending in its own colour, found by the status
// filter, offered to Attach and Cancel as a detached run); once Slurm runs it, both follow:
// running, with the allocated nodes. A run not handed to a scheduler shows no such line.
#include <QComboBox>
#include <QPushButton>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include "data/background_jobs.h"
#include "db/database.h"
#include "models/run_list_model.h"
#include "query/runs.h"
#include "recorder/run_lifecycle.h"
#include "views/history_view.h"
#include "views/run_view.h"

using namespace ringmaster;
using namespace ringmaster::ui;

class UiSlurmRunTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string db_;
  int64_t slurm_run_ = 0, plain_run_ = 0;

  void recordState(const storage::SchedulerJob& job) {
    storage::AllowQueriesOnThisThread the_tests_own_writes;
    storage::Database db(db_);
    storage::recordSchedulerState(db, slurm_run_, job);
  }

  static bool settle(HistoryView& view) {
    QTest::qWait(50);
    return view.jobs()->waitForIdle(30000);
  }

 private slots:
  void initTestCase() {
    installGuiThreadQueryCheck();
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db").toStdString();
    storage::AllowQueriesOnThisThread the_tests_own_writes;
    storage::Database db(db_);
    const std::string spec =
        R"({"name": "gpt", "launch": {"scheduler": {"kind": "slurm", "nodes": 2,)"
        R"( "ranks_per_node": 2}}})";
    slurm_run_ = storage::createRun(
        db, {.name = "gpt", .spec_json = spec, .strategy = "ddp", .world_size = 4});
    storage::markRunDetached(db, slurm_run_, {dir_.filePath("run-1/job").toStdString()});
    storage::recordSchedulerJob(db, slurm_run_, "slurm", "4242");
    storage::recordSchedulerState(
        db, slurm_run_,
        {.kind = "slurm", .job_id = "4242", .state = "PENDING", .reason = "Resources"});
    plain_run_ = storage::createRun(
        db, {.name = "mlp", .spec_json = R"({"name": "mlp"})", .strategy = "ddp", .world_size = 2});
    storage::finishRun(db, plain_run_, "completed");
  }

  void theRunViewShowsAPendingJobThenItsRun() {
    RunView view(db_, slurm_run_);
    view.resize(1200, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_COMPARE_WITH_TIMEOUT(view.statusText(), QString("pending"), 20000);
    QCOMPARE(view.schedulerText(), QString("Slurm 4242: PENDING (Resources)"));
    // Slurm starts it: the view follows on its own.
    recordState({.kind = "slurm", .job_id = "4242", .state = "RUNNING", .nodes = "n[1-2]"});
    QTRY_COMPARE_WITH_TIMEOUT(view.statusText(), QString("running"), 20000);
    QTRY_COMPARE_WITH_TIMEOUT(view.schedulerText(), QString("Slurm 4242: RUNNING on n[1-2]"),
                              20000);
    // Back in the queue (requeued): pending again.
    recordState({.kind = "slurm", .job_id = "4242", .state = "PENDING", .reason = "Priority"});
    QTRY_COMPARE_WITH_TIMEOUT(view.schedulerText(), QString("Slurm 4242: PENDING (Priority)"),
                              20000);
    QTRY_COMPARE_WITH_TIMEOUT(view.statusText(), QString("pending"), 20000);

    RunView plain(db_, plain_run_);
    QTRY_COMPARE_WITH_TIMEOUT(plain.statusText(), QString("completed"), 20000);
    QVERIFY(plain.schedulerText().isEmpty());
  }

  void theRunListShowsTheJobAndFiltersPendingRuns() {
    recordState({.kind = "slurm", .job_id = "4242", .state = "PENDING", .reason = "Priority"});
    HistoryView view;
    view.resize(1200, 600);
    view.show();
    view.setDatabase(db_);
    QVERIFY(settle(view));
    QCOMPARE(view.model()->rowCount(), 2);
    const QModelIndex status =
        view.model()->index(view.model()->rowOfRun(slurm_run_), RunListModel::kStatus);
    QCOMPARE(status.data().toString(), QString("pending · Slurm 4242: PENDING (Priority)"));
    QCOMPARE(status.data(Qt::ForegroundRole).value<QColor>(), statusColor("pending"));
    QCOMPARE(view.model()
                 ->index(view.model()->rowOfRun(plain_run_), RunListModel::kStatus)
                 .data()
                 .toString(),
             QString("completed"));
    // Queued in Slurm, it is attached to and cancelled as a running detached run is.
    auto* attach = view.findChild<QPushButton*>("attachButton");
    auto* cancel = view.findChild<QPushButton*>("cancelDetachedButton");
    QVERIFY(attach && cancel);
    view.table()->selectRow(view.model()->rowOfRun(plain_run_));
    QVERIFY(!attach->isEnabled() && !cancel->isEnabled());
    view.table()->selectRow(view.model()->rowOfRun(slurm_run_));
    QVERIFY(attach->isEnabled() && cancel->isEnabled());
    auto* filter = view.findChild<QComboBox*>("historyStatus");
    QVERIFY(filter && filter->findText("pending") > 0);
    view.setStatusFilter("pending");
    QVERIFY(settle(view));
    QCOMPARE(view.model()->rowCount(), 1);
    QCOMPARE(view.model()->runAt(0).id, slurm_run_);
  }
};

QTEST_MAIN(UiSlurmRunTest)
#include "ui_slurm_run_test.moc"
