// What a person changes about a recorded run (issue 33): its tags, its note, its name, and its
// deletion with every row of it in every table, counted per table. The front ends (the command
// line, the desktop, the web) all call these; none of them writes these tables itself.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ringmaster::storage {

class Database;

// The bounds: a tag is 1 to 64 bytes of letters, digits, non-ASCII (UTF-8) and - _ . : / + = @ #
// (no space or comma, so that a tag list reads back unambiguously); a run holds at most 64 tags; a
// name is 1 to 256 bytes without control characters; a note at most 64 KiB.
inline constexpr size_t kMaxTagBytes = 64;
inline constexpr size_t kMaxTagsPerRun = 64;
inline constexpr size_t kMaxRunNameBytes = 256;
inline constexpr size_t kMaxNoteBytes = 64 * 1024;

// Adds `add` and removes `remove` (a tag both added and removed is removed) in one transaction;
// returns the run's tags after, sorted. Throws kInvalidArgument naming the run for no such run, a
// tag outside the bounds (nothing changes then) or more tags than the bound.
std::vector<std::string> setRunTags(Database& db, int64_t run_id,
                                    const std::vector<std::string>& add,
                                    const std::vector<std::string>& remove);
// Replaces the note; an empty one clears it. kInvalidArgument for no such run or a note too long.
void setRunNote(Database& db, int64_t run_id, const std::string& note);
// kInvalidArgument for no such run or a name outside the bounds.
void renameRun(Database& db, int64_t run_id, const std::string& name);

// Rows deleted from each table that holds rows of runs (every table with a run_id column, and
// `runs` itself last), in the order deleted, tables without a row of the run included.
struct DeletedRows {
  std::vector<std::pair<std::string, int64_t>> per_table;
  int64_t total() const;
};

// Deletes the run and every row of it, in one transaction, and nothing of any other run. Refuses
// (kInvalidArgument, saying why and what to do) a run that may still be live: a `running` or
// `pending` run whose recorder on this host still exists (one whose recorder died is marked
// interrupted first, as every reading command does), one recorded by another host, or a detached
// run (its processes may run: `ringmaster cancel` ends it). kInvalidArgument for no such run.
// The id is retired: no later run takes it. Files are not touched (the run's directory stays).
DeletedRows deleteRun(Database& db, int64_t run_id);

}  // namespace ringmaster::storage
