// The data_version watches the views poll. DataVersionWatch (the run view, the sweep view): the
// data_version read in a "poll" job on a connection of its own, opened by the first read and used
// by one poll job at a time. ListWatch (the runs
// list, the sweeps list): the database opened by an "open" job that first reconciles what dead
// processes left, then polled on that connection by one "poll" job at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

class QString;

namespace ringmaster::storage {
class Database;
}

namespace ringmaster::ui {

class BackgroundJobs;
class JobToken;

class DataVersionWatch {
 public:
  explicit DataVersionWatch(std::string db_path);

  // A "poll" job of `jobs` (none while one runs): `changed()` when the data_version differs from
  // the one last seen, and when it cannot be read (the view's load then says what is wrong). The
  // job shares the connection, so one still running when the view closes keeps it until it ends.
  void poll(BackgroundJobs* jobs, std::function<void()> changed);

 private:
  struct Connection;
  std::shared_ptr<Connection> connection_;
  int64_t seen_version_ = -1;
};

class ListWatch {
 public:
  // Drops the connection (and the poll job) and opens `db_path` in an "open" job of `jobs`:
  // `reconcile` on it, its data_version the one seen; then `opened()`, or `failed(error)`.
  void open(BackgroundJobs* jobs, const std::string& db_path,
            std::function<void(storage::Database&)> reconcile, std::function<void()> opened,
            std::function<void(const QString&)> failed);
  // A "poll" job of `jobs` (none while one runs, nor before the open): `changed()` when the
  // data_version moved. A failed read is left to the next refresh to say.
  void poll(BackgroundJobs* jobs, std::function<void()> changed);

 private:
  std::shared_ptr<storage::Database> db_;
  int64_t seen_version_ = -1;
};

}  // namespace ringmaster::ui
