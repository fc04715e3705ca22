// Issue 21, the live hang view in the desktop: a running run whose ranks 0, 1 and 3 report
// waiting in all_reduce #28 while rank 2's reports stopped short of it (progress events stored
// through the recorder, as a run sends them) shows the diagnosis in the run view's banner and what
// each rank waits on in the rank table's status; once the run has ended neither is shown.
#include <QLabel>
#include <QTableView>
#include <QTest>

#include <chrono>

#include "db/database.h"
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
};

QTEST_MAIN(UiHangViewTest)
#include "ui_hang_view_test.moc"
