// RunProcess: QProcess around `ringmaster --db DB run SPEC --events FILE`.
#include "launch/run_process.h"

#include <sys/prctl.h>
#include <csignal>

#include "run/run_events.h"

namespace ringmaster::ui {

namespace {
constexpr int kKeptOutputLines = 400;
}

RunProcess::RunProcess(QObject* parent) : QObject(parent) {
  // The final report on stdout is in the database too.
  process_.setStandardOutputFile(QProcess::nullDevice());
  log_timer_.setInterval(100);
  connect(&log_timer_, &QTimer::timeout, this, [this] {
    readOutput();
    readEvents();
  });
  connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    log_timer_.stop();
    readOutput();
    readEvents();
    if (!partial_.isEmpty()) output_ << partial_;
    partial_.clear();
    log_.close();
    events_.close();
    spec_dir_.reset();
    emit finished(status == QProcess::NormalExit ? code : 128 + SIGKILL);
  });
}

RunProcess::~RunProcess() {
  if (!running()) return;
  disconnect(&process_, nullptr, this, nullptr);
  cancel();
  if (!process_.waitForFinished(15000)) {
    kill();
    process_.waitForFinished(5000);
  }
}

QStringList runArguments(const RunLaunch& launch, const QString& spec_path,
                         const QString& events_path) {
  QStringList args{"--db", launch.db_path};
  if (launch.attach_run > 0) {
    args << (launch.cancel_run ? "cancel" : "attach") << QString::number(launch.attach_run);
  } else {
    args << "run" << spec_path;
    if (launch.detach) args << "--detach";
  }
  args << "--events" << events_path;
  if (launch.accept_new_host_keys && launch.attach_run == 0) args << "--accept-new-host-keys";
  return args;
}

bool RunProcess::start(const RunLaunch& launch) {
  spec_dir_ = std::make_unique<QTemporaryDir>();
  const QString spec_path = spec_dir_->filePath("spec.json");
  QFile spec(spec_path);
  if (!spec_dir_->isValid() || !spec.open(QIODevice::WriteOnly) ||
      spec.write(launch.spec_json.toUtf8()) < 0) {
    error_ = "cannot write the spec to a temporary file";
    return false;
  }
  spec.close();
  process_.setStandardErrorFile(spec_dir_->filePath("run.log"));
  log_.setFileName(spec_dir_->filePath("run.log"));
  const QString events_path = spec_dir_->filePath("events.jsonl");
  QFile events_file(events_path);  // made now, so that it can be opened for reading at once
  if (!events_file.open(QIODevice::WriteOnly)) {
    error_ = "cannot create the run's events file: " + events_file.errorString();
    return false;
  }
  events_file.close();
  const QStringList args = runArguments(launch, spec_path, events_path);
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("SSH_ASKPASS", launch.askpass);
  env.insert("SSH_ASKPASS_REQUIRE", "force");
  process_.setProcessEnvironment(env);
  // The run must not outlive the GUI unattended: the kernel sends SIGTERM (a clean cancel) when
  // this process dies, however it dies.
  // A detached job is left going: the command following it is killed instead.
  const bool detached = launch.detach || launch.attach_run > 0;
  process_.setChildProcessModifier(
      [detached] { ::prctl(PR_SET_PDEATHSIG, detached ? SIGKILL : SIGTERM); });
  process_.start(launch.ringmaster, args);
  if (!process_.waitForStarted(10000)) {
    error_ = process_.errorString();
    return false;
  }
  if (!log_.open(QIODevice::ReadOnly)) {
    error_ = "cannot read the run's output: " + log_.errorString();
    return false;
  }
  events_.setFileName(events_path);
  if (!events_.open(QIODevice::ReadOnly)) {
    error_ = "cannot read the run's events: " + events_.errorString();
    return false;
  }
  log_timer_.start();
  return true;
}

void RunProcess::cancel() {
  if (!running()) return;
  ::kill(static_cast<pid_t>(process_.processId()), SIGINT);
  ++signals_sent_;
}

void RunProcess::kill() {
  // The run command kills its workers on its second signal.
  if (signals_sent_ == 0) cancel();
  cancel();
}

void RunProcess::readOutput() {
  if (!log_.isOpen()) return;
  partial_ += QString::fromUtf8(log_.readAll());
  qsizetype end;
  while ((end = partial_.indexOf('\n')) >= 0) {
    QString line = partial_.left(end);
    partial_.remove(0, end + 1);
    // Progress lines on a pipe are plain; a carriage return starts a redraw.
    if (const qsizetype cr = line.lastIndexOf('\r'); cr >= 0) line = line.mid(cr + 1);
    output_ << line;
    if (output_.size() > kKeptOutputLines) output_.removeFirst();
  }
}

void RunProcess::readEvents() {
  if (!events_.isOpen()) return;
  events_partial_ += events_.readAll();
  qsizetype end;
  while ((end = events_partial_.indexOf('\n')) >= 0) {
    const QByteArray line = events_partial_.left(end);
    events_partial_.remove(0, end + 1);
    const std::optional<session::RunEvent> event =
        session::decodeRunEvent(std::string_view(line.constData(), line.size()));
    if (!event) continue;
    if (event->event == "created" && run_id_ == 0 && event->run > 0) {
      run_id_ = event->run;
      emit runCreated(run_id_);
    }
  }
}

}  // namespace ringmaster::ui
