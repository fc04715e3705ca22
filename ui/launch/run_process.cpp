// RunProcess: QProcess around `ringmaster --db DB run SPEC`.
#include "data/run_process.h"

#include <sys/prctl.h>
#include <QRegularExpression>
#include <csignal>

namespace ringmaster::ui {

namespace {
constexpr int kKeptOutputLines = 400;
}

RunProcess::RunProcess(QObject* parent) : QObject(parent) {
  // The final report on stdout is in the database too.
  process_.setStandardOutputFile(QProcess::nullDevice());
  log_timer_.setInterval(100);
  connect(&log_timer_, &QTimer::timeout, this, &RunProcess::readOutput);
  connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    log_timer_.stop();
    readOutput();
    if (!partial_.isEmpty()) output_ << partial_;
    partial_.clear();
    log_.close();
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
  QStringList args{"--db", launch.db_path, "run", spec_path};
  if (launch.accept_new_host_keys) args << "--accept-new-host-keys";
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("SSH_ASKPASS", launch.ringmaster);
  env.insert("SSH_ASKPASS_REQUIRE", "force");
  process_.setProcessEnvironment(env);
  // The run must not outlive the GUI unattended: the kernel sends SIGTERM (a clean cancel) when
  // this process dies, however it dies.
  process_.setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });
  process_.start(launch.ringmaster, args);
  if (!process_.waitForStarted(10000)) {
    error_ = process_.errorString();
    return false;
  }
  if (!log_.open(QIODevice::ReadOnly)) {
    error_ = "cannot read the run's output: " + log_.errorString();
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
  static const QRegularExpression created(R"(^ringmaster run (\d+) ')");
  qsizetype end;
  while ((end = partial_.indexOf('\n')) >= 0) {
    QString line = partial_.left(end);
    partial_.remove(0, end + 1);
    // Progress lines on a pipe are plain; a carriage return starts a redraw.
    if (const qsizetype cr = line.lastIndexOf('\r'); cr >= 0) line = line.mid(cr + 1);
    if (run_id_ == 0) {
      if (auto match = created.match(line); match.hasMatch()) {
        run_id_ = match.captured(1).toLongLong();
        emit runCreated(run_id_);
      }
    }
    output_ << line;
    if (output_.size() > kKeptOutputLines) output_.removeFirst();
  }
}

}  // namespace ringmaster::ui
