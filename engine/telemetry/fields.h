// The fields of the step, comm, sched, eval and progress records, each described once, in the order
// of docs/telemetry.md: wire name, member, numeric domain and whether it may be absent. The
// encoder, both decoders and storage's step columns iterate these tables, so a new step metric is
// its member in StepEvent and its row in kStepFields (and, to be stored, a column:
// storage/README.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "telemetry/events.h"

namespace ringmaster {

// Whether a field may be left out of a line.
enum class Presence {
  kRequired,
  // May be absent or null: a std::optional member stays empty, any other keeps its default.
  kOptional,
  // Required, but null is read as NaN (JSON has no NaN) and a non-finite value is written as null.
  kNullIsNaN,
};

// The numeric domains (docs/telemetry.md, "Numeric domains") that both decoders enforce.
struct NumberDomain {
  double min, max;
};
struct IntegerDomain {
  int64_t min, max;
};
struct AnyValue {};  // strings and enumerations
// A string that must be one of a few spellings (`names`, `count` of them).
struct OneOf {
  const std::string_view* names;
  std::size_t count;
  constexpr bool contains(std::string_view value) const {
    for (std::size_t i = 0; i < count; ++i)
      if (names[i] == value) return true;
    return false;
  }
};

inline constexpr NumberDomain kAnySign{-kMaxMagnitude, kMaxMagnitude};
inline constexpr NumberDomain kNonNegative{0, kMaxMagnitude};  // times, durations, rates, norms
inline constexpr NumberDomain kFraction{0, 1};
inline constexpr IntegerDomain kCount{0, kMaxStep};  // steps and counts
// Of magnitude at most 2^53, so that every difference of two fits an int64 and a double.
inline constexpr IntegerDomain kMicroseconds{-kMaxStep, kMaxStep};
inline constexpr IntegerDomain kIndex{0, std::numeric_limits<int>::max()};  // stages, batches
// Unsigned counters, byte counts and sequence numbers (uint64_t members): storage keeps them in
// SQLite's signed 64-bit integer, so a value above 2^63 - 1 is refused as malformed rather than
// stored with its sign flipped.
inline constexpr IntegerDomain kUnsigned{0, std::numeric_limits<int64_t>::max()};
// Byte figures storage keeps as doubles (a step's memory): integers exact in a double, 8 PiB.
inline constexpr IntegerDomain kBytesInDouble{0, kMaxStep};
inline constexpr OneOf kCommDimNames{kCommDims, std::size(kCommDims)};

// One field of a record. `name` is a string literal's (null-terminated).
template <typename Record, typename Member, typename Domain>
struct Field {
  using Value = Member;
  std::string_view name;
  Member Record::*member;
  Domain domain;
  Presence presence;
};

template <typename Record, typename Member, typename Domain = AnyValue, std::size_t N>
constexpr Field<Record, Member, Domain> field(const char (&name)[N], Member Record::*member,
                                              Domain domain = {},
                                              Presence presence = Presence::kRequired) {
  return {std::string_view(name, N - 1), member, domain, presence};
}

// Calls f(field) for each field of a table, in order.
template <typename Table, typename F>
constexpr void forEachField(const Table& table, F&& f) {
  std::apply([&](const auto&... fields) { (f(fields), ...); }, table);
}

// The names of the step fields, which are also the names of their series in storage. Code that
// names a metric uses these.
namespace step_field {
inline constexpr char kStep[] = "step";
inline constexpr char kLoss[] = "loss";
inline constexpr char kLr[] = "lr";
inline constexpr char kSamples[] = "samples";
inline constexpr char kStepMs[] = "step_ms";
inline constexpr char kComputeMs[] = "compute_ms";
inline constexpr char kCommMs[] = "comm_ms";
inline constexpr char kExposedCommMs[] = "exposed_comm_ms";
inline constexpr char kMemAllocated[] = "mem_allocated";
inline constexpr char kMemPeak[] = "mem_peak";
inline constexpr char kMemReserved[] = "mem_reserved";
inline constexpr char kDeviceMemUsed[] = "device_mem_used";
inline constexpr char kGradNorm[] = "grad_norm";
inline constexpr char kAccuracy[] = "accuracy";
inline constexpr char kTokens[] = "tokens";
inline constexpr char kTokensPerS[] = "tokens_per_s";
inline constexpr char kMfu[] = "mfu";
inline constexpr char kLossScale[] = "loss_scale";
inline constexpr char kSkipped[] = "skipped";
}  // namespace step_field

inline constexpr auto kStepFields = std::tuple{
    field(step_field::kStep, &StepEvent::step, kCount),
    field(step_field::kLoss, &StepEvent::loss, kAnySign, Presence::kNullIsNaN),
    field(step_field::kLr, &StepEvent::lr, kAnySign),
    field(step_field::kSamples, &StepEvent::samples, kCount),
    field(step_field::kStepMs, &StepEvent::step_ms, kNonNegative),
    field(step_field::kComputeMs, &StepEvent::compute_ms, kNonNegative),
    field(step_field::kCommMs, &StepEvent::comm_ms, kNonNegative),
    field(step_field::kExposedCommMs, &StepEvent::exposed_comm_ms, kNonNegative),
    field(step_field::kMemAllocated, &StepEvent::mem_allocated, kBytesInDouble),
    field(step_field::kMemPeak, &StepEvent::mem_peak, kBytesInDouble),
    field(step_field::kMemReserved, &StepEvent::mem_reserved, kBytesInDouble),
    field(step_field::kDeviceMemUsed, &StepEvent::device_mem_used, kBytesInDouble),
    field(step_field::kGradNorm, &StepEvent::grad_norm, kNonNegative, Presence::kOptional),
    field(step_field::kAccuracy, &StepEvent::accuracy, kFraction, Presence::kOptional),
    field(step_field::kTokens, &StepEvent::tokens, kCount, Presence::kOptional),
    field(step_field::kTokensPerS, &StepEvent::tokens_per_s, kNonNegative, Presence::kOptional),
    field(step_field::kMfu, &StepEvent::mfu, kNonNegative, Presence::kOptional),
    field(step_field::kLossScale, &StepEvent::loss_scale, kNonNegative, Presence::kOptional),
    field(step_field::kSkipped, &StepEvent::skipped, kCount, Presence::kOptional),
};

inline constexpr auto kCommFields = std::tuple{
    field("seq_op", &CommEvent::seq_op, kUnsigned),
    field("op", &CommEvent::op),
    field("group", &CommEvent::group),
    field("bytes", &CommEvent::bytes, kUnsigned),
    field("dtype", &CommEvent::dtype),
    field("duration_ms", &CommEvent::duration_ms, kNonNegative),
    field("algbw_gbps", &CommEvent::algbw_gbps, kNonNegative),
    field("busbw_gbps", &CommEvent::busbw_gbps, kNonNegative),
    field("wait_ms", &CommEvent::wait_ms, kNonNegative, Presence::kOptional),
    field("step", &CommEvent::step, kCount, Presence::kOptional),
    field("start_us", &CommEvent::start_us, kMicroseconds, Presence::kOptional),
    field("end_us", &CommEvent::end_us, kMicroseconds, Presence::kOptional),
    field("group_size", &CommEvent::group_size, kCount, Presence::kOptional),
    field("dim", &CommEvent::dim, kCommDimNames, Presence::kOptional),
};

// Cross-field rules (end_us >= start_us, ready_us within them, ...) are the decoders' own.
inline constexpr auto kSchedFields = std::tuple{
    field("step", &SchedEvent::step, kCount),
    field("stage", &SchedEvent::stage, kIndex),
    field("micro_batch", &SchedEvent::micro_batch, kIndex),
    field("phase", &SchedEvent::phase),
    field("start_us", &SchedEvent::start_us, kMicroseconds),
    field("end_us", &SchedEvent::end_us, kMicroseconds),
    field("ready_us", &SchedEvent::ready_us, kMicroseconds, Presence::kOptional),
    field("transfer_us", &SchedEvent::transfer_us, kCount, Presence::kOptional),
    field("virtual_stage", &SchedEvent::virtual_stage, kIndex, Presence::kOptional),
};

// The eval record. Its loss and perplexity go null for a non-finite value, as step.loss.
inline constexpr auto kEvalFields = std::tuple{
    field("step", &EvalEvent::step, kCount),
    field("val_loss", &EvalEvent::val_loss, kAnySign, Presence::kNullIsNaN),
    field("perplexity", &EvalEvent::perplexity, kNonNegative, Presence::kNullIsNaN),
    field("tokens", &EvalEvent::tokens, kCount),
    field("eval_ms", &EvalEvent::eval_ms, kNonNegative),
};

// The progress record (the live hang view), sent every few seconds per rank and group.
inline constexpr auto kProgressFields = std::tuple{
    field("group", &ProgressEvent::group),
    field("period_s", &ProgressEvent::period_s, kNonNegative),
    field("step", &ProgressEvent::step, kCount, Presence::kOptional),
    field("started", &ProgressEvent::started, kUnsigned),
    field("completed", &ProgressEvent::completed, kUnsigned),
    field("completed_op", &ProgressEvent::completed_op, AnyValue{}, Presence::kOptional),
    field("op", &ProgressEvent::op, AnyValue{}, Presence::kOptional),
    field("op_seq", &ProgressEvent::op_seq, kCount, Presence::kOptional),
    field("peer", &ProgressEvent::peer, kIndex, Presence::kOptional),
    field("waiting_ms", &ProgressEvent::waiting_ms, kNonNegative, Presence::kOptional),
    field("not_arrived", &ProgressEvent::not_arrived, AnyValue{}, Presence::kOptional),
    field("silent", &ProgressEvent::silent, AnyValue{}, Presence::kOptional),
};

// The field table of a record type.
template <typename Record>
constexpr const auto& fieldsOf() {
  if constexpr (std::is_same_v<Record, StepEvent>) {
    return kStepFields;
  } else if constexpr (std::is_same_v<Record, CommEvent>) {
    return kCommFields;
  } else if constexpr (std::is_same_v<Record, EvalEvent>) {
    return kEvalFields;
  } else if constexpr (std::is_same_v<Record, ProgressEvent>) {
    return kProgressFields;
  } else {
    static_assert(std::is_same_v<Record, SchedEvent>, "no field table for this record");
    return kSchedFields;
  }
}

// Whether Record has a field table (step, comm, sched, eval, progress).
template <typename Record>
inline constexpr bool kHasFieldTable =
    std::is_same_v<Record, StepEvent> || std::is_same_v<Record, CommEvent> ||
    std::is_same_v<Record, SchedEvent> || std::is_same_v<Record, EvalEvent> ||
    std::is_same_v<Record, ProgressEvent>;

}  // namespace ringmaster
