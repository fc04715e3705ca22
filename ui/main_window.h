// The Ringmaster window: run history docked on the left, and tabs for the job editor, live and
// past runs, and comparisons. Keyboard shortcuts for the main actions; the layout is remembered.
#pragma once

#include <QMainWindow>
#include <QPointer>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#if RINGMASTER_HAVE_LIBSSH
#include "views/ssh_dialogs.h"
#endif

class QTabWidget;
class QDockWidget;
class QMessageBox;

namespace ringmaster::ui {

class HistoryView;
class JobEditor;
class RunProcess;
struct RunLaunch;
class RunView;
class CompareView;
class HostsView;
class SweepListView;
class SweepView;

struct MainWindowOptions {
  std::string db_path;
  // The `ringmaster` executable that runs jobs (`ringmaster run`); their SSH_ASKPASS is the
  // ringmaster-askpass beside it.
  QString ringmaster;
  QString settings_scope = "ringmaster";  // QSettings application name (tests use their own)
};

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(MainWindowOptions options, QWidget* parent = nullptr);
  ~MainWindow() override;

  JobEditor* jobEditor() const { return editor_; }
  HistoryView* history() const { return history_; }
  QTabWidget* tabs() const { return tabs_; }
  // The tab of a run, opened if needed (throws for an unknown run).
  RunView* openRun(int64_t run_id);
  RunView* runView(int64_t run_id) const;
  CompareView* compare(const std::vector<int64_t>& run_ids);
  // Issue 37: the tab listing the sweeps (opened if needed), and a sweep's tab (opened if needed;
  // an unknown sweep says so in its view).
  SweepListView* showSweeps();
  SweepView* openSweep(int64_t sweep_id);
  // Launches the spec through `ringmaster run`; the run's view opens as soon as it exists.
  // False (the reason in the status bar) when it could not start.
  bool launch(const nlohmann::json& spec);
  // The launches still running.
  int activeLaunches() const;
  // Asks in the window whether to cancel this run (a launch of this window) and cancels it on
  // "Yes"; the question (nullptr, the reason in the status bar, when the run is not this
  // window's to cancel).
  QMessageBox* requestCancel(int64_t run_id);
  // A detached run (issue 21): `ringmaster attach RUN` (its view opens and follows it) or
  // `ringmaster cancel RUN` from this window. False (the reason in the status bar) when the
  // command could not start.
  bool attachRun(int64_t run_id, bool cancel = false);
  // The hosts list (nullptr in a build without SSH).
  HostsView* hosts() const { return hosts_; }
#if RINGMASTER_HAVE_LIBSSH
  // Who answers SSH's questions (unknown host keys, passphrases): dialogs unless replaced.
  void setSshQuestions(SshQuestions questions);
#endif

 signals:
  void runOpened(qint64 run_id);
  void launchFinished(qint64 run_id, int exit_code);

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void buildActions();
  void openSpecFile();
  void saveSpecFile();

  MainWindowOptions options_;
  QTabWidget* tabs_ = nullptr;
  HistoryView* history_ = nullptr;
  QDockWidget* history_dock_ = nullptr;
  JobEditor* editor_ = nullptr;
  HostsView* hosts_ = nullptr;
  QPointer<SweepListView> sweeps_;
#if RINGMASTER_HAVE_LIBSSH
  SshQuestions questions_;
#endif
  bool startRun(const nlohmann::json& spec);
  bool startProcess(RunLaunch launch);
  RunProcess* launchOf(int64_t run_id) const;
  std::vector<std::unique_ptr<RunProcess>> launches_;
};

}  // namespace ringmaster::ui
