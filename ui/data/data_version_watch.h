// The data_version watch the live views poll (the run view, the sweep view): the database's
// data_version read on a connection of the watch's own, opened by the first read and used by one
// poll job at a time, and whether a version read is news. It starts no job itself.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace ringmaster::ui {

class JobToken;

class DataVersionWatch {
 public:
  explicit DataVersionWatch(std::string db_path);

  // A poll job's body: the data_version now. The job shares the connection, so one still running
  // when the view closes keeps it until the job ends.
  std::function<int64_t(const JobToken&)> reader() const;
  // Whether `version` differs from the one last seen; it is then the one seen.
  bool isNews(int64_t version);

 private:
  struct Connection;
  std::shared_ptr<Connection> connection_;
  int64_t seen_version_ = -1;
};

}  // namespace ringmaster::ui
