// Issue 33, runs a person can organise, from the command line on real recorded runs: `tag`,
// `note`, `rename`, the `runs` listing's tags and its search (words, --tag, --note, --where on a
// spec field, --status, --strategy, --since / --until, --search's terms), and `delete`, which asks
// (refused where there is no terminal, asked on one), prints the rows it deleted per table (every
// table with a run_id column, as sqlite_master lists them), keeps every row of the other run, and
// refuses a run whose recorder is live.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cli_run.h"
#include "db/database.h"
#include "recorder/run_lifecycle.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::CliResult;
using testing::exitedWith;

class OrganiseCli : public testing::CliRunTest {
 protected:
  // A real DDP run of `steps` steps; its id.
  int64_t record(int steps) {
    const CliResult result = runRingmaster({"run", testing::examplePath("ddp_mlp"), "--set",
                                            fmt::format("train.steps={}", steps), "--json"});
    EXPECT_TRUE(exitedWith(result.status, 0)) << result.err;
    return json::parse(result.out).at("run").at("id").get<int64_t>();
  }
  std::vector<int64_t> listed(std::vector<std::string> args) {
    args.insert(args.begin(), {"runs", "--json"});
    const CliResult result = runRingmaster(args);
    EXPECT_TRUE(exitedWith(result.status, 0)) << fmt::format("{}", fmt::join(args, " ")) << "\n"
                                              << result.err;
    std::vector<int64_t> ids;
    for (const json& entry : json::parse(result.out)) ids.push_back(entry.at("id").get<int64_t>());
    return ids;
  }
  // Rows of the run in every table that has a run_id column, and its row of runs.
  std::map<std::string, int64_t> rowsOf(int64_t run_id) {
    storage::Database db(dbPath());
    std::map<std::string, int64_t> rows;
    sqlite3_stmt* tables = nullptr;
    sqlite3_prepare_v2(db.handle(),
                       "SELECT m.name FROM sqlite_master m WHERE m.type = 'table' AND EXISTS "
                       "(SELECT 1 FROM pragma_table_info(m.name) c WHERE c.name = 'run_id')",
                       -1, &tables, nullptr);
    while (sqlite3_step(tables) == SQLITE_ROW) {
      const std::string table = reinterpret_cast<const char*>(sqlite3_column_text(tables, 0));
      rows[table] = storage::testing::queryInt(
          db, fmt::format("SELECT count(*) FROM \"{}\" WHERE run_id = {}", table, run_id));
    }
    sqlite3_finalize(tables);
    rows["runs"] = storage::testing::queryInt(
        db, fmt::format("SELECT count(*) FROM runs WHERE id = {}", run_id));
    return rows;
  }
};

TEST_F(OrganiseCli, TagsNotesNamesAndSearchOnRecordedRuns) {
  const int64_t first = record(10);
  const int64_t second = record(6);
  using Ids = std::vector<int64_t>;

  CliResult tagged =
      runRingmaster({"tag", std::to_string(first), "+baseline", "+lr-sweep", "keep"});
  ASSERT_TRUE(exitedWith(tagged.status, 0)) << tagged.err;
  EXPECT_EQ(tagged.out, fmt::format("run {} tags: baseline keep lr-sweep\n", first));
  tagged = runRingmaster({"tag", std::to_string(first), "-lr-sweep", "--json"});
  EXPECT_EQ(json::parse(tagged.out).at("tags"), json({"baseline", "keep"}));
  EXPECT_TRUE(exitedWith(
      runRingmaster({"note", std::to_string(second), "Diverged after warm-up"}).status, 0));
  EXPECT_TRUE(
      exitedWith(runRingmaster({"rename", std::to_string(second), "lr 3e-3 try"}).status, 0));
  // A note from a file, and one asked for without any text.
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "note.txt") << "line one\nline two\n";
  EXPECT_TRUE(exitedWith(
      runRingmaster({"note", std::to_string(first), "--file", (dir_ / "note.txt").string()}).status,
      0));
  EXPECT_TRUE(exitedWith(runRingmaster({"note", std::to_string(first)}).status, 2));
  EXPECT_EQ(
      json::parse(runRingmaster({"show", std::to_string(first), "--json"}).out)["run"]["note"],
      "line one\nline two");
  const CliResult shown = runRingmaster({"show", std::to_string(first)});
  EXPECT_NE(shown.out.find("  tags: baseline,keep\n"), std::string::npos) << shown.out;
  EXPECT_TRUE(exitedWith(runRingmaster({"note", std::to_string(first), "--clear"}).status, 0));
  // Bad values are usage errors and change nothing.
  EXPECT_TRUE(exitedWith(runRingmaster({"tag", std::to_string(first), "+two words"}).status, 2));
  EXPECT_TRUE(exitedWith(runRingmaster({"rename", std::to_string(first), ""}).status, 2));
  EXPECT_TRUE(exitedWith(runRingmaster({"tag", "999", "+x"}).status, 2));

  const CliResult table = runRingmaster({"runs"});
  EXPECT_NE(table.out.find("TAGS"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("baseline,keep"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("lr 3e-3 try"), std::string::npos) << table.out;

  EXPECT_EQ(listed({}), (Ids{second, first}));
  EXPECT_EQ(listed({"--tag", "baseline"}), Ids{first});
  EXPECT_EQ(listed({"--tag", "baseline", "--tag", "lr-sweep"}), Ids{});
  EXPECT_EQ(listed({"--search", "DIVERGED"}), Ids{second}) << "a word matches the note";
  EXPECT_EQ(listed({"--search", "keep"}), Ids{first}) << "a word matches a tag";
  EXPECT_EQ(listed({"--search", "3e-3"}), Ids{second}) << "a word matches the name";
  EXPECT_EQ(listed({"--note", "warm-up"}), Ids{second});
  EXPECT_EQ(listed({"--where", "train.steps=6"}), Ids{second}) << "a spec field";
  EXPECT_EQ(listed({"--where", "train.steps=6.0"}), Ids{second}) << "compared as a number";
  EXPECT_EQ(listed({"--search", "train.steps=10 tag:baseline status:completed strategy:ddp"}),
            Ids{first});
  EXPECT_EQ(listed({"--status", "failed"}), Ids{});
  EXPECT_EQ(listed({"--since", "1h"}), (Ids{second, first}));
  EXPECT_EQ(listed({"--until", "2000-01-01"}), Ids{});
  EXPECT_EQ(listed({"--since", "2000-01-01", "--until", "2999-12-31"}), (Ids{second, first}));
  const json entry = json::parse(runRingmaster({"runs", "--json", "--tag", "baseline"}).out).at(0);
  EXPECT_EQ(entry.at("tags"), json({"baseline", "keep"}));
  EXPECT_EQ(
      json::parse(runRingmaster({"show", std::to_string(second), "--json"}).out)["run"]["note"],
      "Diverged after warm-up");
  // Search terms that are none: a usage error naming each.
  const CliResult bad = runRingmaster({"runs", "--search", "status:done", "--since", "yesterday"});
  EXPECT_TRUE(exitedWith(bad.status, 2));
  EXPECT_NE(bad.err.find("status:done"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("since:yesterday"), std::string::npos) << bad.err;
}

TEST_F(OrganiseCli, DeleteAsksRemovesEveryRowOfTheRunCountedPerTableAndKeepsTheOthers) {
  const int64_t kept = record(6);
  const int64_t doomed = record(6);
  ASSERT_TRUE(exitedWith(runRingmaster({"tag", std::to_string(doomed), "+gone"}).status, 0));
  ASSERT_TRUE(exitedWith(runRingmaster({"note", std::to_string(doomed), "to delete"}).status, 0));
  const std::map<std::string, int64_t> doomed_rows = rowsOf(doomed);
  const std::map<std::string, int64_t> kept_rows = rowsOf(kept);

  // Nobody to ask: refused, nothing deleted.
  const CliResult unasked = runRingmaster({"delete", std::to_string(doomed)});
  EXPECT_TRUE(exitedWith(unasked.status, 2));
  EXPECT_NE(unasked.err.find("--yes"), std::string::npos) << unasked.err;
  // On a terminal (script(1) gives it one) the question is asked; "n" keeps the run.
  const std::string command = fmt::format("echo n | script -qec '{} --db {} delete {}' /dev/null",
                                          testing::ringmasterBinary(), dbPath(), doomed);
  testing::CapturedProcess asked("/bin/sh", {"-c", command});
  asked.wait(60s);
  EXPECT_NE(asked.out().find("delete this run and every row of it? [y/N]"), std::string::npos)
      << asked.out() << asked.err();
  EXPECT_EQ(rowsOf(doomed), doomed_rows);

  const CliResult deleted = runRingmaster({"delete", std::to_string(doomed), "--yes", "--json"});
  ASSERT_TRUE(exitedWith(deleted.status, 0)) << deleted.err;
  const json report = json::parse(deleted.out).at(0);
  EXPECT_EQ(report.at("run"), doomed);
  int64_t total = 0;
  for (const auto& [table, rows] : doomed_rows) {
    total += rows;
    if (rows > 0) EXPECT_EQ(report.at("rows").value(table, int64_t{-1}), rows) << table;
  }
  EXPECT_EQ(report.at("total"), total);
  for (const char* table : {"steps", "comm_events", "run_tags", "runs", "ranks", "attempts"})
    EXPECT_GT(report.at("rows").value(table, int64_t{0}), 0) << table;
  for (const auto& [table, rows] : rowsOf(doomed)) EXPECT_EQ(rows, 0) << table;
  EXPECT_EQ(rowsOf(kept), kept_rows);
  // The table for people: a line per table with rows.
  const int64_t another = record(4);
  const CliResult printed = runRingmaster({"delete", std::to_string(another), "-y"});
  ASSERT_TRUE(exitedWith(printed.status, 0)) << printed.err;
  EXPECT_NE(printed.out.find(fmt::format("deleted run {} (ddp_mlp): ", another)),
            std::string::npos);
  EXPECT_NE(printed.out.find("comm_events"), std::string::npos) << printed.out;
  EXPECT_TRUE(exitedWith(runRingmaster({"delete", std::to_string(another), "-y"}).status, 2))
      << "gone";
}

TEST_F(OrganiseCli, DeleteRefusesARunWhoseRecorderIsLive) {
  record(4);  // the database
  int64_t live = 0;
  {
    storage::Database db(dbPath());
    // Recorded by this test process, which is alive.
    live = storage::createRun(db, {.name = "live", .spec_json = "{}", .strategy = "ddp"});
  }
  const CliResult refused = runRingmaster({"delete", std::to_string(live), "--yes"});
  EXPECT_TRUE(exitedWith(refused.status, 2));
  EXPECT_NE(refused.err.find("still live"), std::string::npos) << refused.err;
  EXPECT_EQ(rowsOf(live).at("runs"), 1);
}

}  // namespace
}  // namespace ringmaster
