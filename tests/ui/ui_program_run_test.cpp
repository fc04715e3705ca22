// A program job in the run view (issue 19): the shipped PyTorch DDP example
// (resources/examples/torch_ddp.py, Gloo, 4 local ranks) recorded by `ringmaster run` through the
// node agent, reporting with the `ringmaster` Python package, then opened in a RunView: its loss,
// step time and communication charts have every rank's points, its communication table and heat
// map every rank's operations (as many as the database holds), its header names the script and
// counts the steps against program.steps, and nothing estimates a model the spec does not
// describe. Skipped, saying why, where the interpreter cannot import torch.
#include <QFileInfo>
#include <QLabel>
#include <QProcess>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <map>

#include "common/test_paths.h"
#include "data/background_jobs.h"
#include "db/database.h"
#include "db/statement.h"
#include "models/comm_ops_model.h"
#include "models/rank_table_model.h"
#include "query/runs.h"
#include "ui_test_support.h"
#include "views/pipeline_view.h"
#include "views/run_view.h"
#include "widgets/heat_map.h"
#include "widgets/metric_chart.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

namespace {

constexpr int kRanks = 4;
constexpr int kSteps = 12;
const QString kScript =
    QString::fromUtf8(ringmaster::testSourceDir()) + "/resources/examples/torch_ddp.py";

// What the database holds for a run, per rank, read on the test's own thread.
struct Stored {
  std::map<int, int64_t> steps, comm_events;
  int64_t comm_total = 0;
  std::map<std::string, int64_t> comm_by_op;  // all ranks
};

Stored readStored(const std::string& db_path, int64_t run_id) {
  storage::AllowQueriesOnThisThread the_tests_own_queries;
  storage::Database db(db_path);
  Stored stored;
  storage::Statement steps(db, "SELECT rank, count(*) FROM steps WHERE run_id = ? GROUP BY rank");
  steps.bind(1, run_id);
  while (steps.run()) stored.steps[static_cast<int>(steps.columnInt(0))] = steps.columnInt(1);
  storage::Statement comm(db,
                          "SELECT rank, op, count(*) FROM comm_events WHERE run_id = ? "
                          "GROUP BY rank, op");
  comm.bind(1, run_id);
  while (comm.run()) {
    stored.comm_events[static_cast<int>(comm.columnInt(0))] += comm.columnInt(2);
    stored.comm_by_op[comm.columnText(1)] += comm.columnInt(2);
    stored.comm_total += comm.columnInt(2);
  }
  return stored;
}

}  // namespace

class UiProgramRunTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string db_;
  int64_t run_ = 0;

 private slots:
  void initTestCase() {
    QProcess probe;
    probe.start(RINGMASTER_PYTHON_TORCH, {"-c", "import torch.distributed"});
    if (!probe.waitForFinished(60000) || probe.exitStatus() != QProcess::NormalExit ||
        probe.exitCode() != 0)
      QSKIP(RINGMASTER_PYTHON_TORCH
            " cannot import torch.distributed (Debian: python3-torch): "
            "no PyTorch script to run");
    installGuiThreadQueryCheck();  // issue 17: the view reads off the GUI thread
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db").toStdString();
    const nlohmann::json spec = {
        {"name", "torch-ddp"},
        {"program",
         {{"python", RINGMASTER_PYTHON_TORCH},
          {"script", kScript.toStdString()},
          // A smaller model than the example's default: the test is about what is shown.
          {"args", {"--steps", std::to_string(kSteps), "--width", "64"}},
          {"steps", kSteps}}},
        {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", kRanks}}}}, {"timeout_s", 120}}}};
    QFile file(dir_.filePath("spec.json"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(QByteArray::fromStdString(spec.dump()));
    file.close();
    QProcess run;
    run.setProcessChannelMode(QProcess::MergedChannels);
    run.start(ringmasterExecutable(),
              {"--db", QString::fromStdString(db_), "run", file.fileName(), "-q"});
    QVERIFY(run.waitForFinished(240000));
    QVERIFY2(run.exitStatus() == QProcess::NormalExit && run.exitCode() == 0,
             run.readAll().constData());
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    run_ = storage::listRuns(db).at(0).id;
  }

  void theRunViewShowsEveryRanksStepsAndCommunication() {
    const Stored stored = readStored(db_, run_);
    // What the script sent and the recorder kept: a step event per step and rank, and each rank's
    // collectives (DDP's gradient buckets at least, all-reduced every step).
    QCOMPARE(stored.steps.size(), size_t{kRanks});
    QCOMPARE(stored.comm_events.size(), size_t{kRanks});
    for (int r = 0; r < kRanks; ++r) {
      QCOMPARE(stored.steps.at(r), int64_t{kSteps});
      QVERIFY2(stored.comm_events.at(r) >= kSteps,
               qPrintable(QString("rank %1: %2 comm events").arg(r).arg(stored.comm_events.at(r))));
      // DDP: every rank makes the same collectives.
      QCOMPARE(stored.comm_events.at(r), stored.comm_events.at(0));
    }
    QVERIFY(stored.comm_by_op.count("all_reduce") == 1);

    RunView view(db_, run_);
    view.resize(1200, 900);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_COMPARE_WITH_TIMEOUT(view.statusText(), QString("completed"), 20000);
    // The header: the script, and the steps against program.steps.
    QTRY_COMPARE_WITH_TIMEOUT(view.progressText(), QString("step %1 / %1").arg(kSteps), 20000);
    auto* title = view.findChild<QLabel*>("runTitle");
    const QString script = QFileInfo(kScript).fileName();
    QVERIFY2(title->text().contains("script " + script) && title->text().contains(" · ddp · ") &&
                 title->text().contains("4 ranks"),
             qPrintable(title->text()));
    QVERIFY2(title->toolTip().contains(QString("%1 --steps %2").arg(kScript).arg(kSteps)),
             qPrintable(title->toolTip()));
    QVERIFY2(view.figuresText().contains("loss ") && view.figuresText().contains("samples/s"),
             qPrintable(view.figuresText()));
    QVERIFY(view.rootCauseText().isEmpty());
    QVERIFY(!view.tabs()->isTabVisible(view.tabs()->indexOf(view.pipelineView())));

    // Every rank's line: the loss a point per step and rank, the step time's bands, the time in
    // each collective.
    MetricChart* loss = view.chart("Loss");
    MetricChart* step_time = view.chart("Step time");
    MetricChart* by_op = view.chart("Communication time by op");
    QVERIFY(loss && step_time && by_op);
    QTRY_VERIFY_WITH_TIMEOUT(loss->lineCount() == kRanks && loss->pointCount() == kRanks * kSteps,
                             20000);
    QCOMPARE(step_time->lineCount(), 3);  // the step, its compute and its exposed communication
    QVERIFY(step_time->pointCount() >= 3 * kSteps);
    QVERIFY2(by_op->lineCount() >= 1 && by_op->pointCount() >= kSteps,
             qPrintable(
                 QString("%1 lines, %2 points").arg(by_op->lineCount()).arg(by_op->pointCount())));
    for (int r = 0; r < kRanks; ++r) {
      view.showRanks(RunView::RankMode::kOne, r);
      QTRY_VERIFY2_WITH_TIMEOUT(loss->lineCount() == 1 && loss->pointCount() == kSteps,
                                qPrintable(QString("rank %1's loss").arg(r)), 20000);
      QTRY_VERIFY2_WITH_TIMEOUT(step_time->pointCount() >= kSteps,
                                qPrintable(QString("rank %1's step time").arg(r)), 20000);
      QTRY_VERIFY2_WITH_TIMEOUT(by_op->lineCount() >= 1 && by_op->pointCount() >= kSteps,
                                qPrintable(QString("rank %1's communication").arg(r)), 20000);
    }

    // The rank table: every rank at the last step, no estimate column (the spec describes no
    // model).
    RankTableModel& ranks = *view.rankModel();
    QCOMPARE(ranks.rowCount(), kRanks);
    for (int r = 0; r < kRanks; ++r) {
      QCOMPARE(ranks.index(r, RankTableModel::kLastStep).data().toLongLong(), int64_t{kSteps});
      QCOMPARE(ranks.index(r, RankTableModel::kStatus).data().toString(), QString("completed"));
      QCOMPARE(ranks.index(r, RankTableModel::kEstimatedMemory).data().toString(), QString("–"));
    }
    QVERIFY(view.rankTable()->isColumnHidden(RankTableModel::kEstimatedMemory));
    QVERIFY(!view.rankTable()->isColumnHidden(RankTableModel::kPeakMemory));

    // The communication table holds every operation every rank stored, by op and size; the heat
    // map a row per rank, each with its exposed communication.
    const CommOpsModel& comm = *view.commModel();
    QVERIFY(comm.rowCount() >= 1);
    int64_t listed = 0;
    std::map<std::string, int64_t> listed_by_op;
    for (int row = 0; row < comm.rowCount(); ++row) {
      const int64_t count = comm.index(row, CommOpsModel::kCount).data().toLongLong();
      listed += count;
      listed_by_op[comm.index(row, CommOpsModel::kOp).data().toString().toStdString()] += count;
    }
    QCOMPARE(listed, stored.comm_total);
    QVERIFY(listed_by_op == stored.comm_by_op);
    const WaitHeatMap& map = view.heatMap()->map();
    QCOMPARE(map.values.size(), size_t{kRanks});
    for (int r = 0; r < kRanks; ++r) {
      bool any = false;
      for (const std::optional<double>& value : map.values[static_cast<size_t>(r)])
        any = any || value.has_value();
      QVERIFY2(any, qPrintable(QString("rank %1 has no exposed communication").arg(r)));
    }
  }
};

QTEST_MAIN(UiProgramRunTest)
#include "ui_program_run_test.moc"
