// BackgroundJobs: a private thread pool, results posted back with QMetaObject::invokeMethod
// (queued), and per kind the newest id, whose result alone is delivered.
#include "data/background_jobs.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QThread>
#include <exception>

#include "db/database.h"

namespace ringmaster::ui {

BackgroundJobs::BackgroundJobs(QObject* parent) : QObject(parent) {
  pool_.setMaxThreadCount(2);
}

BackgroundJobs::~BackgroundJobs() {
  for (auto& [kind, state] : kinds_) state.token.flag_->store(true);
  pool_.waitForDone();
  // Results already posted are dropped with this object (Qt removes its pending events).
}

uint64_t BackgroundJobs::start(const QString& kind, std::function<void(const JobToken&)> work,
                               std::function<void()> deliver,
                               std::function<void(const QString&)> failed) {
  Kind& state = kinds_[kind];
  state.token.flag_->store(true);  // the job before, if any, is stale now
  state.token = JobToken();
  state.latest = ++next_id_;
  ++state.in_flight;
  const uint64_t id = state.latest;
  const JobToken token = state.token;
  pool_.start([this, kind, id, token, work = std::move(work), deliver = std::move(deliver),
               failed = std::move(failed)] {
    QString error;
    bool ok = true;
    try {
      work(token);
    } catch (const std::exception& e) {
      ok = false;
      error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(
        this,
        [this, kind, id, ok, error, deliver, failed] {
          Kind& now = kinds_[kind];
          --now.in_flight;
          if (id == now.latest) {
            if (ok)
              deliver();
            else if (failed)
              failed(error);
          }
          if (!busy()) emit idle();
        },
        Qt::QueuedConnection);
  });
  return id;
}

bool BackgroundJobs::busy(const QString& kind) const {
  if (!kind.isEmpty()) {
    const auto it = kinds_.find(kind);
    return it != kinds_.end() && it->second.in_flight > 0;
  }
  for (const auto& [name, state] : kinds_)
    if (state.in_flight > 0) return true;
  return false;
}

uint64_t BackgroundJobs::latestId(const QString& kind) const {
  const auto it = kinds_.find(kind);
  return it == kinds_.end() ? 0 : it->second.latest;
}

void BackgroundJobs::cancel(const QString& kind) {
  const auto it = kinds_.find(kind);
  if (it == kinds_.end()) return;
  it->second.token.flag_->store(true);
  it->second.latest = ++next_id_;  // whatever is in flight is stale
}

bool BackgroundJobs::waitForIdle(int timeout_ms) {
  const QDeadlineTimer deadline(timeout_ms);
  while (busy()) {
    if (deadline.hasExpired()) return false;
    pool_.waitForDone(static_cast<int>(std::min<qint64>(deadline.remainingTime(), 50)));
    QCoreApplication::sendPostedEvents(this, QEvent::MetaCall);
  }
  return true;
}

namespace {

bool notTheGuiThread() {
  const QCoreApplication* app = QCoreApplication::instance();
  return app == nullptr || QThread::currentThread() != app->thread();
}

}  // namespace

void installGuiThreadQueryCheck() {
  storage::setQueryThreadCheck(&notTheGuiThread);
}

}  // namespace ringmaster::ui
