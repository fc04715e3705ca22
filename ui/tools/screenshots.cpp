// ringmaster-screenshots: opens the window on a database of real runs and saves the main views as
// PNG files (docs/screenshots/), for scripts/screenshots.sh, which records the runs first and runs
// this under Xvfb.
#include <CLI/CLI.hpp>
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QScrollArea>
#include <QTabWidget>
#include <QTest>
#include <nlohmann/json.hpp>

#include "data/background_jobs.h"
#include "main_window.h"
#include "views/compare_view.h"
#include "views/job/mesh_view.h"
#include "views/job_editor.h"
#include "views/pipeline_view.h"
#include "views/run_view.h"
#include "views/sweep_view.h"

using namespace ringmaster::ui;

namespace {

bool waitFor(const std::function<bool()>& ready, int ms = 20000) {
  QElapsedTimer timer;
  timer.start();
  while (!ready() && timer.elapsed() < ms) QTest::qWait(50);
  return ready();
}

void save(QWidget& window, const QString& dir, const QString& name) {
  QTest::qWait(400);  // let the last paint settle
  const QString path = QDir(dir).filePath(name + ".png");
  if (!window.grab().save(path)) qFatal("cannot write %s", qPrintable(path));
  std::printf("%s\n", qPrintable(path));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"ringmaster-screenshots: the main views of recorded runs as PNG files"};
  std::string db, out, editor_spec;
  int64_t live = 0, pipeline = 0, failed = 0, other = 0;
  cli.add_option("--db", db, "the run database")->required();
  cli.add_option("--out", out, "output directory")->required();
  cli.add_option("--ddp", live, "a DDP run (charts, ranks, communication)")->required();
  cli.add_option("--pipeline", pipeline, "a pipeline run")->required();
  cli.add_option("--failed", failed, "a failed run")->required();
  cli.add_option("--other", other, "a second run to compare with --ddp")->required();
  cli.add_option("--editor-spec", editor_spec, "a spec to show in the job editor")->required();
  int64_t sweep = 0;
  cli.add_option("--sweep", sweep, "a sweep (issue 37: `ringmaster sweep`), shown when given");
  CLI11_PARSE(cli, argc, argv);

  QApplication app(argc, argv);
  QApplication::setStyle("Fusion");
  QDir().mkpath(QString::fromStdString(out));
  const QString dir = QString::fromStdString(out);
  MainWindow window(
      {db, QApplication::applicationDirPath() + "/ringmaster", "ringmaster-screenshots"});
  window.resize(1440, 900);  // a common laptop screen (issue 33: the window fits it)
  window.show();
  if (!QTest::qWaitForWindowExposed(&window)) qFatal("no window");

  window.jobEditor()->loadFile(QString::fromStdString(editor_spec));
  window.tabs()->setCurrentWidget(window.jobEditor());
  // The form scrolled to the device mesh drawn under the strategy (issue 34).
  QTest::qWait(100);
  if (auto* form = window.jobEditor()->findChild<QScrollArea*>("formScroll"))
    form->ensureWidgetVisible(window.jobEditor()->meshView(), 0, 0);
  save(window, dir, "job-editor");

  RunView* run = window.openRun(live);
  waitFor([&] { return run->snapshot() != nullptr; });
  QTest::qWait(300);
  run->reload();  // again at the charts' final width
  QTest::qWait(800);
  save(window, dir, "run-charts");
  run->tabs()->setCurrentIndex(1);
  save(window, dir, "run-ranks");
  run->tabs()->setCurrentIndex(2);
  run->reload();
  QTest::qWait(800);
  save(window, dir, "run-communication");

  RunView* pipe = window.openRun(pipeline);
  waitFor([&] { return pipe->snapshot() != nullptr; });
  pipe->tabs()->setCurrentWidget(pipe->pipelineView());
  pipe->pipelineView()->jobs()->waitForIdle();  // the step is read off the GUI thread
  save(window, dir, "pipeline");

  window.compare({live, other})->jobs()->waitForIdle();
  save(window, dir, "compare");

  if (sweep > 0) {
    window.openSweep(sweep)->jobs()->waitForIdle();
    QTest::qWait(300);
    save(window, dir, "sweep");
  }

  RunView* broken = window.openRun(failed);
  waitFor([&] { return broken->snapshot() != nullptr; });
  save(window, dir, "failed-run");
  return 0;
}
