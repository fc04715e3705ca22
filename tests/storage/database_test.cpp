// The run database file: pragmas on open, the schema reached from every earlier version, a newer
// schema refused, a locked or full database giving a clear error without losing what was
// committed, owner-only files, and a read-only database (a read-only file system) read as it is.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/read_only_fs.h"
#include "core/error.h"
#include "db/database.h"
#include "db/statement.h"
#include "db/step_columns.h"
#include "storage/storage_test_support.h"

namespace ringmaster::storage {
namespace {

namespace fs = std::filesystem;

using testing::queryInt;
using testing::queryText;

class DatabaseTest : public testing::StorageTest {
 protected:
  std::string path() const { return (dir_ / "nested" / "runs.db").string(); }
};

TEST_F(DatabaseTest, OpensWithWalForeignKeysAndTheCurrentSchema) {
  Database db(path());
  EXPECT_TRUE(fs::exists(path()));
  EXPECT_EQ(queryText(db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(queryInt(db, "PRAGMA synchronous"), 1) << "NORMAL";
  EXPECT_EQ(queryInt(db, "PRAGMA foreign_keys"), 1);
  EXPECT_EQ(db.schemaVersion(), currentSchemaVersion());
  for (const char* table :
       {"runs", "attempts", "ranks", "seq_ranges", "metrics", "scalars", "steps", "scalar_rollups",
        "comm_events", "sched_events", "logs", "flight_recorder_dumps", "run_hosts", "evals"}) {
    EXPECT_EQ(queryInt(db, std::string("SELECT count(*) FROM sqlite_master WHERE name = '") +
                               table + "'"),
              1)
        << table;
  }
  // scalar_points is the connection's own view, not the file's (migration 14).
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM sqlite_master WHERE name = 'scalar_points'"), 0);
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM sqlite_temp_master WHERE name = 'scalar_points' "
                     "AND type = 'view'"),
            1);
  // Foreign keys hold: an attempt needs its run.
  EXPECT_THROW(db.exec("INSERT INTO attempts (run_id, attempt, started_at) VALUES (42, 0, 0)"),
               Error);
}

// Every step column of the field table (db/step_columns.h) is a column of `steps` and a metric of
// `scalar_points`: a new step metric without its migration fails here.
TEST_F(DatabaseTest, TheStepsTableHasAColumnPerStepFieldOfTheTable) {
  Database db(path());
  std::vector<std::string> columns;
  Statement info(db, "SELECT name FROM pragma_table_info('steps') WHERE cid >= 4 ORDER BY cid");
  while (info.run()) columns.push_back(info.columnText(0));
  EXPECT_EQ(columns, std::vector<std::string>(kStepColumns.begin(), kStepColumns.end()));
  db.exec(
      "INSERT INTO runs (id, name, spec, strategy, world_size, status, created_at) "
      "VALUES (1, 'r', '{}', 'single', 1, 'running', 0)");
  std::string values;
  for (std::size_t i = 0; i < kStepColumns.size(); ++i) values += ", 1";
  db.exec("INSERT INTO steps VALUES (1, 0, 1, 0" + values + ")");
  for (const std::string_view column : kStepColumns) {
    EXPECT_EQ(queryInt(db, "SELECT count(*) FROM scalar_points WHERE metric = '" +
                               std::string(column) + "'"),
              1)
        << column;
  }
}

// scalar_points is built from kStepColumns: its step metrics are exactly the step columns, each
// read from its own column, so a new step column is in the view without any SQL written for it.
TEST_F(DatabaseTest, TheScalarPointsViewIsDerivedFromTheStepColumns) {
  Database db(path());
  std::vector<std::string> view_columns;
  Statement info(db, "SELECT name FROM pragma_table_info('scalar_points') ORDER BY cid");
  while (info.run()) view_columns.push_back(info.columnText(0));
  EXPECT_EQ(view_columns,
            (std::vector<std::string>{"run_id", "rank", "metric", "step", "value", "attempt"}));
  db.exec(
      "INSERT INTO runs (id, name, spec, strategy, world_size, status, created_at) "
      "VALUES (1, 'r', '{}', 'single', 1, 'running', 0)");
  std::string values;
  for (std::size_t i = 0; i < kStepColumns.size(); ++i) values += ", " + std::to_string(i + 1);
  db.exec("INSERT INTO steps VALUES (1, 0, 7, 2" + values + ")");
  db.exec("INSERT INTO metrics (name) VALUES ('custom')");
  db.exec(
      "INSERT INTO scalars VALUES (1, (SELECT id FROM metrics WHERE name = 'custom'), 0, 7, "
      "-1, 2)");
  std::vector<std::string> metrics;
  Statement points(db,
                   "SELECT metric, value, run_id, rank, step, attempt FROM scalar_points WHERE "
                   "metric <> 'custom' ORDER BY value");
  while (points.run()) {
    metrics.push_back(points.columnText(0));
    EXPECT_EQ(points.columnDouble(1), static_cast<double>(metrics.size())) << metrics.back();
    EXPECT_EQ(points.columnInt(2), 1);
    EXPECT_EQ(points.columnInt(3), 0);
    EXPECT_EQ(points.columnInt(4), 7);
    EXPECT_EQ(points.columnInt(5), 2);
  }
  EXPECT_EQ(metrics, std::vector<std::string>(kStepColumns.begin(), kStepColumns.end()));
  EXPECT_EQ(queryInt(db, "SELECT value FROM scalar_points WHERE metric = 'custom'"), -1);
  // A null column is no point.
  db.exec("UPDATE steps SET " + std::string(kStepColumns.back()) + " = NULL");
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM scalar_points"),
            static_cast<int64_t>(kStepColumns.size()));
}

// Migrations 5, 8 and 9 of earlier builds left scalar_points in the file; migration 14 drops it,
// and every connection, reading or writing, makes its own.
TEST_F(DatabaseTest, AnEarlierBuildsScalarPointsViewIsDroppedForEachConnectionsOwn) {
  {
    // The schema of the builds before migration 14, which drops the view they made.
    Database old(path(), {.schema_version = 13});
    old.exec(
        "CREATE VIEW scalar_points (run_id, rank, metric, step, value, attempt) AS "
        "SELECT run_id, rank, 'loss', step, loss, attempt FROM steps WHERE loss IS NOT NULL");
    old.exec(
        "INSERT INTO runs (id, name, spec, strategy, world_size, status, created_at) "
        "VALUES (1, 'r', '{}', 'single', 1, 'completed', 0)");
    old.exec("INSERT INTO steps (run_id, rank, step, attempt, loss, lr) VALUES (1, 0, 1, 0, 2, 3)");
  }
  {
    Database current(path());
    EXPECT_EQ(queryInt(current, "SELECT count(*) FROM sqlite_master WHERE name = 'scalar_points'"),
              0);
    EXPECT_EQ(queryInt(current, "SELECT count(*) FROM scalar_points"), 2) << "loss and lr";
  }
  Database reader(path(), {.read_only = true});
  EXPECT_EQ(queryInt(reader, "SELECT count(*) FROM scalar_points"), 2);
  EXPECT_EQ(queryInt(reader, "SELECT value FROM scalar_points WHERE metric = 'lr'"), 3);
}

TEST_F(DatabaseTest, MigratesFromEveryEarlierVersionAndKeepsTheData) {
  for (int from = 0; from < currentSchemaVersion(); ++from) {
    SCOPED_TRACE("from version " + std::to_string(from));
    fs::remove_all(dir_);
    {
      Database old(path(), {.schema_version = from});
      EXPECT_EQ(old.schemaVersion(), from);
      if (from >= 1) {
        old.exec(
            "INSERT INTO runs (name, spec, strategy, world_size, status, created_at) "
            "VALUES ('kept', '{}', 'ddp', 2, 'completed', 1)");
        old.exec("INSERT INTO metrics (name) VALUES ('loss')");
        old.exec("INSERT INTO metrics (name) VALUES ('custom')");  // not a step event field
        for (int step = 1; step <= 200; ++step) {
          old.exec("INSERT INTO scalars VALUES (1, 1, 0, " + std::to_string(step) + ", " +
                   std::to_string(step == 100 ? 50.0 : 1.0 / step) + ", 0)");
          if (step <= 10)
            old.exec("INSERT INTO scalars VALUES (1, 2, 0, " + std::to_string(step) + ", 7, 0)");
        }
        if (from < 5) {  // stored events 0..9, 20..24 and 30 of rank 0, 0..3 of rank 1
          old.exec("INSERT INTO attempts (run_id, attempt, started_at) VALUES (1, 0, 1)");
          for (int seq : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 20, 21, 22, 23, 24, 30})
            old.exec("INSERT INTO events_seen VALUES (1, 0, 0, " + std::to_string(seq) + ")");
          for (int seq : {0, 1, 2, 3})
            old.exec("INSERT INTO events_seen VALUES (1, 0, 1, " + std::to_string(seq) + ")");
        }
      }
    }
    Database current(path());
    EXPECT_EQ(current.schemaVersion(), currentSchemaVersion());
    if (from >= 1) {
      EXPECT_EQ(queryText(current, "SELECT name FROM runs"), "kept");
      EXPECT_EQ(queryInt(current, "SELECT count(*) FROM scalar_points WHERE metric = 'loss'"), 200);
      EXPECT_EQ(queryInt(current, "SELECT count(*) FROM scalar_points WHERE metric = 'custom'"),
                10);
    }
    if (from >= 1 && from < 5) {  // migration 5: loss into steps, the stored seqs into ranges
      EXPECT_EQ(queryInt(current, "SELECT count(*) FROM steps WHERE loss IS NOT NULL"), 200);
      EXPECT_EQ(queryInt(current, "SELECT loss FROM steps WHERE step = 100"), 50);
      EXPECT_EQ(queryInt(current, "SELECT count(*) FROM steps WHERE lr IS NOT NULL"), 0);
      EXPECT_EQ(queryInt(current, "SELECT count(*) FROM scalars"), 10) << "tokens stays";
      EXPECT_EQ(queryText(current,
                          "SELECT group_concat(rank || ':' || first_seq || '-' || last_seq, ' ') "
                          "FROM (SELECT * FROM seq_ranges ORDER BY rank, first_seq)"),
                "0:0-9 0:20-24 0:30-30 1:0-3");
    }
    if (from >= 1 && from < 2) {  // migration 2 summarised the existing series
      EXPECT_EQ(
          queryInt(current,
                   "SELECT count(*) FROM series_rollups WHERE metric = 'loss' AND width = 64"),
          4);
      EXPECT_EQ(queryInt(current,
                         "SELECT sum(n) FROM series_rollups WHERE metric = 'loss' AND width = 64"),
                200);
      EXPECT_EQ(queryInt(current,
                         "SELECT max FROM series_rollups WHERE metric = 'loss' AND width = 64 AND "
                         "bucket = 1"),
                50);
      EXPECT_EQ(queryText(current,
                          "SELECT n || ' ' || first_step || ' ' || last_step || ' ' || "
                          "last_value FROM series_rollups WHERE metric = 'loss' AND width = 4096"),
                "200 1 200 0.005");
    }
    if (from >= 1 && from < 2) {  // migration 20 moved the step columns' rollups, not others'
      EXPECT_EQ(queryInt(current, "SELECT count(*) FROM scalar_rollups WHERE metric_id = 1"), 0);
      EXPECT_EQ(queryInt(current, "SELECT sum(loss_n) FROM step_rollups WHERE width = 64"), 200);
      EXPECT_EQ(queryInt(current, "SELECT count(*) FROM step_rollups WHERE lr_n IS NOT NULL"), 0);
      EXPECT_EQ(queryInt(current,
                         "SELECT sum(n) FROM scalar_rollups WHERE metric_id = 2 AND "
                         "width = 64"),
                10);
      EXPECT_EQ(queryInt(current,
                         "SELECT sum(n) FROM series_rollups WHERE metric = 'custom' AND "
                         "width = 4096"),
                10);
    }
    if (from >= 1 && from < 2) {  // migration 4 summarised migration 2's buckets per 512 steps
      EXPECT_EQ(
          queryText(current,
                    "SELECT n || ' ' || first_step || ' ' || last_step || ' ' || max || ' ' || "
                    "last_value FROM series_rollups WHERE metric = 'loss' AND width = 512"),
          "200 1 200 50.0 0.005");
    }
    EXPECT_EQ(queryText(current, "PRAGMA integrity_check"), "ok");
  }
}

TEST_F(DatabaseTest, ConnectionsOpeningANewFileTogetherMigrateItOnce) {
  // A viewer opening the database while `ringmaster run` creates it: both migrate, one wins.
  for (int round = 0; round < 20; ++round) {
    fs::remove_all(dir_);
    std::atomic<int> ready{0};
    std::vector<std::string> errors(4);
    std::vector<std::thread> openers;
    for (size_t i = 0; i < errors.size(); ++i) {
      openers.emplace_back([&, i] {
        ++ready;
        while (ready < 4) std::this_thread::yield();
        try {
          Database db(path());
          if (db.schemaVersion() != currentSchemaVersion()) errors[i] = "not migrated";
        } catch (const Error& e) {
          errors[i] = e.message();
        }
      });
    }
    for (auto& opener : openers) opener.join();
    for (const auto& error : errors) ASSERT_EQ(error, "") << "round " << round;
  }
}

TEST_F(DatabaseTest, ANewerSchemaIsRefusedNamingTheVersions) {
  { Database db(path()); }
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path().c_str(), &raw), SQLITE_OK);
    const std::string bump = "PRAGMA user_version = " + std::to_string(currentSchemaVersion() + 1);
    ASSERT_EQ(sqlite3_exec(raw, bump.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  try {
    Database db(path());
    FAIL() << "opened a database of a newer schema";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    const std::string message = e.what();
    EXPECT_NE(message.find("schema version " + std::to_string(currentSchemaVersion() + 1)),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("this build's " + std::to_string(currentSchemaVersion())),
              std::string::npos)
        << message;
  }
}

TEST_F(DatabaseTest, ALockedDatabaseIsAClearErrorAfterTheBusyTimeout) {
  Database holder(path());
  Database waiter(path(), {.busy_timeout_ms = 100});
  holder.exec("BEGIN IMMEDIATE");
  holder.exec("INSERT INTO metrics (name) VALUES ('held')");
  try {
    waiter.exec("INSERT INTO metrics (name) VALUES ('blocked')");
    FAIL() << "wrote past another process's write lock";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
    EXPECT_NE(std::string(e.what()).find("locked by another process"), std::string::npos)
        << e.what();
  }
  holder.exec("COMMIT");
  waiter.exec("INSERT INTO metrics (name) VALUES ('after')");
  EXPECT_EQ(queryInt(waiter, "SELECT count(*) FROM metrics"), 2);
}

TEST_F(DatabaseTest, AFullDatabaseRollsBackTheTransactionAndKeepsWhatWasCommitted) {
  Database db(path());
  db.exec("INSERT INTO metrics (name) VALUES ('committed')");
  const int64_t pages = queryInt(db, "PRAGMA page_count");
  db.exec("PRAGMA max_page_count = " + std::to_string(pages + 2));
  try {
    db.transaction([&] {
      for (int i = 0; i < 10000; ++i)
        db.exec("INSERT INTO metrics (name) VALUES ('" + std::string(200, 'x') + std::to_string(i) +
                "')");
    });
    FAIL() << "the page limit was never reached";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(std::string(e.what()).find("full"), std::string::npos) << e.what();
  }
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM metrics"), 1);
  EXPECT_EQ(queryText(db, "PRAGMA integrity_check"), "ok");
}

mode_t modeOf(const fs::path& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 0777;
}

// Issue 16, finding 14: the database held a team's runs world-readable (0644, its directory 0755).
TEST_F(DatabaseTest, ANewDatabaseItsWalAndItsDirectoryAreOwnerOnly) {
  const mode_t saved = ::umask(022);
  ::unsetenv("RINGMASTER_UMASK");
  {
    Database db(path());
    db.exec("INSERT INTO metrics (name) VALUES ('loss')");
    ASSERT_TRUE(fs::exists(path() + "-wal"));
    ASSERT_TRUE(fs::exists(path() + "-shm"));
    EXPECT_EQ(modeOf(path()), 0600u);
    EXPECT_EQ(modeOf(path() + "-wal"), 0600u);
    EXPECT_EQ(modeOf(path() + "-shm"), 0600u);
    EXPECT_EQ(modeOf(dir_ / "nested"), 0700u);
    EXPECT_EQ(modeOf(dir_), 0700u);
  }
  ::setenv("RINGMASTER_UMASK", "027", 1);
  { Database shared((dir_ / "shared" / "runs.db").string()); }
  EXPECT_EQ(modeOf(dir_ / "shared" / "runs.db"), 0640u);
  EXPECT_EQ(modeOf(dir_ / "shared"), 0750u);
  ::unsetenv("RINGMASTER_UMASK");
  ::umask(saved);
}

// Issue 16, finding 9: reading needs no write access, and a write says read-only.
TEST_F(DatabaseTest, AReadOnlyOpenReadsCreatesNothingAndAWriteSaysReadOnly) {
  {
    Database db(path());
    db.exec("INSERT INTO metrics (name) VALUES ('loss')");
  }
  Database reader(path(), {.read_only = true});
  EXPECT_TRUE(reader.readOnly());
  EXPECT_EQ(queryInt(reader, "SELECT count(*) FROM metrics"), 1);
  EXPECT_EQ(queryInt(reader, "SELECT count(*) FROM scalar_points"), 0);
  try {
    reader.exec("INSERT INTO metrics (name) VALUES ('lr')");
    FAIL() << "wrote through a read-only connection";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(e.message().find("read-only"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(path()), std::string::npos) << e.message();
  }
  const std::string missing = (dir_ / "missing.db").string();
  EXPECT_THROW(Database(missing, {.read_only = true}), Error);
  EXPECT_FALSE(fs::exists(missing));
}

TEST_F(DatabaseTest, ADatabaseOnAReadOnlyFileSystemIsReadAndARecorderIsToldReadOnly) {
  {
    Database db(path());
    db.exec("INSERT INTO metrics (name) VALUES ('loss')");
  }  // closed: no -wal or -shm beside it, and none can be made there
  const int code =
      ringmaster::testing::onReadOnlyFileSystem(dir_ / "ro", path(), [](const fs::path& copy) {
        Database reader(copy.string(), {.read_only = true});
        if (queryInt(reader, "SELECT count(*) FROM metrics") != 1) return 1;
        if (queryInt(reader, "SELECT count(*) FROM scalar_points") != 0) return 4;
        try {
          Database writer(copy.string());
          return 2;
        } catch (const Error& e) {
          const std::string message = e.message();
          if (message.find("read-only") == std::string::npos ||
              message.find(copy.string()) == std::string::npos) {
            std::fprintf(stderr, "%s\n", message.c_str());
            return 3;
          }
        }
        return 0;
      });
  if (code == ringmaster::testing::kNoNamespaces)
    GTEST_SKIP() << "user and mount namespaces are not allowed here";
  EXPECT_EQ(code, 0) << "1: not read, 2: opened for writing, 3: the error does not say read-only "
                        "and name the file, 4: scalar_points not read, 79: an error (on stderr)";
}

TEST(DatabasePath, FollowsXdgDataHomeElseHome) {
  const char* saved_xdg = std::getenv("XDG_DATA_HOME");
  const std::string saved = saved_xdg ? saved_xdg : "";
  setenv("XDG_DATA_HOME", "/data/xdg", 1);
  EXPECT_EQ(defaultDatabasePath(), "/data/xdg/ringmaster/runs.db");
  unsetenv("XDG_DATA_HOME");
  const std::string home = std::getenv("HOME");
  EXPECT_EQ(defaultDatabasePath(), home + "/.local/share/ringmaster/runs.db");
  if (saved_xdg) setenv("XDG_DATA_HOME", saved.c_str(), 1);
}

TEST(DatabasePath, ALocalDiskIsNotANetworkFileSystem) {
  EXPECT_EQ(networkFileSystem(fs::temp_directory_path() / "does" / "not" / "exist.db"),
            std::nullopt);
}

}  // namespace
}  // namespace ringmaster::storage
