// The bounds on custom metrics (the step event's "metrics": any scalar a script or the trainer
// reports by name beside the step fields), in one place: how long a name may be, its characters,
// how many distinct names a run keeps, and which values are refused. The recorder applies them
// (storage/recorder/custom_metrics.h: CustomMetricStore) and counts what it refuses; the trainer's
// own names are checked when they are added. docs/telemetry.md, "Custom metrics", states the same
// numbers.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "telemetry/events.h"

namespace ringmaster {

// The longest name, in bytes.
inline constexpr std::size_t kMaxCustomMetricNameBytes = 128;
// The most distinct custom names one run stores; points of a name past them are refused.
inline constexpr std::size_t kMaxCustomMetricsPerRun = 256;
// The characters a name may hold (it may not start with '/'), as a message spells them.
inline constexpr std::string_view kCustomMetricNameCharset = "[A-Za-z0-9_./-]";

// Why a name cannot be a custom metric.
enum class MetricNameProblem {
  kEmpty,
  kTooLong,       // longer than kMaxCustomMetricNameBytes
  kCharacter,     // a character outside kCustomMetricNameCharset
  kLeadingSlash,  // starts with '/'
  kStepField,     // a step field's ("loss", "grad_norm", ...): the step event carries those
};

// The problem of a name, or nothing when it may be a custom metric.
std::optional<MetricNameProblem> customMetricNameProblem(std::string_view name);
// "the name is longer than 128 bytes", ...
std::string describe(MetricNameProblem problem);

// Adds a custom metric to a step event, for code that builds one (the trainer): a non-finite
// value or one beyond kMaxMagnitude goes as null, for the recorder to count. Throws
// kInvalidArgument for a name customMetricNameProblem refuses: a bug of the caller.
void addCustomMetric(StepEvent& event, std::string_view name, double value);

}  // namespace ringmaster
