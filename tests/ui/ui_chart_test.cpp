// The run view's charts on a run recorded by `ringmaster run` (2 local DDP ranks, 1200 steps,
// telemetry every step), driven through the mouse and their controls (issue 15, charts): a drag
// on one chart zooms every chart to that step range and each re-reads it at one step per point,
// the wheel zooms alike and a double-click shows every step again; hovering shows the stored
// value of the nearest step with its rank and wall time; smoothing is TensorBoard's EMA; the x
// axis can show seconds since the start; a log axis leaves out what it cannot show; the compare
// view's two charts zoom together.
#include <QApplication>
#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QLogValueAxis>
#include <QProcess>
#include <QRegularExpression>
#include <QTest>
#include <QValueAxis>
#include <QWheelEvent>

#include "data/background_jobs.h"
#include "db/database.h"
#include "db/statement.h"
#include "query/runs.h"
#include "ui_test_support.h"
#include "views/compare_view.h"
#include "views/run_view.h"
#include "widgets/metric_chart.h"
#include "widgets/smoothing.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

namespace {

constexpr int kRunTimeoutMs = 240000;
constexpr int64_t kSteps = 1200;

// A viewport position over `step` (at the plot's vertical middle).
QPoint positionOf(MetricChart* chart, double step) {
  const QRectF plot = chart->chart()->plotArea();
  const auto [from, to] = chart->xAxisRange();
  const QPointF in_chart(plot.left() + (step - from) / (to - from) * plot.width(),
                         plot.center().y());
  return chart->mapFromScene(chart->chart()->mapToScene(in_chart));
}

}  // namespace

class UiChartTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string db_;
  int64_t run_ = 0;
  std::unique_ptr<RunView> view_;

  // The charts with data, and their lines' points (x in steps).
  std::vector<MetricChart*> chartsWithData() const {
    std::vector<MetricChart*> charts;
    for (MetricChart* chart : view_->charts())
      if (chart->pointCount() > 0) charts.push_back(chart);
    return charts;
  }

  // Whether every chart with data shows exactly the steps [from, to], one point per step, on
  // every line (a band's point sits at its step's middle: step + 0.5).
  QString showsOnly(int64_t from, int64_t to) const {
    for (MetricChart* chart : chartsWithData()) {
      if (!chart->zoomed() || chart->zoomRange() != std::make_pair(from, to))
        return chart->title() + ": not zoomed to the range";
      for (const QString& name : chart->lineNames()) {
        const QList<QPointF> points = chart->linePoints(name);
        for (const QPointF& p : points)
          if (p.x() < static_cast<double>(from) || p.x() > static_cast<double>(to) + 0.5)
            return QString("%1 / %2: step %3 outside %4..%5")
                .arg(chart->title(), name)
                .arg(p.x())
                .arg(from)
                .arg(to);
        // The communication chart's ops that ran only before the range have no point in it.
        if (points.isEmpty()) continue;
        if (points.size() != to - from + 1)
          return QString("%1 / %2: %3 points, want %4")
              .arg(chart->title(), name)
              .arg(points.size())
              .arg(to - from + 1);
      }
    }
    return {};
  }

  // Points of a line inside [from, to].
  static qsizetype pointsIn(MetricChart* chart, const QString& name, double from, double to) {
    qsizetype n = 0;
    for (const QPointF& p : chart->linePoints(name)) n += p.x() >= from && p.x() <= to + 0.5;
    return n;
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db").toStdString();
    installGuiThreadQueryCheck();  // issue 17: the views read off the GUI thread
    nlohmann::json spec = exampleSpec("ddp_mlp", kSteps);
    spec["name"] = "chart_zoom";
    spec["model"]["layers"] = {16, 16, 10};
    spec["data"]["features"] = 16;
    spec["data"]["samples"] = 512;
    spec["train"]["batch_size"] = 8;
    spec["launch"]["hosts"][0]["ranks"] = 2;
    QFile file(dir_.filePath("spec.json"));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(QByteArray::fromStdString(spec.dump()));
    file.close();
    QProcess run;
    run.setProcessChannelMode(QProcess::MergedChannels);
    run.setWorkingDirectory(dir_.path());
    run.start(ringmasterExecutable(),
              {"--db", QString::fromStdString(db_), "run", file.fileName()});
    QVERIFY(run.waitForFinished(kRunTimeoutMs));
    QVERIFY2(run.exitCode() == 0, run.readAll().constData());
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    const auto runs = storage::listRuns(db);
    QCOMPARE(runs.size(), size_t{1});
    run_ = runs[0].id;

    view_ = std::make_unique<RunView>(db_, run_);
    view_->resize(1100, 800);
    view_->show();
    QVERIFY(QTest::qWaitForWindowExposed(view_.get()));
    MetricChart* loss = view_->chart("Loss");
    QTRY_VERIFY_WITH_TIMEOUT(loss->lineCount() == 2 && loss->pointCount() > 0, 20000);
    QTRY_VERIFY_WITH_TIMEOUT(chartsWithData().size() >= 4, 20000);
  }

  void cleanupTestCase() { view_.reset(); }

  void aDragZoomsEveryChartAndEachReReadsTheRangeFiner() {
    MetricChart* loss = view_->chart("Loss");
    // Whole run at one bucket per pixel: fewer points than steps, several steps per point.
    QVERIFY2(loss->bucketsWanted() < kSteps, "the chart is too wide for this run to bucket");
    for (MetricChart* chart : chartsWithData()) QVERIFY(!chart->zoomed());
    const QList<QPointF> whole = loss->linePoints("rank 0");
    QVERIFY2(whole.size() < kSteps && whole.size() > 50, qPrintable(QString::number(whole.size())));
    QVERIFY(whole.front().x() < 10 && whole.back().x() > kSteps - 10);
    std::map<std::pair<QString, QString>, qsizetype> before;
    for (MetricChart* chart : chartsWithData())
      for (const QString& name : chart->lineNames())
        before[{chart->title(), name}] = pointsIn(chart, name, 600, 700);

    // Drag over steps 600..700 of the step-time chart, as a user does.
    MetricChart* step_time = view_->findChild<MetricChart*>("Step_time");
    QWidget* viewport = step_time->viewport();
    const QPoint start = positionOf(step_time, 600), end = positionOf(step_time, 700);
    QTest::mousePress(viewport, Qt::LeftButton, {}, start);
    QTest::mouseMove(viewport, (start + end) / 2);
    QTest::mouseMove(viewport, end);
    QTest::mouseRelease(viewport, Qt::LeftButton, {}, end);
    QVERIFY2(step_time->zoomed(), "the drag did not zoom");
    const auto [from, to] = step_time->zoomRange();
    QVERIFY2(from >= 590 && from <= 610 && to >= 690 && to <= 710,
             qPrintable(QString("%1..%2").arg(from).arg(to)));
    // Every chart follows and re-reads [from, to]: one point per step on every line.
    QTRY_COMPARE_WITH_TIMEOUT(showsOnly(from, to), QString(), 20000);
    for (MetricChart* chart : chartsWithData()) {
      const auto [axis_from, axis_to] = chart->xAxisRange();
      QCOMPARE(axis_from, static_cast<double>(from));
      QCOMPARE(axis_to, static_cast<double>(to));
      for (const QString& name : chart->lineNames()) {
        const qsizetype finer = pointsIn(chart, name, 600, 700);
        if (finer == 0) continue;  // an op that ran only before the range
        QVERIFY2(finer > (before[{chart->title(), name}]),
                 qPrintable(chart->title() + " / " + name + " is no finer"));
      }
    }
    // The loss is the stored loss of each step.
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    storage::Statement select(
        db, "SELECT step, loss FROM steps WHERE run_id = ? AND rank = 1 AND step BETWEEN ? AND ?");
    select.bind(1, run_).bind(2, from).bind(3, to);
    const QList<QPointF> rank1 = loss->linePoints("rank 1");
    qsizetype i = 0;
    while (select.run()) {
      QCOMPARE(rank1.at(i).x(), static_cast<double>(select.columnInt(0)));
      QCOMPARE(rank1.at(i).y(), select.columnDouble(1));
      ++i;
    }
    QCOMPARE(i, rank1.size());
  }

  void hoverShowsTheNearestPointsStepRankValueAndWallTime() {
    MetricChart* loss = view_->chart("Loss");
    QVERIFY(loss->zoomed());
    const int64_t step = loss->zoomRange().first + 40;
    const QList<QPointF> rank0 = loss->linePoints("rank 0");
    const QPointF point = *std::find_if(rank0.begin(), rank0.end(), [&](const QPointF& p) {
      return p.x() == static_cast<double>(step);
    });
    // The mouse right on rank 0's point at that step.
    const QPointF in_chart = loss->chart()->mapToPosition(point, loss->chart()->series().last());
    const QPoint at = loss->mapFromScene(loss->chart()->mapToScene(in_chart));
    QTest::mouseMove(loss->viewport(), at);
    QString text = loss->hoverText();
    if (text.isEmpty()) text = loss->hoverAt(at);  // no mouse tracking offscreen
    QVERIFY2(text.contains(QString("step %1").arg(step)), qPrintable(text));
    const QRegularExpression rank_re("rank (\\d)");
    const auto rank_match = rank_re.match(text);
    QVERIFY2(rank_match.hasMatch(), qPrintable(text));
    const int rank = rank_match.captured(1).toInt();
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    storage::Statement select(db,
                              "SELECT loss, wall_time_s - (SELECT started_at FROM runs WHERE id = "
                              "?1) FROM steps WHERE run_id = ?1 AND rank = ?2 AND step = ?3");
    select.bind(1, run_).bind(2, rank).bind(3, step);
    QVERIFY(select.run());
    const double stored = select.columnDouble(0);
    const QRegularExpression value_re("\\n([0-9.]+) loss");
    const auto value = value_re.match(text);
    QVERIFY2(value.hasMatch(), qPrintable(text));
    QVERIFY2(std::abs(value.captured(1).toDouble() - stored) <= 0.01 * std::abs(stored),
             qPrintable(text + QString(" stored %1").arg(stored)));
    const QRegularExpression wall_re("([0-9.]+) s after the run started");
    const auto wall = wall_re.match(text);
    QVERIFY2(wall.hasMatch(), qPrintable(text));
    // Rank 0's clock: within a second of this rank's (both local).
    QVERIFY2(std::abs(wall.captured(1).toDouble() - select.columnDouble(1)) < 1.0,
             qPrintable(text + QString(" stored %1 s").arg(select.columnDouble(1))));
  }

  void smoothingIsTensorBoardsEmaOverTheShownPoints() {
    MetricChart* loss = view_->chart("Loss");
    auto* smoothing = view_->findChild<QDoubleSpinBox*>("chartSmoothing");
    QVERIFY(smoothing);
    smoothing->setValue(0.6);
    for (MetricChart* chart : view_->charts()) QCOMPARE(chart->smoothing(), 0.6);
    const QList<QPointF> raw = loss->linePoints("rank 0");
    const QList<QPointF> drawn = loss->drawnPoints("rank 0");
    QCOMPARE(drawn.size(), raw.size());
    std::vector<double> values;
    for (const QPointF& p : raw) values.push_back(p.y());
    const std::vector<double> expected = smoothEma(values, 0.6);
    bool differs = false;
    for (qsizetype i = 0; i < drawn.size(); ++i) {
      QCOMPARE(drawn[i].y(), expected[static_cast<size_t>(i)]);
      differs = differs || drawn[i].y() != raw[i].y();
    }
    QVERIFY2(differs, "the drawn line is the raw one");
    smoothing->setValue(0);
    QCOMPARE(loss->drawnPoints("rank 0"), raw);
  }

  void theWheelZoomsAllChartsAndADoubleClickShowsEveryStep() {
    MetricChart* memory = view_->chart("Allocator memory");
    const auto [from, to] = memory->zoomRange();
    const QPoint middle = positionOf(memory, (from + to) / 2.0);
    QWheelEvent wheel(middle, memory->viewport()->mapToGlobal(middle), QPoint(), QPoint(0, 120),
                      Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(memory->viewport(), &wheel);
    const auto zoomed = memory->zoomRange();
    QVERIFY2(zoomed.first > from && zoomed.second < to,
             qPrintable(QString("%1..%2").arg(zoomed.first).arg(zoomed.second)));
    QTRY_COMPARE_WITH_TIMEOUT(showsOnly(zoomed.first, zoomed.second), QString(), 20000);

    MetricChart* loss = view_->chart("Loss");
    QTest::mouseDClick(loss->viewport(), Qt::LeftButton, {}, positionOf(loss, zoomed.first + 5));
    for (MetricChart* chart : view_->charts()) QVERIFY(!chart->zoomed());
    QTRY_VERIFY_WITH_TIMEOUT(loss->linePoints("rank 0").size() < kSteps &&
                                 loss->linePoints("rank 0").back().x() > kSteps - 10,
                             20000);
    QVERIFY(loss->xAxisRange().first < 10 && loss->xAxisRange().second > kSteps - 10);
  }

  void theWallTimeAxisShowsSecondsSinceTheStart() {
    MetricChart* loss = view_->chart("Loss");
    auto* time_axis = view_->findChild<QCheckBox*>("chartTimeAxis");
    QVERIFY(time_axis);
    time_axis->setChecked(true);
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    storage::Statement select(db,
                              "SELECT min(wall_time_s) - (SELECT started_at FROM runs WHERE id = "
                              "?1), max(wall_time_s) - (SELECT started_at FROM runs WHERE id = "
                              "?1) FROM steps WHERE run_id = ?1 AND rank = 0");
    select.bind(1, run_);
    QVERIFY(select.run());
    const double first_second = select.columnDouble(0);
    const double last_second = select.columnDouble(1);
    QVERIFY(last_second > 0);
    const QList<QPointF> drawn = loss->drawnPoints("rank 0");
    QVERIFY(!drawn.isEmpty());
    for (qsizetype i = 1; i < drawn.size(); ++i) QVERIFY(drawn[i].x() >= drawn[i - 1].x());
    // The first point sits at its step's seconds since the start (a fast run's set-up can take
    // most of its short life, so no fraction of the last second bounds it).
    QVERIFY2(drawn.front().x() >= 0 &&
                 std::abs(drawn.front().x() - first_second) < 0.05 * last_second + 0.05,
             qPrintable(QString("%1 vs %2").arg(drawn.front().x()).arg(first_second)));
    QVERIFY2(std::abs(drawn.back().x() - last_second) < 0.05 * last_second + 0.05,
             qPrintable(QString("%1 vs %2").arg(drawn.back().x()).arg(last_second)));
    const auto [from, to] = loss->xAxisRange();
    QVERIFY(to <= last_second + 1);
    // Dragging on a time axis still zooms into steps.
    QWidget* viewport = loss->viewport();
    const QRectF plot = loss->chart()->plotArea();
    auto at = [&](double fraction) {
      return loss->mapFromScene(loss->chart()->mapToScene(
          QPointF(plot.left() + fraction * plot.width(), plot.center().y())));
    };
    QTest::mousePress(viewport, Qt::LeftButton, {}, at(0.4));
    QTest::mouseMove(viewport, at(0.5));
    QTest::mouseMove(viewport, at(0.6));
    QTest::mouseRelease(viewport, Qt::LeftButton, {}, at(0.6));
    QVERIFY(loss->zoomed());
    const auto [first, last] = loss->zoomRange();
    // The zoom holds the steps recorded in the dragged seconds, from the database: a loaded
    // machine runs its steps unevenly, so 40-60 % of the time need not be 40-60 % of the steps.
    // Each edge may sit up to 2 % of the axis either way: the mouse lands on whole pixels and the
    // chart's clock interpolates between the samples it loaded.
    const double axis_from = from, axis_span = to - from;
    storage::Statement step_at(db,
                               "SELECT min(step) FROM steps WHERE run_id = ?1 AND rank = 0 AND "
                               "wall_time_s - (SELECT started_at FROM runs WHERE id = ?1) >= ?2");
    auto firstStepFrom = [&](double fraction) {
      step_at.reset();
      step_at.bind(1, run_);
      step_at.bind(2, axis_from + fraction * axis_span);
      return step_at.run() && !step_at.isNull(0) ? step_at.columnInt(0) : kSteps;
    };
    const int64_t first_lo = firstStepFrom(0.38) - 1, first_hi = firstStepFrom(0.42);
    const int64_t last_lo = firstStepFrom(0.58) - 1, last_hi = firstStepFrom(0.62);
    step_at.reset();
    QVERIFY2(first >= first_lo && first <= first_hi && last >= last_lo && last <= last_hi &&
                 last > first,
             qPrintable(QString("%1..%2, the database's %3-%4..%5-%6")
                            .arg(first)
                            .arg(last)
                            .arg(first_lo)
                            .arg(first_hi)
                            .arg(last_lo)
                            .arg(last_hi)));
    QTRY_COMPARE_WITH_TIMEOUT(showsOnly(first, last), QString(), 20000);
    time_axis->setChecked(false);
    QCOMPARE(loss->xAxisRange().first, static_cast<double>(first));
    loss->resetZoom();
  }

  void theCompareViewsChartsZoomTogether() {
    CompareView compare(db_, {run_});
    compare.resize(1100, 800);
    compare.show();
    QVERIFY(QTest::qWaitForWindowExposed(&compare));
    compare.reload();  // at the shown size
    QVERIFY(compare.jobs()->waitForIdle());
    MetricChart* loss = compare.lossChart();
    MetricChart* throughput = compare.throughputChart();
    const QString name = loss->lineNames().at(0);
    QVERIFY(loss->linePoints(name).size() < kSteps);
    loss->zoomTo(300, 340);
    QVERIFY(compare.jobs()->waitForIdle());
    QVERIFY(throughput->zoomed());
    QCOMPARE(throughput->zoomRange(), std::make_pair(int64_t{300}, int64_t{340}));
    for (MetricChart* chart : {loss, throughput}) {
      const QList<QPointF> points = chart->linePoints(chart->lineNames().at(0));
      QCOMPARE(points.size(), 41);
      QVERIFY(points.front().x() >= 300 && points.back().x() <= 341);
    }
    throughput->resetZoom();
    QVERIFY(compare.jobs()->waitForIdle());
    QVERIFY(!loss->zoomed());
    QVERIFY(loss->linePoints(name).size() < kSteps && loss->linePoints(name).size() > 41);
  }

  void aLogAxisLeavesOutWhatItCannotShow() {
    MetricChart chart("Values", "ms");
    chart.resize(600, 400);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    ChartLine line{"rank 0", Qt::blue, {{1, 10}, {2, 0}, {3, 100}, {4, -5}, {5, 1000}}, {}, {}};
    chart.setLines({line});
    chart.setLogScale(true);
    QVERIFY(chart.logScaleShown());
    QVERIFY(qobject_cast<QLogValueAxis*>(chart.chart()->axes(Qt::Vertical).first()));
    QCOMPARE(chart.drawnPoints("rank 0"), (QList<QPointF>{{1, 10}, {3, 100}, {5, 1000}}));
    QVERIFY2(chart.chart()->title().contains("2 points ≤ 0"), qPrintable(chart.chart()->title()));
    auto* axis = static_cast<QLogValueAxis*>(chart.chart()->axes(Qt::Vertical).first());
    QVERIFY(axis->min() > 0 && axis->min() <= 10 && axis->max() >= 1000);
    // Nothing positive: the axis stays linear and says why; positive data brings it back.
    chart.setLines({ChartLine{"rank 0", Qt::blue, {{1, 0}, {2, -1}}, {}, {}}});
    QVERIFY(!chart.logScaleShown());
    QVERIFY(qobject_cast<QValueAxis*>(chart.chart()->axes(Qt::Vertical).first()));
    QVERIFY2(chart.chart()->title().contains("no positive value"),
             qPrintable(chart.chart()->title()));
    QCOMPARE(chart.drawnPoints("rank 0").size(), 2);
    chart.setLines({line});
    QVERIFY(chart.logScaleShown());
    chart.setLogScale(false);
    QCOMPARE(chart.drawnPoints("rank 0").size(), 5);
    QCOMPARE(chart.chart()->title(), QString("Values"));
  }

  void leavingAShortTimeAxisForManyStepsKeepsTheTicksFew() {
    // 100,000 steps in 0.01 s: at the time axis's interval the step range would be 10^7 ticks.
    MetricChart chart("Loss", "loss");
    chart.resize(600, 400);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    chart.setStepClock(StepClock({{0, 0}, {100000, 0.01}}));
    chart.setLines({ChartLine{"rank 0", Qt::blue, {{0, 1}, {100000, 2}}, {}, {}}});
    chart.setTimeAxis(true);
    auto* x = static_cast<QValueAxis*>(chart.chart()->axes(Qt::Horizontal).first());
    QVERIFY2(x->tickInterval() <= 0.01, qPrintable(QString::number(x->tickInterval())));
    chart.setTimeAxis(false);
    QCOMPARE(x->tickType(), QValueAxis::TicksDynamic);
    QVERIFY2((x->max() - x->min()) / x->tickInterval() <= 20,
             qPrintable(QString("%1 over %2").arg(x->max() - x->min()).arg(x->tickInterval())));
  }

  void anEnvelopeArrivesWhenBucketsGrowWider() {
    // A live run's first snapshot has a step per point (no envelope); later ones bucket.
    MetricChart chart("Loss", "loss");
    auto areas = [&] {
      int n = 0;
      for (QAbstractSeries* series : chart.chart()->series())
        n += series->type() == QAbstractSeries::SeriesTypeArea;
      return n;
    };
    chart.setLines({ChartLine{"rank 0", Qt::blue, {{1, 2}, {2, 1}}, {}, {}}});
    QCOMPARE(areas(), 0);
    chart.setLines({ChartLine{"rank 0", Qt::blue, {{2, 1.5}}, {{2, 1}}, {{2, 2}}, 2, "mean"}});
    QCOMPARE(areas(), 1);
    QCOMPARE(chart.lineCount(), 1);
  }

  void theRealLossOnALogAxis() {
    MetricChart* loss = view_->chart("Loss");
    loss->setLogScale(true);
    QVERIFY(loss->logScaleShown());  // a loss is positive
    QCOMPARE(loss->drawnPoints("rank 0").size(), loss->linePoints("rank 0").size());
    loss->setLogScale(false);
  }
};

QTEST_MAIN(UiChartTest)
#include "ui_chart_test.moc"
