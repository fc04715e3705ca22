// Issue 33, runs a person can organise: tags, notes, renames and deletes (recorder/run_edits.h)
// and the search that finds runs by them (query/runs.h, query/run_search.h), against real SQLite
// files with runs recorded through the Recorder. A deletion removes every row of the run in every
// table that has a run_id column (enumerated from sqlite_master, so a table added later is
// covered), counts them per table, and leaves every other run's rows as they were.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "db/database.h"
#include "query/run_search.h"
#include "query/runs.h"
#include "recorder/recorder.h"
#include "recorder/run_edits.h"
#include "recorder/run_lifecycle.h"
#include "storage/storage_test_support.h"

namespace ringmaster::storage {
namespace {

class RunEditsTest : public testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    path_ = (dir_ / "runs.db").string();
    db_.emplace(path_);
  }
  void TearDown() override {
    db_.reset();
    StorageTest::TearDown();
  }
  int64_t count(const std::string& sql) { return testing::queryInt(*db_, sql); }

  // Every table with a run_id column, as the test sees them: sqlite_master, not a list.
  std::vector<std::string> runTables() {
    std::vector<std::string> tables;
    sqlite3_stmt* statement = nullptr;
    sqlite3_prepare_v2(db_->handle(),
                       "SELECT m.name FROM sqlite_master m WHERE m.type = 'table' AND EXISTS "
                       "(SELECT 1 FROM pragma_table_info(m.name) c WHERE c.name = 'run_id')",
                       -1, &statement, nullptr);
    while (sqlite3_step(statement) == SQLITE_ROW)
      tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)));
    sqlite3_finalize(statement);
    return tables;
  }
  // Rows of `run_id` per table (the runs table included).
  std::map<std::string, int64_t> rowsOf(int64_t run_id) {
    std::map<std::string, int64_t> rows;
    for (const std::string& table : runTables())
      rows[table] =
          count(fmt::format("SELECT count(*) FROM \"{}\" WHERE run_id = {}", table, run_id));
    rows["runs"] = count(fmt::format("SELECT count(*) FROM runs WHERE id = {}", run_id));
    return rows;
  }

  // A finished run with rows in every table: two ranks' whole streams through the Recorder (hello,
  // steps, communication, pipeline actions, an evaluation, progress, a flight dump, an error,
  // logs), hosts, job directories, a metric outside the step event, tags and a note.
  int64_t fullRun(const std::string& name) {
    const int64_t run =
        createRun(*db_, {.name = name, .spec_json = "{}", .strategy = "ddp", .world_size = 2});
    {
      Recorder recorder(path_, run, 0);
      for (int rank = 0; rank < 2; ++rank) {
        uint64_t seq = 0;
        auto add = [&](EventBody body) {
          recorder.submit({.rank = rank, .seq = seq++, .time = 1e9 + seq, .body = std::move(body)});
        };
        add(HelloEvent{
            .world_size = 2, .host = "h", .pid = 10 + rank, .device = "cpu", .strategy = "ddp"});
        add(CommEvent{.seq_op = 1,
                      .op = "all_reduce",
                      .group = "world",
                      .bytes = 64,
                      .dtype = "float32",
                      .duration_ms = 1,
                      .step = 1,
                      .start_us = 10,
                      .end_us = 20,
                      .group_size = 2});
        add(SchedEvent{.step = 1, .stage = rank, .micro_batch = 0, .start_us = 1, .end_us = 2});
        add(StepEvent{.step = 1,
                      .loss = 1.5,
                      .samples = 8,
                      .step_ms = 3,
                      .metrics = {{"my_custom_thing", 2.5}}});
        add(EvalEvent{.step = 1, .val_loss = 1.4, .perplexity = 4, .tokens = 8, .eval_ms = 1});
        add(ProgressEvent{.group = "world", .period_s = 1, .started = 1, .completed = 1});
        add(FlightEvent{.reason = "requested"});
        add(LogEvent{.message = "a line"});
        add(ErrorEvent{.message = "boom", .kind = "exception", .fatal = false});
        add(DoneEvent{.final_step = 1});
      }
      recorder.submitLog(std::nullopt, "info", "the recorder's own line");
      recorder.flush();
      EXPECT_EQ(recorder.failure(), "");
    }
    recordRunHosts(*db_, run, {RunHost{.alias = "a", .hostname = "a", .user = "u"}});
    markRunDetached(*db_, run, {"/tmp/job"});
    finishRun(*db_, run, "completed");
    setRunTags(*db_, run, {"baseline", "lr-sweep"}, {});
    setRunNote(*db_, run, "the first try");
    return run;
  }

  std::string path_;
  std::optional<Database> db_;
};

TEST_F(RunEditsTest, DeleteRemovesEveryRowOfTheRunCountedPerTableAndNothingOfOtherRuns) {
  const int64_t before = fullRun("before");
  const int64_t doomed = fullRun("doomed");
  const int64_t after = fullRun("after");
  const std::map<std::string, int64_t> doomed_rows = rowsOf(doomed);
  // The test fills every table that holds rows of runs: a table added later fails here until
  // fullRun fills it too, so that its deletion is checked.
  for (const auto& [table, rows] : doomed_rows) EXPECT_GT(rows, 0) << table << " has no row";
  const std::map<std::string, int64_t> before_rows = rowsOf(before);
  const std::map<std::string, int64_t> after_rows = rowsOf(after);
  const int64_t metrics = count("SELECT count(*) FROM metrics");

  const DeletedRows deleted = deleteRun(*db_, doomed);

  std::map<std::string, int64_t> counted;
  for (const auto& [table, rows] : deleted.per_table) counted[table] = rows;
  EXPECT_EQ(counted, doomed_rows) << "every table, each row counted once";
  EXPECT_EQ(deleted.per_table.back().first, "runs");
  int64_t total = 0;
  for (const auto& [table, rows] : doomed_rows) total += rows;
  EXPECT_EQ(deleted.total(), total);
  for (const auto& [table, rows] : rowsOf(doomed)) EXPECT_EQ(rows, 0) << table;
  EXPECT_EQ(rowsOf(before), before_rows);
  EXPECT_EQ(rowsOf(after), after_rows);
  EXPECT_EQ(count("SELECT count(*) FROM metrics"), metrics) << "metric names are shared";
  EXPECT_EQ(count("PRAGMA foreign_key_check"), -1) << "no row is left dangling";
  // Again: no such run.
  EXPECT_THROW(deleteRun(*db_, doomed), Error);
  // The newest run deleted: its id (and the run directory named by it) is not given again, nor is
  // an older deleted one's after a newer.
  deleteRun(*db_, after);
  EXPECT_EQ(createRun(*db_, {.name = "next", .spec_json = "{}", .strategy = "ddp"}), after + 1);
  EXPECT_EQ(count("SELECT count(*) FROM run_ids_retired"), 1);
  EXPECT_EQ(count("SELECT last_id FROM run_ids_retired"), after);
}

// A run that may still be live is refused, saying why; one whose recorder has died is not live.
TEST_F(RunEditsTest, DeleteRefusesARunThatMayBeLiveAndSaysWhy) {
  const auto refusal = [this](int64_t run) {
    try {
      deleteRun(*db_, run);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("deleted");
  };
  // Recorded by this process, which lives.
  const int64_t live = createRun(*db_, {.name = "live", .spec_json = "{}", .strategy = "ddp"});
  EXPECT_NE(refusal(live).find("still live"), std::string::npos) << refusal(live);
  // Pending, too.
  db_->exec(fmt::format("UPDATE runs SET status = 'pending' WHERE id = {}", live));
  EXPECT_NE(refusal(live).find("is pending"), std::string::npos);
  // Detached: its processes may run whatever its recorder; cancel ends it.
  const int64_t detached = createRun(*db_, {.name = "d", .spec_json = "{}", .strategy = "ddp"});
  markRunDetached(*db_, detached, {"/tmp/job"});
  EXPECT_NE(refusal(detached).find("ringmaster cancel"), std::string::npos);
  // Another host's recorder cannot be checked from here.
  const int64_t remote = createRun(*db_, {.name = "r", .spec_json = "{}", .strategy = "ddp"});
  db_->exec(fmt::format("UPDATE runs SET recorder_host = 'elsewhere' WHERE id = {}", remote));
  EXPECT_NE(refusal(remote).find("elsewhere"), std::string::npos);
  EXPECT_EQ(count("SELECT count(*) FROM runs"), 3) << "nothing deleted";
  // A recorder that died: the run is interrupted, so it goes.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  const int64_t orphan = createRun(*db_, {.name = "o", .spec_json = "{}", .strategy = "ddp"});
  db_->exec(fmt::format("UPDATE runs SET recorder_pid = {} WHERE id = {}", child, orphan));
  EXPECT_EQ(refusal(orphan), "deleted");
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM runs WHERE id = {}", orphan)), 0);
  for (const std::string& status : {"completed", "failed", "cancelled", "interrupted"}) {
    db_->exec(fmt::format("UPDATE runs SET status = '{}' WHERE id = {}", status, live));
    const int64_t copy = createRun(*db_, {.name = status, .spec_json = "{}", .strategy = "ddp"});
    db_->exec(fmt::format("UPDATE runs SET status = '{}' WHERE id = {}", status, copy));
    EXPECT_EQ(refusal(copy), "deleted") << status;
  }
}

TEST_F(RunEditsTest, TagsAreAddedAndRemovedWithinTheirBoundsAndOnlyOnTheirRun) {
  const int64_t run = createRun(*db_, {.name = "a", .spec_json = "{}", .strategy = "ddp"});
  const int64_t other = createRun(*db_, {.name = "b", .spec_json = "{}", .strategy = "ddp"});
  setRunTags(*db_, other, {"keep"}, {});
  EXPECT_EQ(setRunTags(*db_, run, {"b", "a", "a", "keep", "é:x/y"}, {}),
            (std::vector<std::string>{"a", "b", "keep", "é:x/y"}));
  EXPECT_EQ(setRunTags(*db_, run, {"c"}, {"a", "keep", "absent"}),
            (std::vector<std::string>{"b", "c", "é:x/y"}));
  EXPECT_EQ(loadRun(*db_, other).tags, std::vector<std::string>{"keep"});
  // Out of bounds: each refused, nothing of the call applied.
  for (const std::string& bad :
       {std::string(), std::string("two words"), std::string("a,b"), std::string("new\nline"),
        std::string(65, 'x'), std::string("quote\""), std::string("tab\t")}) {
    EXPECT_THROW(setRunTags(*db_, run, {"fine", bad}, {"b"}), Error) << bad;
  }
  EXPECT_EQ(loadRun(*db_, run).tags, (std::vector<std::string>{"b", "c", "é:x/y"}));
  std::vector<std::string> many;
  for (int i = 0; i < 61; ++i) many.push_back(fmt::format("t{}", i));
  EXPECT_EQ(setRunTags(*db_, run, many, {}).size(), kMaxTagsPerRun);  // 3 + 61
  EXPECT_THROW(setRunTags(*db_, run, {"one-over"}, {}), Error);
  EXPECT_EQ(loadRun(*db_, run).tags.size(), kMaxTagsPerRun);
}

TEST_F(RunEditsTest, NotesAndNamesKeepTheirBounds) {
  const int64_t run = createRun(*db_, {.name = "a", .spec_json = "{}", .strategy = "ddp"});
  setRunNote(*db_, run, "line one\nline two");
  EXPECT_EQ(loadRun(*db_, run).note, "line one\nline two");
  setRunNote(*db_, run, "");
  EXPECT_EQ(loadRun(*db_, run).note, std::nullopt);
  setRunNote(*db_, run, std::string(kMaxNoteBytes, 'n'));
  EXPECT_THROW(setRunNote(*db_, run, std::string(kMaxNoteBytes + 1, 'n')), Error);
  renameRun(*db_, run, "gpt small, lr 3e-4");
  EXPECT_EQ(loadRun(*db_, run).name, "gpt small, lr 3e-4");
  for (const std::string& bad : {std::string(), std::string("   "), std::string("a\nb"),
                                 std::string("\x1b[31mred"), std::string(257, 'x')})
    EXPECT_THROW(renameRun(*db_, run, bad), Error);
  EXPECT_EQ(loadRun(*db_, run).name, "gpt small, lr 3e-4");
  for (auto edit : {+[](Database& db) { renameRun(db, 99, "x"); },
                    +[](Database& db) { setRunNote(db, 99, "x"); },
                    +[](Database& db) { setRunTags(db, 99, {"x"}, {}); }})
    EXPECT_THROW(edit(*db_), Error);
}

std::vector<std::string> names(const std::vector<RunRecord>& runs) {
  std::vector<std::string> out;
  for (const RunRecord& run : runs) out.push_back(run.name);
  return out;
}

TEST_F(RunEditsTest, SearchFindsRunsByNameTagNoteStatusStrategySpecFieldAndDate) {
  const auto add = [this](const std::string& name, const std::string& spec,
                          const std::string& strategy, double created) {
    const int64_t id = createRun(*db_, {.name = name, .spec_json = spec, .strategy = strategy});
    db_->exec(fmt::format("UPDATE runs SET status = 'completed', created_at = {} WHERE id = {}",
                          created, id));
    return id;
  };
  const double day = 86400, t0 = 1.8e9;
  const int64_t small = add("gpt-small",
                            R"({"optimizer":{"lr":0.0003,"name":"adamw"},)"
                            R"("train":{"batch_size":32,"amp":true},"strategy":{"mesh":[2,4]}})",
                            "ddp", t0);
  const int64_t large = add("gpt-large",
                            R"({"optimizer":{"lr":0.001,"name":"sgd"},)"
                            R"("train":{"batch_size":64,"amp":false},"strategy":{"mesh":[1,8]}})",
                            "fsdp", t0 + day);
  add("broken", "not json", "pipeline", t0 + 2 * day);
  setRunTags(*db_, small, {"baseline"}, {});
  setRunTags(*db_, large, {"sweep", "Big"}, {});
  setRunNote(*db_, large, "Diverged after the warm-up");
  db_->exec(fmt::format("UPDATE runs SET status = 'failed' WHERE id = {}", large));

  const auto find = [this](const std::string& line) {
    const RunSearch search = parseRunSearch(line, 1.8e9 + 10 * 86400);
    EXPECT_EQ(search.problems, std::vector<std::string>{}) << line;
    return names(listRuns(*db_, search.filter));
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(find(""), (Names{"broken", "gpt-large", "gpt-small"}));
  EXPECT_EQ(find("GPT"), (Names{"gpt-large", "gpt-small"})) << "words ignore case";
  EXPECT_EQ(find("big"), Names{"gpt-large"}) << "a word matches a tag";
  EXPECT_EQ(find("diverged"), Names{"gpt-large"}) << "a word matches the note";
  EXPECT_EQ(find("\"after the warm\""), Names{"gpt-large"}) << "a phrase";
  EXPECT_EQ(find("gpt baseline"), Names{"gpt-small"}) << "every word must match";
  EXPECT_EQ(find("tag:baseline"), Names{"gpt-small"});
  EXPECT_EQ(find("tag:base"), Names{}) << "a tag matches whole";
  EXPECT_EQ(find("note:warm-up"), Names{"gpt-large"});
  EXPECT_EQ(find("status:failed"), Names{"gpt-large"});
  EXPECT_EQ(find("strategy:pipeline"), Names{"broken"});
  EXPECT_EQ(find("optimizer.lr=3e-4"), Names{"gpt-small"}) << "numbers compare as numbers";
  EXPECT_EQ(find("optimizer.lr=0.0003"), Names{"gpt-small"});
  EXPECT_EQ(find("optimizer.lr=1e-3"), Names{"gpt-large"});
  EXPECT_EQ(find("train.batch_size=64"), Names{"gpt-large"});
  EXPECT_EQ(find("optimizer.name=adamw"), Names{"gpt-small"});
  EXPECT_EQ(find("train.amp=true"), Names{"gpt-small"});
  EXPECT_EQ(find("train.amp=false"), Names{"gpt-large"});
  EXPECT_EQ(find("strategy.mesh[1]=8"), Names{"gpt-large"});
  EXPECT_EQ(find("optimizer.lr=0.5"), Names{});
  EXPECT_EQ(find("optimizer.missing=1"), Names{});
  EXPECT_EQ(find("since:2027-01-16"), (Names{"broken", "gpt-large"}));
  EXPECT_EQ(find("since:3d"), Names{}) << "ten days after t0";
  EXPECT_EQ(find("since:10d until:2027-01-15"), Names{"gpt-small"}) << "until takes the whole day";
  EXPECT_EQ(find("gpt since:2027-01-15 until:2027-01-16 status:completed optimizer.lr=3e-4 "
                 "tag:baseline"),
            Names{"gpt-small"});

  // Terms that are none: said, one problem each, and the rest still applies.
  const RunSearch bad = parseRunSearch("status:done since:yesterday until:2027-13-01 =3 gpt", t0);
  EXPECT_EQ(bad.problems.size(), 4u) << fmt::format("{}", fmt::join(bad.problems, " | "));
  EXPECT_EQ(bad.filter.words, std::vector<std::string>{"gpt"});
  // A path that is none is refused by the query, naming it; nothing of the SQL comes from it.
  RunFilter injected;
  injected.spec_fields.push_back({"a') OR 1=1 --", "1"});
  EXPECT_THROW(listRuns(*db_, injected), Error);
  RunFilter quoted;
  quoted.words.push_back("' OR 1=1 --");
  EXPECT_EQ(listRuns(*db_, quoted).size(), 0u);
}

}  // namespace
}  // namespace ringmaster::storage
