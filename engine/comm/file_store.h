// FileStore: the store of file:// init, an append-only log of set / delete records in one file on
// a file system every rank can see, serialised with flock(). Like PyTorch's, the last user to
// close it removes the file, so a later job with the same path starts empty.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>

#include "comm/store.h"

namespace ringmaster {

class FileStore : public Store {
 public:
  FileStore(std::string path, Millis timeout = std::chrono::seconds(300));
  ~FileStore() override;

  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t numKeys() override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;

  const std::string& path() const { return path_; }

 private:
  class Lock;
  // Reads the records appended since the last refresh into map_ (caller holds the file lock).
  void refresh();
  void append(uint8_t op, const std::string& key, const Bytes& value);

  std::string path_;
  int fd_ = -1;
  std::mutex mutex_;  // one thread of this process at a time in the file
  std::unordered_map<std::string, Bytes> map_;
  off_t offset_ = 0;  // bytes of the log already in map_
};

}  // namespace ringmaster
