// FileStore: records are [u8 op][u32 key length][key][u32 value length][value], op 1 = set,
// 2 = delete. Every operation takes an exclusive flock, catches up with the log, then appends.
#include "comm/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace ringmaster {

namespace {
constexpr uint8_t kSetRecord = 1;
constexpr uint8_t kDeleteRecord = 2;
constexpr char kUsersKey[] = "__ringmaster_file_store_users";

uint32_t readU32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
void putU32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
}  // namespace

// Holds this process's mutex and the file's exclusive flock.
class FileStore::Lock {
 public:
  explicit Lock(FileStore& store) : guard_(store.mutex_), fd_(store.fd_) {
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR)
        RM_THROW(kIo, fmt::format("store file {}: flock: {}", store.path_, std::strerror(errno)));
    }
  }
  ~Lock() { ::flock(fd_, LOCK_UN); }

 private:
  std::lock_guard<std::mutex> guard_;
  int fd_;
};

FileStore::FileStore(std::string path, Millis timeout) : path_(std::move(path)) {
  timeout_ = timeout;
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0)
    RM_THROW(kIo, fmt::format("store file {}: cannot open: {}", path_, std::strerror(errno)));
  add(kUsersKey, 1);
}

FileStore::~FileStore() {
  try {
    Lock lock(*this);
    refresh();
    int64_t users = map_.count(kUsersKey) ? std::stoll(toString(map_[kUsersKey])) - 1 : 0;
    append(kSetRecord, kUsersKey, toBytes(std::to_string(users)));
    if (users <= 0) ::unlink(path_.c_str());
  } catch (const std::exception&) {
    // A destructor cannot report; the file stays and the next user appends to it.
  }
  ::close(fd_);
}

void FileStore::refresh() {
  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    RM_THROW(kIo, fmt::format("store file {}: stat: {}", path_, std::strerror(errno)));
  if (st.st_size < offset_) {  // the file was replaced under us: start over
    map_.clear();
    offset_ = 0;
  }
  if (st.st_size == offset_) return;
  Bytes buf(static_cast<size_t>(st.st_size - offset_));
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t r = ::pread(fd_, buf.data() + got, buf.size() - got, offset_ + static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) RM_THROW(kIo, fmt::format("store file {}: read failed", path_));
    got += static_cast<size_t>(r);
  }
  size_t pos = 0;
  auto truncated = [&] {
    RM_THROW(kFormat, fmt::format("store file {}: truncated record at byte {}", path_,
                                  offset_ + static_cast<off_t>(pos)));
  };
  while (pos < buf.size()) {
    if (buf.size() - pos < 5) truncated();
    uint8_t op = buf[pos];
    uint32_t klen = readU32(&buf[pos + 1]);
    if (buf.size() - pos - 5 < klen + 4) truncated();
    std::string key(reinterpret_cast<const char*>(&buf[pos + 5]), klen);
    uint32_t vlen = readU32(&buf[pos + 5 + klen]);
    size_t value_at = pos + 9 + klen;
    if (buf.size() - value_at < vlen) truncated();
    if (op == kSetRecord) {
      map_[key] = Bytes(buf.begin() + static_cast<ptrdiff_t>(value_at),
                        buf.begin() + static_cast<ptrdiff_t>(value_at + vlen));
    } else if (op == kDeleteRecord) {
      map_.erase(key);
    } else {
      RM_THROW(kFormat, fmt::format("store file {}: unknown record type {}", path_, op));
    }
    pos = value_at + vlen;
  }
  offset_ += static_cast<off_t>(buf.size());
}

void FileStore::append(uint8_t op, const std::string& key, const Bytes& value) {
  Bytes rec{op};
  putU32(rec, static_cast<uint32_t>(key.size()));
  rec.insert(rec.end(), key.begin(), key.end());
  putU32(rec, static_cast<uint32_t>(value.size()));
  rec.insert(rec.end(), value.begin(), value.end());
  struct stat st {};
  ::fstat(fd_, &st);
  size_t done = 0;
  while (done < rec.size()) {
    ssize_t w =
        ::pwrite(fd_, rec.data() + done, rec.size() - done, st.st_size + static_cast<off_t>(done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      RM_THROW(kIo, fmt::format("store file {}: write failed: {}", path_, std::strerror(errno)));
    done += static_cast<size_t>(w);
  }
  refresh();
}

void FileStore::set(const std::string& key, const Bytes& value) {
  Lock lock(*this);
  refresh();
  append(kSetRecord, key, value);
}

Bytes FileStore::get(const std::string& key) {
  wait({key}, timeout_);
  Lock lock(*this);
  refresh();
  auto it = map_.find(key);
  if (it == map_.end())
    RM_THROW(kComm, fmt::format("store: key '{}' was deleted while being read", key));
  return it->second;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  Lock lock(*this);
  refresh();
  auto it = map_.find(key);
  int64_t value = addToStoredInteger(it != map_.end() ? &it->second : nullptr, key, delta);
  append(kSetRecord, key, toBytes(std::to_string(value)));
  return value;
}

Bytes FileStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Lock lock(*this);
  refresh();
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) return expected;
    append(kSetRecord, key, desired);
    return desired;
  }
  if (it->second == expected) {
    append(kSetRecord, key, desired);
    return desired;
  }
  return it->second;
}

bool FileStore::deleteKey(const std::string& key) {
  Lock lock(*this);
  refresh();
  if (!map_.count(key)) return false;
  append(kDeleteRecord, key, {});
  return true;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  Lock lock(*this);
  refresh();
  return std::all_of(keys.begin(), keys.end(),
                     [&](const std::string& k) { return map_.count(k) > 0; });
}

int64_t FileStore::numKeys() {
  Lock lock(*this);
  refresh();
  return static_cast<int64_t>(map_.size()) - (map_.count(kUsersKey) ? 1 : 0);
}

void FileStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  pollUntilPresent(keys, timeout);
}

}  // namespace ringmaster
