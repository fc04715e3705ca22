// Issue 33, failures that show their error, in the window: a real program job failing on a
// misspelled argument (argparse's exit 2), recorded by `ringmaster run`, opened in a RunView. Its
// header's root cause has argparse's message under it, escaped as rich text; the view opens on
// the Logs tab, not on empty charts; a completed run and a run that failed after its first step
// still open on the charts.
#include <QLabel>
#include <QProcess>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>

#include "data/background_jobs.h"
#include "db/database.h"
#include "query/runs.h"
#include "ui_test_support.h"
#include "views/run_view.h"

using namespace ringmaster;
using namespace ringmaster::ui;
using namespace ringmaster::ui::testing;

class UiFailedRunTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;

  // Records a program job running `script` with `args` on one local rank; its run id.
  int64_t record(const QString& name, const QString& script, const QStringList& args) {
    const QString script_path = dir_.filePath(name + ".py");
    QFile script_file(script_path);
    if (!script_file.open(QIODevice::WriteOnly)) return -1;
    script_file.write(script.toUtf8());
    script_file.close();
    nlohmann::json arguments = nlohmann::json::array();
    for (const QString& arg : args) arguments.push_back(arg.toStdString());
    const nlohmann::json spec = {
        {"name", name.toStdString()},
        {"program",
         {{"python", "/usr/bin/python3"},
          {"script", script_path.toStdString()},
          {"args", arguments}}},
        {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", 1}}}}, {"timeout_s", 60}}}};
    QFile spec_file(dir_.filePath(name + ".json"));
    if (!spec_file.open(QIODevice::WriteOnly)) return -1;
    spec_file.write(QByteArray::fromStdString(spec.dump()));
    spec_file.close();
    QProcess run;
    run.setProcessChannelMode(QProcess::MergedChannels);
    run.start(ringmasterExecutable(), {"--db", dbPath(), "run", spec_file.fileName(), "-q"});
    if (!run.waitForFinished(120000)) {
      run.kill();
      run.waitForFinished();
      return -1;
    }
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(dbPath().toStdString());
    return storage::listRuns(db).at(0).id;
  }
  QString dbPath() const { return dir_.filePath("runs.db"); }

 private slots:
  void initTestCase() {
    installGuiThreadQueryCheck();
    QVERIFY(dir_.isValid());
  }

  void aScriptFailingOnABadArgumentShowsArgparsesMessageAndOpensOnItsLogs() {
    const int64_t run = record("bad_args",
                               "import argparse\n"
                               "parser = argparse.ArgumentParser()\n"
                               "parser.add_argument('--lr', type=float, help='<b>rate</b>')\n"
                               "parser.parse_args()\n",
                               {"--lrr", "<b>0.1</b>"});
    QVERIFY(run > 0);
    RunView view(dbPath().toStdString(), run);
    view.resize(1200, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QTRY_COMPARE_WITH_TIMEOUT(view.statusText(), QString("failed"), 20000);
    QTRY_VERIFY_WITH_TIMEOUT(!view.rootCauseText().isEmpty(), 20000);
    const QString cause = view.rootCauseText();
    QVERIFY2(cause.contains("exit code 2"), qPrintable(cause));
    QVERIFY2(cause.contains("usage: bad_args.py [-h] [--lr LR]"), qPrintable(cause));
    // The script's own text is escaped: "<b>" shows as it is, never as bold.
    QVERIFY2(cause.contains("bad_args.py: error: unrecognized arguments: --lrr "
                            "&lt;b&gt;0.1&lt;/b&gt;"),
             qPrintable(cause));
    QVERIFY2(!cause.contains("<b>0.1"), qPrintable(cause));
    // What a person sees in the label: the message, on its own line.
    auto* label = view.findChild<QLabel*>("rootCause");
    QVERIFY(label && label->isVisible());
    // It opens on its logs, which hold the same lines.
    QCOMPARE(view.tabs()->tabText(view.tabs()->currentIndex()), QString("Logs"));
    QTRY_VERIFY_WITH_TIMEOUT(view.logText().contains("unrecognized arguments: --lrr"), 20000);
  }

  void aRunThatFailedAfterItsFirstStepAndACompletedRunOpenOnTheirCharts() {
    const int64_t failed = record("late_failure",
                                  "import sys, ringmaster\nringmaster.init()\n"
                                  "ringmaster.log(1, loss=1.0, samples=8)\n"
                                  "print('gave up after a step', file=sys.stderr)\nsys.exit(1)\n",
                                  {});
    const int64_t completed =
        record("fine", "import ringmaster\nringmaster.init()\nprint('fine')\n", {});
    QVERIFY(failed > 0 && completed > 0);
    for (const auto& [run, status] :
         {std::pair{failed, QString("failed")}, std::pair{completed, QString("completed")}}) {
      RunView view(dbPath().toStdString(), run);
      view.show();
      QVERIFY(QTest::qWaitForWindowExposed(&view));
      QTRY_COMPARE_WITH_TIMEOUT(view.statusText(), status, 20000);
      QCOMPARE(view.tabs()->tabText(view.tabs()->currentIndex()), QString("Charts"));
    }
    // The failed one still names what its rank wrote last.
    RunView view(dbPath().toStdString(), failed);
    QTRY_VERIFY_WITH_TIMEOUT(view.rootCauseText().contains("gave up after a step"), 20000);
  }
};

QTEST_MAIN(UiFailedRunTest)
#include "ui_failed_run_test.moc"
