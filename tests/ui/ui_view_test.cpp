// The desktop application driven through its real widgets (offscreen), with real runs launched
// through `ringmaster run` into a real SQLite file: filling the job editor and launching a local
// 4-rank DDP run whose charts fill while it streams, validation messages next to bad fields, a
// past run opened in a fresh window, the pipeline view of a 4-stage 1F1B run, two runs compared,
// and a failed run showing its root cause.
#include <QAbstractItemModelTester>
#include <QApplication>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTest>
#include <csignal>

#include "db/database.h"
#include "main_window.h"
#include "models/comm_ops_model.h"
#include "models/rank_table_model.h"
#include "models/run_list_model.h"
#include "query/runs.h"
#include "query/summary.h"
#include "ui_test_support.h"
#include "views/compare_view.h"
#include "views/history_view.h"
#include "views/job_editor.h"
#include "views/pipeline_view.h"
#include "views/run_view.h"
#include "widgets/gantt_chart.h"
#include "widgets/heat_map.h"
#include "widgets/metric_chart.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

namespace {

constexpr int kRunTimeoutMs = 240000;  // a 4-rank run under the sanitizers on 2 cores

}  // namespace

class UiViewTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string db_;
  std::unique_ptr<MainWindow> window_;
  int64_t ddp_run_ = 0;

  MainWindow& window() {
    if (!window_) {
      window_ = std::make_unique<MainWindow>(
          MainWindowOptions{db_, ringmasterExecutable(), "ringmaster-ui-test"});
      window_->resize(1400, 900);
      window_->show();
      if (!QTest::qWaitForWindowExposed(window_.get())) qFatal("the window never showed");
    }
    return *window_;
  }

  // Launches through the window and waits for the run to end; its id.
  int64_t launchAndWait(const nlohmann::json& spec, int expected_exit) {
    QSignalSpy finished(&window(), &MainWindow::launchFinished);
    if (!window().launch(spec)) return 0;
    if (!finished.wait(kRunTimeoutMs)) return 0;
    if (finished.first().at(1).toInt() != expected_exit) {
      qWarning("exit code %d, expected %d", finished.first().at(1).toInt(), expected_exit);
      return 0;
    }
    return finished.first().at(0).toLongLong();
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db").toStdString();
    QSettings("ringmaster", "ringmaster-ui-test").clear();
  }

  void cleanupTestCase() {
    QTRY_COMPARE_WITH_TIMEOUT(window().activeLaunches(), 0, 30000);
    window_.reset();
  }

  void theEditorShowsTheParsersMessageNextToABadField() {
    JobEditor& editor = *window().jobEditor();
    editor.setDocument(exampleSpec("ddp_mlp", 40));
    QVERIFY(editor.spec().has_value());
    QVERIFY(editor.launchButton()->isEnabled());

    auto* steps = qobject_cast<QLineEdit*>(editor.field("train.steps"));
    QVERIFY(steps);
    steps->selectAll();
    QTest::keyClicks(steps, "-3");
    QVERIFY(!editor.spec().has_value());
    QVERIFY(!editor.launchButton()->isEnabled());
    QVERIFY2(editor.fieldError("train.steps").contains("-3"),
             qPrintable(editor.fieldError("train.steps")));
    QVERIFY2(editor.document()["train"]["steps"] == -3, "the form did not edit the document");
    auto* json = editor.findChild<QPlainTextEdit*>("specJson");
    QVERIFY(json->toPlainText().contains("\"steps\": -3"));

    auto* layers = qobject_cast<QLineEdit*>(editor.field("model.layers"));
    layers->selectAll();
    QTest::keyClicks(layers, "784, wide, 10");
    QVERIFY2(!editor.fieldError("model.layers").isEmpty(), "no message next to model.layers");

    // Fixing both in the JSON text fixes the form too.
    nlohmann::json fixed = exampleSpec("ddp_mlp", 40);
    fixed["train"]["steps"] = 25;
    json->setPlainText(QString::fromStdString(fixed.dump(2)));
    QVERIFY(editor.spec().has_value());
    QCOMPARE(steps->text(), QString("25"));
    QCOMPARE(layers->text(), QString("784, 256, 256, 10"));
    QVERIFY(editor.fieldError("train.steps").isEmpty());

    json->setPlainText("{ not json");
    QVERIFY(!editor.launchButton()->isEnabled());
    QVERIFY(editor.findChild<QLabel*>("jsonError")->text().startsWith("JSON:"));
  }

  void theEditorsHostsAndKindsEditTheSpec() {
    JobEditor& editor = *window().jobEditor();
    editor.setDocument(exampleSpec("ddp_mlp", 40));
    auto* hosts = editor.findChild<QTableWidget*>("hostsTable");
    QCOMPARE(hosts->rowCount(), 1);
    hosts->item(0, 0)->setText("gpu1");
    hosts->item(0, 2)->setText("alice");
    hosts->item(0, 5)->setCheckState(Qt::Checked);
    const nlohmann::json host = editor.document()["launch"]["hosts"][0];
    QVERIFY(host["host"] == "gpu1");
    QVERIFY(host["user"] == "alice");
    QVERIFY(host["password_auth"] == true);
    hosts->item(0, 1)->setText("0");
    QVERIFY2(editor.fieldError("launch.hosts").contains("ranks"),
             qPrintable(editor.fieldError("launch.hosts")));
    // Data from IDX files: the synthetic fields leave the spec, the file fields appear.
    auto* kind = qobject_cast<QComboBox*>(editor.field("data.kind"));
    kind->setCurrentText("idx");
    emit kind->activated(kind->currentIndex());
    QVERIFY(!editor.document()["data"].contains("samples"));
    QVERIFY(editor.field("data.images")->isVisibleTo(&editor));
    QVERIFY(!editor.field("data.samples")->isVisibleTo(&editor));
    // A checkpoint directory adds the section; clearing it removes the section.
    auto* dir = qobject_cast<QLineEdit*>(editor.field("checkpoint.dir"));
    QTest::keyClicks(dir, "ckpt");
    QVERIFY(editor.document()["checkpoint"]["dir"] == "ckpt");
    dir->selectAll();
    QTest::keyClick(dir, Qt::Key_Delete);
    QVERIFY(!editor.document().contains("checkpoint"));
  }

  void theEditorEstimatesMemoryAndPlansPipelines() {
    JobEditor& editor = *window().jobEditor();
    editor.setDocument(exampleSpec("ddp_mlp", 40));
    QVERIFY2(editor.memoryText().contains("optimizer state"), qPrintable(editor.memoryText()));
    QVERIFY(editor.plannedText().isEmpty());  // DDP has no schedule
    // Switch the strategy to a pipeline in the form: its options appear, DDP's go.
    auto* kind = qobject_cast<QComboBox*>(editor.field("strategy.kind"));
    kind->setCurrentText("pipeline");
    emit kind->activated(kind->currentIndex());
    QVERIFY(!editor.document()["strategy"].contains("bucket_cap_mb"));
    // Four stages need four Linear layers.
    auto* layers = qobject_cast<QLineEdit*>(editor.field("model.layers"));
    layers->selectAll();
    QTest::keyClicks(layers, "784, 512, 256, 128, 10");
    QVERIFY2(editor.fieldError("model.layers").isEmpty(),
             qPrintable(editor.fieldError("model.layers")));
    auto* micro = qobject_cast<QLineEdit*>(editor.field("train.micro_batches"));
    QVERIFY(micro->isVisibleTo(&editor));
    micro->selectAll();
    QTest::keyClicks(micro, "8");
    QVERIFY2(editor.spec().has_value(),
             editor.problems().empty() ? "" : editor.problems()[0].message.c_str());
    QCOMPARE(editor.plannedSchedule().data().bars.size(), size_t{4 * 8 * 2});
    QVERIFY2(editor.plannedText().contains("27.3%"), qPrintable(editor.plannedText()));  // 3/11
    QVERIFY(editor.memoryText().contains("activations"));
  }

  void launchingFromTheEditorStreamsALocalDdpRunIntoTheCharts() {
    MainWindow& w = window();
    QAbstractItemModelTester history_tester(w.history()->model(),
                                            QAbstractItemModelTester::FailureReportingMode::QtTest);
    w.jobEditor()->setDocument(exampleSpec("ddp_mlp", 150));
    QSignalSpy opened(&w, &MainWindow::runOpened);
    QSignalSpy finished(&w, &MainWindow::launchFinished);
    QTest::mouseClick(w.jobEditor()->launchButton(), Qt::LeftButton);
    QVERIFY2(opened.wait(60000), "the run's view never opened");
    ddp_run_ = opened.first().at(0).toLongLong();
    RunView* view = w.runView(ddp_run_);
    QVERIFY(view);
    QAbstractItemModelTester rank_tester(view->rankModel(),
                                         QAbstractItemModelTester::FailureReportingMode::QtTest);
    QAbstractItemModelTester comm_tester(view->commModel(),
                                         QAbstractItemModelTester::FailureReportingMode::QtTest);
    MetricChart* loss = view->chart("Loss");
    QVERIFY(loss);
    // Live: the loss chart has points for every rank while the run is still going.
    QTRY_VERIFY_WITH_TIMEOUT(loss->lineCount() == 4 && loss->pointCount() >= 4 * 5, kRunTimeoutMs);
    const qsizetype live_points = loss->pointCount();
    const bool seen_running = view->statusText() == "running";
    QVERIFY2(finished.wait(kRunTimeoutMs), "the run never ended");
    QCOMPARE(finished.first().at(1).toInt(), 0);
    QTRY_COMPARE_WITH_TIMEOUT(view->statusText(), QString("completed"), 10000);
    QTRY_VERIFY_WITH_TIMEOUT(loss->pointCount() == 4 * 150, 10000);  // one per step and rank
    QVERIFY2(seen_running || live_points < 4 * 150, "the chart only filled at the end");
    QCOMPARE(view->rankModel()->rowCount(), 4);
    for (int r = 0; r < 4; ++r) {
      QCOMPARE(view->rankModel()->index(r, RankTableModel::kLastStep).data().toLongLong(), 150);
      QVERIFY(!view->rankModel()->index(r, RankTableModel::kHost).data().toString().isEmpty());
    }
    QVERIFY(view->commModel()->rowCount() >= 1);
    QCOMPARE(view->commModel()->index(0, CommOpsModel::kOp).data().toString(),
             QString("all_reduce"));
    QCOMPARE(view->heatMap()->map().values.size(), size_t{4});
    // Two metrics over four ranks: a band per metric.
    QCOMPARE(view->chart("Step time")->lineCount(), 2);
    // The time per step in each collective (DDP: all_reduce every step, the broadcast at start).
    MetricChart* by_op = view->chart("Communication time by op");
    QVERIFY(by_op && by_op->lineCount() >= 1 && by_op->pointCount() >= 150);
    QVERIFY(view->rootCauseText().isEmpty());
    QVERIFY(!view->tabs()->isTabVisible(view->tabs()->indexOf(view->pipelineView())));
    // The band for large worlds, and one rank alone.
    view->showRanks(RunView::RankMode::kBand);
    QTRY_COMPARE_WITH_TIMEOUT(loss->lineCount(), 1, 10000);
    view->showRanks(RunView::RankMode::kOne, 2);
    QTRY_VERIFY_WITH_TIMEOUT(loss->lineCount() == 1 && loss->pointCount() == 150, 10000);
    // Export as PNG and SVG.
    const QStringList files = view->exportCharts(dir_.filePath("charts"));
    QCOMPARE(files.size(), static_cast<qsizetype>(view->charts().size() * 2));
    for (const QString& file : files) QVERIFY2(QFileInfo(file).size() > 1000, qPrintable(file));
    // The history lists it.
    QTRY_VERIFY_WITH_TIMEOUT(w.history()->model()->rowOfRun(ddp_run_) >= 0, 5000);
  }

  void aPastRunOpensInAFreshWindow() {
    QVERIFY(ddp_run_ > 0);
    MainWindow fresh({db_, ringmasterExecutable(), "ringmaster-ui-test"});
    fresh.resize(1200, 800);
    fresh.show();
    const int row = fresh.history()->model()->rowOfRun(ddp_run_);
    QVERIFY(row >= 0);
    QCOMPARE(fresh.history()->model()->index(row, RunListModel::kStatus).data().toString(),
             QString("completed"));
    emit fresh.history()->openRun(ddp_run_);
    RunView* view = fresh.runView(ddp_run_);
    QVERIFY(view);
    QTRY_VERIFY_WITH_TIMEOUT(view->snapshot() != nullptr, 10000);
    QCOMPARE(view->statusText(), QString("completed"));
    QTRY_COMPARE_WITH_TIMEOUT(view->chart("Loss")->pointCount(), 4 * 150, 10000);
    QVERIFY(view->logText().size() > 0 || view->snapshot()->logs.empty());
  }

  void thePipelineViewShowsTheMeasuredScheduleBesideThePlannedOne() {
    nlohmann::json spec = exampleSpec("pipeline_mlp", 6);
    const int64_t run = launchAndWait(spec, 0);
    QVERIFY2(run > 0, "the pipeline run did not complete");
    RunView* view = window().openRun(run);
    QTRY_VERIFY_WITH_TIMEOUT(view->snapshot() && view->snapshot()->run.status == "completed",
                             10000);
    PipelineView* pipeline = view->pipelineView();
    QVERIFY(view->tabs()->isTabVisible(view->tabs()->indexOf(pipeline)));
    view->tabs()->setCurrentWidget(pipeline);
    QVERIFY(pipeline->shownStep().has_value());
    const GanttData& measured = pipeline->measured().data();
    QCOMPARE(measured.rows, 4);
    QCOMPARE(measured.bars.size(), size_t{4 * 8 * 2});  // F and B of 8 micro-batches on 4 stages
    for (const GanttBar& bar : measured.bars) {
      QVERIFY(bar.end >= bar.start);
      QVERIFY(bar.micro_batch >= 0 && bar.micro_batch < 8);
    }
    QCOMPARE(pipeline->planned().data().bars.size(), size_t{4 * 8 * 2});
    QVERIFY2(pipeline->bubbleText().contains("measured bubble") &&
                 pipeline->bubbleText().contains("theoretical 27.3%"),
             qPrintable(pipeline->bubbleText()));
    for (double b : measured.row_bubble) QVERIFY(b >= 0 && b < 1);
  }

  void comparingTwoRunsShowsFiguresAndSpecDifferences() {
    nlohmann::json spec = exampleSpec("ddp_mlp", 40);
    spec["name"] = "ddp_small_batch";
    spec["train"]["batch_size"] = 32;
    const int64_t other = launchAndWait(spec, 0);
    QVERIFY2(other > 0 && ddp_run_ > 0, "runs missing");
    CompareView* view = window().compare({ddp_run_, other});
    QCOMPARE(view->summaryTable()->columnCount(), 2);
    QCOMPARE(view->lossChart()->lineCount(), 2);
    QVERIFY(view->lossChart()->pointCount() > 0);
    QCOMPARE(view->throughputChart()->lineCount(), 2);
    QVERIFY(view->throughputChart()->pointCount() > 0);
    QStringList paths;
    for (int r = 0; r < view->differencesTable()->rowCount(); ++r)
      paths << view->differencesTable()->verticalHeaderItem(r)->text();
    QVERIFY2(paths.contains("train.batch_size") && paths.contains("name") &&
                 paths.contains("train.steps"),
             qPrintable(paths.join(", ")));
    QVERIFY(!view->summaryTable()->item(4, 0)->text().isEmpty());  // samples/s
  }

  void killingTheWindowCancelsItsRunAndKeepsWhatArrived() {
    // The window in its own process, killed with SIGKILL mid-run: the run command it started
    // cancels cleanly (the kernel's parent-death signal), keeps every step that arrived, and no
    // agent or worker is left.
    QTemporaryDir scratch;
    const QString db = scratch.filePath("killed.db");
    QFile spec_file(scratch.filePath("long.json"));
    QVERIFY(spec_file.open(QIODevice::WriteOnly));
    spec_file.write(QByteArray::fromStdString(exampleSpec("ddp_mlp", 100000).dump()));
    spec_file.close();
    QProcess gui;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("QT_QPA_PLATFORM", "offscreen");
    gui.setProcessEnvironment(env);
    gui.start(ringmasterExecutable(), {"--db", db, "--launch", spec_file.fileName()});
    QVERIFY(gui.waitForStarted());
    auto stepsStored = [&]() -> int64_t {
      if (!QFile::exists(db)) return 0;
      storage::Database database(db.toStdString());
      const auto runs = storage::listRuns(database);
      return runs.empty() ? 0 : storage::summarizeRun(database, runs[0].id).final_step;
    };
    QTRY_VERIFY_WITH_TIMEOUT(stepsStored() >= 20, kRunTimeoutMs);
    ::kill(static_cast<pid_t>(gui.processId()), SIGKILL);
    QVERIFY(gui.waitForFinished(10000));
    const int64_t before = stepsStored();
    auto processesOfThisRun = [&] {
      QStringList found;
      for (const QString& pid : QDir("/proc").entryList(QDir::Dirs)) {
        QFile cmdline("/proc/" + pid + "/cmdline");
        if (!cmdline.open(QIODevice::ReadOnly)) continue;
        const QByteArray text = cmdline.readAll().replace('\0', ' ');
        if (text.contains(scratch.path().toUtf8()) &&
            pid.toInt() != QCoreApplication::applicationPid())
          found << pid + ": " + QString::fromUtf8(text);
      }
      return found;
    };
    QTRY_VERIFY_WITH_TIMEOUT(processesOfThisRun().isEmpty(), 60000);
    storage::Database database(db.toStdString());
    const auto runs = storage::listRuns(database);
    QCOMPARE(runs.size(), size_t{1});
    QCOMPARE(QString::fromStdString(runs[0].status), QString("cancelled"));
    QVERIFY2(stepsStored() >= before, "steps recorded before the kill were lost");
  }

  void aKilledRankShowsItsSignalAndWhatTheFlightRecorderSaw() {
    // A worker killed mid-run: the root cause names the rank and the signal, and the survivors'
    // flight-recorder dumps show which ranks did not reach the collective they were waiting in.
    MainWindow& w = window();
    QSignalSpy opened(&w, &MainWindow::runOpened);
    QSignalSpy finished(&w, &MainWindow::launchFinished);
    nlohmann::json spec = exampleSpec("ddp_mlp", 100000);
    spec["name"] = "killed_rank";
    QVERIFY(w.launch(spec));
    QVERIFY(opened.wait(60000));
    const int64_t run = opened.first().at(0).toLongLong();
    RunView* view = w.runView(run);
    QTRY_VERIFY_WITH_TIMEOUT(view->snapshot() && view->snapshot()->summary.final_step >= 5,
                             kRunTimeoutMs);
    // Rank 2's worker: its command line names this run's spec and RANK=2 is in its environment.
    const QString spec_path = QString("specs/run-%1.json").arg(run);
    pid_t victim = 0;
    for (const QString& pid : QDir("/proc").entryList(QDir::Dirs)) {
      QFile cmdline("/proc/" + pid + "/cmdline"), environ("/proc/" + pid + "/environ");
      if (!cmdline.open(QIODevice::ReadOnly) || !environ.open(QIODevice::ReadOnly)) continue;
      const QByteArray command = cmdline.readAll();
      if (!command.contains("worker") || !command.contains(spec_path.toUtf8())) continue;
      if (environ.readAll().split('\0').contains("RANK=2"))
        victim = static_cast<pid_t>(pid.toInt());
    }
    QVERIFY2(victim > 0, "rank 2's worker not found");
    QCOMPARE(::kill(victim, SIGKILL), 0);
    QVERIFY(finished.wait(kRunTimeoutMs));
    QCOMPARE(finished.first().at(1).toInt(), 1);
    QTRY_COMPARE_WITH_TIMEOUT(view->statusText(), QString("failed"), 10000);
    const QString cause = view->rootCauseText();
    QVERIFY2(cause.contains("rank 2") && cause.contains("SIGKILL"), qPrintable(cause));
    QVERIFY2(!view->snapshot()->dumps.empty(), "no flight-recorder dump reached the database");
    const QString recorder = view->flightRecorderText();
    qInfo("%s", qPrintable(recorder));
    QVERIFY2(recorder.contains("ranks that did not reach it") && !recorder.contains("it: none"),
             qPrintable(recorder));
  }

  void aFailedRunShowsItsRootCause() {
    nlohmann::json spec = exampleSpec("ddp_mlp", 20);
    spec["name"] = "missing_data";
    spec["data"] = {{"kind", "idx"},
                    {"images", dir_.filePath("no-such-images").toStdString()},
                    {"labels", dir_.filePath("no-such-labels").toStdString()}};
    const int64_t run = launchAndWait(spec, 1);
    QVERIFY2(run > 0, "the run did not fail as expected");
    RunView* view = window().openRun(run);
    QTRY_COMPARE_WITH_TIMEOUT(view->statusText(), QString("failed"), 10000);
    const QString cause = view->rootCauseText();
    QVERIFY2(cause.contains("Root cause") && cause.contains("no-such-images"), qPrintable(cause));
    QVERIFY2(cause.contains("rank "), qPrintable(cause));
    window().history()->setStatusFilter("failed");
    QTRY_VERIFY_WITH_TIMEOUT(window().history()->model()->rowOfRun(run) >= 0, 5000);
    QCOMPARE(window().history()->model()->rowOfRun(ddp_run_), -1);
    window().history()->setStatusFilter("");
  }
};

QTEST_MAIN(UiViewTest)
#include "ui_view_test.moc"
