// Issue 37 on the desktop: the sweep view (the members' table, "rank by" and the best run, the
// parallel coordinates, the scatter), the sweep list and "Open sweep" from the run list, on a real
// sweep: `ringmaster sweep` of the DDP example on 2 ranks over optimizer.lr {0.01, 0.001} x
// train.batch_size {16, 64, 0}: the 2 x 2 grid's 4 runs, and 2 members whose batch size 0 the
// spec check refused. And a running sweep whose members change under the open view. Every view
// reads off the GUI thread.
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QFile>
#include <QHeaderView>
#include <QMenu>
#include <QProcess>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTest>
#include <algorithm>
#include <map>

#include "data/background_jobs.h"
#include "db/database.h"
#include "main_window.h"
#include "models/format.h"
#include "models/run_list_model.h"
#include "models/sweep_models.h"
#include "query/run_report.h"
#include "query/sweeps.h"
#include "recorder/sweep_records.h"
#include "ui_test_support.h"
#include "views/history_view.h"
#include "views/sweep_list.h"
#include "views/sweep_view.h"
#include "widgets/parallel_coordinates.h"
#include "widgets/scatter_chart.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;
using nlohmann::json;

namespace {

// The grid in plan order: the learning rate outer, the batch size inner.
const std::vector<double> kLearningRates = {0.01, 0.001};
const std::vector<int> kBatchSizes = {16, 64, 0};

struct Member {
  int position = 0;
  double lr = 0;
  int batch_size = 0;
  std::optional<int64_t> run;  // none: refused
};

QString ddpExample() {
  return QString::fromUtf8(testSourceDir()) + "/resources/examples/ddp_mlp.json";
}

// Where `value` lies on an axis of these values as the charts place numbers: the range padded by
// 8 % each side, 0 at the bottom.
double paddedFraction(double value, const std::vector<double>& values) {
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  const double pad = (*hi - *lo) * 0.08;
  return (value - (*lo - pad)) / ((*hi - *lo) + 2 * pad);
}

}  // namespace

class UiSweepViewTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    installGuiThreadQueryCheck();
    QVERIFY(dir_.isValid());
    db_path_ = dir_.filePath("runs.db").toStdString();
    runSweep();
    if (QTest::currentTestFailed()) return;
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_path_);
    const std::vector<storage::SweepRecord> sweeps = storage::listSweeps(db);
    QCOMPARE(sweeps.size(), size_t{1});
    sweep_id_ = sweeps.front().id;
    QCOMPARE(sweeps.front().status, std::string("completed"));
    QCOMPARE(sweeps.front().members.size(), kLearningRates.size() * kBatchSizes.size());
    for (const storage::SweepMember& recorded : sweeps.front().members) {
      const json values = json::parse(recorded.overrides_json);
      Member member{.position = recorded.position,
                    .lr = values.at("optimizer.lr").get<double>(),
                    .batch_size = values.at("train.batch_size").get<int>(),
                    .run = recorded.run_id};
      // The grid in plan order, the first axis turning slowest; batch size 0 refused by the spec
      // check before a run existed.
      QCOMPARE(member.lr, kLearningRates[size_t(member.position) / kBatchSizes.size()]);
      QCOMPARE(member.batch_size, kBatchSizes[size_t(member.position) % kBatchSizes.size()]);
      QCOMPARE(member.run.has_value(), member.batch_size > 0);
      QCOMPARE(recorded.state, std::string(member.run ? "started" : "refused"));
      if (member.run)
        reports_[*member.run] = storage::toJson(storage::buildRunReport(db, *member.run, 0));
      members_.push_back(member);
    }
  }

  // The table: a row per member with its position, each swept field's value, its state, run and
  // run status, the run figures as the table of figures names and formats them, and a refused
  // member's error; sorting by a figure puts the members without one last, either way.
  void theTableShowsEveryMemberWithItsValuesAndFigures() {
    SweepView view(db_path_, sweep_id_);
    QAbstractItemModelTester tester(view.model(),
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    view.resize(1300, 800);
    view.show();
    QTRY_COMPARE_WITH_TIMEOUT(view.model()->rowCount(), int(members_.size()), 30000);
    SweepMembersModel& model = *view.model();
    const auto cell = [&](int row, const QString& key) {
      const int column = model.columnOf(key);
      return column < 0 ? QString("(no column %1)").arg(key)
                        : model.index(row, column).data().toString();
    };
    for (const QString key :
         {"position", "optimizer.lr", "train.batch_size", "state", "run", "status", "final_loss",
          "samples_per_second", "mean_step_ms", "peak_memory", "error"})
      QVERIFY2(model.columnOf(key) >= 0, qPrintable(key));
    // The ranking figure leads the figures.
    QCOMPARE(model.columnOf("final_loss"), model.columnOf("status") + 1);
    QCOMPARE(model.headerData(model.columnOf("samples_per_second"), Qt::Horizontal, Qt::DisplayRole)
                 .toString(),
             figureHeading("samples_per_second"));
    for (const Member& member : members_) {
      const int row = model.rowOfPosition(member.position);
      QVERIFY(row >= 0);
      QCOMPARE(cell(row, "optimizer.lr"), QString::fromStdString(json(member.lr).dump()));
      QCOMPARE(cell(row, "train.batch_size"), QString::number(member.batch_size));
      QCOMPARE(cell(row, "position"), QString::number(member.position + 1));  // as the CLI counts
      if (member.run) {
        const json& report = reports_.at(*member.run);
        QCOMPARE(cell(row, "state"), QString("started"));
        QCOMPARE(cell(row, "run"), QString::number(*member.run));
        QCOMPARE(cell(row, "status"), QString("completed"));
        QCOMPARE(cell(row, "final_loss"),
                 formatFigureValue("final_loss", report["final_loss"].get<double>()));
        QCOMPARE(
            cell(row, "samples_per_second"),
            formatFigureValue("samples_per_second", report["samples_per_second"].get<double>()));
        QCOMPARE(cell(row, "final_step"), QString::number(report["final_step"].get<int64_t>()));
        QCOMPARE(cell(row, "error"), QString("–"));
      } else {
        QCOMPARE(cell(row, "state"), QString("refused"));
        QCOMPARE(cell(row, "run"), QString("–"));
        QCOMPARE(cell(row, "final_loss"), QString("–"));
        QVERIFY2(cell(row, "error").contains("train.batch_size"), qPrintable(cell(row, "error")));
        QVERIFY(model.index(row, model.columnOf("state"))
                    .data(Qt::ToolTipRole)
                    .toString()
                    .contains("train.batch_size"));
      }
    }
    // Sorted by the final loss from the header, both ways: the runs in order of their loss, the
    // refused members last.
    for (const Qt::SortOrder order : {Qt::AscendingOrder, Qt::DescendingOrder}) {
      view.table()->horizontalHeader()->setSortIndicator(model.columnOf("final_loss"), order);
      std::vector<double> losses;
      for (int row = 0; row < model.rowCount(); ++row) {
        if (const std::optional<int64_t> run = model.runAt(row))
          losses.push_back(reports_.at(*run)["final_loss"].get<double>());
        else
          QVERIFY2(row >= 4, "a refused member sorted before a run");
      }
      QCOMPARE(losses.size(), size_t{4});
      QVERIFY(order == Qt::AscendingOrder ? std::is_sorted(losses.begin(), losses.end())
                                          : std::is_sorted(losses.rbegin(), losses.rend()));
    }
  }

  // One polyline per run over the two swept fields and the figure, each vertex where the run's
  // value lies on that axis; the refused members (no run) have none; hover names the run; the
  // colours run from the lowest figure to the highest.
  void theParallelCoordinatesDrawEachRunAtItsValues() {
    SweepView view(db_path_, sweep_id_);
    view.resize(1300, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_VERIFY_WITH_TIMEOUT(view.sweep() != nullptr, 30000);
    const ParallelCoordinatesChart& chart = *view.parallelChart();
    const std::vector<ParallelCoordinatesChart::DrawnAxis> axes = chart.axes();
    QCOMPARE(axes.size(), size_t{3});
    QCOMPARE(axes[0].title, QString("optimizer.lr"));
    QCOMPARE(axes[1].title, QString("train.batch_size"));
    QCOMPARE(axes[2].title, QString("Final loss"));
    for (size_t a = 0; a + 1 < axes.size(); ++a) QVERIFY(axes[a].x < axes[a + 1].x);
    for (const auto& axis : axes) QVERIFY(axis.numeric && !axis.ticks.empty());
    const std::vector<ParallelCoordinatesChart::DrawnPolyline> lines = chart.polylines();
    QCOMPARE(lines.size(), size_t{4});
    QVERIFY(chart.note().isEmpty());
    // Each axis's values over the runs, and each run's.
    std::map<int64_t, std::vector<double>> values;
    std::vector<std::vector<double>> on_axis(3);
    for (const Member& member : members_) {
      if (!member.run) continue;
      values[*member.run] = {member.lr, double(member.batch_size),
                             reports_.at(*member.run)["final_loss"].get<double>()};
      for (size_t a = 0; a < 3; ++a) on_axis[a].push_back(values[*member.run][a]);
    }
    std::vector<int64_t> drawn;
    for (const auto& line : lines) {
      drawn.push_back(line.run_id);
      QVERIFY2(values.contains(line.run_id), "a line of no run");
      QCOMPARE(line.points.size(), size_t{3});
      for (size_t a = 0; a < 3; ++a) {
        QCOMPARE(line.points[a].x(), axes[a].x);
        const double expected = paddedFraction(values[line.run_id][a], on_axis[a]);
        QVERIFY2(std::abs(line.fractions[a] - expected) < 1e-9,
                 qPrintable(QString("run %1 axis %2: %3, not %4")
                                .arg(line.run_id)
                                .arg(a)
                                .arg(line.fractions[a])
                                .arg(expected)));
        const double y = axes[a].bottom - expected * (axes[a].bottom - axes[a].top);
        QVERIFY(std::abs(line.points[a].y() - y) < 1e-6);
      }
    }
    std::vector<int64_t> runs;
    for (const Member& member : members_)
      if (member.run) runs.push_back(*member.run);
    std::sort(drawn.begin(), drawn.end());
    std::sort(runs.begin(), runs.end());
    QCOMPARE(drawn, runs);
    // Coloured along the final loss: the lowest at one end of the scale, the highest at the other.
    const auto by_loss = std::minmax_element(lines.begin(), lines.end(), [&](auto& a, auto& b) {
      return values[a.run_id][2] < values[b.run_id][2];
    });
    QCOMPARE(by_loss.first->colour, sequentialColour(0));
    QCOMPARE(by_loss.second->colour, sequentialColour(1));
    QVERIFY(chart.colourRange().has_value());
    QCOMPARE(chart.colourRange()->first, values[by_loss.first->run_id][2]);
    // Hovering a line's vertex on the figure axis (each run's loss differs) names that run.
    for (const auto& line : lines) {
      QCOMPARE(chart.runAt(line.points[2]), std::optional<int64_t>(line.run_id));
      QVERIFY(chart.hoverText(line.run_id).startsWith(QString("run %1").arg(line.run_id)));
    }
    QVERIFY(!chart.runAt(QPointF(2, 2)));
    // Ranked by samples/s, the figure axis is samples/s.
    view.setRankBy("samples_per_second");
    QTRY_COMPARE_WITH_TIMEOUT(view.parallelChart()->axes().back().title, QString("Samples/s"),
                              30000);
    QCOMPARE(view.parallelChart()->polylines().size(), size_t{4});
  }

  // A chart of values without a run's figure leaves that run out and says so.
  void aRunWithoutTheFigureIsLeftOutWithANote() {
    ParallelCoordinatesChart chart;
    chart.resize(600, 300);
    storage::ComparisonAxis field{.key = "optimizer.lr",
                                  .name = "optimizer.lr",
                                  .numeric = true,
                                  .categories = {"0.001", "0.01"}};
    field.points = {{0.01, "0.01", 1}, {0.001, "0.001", 0}};
    storage::ComparisonAxis loss{.key = "final_loss",
                                 .name = "final loss",
                                 .is_figure = true,
                                 .numeric = true,
                                 .categories = {"2.5"}};
    loss.points = {{2.5, "2.5", 0}, {std::nullopt, "", -1}};
    chart.setData({field, loss}, {7, 8});
    QCOMPARE(chart.polylines().size(), size_t{1});
    QCOMPARE(chart.polylines().front().run_id, int64_t{7});
    QVERIFY2(chart.note().contains("#8") && chart.note().contains("Final loss"),
             qPrintable(chart.note()));
  }

  // The scatter puts the chosen figure against the chosen axis, one dot per run.
  void theScatterPlotsTheChosenFigureAgainstTheChosenAxis() {
    SweepView view(db_path_, sweep_id_);
    view.resize(1300, 800);
    view.show();
    QTRY_VERIFY_WITH_TIMEOUT(view.xPicker()->count() > 0, 30000);
    QCOMPARE(view.xPicker()->currentData().toString(), QString("optimizer.lr"));
    QCOMPARE(view.yPicker()->currentData().toString(), QString("final_loss"));
    view.xPicker()->setCurrentIndex(view.xPicker()->findData("train.batch_size"));
    view.yPicker()->setCurrentIndex(view.yPicker()->findData("samples_per_second"));
    const ScatterChart& scatter = *view.scatter();
    QCOMPARE(scatter.xTitle(), QString("train.batch_size"));
    QCOMPARE(scatter.yTitle(), figureHeading("samples_per_second"));
    QCOMPARE(scatter.pointCount(), 4);
    const std::vector<int64_t>& runs = view.sweep()->runs;
    QCOMPARE(runs.size(), size_t{4});
    const auto batchOf = [&](int64_t run) {
      for (const Member& member : members_)
        if (member.run == run) return member.batch_size;
      return -1;
    };
    for (size_t a = 0; a < runs.size(); ++a) {
      for (size_t b = 0; b < runs.size(); ++b) {
        const QPointF pa = *scatter.pointPosition(a), pb = *scatter.pointPosition(b);
        QCOMPARE(pa.x() < pb.x(), batchOf(runs[a]) < batchOf(runs[b]));
        const double ra = reports_.at(runs[a])["samples_per_second"],
                     rb = reports_.at(runs[b])["samples_per_second"];
        if (ra != rb) QCOMPARE(pa.y() < pb.y(), ra > rb);  // up is larger
      }
    }
  }

  // The best run by the final loss is the lowest; ranked by samples/s, the highest; the table
  // marks it, the chart draws it wider, and the panel lists its spec differences.
  void theBestRunFollowsTheRankingFigure() {
    SweepView view(db_path_, sweep_id_);
    view.resize(1300, 800);
    view.show();
    QTRY_VERIFY_WITH_TIMEOUT(view.sweep() != nullptr, 30000);
    const auto bestBy = [&](const char* figure, bool higher) {
      int64_t best = 0;
      double held = 0;
      for (const auto& [run, report] : reports_) {
        const double value = report[figure];
        if (best == 0 || (higher ? value > held : value < held)) best = run, held = value;
      }
      return best;
    };
    const auto checkBest = [&](int64_t expected) {
      const int row = view.model()->bestRow();
      QVERIFY(row >= 0);
      QCOMPARE(view.model()->runAt(row), std::optional<int64_t>(expected));
      for (int r = 0; r < view.model()->rowCount(); ++r)
        QCOMPARE(view.model()->index(r, 0).data(Qt::BackgroundRole).isValid(), r == row);
      QVERIFY2(view.bestText().contains(QString("run %1,").arg(expected)),
               qPrintable(view.bestText()));
      // Its differences: the swept fields where another run's value differs, with its own value.
      const Member* best = nullptr;
      for (const Member& member : members_)
        if (member.run == expected) best = &member;
      SweepDifferencesModel& differences = *view.differencesModel();
      std::map<QString, QString> listed;
      for (int r = 0; r < differences.rowCount(); ++r)
        listed[differences.index(r, SweepDifferencesModel::kField).data().toString()] =
            differences.index(r, SweepDifferencesModel::kBest).data().toString();
      QCOMPARE(listed["optimizer.lr"], QString::fromStdString(json(best->lr).dump()));
      QCOMPARE(listed["train.batch_size"], QString::number(best->batch_size));
    };
    const int64_t by_loss = bestBy("final_loss", false);
    checkBest(by_loss);
    if (QTest::currentTestFailed()) return;
    const int64_t by_rate = bestBy("samples_per_second", true);
    view.rankByPicker()->setCurrentIndex(view.rankByPicker()->findData("samples_per_second"));
    QTRY_COMPARE_WITH_TIMEOUT(view.sweep()->rank_by, std::string("samples_per_second"), 30000);
    checkBest(by_rate);
    QVERIFY(view.bestText().contains("higher is better"));
    qInfo("best by final loss: run %lld; by samples/s: run %lld", (long long)by_loss,
          (long long)by_rate);
  }

  // Double-clicking a member with a run opens it; a refused member has none to open.
  void doubleClickingAMemberOpensItsRun() {
    SweepView view(db_path_, sweep_id_);
    view.resize(1300, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_COMPARE_WITH_TIMEOUT(view.model()->rowCount(), int(members_.size()), 30000);
    QSignalSpy opened(&view, &SweepView::openRun);
    const auto doubleClick = [&](int position) {
      const QModelIndex index = view.model()->index(view.model()->rowOfPosition(position), 1);
      const QPoint at = view.table()->visualRect(index).center();
      // A press first, as a person's double-click begins: the view opens what was pressed.
      QTest::mousePress(view.table()->viewport(), Qt::LeftButton, {}, at);
      QTest::mouseRelease(view.table()->viewport(), Qt::LeftButton, {}, at);
      QTest::mouseDClick(view.table()->viewport(), Qt::LeftButton, {}, at);
    };
    doubleClick(3);  // lr 0.001, batch 16
    QCOMPARE(opened.count(), 1);
    QCOMPARE(opened.takeFirst().at(0).toLongLong(), *members_[3].run);
    doubleClick(2);  // batch 0: refused
    QCOMPARE(opened.count(), 0);
  }

  // The run list offers a run's sweep in its row's menu; a run of no sweep has none.
  void theRunListOpensARunsSweep() {
    HistoryView history;
    history.resize(900, 600);
    history.show();
    history.setDatabase(db_path_);
    QTRY_COMPARE_WITH_TIMEOUT(history.model()->rowCount(), 4, 30000);
    const int64_t run = *members_[4].run;
    QTRY_VERIFY_WITH_TIMEOUT(history.sweepOf(run).has_value(), 30000);
    QCOMPARE(history.sweepOf(run)->sweep_id, sweep_id_);
    QCOMPARE(history.sweepOf(run)->position, 4);
    QSignalSpy open_sweep(&history, &HistoryView::openSweep);
    std::unique_ptr<QMenu> menu(history.rowMenu(history.model()->rowOfRun(run)));
    QAction* action = nullptr;
    for (QAction* each : menu->actions())
      if (each->text() == QString("Open sweep %1 (member 5)").arg(sweep_id_)) action = each;
    QVERIFY(action != nullptr);
    action->trigger();
    QCOMPARE(open_sweep.count(), 1);
    QCOMPARE(open_sweep.takeFirst().at(0).toLongLong(), sweep_id_);
  }

  // The window's Sweeps tab lists the sweep; opening it (from the list, or a run's menu) shows
  // its view in a tab of its own, once.
  void theWindowListsTheSweepsAndOpensOne() {
    MainWindow window({db_path_, ringmasterExecutable(), "ringmaster-ui-sweep-test"});
    window.show();
    SweepListView* list = window.showSweeps();
    QAbstractItemModelTester tester(list->model(),
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    QTRY_COMPARE_WITH_TIMEOUT(list->model()->rowCount(), 1, 30000);
    const SweepListModel& model = *list->model();
    QCOMPARE(model.index(0, SweepListModel::kStatus).data().toString(), QString("completed"));
    QCOMPARE(model.index(0, SweepListModel::kMembers).data().toString(), QString("6 of 6 ended"));
    QCOMPARE(model.index(0, SweepListModel::kFields).data().toString(),
             QString("optimizer.lr × train.batch_size"));
    emit list->table()->doubleClicked(model.index(0, SweepListModel::kName));
    auto* view = qobject_cast<SweepView*>(window.tabs()->currentWidget());
    QVERIFY(view != nullptr);
    QCOMPARE(view->sweepId(), sweep_id_);
    const int tabs = window.tabs()->count();
    emit window.history()->openSweep(sweep_id_);
    QCOMPARE(window.tabs()->count(), tabs);
    QCOMPARE(window.tabs()->currentWidget(), view);
    QTRY_VERIFY_WITH_TIMEOUT(
        window.tabs()->tabText(window.tabs()->currentIndex()).contains("completed"), 30000);
    // A sweep that is not there says so.
    SweepView* missing = window.openSweep(99);
    QTRY_VERIFY_WITH_TIMEOUT(missing->errorText().contains("99"), 30000);
  }

  // A running sweep's view follows it: members change state as they are recorded, and the view
  // stops watching once the sweep has ended.
  void aRunningSweepRefreshesAsItChanges() {
    const std::string path = dir_.filePath("live.db").toStdString();
    int64_t id = 0;
    auto db = [&] {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      auto opened = std::make_unique<storage::Database>(path);
      id = storage::createSweep(
          *opened,
          {.name = "live",
           .spec_json = readExample(),
           .plan_json = R"({"method": "grid", "axes": [{"field": "train.batch_size",
                                    "values": [0, 8, 16]}]})",
           .member_overrides_json = {R"({"train.batch_size": 0})", R"({"train.batch_size": 8})",
                                     R"({"train.batch_size": 16})"},
           .created_at = 1.7e9});
      return opened;
    }();
    SweepView view(path, id);
    QAbstractItemModelTester tester(view.model(),
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    view.show();
    QTRY_COMPARE_WITH_TIMEOUT(view.model()->rowCount(), 3, 30000);
    QVERIFY(view.watching());
    const auto stateOf = [&](int position) {
      return view.model()
          ->index(view.model()->rowOfPosition(position), view.model()->columnOf("state"))
          .data()
          .toString();
    };
    QCOMPARE(stateOf(0), QString("planned"));
    // Sorted by state with the first member selected: as it is refused it sorts after the planned
    // ones, and the selection follows it.
    view.table()->sortByColumn(view.model()->columnOf("state"), Qt::AscendingOrder);
    view.table()->selectRow(view.model()->rowOfPosition(0));
    {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      storage::recordSweepMemberRefused(*db, id, 0, "train.batch_size: must be at least 1");
    }
    QTRY_COMPARE_WITH_TIMEOUT(stateOf(0), QString("refused"), 30000);
    QCOMPARE(view.model()->rowOfPosition(0), 2);
    const QModelIndexList selected = view.table()->selectionModel()->selectedRows();
    QCOMPARE(selected.size(), qsizetype{1});
    QCOMPARE(selected.front().row(), 2);
    QVERIFY(view.watching());
    {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      storage::recordSweepMembersNotStarted(*db, id);
      storage::finishSweep(*db, id, "cancelled", 1.7e9 + 5);
    }
    QTRY_COMPARE_WITH_TIMEOUT(stateOf(2), QString("not started"), 30000);
    QVERIFY(view.headerText().contains("cancelled"));
    QTRY_VERIFY_WITH_TIMEOUT(!view.watching(), 30000);
    QVERIFY(view.bestText().contains("No run"));
    QVERIFY(view.parallelChart()->polylines().empty());
  }

 private:
  std::string readExample() {
    QFile file(ddpExample());
    if (!file.open(QIODevice::ReadOnly)) return "{}";
    return file.readAll().toStdString();
  }

  // The sweep: `ringmaster sweep` of the DDP example on 2 local ranks, a few steps, over the grid;
  // exit code 1 since members were refused.
  void runSweep() {
    const auto values = [](const auto& list) {
      QStringList texts;
      for (const auto& value : list) texts << QString::fromStdString(json(value).dump());
      return texts.join(',');
    };
    QProcess sweep;
    sweep.setProcessChannelMode(QProcess::MergedChannels);
    sweep.start(ringmasterExecutable(),
                {"--db", QString::fromStdString(db_path_), "sweep", ddpExample(), "-q", "--axis",
                 "optimizer.lr=" + values(kLearningRates), "--axis",
                 "train.batch_size=" + values(kBatchSizes), "--set", "train.steps=4", "--set",
                 "telemetry.every_steps=1", "--set",
                 R"(launch.hosts=[{"host": "localhost", "ranks": 2}])"});
    QVERIFY(sweep.waitForStarted(30000));
    if (!sweep.waitForFinished(300000)) {
      sweep.kill();  // our own child, by its handle
      sweep.waitForFinished(10000);
      QFAIL("ringmaster sweep did not finish in 300 s");
    }
    QVERIFY2(sweep.exitCode() == 1, sweep.readAll().constData());
  }

  QTemporaryDir dir_;
  std::string db_path_;
  int64_t sweep_id_ = 0;
  std::vector<Member> members_;
  std::map<int64_t, json> reports_;
};

QTEST_MAIN(UiSweepViewTest)
#include "ui_sweep_view_test.moc"
