// Statement: one prepared SQLite statement with typed binding (optional values bind NULL) and
// reading, reset after each run and finalized on destruction. Errors become checkSqlite's errors.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "db/database.h"

namespace ringmaster::storage {

class Statement {
 public:
  Statement(const Database& db, std::string_view sql) : db_(db.handle()) {
    enforceQueryThread(sql);
    checkSqlite(
        db_,
        sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &statement_, nullptr),
        "preparing " + std::string(sql));
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, int64_t value) {
    sqlite3_bind_int64(statement_, index, value);
    return *this;
  }
  Statement& bind(int index, int value) { return bind(index, int64_t{value}); }
  Statement& bind(int index, double value) {
    sqlite3_bind_double(statement_, index, value);
    return *this;
  }
  Statement& bind(int index, std::string_view value) {
    sqlite3_bind_text(statement_, index, value.data(), static_cast<int>(value.size()),
                      SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int index, const std::string& value) {
    return bind(index, std::string_view(value));
  }
  // Binds `value` without copying it: it must stay unchanged until the statement has run (the
  // recorder's hot inserts, whose texts live in the event being stored).
  Statement& bindUncopied(int index, std::string_view value) {
    sqlite3_bind_text(statement_, index, value.data(), static_cast<int>(value.size()),
                      SQLITE_STATIC);
    return *this;
  }
  Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  template <typename T>
  Statement& bind(int index, const std::optional<T>& value) {
    if (value) return bind(index, *value);
    sqlite3_bind_null(statement_, index);
    return *this;
  }

  // Steps once: true when a row came back (read it before the next call), false when done (the
  // statement is then reset, its bindings kept).
  bool run() {
    const int code = sqlite3_step(statement_);
    if (code == SQLITE_ROW) return true;
    sqlite3_reset(statement_);
    checkSqlite(db_, code, sqlite3_sql(statement_));
    return false;
  }
  void reset() { sqlite3_reset(statement_); }

  // Runs an INSERT; false when a row with its key is there already (a primary key or unique
  // constraint refused it), any other error throws. A plain INSERT checks that before it writes,
  // so SQLite keeps no statement journal for it, as it must for INSERT OR REPLACE: a copy of
  // every page the statement touches, which costs more than the insert itself.
  bool insertUnlessPresent() {
    const int code = sqlite3_step(statement_);
    sqlite3_reset(statement_);
    if (code == SQLITE_CONSTRAINT_PRIMARYKEY || code == SQLITE_CONSTRAINT_UNIQUE) return false;
    checkSqlite(db_, code, sqlite3_sql(statement_));
    return true;
  }

  int columnCount() const { return sqlite3_column_count(statement_); }
  std::string columnName(int column) const { return sqlite3_column_name(statement_, column); }
  int columnType(int column) const { return sqlite3_column_type(statement_, column); }
  bool isNull(int column) const { return sqlite3_column_type(statement_, column) == SQLITE_NULL; }
  int64_t columnInt(int column) const { return sqlite3_column_int64(statement_, column); }
  double columnDouble(int column) const { return sqlite3_column_double(statement_, column); }
  // An unsigned 64-bit count (bytes). The recorder stores only [0, 2^63 - 1] (larger values are
  // refused at decode, docs/telemetry.md); an older version stored the bit pattern, so a negative
  // integer is read back as it meant it (-1 as 2^64 - 1). A REAL (a hand-edited row) is clamped
  // into [0, 2^64 - 1]; NaN never comes back from SQLite.
  uint64_t columnUnsigned(int column) const {
    if (columnType(column) != SQLITE_FLOAT) return static_cast<uint64_t>(columnInt(column));
    const double value = columnDouble(column);
    if (!(value > 0)) return 0;
    return value >= 18446744073709551616.0 ? UINT64_MAX : static_cast<uint64_t>(value);
  }
  std::string columnText(int column) const {
    const auto* text = sqlite3_column_text(statement_, column);
    return text != nullptr
               ? std::string(reinterpret_cast<const char*>(text),
                             static_cast<size_t>(sqlite3_column_bytes(statement_, column)))
               : std::string();
  }
  std::optional<int64_t> optionalInt(int column) const {
    return isNull(column) ? std::nullopt : std::optional(columnInt(column));
  }
  std::optional<double> optionalDouble(int column) const {
    return isNull(column) ? std::nullopt : std::optional(columnDouble(column));
  }
  std::optional<std::string> optionalText(int column) const {
    return isNull(column) ? std::nullopt : std::optional(columnText(column));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* statement_ = nullptr;
};

}  // namespace ringmaster::storage
