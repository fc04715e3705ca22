// The subcommand list of command.h and the reading commands' database opening.
#include "cli/command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "core/error.h"
#include "db/files.h"
#include "recorder/recorder.h"

namespace ringmaster::cli {

std::string CommonOptions::databasePath() const {
  return db_path.empty() ? storage::defaultDatabasePath() : db_path;
}

void Commands::add(const CLI::App* command, CommandAction action) {
  commands_.emplace_back(command, std::move(action));
}

bool Commands::runParsed(const CommonOptions& common, int& exit_code) const {
  for (const auto& [command, action] : commands_) {
    if (!command->parsed()) continue;
    exit_code = action(common);
    return true;
  }
  return false;
}

void requireExistingDatabase(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    RM_THROW(kInvalidArgument,
             fmt::format("no run database at {}: the file does not exist (`ringmaster run SPEC` "
                         "creates it; --db names another)",
                         path));
  }
}

std::unique_ptr<storage::Database> openDatabaseForReading(const std::string& path) {
  requireExistingDatabase(path);
  auto db = std::make_unique<storage::Database>(path, storage::readingOptions(path));
  if (!db->readOnly()) storage::reconcileInterruptedRuns(*db);
  return db;
}

}  // namespace ringmaster::cli
