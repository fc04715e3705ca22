// The `step_rollups` table (schema migration 20): one row per run, width, rank and bucket holding
// the SeriesSummary of every step column at once, so a batch of step events writes one rollup row
// per bucket instead of one per column. Each column `c` of kStepColumns has seven: c_n, c_sum,
// c_min, c_max, c_first, c_last (its first and last step in the bucket) and c_last_value, all NULL
// where the bucket holds no value of it.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace ringmaster::storage {

// The parts of a column's summary, in the order the statements below bind and read them.
inline constexpr std::array<std::string_view, 7> kStepRollupParts = {
    "n", "sum", "min", "max", "first", "last", "last_value"};

inline std::string stepRollupColumn(std::string_view column, std::string_view part) {
  return fmt::format("{}_{}", column, part);
}

// "c_n, c_sum, ..., c_last_value" of one column.
inline std::string stepRollupColumns(std::string_view column) {
  std::string list;
  for (std::string_view part : kStepRollupParts)
    list += (list.empty() ? "" : ", ") + stepRollupColumn(column, part);
  return list;
}

}  // namespace ringmaster::storage
