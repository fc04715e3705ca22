// Launches a job from the GUI as `ringmaster run` in a child process, a client of its run session:
// the run is recorded by that process, so a GUI that crashes or is killed loses nothing that
// arrived (the child gets SIGTERM from the kernel when the GUI dies and cancels cleanly: status
// `cancelled`, workers gone), and the GUI watches the database like any other viewer. The child
// tells it the run's id on its machine-readable channel (`--events FILE`, session/README.md)
// as soon as the run exists. Passphrases asked over SSH come through SSH_ASKPASS, a dialog program
// (app/'s ringmaster-askpass).
#pragma once

#include <QFile>
#include <QObject>
#include <QProcess>
#include <QStringList>
#include <QTemporaryDir>
#include <QTimer>
#include <memory>

namespace ringmaster::ui {

struct RunLaunch {
  QString ringmaster;  // the ringmaster executable
  QString askpass;     // the SSH_ASKPASS program: asks for a passphrase in a dialog
  QString db_path;
  QString spec_json;  // the spec to run (written to a private temporary file)
  bool accept_new_host_keys = false;
  // Detached (issue 21): `run --detach`; the command ends once the job runs, the job goes on.
  bool detach = false;
  // Instead of a spec: `attach RUN` (or `cancel RUN`) of a detached run. The job goes on when the
  // window dies while it is attached (the command is killed, not cancelled).
  int64_t attach_run = 0;
  bool cancel_run = false;
};

// The arguments of the ringmaster command a launch runs (`--events` and the spec file given).
QStringList runArguments(const RunLaunch& launch, const QString& spec_path,
                         const QString& events_path);

class RunProcess : public QObject {
  Q_OBJECT

 public:
  explicit RunProcess(QObject* parent = nullptr);
  ~RunProcess() override;  // cancels a run still going and waits for it (bounded)

  // Starts `ringmaster run`; false (with error()) when the program cannot start.
  bool start(const RunLaunch& launch);
  // The first Ctrl-C: the ranks finish their step and the run ends `cancelled`.
  void cancel();
  // The second: the workers are killed.
  void kill();
  bool running() const { return process_.state() != QProcess::NotRunning; }
  int64_t runId() const { return run_id_; }
  qint64 pid() const { return process_.processId(); }
  // What the run command printed on stderr (progress lines, errors), last lines first dropped.
  QString output() const { return output_.join('\n'); }
  QString error() const { return error_; }

 signals:
  // The run's id in the database, as soon as the command created it.
  void runCreated(qint64 run_id);
  // The command ended: its exit code (0 completed, 1 failed, 130 cancelled, others: could not
  // start the run, see output()).
  void finished(int exit_code);

 private:
  void readOutput();
  void readEvents();

  QProcess process_;
  std::unique_ptr<QTemporaryDir> spec_dir_;
  // The command's stderr goes to a file, not a pipe: if this process dies, the run's own output
  // must not fail on a broken pipe before it has recorded how it ended.
  QFile log_;
  QTimer log_timer_;
  QString partial_;
  QStringList output_;
  QString error_;
  // The command's events, one JSON object a line, appended to a file for the same reason.
  QFile events_;
  QByteArray events_partial_;
  int64_t run_id_ = 0;
  int signals_sent_ = 0;
};

}  // namespace ringmaster::ui
