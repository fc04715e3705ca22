// The live views' data_version watch: one connection, opened lazily inside the poll job.
#include "data/data_version_watch.h"

#include "data/background_jobs.h"
#include "db/database.h"

namespace ringmaster::ui {

struct DataVersionWatch::Connection {
  std::string path;
  std::unique_ptr<storage::Database> db;
};

DataVersionWatch::DataVersionWatch(std::string db_path)
    : connection_(std::make_shared<Connection>(Connection{std::move(db_path), nullptr})) {}

std::function<int64_t(const JobToken&)> DataVersionWatch::reader() const {
  return [connection = connection_](const JobToken&) {
    if (!connection->db)
      connection->db = std::make_unique<storage::Database>(
          connection->path, storage::readingOptions(connection->path));
    return connection->db->dataVersion();
  };
}

bool DataVersionWatch::isNews(int64_t version) {
  if (version == seen_version_) return false;
  seen_version_ = version;
  return true;
}

}  // namespace ringmaster::ui
