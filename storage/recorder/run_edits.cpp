// Tags, note, name and deletion of a run (recorder/run_edits.h): each a short transaction over the
// runs and run_tags tables, and for a deletion over every table that holds rows of runs.
#include "recorder/run_edits.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/host_name.h"
#include "db/database.h"
#include "db/statement.h"
#include "recorder/run_lifecycle.h"

namespace ringmaster::storage {

namespace {

void requireRun(const Database& db, int64_t run_id) {
  Statement select(db, "SELECT 1 FROM runs WHERE id = ?");
  select.bind(1, run_id);
  if (!select.run()) RM_THROW(kInvalidArgument, fmt::format("no run {} in {}", run_id, db.path()));
  select.reset();
}

bool tagCharacter(unsigned char c) {
  return std::isalnum(c) || c >= 0x80 ||
         std::string_view("-_.:/+=@#").find(static_cast<char>(c)) != std::string_view::npos;
}

void checkTag(const std::string& tag) {
  const bool fits = !tag.empty() && tag.size() <= kMaxTagBytes &&
                    std::all_of(tag.begin(), tag.end(),
                                [](char c) { return tagCharacter(static_cast<unsigned char>(c)); });
  if (!fits)
    RM_THROW(kInvalidArgument,
             fmt::format("tag '{}': a tag is 1 to {} bytes of letters, digits and - _ . : / + = @ "
                         "# (no space or comma)",
                         tag.substr(0, kMaxTagBytes), kMaxTagBytes));
}

std::vector<std::string> loadTags(const Database& db, int64_t run_id) {
  Statement select(db, "SELECT tag FROM run_tags WHERE run_id = ? ORDER BY tag");
  select.bind(1, run_id);
  std::vector<std::string> tags;
  while (select.run()) tags.push_back(select.columnText(0));
  return tags;
}

// Why the run may still be live and cannot be deleted; empty when it has ended.
std::string whyLive(const Database& db, int64_t run_id) {
  Statement select(db,
                   "SELECT status, detached, recorder_pid, recorder_host FROM runs WHERE id = ?");
  select.bind(1, run_id);
  if (!select.run()) RM_THROW(kInvalidArgument, fmt::format("no run {} in {}", run_id, db.path()));
  const std::string status = select.columnText(0);
  const bool detached = select.columnInt(1) != 0;
  const std::optional<int64_t> pid = select.optionalInt(2);
  const std::string host = select.columnText(3);
  select.reset();
  if (status != "running" && status != "pending") return {};
  if (detached)
    return fmt::format(
        "run {} is running detached and its processes may still run: `ringmaster "
        "cancel {}` stops them and records its end; delete it then",
        run_id, run_id);
  if (host == thisHostName())
    return fmt::format(
        "run {} is {}: its recorder (PID {}) is still live; stop it first (Ctrl-C "
        "where it runs)",
        run_id, status, pid.value_or(0));
  return fmt::format(
      "run {} is {}, recorded by host {}, where this host cannot tell whether it "
      "still runs; delete it from that host",
      run_id, status, host.substr(0, 256));
}

// Every table with a run_id column, those that other such tables reference (attempts) after them,
// so that each row is deleted, and counted, by its own statement rather than by a cascade.
std::vector<std::string> tablesHoldingRuns(const Database& db) {
  std::vector<std::string> tables;
  Statement select(db,
                   "SELECT m.name FROM sqlite_master m WHERE m.type = 'table' AND EXISTS (SELECT "
                   "1 FROM pragma_table_info(m.name) c WHERE c.name = 'run_id') ORDER BY m.name");
  while (select.run()) tables.push_back(select.columnText(0));
  std::vector<std::string> ordered;
  while (!tables.empty()) {
    std::set<std::string> referenced;
    for (const std::string& table : tables) {
      Statement references(db, "SELECT \"table\" FROM pragma_foreign_key_list(?)");
      references.bind(1, table);
      while (references.run())
        if (references.columnText(0) != table) referenced.insert(references.columnText(0));
    }
    const auto first_referenced = std::stable_partition(
        tables.begin(), tables.end(), [&](const std::string& t) { return !referenced.count(t); });
    RM_ENFORCE(first_referenced != tables.begin(), "the run tables reference each other in a ring");
    ordered.insert(ordered.end(), tables.begin(), first_referenced);
    tables.erase(tables.begin(), first_referenced);
  }
  return ordered;
}

std::string quotedName(const std::string& name) {
  std::string quoted = "\"";
  for (const char c : name) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

std::vector<std::string> setRunTags(Database& db, int64_t run_id,
                                    const std::vector<std::string>& add,
                                    const std::vector<std::string>& remove) {
  for (const std::string& tag : add) checkTag(tag);
  std::vector<std::string> tags;
  db.transaction([&] {
    requireRun(db, run_id);
    Statement insert(db, "INSERT OR IGNORE INTO run_tags (run_id, tag) VALUES (?, ?)");
    for (const std::string& tag : add) insert.bind(1, run_id).bind(2, tag).run();
    Statement erase(db, "DELETE FROM run_tags WHERE run_id = ? AND tag = ?");
    for (const std::string& tag : remove) erase.bind(1, run_id).bind(2, tag).run();
    tags = loadTags(db, run_id);
    if (tags.size() > kMaxTagsPerRun)
      RM_THROW(kInvalidArgument, fmt::format("run {}: at most {} tags, this would make {}", run_id,
                                             kMaxTagsPerRun, tags.size()));
  });
  return tags;
}

void setRunNote(Database& db, int64_t run_id, const std::string& note) {
  if (note.size() > kMaxNoteBytes)
    RM_THROW(kInvalidArgument, fmt::format("run {}: a note is at most {} KiB, this one is {} bytes",
                                           run_id, kMaxNoteBytes / 1024, note.size()));
  db.transaction([&] {
    requireRun(db, run_id);
    Statement update(db, "UPDATE runs SET note = ? WHERE id = ?");
    update.bind(1, note.empty() ? std::nullopt : std::optional(note)).bind(2, run_id).run();
  });
}

void renameRun(Database& db, int64_t run_id, const std::string& name) {
  const bool control = std::any_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  const bool blank = name.find_first_not_of(' ') == std::string::npos;
  if (blank || control || name.size() > kMaxRunNameBytes)
    RM_THROW(kInvalidArgument,
             fmt::format("run {}: a name is 1 to {} bytes without control characters", run_id,
                         kMaxRunNameBytes));
  db.transaction([&] {
    requireRun(db, run_id);
    Statement update(db, "UPDATE runs SET name = ? WHERE id = ?");
    update.bind(1, name).bind(2, run_id).run();
  });
}

int64_t DeletedRows::total() const {
  int64_t sum = 0;
  for (const auto& [table, rows] : per_table) sum += rows;
  return sum;
}

DeletedRows deleteRun(Database& db, int64_t run_id) {
  reconcileInterruptedRuns(db);
  DeletedRows deleted;
  db.transaction([&] {
    if (const std::string why = whyLive(db, run_id); !why.empty()) RM_THROW(kInvalidArgument, why);
    for (const std::string& table : tablesHoldingRuns(db)) {
      Statement erase(db, fmt::format("DELETE FROM {} WHERE run_id = ?", quotedName(table)));
      erase.bind(1, run_id).run();
      deleted.per_table.emplace_back(table, sqlite3_changes(db.handle()));
    }
    Statement erase(db, "DELETE FROM runs WHERE id = ?");
    erase.bind(1, run_id).run();
    deleted.per_table.emplace_back("runs", sqlite3_changes(db.handle()));
    // Its id is not given again (createRun): the highest retired one is kept, one row.
    Statement retire(db,
                     "INSERT INTO run_ids_retired (last_id) SELECT max(?1, coalesce((SELECT "
                     "max(last_id) FROM run_ids_retired), 0))");
    retire.bind(1, run_id).run();
    db.exec(
        "DELETE FROM run_ids_retired WHERE last_id < (SELECT max(last_id) FROM "
        "run_ids_retired)");
  });
  return deleted;
}

}  // namespace ringmaster::storage
