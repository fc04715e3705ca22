// Issue 21, detached runs in the desktop: the job editor's "Detached" launches `ringmaster run
// --detach` (the launch ends, the run goes on, shown "running (detached)" in the run list), the run
// list's Attach follows it to its end (recorded completed) and its Cancel run stops another one
// (recorded cancelled, neither its agent nor a worker left, by the PIDs in its job directory).
// Real runs of the DDP example on 2 local ranks through the built `ringmaster`.
#include <QAbstractItemModel>
#include <QCheckBox>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include "common/proc_files.h"
#include "db/database.h"
#include "db/statement.h"
#include "main_window.h"
#include "models/run_list_model.h"
#include "ui_test_support.h"
#include "views/history_view.h"
#include "views/job_editor.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

namespace {

constexpr int kRunTimeoutMs = 240000;

std::string queryText(storage::Database& db, const std::string& sql) {
  storage::Statement statement(db, sql);
  return statement.run() ? statement.columnText(0) : std::string();
}

int64_t queryInt(storage::Database& db, const std::string& sql) {
  storage::Statement statement(db, sql);
  return statement.run() ? statement.columnInt(0) : -1;
}

}  // namespace

class UiDetachedRunTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string db_;
  std::unique_ptr<MainWindow> window_;
  std::vector<pid_t> started_;  // every agent and worker seen, killed at the end if still there

  std::string jobDir(int64_t run) const {
    return db_ + "-runs/run-" + std::to_string(run) + "/job";
  }
  std::vector<pid_t> jobProcesses(int64_t run) {
    std::vector<pid_t> pids = ringmaster::testing::pidsInFile(jobDir(run) + "/agent.pid");
    for (pid_t pid : ringmaster::testing::pidsInFile(jobDir(run) + "/workers.pid"))
      pids.push_back(pid);
    started_.insert(started_.end(), pids.begin(), pids.end());
    return pids;
  }
  // Launches `spec` detached from the editor's Launch; the run's id once the launch ended.
  int64_t launchDetached(const nlohmann::json& spec) {
    MainWindow& w = *window_;
    QSignalSpy finished(&w, &MainWindow::launchFinished);
    w.jobEditor()->detachBox()->setChecked(true);
    if (!w.launch(spec) || !finished.wait(kRunTimeoutMs)) return 0;
    if (finished.first().at(1).toInt() != 0) {
      qWarning("the detached launch ended with %d", finished.first().at(1).toInt());
      return 0;
    }
    return finished.first().at(0).toLongLong();
  }
  // Asks the run list to refresh, and selects `run` once the list shows it: its row's status
  // text, possibly from the refresh before (the list refreshes on a worker thread).
  QString selectInHistory(int64_t run) {
    HistoryView& history = *window_->history();
    history.refresh();
    for (int i = 0; i < 200; ++i) {
      for (int row = 0; row < history.model()->rowCount(); ++row) {
        if (history.model()->runAt(row).id != run) continue;
        history.table()->selectRow(row);
        return history.model()->index(row, RunListModel::kStatus).data(Qt::DisplayRole).toString();
      }
      QTest::qWait(50);
    }
    return {};
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db").toStdString();
    QSettings("ringmaster", "ringmaster-ui-detached-test").clear();
    window_ = std::make_unique<MainWindow>(
        MainWindowOptions{db_, ringmasterExecutable(), "ringmaster-ui-detached-test"});
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
  }

  void cleanupTestCase() {
    QTRY_COMPARE_WITH_TIMEOUT(window_->activeLaunches(), 0, 30000);
    window_.reset();
    for (pid_t pid : started_)
      if (ringmaster::testing::processRuns(pid)) ::kill(pid, SIGKILL);  // only after a failure
  }

  void aDetachedLaunchGoesOnAndAttachFollowsItToItsEnd() {
    nlohmann::json spec = exampleSpec("ddp_mlp", 150);
    spec["launch"]["hosts"] = {{{"host", "localhost"}, {"ranks", 2}}};
    const int64_t run = launchDetached(spec);
    QVERIFY(run > 0);
    QVERIFY2(window_->statusBar()->currentMessage().contains("is detached"),
             qPrintable(window_->statusBar()->currentMessage()));
    QCOMPARE(jobProcesses(run).size(), size_t{3});
    {
      storage::Database db(db_);
      const std::string status =
          queryText(db, "SELECT status FROM runs WHERE id = " + std::to_string(run));
      QVERIFY2(status == "running" || status == "completed", status.c_str());
    }
    // Still running (the workers take their steps): the list offers Attach and Cancel run. The
    // list refreshes on a worker thread, so it may first show the row an earlier refresh read,
    // from before the launch marked the run detached.
    QTRY_COMPARE_WITH_TIMEOUT(selectInHistory(run), QString("running (detached)"), 10000);
    auto* attach = window_->history()->findChild<QPushButton*>("attachButton");
    auto* cancel = window_->history()->findChild<QPushButton*>("cancelDetachedButton");
    QVERIFY(attach && cancel);
    QVERIFY(attach->isEnabled());
    QVERIFY(cancel->isEnabled());
    QSignalSpy finished(window_.get(), &MainWindow::launchFinished);
    QTest::mouseClick(attach, Qt::LeftButton);
    QVERIFY(finished.wait(kRunTimeoutMs));
    QCOMPARE(finished.first().at(1).toInt(), 0);
    storage::Database db(db_);
    QCOMPARE(queryText(db, "SELECT status FROM runs WHERE id = " + std::to_string(run)),
             std::string("completed"));
    QCOMPARE(queryInt(db, "SELECT count(*) FROM steps WHERE run_id = " + std::to_string(run)),
             int64_t{300});
    for (pid_t pid : jobProcesses(run)) QVERIFY(!ringmaster::testing::processRuns(pid));
    // Ended: nothing to attach to.
    QTRY_COMPARE_WITH_TIMEOUT(selectInHistory(run), QString("completed"), 10000);
    QTRY_VERIFY(!attach->isEnabled());
  }

  void cancelRunStopsADetachedRunAndLeavesNoProcess() {
    nlohmann::json spec = exampleSpec("ddp_mlp", 100000);
    spec["launch"]["hosts"] = {{{"host", "localhost"}, {"ranks", 2}}};
    const int64_t run = launchDetached(spec);
    QVERIFY(run > 0);
    const std::vector<pid_t> processes = jobProcesses(run);
    QCOMPARE(processes.size(), size_t{3});
    for (pid_t pid : processes) QVERIFY(ringmaster::testing::processRuns(pid));
    QTRY_COMPARE_WITH_TIMEOUT(selectInHistory(run), QString("running (detached)"), 10000);
    auto* cancel = window_->history()->findChild<QPushButton*>("cancelDetachedButton");
    QTRY_VERIFY(cancel->isEnabled());
    QSignalSpy finished(window_.get(), &MainWindow::launchFinished);
    QTest::mouseClick(cancel, Qt::LeftButton);
    QVERIFY(finished.wait(kRunTimeoutMs));
    QCOMPARE(finished.first().at(1).toInt(), 130);
    for (pid_t pid : processes)
      QVERIFY2(!ringmaster::testing::processRuns(pid), qPrintable(QString::number(pid)));
    storage::Database db(db_);
    QCOMPARE(queryText(db, "SELECT status FROM runs WHERE id = " + std::to_string(run)),
             std::string("cancelled"));
  }
};

QTEST_MAIN(UiDetachedRunTest)
#include "ui_detached_run_test.moc"
