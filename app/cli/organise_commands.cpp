// Tags, notes, names and deletion of runs from the command line (cli/organise_commands.h). The
// database is opened for writing only when it exists (nothing is created for a mistyped --db).
#include "cli/organise_commands.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/terminal.h"
#include "core/display_text.h"
#include "core/error.h"
#include "db/files.h"
#include "query/runs.h"
#include "recorder/run_edits.h"
#include "run/run_session.h"

namespace ringmaster::cli {

namespace {

using nlohmann::json;

std::unique_ptr<storage::Database> openForEditing(const std::string& path) {
  requireExistingDatabase(path);
  return std::make_unique<storage::Database>(path);
}

// `tag RUN +a -b c`: + or nothing adds, - removes.
int tagCommand(const std::string& path, int64_t run_id, const std::vector<std::string>& changes,
               bool clear, bool as_json) {
  std::vector<std::string> add, remove;
  for (const std::string& change : changes) {
    if (!change.empty() && change[0] == '-')
      remove.push_back(change.substr(1));
    else
      add.push_back(!change.empty() && change[0] == '+' ? change.substr(1) : change);
  }
  auto db = openForEditing(path);
  if (clear) {
    const std::vector<std::string> all = storage::loadRun(*db, run_id).tags;
    remove.insert(remove.end(), all.begin(), all.end());
  }
  const std::vector<std::string> tags = storage::setRunTags(*db, run_id, add, remove);
  if (as_json) {
    fmt::print("{}\n", json{{"run", run_id}, {"tags", tags}}.dump(2));
    return 0;
  }
  std::vector<std::string> shown;
  for (const std::string& tag : tags) shown.push_back(displaySafeLine(tag));
  fmt::print("run {} tags: {}\n", run_id,
             tags.empty() ? "none" : fmt::format("{}", fmt::join(shown, " ")));
  return 0;
}

std::string readNoteFile(const std::string& file) {
  std::string text;
  std::FILE* in = file == "-" ? stdin : std::fopen(file.c_str(), "rb");
  if (in == nullptr)
    RM_THROW(kInvalidArgument,
             fmt::format("cannot read the note from {}: {}", file, std::strerror(errno)));
  char buffer[4096];
  size_t read = 0;
  while ((read = std::fread(buffer, 1, sizeof buffer, in)) > 0 &&
         text.size() <= storage::kMaxNoteBytes)
    text.append(buffer, read);
  const bool failed = std::ferror(in) != 0;
  if (in != stdin) std::fclose(in);
  if (failed) RM_THROW(kIo, fmt::format("reading the note from {} failed", file));
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// Whether the person at the terminal said yes to deleting `runs`; refuses (kInvalidArgument)
// where nobody can be asked.
bool confirmDeletion(const std::vector<storage::RunRecord>& runs) {
  if (::isatty(STDIN_FILENO) == 0 || ::isatty(STDERR_FILENO) == 0)
    RM_THROW(kInvalidArgument,
             "delete asks before it deletes, and there is no terminal to ask: add --yes");
  for (const storage::RunRecord& run : runs)
    fmt::print(stderr, "  run {}  {}  {}  {}\n", run.id, displaySafeLine(run.name), run.status,
               formatTimestamp(run.started_at.value_or(run.created_at)));
  fmt::print(stderr, "delete {} and every row of {}? [y/N] ",
             runs.size() == 1 ? "this run" : fmt::format("these {} runs", runs.size()),
             runs.size() == 1 ? "it" : "them");
  std::string answer;
  std::getline(std::cin, answer);
  return answer == "y" || answer == "Y" || answer == "yes";
}

int deleteCommand(const std::string& path, const std::vector<int64_t>& run_ids, bool yes,
                  bool as_json) {
  auto db = openForEditing(path);
  std::vector<storage::RunRecord> runs;
  for (int64_t id : run_ids) runs.push_back(storage::loadRun(*db, id));  // each exists
  if (!yes && !confirmDeletion(runs)) {
    fmt::print(stderr, "nothing deleted\n");
    return 1;
  }
  json report = json::array();
  for (const storage::RunRecord& run : runs) {
    const storage::DeletedRows deleted = storage::deleteRun(*db, run.id);
    json tables = json::object();
    for (const auto& [table, rows] : deleted.per_table)
      if (rows > 0) tables[table] = rows;
    report.push_back({{"run", run.id}, {"rows", tables}, {"total", deleted.total()}});
    if (as_json) continue;
    fmt::print("deleted run {} ({}): {} rows\n", run.id, displaySafeLine(run.name),
               deleted.total());
    Table table({"TABLE", "ROWS"});
    table.alignRight({1});
    for (const auto& [name, rows] : deleted.per_table)
      if (rows > 0) table.addRow({"  " + name, std::to_string(rows)});
    table.print(stdout);
    std::error_code ec;
    const std::filesystem::path directory = session::runDirectory(path, run.id);
    if (std::filesystem::exists(directory, ec))
      fmt::print("  its files stay in {} (remove them yourself)\n", directory.string());
  }
  if (as_json) fmt::print("{}\n", report.dump(2));
  return 0;
}

}  // namespace

void addOrganiseCommands(CLI::App& app, Commands& commands) {
  struct Options {
    int64_t run_id = 0;
    std::vector<int64_t> run_ids;
    std::string text, file, name;
    bool clear = false, yes = false, json = false;
  };
  auto options = std::make_shared<Options>();

  CLI::App* tag = app.add_subcommand("tag", "add (+TAG) and remove (-TAG) a run's tags");
  tag->add_option("run", options->run_id, "run id")->required();
  tag->add_flag("--clear", options->clear, "remove every tag first");
  tag->add_flag("--json", options->json, "the run's tags after, as JSON");
  tag->allow_extras();  // -TAG is no option of ours: it comes back in remaining()
  // ... and stays here: falling through, CLI11 would hand every such word to the top level, which
  // refuses them. So `tag` takes the line's --db before its name only.
  tag->fallthrough(false);
  tag->footer("Example: ringmaster tag 12 +baseline -lr-sweep");
  commands.add(tag, [options, tag](const CommonOptions& common) {
    return tagCommand(common.databasePath(), options->run_id, tag->remaining(), options->clear,
                      options->json);
  });

  CLI::App* note = app.add_subcommand("note", "set a run's note (empty text or --clear clears it)");
  note->add_option("run", options->run_id, "run id")->required();
  note->add_option("text", options->text, "the note");
  note->add_option("--file", options->file, "read the note from this file (- for stdin)");
  note->add_flag("--clear", options->clear, "remove the note");
  commands.add(note, [options, note](const CommonOptions& common) {
    if (note->count("text") == 0 && options->file.empty() && !options->clear)
      RM_THROW(kInvalidArgument, "note: give the TEXT, --file FILE or --clear");
    const std::string text = options->clear           ? std::string()
                             : !options->file.empty() ? readNoteFile(options->file)
                                                      : options->text;
    storage::setRunNote(*openForEditing(common.databasePath()), options->run_id, text);
    fmt::print("run {}: {}\n", options->run_id,
               text.empty() ? std::string("note cleared")
                            : fmt::format("note set ({} bytes)", text.size()));
    return 0;
  });

  CLI::App* rename = app.add_subcommand("rename", "rename a run");
  rename->add_option("run", options->run_id, "run id")->required();
  rename->add_option("name", options->name, "the new name")->required();
  commands.add(rename, [options](const CommonOptions& common) {
    storage::renameRun(*openForEditing(common.databasePath()), options->run_id, options->name);
    fmt::print("run {} is now {}\n", options->run_id, displaySafeLine(options->name));
    return 0;
  });

  CLI::App* erase = app.add_subcommand(
      "delete", "delete runs and every row of them (asks first; --yes where nobody can be asked)");
  erase->add_option("runs", options->run_ids, "run ids")->required()->type_name("RUN");
  erase->add_flag("--yes,-y", options->yes, "delete without asking");
  erase->add_flag("--json", options->json, "the rows deleted per table, as JSON");
  commands.add(erase, [options](const CommonOptions& common) {
    return deleteCommand(common.databasePath(), options->run_ids, options->yes, options->json);
  });
}

}  // namespace ringmaster::cli
