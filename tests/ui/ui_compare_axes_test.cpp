// Issue 33 on the desktop: the compare view's runs on two axes (X and Y picked from every run
// figure and spec field; numbers placed by value, other values by category) and "colour by" a
// spec field in the compare and history views (runs with the same value share a colour, with a
// legend); the figures named by the table of figures. Three real runs of the single-rank example
// (`ringmaster run`): lr 0.01 adamw, lr 0.001 adamw, lr 0.05 sgd. The views read off the GUI
// thread.
#include <QComboBox>
#include <QProcess>
#include <QTest>
#include <set>

#include "data/background_jobs.h"
#include "db/database.h"
#include "models/compare_models.h"
#include "models/run_list_model.h"
#include "query/figures.h"
#include "query/run_report.h"
#include "ui_test_support.h"
#include "views/compare_view.h"
#include "views/history_view.h"
#include "widgets/scatter_chart.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

class UiCompareAxesTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    installGuiThreadQueryCheck();
    QVERIFY(dir_.isValid());
    db_path_ = dir_.filePath("runs.db").toStdString();
    for (const auto& [lr, optimizer] :
         {std::pair{"0.01", "adamw"}, std::pair{"0.001", "adamw"}, std::pair{"0.05", "sgd"}}) {
      QProcess run;
      run.setProcessChannelMode(QProcess::MergedChannels);
      run.start(ringmasterExecutable(),
                {"--db", QString::fromStdString(db_path_), "run",
                 QString::fromUtf8(testSourceDir()) + "/resources/examples/single_mlp.json", "-q",
                 "--set", "train.steps=3", "--set", QString("optimizer.lr=%1").arg(lr), "--set",
                 QString("optimizer.kind=%1").arg(optimizer)});
      QVERIFY(run.waitForFinished(120000));
      QVERIFY2(run.exitCode() == 0, run.readAll().constData());
    }
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_path_);
    for (int64_t id : {1, 2, 3})
      reports_.push_back(storage::toJson(storage::buildRunReport(db, id, 0)));
  }

  void theScatterPutsAnyFigureAgainstAnySpecFieldAndColoursByAField() {
    CompareView view(db_path_, {1, 2, 3});
    view.resize(1400, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_VERIFY_WITH_TIMEOUT(view.xPicker()->count() > 0, 20000);
    // With its pickers filled, the view still fits a laptop's screen (1366x768, issue 33), a tab
    // of the main window.
    QVERIFY2(view.minimumSizeHint().width() <= 1300 && view.minimumSizeHint().height() <= 650,
             qPrintable(QString("minimum %1x%2")
                            .arg(view.minimumSizeHint().width())
                            .arg(view.minimumSizeHint().height())));
    // The pickers hold every run figure by its name and every spec field; the differing field
    // is the first X.
    for (const storage::Figure& figure : storage::figureTable()) {
      if (!storage::isRunFigure(figure)) continue;
      const int at =
          view.yPicker()->findData(QString::fromUtf8(figure.id.data(), figure.id.size()));
      QVERIFY2(at >= 0, figure.id.data());
      QCOMPARE(view.yPicker()->itemText(at).toLower(),
               QString::fromUtf8(figure.name.data(), figure.name.size()).toLower());
    }
    QVERIFY(view.xPicker()->findData("optimizer.kind") >= 0);
    ScatterChart* scatter = view.scatter();
    QCOMPARE(view.yPicker()->currentData().toString(), QString("final_loss"));
    QCOMPARE(scatter->yTitle(), QString("Final loss"));

    // Final loss against the learning rate: placed by value on both axes.
    view.xPicker()->setCurrentIndex(view.xPicker()->findData("optimizer.lr"));
    QCOMPARE(scatter->xTitle(), QString("optimizer.lr"));
    QCOMPARE(scatter->pointCount(), 3);
    const double lrs[] = {0.01, 0.001, 0.05};
    for (size_t a = 0; a < 3; ++a) {
      for (size_t b = 0; b < 3; ++b) {
        const QPointF pa = *scatter->pointPosition(a), pb = *scatter->pointPosition(b);
        QCOMPARE(pa.x() < pb.x(), lrs[a] < lrs[b]);
        const double la = reports_[a]["final_loss"], lb = reports_[b]["final_loss"];
        if (la != lb) QCOMPARE(pa.y() > pb.y(), la < lb);  // up is larger
      }
    }
    // A figure with a unit on X, a category on Y.
    view.xPicker()->setCurrentIndex(view.xPicker()->findData("mean_step_ms"));
    view.yPicker()->setCurrentIndex(view.yPicker()->findData("optimizer.kind"));
    QCOMPARE(scatter->xTitle(), QString("Mean step (ms)"));
    QCOMPARE(scatter->pointCount(), 3);
    QCOMPARE(scatter->pointPosition(0)->y(), scatter->pointPosition(1)->y());  // both adamw
    QVERIFY(scatter->pointPosition(0)->y() != scatter->pointPosition(2)->y());

    // Colour by the optimizer: the two adamw runs share a colour, sgd has its own; the charts'
    // lines follow; the legend names each group with its count.
    std::vector<QColor> colours = view.runColours();
    QVERIFY(colours[0] != colours[1]);  // each run its own colour first
    view.colourPicker()->setCurrentIndex(view.colourPicker()->findData("optimizer.kind"));
    colours = view.runColours();
    QCOMPARE(colours[0], colours[1]);
    QVERIFY(colours[0] != colours[2]);
    QCOMPARE(scatter->pointColour(1), colours[1]);
    QVERIFY2(view.legendText().contains("optimizer.kind = adamw (2)") &&
                 view.legendText().contains("optimizer.kind = sgd (1)"),
             qPrintable(view.legendText()));
    // The summary table names its figures as the table of figures does.
    QCOMPARE(view.summaryModel()
                 ->headerData(CompareSummaryModel::kCommShare, Qt::Vertical, Qt::DisplayRole)
                 .toString(),
             QString("exposed comm share"));
  }

  void theHistoryColoursRunsByASpecFieldWithALegend() {
    HistoryView view;
    view.resize(900, 600);
    view.show();
    view.setDatabase(db_path_);
    QTRY_COMPARE_WITH_TIMEOUT(view.model()->rowCount(), 3, 20000);
    QTRY_VERIFY_WITH_TIMEOUT(view.colourPicker()->findData("optimizer.lr") >= 0, 20000);
    QVERIFY(view.legendText().isEmpty());
    QVERIFY(!view.model()->runColour(1));
    view.colourPicker()->setCurrentIndex(view.colourPicker()->findData("optimizer.lr"));
    QTRY_VERIFY_WITH_TIMEOUT(view.model()->runColour(1).has_value(), 20000);
    std::set<QRgb> distinct;
    for (int64_t id : {1, 2, 3}) distinct.insert(view.model()->runColour(id)->rgb());
    QCOMPARE(distinct.size(), size_t{3});  // three learning rates
    const int row = view.model()->rowOfRun(1);
    QCOMPARE(view.model()->index(row, RunListModel::kName).data(Qt::DecorationRole).value<QColor>(),
             *view.model()->runColour(1));
    QVERIFY2(view.legendText().contains("optimizer.lr = 0.001 (1)"), qPrintable(view.legendText()));
    // By the optimizer: the adamw runs share one colour.
    view.colourPicker()->setCurrentIndex(view.colourPicker()->findData("optimizer.kind"));
    QTRY_VERIFY_WITH_TIMEOUT(view.legendText().contains("optimizer.kind = adamw (2)"), 20000);
    QCOMPARE(*view.model()->runColour(1), *view.model()->runColour(2));
    QVERIFY(*view.model()->runColour(1) != *view.model()->runColour(3));
    // Nothing: no colours, no legend.
    view.colourPicker()->setCurrentIndex(0);
    QTRY_VERIFY_WITH_TIMEOUT(!view.model()->runColour(1), 20000);
    QVERIFY(view.legendText().isEmpty());
  }

 private:
  QTemporaryDir dir_;
  std::string db_path_;
  std::vector<nlohmann::json> reports_;
};

QTEST_MAIN(UiCompareAxesTest)
#include "ui_compare_axes_test.moc"
