// The validation loss in the run view (the eval event, train.eval_every): a gpt trained on text by
// `ringmaster run` (2 local DDP ranks) evaluates every few steps, and the Loss chart draws the
// stored validation loss as its own line of one point per evaluation beside the ranks' training
// loss, following the chart's zoom; the summary line names the latest.
#include <QFile>
#include <QProcess>
#include <QTest>
#include <cmath>

#include "data/background_jobs.h"
#include "db/database.h"
#include "query/evals.h"
#include "query/runs.h"
#include "ui_test_support.h"
#include "views/run_view.h"
#include "widgets/metric_chart.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

class UiEvalChartTest : public QObject {
  Q_OBJECT

 private slots:
  void theLossChartDrawsTheValidationLossOfEachEvaluation() {
    installGuiThreadQueryCheck();  // issue 17: the view reads off the GUI thread
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string db_path = dir.filePath("runs.db").toStdString();
    QFile corpus(dir.filePath("corpus.txt"));
    QVERIFY(corpus.open(QIODevice::WriteOnly));
    const char* words[] = {"the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "dog. "};
    for (int i = 0; i < 800; ++i) corpus.write(words[(i * 5 + i / 7) % 8]);
    corpus.close();
    const nlohmann::json spec = {
        {"name", "eval_chart"},
        {"strategy", {{"kind", "ddp"}}},
        {"model",
         {{"kind", "gpt"},
          {"layers", 1},
          {"vocab_size", 256},
          {"context", 8},
          {"heads", 2},
          {"dim", 16}}},
        {"data", {{"kind", "text"}, {"path", corpus.fileName().toStdString()}}},
        {"train", {{"steps", 12}, {"batch_size", 4}, {"eval_every", 4}, {"eval_batches", 2}}},
        {"optimizer", {{"kind", "adamw"}, {"lr", 0.01}}},
        {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", 2}}}}}},
        {"device", "cpu"}};
    QFile file(dir.filePath("spec.json"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(QByteArray::fromStdString(spec.dump()));
    file.close();
    QProcess run;
    run.setProcessChannelMode(QProcess::MergedChannels);
    run.start(ringmasterExecutable(),
              {"--db", QString::fromStdString(db_path), "run", file.fileName(), "-q"});
    QVERIFY(run.waitForFinished(240000));
    QVERIFY2(run.exitCode() == 0, run.readAll().constData());

    std::vector<storage::EvalPoint> stored;
    int64_t run_id = 0;
    {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      storage::Database db(db_path);
      run_id = storage::listRuns(db).at(0).id;
      stored = storage::loadEvals(db, run_id);
    }
    QCOMPARE(stored.size(), size_t{3});  // after steps 4, 8 and 12

    RunView view(db_path, run_id);
    view.resize(1100, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    MetricChart* loss = view.chart("Loss");
    QVERIFY(loss);
    // Two ranks' training loss and the validation loss.
    QTRY_COMPARE_WITH_TIMEOUT(loss->lineCount(), 3, 20000);
    const QList<QPointF> points = loss->linePoints("validation loss");
    QCOMPARE(points.size(), qsizetype{3});
    for (qsizetype i = 0; i < points.size(); ++i) {
      QCOMPARE(points[i].x(), static_cast<double>(stored[static_cast<size_t>(i)].step));
      QCOMPARE(points[i].y(), *stored[static_cast<size_t>(i)].val_loss);
    }
    QVERIFY2(view.figuresText().contains("val loss"), qPrintable(view.figuresText()));
    QVERIFY2(view.figuresText().contains("(step 12)"), qPrintable(view.figuresText()));
    // Zoomed to steps 6..12, the evaluations of steps 8 and 12 remain.
    loss->zoomTo(6, 12);
    QTRY_COMPARE_WITH_TIMEOUT(loss->linePoints("validation loss").size(), qsizetype{2}, 20000);
    QCOMPARE(loss->linePoints("validation loss").front().x(), 8.0);
  }
};

QTEST_MAIN(UiEvalChartTest)
#include "ui_eval_chart_test.moc"
