// The step event's fields that the `steps` table keeps as columns (schema migration 5). Each is
// also the name of its series, read like any metric of `scalars`.
#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace ringmaster::storage {

inline constexpr std::array<std::string_view, 14> kStepColumns = {
    "wall_time_s",   "loss",       "lr",           "samples",
    "step_ms",       "compute_ms", "comm_ms",      "exposed_comm_ms",
    "mem_allocated", "mem_peak",   "mem_reserved", "device_mem_used",
    "grad_norm",     "accuracy"};

inline bool isStepColumn(std::string_view metric) {
  return std::find(kStepColumns.begin(), kStepColumns.end(), metric) != kStepColumns.end();
}

}  // namespace ringmaster::storage
