// Bounded whole-file reads: fstat first, then at most the bound plus one byte.
#include "core/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

std::string describeBytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 20) && bytes % (uint64_t{1} << 20) == 0) {
    return fmt::format("{} MiB", bytes >> 20);
  }
  if (bytes >= (uint64_t{1} << 10) && bytes % (uint64_t{1} << 10) == 0) {
    return fmt::format("{} KiB", bytes >> 10);
  }
  return fmt::format("{} byte{}", bytes, bytes == 1 ? "" : "s");
}

std::string readBoundedFile(const std::string& path, uint64_t max_bytes, std::string_view what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) RM_THROW(kIo, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    RM_THROW(kIo, fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  }
  if (S_ISDIR(info.st_mode)) RM_THROW(kIo, fmt::format("{}: is a directory, not a {}", path, what));
  if (S_ISREG(info.st_mode) && static_cast<uint64_t>(info.st_size) > max_bytes) {
    RM_THROW(kFormat, fmt::format("{}: {} is more than the {} a {} may have", path,
                                  describeBytes(static_cast<uint64_t>(info.st_size)),
                                  describeBytes(max_bytes), what));
  }
  // Back to blocking reads: O_NONBLOCK only kept the open of a FIFO without a writer from hanging.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0) {
      if (errno == EINTR) continue;
      RM_THROW(kIo, fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
    }
    if (got == 0) break;
    if (text.size() + static_cast<uint64_t>(got) > max_bytes) {
      RM_THROW(kFormat, fmt::format("{}: more than the {} a {} may have", path,
                                    describeBytes(max_bytes), what));
    }
    text.append(chunk, static_cast<size_t>(got));
  }
  return text;
}

}  // namespace ringmaster
