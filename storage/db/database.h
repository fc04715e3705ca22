// The run database: one SQLite file opened in WAL mode with foreign keys on and an explicit
// synchronous level, refused on network file systems (WAL's shared memory needs a local disk), and
// brought to the current schema by forward migrations on open. Created owner-only (files.h); a
// database that cannot be written (a read-only file system, a file without write permission) is
// opened read-only for reading.
#pragma once

#include <sqlite3.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace ringmaster::storage {

// ~/.local/share/ringmaster/runs.db, or $XDG_DATA_HOME/ringmaster/runs.db when that is set.
std::string defaultDatabasePath();

// The name of the network file system holding `path` (its directory when the file does not exist
// yet): "nfs", "cifs", "smb2", ...; nullopt for a local one.
std::optional<std::string> networkFileSystem(const std::string& path);

struct DatabaseOptions {
  // How long a statement waits for another process's write lock before failing with a clear
  // error (SQLite's busy timeout).
  int busy_timeout_ms = 5000;
  // NORMAL: in WAL mode a crash of this process loses nothing committed, a power cut may lose
  // the last transactions but never corrupts. FULL syncs every commit.
  bool full_sync = false;
  // The schema version to migrate to on open: the current one unless a migration test asks for
  // an earlier one.
  int schema_version = -1;
  // Opens the existing file for reading only: nothing is created, migrated or written, and a file
  // on a read-only file system reads as it is (see Database::Database).
  bool read_only = false;
};

// The options a reader (a view, a listing) opens `path` with: read-only where this process cannot
// write the file or its directory (a read-only file system, no permission), the defaults elsewhere.
DatabaseOptions readingOptions(const std::string& path);

class Database {
 public:
  // Opens (creating it and its directory, owner-only) and migrates. Throws kIo naming the path
  // and SQLite's message when it cannot (saying read-only, and why, for a file or directory that
  // cannot be written), kUnavailable for a network file system, kFormat for a database of a newer
  // schema than this build knows. With `read_only`, kFormat for an older schema too (it cannot be
  // migrated), and kIo for a missing file.
  explicit Database(const std::string& path, DatabaseOptions options = {});
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  bool readOnly() const { return read_only_; }
  int schemaVersion() const;
  // SQLite's data_version: changes whenever another connection commits to the file, so a viewer
  // can poll it cheaply and re-read only when something arrived.
  int64_t dataVersion() const;

  // Runs SQL without results; throws kIo with SQLite's message and the statement.
  void exec(const std::string& sql);
  // Runs `body` in one IMMEDIATE transaction, committed when it returns, rolled back on throw.
  void transaction(const std::function<void()>& body);

 private:
  void openReadOnly();

  std::string path_;
  sqlite3* db_ = nullptr;
  bool read_only_ = false;
};

// The schema version this build writes; migrations bring any earlier one here.
int currentSchemaVersion();

// Brings a database to `target` (default: current) by running the migrations after its
// user_version in one transaction each. Exposed for the migration tests.
void migrate(Database& db, int target);

// Which threads may touch a database: a process-wide check, consulted by every open, statement and
// exec (and data_version, user_version). A front end with a thread that must never block (the
// window's GUI thread) installs one that refuses it; a refused call is a bug and throws kInternal
// naming the SQL. None is installed by default: every thread may query.
using QueryThreadCheck = bool (*)();
void setQueryThreadCheck(QueryThreadCheck check);  // nullptr removes it
// Throws kInternal when the installed check refuses the calling thread.
void enforceQueryThread(std::string_view what);

// While one lives, the calling thread may query whatever the check says (a test looking into the
// database itself, a tool): nests.
class AllowQueriesOnThisThread {
 public:
  AllowQueriesOnThisThread();
  ~AllowQueriesOnThisThread();
  AllowQueriesOnThisThread(const AllowQueriesOnThisThread&) = delete;
  AllowQueriesOnThisThread& operator=(const AllowQueriesOnThisThread&) = delete;
};

// Throws kIo for an SQLite result code other than the expected ones, naming what was done.
void checkSqlite(sqlite3* db, int code, const std::string& what);

}  // namespace ringmaster::storage
