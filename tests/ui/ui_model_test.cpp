// The GUI's models and drawing data without a run: the table models checked by
// QAbstractItemModelTester while their rows change, the planned pipeline schedule against the
// textbook bubble, the wait heat map and the chart's envelope keeping a spike through a
// million-point series. (The memory estimate's test moved with it: tests/engine/spec.)
#include <QAbstractItemModelTester>
#include <QApplication>
#include <QTableView>
#include <QTest>
#include <QTextDocument>
#include <limits>

#include "core/error.h"
#include "data/run_snapshot.h"
#include "data/schedule_gantt.h"
#include "db/database.h"
#include "db/statement.h"
#include "models/comm_ops_model.h"
#include "models/compare_models.h"
#include "models/flight_recorder_model.h"
#include "models/format.h"
#include "models/rank_table_model.h"
#include "models/run_list_model.h"
#include "recorder/recorder.h"
#include "views/table_copy.h"
#include "widgets/metric_chart.h"

using namespace ringmaster;
using namespace ringmaster::ui;

class UiModelTest : public QObject {
  Q_OBJECT

 private slots:
  void runListModelPassesTheModelTesterAsRunsComeAndGo() {
    RunListModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    storage::RunRecord a{.id = 3,
                         .name = "ddp_mlp",
                         .strategy = "ddp",
                         .world_size = 4,
                         .status = "running",
                         .created_at = 1.7e9,
                         .started_at = 1.7e9};
    storage::RunRecord b = a;
    b.id = 2;
    b.name = "pipe";
    b.status = "failed";
    b.error = "rank 2 failed: boom";
    model.setRuns({a, b});
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.index(1, RunListModel::kStatus).data().toString(), QString("failed"));
    // The root cause as a tooltip: rich text holding the escaped message (issue 16: never markup
    // from a worker).
    QTextDocument tooltip;
    tooltip.setHtml(model.index(1, 0).data(Qt::ToolTipRole).toString());
    QCOMPARE(tooltip.toPlainText(), QString("rank 2 failed: boom"));
    QCOMPARE(model.index(0, 0).data(RunListModel::kRunIdRole).toLongLong(), 3);
    a.status = "completed";
    a.ended_at = 1.7e9 + 65;
    model.setRuns({a, b});  // same rows: an update, not a reset
    QCOMPARE(model.index(0, RunListModel::kDuration).data().toString(), QString("1 min 05 s"));
    model.setRuns({b});
    QCOMPARE(model.rowCount(), 1);
    QCOMPARE(model.rowOfRun(2), 0);
    QCOMPARE(model.rowOfRun(3), -1);
    model.setRuns({});
    QCOMPARE(model.rowCount(), 0);
  }

  void rankTableFlagsTheStragglerAndShowsRanksNotHeardFromYet() {
    RankTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    // A running run of 3 ranks: rank 1 not heard from yet, rank 2 the straggler.
    RunSnapshot snapshot;
    storage::RunReport& report = snapshot.report;
    report.summary.run.world_size = 3;
    report.summary.run.status = "running";
    report.ranks.resize(3);
    for (int r = 0; r < 3; ++r) {
      report.ranks[static_cast<size_t>(r)].figures.rank = r;
      report.ranks[static_cast<size_t>(r)].comm.rank = r;
      report.ranks[static_cast<size_t>(r)].estimated_memory = 4 << 20;
    }
    report.ranks[0].record = storage::RankRecord{.rank = 0, .host = "gpu1", .device = "cpu"};
    report.ranks[2].record = storage::RankRecord{.rank = 2, .host = "gpu2", .device = "cpu"};
    report.ranks[0].figures = {.rank = 0,
                               .last_step = 40,
                               .samples_per_second = 1000,
                               .mean_step_ms = 10,
                               .peak_memory = 3 << 20,
                               .tokens_per_second = 64000,
                               .mfu = 0.4};
    report.ranks[1].comm = {.rank = 1, .mean_exposed_comm_ms = 2.5};
    report.ranks[2].comm = {.rank = 2,
                            .mean_exposed_comm_ms = 1.5,
                            .collectives_measured = 10,
                            .mean_wait_ms = 0.25,
                            .peers_mean_wait_ms = 40,
                            .straggler = true};
    model.setRows(rankRows(snapshot));
    QCOMPARE(model.rowCount(), 3);
    // The spec's estimate beside the measured peak, and how far off it was.
    QCOMPARE(model.index(0, RankTableModel::kEstimatedMemory).data().toString(),
             QString("4.00 MiB"));
    QCOMPARE(model.index(0, RankTableModel::kPeakMemory).data(Qt::ToolTipRole).toString(),
             QString("measured peak 3.00 MiB = 75% of the estimate 4.00 MiB "
                     "(spec/memory_estimate.h)"));
    QCOMPARE(model.index(0, RankTableModel::kHost).data().toString(), QString("gpu1"));
    QCOMPARE(model.index(0, RankTableModel::kLastStep).data().toLongLong(), 40);
    QCOMPARE(model.index(0, RankTableModel::kPeakMemory).data().toString(), QString("3.00 MiB"));
    QCOMPARE(model.index(1, RankTableModel::kStatus).data().toString(), QString("starting"));
    // Tokens/s and MFU where reported; a dash where not (no steps yet, or no known peak).
    QCOMPARE(model.index(0, RankTableModel::kTokensPerSecond).data().toString(), QString("64000"));
    QCOMPARE(model.index(0, RankTableModel::kMfu).data().toString(), QString("40.0%"));
    QCOMPARE(model.index(1, RankTableModel::kTokensPerSecond).data().toString(), QString("–"));
    QCOMPARE(model.index(1, RankTableModel::kMfu).data().toString(), QString("–"));
    QVERIFY(model.index(1, RankTableModel::kMfu)
                .data(Qt::ToolTipRole)
                .toString()
                .contains("train.peak_tflops"));
    QCOMPARE(model.index(2, RankTableModel::kStraggler).data().toString(), QString("straggler"));
    QVERIFY(model.index(2, RankTableModel::kStraggler).data(Qt::ForegroundRole).isValid());
    // The wait: measured per collective where it was (issue 21), else exposed communication.
    QCOMPARE(model.index(2, RankTableModel::kWait).data().toString(), formatMs(0.25));
    QCOMPARE(model.index(1, RankTableModel::kWait).data().toString(), formatMs(2.5));
    QVERIFY(model.index(2, RankTableModel::kStraggler)
                .data(Qt::ToolTipRole)
                .toString()
                .contains(QString("wait %1 per collective").arg(formatMs(40))));
    report.ranks.resize(2);
    model.setRows(rankRows(snapshot));
    QCOMPARE(model.rowCount(), 2);
  }

  void commOpsModelAndCsvCopy() {
    CommOpsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setStats({{.op = "all_reduce",
                     .bytes = 1 << 20,
                     .count = 400,
                     .p50_ms = 0.5,
                     .p99_ms = 2,
                     .wait_ms = 120,
                     .algbw_gbps = 2.1,
                     .busbw_gbps = 3.15},
                    {.op = "broadcast", .bytes = 64, .count = 4, .p50_ms = 2, .p99_ms = 2}});
    QCOMPARE(model.rowCount(), 2);
    QTableView table;
    table.setModel(&model);
    const QString csv = tableAsCsv(table);
    QVERIFY2(csv.startsWith("Op,Size,Count,p50 transfer,p99 transfer,algbw GB/s,busbw GB/s,wait\n"),
             qPrintable(csv));
    // The wait where measured (issue 21), a dash where not.
    QVERIFY2(csv.contains("all_reduce,1.00 MiB,400,0.500 ms,2.00 ms,2.10,3.15,120 ms\n"),
             qPrintable(csv));
    QVERIFY2(csv.endsWith(",–\n"), qPrintable(csv));  // the broadcast's, the last row
    table.selectRow(1);
    QCOMPARE(tableAsCsv(table).count('\n'), 2);  // header + the selected row
  }

  void formatting() {
    QCOMPARE(formatBytes(512), QString("512 B"));
    QCOMPARE(formatBytes(1536), QString("1.50 KiB"));
    QCOMPARE(formatBytes(300.0 * (1 << 20)), QString("300 MiB"));
    QCOMPARE(formatDuration(42), QString("42 s"));
    QCOMPARE(formatDuration(7800), QString("2 h 10 min"));
    QCOMPARE(formatMs(1500), QString("1.50 s"));
    QCOMPARE(formatFigure(0.12345), QString("0.123"));
    // Issue 16, finding 12: bounded whatever the value; no byte count or duration negative.
    QCOMPARE(formatBytes(18446744073709551615.0), QString("16.0 EiB"));
    QCOMPARE(formatBytes(-1), QString("–"));
    QCOMPARE(formatMs(-5), QString("–"));
    QCOMPARE(formatMs(1e308), QString("1e+305 s"));
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (double x :
         {0.0, -0.0, 1.0, -1.0, 1e15, 9.2e18, 1.8e19, 1e300, 1e308, -1e308, 1e-308, 5e-324, inf,
          -inf, nan, std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest()}) {
      for (const QString& text :
           {formatBytes(x), formatDuration(x), formatFigure(x), formatMs(x)}) {
        QVERIFY2(text.size() <= 14, qPrintable(QString("%1: %2").arg(x).arg(text)));
      }
      QVERIFY2(!formatBytes(x).startsWith('-'), qPrintable(formatBytes(x)));
      QVERIFY2(!formatMs(x).startsWith('-'), qPrintable(formatMs(x)));
      QVERIFY2(!formatDuration(x).startsWith('-'), qPrintable(formatDuration(x)));
    }
    // The heat map's step labels: the last step of a bucket never overflows.
    constexpr int64_t kLastStep = std::numeric_limits<int64_t>::max();
    QCOMPARE(WaitHeatMap{.bucket_width = 4}.lastStepOf(8), int64_t{11});
    QCOMPARE(WaitHeatMap{.bucket_width = kLastStep}.lastStepOf(5), kLastStep);
    QCOMPARE(WaitHeatMap{.bucket_width = 2}.lastStepOf(kLastStep), kLastStep);
  }

  // Issue 17: the comparison's and the flight recorder's tables are models over plain data.
  void compareAndFlightRecorderModelsPassTheModelTester() {
    CompareSummaryModel summary;
    QAbstractItemModelTester summary_tester(&summary,
                                            QAbstractItemModelTester::FailureReportingMode::QtTest);
    storage::RunSummary a, b;
    a.run = {.id = 3, .name = "a\x1b", .strategy = "ddp", .world_size = 2, .status = "completed"};
    a.samples_per_second = 1234;
    a.final_loss = 0.125;
    a.ranks.push_back({});
    a.ranks.back().peak_memory = 3 << 20;
    b.run = {.id = 4, .name = "b", .strategy = "fsdp", .world_size = 4, .status = "failed"};
    summary.setRuns({a, b});
    QCOMPARE(summary.columnCount(), 2);
    QCOMPARE(summary.rowCount(), int{CompareSummaryModel::kRowCount});
    QCOMPARE(summary.headerData(1, Qt::Horizontal, Qt::DisplayRole).toString(), QString("run 4"));
    QCOMPARE(summary.headerData(CompareSummaryModel::kPeakMemory, Qt::Vertical, Qt::DisplayRole)
                 .toString(),
             QString("peak memory"));  // its name in the table of figures (issue 33)
    QCOMPARE(summary.index(CompareSummaryModel::kName, 0).data().toString(), QString("a\\x1b"));
    QCOMPARE(summary.index(CompareSummaryModel::kSamplesPerSecond, 0).data().toString(),
             QString("1234"));
    QCOMPARE(summary.index(CompareSummaryModel::kPeakMemory, 0).data().toString(),
             QString("3.00 MiB"));
    QCOMPARE(summary.index(CompareSummaryModel::kFinalLoss, 1).data().toString(), QString("–"));
    summary.setRuns({});
    QCOMPARE(summary.columnCount(), 0);

    SpecDifferencesModel differences;
    QAbstractItemModelTester differences_tester(
        &differences, QAbstractItemModelTester::FailureReportingMode::QtTest);
    differences.setDifferences({3, 4}, {{"train.steps", {"10", "20"}}, {"name", {"a", "b"}}});
    QCOMPARE(differences.rowCount(), 2);
    QCOMPARE(differences.headerData(0, Qt::Vertical, Qt::DisplayRole).toString(),
             QString("train.steps"));
    QCOMPARE(differences.index(0, 1).data().toString(), QString("20"));
    differences.setDifferences({}, {});
    QCOMPARE(differences.rowCount(), 0);

    FlightRecorderModel recorder;
    QAbstractItemModelTester recorder_tester(
        &recorder, QAbstractItemModelTester::FailureReportingMode::QtTest);
    recorder.setRows({{0, "all_reduce #4", "", ""},
                      {1, "all_reduce #3", "all_reduce #4 (started)", "all_reduce #4"}});
    QCOMPARE(recorder.rowCount(), 2);
    QCOMPARE(recorder.index(1, FlightRecorderModel::kDidNotReach).data().toString(),
             QString("all_reduce #4"));
    QCOMPARE(recorder.index(1, FlightRecorderModel::kInFlight).data(Qt::ToolTipRole).toString(),
             QString("all_reduce #4 (started)"));
    recorder.setRows({});
    QCOMPARE(recorder.rowCount(), 0);
  }

  void plannedScheduleHasTheTextbookBubble() {
    const PlannedSchedule planned = plannedSchedule(PipelineSchedule::k1f1b, 4, 8, 1);
    QCOMPARE(planned.gantt.rows, 4);
    QCOMPARE(planned.gantt.bars.size(), size_t{4 * 8 * 2});
    QVERIFY(std::abs(planned.theoretical_bubble - 3.0 / 11.0) < 1e-12);
    QVERIFY(std::abs(planned.bubble_fraction - 3.0 / 11.0) < 1e-9);
    QVERIFY_THROWS_EXCEPTION(Error, plannedSchedule(PipelineSchedule::kInterleaved1f1b, 4, 6, 2));
    // The bars' time range, computed with the data (data/schedule_gantt), not by the widget.
    const auto [t0, t1] = barTimeRange(planned.gantt);
    QCOMPARE(t0, 0.0);
    for (const GanttBar& bar : planned.gantt.bars) QVERIFY(bar.end <= t1);
    QCOMPARE(barTimeRange(GanttData{}), std::make_pair(0.0, 0.0));
    QCOMPARE(QString(phaseName('B')), QString("backward"));
  }

  void aSpikeSurvivesAMillionPointsOnTheChart() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("runs.db").toStdString();
    {
      // Written at schema 1 with bare inserts (a million points through the recorder would
      // take most of this test's time); migration 2 then builds the rollups.
      storage::Database old(path, {.schema_version = 1});
      old.exec(
          "INSERT INTO runs (name, spec, strategy, world_size, status, created_at) "
          "VALUES ('long', '{\"train\": {\"steps\": 1000000}}', 'single', 1, 'completed', 1)");
      old.exec("INSERT INTO metrics (name) VALUES ('loss')");
      old.transaction([&] {
        storage::Statement insert(old, "INSERT INTO scalars VALUES (1, 1, 0, ?, ?, 0)");
        for (int64_t step = 1; step <= 1000000; ++step)
          insert.bind(1, step).bind(2, step == 777777 ? 50.0 : 1.0).run();
      });
    }
    storage::Database db(path);
    const int64_t run = 1;
    MetricChart chart("Loss", "loss");
    chart.resize(900, 400);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    SnapshotRequest request;
    request.charts.push_back({{"loss"}, {.buckets = chart.bucketsWanted()}, {0}});
    const RunSnapshot snapshot = loadRunSnapshot(db, run, request);
    const storage::Series& series = snapshot.charts.at(0).per_rank.at(0);
    QVERIFY(series.buckets.size() <= static_cast<size_t>(chart.bucketsWanted()));
    ChartLine line{"rank 0", Qt::blue, {}, {}, {}};
    double highest = 0;
    for (const auto& bucket : series.buckets) {
      line.centre.append({static_cast<double>(bucket.start), bucket.summary.mean()});
      line.low.append({static_cast<double>(bucket.start), bucket.summary.min});
      line.high.append({static_cast<double>(bucket.start), bucket.summary.max});
      highest = std::max(highest, bucket.summary.max);
    }
    chart.setLines({line});
    QCOMPARE(highest, 50.0);  // one point in a million, still on the envelope
    QCOMPARE(chart.lineCount(), 1);
    QCOMPARE(chart.pointCount(), static_cast<qsizetype>(series.buckets.size()));
  }
};

QTEST_MAIN(UiModelTest)
#include "ui_model_test.moc"
