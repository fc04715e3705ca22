// Issue 33: storage::loadErrorOutput, the failed rank's last stderr lines under a root cause, and
// loadLogsAfter, the cursor `ringmaster logs` reads with. Rows written by hand into a real SQLite
// file: only the named rank's stderr lines of the named attempt, the last 20, without their
// "[rank N] " prefix, each line and the whole within their bounds, controls and invalid UTF-8
// made visible; the cursor reads every line once, filtered by rank and text.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/database.h"
#include "db/statement.h"
#include "query/runs.h"
#include "storage/storage_test_support.h"

namespace ringmaster::storage {
namespace {

class ErrorOutputTest : public testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    std::filesystem::create_directories(dir_);
    db_ = std::make_unique<Database>((dir_ / "runs.db").string());
    db_->exec(
        "INSERT INTO runs (name, spec, strategy, world_size, status, created_at) VALUES "
        "('r', '{}', 'ddp', 3, 'failed', 1)");
  }
  void log(int attempt, std::optional<int> rank, const std::string& level,
           const std::string& message) {
    Statement insert(*db_,
                     "INSERT INTO logs (run_id, attempt, rank, t, level, message) VALUES (1, ?, "
                     "?, 1, ?, ?)");
    insert.bind(1, attempt).bind(2, rank).bind(3, level).bind(4, message).run();
  }
  std::unique_ptr<Database> db_;
};

TEST_F(ErrorOutputTest, OnlyTheRanksStderrLinesOfTheAttemptTheLastOnesWithoutTheirPrefix) {
  log(0, 1, "stderr", "[rank 1] from the first attempt");
  for (int i = 0; i < 30; ++i) log(1, 1, "stderr", fmt::format("[rank 1] line {}", i));
  log(1, 0, "stderr", "[rank 0] another rank");
  log(1, 1, "warn", "a warning of rank 1");
  log(1, std::nullopt, "stderr", "[agent node 0] the agent");
  log(1, 1, "stderr", "not prefixed [rank 1] ");
  const std::vector<std::string> lines = loadErrorOutput(*db_, 1, 1, 1);
  ASSERT_EQ(lines.size(), size_t{kErrorOutputLines});
  EXPECT_EQ(lines.front(), "line 11");
  EXPECT_EQ(lines[lines.size() - 2], "line 29");
  EXPECT_EQ(lines.back(), "not prefixed [rank 1] ");
  // The first attempt's and the other ranks' lines are not this failure's.
  EXPECT_EQ(loadErrorOutput(*db_, 1, 0, 1), std::vector<std::string>{"from the first attempt"});
  EXPECT_EQ(loadErrorOutput(*db_, 1, 1, 0), std::vector<std::string>{"another rank"});
  EXPECT_TRUE(loadErrorOutput(*db_, 1, 1, 2).empty());
  EXPECT_TRUE(loadErrorOutput(*db_, 1, 2, 1).empty());
}

TEST_F(ErrorOutputTest, LinesAreBoundedAndMadeSafe) {
  for (const size_t bytes : {size_t{0}, size_t{1}, kErrorOutputLineBytes - 1, kErrorOutputLineBytes,
                             kErrorOutputLineBytes + 1, size_t{60000}}) {
    SCOPED_TRACE(bytes);
    db_->exec("DELETE FROM logs");
    // Multi-byte characters, so that a cut falls inside one unless it backs off.
    std::string text;
    while (text.size() < bytes) text += "é";
    text.resize(bytes);
    for (int i = 0; i < 25; ++i) log(0, 2, "stderr", "[rank 2] " + text);
    const std::vector<std::string> lines = loadErrorOutput(*db_, 1, 0, 2);
    size_t total = 0;
    for (const std::string& line : lines) {
      EXPECT_LE(line.size(), kErrorOutputLineBytes);
      total += line.size() + 1;
    }
    EXPECT_LE(total, kErrorOutputBytes);
    EXPECT_GE(lines.size(), size_t{1});
    if (bytes > kErrorOutputLineBytes) {
      EXPECT_TRUE(lines.back().ends_with("...")) << lines.back();
    }
  }
  db_->exec("DELETE FROM logs");
  log(0, 2, "stderr", std::string("[rank 2] \x1b[2J \xff\xfe bell\x07 \xe2\x80\xae"));
  const std::vector<std::string> lines = loadErrorOutput(*db_, 1, 0, 2);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "\\x1b[2J \\xff\\xfe bell\\x07 \\u202e");
}

TEST_F(ErrorOutputTest, TheLogCursorReadsEveryLineOnceFilteredByRankAndText) {
  for (int i = 0; i < 7; ++i) log(0, i % 2, "stderr", fmt::format("[rank {}] step {}", i % 2, i));
  log(0, std::nullopt, "stderr", "[launcher] step of none");
  std::vector<std::string> seen;
  int64_t cursor = 0;
  for (;;) {
    const LogPage page = loadLogsAfter(*db_, 1, cursor, {.limit = 3});
    for (const LogLine& line : page.lines) seen.push_back(line.message);
    if (page.lines.empty()) {
      EXPECT_EQ(page.last_row, cursor);
      break;
    }
    EXPECT_GT(page.last_row, cursor);
    cursor = page.last_row;
  }
  ASSERT_EQ(seen.size(), 8u);
  EXPECT_EQ(seen.front(), "[rank 0] step 0");
  EXPECT_EQ(seen.back(), "[launcher] step of none");
  EXPECT_EQ(loadLogsAfter(*db_, 1, 0, {.rank = 1}).lines.size(), 3u);
  EXPECT_EQ(loadLogsAfter(*db_, 1, 0, {.containing = "step 4"}).lines.size(), 1u);
  EXPECT_EQ(loadLogsAfter(*db_, 1, 0, {.rank = 0, .containing = "step"}).lines.size(), 4u);
  EXPECT_TRUE(loadLogsAfter(*db_, 1, 0, {.containing = "STEP"}).lines.empty());  // case matters
  EXPECT_TRUE(loadLogsAfter(*db_, 2, 0, {}).lines.empty());
}

}  // namespace
}  // namespace ringmaster::storage
