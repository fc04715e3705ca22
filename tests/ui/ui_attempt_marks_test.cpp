// Issue 21, automatic restarts in the run view: a run whose attempt 1 resumed at step 21 after
// attempt 0 reached step 30 (stored through the recorder as the agents send it) has every chart
// mark attempt 1 at step 21 with steps 21..30 shaded as rolled back, and the chart draws the mark
// over its plot; a run without restarts has no mark.
#include <QImage>
#include <QTest>

#include "db/database.h"
#include "query/runs.h"
#include "recorder/recorder.h"
#include "ui_test_support.h"
#include "views/run_view.h"
#include "widgets/metric_chart.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

namespace {

// Two ranks' steps first..last of `attempt`, from a hello naming it.
void recordAttempt(storage::Recorder& recorder, int attempt, int first, int last) {
  for (int rank = 0; rank < 2; ++rank) {
    uint64_t seq = 0;
    const double start = 1e9 + 1000.0 * attempt;
    recorder.submit({rank, seq++, start,
                     HelloEvent{.world_size = 2, .host = "h", .pid = 10, .attempt = attempt}});
    for (int step = first; step <= last; ++step)
      recorder.submit({rank, seq++, start + step, StepEvent{.step = step, .loss = 1.0 + attempt}});
    recorder.submit({rank, seq++, start + last + 1,
                     DoneEvent{.status = DoneStatus::kCompleted, .final_step = last}});
  }
}

}  // namespace

class UiAttemptMarksTest : public QObject {
  Q_OBJECT

 private slots:
  void everyChartMarksWhereARestartBeganAndWhatItRolledBack() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string db_path = dir.filePath("runs.db").toStdString();
    int64_t restarted = 0, plain = 0;
    {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      storage::Database db(db_path);
      const storage::NewRun run{.name = "r", .spec_json = "{}", .strategy = "ddp", .world_size = 2};
      restarted = storage::createRun(db, run);
      plain = storage::createRun(db, run);
      {
        storage::Recorder recorder(db_path, restarted, 0);
        recordAttempt(recorder, 0, 1, 30);
        recordAttempt(recorder, 1, 21, 40);
        recorder.flush();
      }
      {
        storage::Recorder recorder(db_path, plain, 0);
        recordAttempt(recorder, 0, 1, 40);
        recorder.flush();
      }
      storage::finishRun(db, restarted, "completed");
      storage::finishRun(db, plain, "completed");
    }
    const std::vector<AttemptMark> expected = {AttemptMark{
        .attempt = 1, .first_step = 21, .rolled_back = std::pair<int64_t, int64_t>(21, 30)}};

    RunView view(db_path, restarted);
    view.resize(1100, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    MetricChart* loss = view.chart("Loss");
    QVERIFY(loss);
    QTRY_VERIFY_WITH_TIMEOUT(loss->pointCount() > 0, 20000);
    QTRY_VERIFY_WITH_TIMEOUT(loss->attemptMarks() == expected, 20000);
    for (MetricChart* chart : view.charts())
      QVERIFY2(chart->attemptMarks() == expected, qPrintable(chart->title()));
    // Drawn: the shaded rolled-back steps change the plot's pixels.
    const QImage marked = loss->grab().toImage();
    loss->setAttemptMarks({});
    QVERIFY(loss->grab().toImage() != marked);

    RunView other(db_path, plain);
    other.resize(1100, 800);
    other.show();
    QVERIFY(QTest::qWaitForWindowExposed(&other));
    QTRY_VERIFY_WITH_TIMEOUT(other.chart("Loss")->pointCount() > 0, 20000);
    QVERIFY(other.chart("Loss")->attemptMarks().empty());
  }
};

QTEST_MAIN(UiAttemptMarksTest)
#include "ui_attempt_marks_test.moc"
