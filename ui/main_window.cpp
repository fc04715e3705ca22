// MainWindow: docks, tabs, menus and shortcuts, launches and QSettings.
#include "main_window.h"

#include <QAbstractButton>
#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressDialog>
#include <QScreen>
#include <QSettings>
#include <QStatusBar>
#include <QTabBar>
#include <QTabWidget>
#include <QToolBar>

#include "core/error.h"
#include "launch/run_process.h"
#include "views/compare_view.h"
#include "views/history_view.h"
#include "views/job_editor.h"
#include "views/run_view.h"
#include "views/sweep_list.h"
#include "views/sweep_view.h"
#if RINGMASTER_HAVE_LIBSSH
#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>

#include "launcher/local_launcher.h"
#include "models/untrusted_text.h"
#include "spec/job_spec.h"
#include "ssh/host_check.h"
#include "views/hosts_view.h"
#endif

namespace ringmaster::ui {

MainWindow::MainWindow(MainWindowOptions options, QWidget* parent)
    : QMainWindow(parent), options_(std::move(options)) {
  setWindowTitle(QString("Ringmaster — %1").arg(QString::fromStdString(options_.db_path)));
  setObjectName("ringmasterMainWindow");
  tabs_ = new QTabWidget();
  tabs_->setObjectName("mainTabs");
  tabs_->setTabsClosable(true);
  tabs_->setDocumentMode(true);
  tabs_->setMovable(true);
  setCentralWidget(tabs_);
  editor_ = new JobEditor();
  editor_->setObjectName("jobEditor");
  tabs_->addTab(editor_, "New job");
  tabs_->tabBar()->setTabButton(0, QTabBar::RightSide, nullptr);  // the editor stays
  connect(tabs_, &QTabWidget::tabCloseRequested, this, [this](int index) {
    QWidget* page = tabs_->widget(index);
    if (page == editor_ || page == static_cast<QWidget*>(hosts_)) return;
    tabs_->removeTab(index);
    page->deleteLater();
  });
  editor_->setPlanCommand(options_.ringmaster, QString::fromStdString(options_.db_path));
  connect(editor_, &JobEditor::launchRequested, this,
          [this](const nlohmann::json& spec) { launch(spec); });

  history_ = new HistoryView();
  history_->setObjectName("history");
  history_dock_ = new QDockWidget("Runs", this);
  history_dock_->setObjectName("historyDock");
  history_dock_->setWidget(history_);
  addDockWidget(Qt::LeftDockWidgetArea, history_dock_);
  history_->setDatabase(options_.db_path);
  connect(history_, &HistoryView::openRun, this, [this](qint64 id) { openRun(id); });
  connect(history_, &HistoryView::compareRuns, this,
          [this](const std::vector<int64_t>& ids) { compare(ids); });
  connect(history_, &HistoryView::attachRun, this, [this](qint64 id) { attachRun(id); });
  connect(history_, &HistoryView::openSweep, this, [this](qint64 id) { openSweep(id); });
  connect(history_, &HistoryView::cancelDetachedRun, this,
          [this](qint64 id) { attachRun(id, /*cancel=*/true); });

#if RINGMASTER_HAVE_LIBSSH
  questions_ = dialogQuestions(this);
  hosts_ = new HostsView();
  hosts_->setObjectName("hostsView");
  tabs_->addTab(hosts_, "Hosts");
  tabs_->tabBar()->setTabButton(1, QTabBar::RightSide, nullptr);
#endif
  buildActions();
  statusBar()->showMessage(QString("Database %1").arg(QString::fromStdString(options_.db_path)));
  QSettings settings("ringmaster", options_.settings_scope);
  // First opened: 1440x900, or the screen's free area where that is smaller (a 1366x768 laptop).
  if (!restoreGeometry(settings.value("window/geometry").toByteArray()))
    resize(QSize(1440, 900).boundedTo(screen()->availableGeometry().size()));
  resizeDocks({history_dock_}, {470}, Qt::Horizontal);
  restoreState(settings.value("window/state").toByteArray());
}

MainWindow::~MainWindow() = default;

void MainWindow::buildActions() {
  QMenu* file = menuBar()->addMenu("&File");
  QToolBar* toolbar = addToolBar("Main");
  toolbar->setObjectName("mainToolbar");
  auto action = [&](QMenu* menu, const QString& text, const QKeySequence& keys, auto slot) {
    auto* a = new QAction(text, this);
    a->setShortcut(keys);
    connect(a, &QAction::triggered, this, slot);
    menu->addAction(a);
    return a;
  };
  toolbar->addAction(
      action(file, "&New job", QKeySequence::New, [this] { tabs_->setCurrentWidget(editor_); }));
  toolbar->addAction(action(file, "&Open spec…", QKeySequence::Open, [this] { openSpecFile(); }));
  action(file, "&Save spec…", QKeySequence::Save, [this] { saveSpecFile(); });
  QMenu* examples = file->addMenu("New from &example");
  for (const ExampleSpec& example : exampleSpecs()) {
    QAction* a = examples->addAction(example.name, this, [this, name = example.name] {
      editor_->startFromExample(name);
      tabs_->setCurrentWidget(editor_);
    });
    a->setToolTip(example.description);
  }
  toolbar->addAction(action(file, "&Launch", QKeySequence("Ctrl+Return"), [this] {
    if (editor_->spec())
      launch(editor_->document());
    else {
      tabs_->setCurrentWidget(editor_);
      statusBar()->showMessage("Not launched: the spec has problems, listed beside Launch");
    }
  }));
  file->addSeparator();
  action(file, "&Quit", QKeySequence::Quit, [this] { close(); });
  QMenu* view = menuBar()->addMenu("&View");
  view->addAction(history_dock_->toggleViewAction());
  action(view, "&Compare selected runs", QKeySequence("Ctrl+D"), [this] {
    if (history_->selectedRuns().size() >= 2) compare(history_->selectedRuns());
  });
  action(view, "S&weeps", QKeySequence("Ctrl+Shift+S"), [this] { showSweeps(); });
  action(view, "&Refresh", QKeySequence::Refresh, [this] { history_->refresh(); });
  if (hosts_)
    action(view, "&Hosts", QKeySequence("Ctrl+H"), [this] { tabs_->setCurrentWidget(hosts_); });
  action(view, "Close &tab", QKeySequence::Close, [this] {
    if (tabs_->currentWidget() != editor_) emit tabs_->tabCloseRequested(tabs_->currentIndex());
  });
  QMenu* run = menuBar()->addMenu("&Run");
  action(run, "&Cancel the current run…", QKeySequence("Ctrl+."), [this] {
    if (auto* view = qobject_cast<RunView*>(tabs_->currentWidget()))
      requestCancel(view->runId());
    else
      statusBar()->showMessage("Cancel: show the run's tab first", 5000);
  });
}

RunView* MainWindow::runView(int64_t run_id) const {
  for (int i = 0; i < tabs_->count(); ++i)
    if (auto* view = qobject_cast<RunView*>(tabs_->widget(i)); view && view->runId() == run_id)
      return view;
  return nullptr;
}

RunView* MainWindow::openRun(int64_t run_id) {
  if (RunView* existing = runView(run_id)) {
    tabs_->setCurrentWidget(existing);
    return existing;
  }
  auto* view = new RunView(options_.db_path, run_id);
  const int index = tabs_->addTab(view, QString("Run %1").arg(run_id));
  tabs_->setCurrentIndex(index);
  if (RunProcess* process = launchOf(run_id); process && process->running())
    view->setCancellable(true);
  connect(view, &RunView::cancelRequested, this, [this](qint64 id) { requestCancel(id); });
  connect(view, &RunView::statusChanged, this, [this, view, run_id](const QString& status) {
    const int i = tabs_->indexOf(view);
    if (i >= 0) tabs_->setTabText(i, QString("Run %1 · %2").arg(run_id).arg(status));
  });
  emit runOpened(run_id);
  return view;
}

CompareView* MainWindow::compare(const std::vector<int64_t>& run_ids) {
  auto* view = new CompareView(options_.db_path, run_ids);
  QStringList ids;
  for (int64_t id : run_ids) ids << QString::number(id);
  tabs_->setCurrentIndex(tabs_->addTab(view, "Compare " + ids.join(", ")));
  return view;
}

SweepListView* MainWindow::showSweeps() {
  if (!sweeps_) {
    sweeps_ = new SweepListView();
    sweeps_->setObjectName("sweepList");
    sweeps_->setDatabase(options_.db_path);
    connect(sweeps_, &SweepListView::openSweep, this, [this](qint64 id) { openSweep(id); });
    tabs_->addTab(sweeps_, "Sweeps");
  }
  tabs_->setCurrentWidget(sweeps_);
  return sweeps_;
}

SweepView* MainWindow::openSweep(int64_t sweep_id) {
  for (int i = 0; i < tabs_->count(); ++i)
    if (auto* view = qobject_cast<SweepView*>(tabs_->widget(i));
        view && view->sweepId() == sweep_id) {
      tabs_->setCurrentWidget(view);
      return view;
    }
  auto* view = new SweepView(options_.db_path, sweep_id);
  tabs_->setCurrentIndex(tabs_->addTab(view, QString("Sweep %1").arg(sweep_id)));
  connect(view, &SweepView::openRun, this, [this](qint64 id) { openRun(id); });
  connect(view, &SweepView::statusChanged, this, [this, view, sweep_id](const QString& status) {
    if (const int i = tabs_->indexOf(view); i >= 0)
      tabs_->setTabText(i, QString("Sweep %1 · %2").arg(sweep_id).arg(status));
  });
  return view;
}

bool MainWindow::launch(const nlohmann::json& spec) {
#if RINGMASTER_HAVE_LIBSSH
  // Over SSH, every host is checked first, off the GUI thread: an unknown host key is shown with
  // its fingerprint and asked about here, a changed one refused with both fingerprints, before
  // `ringmaster run` connects with the keys now known. Those hosts are all of the job's unless it
  // runs here (runsLocally, the run command's own rule).
  SpecParseResult parsed = parseJobSpec(spec);
  std::vector<LaunchHostSpec> remote;
  if (parsed.ok() && !runsLocally(parsed.spec->launch)) remote = parsed.spec->launch.hosts;
  if (!remote.empty()) {
    statusBar()->showMessage(
        QString("Connecting to %1 host%2…").arg(remote.size()).arg(remote.size() == 1 ? "" : "s"));
    const SshConnectOptions options = guiConnectOptions(this, questions_, defaultKnownHostsPath());
    // Connecting may take up to the connect timeout per host: say so, and let the user give up.
    auto* progress = new QProgressDialog(QString("Connecting to %1 host%2 and checking their keys…")
                                             .arg(remote.size())
                                             .arg(remote.size() == 1 ? "" : "s"),
                                         "Cancel", 0, 0, this);
    progress->setWindowModality(Qt::NonModal);
    progress->setMinimumDuration(500);
    auto cancelled = std::make_shared<bool>(false);
    connect(progress, &QProgressDialog::canceled, this, [this, cancelled] {
      *cancelled = true;
      statusBar()->showMessage("Launch cancelled");
    });
    auto* watcher = new QFutureWatcher<QStringList>(this);
    connect(watcher, &QFutureWatcher<QStringList>::finished, this,
            [this, watcher, spec, progress, cancelled] {
              const QStringList errors = watcher->result();
              watcher->deleteLater();
              progress->deleteLater();
              if (*cancelled) return;
              if (!errors.isEmpty()) {
                statusBar()->showMessage("Not launched: a host could not be reached");
                QMessageBox box(QMessageBox::Warning, "Not launched", errors.join("\n\n"),
                                QMessageBox::Ok, this);
                box.setTextFormat(Qt::PlainText);  // host errors are untrusted text
                box.exec();
                return;
              }
              startRun(spec);
            });
    const std::string node =
        (QApplication::applicationDirPath() + "/ringmaster-node").toStdString();
    watcher->setFuture(QtConcurrent::run([remote, options, node] {
      QStringList errors;
      for (const LaunchHostSpec& host : remote) {
        try {
          const HostReport report =
              checkHost(resolveSshTarget(host, defaultSshConfigPath()), options, node);
          if (!report.error.empty()) errors << untrustedBlock(report.error);
        } catch (const Error& e) {
          errors << untrustedBlock(e.message());
        }
      }
      return errors;
    }));
    return true;
  }
#endif
  return startRun(spec);
}

#if RINGMASTER_HAVE_LIBSSH
void MainWindow::setSshQuestions(SshQuestions questions) {
  questions_ = questions;
  hosts_->setQuestions(std::move(questions));
}
#endif

bool MainWindow::startRun(const nlohmann::json& spec) {
  const QString askpass = QFileInfo(options_.ringmaster).absolutePath() + "/ringmaster-askpass";
  return startProcess({.ringmaster = options_.ringmaster,
                       .askpass = askpass,
                       .db_path = QString::fromStdString(options_.db_path),
                       .spec_json = QString::fromStdString(spec.dump(2)),
                       .detach = editor_->detachChosen()});
}

bool MainWindow::attachRun(int64_t run_id, bool cancel) {
  if (RunProcess* process = launchOf(run_id); process && process->running()) {
    if (cancel) process->cancel();
    statusBar()->showMessage(QString("Run %1 is already followed from this window").arg(run_id),
                             10000);
    return process->running();
  }
  const QString askpass = QFileInfo(options_.ringmaster).absolutePath() + "/ringmaster-askpass";
  return startProcess({.ringmaster = options_.ringmaster,
                       .askpass = askpass,
                       .db_path = QString::fromStdString(options_.db_path),
                       .attach_run = run_id,
                       .cancel_run = cancel});
}

bool MainWindow::startProcess(RunLaunch launch) {
  const bool detaching = launch.detach;
  auto process = std::make_unique<RunProcess>();
  RunProcess* raw = process.get();
  connect(raw, &RunProcess::runCreated, this, [this](qint64 id) {
    openRun(id)->setCancellable(true);
    history_->refresh();
    statusBar()->showMessage(QString("Run %1 started; its tab shows how it goes").arg(id), 10000);
  });
  connect(raw, &RunProcess::finished, this, [this, raw, detaching](int code) {
    const int64_t id = raw->runId();
    if (id == 0) {
      // The command refused the job before creating a run: show why.
      statusBar()->showMessage("Not launched: the run command refused the job", 30000);
      auto* box = new QMessageBox(QMessageBox::Warning, "Launch failed",
                                  untrustedBlock(raw->output().right(4000).toStdString()),
                                  QMessageBox::Ok, this);
      box->setObjectName("launchFailed");
      box->setTextFormat(Qt::PlainText);  // the command's output, workers' words included
      box->setAttribute(Qt::WA_DeleteOnClose);
      box->open();  // not exec(): the window goes on while the message is read
    }
    if (RunView* view = id != 0 ? runView(id) : nullptr) view->setCancellable(false);
    const QString how = code == 0 && detaching
                            ? QString(
                                  "is detached: it goes on without this window (Attach in "
                                  "the run list follows it again)")
                        : code == 0   ? QString("completed")
                        : code == 1   ? QString("failed")
                        : code == 130 ? QString("was cancelled")
                                      : QString("ended (exit code %1)").arg(code);
    if (id != 0) statusBar()->showMessage(QString("Run %1 %2").arg(id).arg(how), 30000);
    history_->refresh();
    emit launchFinished(id, code);
  });
  if (!raw->start(launch)) {
    statusBar()->showMessage("Could not launch: " + raw->error());
    return false;
  }
  statusBar()->showMessage("Launching…");
  launches_.push_back(std::move(process));
  return true;
}

RunProcess* MainWindow::launchOf(int64_t run_id) const {
  for (const auto& process : launches_)
    if (process->runId() == run_id) return process.get();
  return nullptr;
}

QMessageBox* MainWindow::requestCancel(int64_t run_id) {
  RunProcess* process = launchOf(run_id);
  if (!process || !process->running()) {
    statusBar()->showMessage(
        QString("Run %1 is not running from this window: nothing to cancel here").arg(run_id),
        10000);
    return nullptr;
  }
  auto* box = new QMessageBox(QMessageBox::Question, QString("Cancel run %1?").arg(run_id),
                              QString("Cancel run %1? Its ranks stop after the step they are in; "
                                      "what it recorded so far is kept.")
                                  .arg(run_id),
                              QMessageBox::Yes | QMessageBox::No, this);
  box->setObjectName("cancelConfirmation");
  box->button(QMessageBox::Yes)->setText("Cancel the run");
  box->button(QMessageBox::No)->setText("Keep it running");
  box->setDefaultButton(QMessageBox::No);
  box->setAttribute(Qt::WA_DeleteOnClose);
  connect(box, &QMessageBox::buttonClicked, this, [this, box, run_id](QAbstractButton* button) {
    if (box->standardButton(button) != QMessageBox::Yes) return;
    // Looked up again: the run may have ended while the question was open.
    if (RunProcess* still = launchOf(run_id); still && still->running()) {
      still->cancel();
      statusBar()->showMessage(QString("Cancelling run %1…").arg(run_id));
    }
  });
  box->open();
  return box;
}

int MainWindow::activeLaunches() const {
  int n = 0;
  for (const auto& process : launches_) n += process->running() ? 1 : 0;
  return n;
}

void MainWindow::openSpecFile() {
  const QString path =
      QFileDialog::getOpenFileName(this, "Open a job spec", {}, "Job specs (*.json)");
  if (path.isEmpty()) return;
  if (!editor_->loadFile(path)) QMessageBox::warning(this, "Open spec", editor_->lastFileError());
  tabs_->setCurrentWidget(editor_);
}

void MainWindow::saveSpecFile() {
  const QString path =
      QFileDialog::getSaveFileName(this, "Save the job spec", {}, "Job specs (*.json)");
  if (path.isEmpty()) return;
  if (!editor_->saveFile(path)) QMessageBox::warning(this, "Save spec", editor_->lastFileError());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (activeLaunches() > 0 &&
      QMessageBox::question(this, "Runs in progress",
                            "Closing cancels the runs still going (what they recorded is kept). "
                            "Close?") != QMessageBox::Yes) {
    event->ignore();
    return;
  }
  QSettings settings("ringmaster", options_.settings_scope);
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/state", saveState());
  launches_.clear();  // each cancels its run and waits for it
  event->accept();
}

}  // namespace ringmaster::ui
