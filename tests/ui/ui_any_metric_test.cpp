// Issue 33, any metric, on the desktop: runs recorded by `ringmaster run` (a 2-rank DDP MLP and a
// single-rank one), the first given metrics of its own (train/grad_norm, eval/acc,
// my_custom_thing: rows of the generic tables, as the recorder stores such names). The run view
// charts every metric the run recorded, the gradient norm among them, each of its own titled by
// its name in the group box of its prefix, a metric that arrives later included; Tokens/s only for
// a run with tokens and the loss scale only with loss scaling; the compare view overlays any
// metric of the runs, picked from the union of their names.
#include <QComboBox>
#include <QDir>
#include <QGroupBox>
#include <QProcess>
#include <QTableView>
#include <QTest>

#include "charts/chart_table.h"
#include "common/own_metric_rows.h"
#include "common/own_metrics_script.h"
#include "data/background_jobs.h"
#include "db/database.h"
#include "db/statement.h"
#include "models/rank_table_model.h"
#include "query/runs.h"
#include "ui_test_support.h"
#include "views/compare_view.h"
#include "views/run/charts_tab.h"
#include "views/run_view.h"
#include "widgets/metric_chart.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

namespace {

constexpr int kRunTimeoutMs = 240000;

// Ten points per rank, steps 1..10.
std::vector<std::pair<int64_t, double>> tenPoints(int rank) {
  std::vector<std::pair<int64_t, double>> points;
  for (int64_t step = 1; step <= 10; ++step) points.emplace_back(step, 1.0 / step + rank);
  return points;
}

}  // namespace

class UiAnyMetricTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string db_;
  int64_t ddp_run_ = 0, single_run_ = 0;

  int64_t record(const nlohmann::json& spec) {
    QFile file(dir_.filePath(QString::fromStdString(spec["name"].get<std::string>()) + ".json"));
    if (!file.open(QIODevice::WriteOnly)) return 0;
    file.write(QByteArray::fromStdString(spec.dump()));
    file.close();
    return recordFile(file.fileName());
  }

  int64_t recordFile(const QString& spec_path) {
    QProcess run;
    run.setProcessChannelMode(QProcess::MergedChannels);
    run.setWorkingDirectory(dir_.path());
    run.start(ringmasterExecutable(),
              {"--db", QString::fromStdString(db_), "run", spec_path, "-q"});
    if (!run.waitForFinished(kRunTimeoutMs) || run.exitCode() != 0) {
      qWarning("%s", run.readAll().constData());
      return 0;
    }
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    return storage::listRuns(db).front().id;
  }

  std::vector<std::string> metricsOf(int64_t run) const {
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    return storage::metricNames(db, run);
  }

  std::unique_ptr<RunView> openRun(int64_t run) {
    auto view = std::make_unique<RunView>(db_, run);
    view->resize(1100, 800);
    view->show();
    if (!QTest::qWaitForWindowExposed(view.get())) return nullptr;
    return view;
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db").toStdString();
    installGuiThreadQueryCheck();  // issue 17: the views read off the GUI thread
    nlohmann::json ddp = exampleSpec("ddp_mlp", 10);
    ddp["name"] = "ddp_any_metric";
    ddp["model"]["layers"] = {16, 16, 10};
    ddp["data"]["features"] = 16;
    ddp["data"]["samples"] = 128;
    ddp["train"]["batch_size"] = 8;
    ddp["launch"]["hosts"][0]["ranks"] = 2;
    ddp_run_ = record(ddp);
    QVERIFY2(ddp_run_ > 0, "the DDP run failed");
    nlohmann::json single = exampleSpec("single_mlp", 10);
    single["name"] = "single_any_metric";
    single_run_ = record(single);
    QVERIFY2(single_run_ > 0, "the single-rank run failed");
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    for (const std::string& name : ringmaster::testing::kOwnMetricNames)
      for (int rank = 0; rank < 2; ++rank)
        ringmaster::testing::writeOwnMetric(db, ddp_run_, name, rank, tenPoints(rank));
  }

  void everyMetricGetsAChartInThePanelOfItsPrefix() {
    std::unique_ptr<RunView> view = openRun(ddp_run_);
    QVERIFY(view);
    for (const std::string& name : ringmaster::testing::kOwnMetricNames) {
      const QString title = QString::fromStdString(name);
      // A line per rank, each of its ten points.
      QTRY_VERIFY2_WITH_TIMEOUT(view->chart(title) && view->chart(title)->pointCount() == 2 * 10,
                                qPrintable(title), 20000);
      QCOMPARE(view->chart(title)->lineCount(), 2);
    }
    // grad_norm, which the engine stored and no chart showed before issue 33.
    QTRY_VERIFY_WITH_TIMEOUT(view->chart("Gradient norm")->pointCount() == 2 * 10, 20000);
    // The charts are the chart table's for the run's metrics, in its order; no loss scale
    // (fp32), tokens/s (the engine counts an MLP's samples as its tokens).
    const std::vector<std::string> metrics = metricsOf(ddp_run_);
    QStringList expected, shown;
    for (const ChartSpec& chart : chartsFor({.metrics = metrics}))
      expected << QString::fromStdString(chart.title);
    for (MetricChart* chart : view->charts()) shown << chart->title();
    QCOMPARE(shown, expected);
    QVERIFY(view->chart("Loss scale") == nullptr);
    QVERIFY(view->chart("Tokens/s") != nullptr);
    // The panels: the default one ("Charts") first, then by prefix, each holding its charts.
    ChartsTab* tab = view->chartsTab();
    QCOMPARE(tab->panelsShown(), (std::vector<std::string>{"", "eval", "train"}));
    QCOMPARE(tab->panel("")->title(), QString("Charts"));
    QCOMPARE(tab->panel("train")->title(), QString("train"));
    QVERIFY(tab->panel("")->isAncestorOf(view->chart("Loss")));
    QVERIFY(tab->panel("")->isAncestorOf(view->chart("my_custom_thing")));
    QVERIFY(tab->panel("eval")->isAncestorOf(view->chart("eval/acc")));
    QVERIFY(tab->panel("train")->isAncestorOf(view->chart("train/grad_norm")));
    QVERIFY(tab->panel("train")->isVisible() && view->chart("train/grad_norm")->isVisible());
    if (const QString grabs = qEnvironmentVariable("RINGMASTER_UI_GRABS"); !grabs.isEmpty()) {
      view->resize(1440, 2200);  // every panel in one image
      QTest::qWait(300);
      QDir().mkpath(grabs);
      view->grab().save(QDir(grabs).filePath("run-panels.png"));
    }
    // Exported under names a file system takes: "train/grad_norm" is train_grad_norm.*.
    const QStringList files = tab->exportCharts(dir_.filePath("charts"), {"png"});
    QCOMPARE(files.size(), static_cast<qsizetype>(view->charts().size()));
    QVERIFY2(files.contains(dir_.filePath("charts/train_grad_norm.png")),
             qPrintable(files.join(", ")));

    // A metric that arrives later gets its chart, in a new panel, without reopening the view.
    {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      storage::Database db(db_);
      ringmaster::testing::writeOwnMetric(db, ddp_run_, "late/arrival", 0, tenPoints(0));
    }
    QTRY_VERIFY_WITH_TIMEOUT(
        view->chart("late/arrival") && view->chart("late/arrival")->pointCount() == 10, 20000);
    QCOMPARE(tab->panelsShown(), (std::vector<std::string>{"", "eval", "late", "train"}));
  }

  // Tokens/s only for a model with tokens: a run that recorded none (a script logging no tokens,
  // here the single-rank run with its token series taken out) has no Tokens/s chart or column.
  void tokensPerSecondOnlyForARunWithTokens() {
    {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      storage::Database db(db_);
      storage::Statement(db,
                         "UPDATE step_rollups SET tokens_n = NULL, tokens_per_s_n = NULL "
                         "WHERE run_id = ?")
          .bind(1, single_run_)
          .run();
      storage::Statement(db, "UPDATE steps SET tokens = NULL, tokens_per_s = NULL WHERE run_id = ?")
          .bind(1, single_run_)
          .run();
    }
    for (const auto& [run, has_tokens] : {std::pair{single_run_, false}, {ddp_run_, true}}) {
      std::unique_ptr<RunView> view = openRun(run);
      QVERIFY(view);
      QTRY_VERIFY_WITH_TIMEOUT(view->snapshot() && view->chart("Loss")->pointCount() > 0, 20000);
      QCOMPARE(view->chart("Tokens/s") != nullptr, has_tokens);
      QCOMPARE(view->rankTable()->isColumnHidden(RankTableModel::kTokensPerSecond), !has_tokens);
    }
  }

  void compareOverlaysAnyMetricOfTheRuns() {
    CompareView view(db_, {ddp_run_, single_run_});
    view.resize(1400, 900);
    view.show();
    QVERIFY(view.jobs()->waitForIdle());
    QStringList offered;
    for (int i = 0; i < view.metricChoice()->count(); ++i)
      offered << view.metricChoice()->itemData(i).toString();
    // The union of both runs' metrics: the DDP run's own ones too, the wall time not.
    for (const char* metric :
         {"loss", "grad_norm", "train/grad_norm", "eval/acc", "my_custom_thing"})
      QVERIFY2(offered.contains(metric), qPrintable(offered.join(", ")));
    QVERIFY(!offered.contains("wall_time_s"));
    // The gradient norm by default, one line per run (the single-rank run reports none).
    const QString ddp_line = QString("run %1 ddp_any_metric").arg(ddp_run_);
    const QString single_line = QString("run %1 single_any_metric").arg(single_run_);
    QCOMPARE(view.metricChoice()->currentData().toString(), QString("grad_norm"));
    QCOMPARE(view.metricChart()->lineCount(), 2);
    QCOMPARE(view.metricChart()->linePoints(ddp_line).size(), 10);
    // Picked in the list: a metric only the DDP run has.
    const int index = view.metricChoice()->findData("eval/acc");
    QVERIFY(index >= 0);
    view.metricChoice()->setCurrentIndex(index);
    emit view.metricChoice()->activated(index);
    QVERIFY(view.jobs()->waitForIdle());
    QCOMPARE(view.metricChoice()->currentData().toString(), QString("eval/acc"));
    QVERIFY2(view.metricChart()->shownTitle().contains("eval/acc"),
             qPrintable(view.metricChart()->shownTitle()));
    QCOMPARE(view.metricChart()->linePoints(ddp_line).size(), 10);
    QVERIFY(view.metricChart()->linePoints(single_line).isEmpty());
    // And one both have.
    const int loss = view.metricChoice()->findData("loss");
    view.metricChoice()->setCurrentIndex(loss);
    emit view.metricChoice()->activated(loss);
    QVERIFY(view.jobs()->waitForIdle());
    QCOMPARE(view.metricChart()->linePoints(ddp_line).size(), 10);
    QCOMPARE(view.metricChart()->linePoints(single_line).size(), 10);
  }

  // The whole path, no row written by the test: a real program job on 2 ranks whose script calls
  // ringmaster.log(step, **metrics) with names of its own gets a chart for each, in the panel of
  // its prefix, and the compare view overlays them.
  void aScriptsOwnMetricsAreChartedFromARealRun() {
    constexpr int kSteps = 6;
    const int64_t own_run =
        recordFile(QString::fromStdString(ringmaster::testing::writeOwnMetricsJob(
            dir_.path().toStdString(), "own_metrics", 2, kSteps)));
    QVERIFY2(own_run > 0, "the program job failed");
    std::unique_ptr<RunView> view = openRun(own_run);
    QVERIFY(view);
    for (const std::string& name : ringmaster::testing::kOwnMetricNames) {
      const QString title = QString::fromStdString(name);
      QTRY_VERIFY2_WITH_TIMEOUT(
          view->chart(title) && view->chart(title)->pointCount() == 2 * kSteps, qPrintable(title),
          20000);
      QCOMPARE(view->chart(title)->lineCount(), 2);
    }
    QCOMPARE(view->chartsTab()->panelsShown(), (std::vector<std::string>{"", "eval", "train"}));
    QVERIFY(view->chartsTab()->panel("train")->isAncestorOf(view->chart("train/grad_norm")));

    CompareView compare(db_, {ddp_run_, own_run});
    compare.resize(1400, 900);
    compare.show();
    QVERIFY(compare.jobs()->waitForIdle());
    const int index = compare.metricChoice()->findData("my_custom_thing");
    QVERIFY(index >= 0);
    compare.metricChoice()->setCurrentIndex(index);
    emit compare.metricChoice()->activated(index);
    QVERIFY(compare.jobs()->waitForIdle());
    const QString own_line = QString("run %1 own_metrics").arg(own_run);
    QCOMPARE(compare.metricChart()->linePoints(own_line).size(), kSteps);
    QCOMPARE(
        compare.metricChart()->linePoints(QString("run %1 ddp_any_metric").arg(ddp_run_)).size(),
        10);
  }
};

QTEST_MAIN(UiAnyMetricTest)
#include "ui_any_metric_test.moc"
