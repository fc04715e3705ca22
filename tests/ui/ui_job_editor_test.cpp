// The job editor's two kinds of job (issue 19): Ringmaster's engine or the user's PyTorch script.
// Switching takes the other kind's sections out of the spec and back, and the spec parses with no
// problem both ways; the program section's fields edit the JSON the parser reads; a bad field is
// shown next to it with the parser's message; the estimate and planned schedule say they do not
// apply to a script; launch.env is edited as NAME=VALUE lines (issue 21). Driven through the real
// widgets, offscreen.
//
// RINGMASTER_UI_GRABS=DIR saves a PNG of the editor with each kind of job, to look at the layout.
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTest>
#include <fstream>
#include <sstream>

#include "common/test_paths.h"
#include "spec/job_spec.h"
#include "spec/spec_fields.h"
#include "views/job_editor.h"
#include "widgets/gantt_chart.h"

using namespace ringmaster;
using namespace ringmaster::ui;

namespace {

// With RINGMASTER_UI_GRABS set, the widget as drawn, for a person to look at.
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

// Chooses the job kind as a user does: the menu's item, then its activation.
void chooseJobKind(JobEditor& editor, JobKind kind) {
  QComboBox* menu = editor.jobKindChoice();
  menu->setCurrentIndex(kind == JobKind::kProgram ? 1 : 0);
  emit menu->activated(menu->currentIndex());
}

// Every problem of the editor's spec, one per line ("" when none).
QString problemsOf(const JobEditor& editor) {
  return QString::fromStdString(parseJobSpec(editor.document()).describe());
}

bool shown(const JobEditor& editor, const std::string& path) {
  return editor.field(path) && editor.field(path)->isVisibleTo(&editor);
}

bool groupShown(const JobEditor& editor, const QString& section) {
  auto* group = editor.findChild<QGroupBox*>(section + "Group");
  return group && group->isVisibleTo(&editor);
}

}  // namespace

class UiJobEditorTest : public QObject {
  Q_OBJECT

 private:
  std::unique_ptr<JobEditor> editor_;
  QStringList asked_;  // the fields the path chooser was asked for
  QString answer_;     // what it answers ("": cancelled)

  JobEditor& editor() {
    if (!editor_) {
      editor_ = std::make_unique<JobEditor>();
      editor_->resize(1200, 900);
      editor_->show();
      if (!QTest::qWaitForWindowExposed(editor_.get())) qFatal("the editor never showed");
    }
    return *editor_;
  }

 private slots:
  void init() {
    asked_.clear();
    answer_ = "/srv/project/train.py";
    editor().setPathChooser([this](const SpecField& field, const QString&) {
      asked_ << QString::fromStdString(field.path);
      return answer_;
    });
  }

  // Engine to script and back, for the DDP example: the engine's sections and the strategy's
  // options go and come back as they were; the script is asked for once; both documents parse.
  void switchingKindTakesTheOtherKindsSectionsOutAndBack() {
    JobEditor& e = editor();
    QVERIFY(e.startFromExample("ddp_mlp"));
    const nlohmann::json engine = e.document();
    QCOMPARE(e.jobKindChoice()->currentIndex(), 0);
    QVERIFY(groupShown(e, "Model"));
    QVERIFY(!groupShown(e, "Program"));

    chooseJobKind(e, JobKind::kProgram);
    QCOMPARE(asked_, QStringList{"program.script"});
    const nlohmann::json& program = e.document();
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));
    QVERIFY(e.spec()->program.has_value());
    QCOMPARE(QString::fromStdString(e.spec()->program->script), answer_);
    for (std::string_view section : kEngineOnlySections)
      QVERIFY2(!program.contains(section), section.data());
    // The strategy is only its kind now, the name, description and hosts as they were.
    QVERIFY(program["strategy"] == nlohmann::json({{"kind", "ddp"}}));
    QVERIFY(program["launch"] == engine["launch"]);
    QVERIFY(program["name"] == engine["name"]);
    QVERIFY(program["description"] == engine["description"]);
    QCOMPARE(e.jobKindChoice()->currentIndex(), 1);
    // The form shows the program's fields and hides the engine's sections.
    for (const char* path : {"program.python", "program.script", "program.args", "program.workdir",
                             "program.upload", "program.steps", "strategy.kind", "name"})
      QVERIFY2(shown(e, path), path);
    for (const char* path :
         {"model.layers", "train.steps", "optimizer.lr", "backend", "telemetry.every_steps",
          "strategy.dp.bucket_cap_mb", "checkpoint.dir"})
      QVERIFY2(!shown(e, path), path);
    for (const char* section : {"Model", "Data", "Training", "Optimizer", "Checkpoints"})
      QVERIFY2(!groupShown(e, section), section);
    QVERIFY(groupShown(e, "Program"));
    QVERIFY(groupShown(e, "Where"));
    QVERIFY(e.findChild<QWidget*>("hostsTable")->isVisibleTo(&e));
    QVERIFY(e.launchButton()->isEnabled());
    QVERIFY2(e.launchStatusText().startsWith("Ready"), qPrintable(e.launchStatusText()));
    // No estimate or planned schedule computed from the engine's defaults.
    QVERIFY2(e.memoryText().contains("Does not apply to a program job"),
             qPrintable(e.memoryText()));
    QVERIFY2(!e.memoryText().contains("parameters"), qPrintable(e.memoryText()));
    QVERIFY2(e.plannedText().contains("does not apply to a program job"),
             qPrintable(e.plannedText()));
    QVERIFY(!e.plannedSchedule().isVisibleTo(&e));
    saveGrab(e, "editor-program-job");

    // Back: the engine's sections and DDP's bucket size as they were, and its estimate.
    chooseJobKind(e, JobKind::kEngine);
    QVERIFY2(e.document() == engine, qPrintable(QString::fromStdString(e.document().dump())));
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));
    QVERIFY(!groupShown(e, "Program"));
    QVERIFY(shown(e, "model.layers"));
    QVERIFY(shown(e, "strategy.dp.bucket_cap_mb"));
    QVERIFY2(e.memoryText().contains("optimizer state"), qPrintable(e.memoryText()));
    QVERIFY(e.plannedText().isEmpty());  // DDP plans no schedule
    saveGrab(e, "editor-engine-job");

    // And to the script again: the program section kept, the script not asked for twice.
    chooseJobKind(e, JobKind::kProgram);
    QCOMPARE(asked_.size(), 1);
    QVERIFY(e.spec().has_value());
    QCOMPARE(QString::fromStdString(e.spec()->program->script), answer_);
  }

  // Every shipped example parses after a switch to the other kind of job and is itself again after
  // the switch back; a program job loaded from a file switches to the smallest example's sections.
  void everyExampleParsesBothWays() {
    JobEditor& e = editor();
    int programs = 0;
    for (const ExampleSpec& example : exampleSpecs()) {
      const nlohmann::json document = exampleFile(example.name.toStdString());
      const JobKind kind = jobKindOf(document);
      const JobKind other = kind == JobKind::kEngine ? JobKind::kProgram : JobKind::kEngine;
      programs += kind == JobKind::kProgram;
      e.setDocument(document);
      const bool valid = parseJobSpec(document).ok();
      chooseJobKind(e, other);
      QVERIFY2(e.spec().has_value(), qPrintable(example.name + ": " + problemsOf(e)));
      chooseJobKind(e, kind);
      QVERIFY2(e.document() == document, qPrintable(example.name));
      QCOMPARE(e.spec().has_value(), valid);
    }
    // The shipped program job (resources/examples/torch_ddp.json) went to the engine and back
    // with its own script: the dialog was never needed.
    QVERIFY(programs >= 1);
    QCOMPARE(asked_.size(), static_cast<qsizetype>(exampleSpecs().size()) - programs);
    // A program job read from a file has no engine sections to go back to: the smallest example's.
    e.setDocument(nlohmann::json::parse(R"({
      "name": "torch-ddp",
      "program": {"script": "train.py"},
      "launch": {"hosts": [{"host": "localhost", "ranks": 4}]}
    })"));
    QCOMPARE(e.jobKindChoice()->currentIndex(), 1);
    // The strategy the parser records it with (ddp on 4 ranks) is what the form shows.
    QCOMPARE(qobject_cast<QComboBox*>(e.field("strategy.kind"))->currentText(), QString("ddp"));
    chooseJobKind(e, JobKind::kEngine);
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));
    QCOMPARE(strategyLabel(*e.spec()), std::string("ddp"));
    const nlohmann::json smallest = exampleFile("single_mlp");
    QVERIFY(e.document()["model"] == smallest["model"]);
    QVERIFY(e.document()["train"] == smallest["train"]);
    QVERIFY(!e.document().contains("program"));
  }

  // The program section's fields, edited in the form, are the JSON the parser reads.
  void editingTheProgramFieldsWritesTheSpec() {
    JobEditor& e = editor();
    QVERIFY(e.startFromExample("single_mlp"));
    chooseJobKind(e, JobKind::kProgram);
    auto* python = qobject_cast<QLineEdit*>(e.field("program.python"));
    auto* args = qobject_cast<QPlainTextEdit*>(e.field("program.args"));
    auto* workdir = qobject_cast<QLineEdit*>(e.field("program.workdir"));
    auto* upload = qobject_cast<QCheckBox*>(e.field("program.upload"));
    auto* steps = qobject_cast<QLineEdit*>(e.field("program.steps"));
    QVERIFY(python && args && workdir && upload && steps);
    QTest::keyClicks(python, "/usr/bin/python3");
    // One argument per line, each kept as typed: spaces, commas, quotes, an empty one.
    args->setFocus();
    QTest::keyClicks(args, "--steps");
    QTest::keyClick(args, Qt::Key_Return);
    QTest::keyClicks(args, "30");
    QTest::keyClick(args, Qt::Key_Return);
    QTest::keyClick(args, Qt::Key_Return);
    QTest::keyClicks(args, "a b, 'c' $(d)");
    QTest::keyClick(args, Qt::Key_Return);  // a last line break adds no argument
    args->clearFocus();
    QTest::keyClicks(workdir, "/srv/project");
    upload->click();
    QTest::keyClicks(steps, "30");
    // The script chosen in the dialog, inside the working directory: written relative to it.
    answer_ = "/srv/project/examples/train.py";
    auto* choose = e.findChild<QPushButton*>("program.script.choose");
    QVERIFY(choose && choose->isVisibleTo(&e));
    choose->click();
    QCOMPARE(asked_.back(), QString("program.script"));
    QCOMPARE(qobject_cast<QLineEdit*>(e.field("program.script"))->text(),
             QString("examples/train.py"));

    const nlohmann::json expected = nlohmann::json::parse(R"json({
      "name": "single_mlp",
      "description": "One rank on the CPU: an MLP learning a synthetic teacher. The smallest complete job.",
      "strategy": {"kind": "single"},
      "program": {"script": "examples/train.py", "python": "/usr/bin/python3",
                  "args": ["--steps", "30", "", "a b, 'c' $(d)"], "workdir": "/srv/project",
                  "upload": true, "steps": 30
  }
    })json");
    QVERIFY2(e.document() == expected, qPrintable(QString::fromStdString(e.document().dump(2))));
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));
    const ProgramSpec& program = *e.spec()->program;
    QVERIFY(program.args == (std::vector<std::string>{"--steps", "30", "", "a b, 'c' $(d)"}));
    QCOMPARE(program.steps, int64_t{30});
    QVERIFY(program.upload);
    // The JSON text beside the form is the same document.
    auto* json = e.findChild<QPlainTextEdit*>("specJson");
    QVERIFY(nlohmann::json::parse(json->toPlainText().toStdString()) == expected);

    // An argument the lines cannot hold, written in the JSON: shown as JSON, not editable there.
    nlohmann::json multiline = expected;
    multiline["program"]["args"] = {"--note", "two\nlines"};
    json->setPlainText(QString::fromStdString(multiline.dump(2)));
    QVERIFY(e.spec().has_value());
    QVERIFY(args->isReadOnly());
    QVERIFY2(args->toolTip().contains("JSON"), qPrintable(args->toolTip()));
    json->setPlainText(QString::fromStdString(expected.dump(2)));
    QVERIFY(!args->isReadOnly());
    QCOMPARE(args->toPlainText(), QString("--steps\n30\n\na b, 'c' $(d)"));
    // Clearing the arguments leaves them out (the default: none).
    args->selectAll();
    QTest::keyClick(args, Qt::Key_Delete);
    QVERIFY(!e.document()["program"].contains("args"));
    QVERIFY(e.spec().has_value());
  }

  // A bad program field is shown next to it with the parser's message and listed beside Launch;
  // a script not chosen is required; an engine section written beside a program is named.
  void aBadFieldIsShownWithItsProblem() {
    JobEditor& e = editor();
    QVERIFY(e.startFromExample("ddp_mlp"));
    answer_.clear();  // the dialog cancelled
    chooseJobKind(e, JobKind::kProgram);
    QVERIFY(!e.spec().has_value());
    QVERIFY(!e.launchButton()->isEnabled());
    QCOMPARE(e.fieldError("program.script"), QString("required"));
    QVERIFY(shown(e, "program.script"));
    QVERIFY2(e.launchStatusText().contains("program.script: required"),
             qPrintable(e.launchStatusText()));
    QTest::keyClicks(qobject_cast<QLineEdit*>(e.field("program.script")), "train.py");
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));
    QVERIFY(e.fieldError("program.script").isEmpty());

    auto* steps = qobject_cast<QLineEdit*>(e.field("program.steps"));
    QTest::keyClicks(steps, "-1");
    QVERIFY(!e.spec().has_value());
    QCOMPARE(e.fieldError("program.steps"), QString("expected a non-negative integer, got -1"));
    QVERIFY2(e.launchStatusText().contains("program.steps: expected a non-negative integer"),
             qPrintable(e.launchStatusText()));
    steps->selectAll();
    QTest::keyClicks(steps, "12");
    QVERIFY(e.spec().has_value());

    // An engine section in a program job, written in the JSON: at its first field, shown.
    nlohmann::json stray = e.document();
    stray["model"] = {{"kind", "mlp"}, {"layers", {4, 2}}};
    e.findChild<QPlainTextEdit*>("specJson")->setPlainText(QString::fromStdString(stray.dump(2)));
    QVERIFY(!e.spec().has_value());
    QVERIFY2(e.fieldError("model.kind").contains("not read by a program job"),
             qPrintable(e.fieldError("model.kind")));
    QVERIFY(shown(e, "model.kind"));
    QVERIFY(groupShown(e, "Model"));
    QVERIFY2(e.launchStatusText().contains("model: not read by a program job"),
             qPrintable(e.launchStatusText()));
    // The estimate is still not computed for it.
    QVERIFY2(e.memoryText().contains("Does not apply"), qPrintable(e.memoryText()));
  }

  // Issue 21: launch.env is edited as NAME=VALUE lines, values kept as typed; a refused name is
  // shown at the field with its name and the parser's reason; a value the lines cannot hold
  // (a line break), written in the JSON, is left to the JSON text.
  void theEnvironmentIsEditedAsNameValueLines() {
    JobEditor& e = editor();
    QVERIFY(e.startFromExample("ddp_mlp"));
    auto* env = qobject_cast<QPlainTextEdit*>(e.field("launch.env"));
    QVERIFY(env);
    QVERIFY(shown(e, "launch.env"));
    QVERIFY2(env->toolTip().contains("NAME=VALUE"), qPrintable(env->toolTip()));
    env->setFocus();
    QTest::keyClicks(env, "NCCL_DEBUG=INFO");
    QTest::keyClick(env, Qt::Key_Return);
    QTest::keyClick(env, Qt::Key_Return);  // a blank line is no variable
    QTest::keyClicks(env, "NOTE=a = b 'c' \"d\" $(touch x)");
    env->clearFocus();
    QVERIFY2(e.document()["launch"]["env"] ==
                 nlohmann::json({{"NCCL_DEBUG", "INFO"}, {"NOTE", "a = b 'c' \"d\" $(touch x)"}}),
             qPrintable(QString::fromStdString(e.document()["launch"].dump())));
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));
    QCOMPARE(e.spec()->launch.env.at("NOTE"), std::string("a = b 'c' \"d\" $(touch x)"));

    // A secret-looking name: refused at the field, naming it and the env file.
    env->setFocus();
    QTest::keyClick(env, Qt::Key_Return);
    QTest::keyClicks(env, "HF_TOKEN=hf_x");
    env->clearFocus();
    QVERIFY(!e.spec().has_value());
    QVERIFY(!e.launchButton()->isEnabled());
    QVERIFY2(e.fieldError("launch.env").startsWith("HF_TOKEN: looks like a secret"),
             qPrintable(e.fieldError("launch.env")));
    QVERIFY2(e.fieldError("launch.env").contains("launch.env_file"),
             qPrintable(e.fieldError("launch.env")));
    QVERIFY2(e.launchStatusText().contains("launch.env.HF_TOKEN"),
             qPrintable(e.launchStatusText()));
    // A line without '=' is a name without a value, which the parser refuses.
    env->selectAll();
    QTest::keyClicks(env, "JUST_A_NAME");
    QVERIFY2(e.fieldError("launch.env").startsWith("JUST_A_NAME: expected a string"),
             qPrintable(e.fieldError("launch.env")));
    // Emptied: left out of the spec.
    env->selectAll();
    QTest::keyClick(env, Qt::Key_Delete);
    QVERIFY(!e.document()["launch"].contains("env"));
    QVERIFY2(e.spec().has_value(), qPrintable(problemsOf(e)));

    // A value with a line break, written in the JSON: shown as JSON, read-only.
    nlohmann::json multiline = e.document();
    multiline["launch"]["env"] = {{"A", "1"}, {"NOTE", "two\nlines"}};
    auto* json = e.findChild<QPlainTextEdit*>("specJson");
    json->setPlainText(QString::fromStdString(multiline.dump(2)));
    QVERIFY(e.spec().has_value());
    QVERIFY(env->isReadOnly());
    QVERIFY2(env->toolTip().contains("JSON"), qPrintable(env->toolTip()));
    multiline["launch"]["env"] = {{"A", "1"}, {"B", "x=y"}};
    json->setPlainText(QString::fromStdString(multiline.dump(2)));
    QVERIFY(!env->isReadOnly());
    QCOMPARE(env->toPlainText(), QString("A=1\nB=x=y"));
  }
};

QTEST_MAIN(UiJobEditorTest)
#include "ui_job_editor_test.moc"
