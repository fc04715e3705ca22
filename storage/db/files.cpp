// Creating files and directories with the creation mask, and writing them checked and atomically,
// through POSIX calls whose every result is looked at.
#include "db/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster::storage {

namespace fs = std::filesystem;

namespace {

constexpr size_t kBufferBytes = 64 * 1024;

// Writes all of `text` to `fd`; false with errno set when the system refuses part of it.
bool writeAll(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string systemReason(int error) {
  return std::strerror(error);
}

}  // namespace

bool createDirectoryExclusive(const fs::path& path) {
  if (::mkdir(path.c_str(), newDirectoryMode()) == 0) return true;
  if (errno == EEXIST) return false;
  RM_THROW(kIo,
           fmt::format("cannot create the directory {}: {}", path.string(), systemReason(errno)));
}

void createDirectories(const fs::path& path) {
  const fs::path absolute = fs::absolute(path).lexically_normal();
  fs::path partial;
  for (const fs::path& part : absolute) {
    partial /= part;
    if (partial == partial.root_path()) continue;
    struct stat info {};
    if (::stat(partial.c_str(), &info) == 0) {
      if (!S_ISDIR(info.st_mode)) {
        RM_THROW(kIo, fmt::format("cannot create the directory {}: {} is not a directory",
                                  absolute.string(), partial.string()));
      }
      continue;
    }
    // Another process may create it between the two calls: that is as good.
    if (::mkdir(partial.c_str(), newDirectoryMode()) != 0 && errno != EEXIST) {
      RM_THROW(kIo, fmt::format("cannot create the directory {}: {}", partial.string(),
                                systemReason(errno)));
    }
  }
}

void writeFileAtomically(const fs::path& path, std::string_view content) {
  static std::atomic<unsigned> counter{0};
  const fs::path directory = path.has_parent_path() ? path.parent_path() : fs::path(".");
  fs::path temporary;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    temporary = directory / fmt::format(".{}.{}-{}.tmp", path.filename().string(), ::getpid(),
                                        counter.fetch_add(1));
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, newFileMode());
    if (fd < 0 && (errno != EEXIST || attempt > 100)) {
      RM_THROW(kIo, fmt::format("cannot write {}: creating {} failed: {}", path.string(),
                                temporary.string(), systemReason(errno)));
    }
  }
  const auto fail = [&](const char* step) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(temporary.c_str());
    RM_THROW(kIo, fmt::format("cannot write {}: {} failed: {}", path.string(), step,
                              systemReason(error)));
  };
  if (!writeAll(fd, content)) fail("writing");
  if (::fsync(fd) != 0) fail("syncing");
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) fail("closing");
  if (::rename(temporary.c_str(), path.c_str()) != 0) fail("renaming the new file into place");
  // The rename itself is durable once the directory is synced.
  if (const int dir = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

std::optional<std::string> whyNotWritable(const fs::path& path) {
  const fs::path absolute = fs::absolute(path);
  std::error_code ec;
  if (fs::exists(absolute, ec) && ::access(absolute.c_str(), W_OK) != 0)
    return fmt::format("{}: {}", absolute.string(), systemReason(errno));
  const fs::path directory = absolute.parent_path();
  if (fs::exists(directory, ec) && ::access(directory.c_str(), W_OK) != 0)
    return fmt::format("{}: {}", directory.string(), systemReason(errno));
  return std::nullopt;
}

OutputFile::OutputFile(fs::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, newFileMode());
  if (fd_ < 0)
    RM_THROW(kIo, fmt::format("cannot write {}: {}", path_.string(), systemReason(errno)));
  buffer_.reserve(kBufferBytes);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(std::string_view text) {
  if (buffer_.size() + text.size() > kBufferBytes) flush();
  if (text.size() >= kBufferBytes) {
    if (!writeAll(fd_, text))
      RM_THROW(kIo, fmt::format("writing {} failed: {}", path_.string(), systemReason(errno)));
    return;
  }
  buffer_.append(text);
}

void OutputFile::flush() {
  RM_ENFORCE(fd_ >= 0, "OutputFile written after close");
  if (buffer_.empty()) return;
  const bool written = writeAll(fd_, buffer_);
  buffer_.clear();
  if (!written)
    RM_THROW(kIo, fmt::format("writing {} failed: {}", path_.string(), systemReason(errno)));
}

void OutputFile::close() {
  if (fd_ < 0) return;
  flush();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    RM_THROW(kIo, fmt::format("writing {} failed: {}", path_.string(), systemReason(errno)));
}

}  // namespace ringmaster::storage
