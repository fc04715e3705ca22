// The step event's fields that the `steps` table keeps as columns (schema migration 5; tokens,
// tokens_per_s and mfu added by migration 8, loss_scale and skipped by migration 9), derived
// from the step record's field table (telemetry/fields.h): the event's time, then every field but
// the step (the row's key). Each is also the name of its series, read like any metric of
// `scalars` through the `scalar_points` view, which is generated from this list.
#pragma once

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "telemetry/fields.h"

namespace ringmaster::storage {

// The series of the envelope's time ("t") of each step event, in seconds since the epoch.
inline constexpr char kWallTimeColumn[] = "wall_time_s";

inline constexpr std::array kStepColumns = [] {
  std::array<std::string_view, std::tuple_size_v<std::decay_t<decltype(kStepFields)>>> columns{};
  std::size_t next = 0;
  columns[next++] = kWallTimeColumn;
  forEachField(kStepFields, [&](const auto& field) {
    if (field.name != step_field::kStep) columns[next++] = field.name;
  });
  return columns;
}();

inline bool isStepColumn(std::string_view metric) {
  return std::find(kStepColumns.begin(), kStepColumns.end(), metric) != kStepColumns.end();
}

// A step event's values in the order of kStepColumns; NaN where absent (bound as NULL).
inline std::array<double, kStepColumns.size()> stepColumnValues(const TelemetryEvent& event,
                                                                const StepEvent& step) {
  std::array<double, kStepColumns.size()> values{};
  std::size_t next = 0;
  values[next++] = event.time;
  forEachField(kStepFields, [&](const auto& field) {
    if (field.name == step_field::kStep) return;
    const auto& value = step.*field.member;
    using Value = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<Value, std::optional<double>>) {
      values[next++] = value.value_or(std::numeric_limits<double>::quiet_NaN());
    } else if constexpr (std::is_same_v<Value, std::optional<int64_t>>) {
      values[next++] =
          value ? static_cast<double>(*value) : std::numeric_limits<double>::quiet_NaN();
    } else {
      values[next++] = static_cast<double>(value);
    }
  });
  return values;
}

}  // namespace ringmaster::storage
