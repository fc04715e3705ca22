// Communicator records as telemetry events.
#include "train/comm_telemetry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ringmaster {

CommEvent TelemetryCommObserver::toEvent(const CommRecord& record, std::optional<int64_t> step,
                                         std::string_view dim) {
  CommEvent event;
  event.seq_op = record.seq;
  event.op = std::string(toString(record.op));
  event.group = record.group;
  event.bytes = record.bytes;
  event.dtype = std::string(commDTypeName(record.dtype));
  event.duration_ms = record.duration_ms;
  event.algbw_gbps = record.algbw_gbps;
  event.busbw_gbps = record.busbw_gbps;
  event.wait_ms = record.wait_ms;
  event.step = step;
  event.start_us = record.start_us;
  event.end_us = record.end_us;
  if (record.start_us) event.group_size = record.group_size;
  event.dim = std::string(dim);
  return event;
}

ProgressEvent TelemetryCommObserver::toEvent(const CommProgress& progress,
                                             std::optional<int64_t> step) {
  const auto rankList = [](const std::vector<int>& ranks) -> std::optional<std::string> {
    if (ranks.empty()) return std::nullopt;
    return fmt::format("{}", fmt::join(ranks, ","));
  };
  ProgressEvent event;
  event.group = progress.group;
  event.period_s = progress.period_s;
  event.step = step;
  event.started = progress.started;
  event.completed = progress.completed;
  if (progress.completed_op) event.completed_op = std::string(toString(*progress.completed_op));
  if (progress.op) {
    event.op = std::string(toString(*progress.op));
    event.op_seq = static_cast<int64_t>(progress.op_seq);
    if (progress.peer >= 0) event.peer = progress.peer;
    event.waiting_ms = progress.waiting_ms;
    event.not_arrived = rankList(progress.not_arrived);
    event.silent = rankList(progress.silent);
  }
  return event;
}

void TelemetryCommObserver::onProgress(const CommProgress& progress) {
  const int64_t step = step_.load();
  writer_.emit(toEvent(progress, step > 0 ? std::optional<int64_t>(step) : std::nullopt));
}

void TelemetryCommObserver::onOperation(const CommRecord& record) {
  int64_t step = step_.load();
  // Stamped with the op's end, not the moment this observer heard of it (the completion thread may
  // reach an op late): the trace places it at [t - duration_ms, t].
  // The group's mesh dimension (parallel/device_mesh.h labels the mesh's groups); a group off the
  // mesh is the world's.
  writer_.emit(toEvent(record, step > 0 ? std::optional<int64_t>(step) : std::nullopt,
                       record.dim.empty() ? kWorldCommDim : std::string_view(record.dim)),
               record.end_time_s);
}

void TelemetryCommObserver::onFailure(const Error& error, const nlohmann::json& flight_recorder) {
  ErrorEvent event;
  event.message = error.message();
  event.kind = std::string(errorKindName(error.kind()));
  event.where = error.where();
  int64_t step = step_.load();
  if (step > 0) event.step = step;
  event.fatal = true;
  event.flight_recorder = flight_recorder;
  writer_.emit(event);
  failure_reported_ = true;
}

}  // namespace ringmaster
