// Issue 37, the layout advisor in the job editor: "Plan layouts…" runs the built `ringmaster plan
// --json` on the editor's spec (the DDP example on 2 local ranks) and lists exactly the layouts a
// direct run of that command lists, in its order; "Use this layout" sets a layout's fields in the
// editor's spec; "Run trials" with K = 2 runs real trials recorded as a sweep of 2 runs and shows
// their measured terms; "Launch best" starts a real run of the winner from the window, as Launch
// does; Cancel stops a plan running trials and leaves none of its processes (by PID). A program
// job has no plan button. The functions build on each other: one CTest test.
#include <QAbstractItemModelTester>
#include <QFileInfo>
#include <QProcess>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/proc_files.h"
#include "data/background_jobs.h"
#include "db/database.h"
#include "main_window.h"
#include "models/plan_models.h"
#include "query/runs.h"
#include "query/sweeps.h"
#include "ui_test_support.h"
#include "views/job/plan_view.h"
#include "views/job/spec_document.h"
#include "views/job_editor.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

namespace {

constexpr int kPlanTimeoutMs = 60000;
constexpr int kTrialsTimeoutMs = 240000;

// The processes whose parent is one of `parents`, transitively.
std::set<pid_t> descendantsOf(pid_t root) {
  std::set<pid_t> found{root};
  for (bool grew = true; grew;) {
    grew = false;
    for (pid_t pid : ringmaster::testing::processIds()) {
      const std::string stat = ringmaster::testing::readProcFile(pid, "stat");
      const size_t close = stat.rfind(')');
      if (close == std::string::npos) continue;
      pid_t parent = 0;
      if (std::sscanf(stat.c_str() + close + 2, "%*c %d", &parent) != 1) continue;
      if (found.count(parent) && found.insert(pid).second) grew = true;
    }
  }
  found.erase(root);
  return found;
}

}  // namespace

class UiPlanViewTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string db_;
  nlohmann::json spec_;
  std::unique_ptr<MainWindow> window_;
  std::set<pid_t> seen_;  // every process of a plan seen, killed at the end if still there

  JobEditor& editor() { return *window_->jobEditor(); }
  // Waits for the advisor's command to end; its exit code (-1 on timeout).
  int waitForPlan(PlanView& view, int timeout_ms) {
    QSignalSpy finished(&view, &PlanView::planFinished);
    if (!view.running()) return -1;
    if (!finished.wait(timeout_ms)) return -1;
    return finished.first().at(0).toInt();
  }

 private slots:
  void initTestCase() {
    installGuiThreadQueryCheck();  // the advisor reads nothing on the GUI thread
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db").toStdString();
    QSettings("ringmaster", "ringmaster-ui-plan-test").clear();
    window_ = std::make_unique<MainWindow>(
        MainWindowOptions{db_, ringmasterExecutable(), "ringmaster-ui-plan-test"});
    spec_ = exampleSpec("ddp_mlp", 5);
    spec_["launch"]["hosts"] = {{{"host", "localhost"}, {"ranks", 2}}};
    editor().setDocument(spec_);
    QVERIFY(editor().spec().has_value());
  }

  void cleanupTestCase() {
    if (window_) QTRY_COMPARE_WITH_TIMEOUT(window_->activeLaunches(), 0, 60000);
    window_.reset();
    for (pid_t pid : seen_)
      if (ringmaster::testing::processRuns(pid)) ::kill(pid, SIGKILL);  // only after a failure
  }

  void aProgramJobHasNoPlanButton() {
    JobEditor program;
    program.setPlanCommand(ringmasterExecutable(), QString::fromStdString(db_));
    QVERIFY(!program.planButton()->isHidden());
    program.setDocument({{"name", "script"},
                         {"program", {{"script", "/tmp/train.py"}}},
                         {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", 1}}}}}}});
    QVERIFY(program.planButton()->isHidden());
    QVERIFY(program.openPlanView() == nullptr);
  }

  void thePlanListsWhatTheCommandLists() {
    QVERIFY(editor().planButton()->isEnabled());
    QTest::mouseClick(editor().planButton(), Qt::LeftButton);
    PlanView* view = editor().planView();
    QVERIFY(view);
    // The models watched through every reset that follows (this plan, the trials).
    for (QAbstractItemModel* model :
         {static_cast<QAbstractItemModel*>(view->layoutsModel()),
          static_cast<QAbstractItemModel*>(view->trialsModel()), view->layoutsTable()->model()})
      new QAbstractItemModelTester(model, QAbstractItemModelTester::FailureReportingMode::QtTest,
                                   view);
    QCOMPARE(waitForPlan(*view, kPlanTimeoutMs), 0);
    QVERIFY2(view->result().has_value(), qPrintable(view->statusText()));

    // The same spec through the command itself (the measurements are kept: the same ranking).
    const QString spec_path = dir_.filePath("spec.json");
    std::ofstream(spec_path.toStdString()) << spec_.dump(2);
    QProcess direct;
    direct.start(ringmasterExecutable(),
                 {"--db", QString::fromStdString(db_), "plan", spec_path, "--json"});
    QVERIFY(direct.waitForFinished(kPlanTimeoutMs));
    QCOMPARE(direct.exitCode(), 0);
    const nlohmann::json expected =
        nlohmann::json::parse(direct.readAllStandardOutput().toStdString());
    std::vector<nlohmann::json> valid;
    int dropped = 0;
    for (const nlohmann::json& layout : expected.at("layouts")) {
      if (layout.at("rank").is_number())
        valid.push_back(layout);
      else
        ++dropped;
    }
    QVERIFY(valid.size() > 2);
    const PlanLayoutModel& model = *view->layoutsModel();
    QCOMPARE(size_t(model.rowCount()), valid.size());
    // The table, as shown (sorted by rank), row by row: the command's order.
    QAbstractItemModel& shown = *view->layoutsTable()->model();
    for (size_t i = 0; i < valid.size(); ++i) {
      const int row = static_cast<int>(i);
      const int index = shown.index(row, 0).data(PlanLayoutModel::kLayoutRole).toInt();
      const PlanLayoutRow& layout = model.layouts()[size_t(index)];
      QCOMPARE(layout.label.toStdString(), valid[i].at("label").get<std::string>());
      QCOMPARE(layout.rank, valid[i].at("rank").get<int>());
      QCOMPARE(layout.top, valid[i].at("top").get<bool>());
      QVERIFY(layout.overrides == valid[i].at("overrides"));
      QCOMPARE(layout.dp, valid[i].at("mesh").at("dp").get<int>());
      QCOMPARE(layout.pp, valid[i].at("mesh").at("pp").get<int>());
      QVERIFY(layout.step_ms && layout.compute_ms && layout.rate);
      QCOMPARE(shown.index(row, PlanLayoutModel::kRank).data().toString().startsWith("* "),
               layout.top);
    }
    QCOMPARE(view->result()->dropped.size(), size_t(dropped));
    QCOMPARE(view->result()->refused.size(), expected.at("refused").size());
    QVERIFY2(view->droppedText().contains(
                 QString("Refused by the spec validation (%1)").arg(expected.at("refused").size())),
             qPrintable(view->droppedText()));
    // Sorting by the predicted step, slowest first, then back by rank.
    view->layoutsTable()->sortByColumn(PlanLayoutModel::kStep, Qt::DescendingOrder);
    double slowest = 0;
    for (const nlohmann::json& layout : valid)
      slowest = std::max(slowest, layout.at("prediction").at("step_ms").get<double>());
    const int first = shown.index(0, 0).data(PlanLayoutModel::kLayoutRole).toInt();
    QCOMPARE(*model.layouts()[size_t(first)].step_ms, slowest);
    view->layoutsTable()->sortByColumn(PlanLayoutModel::kRank, Qt::AscendingOrder);
  }

  void useThisLayoutSetsItsFieldsInTheSpec() {
    PlanView& view = *editor().planView();
    // The last valid layout: a different one from the spec's own DDP over 2.
    QAbstractItemModel& shown = *view.layoutsTable()->model();
    const int last = shown.rowCount() - 1;
    view.layoutsTable()->selectRow(last);
    const PlanLayoutRow* chosen = view.selectedLayout();
    QVERIFY(chosen);
    QCOMPARE(chosen->rank, last + 1);
    const nlohmann::json overrides = chosen->overrides;
    QVERIFY(view.useButton()->isEnabled());
    QTest::mouseClick(view.useButton(), Qt::LeftButton);
    for (const auto& [field, value] : overrides.items()) {
      const nlohmann::json* set = getPath(editor().document(), field);
      QVERIFY2(set && *set == value, field.c_str());
    }
    QVERIFY(editor().spec().has_value());
    QCOMPARE(editor().spec()->strategy.mesh.dp, chosen->dp);
    QCOMPARE(editor().spec()->strategy.mesh.pp, chosen->pp);
    editor().setDocument(spec_);
  }

  void trialsRunAsASweepAndShowTheirMeasuredTerms() {
    PlanView& view = *editor().planView();
    view.trialsBox()->setValue(2);
    view.trialStepsBox()->setValue(3);
    QTest::mouseClick(view.trialsButton(), Qt::LeftButton);
    QVERIFY(view.running());
    QVERIFY(view.cancelButton()->isEnabled());
    QCOMPARE(waitForPlan(view, kTrialsTimeoutMs), 0);
    QVERIFY2(view.result() && view.result()->trials, qPrintable(view.statusText()));
    const TrialsSummary& trials = *view.result()->trials;
    QCOMPARE(trials.trials.size(), size_t{2});
    // The top K marked are the K the trials ran.
    for (const PlanLayoutRow& layout : view.result()->layouts)
      QCOMPARE(layout.top, layout.rank <= 2);
    std::set<int64_t> shown_runs;
    for (const TrialTermRow& term : view.trialsModel()->terms()) {
      QVERIFY(term.run.has_value());
      shown_runs.insert(*term.run);
      if (term.term == "step")
        QVERIFY2(term.measured_ms && *term.measured_ms > 0, qPrintable(term.label));
    }
    QCOMPARE(shown_runs.size(), size_t{2});
    QVERIFY2(view.trialsSummaryText().contains("Rank correlation"),
             qPrintable(view.trialsSummaryText()));
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    const std::vector<storage::SweepRecord> sweeps = storage::listSweeps(db);
    QCOMPARE(sweeps.size(), size_t{1});
    QCOMPARE(sweeps.front().members.size(), size_t{2});
    std::set<int64_t> recorded_runs;
    for (const storage::SweepMember& member : sweeps.front().members) {
      QVERIFY(member.run_id.has_value());
      recorded_runs.insert(*member.run_id);
      QCOMPARE(member.run_status, std::string("completed"));
      // Member i ran the i-th best layout's overrides.
      const PlanLayoutRow& layout = view.result()->layouts[size_t(member.position)];
      QVERIFY(nlohmann::json::parse(member.overrides_json) == layout.overrides);
    }
    QCOMPARE(recorded_runs, shown_runs);
  }

  void launchBestRunsTheWinnerAsLaunchDoes() {
    PlanView& view = *editor().planView();
    const PlanLayoutRow* winner = winnerOf(*view.result());
    QVERIFY(winner);
    // The trials' fastest measured.
    QVERIFY(view.result()->trials.has_value());
    const TrialsSummary& trials = *view.result()->trials;
    const auto fastest = std::max_element(
        trials.trials.begin(), trials.trials.end(), [](const auto& a, const auto& b) {
          return a.measured_rate.value_or(0) < b.measured_rate.value_or(0);
        });
    QCOMPARE(winner->label, view.result()->layouts[size_t(fastest->position)].label);
    QSignalSpy finished(window_.get(), &MainWindow::launchFinished);
    QVERIFY(view.launchBestButton()->isEnabled());
    QTest::mouseClick(view.launchBestButton(), Qt::LeftButton);
    QVERIFY(finished.wait(kTrialsTimeoutMs));
    QCOMPARE(finished.first().at(1).toInt(), 0);
    const int64_t run = finished.first().at(0).toLongLong();
    QVERIFY(run > 0);
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    const storage::RunRecord record = storage::loadRun(db, run);
    QCOMPARE(record.status, std::string("completed"));
    QCOMPARE(record.mesh.dp, winner->dp);
    QCOMPARE(record.mesh.tp, winner->tp);
    QCOMPARE(record.mesh.pp, winner->pp);
    const nlohmann::json spec = nlohmann::json::parse(record.spec_json);
    // Its dp mode ("ddp", "fsdp:full_shard"), precision and checkpointing: the winner's.
    const nlohmann::json& dp = spec.at("strategy").at("dp");
    const std::string kind = dp.at("kind").get<std::string>();
    const std::string mode =
        kind == "fsdp" ? kind + ":" + dp.at("sharding").get<std::string>() : kind;
    QVERIFY2(winner->dp == 1 || mode == winner->dp_mode.toStdString(), spec.dump().c_str());
    QCOMPARE(QString::fromStdString(spec.at("train").at("precision").get<std::string>()),
             winner->precision);
    QCOMPARE(spec.at("train").value("activation_checkpointing", false), winner->checkpointing);
    QVERIFY(spec.at("train").at("steps") == spec_.at("train").at("steps"));
  }

  void cancelLeavesNoProcessOfThePlan() {
    PlanView& view = *editor().planView();
    view.trialsBox()->setValue(2);
    view.trialStepsBox()->setValue(100000);
    QVERIFY(view.startPlan(2));
    const pid_t plan = static_cast<pid_t>(view.pid());
    QVERIFY(plan > 0);
    seen_.insert(plan);
    // Its arguments a list, the spec a private file: `--db DB plan SPEC --json ...`.
    const QList<QByteArray> args =
        QByteArray::fromStdString(ringmaster::testing::readProcFile(plan, "cmdline")).split('\0');
    const qsizetype at = args.indexOf("plan");
    QVERIFY(at > 0 && at + 1 < args.size());
    const QFileInfo spec_file(QString::fromUtf8(args[at + 1]));
    QCOMPARE(spec_file.permissions() & ~(QFile::ReadUser | QFile::WriteUser),
             QFile::ReadOwner | QFile::WriteOwner);
    // Until the trial's workers run under it.
    QTRY_VERIFY_WITH_TIMEOUT(
        [&] {
          const std::set<pid_t> now = descendantsOf(plan);
          seen_.insert(now.begin(), now.end());
          return now.size() >= 2;
        }(),
        kPlanTimeoutMs);
    QSignalSpy finished(&view, &PlanView::planFinished);
    QTest::mouseClick(view.cancelButton(), Qt::LeftButton);
    QVERIFY(finished.wait(kPlanTimeoutMs));
    QVERIFY(!view.running());
    for (pid_t pid : seen_)
      QTRY_VERIFY2_WITH_TIMEOUT(!ringmaster::testing::processRuns(pid),
                                qPrintable(QString("process %1 is left").arg(pid)), 30000);
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    const std::vector<storage::SweepRecord> sweeps = storage::listSweeps(db);
    QCOMPARE(sweeps.size(), size_t{2});
    QCOMPARE(sweeps.front().status, std::string("cancelled"));
  }
};

QTEST_MAIN(UiPlanViewTest)
#include "ui_plan_view_test.moc"
