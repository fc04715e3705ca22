// The files and directories Ringmaster creates (the run database, a run's directory and spec, a
// telemetry copy, exports): owner-only unless RINGMASTER_UMASK says otherwise, every write and the
// close checked, and written atomically where another process may read them at any moment. Files
// the user names for reading, and checkpoints (engine/checkpoint), are not handled here.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "core/file_modes.h"

namespace ringmaster::storage {

// The modes come from core/file_modes.h (RINGMASTER_UMASK, owner-only by default): newFileMode(),
// newDirectoryMode().
using ringmaster::newDirectoryMode;
using ringmaster::newFileMode;

// Creates `path` and its missing parents with newDirectoryMode(); existing ones are left as they
// are. Throws kIo naming the directory and the system's reason.
void createDirectories(const std::filesystem::path& path);

// Creates the directory `path` itself (its parent must exist) with newDirectoryMode(); false when
// something is already there, so that two callers never share one. Throws kIo otherwise.
bool createDirectoryExclusive(const std::filesystem::path& path);

// Replaces `path` with `content` atomically: written to a temporary file beside it, synced, and
// renamed over it, so a reader sees the old file or the whole new one, never a part. Throws kIo
// naming the file and the system's reason; no temporary file is left behind.
void writeFileAtomically(const std::filesystem::path& path, std::string_view content);

// Why `path` (a file, or where one would be created) cannot be written: "read-only file system",
// "permission denied", naming the file or directory; nullopt when it can. SQLite needs the
// directory writable too, for the -wal and -shm files beside the database.
std::optional<std::string> whyNotWritable(const std::filesystem::path& path);

// A file written through a buffer, created (or truncated) with newFileMode(), whose every write
// and whose close are checked: a failure throws kIo naming the file and the system's reason
// ("No space left on device"), never passes silently.
class OutputFile {
 public:
  explicit OutputFile(std::filesystem::path path);
  ~OutputFile();  // closes without reporting: call close() to know the data reached the file
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view text);
  // Hands what is buffered to the system.
  void flush();
  // Flushes and closes; throws kIo when either fails.
  void close();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::string buffer_;
};

}  // namespace ringmaster::storage
