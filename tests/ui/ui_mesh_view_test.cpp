// Issue 34, the job editor's device mesh: the grid of ranks drawn for a GPT on dp x tp x pp
// layouts (2x2x1, 2x1x2, 2x2x2 and others), each rank at its coordinates (tp fastest, then dp,
// then pp: rank = tp + T * (dp + D * pp)), with the blocks of its pipeline stage, its vocabulary
// rows and its memory estimate (estimateMemory's own figure); each bad layout explained beside the
// sizes and in the drawing's place; the sizes editing strategy.mesh. Driven through the real
// editor, offscreen.
//
// RINGMASTER_UI_GRABS=DIR saves a PNG of the editor with each layout, to look at the drawing.
#include <QDir>
#include <QPushButton>
#include <QSpinBox>
#include <QTest>
#include <fstream>
#include <sstream>

#include "common/test_paths.h"
#include "core/error.h"
#include "models/format.h"
#include "nn/model.h"
#include "spec/job_spec.h"
#include "spec/memory_estimate.h"
#include "spec/strategies/pipeline.h"
#include "views/job/mesh_view.h"
#include "views/job_editor.h"
#include "widgets/mesh_grid.h"

using namespace ringmaster;
using namespace ringmaster::ui;

namespace {

void saveGrab(QWidget& widget, const QString& name) {
  const QString dir = qEnvironmentVariable("RINGMASTER_UI_GRABS");
  if (dir.isEmpty()) return;
  QDir().mkpath(dir);
  QTest::qWait(200);
  widget.grab().save(QDir(dir).filePath(name + ".png"));
}

nlohmann::json exampleFile(const std::string& name) {
  std::ifstream in(std::string(ringmaster::testSourceDir()) + "/resources/examples/" + name +
                   ".json");
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str(), nullptr, false);
}

// The shipped GPT (4 blocks, 4 heads, vocabulary 256) on a dp x tp x pp mesh of `world` ranks
// (the mesh's size unless said), in the strategy's mesh form.
nlohmann::json gptOnMesh(int dp, int tp, int pp, int world = 0) {
  nlohmann::json spec = exampleFile("gpt_text");
  spec["strategy"] = {{"mesh", {{"dp", dp}, {"tp", tp}, {"pp", pp}}}, {"dp", {{"kind", "ddp"}}}};
  if (pp > 1) {
    spec["strategy"]["pp"] = {{"schedule", "1f1b"}};
    spec["train"]["micro_batches"] = 4;
  }
  spec["launch"]["hosts"][0]["ranks"] = world > 0 ? world : dp * tp * pp;
  return spec;
}

// Lets the posted layout requests run (the drawing's new height lays the form out again).
void settle() {
  for (int i = 0; i < 3; ++i) {
    QCoreApplication::sendPostedEvents();
    QTest::qWait(10);
  }
}

QString problemsOf(const JobEditor& editor) {
  return QString::fromStdString(parseJobSpec(editor.document()).describe());
}

// "blocks 0–2" / "block 3": how a stage's blocks [first, end) are written.
QString blocksText(size_t first, size_t end) {
  return end - first == 1 ? QString("block %1").arg(first)
                          : QString("blocks %1–%2").arg(first).arg(end - 1);
}

// The memory line each rank should show: estimateMemory's own figure, or "estimate unavailable"
// where it has none for this layout.
QStringList expectedMemoryLines(const JobSpec& spec) {
  QStringList lines;
  try {
    for (const RankMemoryEstimate& rank : estimateMemory(spec))
      lines << "memory " + formatBytes(rank.total());
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kUnavailable) throw;
    for (int r = 0; r < spec.strategy.mesh.size(); ++r) lines << "estimate unavailable";
  }
  return lines;
}

}  // namespace

class UiMeshViewTest : public QObject {
  Q_OBJECT

 private:
  std::unique_ptr<JobEditor> editor_;

  JobEditor& editor() {
    if (!editor_) {
      editor_ = std::make_unique<JobEditor>();
      editor_->resize(1200, 900);
      editor_->show();
      if (!QTest::qWaitForWindowExposed(editor_.get())) qFatal("the editor never showed");
    }
    return *editor_;
  }
  const MeshGrid& grid() { return editor().meshView()->grid(); }

 private slots:
  void eachRankIsDrawnAtItsCoordinatesWithWhatItHolds_data() {
    QTest::addColumn<int>("dp");
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("pp");
    QTest::addColumn<QString>("stages");  // strategy.pp.stages as JSON, "" for the balanced split
    QTest::newRow("2x2x1") << 2 << 2 << 1 << QString();
    QTest::newRow("2x1x2") << 2 << 1 << 2 << QString();
    QTest::newRow("2x2x2") << 2 << 2 << 2 << QString();
    QTest::newRow("1x2x2") << 1 << 2 << 2 << QString();
    QTest::newRow("4x1x1") << 4 << 1 << 1 << QString();
    QTest::newRow("1x4x1") << 1 << 4 << 1 << QString();
    QTest::newRow("1x1x3") << 1 << 1 << 3 << QString();
    QTest::newRow("2x1x2 explicit stages") << 2 << 1 << 2 << QString("[[0, 1], [2, 3, 4, 5]]");
  }

  // Every rank of the layout, at the coordinates the rank order gives it, with the blocks of its
  // stage (the spec's stages, else the engine's balanced split), its vocabulary rows and its
  // memory estimate; tp ranks side by side, dp replicas one under another, pp stages as bands.
  void eachRankIsDrawnAtItsCoordinatesWithWhatItHolds() {
    QFETCH(int, dp);
    QFETCH(int, tp);
    QFETCH(int, pp);
    QFETCH(QString, stages);
    JobEditor& e = editor();
    nlohmann::json document = gptOnMesh(dp, tp, pp);
    if (!stages.isEmpty())
      document["strategy"]["pp"]["stages"] = nlohmann::json::parse(stages.toStdString());
    e.setDocument(document);
    settle();
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));
    QVERIFY(e.fieldError("strategy.mesh").isEmpty());
    const JobSpec& spec = *e.spec();
    QCOMPARE(spec.strategy.mesh, (MeshSpec{.dp = dp, .tp = tp, .pp = pp}));
    QCOMPARE(e.meshView()->sizeBox(MeshDim::kDp)->value(), dp);
    QCOMPARE(e.meshView()->sizeBox(MeshDim::kTp)->value(), tp);
    QCOMPARE(e.meshView()->sizeBox(MeshDim::kPp)->value(), pp);
    QCOMPARE(grid().rankCount(), dp * tp * pp);
    QVERIFY(grid().explanation().isEmpty());

    // Each stage's blocks: as written, else the engine's balanced split by parameter count; in
    // model order, every block once.
    const ModelDescription model = describeModel(spec.model);
    std::vector<std::pair<size_t, size_t>> stage_blocks;
    if (!stages.isEmpty()) {
      stage_blocks = {{0, 2}, {2, 6}};
    } else {
      std::vector<int64_t> parameters;
      for (const ModelBlock& block : model.blocks) parameters.push_back(block.parameters);
      const std::vector<size_t> starts = balancedSplit(parameters, pp);
      for (size_t s = 0; s < starts.size(); ++s)
        stage_blocks.emplace_back(starts[s],
                                  s + 1 < starts.size() ? starts[s + 1] : parameters.size());
    }
    QCOMPARE(static_cast<int>(stage_blocks.size()), pp);
    QCOMPARE(stage_blocks.front().first, size_t{0});
    QCOMPARE(stage_blocks.back().second, model.blocks.size());
    for (size_t s = 1; s < stage_blocks.size(); ++s)
      QCOMPARE(stage_blocks[s].first, stage_blocks[s - 1].second);

    const QStringList memory = expectedMemoryLines(spec);
    QCOMPARE(memory.size(), dp * tp * pp);
    const QRect drawing = grid().rect();
    for (int p = 0; p < pp; ++p) {
      const QRect band = grid().stageRect(p);
      QVERIFY2(drawing.contains(band),
               qPrintable(QString("stage %1 at %2,%3 %4x%5 in a %6x%7 drawing")
                              .arg(p)
                              .arg(band.x())
                              .arg(band.y())
                              .arg(band.width())
                              .arg(band.height())
                              .arg(drawing.width())
                              .arg(drawing.height())));
      if (p > 0) QVERIFY2(band.top() > grid().stageRect(p - 1).bottom(), "stages out of order");
      for (int d = 0; d < dp; ++d) {
        for (int t = 0; t < tp; ++t) {
          // tp fastest, then dp, then pp.
          const int rank = t + tp * (d + dp * p);
          const QString at = QString("rank %1").arg(rank);
          const QStringList lines = grid().rankLines(rank);
          const auto [first, end] = stage_blocks[static_cast<size_t>(p)];
          const int64_t vocabulary = spec.model.vocab_size;
          QStringList expected = {at, QString("dp %1 · tp %2 · pp %3").arg(d).arg(t).arg(p),
                                  blocksText(first, end),
                                  tp == 1 ? QString("vocab: all %1").arg(vocabulary)
                                          : QString("vocab [%1, %2)")
                                                .arg(t * vocabulary / tp)
                                                .arg((t + 1) * vocabulary / tp),
                                  memory[rank]};
          QCOMPARE(lines, expected);
          // Where it is drawn: in its stage's band, right of the tp rank before it in its row,
          // under the replica before it.
          const QRect box = grid().rankRect(rank);
          QVERIFY2(band.contains(box), qPrintable(at));
          QVERIFY2(grid().rankLinesFit(rank),
                   qPrintable(at + ": a line is cut: " + lines.join('|')));
          // The tp ranks of a row side by side: beside the one before, or, where the row is
          // wider than the form, at the start of the row's next line just under it.
          if (t > 0) {
            const QRect before = grid().rankRect(rank - 1);
            const bool beside = box.top() == before.top() && box.left() > before.right() &&
                                box.left() - before.right() <= 4;
            const bool next_line = box.top() > before.bottom() &&
                                   box.top() - before.bottom() <= 4 &&
                                   box.left() == grid().rankRect(rank - t).left();
            QVERIFY2(beside || next_line, qPrintable(at + ": not beside the tp rank before it"));
          }
          if (d > 0)
            QVERIFY2(box.top() > grid().rankRect(rank - tp).bottom(),
                     qPrintable(at + ": not under the replica before it"));
        }
      }
    }
    // The vocabulary rows of a replica's tp ranks cover the vocabulary once.
    if (tp > 1) {
      int64_t covered = 0;
      for (int t = 0; t < tp; ++t) {
        const int64_t from = t * spec.model.vocab_size / tp;
        QCOMPARE(from, covered);
        covered = (t + 1) * spec.model.vocab_size / tp;
      }
      QCOMPARE(covered, spec.model.vocab_size);
    }
    // Where the estimate has no figure for the layout, the note says why.
    QCOMPARE(e.meshView()->noteText().isEmpty(), !memory.front().startsWith("estimate"));
    saveGrab(e, "mesh-" + QString(QTest::currentDataTag()).replace(' ', '-'));
  }

  void aBadLayoutIsExplainedBesideTheSizesAndInTheDrawing_data() {
    QTest::addColumn<QString>("base");   // the 2x2x1 GPT, or the shipped DDP MLP on 2x2x1
    QTest::addColumn<QString>("patch");  // a JSON merge patch on it
    QTest::addColumn<QString>("path");   // where the parser puts the problem
    QTest::newRow("the product is not the world size") << "gpt"
                                                       << R"({"strategy": {"mesh": {"pp": 2}}})"
                                                       << "strategy.mesh";
    QTest::newRow("fewer ranks than the product")
        << "gpt"
        << R"({"launch": {"hosts": [{"host": "localhost", "ranks": 3}]}})"
        << "strategy.mesh";
    QTest::newRow("heads not divisible by tp") << "gpt"
                                               << R"({"model": {"heads": 3, "dim": 96}})"
                                               << "strategy.mesh.tp";
    QTest::newRow("vocabulary not divisible by tp") << "gpt"
                                                    << R"({"model": {"vocab_size": 257}})"
                                                    << "strategy.mesh.tp";
    // The GPT of one block has 3 (the embedding, the block, the head).
    QTest::newRow("fewer blocks than stages")
        << "gpt"
        << R"({"strategy": {"mesh": {"dp": 1, "tp": 1, "pp": 4}, "pp": {"schedule": "1f1b"}},
               "model": {"layers": 1}, "train": {"micro_batches": 4}})"
        << "strategy.mesh.pp";
    QTest::newRow("tp on a model without tensor parallelism") << "mlp"
                                                              << "{}"
                                                              << "strategy.mesh.tp";
  }

  // Each bad layout: the parser's problem at its field is shown beside the sizes, the drawing
  // shows it in the grid's place (no grid of a layout that cannot run), Launch is disabled; the
  // layout fixed, the grid is back.
  void aBadLayoutIsExplainedBesideTheSizesAndInTheDrawing() {
    QFETCH(QString, base);
    QFETCH(QString, patch);
    QFETCH(QString, path);
    JobEditor& e = editor();
    nlohmann::json document = gptOnMesh(2, 2, 1);
    if (base == "mlp") {
      document = exampleFile("ddp_mlp");
      document["strategy"] = gptOnMesh(2, 2, 1)["strategy"];
      document["launch"]["hosts"][0]["ranks"] = 4;
    }
    document.merge_patch(nlohmann::json::parse(patch.toStdString()));
    e.setDocument(document);
    QVERIFY(!e.spec().has_value());
    QString message;
    for (const SpecProblem& problem : e.problems())
      if (problem.path == path.toStdString()) message = QString::fromStdString(problem.message);
    QVERIFY2(!message.isEmpty(), qPrintable(path + " has no problem in: " + problemsOf(e)));
    QVERIFY2(e.fieldError(path.toStdString()).contains(message),
             qPrintable(e.fieldError(path.toStdString())));
    QCOMPARE(grid().rankCount(), 0);
    QVERIFY2(grid().explanation().contains(path + ": " + message),
             qPrintable(grid().explanation()));
    QVERIFY(!e.launchButton()->isEnabled());
    saveGrab(e, "mesh-bad-" + QString(QTest::currentDataTag()).replace(' ', '-'));

    e.setDocument(gptOnMesh(2, 2, 1));
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));
    QCOMPARE(grid().rankCount(), 4);
    QVERIFY(grid().explanation().isEmpty());
    QVERIFY(e.fieldError("strategy.mesh").isEmpty());
  }

  // The sizes are strategy.mesh's: a flat strategy (before the mesh) is shown as its mesh; a
  // change is written into the spec (the strategy then in the mesh's form, dp left to the parser
  // so that it follows tp and pp); a dp set makes an invalid product, explained until set back.
  void theSizesEditTheSpecsMesh() {
    JobEditor& e = editor();
    nlohmann::json flat = exampleFile("gpt_text");
    flat["strategy"] = {{"kind", "ddp"}};  // on 2 ranks
    e.setDocument(flat);
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));
    QSpinBox* dp = e.meshView()->sizeBox(MeshDim::kDp);
    QSpinBox* tp = e.meshView()->sizeBox(MeshDim::kTp);
    QCOMPARE(dp->value(), 2);
    QCOMPARE(tp->value(), 1);
    QCOMPARE(grid().rankCount(), 2);
    QCOMPARE(e.field("strategy.mesh.tp"), tp);

    tp->setValue(2);
    const nlohmann::json& strategy = e.document()["strategy"];
    QVERIFY2(!strategy.contains("kind") && strategy["mesh"]["tp"] == 2 &&
                 !strategy["mesh"].contains("dp"),
             strategy.dump().c_str());
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));
    QCOMPARE(e.spec()->strategy.mesh, (MeshSpec{.dp = 1, .tp = 2, .pp = 1}));
    QCOMPARE(dp->value(), 1);
    QCOMPARE(grid().rankCount(), 2);
    QCOMPARE(grid().rankLines(1).at(1), QString("dp 0 · tp 1 · pp 0"));

    dp->setValue(2);  // 2 x 2 x 1 on 2 ranks
    QVERIFY(e.document()["strategy"]["mesh"]["dp"] == 2);
    QVERIFY(!e.spec().has_value());
    QVERIFY(!e.fieldError("strategy.mesh").isEmpty());
    QCOMPARE(grid().rankCount(), 0);
    dp->setValue(1);
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));
    QCOMPARE(grid().rankCount(), 2);
    QVERIFY(e.fieldError("strategy.mesh").isEmpty());

    // dp left out: the parser's world / (tp * pp).
    nlohmann::json inferred = gptOnMesh(1, 2, 1, 4);
    inferred["strategy"]["mesh"].erase("dp");
    e.setDocument(inferred);
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));
    QCOMPARE(dp->value(), 2);
    QCOMPARE(grid().rankCount(), 4);
    // A program job has no mesh drawn here.
    nlohmann::json program = exampleFile("torch_ddp");
    e.setDocument(program);
    QVERIFY(!e.meshView()->isVisibleTo(&e));
  }
};

QTEST_MAIN(UiMeshViewTest)
#include "ui_mesh_view_test.moc"
