// What the storage tests share: a fresh directory per test for its database files, and one-value
// SQL queries to check what was stored.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "db/database.h"

namespace ringmaster::storage::testing {

// A test fixture owning an empty directory named after the test, removed afterwards.
class StorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ringmaster_storage_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// The first column of the first row of `sql` (-1 / "" when there is no row).
inline int64_t queryInt(const Database& db, const std::string& sql) {
  sqlite3_stmt* statement = nullptr;
  checkSqlite(db.handle(), sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &statement, nullptr),
              sql);
  int64_t value = -1;
  if (sqlite3_step(statement) == SQLITE_ROW) value = sqlite3_column_int64(statement, 0);
  sqlite3_finalize(statement);
  return value;
}

inline std::string queryText(const Database& db, const std::string& sql) {
  sqlite3_stmt* statement = nullptr;
  checkSqlite(db.handle(), sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &statement, nullptr),
              sql);
  std::string value;
  if (sqlite3_step(statement) == SQLITE_ROW)
    value = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
  sqlite3_finalize(statement);
  return value;
}

// How many events of a rank the recorder stored (the sequence numbers its ranges cover).
inline int64_t storedEvents(const Database& db, int rank) {
  return queryInt(db, "SELECT total(last_seq - first_seq + 1) FROM seq_ranges WHERE rank = " +
                          std::to_string(rank));
}

}  // namespace ringmaster::storage::testing
