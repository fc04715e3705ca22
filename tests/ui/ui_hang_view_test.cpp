// Issue 21, the live hang view in the desktop: a running run whose ranks 0, 1 and 3 report
// waiting in all_reduce #28 while rank 2's reports stopped short of it (progress events stored
// through the recorder, as a run sends them) shows the diagnosis in the run view's banner and what
// each rank waits on in the rank table's status; once the run has ended neither is shown. And a
// real run with a worker stopped by SIGSTOP is named in the run view within 10 s.
#include <QLabel>
#include <QTableView>
#include <QTest>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/proc_files.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "db/statement.h"
#include "models/rank_table_model.h"
#include "recorder/recorder.h"
#include "recorder/run_lifecycle.h"
#include "ui_test_support.h"
#include "views/run_view.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

namespace {

double wallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Rank `rank`'s hello and one progress report at `t`.
void recordRank(storage::Recorder& recorder, int rank, double t, uint64_t started, bool waiting) {
  recorder.submit({rank, 0, t - 60,
                   HelloEvent{.world_size = 4, .host = "h", .pid = 100 + rank, .strategy = "ddp"}});
  ProgressEvent p{.group = "world", .period_s = 2, .started = started, .completed = started};
  if (waiting) {
    p.completed = started - 1;
    p.op = "all_reduce";
    p.op_seq = static_cast<int64_t>(started);
    p.waiting_ms = 40'000;
  }
  recorder.submit({rank, 1, t, p});
}

int64_t queryInt(const std::string& db_path, const std::string& sql) {
  storage::AllowQueriesOnThisThread the_tests_own_queries;
  storage::Database db(db_path);
  storage::Statement select(db, sql);
  return select.run() ? select.columnInt(0) : 0;
}

QString statusOf(RunView& view, int rank) {
  const QModelIndex index = view.rankModel()->index(rank, RankTableModel::kStatus);
  return view.rankModel()->data(index, Qt::DisplayRole).toString();
}

}  // namespace

class UiHangViewTest : public QObject {
  Q_OBJECT

 private slots:
  void theRunViewAndTheRankTableNameTheStuckRank() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string db_path = dir.filePath("runs.db").toStdString();
    int64_t run = 0;
    {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      storage::Database db(db_path);
      run = storage::createRun(
          db, {.name = "hung", .spec_json = "{}", .strategy = "ddp", .world_size = 4});
      storage::Recorder recorder(db_path, run, 0);
      const double now = wallNow();
      for (int rank : {0, 1, 3}) recordRank(recorder, rank, now, 28, true);
      recordRank(recorder, 2, now - 15, 27, false);
      recorder.flush();
    }

    RunView view(db_path, run);
    view.resize(1100, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_VERIFY_WITH_TIMEOUT(view.snapshot() != nullptr, 20000);
    const QString banner = view.hangText();
    QVERIFY2(banner.contains("rank 2 has not reached all_reduce #28") &&
                 banner.contains("ranks 0, 1 and 3 waiting"),
             qPrintable(banner));
    const QLabel* label = view.findChild<QLabel*>("hangBanner");
    QVERIFY(label && label->isVisible());
    QVERIFY2(statusOf(view, 2).contains("has not reached all_reduce #28"),
             qPrintable(statusOf(view, 2)));
    QVERIFY2(statusOf(view, 0).contains("waiting") && statusOf(view, 0).contains("all_reduce #28"),
             qPrintable(statusOf(view, 0)));
    QVERIFY(view.rankModel()
                ->data(view.rankModel()->index(2, RankTableModel::kStatus), Qt::ToolTipRole)
                .toString()
                .contains("has not reached all_reduce #28"));

    // The run ends: the diagnosis goes, the statuses are plain again.
    {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      storage::Database db(db_path);
      storage::finishRun(db, run, "failed");
    }
    QTRY_VERIFY_WITH_TIMEOUT(view.hangText().isEmpty(), 20000);
    QVERIFY(!label->isVisible());
    QVERIFY2(!statusOf(view, 2).contains("all_reduce"), qPrintable(statusOf(view, 2)));
  }

  // The acceptance of issue 21 in the desktop: a real 3-rank DDP run (300 s timeout) with rank 1
  // stopped by SIGSTOP; within 10 s of the stop the run view's banner and its rank table name it.
  void aStoppedWorkerOfARealRunIsNamedInTheRunView() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string db_path = dir.filePath("runs.db").toStdString();
    std::ifstream in(std::string(ringmaster::testSourceDir()) + "/resources/examples/ddp_mlp.json");
    nlohmann::json spec = nlohmann::json::parse(in);
    spec["launch"]["hosts"] = nlohmann::json::array({{{"host", "localhost"}, {"ranks", 3}}});
    spec["launch"]["timeout_s"] = 300;
    spec["train"]["steps"] = 10'000'000;
    const std::string spec_path = dir.filePath("ddp.json").toStdString();
    std::ofstream(spec_path) << spec.dump(2);
    ringmaster::testing::CapturedProcess run(
        std::string(ringmaster::testBinaryDir()) + "/app/ringmaster",
        {"--db", db_path, "run", spec_path, "--grace", "1", "-q"});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!std::filesystem::exists(db_path) ||
           queryInt(db_path, "SELECT count(*) FROM rank_progress WHERE completed >= 8") < 3) {
      QVERIFY2(std::chrono::steady_clock::now() < deadline, "the run did not get going");
      run.readFor(std::chrono::milliseconds(200));
    }
    const auto pid = static_cast<pid_t>(queryInt(db_path, "SELECT pid FROM ranks WHERE rank = 1"));
    QVERIFY(ringmaster::testing::readProcFile(pid, "cmdline").find("worker") != std::string::npos);
    std::vector<pid_t> workers;
    for (int r = 0; r < 3; ++r)
      workers.push_back(static_cast<pid_t>(
          queryInt(db_path, "SELECT pid FROM ranks WHERE rank = " + std::to_string(r))));

    QCOMPARE(::kill(pid, SIGSTOP), 0);
    RunView view(db_path, 1);
    view.resize(1100, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_VERIFY_WITH_TIMEOUT(view.hangText().contains("rank 1 has not reached all_reduce #"),
                             10000);
    QVERIFY2(statusOf(view, 1).contains("has not reached all_reduce #"),
             qPrintable(statusOf(view, 1)));

    QCOMPARE(::kill(pid, SIGCONT), 0);
    run.signal(SIGINT);
    const ExitStatus status = run.wait(std::chrono::seconds(60));
    QVERIFY2(ringmaster::testing::exitedWith(status, 130), status.describe().c_str());
    for (pid_t worker : workers) {
      const auto reaped = std::chrono::steady_clock::now() + std::chrono::seconds(15);
      while (::kill(worker, 0) == 0 && std::chrono::steady_clock::now() < reaped) QTest::qWait(50);
      QVERIFY2(::kill(worker, 0) != 0, "a worker outlived its run");
    }
  }
};

QTEST_MAIN(UiHangViewTest)
#include "ui_hang_view_test.moc"
