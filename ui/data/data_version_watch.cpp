// The views' data_version watches: one connection each, opened inside a job, never on the GUI
// thread.
#include "data/data_version_watch.h"

#include <QString>

#include "data/background_jobs.h"
#include "db/database.h"

namespace ringmaster::ui {

struct DataVersionWatch::Connection {
  std::string path;
  std::unique_ptr<storage::Database> db;
};

DataVersionWatch::DataVersionWatch(std::string db_path)
    : connection_(std::make_shared<Connection>(Connection{std::move(db_path), nullptr})) {}

void DataVersionWatch::poll(BackgroundJobs* jobs, std::function<void()> changed) {
  if (jobs->busy("poll")) return;
  jobs->run<int64_t>(
      "poll",
      [connection = connection_](const JobToken&) {
        if (!connection->db)
          connection->db = std::make_unique<storage::Database>(
              connection->path, storage::readingOptions(connection->path));
        return connection->db->dataVersion();
      },
      [this, changed](int64_t version) {
        if (version == seen_version_) return;
        seen_version_ = version;
        changed();
      },
      [changed](const QString&) { changed(); });
}

void ListWatch::open(BackgroundJobs* jobs, const std::string& db_path,
                     std::function<void(storage::Database&)> reconcile,
                     std::function<void()> opened, std::function<void(const QString&)> failed) {
  db_.reset();
  jobs->cancel("poll");
  seen_version_ = -1;
  struct Opened {
    std::shared_ptr<storage::Database> db;
    int64_t version = -1;
  };
  jobs->run<Opened>(
      "open",
      [db_path, reconcile = std::move(reconcile)](const JobToken&) {
        auto db = std::make_shared<storage::Database>(db_path, storage::readingOptions(db_path));
        reconcile(*db);
        const int64_t version = db->dataVersion();
        return Opened{std::move(db), version};
      },
      [this, opened = std::move(opened)](Opened result) {
        db_ = std::move(result.db);
        seen_version_ = result.version;
        opened();
      },
      std::move(failed));
}

void ListWatch::poll(BackgroundJobs* jobs, std::function<void()> changed) {
  if (!db_ || jobs->busy("poll")) return;
  jobs->run<int64_t>(
      "poll", [db = db_](const JobToken&) { return db->dataVersion(); },
      [this, changed = std::move(changed)](int64_t version) {
        if (version == seen_version_) return;
        seen_version_ = version;
        changed();
      },
      [](const QString&) {});  // the next refresh says what is wrong
}

}  // namespace ringmaster::ui
