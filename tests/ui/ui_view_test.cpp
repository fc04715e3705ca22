// The desktop application driven through its real widgets (offscreen), with real runs launched
// through `ringmaster run` into a real SQLite file: the first window starting from an example that
// launches as it is, filling the job editor and launching a local 4-rank DDP run whose charts
// fill while it streams, validation messages next to bad fields and beside Launch, cancelling
// only once confirmed, a past run opened in a fresh window, the pipeline view of a 4-stage 1F1B
// run, two runs compared, and a failed run showing its root cause (issue 15's first hour: each
// layout fault it names is checked here on the widget that had it).
//
// RINGMASTER_UI_GRABS=DIR saves a PNG of the window at the main steps, to look at the layout.
#include <QAbstractItemModelTester>
#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDockWidget>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPointer>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTableWidget>
#include <QTest>
#include <QTextBlock>
#include <csignal>
#include <map>

#include "charts/chart_table.h"
#include "common/read_only_fs.h"
#include "common/test_paths.h"
#include "core/error.h"
#include "data/background_jobs.h"
#include "data/run_snapshot.h"
#include "db/database.h"
#include "db/statement.h"
#include "main_window.h"
#include "models/comm_ops_model.h"
#include "models/format.h"
#include "models/rank_table_model.h"
#include "models/run_list_model.h"
#include "query/runs.h"
#include "query/summary.h"
#include "spec/memory_estimate.h"
#include "spec/spec_fields.h"
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

// With RINGMASTER_UI_GRABS set, the widget as drawn, for a person to look at.
// The titles of the charts a run view shows, and of the chart table's that apply to a run.
QStringList chartTitles(const RunView& view) {
  QStringList titles;
  for (const MetricChart* chart : view.charts()) titles << chart->title();
  return titles;
}
QStringList tableTitles(const ChartRunFacts& facts) {
  QStringList titles;
  for (const ChartSpec& chart : chartsFor(facts)) titles << QString::fromStdString(chart.title);
  return titles;
}

// The metrics a run recorded (the run report's), which decide its charts.
ChartRunFacts recordedFacts(const std::string& db_path, int64_t run) {
  storage::AllowQueriesOnThisThread the_tests_own_queries;
  storage::Database db(db_path);
  return {.metrics = storage::metricNames(db, run)};
}

void saveGrab(QWidget& widget, const QString& name) {
  const QString dir = qEnvironmentVariable("RINGMASTER_UI_GRABS");
  if (dir.isEmpty()) return;
  QDir().mkpath(dir);
  QTest::qWait(200);
  widget.grab().save(QDir(dir).filePath(name + ".png"));
}

nlohmann::json exampleFile(const QString& name) {
  QFile file(QString::fromUtf8(ringmaster::testSourceDir()) + "/resources/examples/" + name +
             ".json");
  if (!file.open(QIODevice::ReadOnly)) return {};
  return nlohmann::json::parse(file.readAll().toStdString(), nullptr, false);
}

// Whether every column of the table is at least as wide as each of its cells' text.
QString cutCells(const QTableView& table) {
  QStringList cut;
  const QAbstractItemModel& model = *table.model();
  for (int c = 0; c < model.columnCount(); ++c)
    for (int r = 0; r < model.rowCount(); ++r)
      if (const QString text = model.index(r, c).data().toString();
          table.columnWidth(c) < table.fontMetrics().horizontalAdvance(text))
        cut << QString("column %1 (%2 px): %3").arg(c).arg(table.columnWidth(c)).arg(text);
  return cut.join("; ");
}

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
    installGuiThreadQueryCheck();  // issue 17: every view reads off the GUI thread
  }

  void cleanupTestCase() {
    QTRY_COMPARE_WITH_TIMEOUT(window().activeLaunches(), 0, 30000);
    window_.reset();
  }

  // Issue 15: the first window showed an empty editor whose Launch did nothing and said nothing.
  void theFirstWindowStartsFromAnExampleThatLaunchesAsItIs() {
    MainWindow& w = window();
    JobEditor& editor = *w.jobEditor();
    QCOMPARE(w.tabs()->currentWidget(), static_cast<QWidget*>(&editor));
    saveGrab(w, "first-window");
    QStringList offered;
    for (int i = 0; i < editor.exampleChoice()->count(); ++i)
      offered << editor.exampleChoice()->itemText(i);
    for (const QString& shipped :
         QDir(QString::fromUtf8(ringmaster::testSourceDir()) + "/resources/examples")
             .entryList({"*.json"}))
      QVERIFY2(offered.contains(QFileInfo(shipped).completeBaseName()),
               qPrintable(shipped + " is not offered: " + offered.join(", ")));
    QCOMPARE(offered.first(), QString("single_mlp"));
    QVERIFY(editor.document() == exampleFile("single_mlp"));
    QVERIFY(editor.launchButton()->isEnabled());
    QVERIFY2(editor.launchStatusText().startsWith("Ready"), qPrintable(editor.launchStatusText()));
    // Each example, chosen in the list, is the shipped file; the strategies' examples launch as
    // they are, and any problem an example has is listed beside Launch.
    for (int i = 0; i < editor.exampleChoice()->count(); ++i) {
      emit editor.exampleChoice()->activated(i);
      const QString name = editor.exampleChoice()->itemText(i);
      QVERIFY2(editor.document() == exampleFile(name), qPrintable(name));
      if (name.endsWith("_mlp"))
        QVERIFY2(editor.spec().has_value(), qPrintable(name + ": " + editor.launchStatusText()));
      QCOMPARE(editor.launchButton()->isEnabled(), editor.problems().empty());
      for (const SpecProblem& problem : editor.problems())
        QVERIFY2(editor.launchStatusText().contains(QString::fromStdString(problem.path)),
                 qPrintable(editor.launchStatusText()));
    }
    // Launch from the first example, unchanged.
    emit editor.exampleChoice()->activated(0);
    QSignalSpy opened(&w, &MainWindow::runOpened);
    QSignalSpy finished(&w, &MainWindow::launchFinished);
    QTest::mouseClick(editor.launchButton(), Qt::LeftButton);
    QVERIFY2(
        opened.wait(60000) || !opened.isEmpty(),
        qPrintable(
            "Launch did not start the example: " + w.statusBar()->currentMessage() + " | " +
            editor.launchStatusText() +
            (finished.isEmpty()
                 ? QString(" | still launching")
                 : QString(" | ended with exit code %1").arg(finished.first().at(1).toInt()))));
    const int64_t run = opened.first().at(0).toLongLong();
    QVERIFY2(!w.statusBar()->currentMessage().contains("Launching"),
             qPrintable(w.statusBar()->currentMessage()));
    QVERIFY2(finished.wait(kRunTimeoutMs), "the example's run never ended");
    QCOMPARE(finished.first().at(1).toInt(), 0);
    QCOMPARE(w.statusBar()->currentMessage(), QString("Run %1 completed").arg(run));
    RunView* view = w.runView(run);
    QTRY_COMPARE_WITH_TIMEOUT(view->statusText(), QString("completed"), 10000);
    QTRY_COMPARE_WITH_TIMEOUT(view->progressText(), QString("step 300 / 300"), 10000);
    // The header's progress is readable: its text fits where it is drawn, beside the bar.
    auto* progress_text = view->findChild<QLabel*>("runProgressText");
    QVERIFY(progress_text->isVisible());
    QVERIFY2(progress_text->width() >= progress_text->sizeHint().width(),
             qPrintable(QString("%1 px for %2")
                            .arg(progress_text->width())
                            .arg(progress_text->sizeHint().width())));
    QVERIFY(!view->findChild<QProgressBar*>("runProgress")->isTextVisible());
    // A finished run's empty charts (one rank: no communication) say so, not "no data yet".
    QTRY_VERIFY_WITH_TIMEOUT(view->chart("Loss")->pointCount() > 0, 10000);
    QTest::qWait(100);  // the charts are updated one per event-loop turn
    QCOMPARE(view->chart("Communication time by op")->pointCount(), 0);
    // Its charts are the chart table's for the metrics it recorded (issues 31, 33): no loss
    // scale (fp32).
    QCOMPARE(chartTitles(*view), tableTitles(recordedFacts(db_, run)));
    QVERIFY(view->chart("Loss scale") == nullptr);
    for (MetricChart* chart : view->charts()) {
      const QString title = chart->chart()->title();
      QVERIFY2(!title.contains("no data yet"), qPrintable(title));
      if (chart->pointCount() == 0)
        QVERIFY2(title.contains("not recorded in this run"), qPrintable(title));
    }
    // The history shows the run's whole name, in a narrow dock too.
    w.resizeDocks({w.findChild<QDockWidget*>("historyDock")}, {300}, Qt::Horizontal);
    QTest::qWait(50);
    QTableView* history = w.history()->table();
    const int row = w.history()->model()->rowOfRun(run);
    QVERIFY(row >= 0);
    const QString name = w.history()->model()->index(row, RunListModel::kName).data().toString();
    QVERIFY2(
        history->columnWidth(RunListModel::kName) >= history->fontMetrics().horizontalAdvance(name),
        qPrintable(
            QString("%1 px for %2").arg(history->columnWidth(RunListModel::kName)).arg(name)));
    saveGrab(w, "first-run");
    w.resizeDocks({w.findChild<QDockWidget*>("historyDock")}, {470}, Qt::Horizontal);
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
    // Beside Launch: why it is disabled.
    QVERIFY2(editor.launchStatusText().contains("train.steps: ") &&
                 editor.launchStatusText().contains("-3"),
             qPrintable(editor.launchStatusText()));
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

    QVERIFY(editor.launchStatusText().startsWith("Ready"));
    json->setPlainText("{ not json");
    QVERIFY(!editor.launchButton()->isEnabled());
    QVERIFY(editor.findChild<QLabel*>("jsonError")->text().startsWith("JSON:"));
    QVERIFY2(editor.launchStatusText().contains("JSON"), qPrintable(editor.launchStatusText()));
  }

  // The form is the spec's field description (spec/spec_fields.h): a row per field it can edit,
  // with the editor its type asks for, the described choices and help; the host entries are the
  // hosts table's columns; a kind with a choice (model.kind once a second model is registered)
  // gets its menu with nothing written in the editor.
  void theEditorsFormIsTheSpecsDescription() {
    JobEditor& editor = *window().jobEditor();
    editor.setDocument(exampleSpec("ddp_mlp", 40));
    QStringList host_columns;
    for (const SpecField& spec : specFields()) {
      const QString path = QString::fromStdString(spec.path);
      QWidget* widget = editor.field(spec.path);
      if (spec.path.starts_with("launch.hosts[].")) {
        host_columns << QString::fromStdString(spec.label);
        QVERIFY2(!widget, qPrintable(path));
        continue;
      }
      if (spec.type == FieldType::kHostList || spec.type == FieldType::kIntegerListList ||
          (spec.type == FieldType::kChoice && spec.choices.size() < 2)) {
        QVERIFY2(!widget, qPrintable(path));
        continue;
      }
      QVERIFY2(widget, qPrintable(path));
      if (spec.type == FieldType::kChoice) {
        auto* combo = qobject_cast<QComboBox*>(widget);
        QVERIFY2(combo, qPrintable(path));
        QStringList items, choices;
        for (int i = 0; i < combo->count(); ++i) items << combo->itemText(i);
        for (const std::string& choice : spec.choices) choices << QString::fromStdString(choice);
        QCOMPARE(items, choices);
      } else if (spec.type == FieldType::kBoolean) {
        auto* check = qobject_cast<QCheckBox*>(widget);
        QVERIFY2(check, qPrintable(path));
        // What it does, beside it, wrapped to the form's width (issue 33: not the box's own
        // one-line text, which widened the window).
        auto* help = editor.findChild<QLabel*>(path + ".help");
        QVERIFY2(help && help->isVisibleTo(check->parentWidget()), qPrintable(path));
        QCOMPARE(help->text(), QString::fromStdString(spec.help));
        QVERIFY(help->wordWrap());
      } else if (spec.type == FieldType::kTextList || spec.type == FieldType::kTextMap) {
        // One item (program.args) or NAME=VALUE (launch.env) per line.
        QVERIFY2(qobject_cast<QPlainTextEdit*>(widget), qPrintable(path));
        QVERIFY2(widget->toolTip().startsWith(QString::fromStdString(spec.help)), qPrintable(path));
      } else if (path.startsWith("strategy.mesh.")) {
        // The mesh's sizes: number boxes of the mesh view, beside its drawing (issue 34).
        QVERIFY2(qobject_cast<QSpinBox*>(widget), qPrintable(path));
        QCOMPARE(widget->toolTip(), QString::fromStdString(spec.help));
      } else {
        QVERIFY2(qobject_cast<QLineEdit*>(widget), qPrintable(path));
        QCOMPARE(widget->toolTip(), QString::fromStdString(spec.help));
      }
    }
    auto* hosts = editor.findChild<QTableWidget*>("hostsTable");
    QStringList headers;
    for (int c = 0; c < hosts->columnCount(); ++c)
      headers << hosts->horizontalHeaderItem(c)->text();
    QCOMPARE(headers, host_columns);
    // Every registered model kind is offered, and choosing one writes it.
    auto* model = qobject_cast<QComboBox*>(editor.field("model.kind"));
    QVERIFY(model);
    QCOMPARE(model->count(), static_cast<int>(findSpecField("model.kind")->choices.size()));
    model->setCurrentIndex(model->count() - 1);
    emit model->activated(model->currentIndex());
    QCOMPARE(QString::fromStdString(editor.document()["model"]["kind"].get<std::string>()),
             model->currentText());
  }

  void theEditorsHostsAndKindsEditTheSpec() {
    JobEditor& editor = *window().jobEditor();
    window().tabs()->setCurrentWidget(&editor);  // laid out as a user sees it
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
    // And back (issue 15: the required Classes row was hidden, Launch disabled without a word):
    // every required field is shown with its message, and each is listed beside Launch.
    kind->setCurrentText("synthetic");
    emit kind->activated(kind->currentIndex());
    QVERIFY(!editor.launchButton()->isEnabled());
    saveGrab(*window().jobEditor(), "editor-back-to-synthetic");
    for (const char* required : {"data.samples", "data.features", "data.classes"}) {
      QWidget* field = editor.field(required);
      QVERIFY2(field->isVisibleTo(&editor), required);
      // Laid out at its full height, not squeezed to nothing.
      QTRY_VERIFY2(field->height() >= field->minimumSizeHint().height() &&
                       field->parentWidget()->height() >= field->height(),
                   qPrintable(QString("%1: %2 px").arg(required).arg(field->height())));
      QVERIFY2(editor.fieldError(required).contains("required"), required);
      QVERIFY2(editor.launchStatusText().contains(QString("%1: required").arg(required)),
               qPrintable(editor.launchStatusText()));
    }
    QVERIFY(!editor.problems().empty());
    for (const SpecProblem& problem : editor.problems()) {
      QVERIFY2(editor.launchStatusText().contains(QString::fromStdString(problem.path)),
               problem.path.c_str());
      if (QWidget* field = editor.field(problem.path))
        QVERIFY2(field->isVisibleTo(&editor), problem.path.c_str());
    }
    // A field of another kind written in the JSON stays visible with the parser's message.
    nlohmann::json stray = exampleSpec("ddp_mlp", 40);
    stray["data"]["images"] = "train-images-idx3-ubyte";
    editor.setDocument(stray);
    QVERIFY(editor.field("data.images")->isVisibleTo(&editor));
    QVERIFY2(!editor.fieldError("data.images").isEmpty(), "no message next to data.images");
    editor.setDocument(exampleSpec("ddp_mlp", 40));
    // The form fits its column (no horizontal scrolling) and the hosts table shows its Ranks.
    QTest::qWait(50);
    auto* scroll = editor.findChild<QScrollArea*>("formScroll");
    QVERIFY2(scroll->viewport()->width() >= scroll->widget()->minimumSizeHint().width(),
             qPrintable(QString("%1 px for a form of at least %2")
                            .arg(scroll->viewport()->width())
                            .arg(scroll->widget()->minimumSizeHint().width())));
    QVERIFY2(hosts->columnViewportPosition(1) + hosts->columnWidth(1) <= hosts->viewport()->width(),
             qPrintable(QString("Ranks at %1 + %2 of %3 px")
                            .arg(hosts->columnViewportPosition(1))
                            .arg(hosts->columnWidth(1))
                            .arg(hosts->viewport()->width())));
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
    // Switch the mesh to a pipeline in the form: its 4 ranks are pipeline stages (dp, left out,
    // is what the world leaves: 1).
    auto* pp = qobject_cast<QSpinBox*>(editor.field("strategy.mesh.pp"));  // the mesh view's
    QVERIFY(pp);
    pp->setValue(4);
    QVERIFY(editor.document()["strategy"]["mesh"]["pp"] == 4);
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

  // The estimate follows the GPT's fields and activation checkpointing as they are edited: the
  // table's total is estimateMemory's for the spec the form holds.
  void theEditorsMemoryEstimateFollowsTheGptAndActivationCheckpointing() {
    JobEditor& editor = *window().jobEditor();
    nlohmann::json document = exampleSpec("single_mlp", 40);
    document["model"] = {{"kind", "gpt"}, {"vocab_size", 256}, {"context", 64},
                         {"layers", 2},   {"heads", 2},        {"dim", 64}};
    document["data"] = {{"kind", "text"}, {"path", "corpus.txt"}};
    editor.setDocument(document);
    QVERIFY2(editor.spec().has_value(),
             editor.problems().empty() ? "" : editor.problems()[0].message.c_str());
    auto total = [&] { return formatBytes(estimateMemory(*editor.spec()).at(0).total()); };
    const QString plain = editor.memoryText();
    QVERIFY2(plain.contains(total()), qPrintable(plain));
    QVERIFY(!plain.contains("recomputed block"));

    auto* context = qobject_cast<QLineEdit*>(editor.field("model.context"));
    QVERIFY(context);
    context->selectAll();
    QTest::keyClicks(context, "128");
    QVERIFY(editor.spec().has_value());
    QCOMPARE(editor.spec()->model.context, 128);
    const QString longer = editor.memoryText();
    QVERIFY(longer != plain);
    QVERIFY2(longer.contains(total()), qPrintable(longer));

    // A gpt's model.layers is one integer (a list field for the other kinds): typed, it is a count.
    auto* layers = qobject_cast<QLineEdit*>(editor.field("model.layers"));
    QVERIFY(layers);
    layers->selectAll();
    QTest::keyClicks(layers, "3");
    QVERIFY2(editor.spec().has_value(),
             editor.problems().empty() ? "" : editor.problems()[0].message.c_str());
    QCOMPARE(editor.spec()->model.block_count, 3);
    QVERIFY(editor.memoryText() != longer);

    // bf16 autocast keeps the matrix products' inputs in 16 bits: the activations shrink.
    const QString fp32 = editor.memoryText();
    const double fp32_total = estimateMemory(*editor.spec()).at(0).total();
    auto* precision = qobject_cast<QComboBox*>(editor.field("train.precision"));
    QVERIFY(precision);
    precision->setCurrentText("bf16");
    emit precision->activated(precision->currentIndex());
    // Choosing bf16 leaves no train.loss_scale behind (fp16's alone).
    QVERIFY2(editor.spec().has_value(),
             editor.problems().empty() ? "" : editor.problems()[0].message.c_str());
    QVERIFY(!editor.document()["train"].contains("loss_scale"));
    QVERIFY(editor.spec()->train.precision == Precision::kBf16);
    const QString bf16 = editor.memoryText();
    QVERIFY2(bf16.contains(total()), qPrintable(bf16));
    QVERIFY2(estimateMemory(*editor.spec()).at(0).total() < fp32_total, qPrintable(bf16));
    QVERIFY(bf16 != fp32);

    auto* checkpointing = qobject_cast<QCheckBox*>(editor.field("train.activation_checkpointing"));
    QVERIFY(checkpointing);
    checkpointing->click();
    QVERIFY(editor.spec().has_value());
    QVERIFY(editor.spec()->train.activation_checkpointing);
    const QString checkpointed = editor.memoryText();
    QVERIFY2(checkpointed.contains("recomputed block"), qPrintable(checkpointed));
    QVERIFY2(checkpointed.contains(total()), qPrintable(checkpointed));
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
      // Tokens/s from the step events (a classifier's sample is one token); no MFU, since the
      // host's processor has no known peak and the spec gives none.
      const QString tokens =
          view->rankModel()->index(r, RankTableModel::kTokensPerSecond).data().toString();
      QVERIFY2(tokens.toDouble() > 0, qPrintable(tokens));
      QCOMPARE(view->rankModel()->index(r, RankTableModel::kMfu).data().toString(), QString("–"));
    }
    QVERIFY2(view->figuresText().contains(" tokens/s") && !view->figuresText().contains("MFU") &&
                 view->figuresText().contains("learning rate 0.001") &&  // issue 33: its name
                 !view->figuresText().contains("loss scale"),            // fp16 only
             qPrintable(view->figuresText()));
    // The learning rate each step used (ddp_mlp's constant 1e-3), a point per step and rank.
    MetricChart* lr = view->chart("Learning rate");
    QVERIFY(lr);
    QTRY_VERIFY_WITH_TIMEOUT(lr->pointCount() == 4 * 150, 10000);
    QVERIFY(view->commModel()->rowCount() >= 1);
    QCOMPARE(view->commModel()->index(0, CommOpsModel::kOp).data().toString(),
             QString("all_reduce"));
    QCOMPARE(view->heatMap()->map().values.size(), size_t{4});
    // Three metrics over four ranks: a band per metric (the step, its compute and its exposed
    // communication), and the title says a point is one step's (this spec reports every step).
    MetricChart* step_time = view->chart("Step time");
    QCOMPARE(step_time->lineCount(), 3);
    QVERIFY2(step_time->shownTitle().startsWith("Step time (every step)"),
             qPrintable(step_time->shownTitle()));
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
    // "Export charts…" asks for the formats and the folder, and writes only what was chosen.
    view->tabs()->setCurrentIndex(0);
    QTest::mouseClick(view->findChild<QPushButton*>("exportCharts"), Qt::LeftButton);
    auto* dialog = view->findChild<QDialog*>("exportChartsDialog");
    QVERIFY2(dialog && dialog->isVisible(), "no export dialog");
    const QString chosen = dir_.filePath("chosen folder");
    dialog->findChild<QLineEdit*>("exportFolder")->setText(chosen);
    dialog->findChild<QCheckBox*>("exportPng")->setChecked(false);
    dialog->findChild<QCheckBox*>("exportSvg")->setChecked(true);
    QSignalSpy exported(view, &RunView::chartsExported);
    QTest::mouseClick(dialog->findChild<QDialogButtonBox*>()->button(QDialogButtonBox::Ok),
                      Qt::LeftButton);
    QCOMPARE(exported.count(), 1);
    const QStringList svgs = QDir(chosen).entryList(QDir::Files);
    QCOMPARE(svgs.size(), static_cast<qsizetype>(view->charts().size()));
    for (const QString& file : svgs) QVERIFY2(file.endsWith(".svg"), qPrintable(file));
    auto* note = view->findChild<QLabel*>("exportNote");
    QVERIFY2(note->toolTip().contains(QString("%1 files to %2").arg(svgs.size()).arg(chosen)),
             qPrintable(note->toolTip()));
    QVERIFY2(view->minimumSizeHint().width() < 800,  // the note does not widen the window
             qPrintable(QString::number(view->minimumSizeHint().width())));
    // The history lists it.
    QTRY_VERIFY_WITH_TIMEOUT(w.history()->model()->rowOfRun(ddp_run_) >= 0, 5000);
  }

  void aPastRunOpensInAFreshWindow() {
    QVERIFY(ddp_run_ > 0);
    MainWindow fresh({db_, ringmasterExecutable(), "ringmaster-ui-test"});
    fresh.resize(1200, 800);
    fresh.show();
    QVERIFY(fresh.history()->jobs()->waitForIdle());  // the history is read off the GUI thread
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
    // The Logs tab holds the run's recorded lines, one per line, the last one included (issue
    // 15: this once accepted an empty tab whenever the snapshot had no logs).
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database database(db_);
    const auto logs = storage::loadLogs(database, ddp_run_);
    QVERIFY2(!logs.empty(), "a 4-rank run recorded no log line");
    const QStringList shown = view->logText().split('\n');
    QCOMPARE(shown.size(), static_cast<qsizetype>(logs.size()));
    QVERIFY2(shown.last().endsWith(QString::fromStdString(logs.back().message)),
             qPrintable(shown.last()));
    QVERIFY2(shown.first().endsWith(QString::fromStdString(logs.front().message)),
             qPrintable(shown.first()));
  }

  // Issue 16: a database on a read-only file system (a team's share mounted read-only) is read by
  // every connection the window opens (the history, a run's snapshot and its data-version watch,
  // compare and pipeline), never refused for want of its -shm file.
  void aRunOnAReadOnlyFileSystemIsRead() {
    QVERIFY(ddp_run_ > 0);
    const std::string copy = dir_.filePath("copy/runs.db").toStdString();
    std::filesystem::create_directories(std::filesystem::path(copy).parent_path());
    {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      storage::Database database(db_);
      database.exec("VACUUM INTO '" + copy + "'");  // one self-contained file, no -wal
    }
    const int64_t run = ddp_run_;
    const int code = ringmaster::testing::onReadOnlyFileSystem(
        dir_.filePath("ro").toStdString(), copy, [run](const std::filesystem::path& path) {
          storage::AllowQueriesOnThisThread the_tests_own_queries;
          try {
            storage::Database writable(path.string());
            return 1;  // the file system is not read-only: the test would prove nothing
          } catch (const Error&) {
          }
          storage::Database watch(path.string(), storage::readingOptions(path.string()));
          if (storage::listRuns(watch).empty()) return 2;
          SnapshotRequest request;
          request.charts.push_back({.metrics = {"loss"}, .ranks = {0, 1, 2, 3}});
          const RunSnapshot snapshot = loadRunSnapshot(path.string(), run, request);
          if (snapshot.run().status != "completed") return 3;
          if (snapshot.charts.at(0).per_rank.at(3).buckets.size() != 150) return 4;
          return 0;
        });
    if (code == ringmaster::testing::kNoNamespaces)
      QSKIP("user and mount namespaces are not allowed here");
    QVERIFY2(code == 0, qPrintable(QString("1: the copy was writable, 2: no run listed, 3: the "
                                           "run not read, 4: its loss not read; got %1")
                                       .arg(code)));
  }

  // Issue 15: cancelling asks first; "keep it running" keeps it running.
  void cancellingAsksFirstAndKeepsTheRunWhenDeclined() {
    MainWindow& w = window();
    QSignalSpy opened(&w, &MainWindow::runOpened);
    QSignalSpy finished(&w, &MainWindow::launchFinished);
    nlohmann::json spec = exampleSpec("single_mlp", 100000);
    spec["name"] = "cancelled_on_purpose";
    QVERIFY(w.launch(spec));
    QVERIFY(opened.wait(60000));
    const int64_t run = opened.first().at(0).toLongLong();
    RunView* view = w.runView(run);
    // (Each wait also ends when the run does, so that a run failing for another reason fails
    // the test at once.)
    QTRY_VERIFY_WITH_TIMEOUT(
        view->snapshot() &&
            (view->snapshot()->report.summary.final_step >= 5 || finished.count() > 0),
        kRunTimeoutMs);
    QCOMPARE(finished.count(), 0);
    auto* cancel = view->findChild<QPushButton*>("cancelRun");
    QVERIFY(cancel->isVisible());
    QTest::mouseClick(cancel, Qt::LeftButton);
    QPointer<QMessageBox> question = w.findChild<QMessageBox*>("cancelConfirmation");
    QVERIFY2(question && question->isVisible(), "cancelling did not ask");
    QCOMPARE(question->defaultButton(), question->button(QMessageBox::No));
    question->button(QMessageBox::No)->click();
    const int64_t declined_at = view->snapshot()->report.summary.final_step;
    QTRY_VERIFY_WITH_TIMEOUT(
        view->snapshot()->report.summary.final_step >= declined_at + 20 || finished.count() > 0,
        kRunTimeoutMs);
    QCOMPARE(finished.count(), 0);
    QCOMPARE(view->statusText(), QString("running"));
    QCOMPARE(w.activeLaunches(), 1);
    // Ctrl+. asks the same; "Cancel the run" cancels it cleanly.
    QTRY_VERIFY_WITH_TIMEOUT(question.isNull(), 5000);  // the first question is gone
    QAction* cancel_action = nullptr;
    for (QAction* action : w.findChildren<QAction*>())
      if (action->shortcut() == QKeySequence("Ctrl+.")) cancel_action = action;
    QVERIFY(cancel_action);
    cancel_action->trigger();
    question = w.findChild<QMessageBox*>("cancelConfirmation");
    QVERIFY2(question && question->isVisible(), "Ctrl+. did not ask");
    question->button(QMessageBox::Yes)->click();
    QVERIFY2(finished.wait(60000), "the run did not stop within a minute of being cancelled");
    QCOMPARE(finished.first().at(1).toInt(), 130);
    QTRY_COMPARE_WITH_TIMEOUT(view->statusText(), QString("cancelled"), 10000);
    QVERIFY(!cancel->isVisible());
  }

  void thePipelineViewShowsTheMeasuredScheduleBesideThePlannedOne() {
    nlohmann::json spec = exampleSpec("pipeline_mlp", 6);
    const int64_t run = launchAndWait(spec, 0);
    QVERIFY2(run > 0, "the pipeline run did not complete");
    RunView* view = window().openRun(run);
    QTRY_VERIFY_WITH_TIMEOUT(view->snapshot() && view->snapshot()->run().status == "completed",
                             10000);
    PipelineView* pipeline = view->pipelineView();
    QVERIFY(view->tabs()->isTabVisible(view->tabs()->indexOf(pipeline)));
    view->tabs()->setCurrentWidget(pipeline);
    QVERIFY(pipeline->jobs()->waitForIdle());  // the step is read off the GUI thread
    QVERIFY(pipeline->shownStep().has_value());
    const GanttData& measured = pipeline->measured().data();
    QCOMPARE(measured.rows, 4);
    QCOMPARE(measured.bars.size(), size_t{4 * 8 * 2});  // F and B of 8 micro-batches on 4 stages
    std::map<std::pair<int, int>, const GanttBar*> forward;  // (stage, micro-batch)
    for (const GanttBar& bar : measured.bars) {
      QVERIFY(bar.end >= bar.start);
      QVERIFY(bar.micro_batch >= 0 && bar.micro_batch < 8);
      if (bar.phase == 'F') forward[{bar.row, bar.micro_batch}] = &bar;
    }
    // Bars are compute: a stage's forward starts once the previous stage's forward of the same
    // micro-batch ended (ranks on one host share one clock), and the stages after the first
    // waited for their inputs, drawn apart from their bars.
    for (const auto& [key, bar] : forward) {
      if (key.first == 0) continue;
      const GanttBar* before = forward.at({key.first - 1, key.second});
      QVERIFY2(bar->start >= before->end, qPrintable(QString("F%1 on stage %2 at %3, before %4")
                                                         .arg(key.second)
                                                         .arg(key.first)
                                                         .arg(bar->start)
                                                         .arg(before->end)));
    }
    QVERIFY(!measured.waits.empty());
    for (const GanttWait& wait : measured.waits) {
      QVERIFY(wait.row > 0 || wait.phase == 'B');  // stage 0 never waits for a forward input
      QVERIFY(wait.start <= wait.transfer_start && wait.transfer_start <= wait.end);
    }
    QCOMPARE(pipeline->planned().data().bars.size(), size_t{4 * 8 * 2});
    QVERIFY2(pipeline->bubbleText().contains("measured bubble") &&
                 pipeline->bubbleText().contains("ms for transfers") &&
                 pipeline->bubbleText().contains("theoretical 27.3%"),
             qPrintable(pipeline->bubbleText()));
    for (double b : measured.row_bubble) QVERIFY(b >= 0 && b < 1);
    // Issue 33: the third Gantt, the plan replayed with the step's measured stage costs (times in
    // ms, every action of the plan), and the gap split in words beside the three bubbles.
    const GanttData& replayed = pipeline->replayed().data();
    QVERIFY(pipeline->findChild<GanttChart*>("replayedGantt")->isVisible());
    QCOMPARE(replayed.bars.size(), size_t{4 * 8 * 2});
    QCOMPARE(replayed.time_unit, QString("ms"));
    QCOMPARE(replayed.row_bubble.size(), size_t{4});
    const QString split = pipeline->splitText();
    QCOMPARE(pipeline->findChild<QLabel*>("pipelineBubbleSplit")->text(), split);
    for (const char* words : {"planned with measured costs", "planned (unit costs) 27.3%",
                              "stage imbalance: +", "runtime overhead: ", "slowest stage: "})
      QVERIFY2(split.contains(words), qPrintable(split));
  }

  void comparingTwoRunsShowsFiguresAndSpecDifferences() {
    nlohmann::json spec = exampleSpec("ddp_mlp", 40);
    spec["name"] = "ddp_small_batch";
    spec["train"]["batch_size"] = 32;
    const int64_t other = launchAndWait(spec, 0);
    QVERIFY2(other > 0 && ddp_run_ > 0, "runs missing");
    CompareView* view = window().compare({ddp_run_, other});
    QVERIFY(view->jobs()->waitForIdle());  // the runs are read off the GUI thread
    QCOMPARE(view->summaryTable()->model()->columnCount(), 2);
    QCOMPARE(view->lossChart()->lineCount(), 2);
    QVERIFY(view->lossChart()->pointCount() > 0);
    QCOMPARE(view->throughputChart()->lineCount(), 2);
    QVERIFY(view->throughputChart()->pointCount() > 0);
    QStringList paths;
    for (int r = 0; r < view->differencesTable()->model()->rowCount(); ++r)
      paths << view->differencesTable()->model()->headerData(r, Qt::Vertical).toString();
    QVERIFY2(paths.contains("train.batch_size") && paths.contains("name") &&
                 paths.contains("train.steps"),
             qPrintable(paths.join(", ")));
    QVERIFY(!view->summaryTable()->model()->index(4, 0).data().toString().isEmpty());  // samples/s
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
      storage::AllowQueriesOnThisThread the_tests_own_queries;
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
    storage::AllowQueriesOnThisThread the_tests_own_queries;
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
    QTRY_VERIFY_WITH_TIMEOUT(view->snapshot() && view->snapshot()->report.summary.final_step >= 5,
                             kRunTimeoutMs);
    // Rank 2's worker: its command line names this run's spec and RANK=2 is in its environment.
    const QString spec_path = QString("-runs/run-%1/spec.json").arg(run);
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
    // Each column is as wide as its longest cell (issue 15: they were cut).
    view->tabs()->setCurrentIndex(2);  // Communication
    QTest::qWait(100);
    saveGrab(w, "flight-recorder");
    QVERIFY(view->flightRecorderTable()->model()->rowCount() > 0);
    const QString cut = cutCells(*view->flightRecorderTable());
    QVERIFY2(cut.isEmpty(), qPrintable(cut));
  }

  // An fp16 run whose first steps overflow (a loss scale of 2^40): the Loss scale chart has a
  // point per step, and the header gives the last scale and the count of skipped steps as stored.
  void anFp16RunChartsItsLossScaleAndCountsTheSkippedSteps() {
    nlohmann::json spec = exampleSpec("single_mlp", 12);
    spec["name"] = "fp16_loss_scale";
    spec["train"]["precision"] = "fp16";
    spec["train"]["loss_scale"] = {{"init", 1099511627776.0}};
    const int64_t run = launchAndWait(spec, 0);
    QVERIFY2(run > 0, "the fp16 run did not complete");
    RunView* view = window().openRun(run);
    QVERIFY(view);
    QTRY_COMPARE_WITH_TIMEOUT(view->statusText(), QString("completed"), 10000);
    // Its charts are the chart table's for the metrics it recorded (issues 31, 33): the loss
    // scale too.
    QTRY_COMPARE_WITH_TIMEOUT(chartTitles(*view), tableTitles(recordedFacts(db_, run)), 10000);
    MetricChart* scale = view->chart("Loss scale");
    QVERIFY(scale);
    QTRY_COMPARE_WITH_TIMEOUT(scale->pointCount(), 12, 10000);
    int64_t skipped = 0;
    double last_scale = 0;
    {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      storage::Database database(db_);
      storage::Statement sum(database,
                             "SELECT sum(skipped), max(step) FROM steps WHERE run_id = ?");
      sum.bind(1, run);
      QVERIFY(sum.run());
      skipped = sum.columnInt(0);
      storage::Statement last(database,
                              "SELECT loss_scale FROM steps WHERE run_id = ? AND step = 12");
      last.bind(1, run);
      QVERIFY(last.run());
      last_scale = last.columnDouble(0);
    }
    QVERIFY2(skipped >= 1, "a scale of 2^40 did not overflow fp16");
    const QString expected = QString("loss scale %1 (%2 skipped step%3)")
                                 .arg(last_scale, 0, 'g', 17)
                                 .arg(skipped)
                                 .arg(skipped == 1 ? "" : "s");
    QVERIFY2(view->figuresText().contains(expected),
             qPrintable(view->figuresText() + " lacks " + expected));
  }

  void aFailedRunShowsItsRootCause() {
    // Initial weights that are not there: the ranks fail as they start (missing data files are
    // refused before a run is recorded).
    nlohmann::json spec = exampleSpec("ddp_mlp", 20);
    spec["name"] = "missing_weights";
    spec["model"]["init_checkpoint"] = dir_.filePath("no-such-weights.safetensors").toStdString();
    const int64_t run = launchAndWait(spec, 1);
    QVERIFY2(run > 0, "the run did not fail as expected");
    // Its view in a window of a set size: the banner must not make the window grow.
    window().tabs()->setCurrentWidget(window().jobEditor());
    window().resize(1200, 760);
    QTest::qWait(100);
    const QSize before = window().size();
    RunView* view = window().openRun(run);
    QTRY_COMPARE_WITH_TIMEOUT(view->statusText(), QString("failed"), 10000);
    const QString cause = view->rootCauseText();
    QVERIFY2(cause.contains("Root cause") && cause.contains("no-such-weights"), qPrintable(cause));
    QVERIFY2(cause.contains("rank "), qPrintable(cause));
    QTest::qWait(100);
    saveGrab(window(), "failed-run");
    QCOMPARE(window().size(), before);
    // ... and the charts keep their size: their tab scrolls instead.
    for (MetricChart* chart : view->charts())
      QVERIFY2(chart->height() >= chart->minimumHeight(),
               qPrintable(QString("%1: %2 px").arg(chart->title()).arg(chart->height())));
    // The Logs tab opens at its first error, at the left edge of the line (issue 15: it opened
    // scrolled to the far end of the longest line).
    // (In a window of its own, narrow enough that the error lines are wider than the log.)
    RunView narrow(db_, run);
    narrow.resize(760, 560);
    narrow.show();
    QVERIFY(QTest::qWaitForWindowExposed(&narrow));
    QTRY_VERIFY_WITH_TIMEOUT(narrow.snapshot() != nullptr, 10000);
    narrow.tabs()->setCurrentIndex(narrow.tabs()->count() - 1);
    QTest::qWait(100);
    saveGrab(narrow, "failed-run-logs");
    QPlainTextEdit* logs = narrow.logView();
    QVERIFY2(logs->horizontalScrollBar()->maximum() > 0,
             "no line is wider than the view: the test shows nothing");
    QCOMPARE(logs->horizontalScrollBar()->value(), logs->horizontalScrollBar()->minimum());
    QCOMPARE(logs->textCursor().positionInBlock(), 0);
    const QString shown_line = logs->textCursor().block().text();
    QVERIFY2(shown_line.contains(" error: "), qPrintable(shown_line));
    for (QTextBlock b = logs->document()->begin(); b != logs->textCursor().block(); b = b.next())
      QVERIFY2(!b.text().contains(" error: "), qPrintable(b.text()));
    window().history()->setStatusFilter("failed");
    QVERIFY(window().history()->jobs()->waitForIdle());
    QTRY_VERIFY_WITH_TIMEOUT(window().history()->model()->rowOfRun(run) >= 0, 5000);
    QCOMPARE(window().history()->model()->rowOfRun(ddp_run_), -1);
    window().history()->setStatusFilter("");
  }
};

QTEST_MAIN(UiViewTest)
#include "ui_view_test.moc"
