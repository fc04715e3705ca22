// The shape of a `ringmaster` subcommand: each addXCommand(app, commands) adds its subcommand with
// its options to the command line and registers what it does once parsed, so that main only lists
// them. Also the opening of the run database that the reading commands share.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "db/database.h"

namespace CLI {
class App;
}

namespace ringmaster::cli {

// The options given before the subcommand.
struct CommonOptions {
  std::string db_path;  // --db; empty: the default (storage::defaultDatabasePath)

  // The database path: --db, else the default.
  std::string databasePath() const;
};

// What a parsed subcommand does; returns the exit code (docs/errors.md: errors are thrown).
using CommandAction = std::function<int(const CommonOptions&)>;

// The subcommands added to one command line, each with its action.
class Commands {
 public:
  void add(const CLI::App* command, CommandAction action);

  // Runs the action of the subcommand that was parsed; false where none was.
  bool runParsed(const CommonOptions& common, int& exit_code) const;

 private:
  std::vector<std::pair<const CLI::App*, CommandAction>> commands_;
};

// Opens the database for a reading command; runs whose recorder died become `interrupted`. A
// reading command never creates a database: a path with no file is a clear error, so that a
// mistyped --db is not taken for an empty history. A database that cannot be written here (a
// read-only file system, no write permission) is opened read-only and read as it is.
std::unique_ptr<storage::Database> openDatabaseForReading(const std::string& path);
// The same refusal for a command about runs already recorded (attach, cancel: issue 32): throws
// kInvalidArgument when there is no file at `path`, so that nothing is created there.
void requireExistingDatabase(const std::string& path);

}  // namespace ringmaster::cli
