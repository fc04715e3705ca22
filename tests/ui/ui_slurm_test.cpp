// Issue 35, the desktop's Slurm parts, through the real widgets offscreen: the job editor's Slurm
// section (choosing Slurm shows the scheduler's fields in place of the hosts table, and a login
// node's; every bad value of each kind of field is flagged at its field with the parser's own
// message; the batch script shows the #SBATCH lines of the values typed and follows each edit;
// the window still fits a laptop screen), and a run's Slurm job beside its status in the run list
// and the run view's header (pending with its own colour).
//
// RINGMASTER_UI_GRABS=DIR saves a PNG of the Slurm section, to look at the layout.
#include <QComboBox>
#include <QDir>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSet>
#include <QTest>

#include "models/run_list_model.h"
#include "spec/job_spec.h"
#include "ui_test_support.h"
#include "views/job/slurm_section.h"
#include "views/job_editor.h"
#include "views/run/run_header.h"

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

// Chooses an item of a menu as a user does: the item, then its activation.
void choose(QComboBox* menu, int index) {
  menu->setCurrentIndex(index);
  emit menu->activated(index);
}

bool shown(const JobEditor& editor, const std::string& path) {
  return editor.field(path) && editor.field(path)->isVisibleTo(&editor);
}

// Replaces a line field's text as typed.
void type(JobEditor& editor, const std::string& path, const QString& text) {
  auto* line = qobject_cast<QLineEdit*>(editor.field(path));
  QVERIFY2(line, path.c_str());
  line->selectAll();
  QTest::keyClick(line, Qt::Key_Backspace);
  if (!text.isEmpty()) QTest::keyClicks(line, text);
}

// The spec problems at `path` or inside it, one per line.
QString problemsAt(const JobEditor& editor, const std::string& path) {
  QStringList found;
  for (const SpecProblem& problem : editor.problems())
    if (problem.path == path || problem.path.starts_with(path + "[") ||
        problem.path.starts_with(path + "."))
      found << QString::fromStdString(problem.path + ": " + problem.message);
  return found.join('\n');
}

// Every launch.scheduler field the form edits (the spec's description's, but submit_from's and
// the kind's).
std::vector<std::string> schedulerFields(const JobEditor& editor) {
  std::vector<std::string> paths;
  for (const SpecField& field : specFields())
    if (field.path.starts_with("launch.scheduler.") &&
        !field.path.starts_with("launch.scheduler.submit_from.") && editor.field(field.path))
      paths.push_back(field.path);
  return paths;
}

}  // namespace

class UiSlurmTest : public QObject {
  Q_OBJECT

 private:
  std::unique_ptr<JobEditor> editor_;

  JobEditor& editor() { return *editor_; }
  SlurmSection& slurm() { return *editor_->slurmSection(); }

  void chooseSlurm() {
    choose(slurm().runsOnChoice(), 1);
    QVERIFY(slurmChosen(editor().document()));
  }

 private slots:
  void init() {
    editor_ = std::make_unique<JobEditor>();
    editor_->resize(1366, 768);
    editor_->show();
    QVERIFY(QTest::qWaitForWindowExposed(editor_.get()));
    QVERIFY2(editor_->spec().has_value(), qPrintable(editor_->launchStatusText()));
  }
  void cleanup() { editor_.reset(); }

  void choosingSlurmShowsItsFieldsInPlaceOfTheHosts() {
    QVERIFY(!slurmChosen(editor().document()));
    auto* hosts = editor().findChild<QWidget*>("hostsTable");
    QVERIFY(hosts && hosts->isVisibleTo(&editor()));
    const std::vector<std::string> fields = schedulerFields(editor());
    // Every field the issue names has its row.
    for (const char* key :
         {"nodes", "ranks_per_node", "gpus_per_node", "cpus_per_task", "mem", "partition",
          "account", "qos", "time", "constraint", "reservation", "job_name", "extra_sbatch"})
      QVERIFY2(editor().field(std::string("launch.scheduler.") + key), key);
    for (const std::string& path : fields) QVERIFY2(!shown(editor(), path), path.c_str());
    QVERIFY(!slurm().scriptPreview()->isVisibleTo(&editor()));
    QVERIFY(!slurm().submitFromRow()->isVisibleTo(&editor()));

    chooseSlurm();
    // The world size is kept (the example's one rank), so the spec is valid at once.
    QVERIFY2(editor().spec().has_value(), qPrintable(editor().launchStatusText()));
    QVERIFY(editor().spec()->launch.slurm.has_value());
    QVERIFY(!editor().document()["launch"].contains("hosts"));
    QVERIFY(!hosts->isVisibleTo(&editor()));
    for (const std::string& path : fields) QVERIFY2(shown(editor(), path), path.c_str());
    QVERIFY(slurm().scriptPreview()->isVisibleTo(&editor()));
    QVERIFY(slurm().submitFromChoice()->isVisibleTo(&editor()));
    QVERIFY(!shown(editor(), "launch.scheduler.submit_from.host"));

    // A login node: its fields, and its host asked for next to it.
    choose(slurm().submitFromChoice(), 1);
    for (const char* key : {"host", "port", "user", "identity_file", "proxy_jump"}) {
      const std::string path = std::string("launch.scheduler.submit_from.") + key;
      QVERIFY2(shown(editor(), path), path.c_str());
    }
    QVERIFY(!editor().spec());
    QVERIFY2(!editor().fieldError("launch.scheduler.submit_from.host").isEmpty(),
             qPrintable(editor().launchStatusText()));
    type(editor(), "launch.scheduler.submit_from.host", "login1");
    type(editor(), "launch.scheduler.submit_from.proxy_jump", "alice@bastion.example.org:2222");
    QVERIFY2(editor().spec().has_value(), qPrintable(editor().launchStatusText()));
    QCOMPARE(editor().spec()->launch.slurm->submit_from->host, std::string("login1"));
    saveGrab(*editor().findChild<QGroupBox*>("SlurmGroup"), "slurm_section");

    // Back to the hosts: the scheduler goes, the hosts come back, and back to Slurm keeps what
    // was typed.
    choose(slurm().runsOnChoice(), 0);
    QVERIFY(!slurmChosen(editor().document()));
    QVERIFY2(editor().spec().has_value(), qPrintable(editor().launchStatusText()));
    for (const std::string& path : fields) QVERIFY2(!shown(editor(), path), path.c_str());
    QVERIFY(hosts->isVisibleTo(&editor()));
    chooseSlurm();
    QCOMPARE(editor().document()["launch"]["scheduler"]["submit_from"]["host"].get<std::string>(),
             std::string("login1"));
    QCOMPARE(slurm().submitFromChoice()->currentIndex(), 1);
  }

  // Each kind of field with values the parser refuses (a shell's characters, a blank, a leading
  // '-', a wrong form or bound): each flagged at its own field with the parser's message, Launch
  // disabled, and a good value clears it.
  void everyBadValueIsFlaggedAtItsField() {
    chooseSlurm();
    struct Case {
      std::string path;
      QString bad, good;
    };
    const std::vector<Case> cases = {
        {"launch.scheduler.partition", "a;b", "debug"},
        {"launch.scheduler.partition", "a b", "debug"},
        {"launch.scheduler.account", "proj'x", "proj"},
        {"launch.scheduler.qos", "\"normal\"", "normal"},
        {"launch.scheduler.constraint", "-a100", "a100"},
        {"launch.scheduler.reservation", "r 1", "r1"},
        {"launch.scheduler.job_name", "--gpt", "gpt"},
        {"launch.scheduler.time", "abc", "01:00:00"},
        {"launch.scheduler.time", "1:00:00 x", "2-00:00:00"},
        {"launch.scheduler.mem", "lots", "16G"},
        {"launch.scheduler.nodes", "0", "1"},
        {"launch.scheduler.ranks_per_node", "two", "1"},
        {"launch.scheduler.gpus_per_node", "-1", "8"},
        {"launch.scheduler.cpus_per_task", "1.5", "4"},
    };
    for (const Case& c : cases) {
      type(editor(), c.path, c.bad);
      const QString why = QString("%1 = %2").arg(QString::fromStdString(c.path), c.bad);
      QVERIFY2(!problemsAt(editor(), c.path).isEmpty(), qPrintable(why));
      QVERIFY2(!editor().fieldError(c.path).isEmpty(), qPrintable(why));
      QVERIFY2(problemsAt(editor(), c.path).contains(editor().fieldError(c.path)),
               qPrintable(why + ": " + editor().fieldError(c.path)));
      QVERIFY(!editor().launchButton()->isEnabled());
      type(editor(), c.path, c.good);
      QVERIFY2(editor().fieldError(c.path).isEmpty(), qPrintable(editor().fieldError(c.path)));
      QVERIFY2(editor().spec().has_value(), qPrintable(why + ": " + editor().launchStatusText()));
    }
    // An extra sbatch option is one --name=value word; a bad line is flagged at the list.
    auto* extra = qobject_cast<QPlainTextEdit*>(editor().field("launch.scheduler.extra_sbatch"));
    QVERIFY(extra);
    for (const QString& bad :
         {QString("--exclusive\n--mail-user=a b"), QString("exclusive"), QString("--nodes=4")}) {
      extra->setFocus();
      extra->setPlainText(bad);
      QVERIFY2(!problemsAt(editor(), "launch.scheduler.extra_sbatch").isEmpty(), qPrintable(bad));
      QVERIFY2(!editor().fieldError("launch.scheduler.extra_sbatch").isEmpty(), qPrintable(bad));
    }
    extra->setPlainText("--exclusive\n--mail-type=END");
    QVERIFY2(editor().spec().has_value(), qPrintable(editor().launchStatusText()));
    QCOMPARE(editor().spec()->launch.slurm->extra_sbatch,
             (std::vector<std::string>{"--exclusive", "--mail-type=END"}));
  }

  void theScriptShowsTheValuesTypedAndFollowsEachEdit() {
    // Four ranks of DDP: on Slurm, 2 nodes of 2 ranks.
    QVERIFY(editor().startFromExample("ddp_mlp"));
    chooseSlurm();
    QCOMPARE(editor().spec()->launch.slurm->ranks_per_node, 4);
    type(editor(), "launch.scheduler.nodes", "2");
    type(editor(), "launch.scheduler.ranks_per_node", "2");
    type(editor(), "launch.scheduler.partition", "debug");
    type(editor(), "launch.scheduler.time", "01:00:00");
    type(editor(), "launch.scheduler.gpus_per_node", "8");
    type(editor(), "launch.scheduler.account", "proj");
    auto* extra = qobject_cast<QPlainTextEdit*>(editor().field("launch.scheduler.extra_sbatch"));
    extra->setPlainText("--exclusive");
    QVERIFY2(editor().spec().has_value(), qPrintable(editor().launchStatusText()));
    auto* script = slurm().scriptPreview()->findChild<QPlainTextEdit*>("slurmScript");
    QVERIFY(script && script->isReadOnly() && script->isEnabled());
    QVERIFY(QFontInfo(script->font()).fixedPitch());
    for (const char* line :
         {"#SBATCH --partition=debug", "#SBATCH --time=01:00:00", "#SBATCH --nodes=2",
          "#SBATCH --gpus-per-node=8", "#SBATCH --account=proj", "#SBATCH --exclusive"})
      QVERIFY2(slurm().scriptText().contains(line), qPrintable(line + slurm().scriptText()));
    QVERIFY(slurm().scriptText().startsWith("#!"));
    QVERIFY(slurm().scriptText().contains("srun"));
    // Each edit is in the script at once, the old value gone.
    type(editor(), "launch.scheduler.partition", "gpu");
    QVERIFY(slurm().scriptText().contains("#SBATCH --partition=gpu"));
    QVERIFY(!slurm().scriptText().contains("--partition=debug"));
    type(editor(), "launch.scheduler.time", "");
    QVERIFY(!slurm().scriptText().contains("--time="));
    // A bad value: the script is kept, greyed and said to be out of date, until it is fixed.
    type(editor(), "launch.scheduler.partition", "a;b");
    QVERIFY(!script->isEnabled());
    QVERIFY2(slurm().scriptNote().contains("out of date", Qt::CaseInsensitive),
             qPrintable(slurm().scriptNote()));
    QVERIFY(!slurm().scriptText().contains("a;b"));
    type(editor(), "launch.scheduler.partition", "long");
    QVERIFY(script->isEnabled());
    QVERIFY(slurm().scriptText().contains("#SBATCH --partition=long"));
  }

  // The section adds no width: on a laptop screen the form needs no horizontal scrolling and the
  // window no more than its width, with every Slurm field chosen.
  void theSectionFitsALaptopScreen() {
    chooseSlurm();
    choose(slurm().submitFromChoice(), 1);
    type(editor(), "launch.scheduler.partition", "a;b");  // an error line too
    QVERIFY(editor().minimumSizeHint().width() <= 1366);
    auto* scroll = editor().findChild<QScrollArea*>("formScroll");
    QVERIFY(scroll);
    QTest::qWait(50);
    QVERIFY(!scroll->horizontalScrollBar()->isVisible());
    auto* group = editor().findChild<QGroupBox*>("SlurmGroup");
    QVERIFY(group && group->isVisibleTo(&editor()));
    QVERIFY(group->width() <= scroll->viewport()->width());
    scroll->ensureWidgetVisible(slurm().scriptPreview());
    saveGrab(editor(), "slurm_editor");
  }

  // A run handed to Slurm, drawn from its record: the run list and the run view's header show the
  // job id, Slurm's state and reason beside the status, pending in a colour of its own.
  void aPendingRunShowsItsSlurmJobBesideItsStatus() {
    storage::RunRecord run;
    run.id = 7;
    run.name = "gpt";
    run.strategy = "ddp";
    run.world_size = 4;
    run.status = "pending";
    run.scheduler = storage::SchedulerJob{
        .kind = "slurm", .job_id = "4242", .state = "PENDING", .reason = "Resources"};
    storage::RunRecord plain = run;
    plain.id = 8;
    plain.status = "running";
    plain.scheduler.reset();
    RunListModel model;
    model.setRuns({run, plain});
    QCOMPARE(model.index(0, RunListModel::kStatus).data().toString(),
             QString("pending · Slurm 4242: PENDING (Resources)"));
    QCOMPARE(model.index(1, RunListModel::kStatus).data().toString(), QString("running"));
    const QSet<QRgb> colours = {statusColor("pending").rgb(),   statusColor("running").rgb(),
                                statusColor("completed").rgb(), statusColor("failed").rgb(),
                                statusColor("cancelled").rgb(), QColor(0x7f, 0x7f, 0x7f).rgb()};
    QCOMPARE(colours.size(), 6);  // pending is told from every other status
    QCOMPARE(model.index(0, RunListModel::kStatus).data(Qt::ForegroundRole).value<QColor>(),
             statusColor("pending"));

    RunHeader header(run.id);
    RunSnapshot snapshot;
    snapshot.report.summary.run = run;
    header.apply(snapshot);
    QCOMPARE(header.statusText(), QString("pending"));
    QCOMPARE(header.schedulerText(), QString("Slurm 4242: PENDING (Resources)"));
    // Running, allocated: the nodes; Slurm's words are shown as plain text.
    snapshot.report.summary.run.status = "running";
    snapshot.report.summary.run.scheduler = storage::SchedulerJob{.kind = "slurm",
                                                                  .job_id = "4242",
                                                                  .state = "RUNNING",
                                                                  .reason = "<b>x</b>",
                                                                  .nodes = "n[1-2]"};
    header.apply(snapshot);
    QCOMPARE(header.schedulerText(), QString("Slurm 4242: RUNNING (<b>x</b>) on n[1-2]"));
    QCOMPARE(header.findChild<QLabel*>("runScheduler")->textFormat(), Qt::PlainText);
    snapshot.report.summary.run = plain;
    header.apply(snapshot);
    QVERIFY(header.schedulerText().isEmpty());
  }
};

QTEST_MAIN(UiSlurmTest)
#include "ui_slurm_test.moc"
