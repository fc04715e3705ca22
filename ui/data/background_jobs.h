// The one background-job helper of the views: work (database reads and writes) runs on a worker
// thread, its result comes back queued to the owner's (GUI) thread, each job carries an id and a
// cancellation flag, and a result older than the newest job of its kind is dropped. It does not
// share connections between jobs: each job opens its own, or owns one that only it uses.
//
// Also the window's check that no database work happens on the GUI thread
// (installGuiThreadQueryCheck).
#pragma once

#include <QObject>
#include <QString>
#include <QThreadPool>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>

namespace ringmaster::ui {

// A job's cancellation: set when a newer job of the same kind starts or the owner goes away.
// Long work checks it between queries and returns early (its result is dropped anyway).
class JobToken {
 public:
  bool cancelled() const { return flag_->load(std::memory_order_relaxed); }

 private:
  friend class BackgroundJobs;
  std::shared_ptr<std::atomic<bool>> flag_ = std::make_shared<std::atomic<bool>>(false);
};

class BackgroundJobs : public QObject {
  Q_OBJECT

 public:
  explicit BackgroundJobs(QObject* parent = nullptr);
  // Cancels every job and waits for those running: no result arrives after.
  ~BackgroundJobs() override;

  // Runs `work` on a worker thread as the newest job of `kind` (cancelling the one before). On the
  // owner's thread then: `done` with its result, or `failed` with the message of what it threw,
  // unless a newer job of `kind` was started meanwhile. The job's id.
  template <typename T>
  uint64_t run(const QString& kind, std::function<T(const JobToken&)> work,
               std::function<void(T)> done, std::function<void(const QString&)> failed = {}) {
    auto result = std::make_shared<std::optional<T>>();
    return start(
        kind, [work = std::move(work), result](const JobToken& token) { *result = work(token); },
        [done = std::move(done), result] {
          if (done) done(std::move(**result));
        },
        std::move(failed));
  }

  // Whether a job of `kind` (any kind when empty) is started and its result not yet delivered.
  bool busy(const QString& kind = {}) const;
  uint64_t latestId(const QString& kind) const;
  void cancel(const QString& kind);
  // Waits until no job is busy, delivering results (which may start further jobs) as they come;
  // false on timeout. For tests and for a view that must show its data before it goes on.
  bool waitForIdle(int timeout_ms = 30000);

 signals:
  // No job is busy any more (a result, or a failure, was just delivered).
  void idle();

 private:
  struct Kind {
    uint64_t latest = 0;
    JobToken token;
    int in_flight = 0;
  };
  uint64_t start(const QString& kind, std::function<void(const JobToken&)> work,
                 std::function<void()> deliver, std::function<void(const QString&)> failed);

  QThreadPool pool_;
  std::map<QString, Kind> kinds_;
  uint64_t next_id_ = 0;
};

// Installs storage's query-thread check: database work on the application's GUI thread throws
// kInternal. The window installs it in debug builds, the GUI tests always.
void installGuiThreadQueryCheck();

}  // namespace ringmaster::ui
