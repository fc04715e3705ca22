// Issue 17: the window does no database work on the GUI thread. The check (storage's query-thread
// check, installed as the window installs it) catches a query made there, every view (run,
// pipeline, compare, history) opened on real runs reads and writes only through BackgroundJobs,
// and BackgroundJobs drops stale results and cancels the jobs they belong to.
#include <QFile>
#include <QProcess>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QtConcurrent/QtConcurrentRun>
#include <atomic>
#include <thread>

#include "core/error.h"
#include "data/background_jobs.h"
#include "db/database.h"
#include "models/run_list_model.h"
#include "query/runs.h"
#include "ui/ui_test_support.h"
#include "views/compare_view.h"
#include "views/history_view.h"
#include "views/pipeline_view.h"
#include "views/run_view.h"
#include "widgets/gantt_chart.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

namespace {

constexpr int kRunTimeoutMs = 300000;

}  // namespace

class UiQueryThreadTest : public QObject {
  Q_OBJECT

  // Runs `spec` with `ringmaster run` into the test's database; its id.
  int64_t record(const nlohmann::json& spec) {
    QFile file(dir_.filePath(QString::fromStdString(spec["name"].get<std::string>()) + ".json"));
    if (!file.open(QIODevice::WriteOnly)) return 0;
    file.write(QByteArray::fromStdString(spec.dump()));
    file.close();
    QProcess run;
    run.setProcessChannelMode(QProcess::MergedChannels);
    run.setWorkingDirectory(dir_.path());
    run.start(ringmasterExecutable(),
              {"--db", QString::fromStdString(db_), "run", file.fileName()});
    if (!run.waitForFinished(kRunTimeoutMs) || run.exitCode() != 0) {
      qWarning("%s", run.readAll().constData());
      return 0;
    }
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_, storage::readingOptions(db_));
    const auto runs = storage::listRuns(db);
    return runs.empty() ? 0 : runs.front().id;  // newest first
  }

  // A ddp and a pipeline run, recorded by `ringmaster run`.
  bool recordRuns() {
    nlohmann::json ddp = exampleSpec("ddp_mlp", 12);
    ddp["name"] = "ddp_off_gui";
    ddp["launch"]["hosts"][0]["ranks"] = 2;
    ddp_run_ = record(ddp);
    if (ddp_run_ <= 0) return false;
    nlohmann::json pipeline = exampleSpec("pipeline_mlp", 4);
    pipeline["name"] = "pipeline_off_gui";
    pipeline_run_ = record(pipeline);
    return pipeline_run_ > 0;
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db").toStdString();
    installGuiThreadQueryCheck();
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database create(db_);
  }

  void aQueryOnTheGuiThreadIsCaught() {
    try {
      storage::Database db(db_, storage::readingOptions(db_));
      QFAIL("the GUI thread opened the database");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::kInternal);
      QVERIFY2(QString(e.what()).contains("must not"), e.what());
    }
    // A connection opened elsewhere is refused here too, statement by statement.
    std::unique_ptr<storage::Database> db;
    std::thread([&] {
      db = std::make_unique<storage::Database>(db_, storage::readingOptions(db_));
    }).join();
    QVERIFY(db);
    QVERIFY_THROWS_EXCEPTION(Error, storage::listRuns(*db));
    QVERIFY_THROWS_EXCEPTION(Error, (void)db->dataVersion());
    // ... and read on a worker thread.
    const auto runs = QtConcurrent::run([&] { return storage::listRuns(*db); }).result();
    QCOMPARE(runs.size(), size_t{0});
    std::thread([&] { db.reset(); }).join();
  }

  void everyViewReadsOffTheGuiThread() {
    QVERIFY2(recordRuns(), "a run failed");
    // A query on the GUI thread would throw out of the event loop and end this test.
    RunView run(db_, pipeline_run_);
    run.resize(1100, 800);
    run.show();
    QVERIFY(QTest::qWaitForWindowExposed(&run));
    QTRY_VERIFY_WITH_TIMEOUT(run.snapshot() && run.snapshot()->run().status == "completed", 20000);
    run.tabs()->setCurrentWidget(run.pipelineView());
    QVERIFY(run.pipelineView()->jobs()->waitForIdle());
    QVERIFY(run.pipelineView()->shownStep().has_value());
    QVERIFY(!run.pipelineView()->measured().data().bars.empty());
    run.pipelineView()->showStep(run.snapshot()->scheduled_steps.front());
    QVERIFY(run.pipelineView()->jobs()->waitForIdle());
    QVERIFY(!run.pipelineView()->measured().data().bars.empty());
    QTest::qWait(200);  // a few data_version polls

    CompareView compare(db_, {ddp_run_, pipeline_run_});
    compare.resize(1100, 800);
    compare.show();
    QVERIFY(compare.jobs()->waitForIdle());
    QCOMPARE(compare.errorText(), QString());
    QCOMPARE(compare.lossChart()->lineCount(), 2);
    compare.lossChart()->zoomTo(1, 3);
    QVERIFY(compare.jobs()->waitForIdle());
    QCOMPARE(compare.errorText(), QString());

    HistoryView history;
    history.setDatabase(db_);  // reconciles interrupted runs: a write, off the GUI thread too
    QVERIFY(history.jobs()->waitForIdle());
    QCOMPARE(history.errorText(), QString());
    QCOMPARE(history.model()->rowCount(), 2);
    history.setNameFilter("pipeline");
    QVERIFY(history.jobs()->waitForIdle());
    QCOMPARE(history.model()->rowCount(), 1);
    QTest::qWait(1200);  // two of the history's data_version polls
    QCOMPARE(history.errorText(), QString());
  }

  void aViewOfAnUnreadableDatabaseSaysSo() {
    const std::string missing = dir_.path().toStdString();  // a directory, no database
    CompareView compare(missing, {1, 2});
    QVERIFY(compare.jobs()->waitForIdle());
    QVERIFY2(compare.errorText().contains("Cannot compare"), qPrintable(compare.errorText()));
    HistoryView history;
    history.setDatabase(missing);
    QVERIFY(history.jobs()->waitForIdle());
    QVERIFY2(history.errorText().contains("Cannot read the runs"), qPrintable(history.errorText()));
  }

  void staleResultsAreDroppedAndTheirJobsCancelled() {
    BackgroundJobs jobs;
    std::atomic<bool> release{false};
    std::atomic<bool> first_saw_cancel{false};
    QStringList delivered;
    jobs.run<QString>(
        "kind",
        [&](const JobToken& token) {
          while (!release.load()) QThread::msleep(1);
          first_saw_cancel = token.cancelled();
          return QString("first");
        },
        [&](QString text) { delivered << text; });
    const uint64_t second = jobs.run<QString>(
        "kind", [](const JobToken&) { return QString("second"); },
        [&](QString text) { delivered << text; });
    QCOMPARE(jobs.latestId("kind"), second);
    release = true;
    QVERIFY(jobs.waitForIdle());
    QCOMPARE(delivered, QStringList{"second"});
    QVERIFY(first_saw_cancel.load());
    // A job that throws reports its message, on this thread.
    QString failure;
    bool on_gui_thread = false;
    jobs.run<int>(
        "other", [](const JobToken&) -> int { throw std::runtime_error("no such run"); },
        [](int) {},
        [&](const QString& error) {
          failure = error;
          on_gui_thread = QThread::currentThread() == qApp->thread();
        });
    QSignalSpy idle(&jobs, &BackgroundJobs::idle);
    QVERIFY(idle.wait(10000));
    QCOMPARE(failure, QString("no such run"));
    QVERIFY(on_gui_thread);
    QVERIFY(!jobs.busy());
  }

 private:
  QTemporaryDir dir_;
  std::string db_;
  int64_t ddp_run_ = 0;
  int64_t pipeline_run_ = 0;
};

QTEST_MAIN(UiQueryThreadTest)
#include "ui_query_thread_test.moc"
