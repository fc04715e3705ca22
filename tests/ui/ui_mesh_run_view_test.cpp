// Issue 34, seeing the mesh in the run view: the rank table, the band charts and the heat map group
// and order the ranks by their mesh coordinates (the "rankGrouping" control), on real runs that
// `ringmaster run` recorded: a 4-rank DDP run (a mesh of 4 dp replicas), a 4-stage pipeline
// (a mesh of 4 pp stages), and the GPT on 2 x 2 meshes (dp x tp, dp x pp). The grouped bands are
// checked value by value against each group's ranks as stored, and the Communication tab's tables
// per mesh dimension against the stored communication by dimension
// (storage/query/comm_by_dimension.h).
#include <QComboBox>
#include <QFile>
#include <QProcess>
#include <QTableView>
#include <QTest>

#include "data/background_jobs.h"
#include "db/database.h"
#include "models/comm_dims_model.h"
#include "models/format.h"
#include "models/rank_table_model.h"
#include "query/comm_by_dimension.h"
#include "query/runs.h"
#include "query/series.h"
#include "ui_test_support.h"
#include "views/pipeline_view.h"
#include "views/run_view.h"
#include "widgets/gantt_chart.h"
#include "widgets/heat_map.h"
#include "widgets/metric_chart.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

namespace {

// Runs `spec` with `ringmaster run` into db_path; the run's id once it completed, else 0. The run's
// status decides, not the command's exit code: a layout the memory estimate does not cover yet is
// said on stderr while the run itself completes.
int64_t recordRun(const QTemporaryDir& dir, const std::string& db_path,
                  const nlohmann::json& spec) {
  QFile file(dir.filePath(QString::fromStdString(spec.value("name", "run")) + ".json"));
  if (!file.open(QIODevice::WriteOnly)) return 0;
  file.write(QByteArray::fromStdString(spec.dump()));
  file.close();
  QProcess run;
  run.setProcessChannelMode(QProcess::MergedChannels);
  run.start(ringmasterExecutable(),
            {"--db", QString::fromStdString(db_path), "run", file.fileName(), "-q"});
  if (!run.waitForFinished(240000)) {
    run.kill();
    run.waitForFinished();
    return 0;
  }
  const QByteArray output = run.readAll();
  storage::AllowQueriesOnThisThread the_tests_own_queries;
  storage::Database db(db_path);
  const std::vector<storage::RunRecord> runs = storage::listRuns(db);
  if (runs.empty() || runs.front().name != spec.value("name", "") ||
      runs.front().status != "completed") {
    qWarning("%s", output.constData());
    return 0;
  }
  return runs.front().id;
}

// The rank table's column, top to bottom.
QStringList column(const QTableView* table, int column) {
  QStringList values;
  for (int row = 0; row < table->model()->rowCount(); ++row)
    values << table->model()->index(row, column).data().toString();
  return values;
}

// Steps 1..N of one rank's metric as stored, a point per step.
std::vector<double> storedSteps(const std::string& db_path, int64_t run_id,
                                const std::string& metric, const std::vector<int>& ranks) {
  storage::AllowQueriesOnThisThread the_tests_own_queries;
  storage::Database db(db_path);
  const storage::Band band = storage::loadRankBand(db, run_id, metric, {.buckets = 100000}, ranks);
  std::vector<double> medians;
  for (const storage::BandBucket& bucket : band.buckets) medians.push_back(bucket.median);
  return medians;
}

std::vector<double> yValues(const QList<QPointF>& points) {
  std::vector<double> ys;
  for (const QPointF& p : points) ys.push_back(p.y());
  return ys;
}

}  // namespace

class UiMeshRunViewTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { installGuiThreadQueryCheck(); }

  // A DDP run's ranks are its dp replicas: by replica, a band per replica (each its one rank's
  // loss as stored), the heat map's rows labelled by replica, the rank table's mesh column.
  void aDdpRunGroupsItsRanksByReplica() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string db_path = dir.filePath("runs.db").toStdString();
    nlohmann::json spec = exampleSpec("ddp_mlp", 8);
    spec["name"] = "mesh_ddp";
    spec["launch"]["hosts"] = {{{"host", "localhost"}, {"ranks", 4}}};
    const int64_t run_id = recordRun(dir, db_path, spec);
    QVERIFY2(run_id > 0, "the DDP run did not complete");

    RunView view(db_path, run_id);
    view.resize(1200, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_VERIFY_WITH_TIMEOUT(view.snapshot() && view.snapshot()->coordinates.size() == 4, 20000);
    for (int rank = 0; rank < 4; ++rank)
      QCOMPARE(view.snapshot()->coordinates[rank], (MeshCoordinates{.dp = rank, .tp = 0, .pp = 0}));
    QCOMPARE(column(view.rankTable(), RankTableModel::kMesh),
             QStringList({"dp 0 · tp 0 · pp 0", "dp 1 · tp 0 · pp 0", "dp 2 · tp 0 · pp 0",
                          "dp 3 · tp 0 · pp 0"}));
    // The control beside the tabs offers the four groupings.
    auto* choice = view.findChild<QComboBox*>("rankGrouping");
    QVERIFY(choice && choice->isVisible());
    QCOMPARE(choice->count(), 4);

    view.showRanks(RunView::RankMode::kBand);
    view.setRankGrouping(RankGrouping::kByDpReplica);
    QCOMPARE(choice->currentText(), QString("Ranks: by dp replica"));
    MetricChart* loss = view.chart("Loss");
    QVERIFY(loss);
    QTRY_COMPARE_WITH_TIMEOUT(loss->lineCount(), 4, 20000);
    for (int replica = 0; replica < 4; ++replica) {
      const QString name = QString("dp replica %1 (median, min–max)").arg(replica);
      QTRY_COMPARE_WITH_TIMEOUT(yValues(loss->linePoints(name)),
                                storedSteps(db_path, run_id, "loss", {replica}), 20000);
    }
    QCOMPARE(view.heatMap()->rowRanks(), (std::vector<int>{0, 1, 2, 3}));
    QCOMPARE(view.heatMap()->rowLabels().at(2), QString("dp replica 2 · rank 2"));

    // By pp stage: the one stage of every rank, a band of all four, as stored.
    view.setRankGrouping(RankGrouping::kByPpStage);
    QTRY_COMPARE_WITH_TIMEOUT(loss->lineCount(), 1, 20000);
    QTRY_COMPARE_WITH_TIMEOUT(yValues(loss->linePoints("pp stage 0 (median, min–max)")),
                              storedSteps(db_path, run_id, "loss", {0, 1, 2, 3}), 20000);
    QCOMPARE(view.heatMap()->rowLabels().at(0), QString("rank 0"));  // one group: no label

    // Communication per mesh dimension: a row per dimension the run's operations ran over, as
    // stored, and each rank's time per step in each.
    storage::CommByDimension stored;
    {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      stored = storage::commByDimension(storage::Database(db_path), run_id);
    }
    QVERIFY(!stored.dims.empty());
    const QTableView* dims = view.findChild<QTableView*>("commDimsTable");
    QVERIFY(dims);
    QStringList stored_dims;
    for (const storage::DimensionComm& dim : stored.dims) {
      stored_dims << QString::fromStdString(dim.dim);
      QVERIFY2(dim.ms_per_step > 0 && dim.operations > 0, dim.dim.c_str());
    }
    QCOMPARE(column(dims, CommDimsModel::kDim), stored_dims);
    QCOMPARE(column(dims, CommDimsModel::kMsPerStep).at(0), formatMs(stored.dims[0].ms_per_step));
    const QTableView* rank_dims = view.findChild<QTableView*>("rankDimsTable");
    QCOMPARE(column(rank_dims, RankDimsModel::kRank), QStringList({"0", "1", "2", "3"}));
    for (const storage::RankDimensionComm& figure : stored.ranks) {
      const int column_of_dim = figure.dim == "dp"   ? RankDimsModel::kDp
                                : figure.dim == "tp" ? RankDimsModel::kTp
                                : figure.dim == "pp" ? RankDimsModel::kPp
                                                     : RankDimsModel::kWorld;
      QCOMPARE(rank_dims->model()->index(figure.rank, column_of_dim).data().toString(),
               formatMs(figure.ms_per_step));
    }

    // Back to rank order: the one band of every rank.
    view.setRankGrouping(RankGrouping::kRankOrder);
    QTRY_COMPARE_WITH_TIMEOUT(loss->lineNames(), std::vector<QString>{"median, min–max of ranks"},
                              20000);
  }

  // A pipeline's ranks are its stages: by pp stage, four groups of one rank, in the heat map and
  // the rank table; the measured schedule keeps a row per stage. Its rows regrouped for a mesh of
  // two replicas of two stages take each replica's stages together.
  void aPipelineRunGroupsItsRanksByStage() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string db_path = dir.filePath("runs.db").toStdString();
    nlohmann::json spec = exampleSpec("pipeline_mlp", 6);
    spec["name"] = "mesh_pipeline";
    const int64_t run_id = recordRun(dir, db_path, spec);
    QVERIFY2(run_id > 0, "the pipeline run did not complete");

    RunView view(db_path, run_id);
    view.resize(1200, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_VERIFY_WITH_TIMEOUT(view.snapshot() && view.snapshot()->coordinates.size() == 4, 20000);
    view.setRankGrouping(RankGrouping::kByPpStage);
    QCOMPARE(column(view.rankTable(), RankTableModel::kMesh),
             QStringList({"dp 0 · tp 0 · pp 0", "dp 0 · tp 0 · pp 1", "dp 0 · tp 0 · pp 2",
                          "dp 0 · tp 0 · pp 3"}));
    QCOMPARE(column(view.rankTable(), RankTableModel::kRank), QStringList({"0", "1", "2", "3"}));
    QCOMPARE(view.heatMap()->rowLabels(),
             QStringList({"pp stage 0 · rank 0", "pp stage 1 · rank 1", "pp stage 2 · rank 2",
                          "pp stage 3 · rank 3"}));
    // The per-rank communication by dimension in the same order as the rank table.
    QCOMPARE(column(view.findChild<QTableView*>("rankDimsTable"), RankDimsModel::kMesh),
             column(view.rankTable(), RankTableModel::kMesh));
    // By dp replica: the one replica holds every stage.
    view.setRankGrouping(RankGrouping::kByDpReplica);
    QCOMPARE(view.heatMap()->rowLabels().at(0), QString("rank 0"));

    PipelineView* pipeline = view.pipelineView();
    QVERIFY(view.tabs()->isTabVisible(view.tabs()->indexOf(pipeline)));
    view.tabs()->setCurrentWidget(pipeline);
    QTRY_VERIFY_WITH_TIMEOUT(pipeline->shownStep().has_value(), 20000);
    QVERIFY(pipeline->jobs()->waitForIdle());
    const GanttData& measured = pipeline->measured().data();
    QCOMPARE(measured.rows, 4);
    QVERIFY(measured.row_names.empty());  // one replica: "stage N"
    // The same bars laid out as dp 2 x pp 2 (rank = dp + 2 pp): replica 0 is ranks 0 and 2.
    const GanttData replicas = byReplica(measured, MeshSpec{.dp = 2, .tp = 1, .pp = 2});
    QCOMPARE(replicas.row_names,
             std::vector<QString>({"replica 0 · stage 0", "replica 0 · stage 1",
                                   "replica 1 · stage 0", "replica 1 · stage 1"}));
    const int row_of[] = {0, 2, 1, 3};
    for (size_t i = 0; i < measured.bars.size(); ++i)
      QCOMPARE(replicas.bars[i].row, row_of[measured.bars[i].row]);
    for (int rank = 0; rank < 4; ++rank)
      QCOMPARE(replicas.row_bubble[row_of[rank]], measured.row_bubble[rank]);
  }

  // Issue 34's acceptance: a real 2-D mesh. The GPT on dp 2 x tp 2 (rank = tp + 2 dp) and on
  // dp 2 x pp 2 (rank = dp + 2 pp): the recorded coordinates, a tp group's and a replica's ranks
  // together (by replica on dp x pp: ranks 0 and 2, then 1 and 3), a band per replica as stored,
  // the communication in dp and in tp (or pp) apart, and the pipeline's measured rows by replica.
  void aTwoByTwoMeshGroupsItsRanksByTheirCoordinates() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string db_path = dir.filePath("runs.db").toStdString();
    QFile corpus(dir.filePath("corpus.txt"));
    QVERIFY(corpus.open(QIODevice::WriteOnly));
    const char* words[] = {"the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "dog. "};
    for (int i = 0; i < 800; ++i) corpus.write(words[(i * 5 + i / 7) % 8]);
    corpus.close();
    nlohmann::json spec = {{"name", "mesh_dp_tp"},
                           {"strategy", {{"mesh", {{"dp", 2}, {"tp", 2}}}}},
                           {"model",
                            {{"kind", "gpt"},
                             {"layers", 2},
                             {"vocab_size", 256},
                             {"context", 8},
                             {"heads", 2},
                             {"dim", 16}}},
                           {"data", {{"kind", "text"}, {"path", corpus.fileName().toStdString()}}},
                           {"train", {{"steps", 6}, {"batch_size", 4}}},
                           {"optimizer", {{"kind", "adamw"}, {"lr", 0.01}}},
                           {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", 4}}}}}},
                           {"telemetry", {{"every_steps", 1}}},
                           {"device", "cpu"}};
    const int64_t dp_tp = recordRun(dir, db_path, spec);
    QVERIFY2(dp_tp > 0, "the dp 2 x tp 2 run did not complete");
    spec["name"] = "mesh_dp_pp";
    spec["strategy"] = {{"mesh", {{"dp", 2}, {"pp", 2}}}, {"pp", {{"schedule", "1f1b"}}}};
    spec["train"]["micro_batches"] = 2;
    const int64_t dp_pp = recordRun(dir, db_path, spec);
    QVERIFY2(dp_pp > 0, "the dp 2 x pp 2 run did not complete");

    {
      RunView view(db_path, dp_tp);
      view.resize(1200, 800);
      view.show();
      QVERIFY(QTest::qWaitForWindowExposed(&view));
      QTRY_VERIFY_WITH_TIMEOUT(view.snapshot() && view.snapshot()->coordinates.size() == 4, 20000);
      QCOMPARE(column(view.rankTable(), RankTableModel::kMesh),
               QStringList({"dp 0 · tp 0 · pp 0", "dp 0 · tp 1 · pp 0", "dp 1 · tp 0 · pp 0",
                            "dp 1 · tp 1 · pp 0"}));
      view.setRankGrouping(RankGrouping::kByTpGroup);
      QCOMPARE(view.heatMap()->rowLabels(),
               QStringList({"tp group dp 0 · pp 0 · rank 0", "rank 1",
                            "tp group dp 1 · pp 0 · rank 2", "rank 3"}));
      view.showRanks(RunView::RankMode::kBand);
      view.setRankGrouping(RankGrouping::kByDpReplica);
      MetricChart* loss = view.chart("Loss");
      QVERIFY(loss);
      QTRY_COMPARE_WITH_TIMEOUT(loss->lineCount(), 2, 20000);
      QTRY_COMPARE_WITH_TIMEOUT(yValues(loss->linePoints("dp replica 1 (median, min–max)")),
                                storedSteps(db_path, dp_tp, "loss", {2, 3}), 20000);
      // Its communication in dp (the gradients) and in tp (the layers' reduces), each measured.
      QStringList dims = column(view.findChild<QTableView*>("commDimsTable"), CommDimsModel::kDim);
      QVERIFY2(dims.contains("dp") && dims.contains("tp"), qPrintable(dims.join(",")));
      QVERIFY(!view.tabs()->isTabVisible(view.tabs()->indexOf(view.pipelineView())));
    }

    RunView view(db_path, dp_pp);
    view.resize(1200, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_VERIFY_WITH_TIMEOUT(view.snapshot() && view.snapshot()->coordinates.size() == 4, 20000);
    view.setRankGrouping(RankGrouping::kByDpReplica);
    QCOMPARE(column(view.rankTable(), RankTableModel::kRank), QStringList({"0", "2", "1", "3"}));
    QCOMPARE(view.heatMap()->rowRanks(), (std::vector<int>{0, 2, 1, 3}));
    QCOMPARE(column(view.findChild<QTableView*>("rankDimsTable"), RankDimsModel::kRank),
             QStringList({"0", "2", "1", "3"}));
    QStringList dims = column(view.findChild<QTableView*>("commDimsTable"), CommDimsModel::kDim);
    QVERIFY2(dims.contains("dp") && dims.contains("pp"), qPrintable(dims.join(",")));
    PipelineView* pipeline = view.pipelineView();
    QVERIFY(view.tabs()->isTabVisible(view.tabs()->indexOf(pipeline)));
    view.tabs()->setCurrentWidget(pipeline);
    QTRY_VERIFY_WITH_TIMEOUT(pipeline->shownStep().has_value(), 20000);
    QVERIFY(pipeline->jobs()->waitForIdle());
    const GanttData& measured = pipeline->measured().data();
    QCOMPARE(measured.rows, 4);
    QCOMPARE(measured.row_names,
             std::vector<QString>({"replica 0 · stage 0", "replica 0 · stage 1",
                                   "replica 1 · stage 0", "replica 1 · stage 1"}));
    // Every row has its stage's work: F and B of both micro-batches.
    std::vector<int> bars(4);
    for (const GanttBar& bar : measured.bars) ++bars[static_cast<size_t>(bar.row)];
    for (int row = 0; row < 4; ++row) QVERIFY2(bars[row] >= 4, qPrintable(QString::number(row)));
  }
};

QTEST_MAIN(UiMeshRunViewTest)
#include "ui_mesh_run_view_test.moc"
