// CSV from SQL result columns, and the trace assembled from steps, comm events and sched events.
#include "export/run_export.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "db/files.h"
#include "db/statement.h"
#include "query/runs.h"

namespace ringmaster::storage {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The columns that hold unsigned 64-bit byte counts.
bool isUnsignedColumn(const std::string& name) {
  return name == "bytes" || name == "memory_total";
}

// Writes every row of `sql` (parameter 1: the run id) with a header of its column names.
void writeCsv(const Database& db, int64_t run_id, const std::string& sql, const fs::path& path) {
  OutputFile out(path);
  Statement select(db, sql);
  select.bind(1, run_id);
  const int columns = select.columnCount();
  std::string row;
  for (int c = 0; c < columns; ++c) row += (c ? "," : "") + csvField(select.columnName(c));
  out.write(row + '\n');
  while (select.run()) {
    row.clear();
    for (int c = 0; c < columns; ++c) {
      if (c) row += ',';
      switch (select.columnType(c)) {
        case SQLITE_NULL:
          break;
        case SQLITE_INTEGER:
          // Byte counts are unsigned 64-bit, kept as their bit pattern (Statement::columnUnsigned).
          row += isUnsignedColumn(select.columnName(c)) ? std::to_string(select.columnUnsigned(c))
                                                        : std::to_string(select.columnInt(c));
          break;
        case SQLITE_FLOAT:
          row += fmt::format("{}", select.columnDouble(c));
          break;
        default:
          row += csvField(select.columnText(c));
      }
    }
    out.write(row + '\n');
  }
  out.close();
}

}  // namespace

std::string csvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::vector<std::string> exportRunCsv(const Database& db, int64_t run_id,
                                      const std::string& directory) {
  const RunRecord run = loadRun(db, run_id);
  createDirectories(directory);
  std::vector<std::string> written;
  {
    const fs::path path = fs::path(directory) / "run.json";
    OutputFile out(path);
    json spec = json::parse(run.spec_json, nullptr, false);
    out.write(json{{"id", run.id},
                   {"name", run.name},
                   {"strategy", run.strategy},
                   {"world_size", run.world_size},
                   {"status", run.status},
                   {"created_at", run.created_at},
                   {"started_at", run.started_at ? json(*run.started_at) : json(nullptr)},
                   {"ended_at", run.ended_at ? json(*run.ended_at) : json(nullptr)},
                   {"error", run.error ? json(*run.error) : json(nullptr)},
                   {"spec", spec.is_discarded() ? json(run.spec_json) : spec}}
                  .dump(2) +
              '\n');
    out.close();
    written.push_back(path.string());
  }
  const std::pair<const char*, const char*> tables[] = {
      {"ranks.csv",
       "SELECT rank, attempt, local_rank, host, pid, device, device_name, memory_total, version, "
       "status FROM ranks WHERE run_id = ? ORDER BY attempt, rank"},
      {"scalars.csv",
       "SELECT rank, metric, step, value, attempt FROM scalar_points WHERE run_id = ? "
       "ORDER BY metric, rank, step"},
      {"comm_events.csv",
       "SELECT rank, attempt, t, step, op, group_name, bytes, dtype, duration_ms, wait_ms, "
       "algbw_gbps, busbw_gbps FROM comm_events WHERE run_id = ? ORDER BY t, rank"},
      {"sched_events.csv",
       "SELECT rank, attempt, step, stage, virtual_stage, micro_batch, phase, start_us, ready_us, "
       "transfer_us, end_us FROM sched_events WHERE run_id = ? ORDER BY step, start_us, rank"},
      {"evals.csv",
       "SELECT rank, attempt, step, t, val_loss, perplexity, tokens, eval_ms FROM evals WHERE "
       "run_id = ? ORDER BY step, rank"},
      {"logs.csv", "SELECT rank, t, level, message FROM logs WHERE run_id = ? ORDER BY rowid"},
  };
  for (const auto& [name, sql] : tables) {
    const fs::path path = fs::path(directory) / name;
    writeCsv(db, run_id, sql, path);
    written.push_back(path.string());
  }
  return written;
}

namespace {

// One complete ("X") event of the trace, in microseconds on the run's clock.
struct Slice {
  int rank = 0;
  int category = 0;  // kSteps, kComm, kPipeline
  double start_us = 0, end_us = 0;
  std::string name;
  json args;
  std::vector<Slice> children;  // nested inside it, drawn on its track
};

constexpr int kSteps = 0, kComm = 1, kPipeline = 2;
constexpr const char* kCategoryNames[] = {"step", "comm", "pipeline"};
constexpr const char* kTrackNames[] = {"steps", "communication", "pipeline"};

// The track (thread id) of lane `lane` of a category: the first lane keeps the ids 1, 2, 3 that
// traces had before lanes; further lanes follow at 100 per category.
int trackId(int category, int lane) {
  return lane == 0 ? category + 1 : 100 * (category + 1) + lane;
}

// Assigns each rank's slices of each category to lanes so that no two slices of one lane overlap
// (Perfetto and chrome://tracing keep only properly nested complete events on a track): the
// greedy interval partitioning, which uses as many lanes as slices overlap at most at once.
std::map<std::pair<int, int>, std::vector<std::vector<Slice>>> laneSlices(
    std::vector<Slice> slices) {
  std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    return std::tie(a.rank, a.category, a.start_us) < std::tie(b.rank, b.category, b.start_us);
  });
  std::map<std::pair<int, int>, std::vector<std::vector<Slice>>> lanes;
  for (Slice& slice : slices) {
    auto& tracks = lanes[{slice.rank, slice.category}];
    auto free = std::find_if(tracks.begin(), tracks.end(), [&](const std::vector<Slice>& lane) {
      return lane.back().end_us <= slice.start_us;
    });
    if (free == tracks.end()) free = tracks.insert(tracks.end(), std::vector<Slice>{});
    free->push_back(std::move(slice));
  }
  return lanes;
}

json completeEvent(const Slice& slice, int track, double origin) {
  // Both ends rounded, the duration their difference: adjacent slices stay adjacent.
  const double ts = std::round((slice.start_us - origin) * 1000) / 1000;
  const double end = std::round((slice.end_us - origin) * 1000) / 1000;
  return {{"ph", "X"},
          {"pid", slice.rank},
          {"tid", track},
          {"name", slice.name},
          {"cat", kCategoryNames[slice.category]},
          {"ts", ts},
          {"dur", std::max(0.0, end - ts)},
          {"args", slice.args}};
}

// Each step as a slice ending at its wall time, step_ms long.
void addStepSlices(const Database& db, int64_t run_id, std::vector<Slice>& slices) {
  Statement steps(db,
                  "SELECT rank, step, wall_time_s, step_ms, loss FROM steps WHERE run_id = ? AND "
                  "wall_time_s IS NOT NULL AND step_ms IS NOT NULL");
  steps.bind(1, run_id);
  while (steps.run()) {
    const double end_us = steps.columnDouble(2) * 1e6;
    const double duration_us = std::max(0.0, steps.columnDouble(3) * 1e3);
    json args = {{"step", steps.columnInt(1)}};
    if (!steps.isNull(4)) args["loss"] = steps.columnDouble(4);
    slices.push_back({static_cast<int>(steps.columnInt(0)), kSteps, end_us - duration_us, end_us,
                      fmt::format("step {}", steps.columnInt(1)), std::move(args)});
  }
}

// An event's time is the op's end; a receive's wait for its sender, when measured, is a slice
// nested at the start of the op's.
void addCommSlices(const Database& db, int64_t run_id, std::vector<Slice>& slices) {
  Statement comm(db,
                 "SELECT rank, t, duration_ms, op, bytes, algbw_gbps, busbw_gbps, step, wait_ms "
                 "FROM comm_events WHERE run_id = ?");
  comm.bind(1, run_id);
  while (comm.run()) {
    const double end_us = comm.columnDouble(1) * 1e6;
    const double duration_us = std::max(0.0, comm.columnDouble(2) * 1e3);
    json args = {{"bytes", comm.columnUnsigned(4)},
                 {"algbw_gbps", comm.columnDouble(5)},
                 {"busbw_gbps", comm.columnDouble(6)}};
    if (!comm.isNull(7)) args["step"] = comm.columnInt(7);
    Slice slice{static_cast<int>(comm.columnInt(0)),
                kComm,
                end_us - duration_us,
                end_us,
                comm.columnText(3),
                std::move(args)};
    if (!comm.isNull(8)) {
      const double wait_us = std::clamp(comm.columnDouble(8) * 1e3, 0.0, duration_us);
      slice.args["wait_ms"] = comm.columnDouble(8);
      if (wait_us > 0)
        slice.children.push_back({slice.rank, kComm, slice.start_us, slice.start_us + wait_us,
                                  "waiting for peer", json::object()});
    }
    slices.push_back(std::move(slice));
  }
}

// A pipeline action is its wait for the other stage and its input's transfer (when it had an
// input to wait for) followed by its compute.
void addPipelineSlices(const Database& db, int64_t run_id, std::vector<Slice>& slices) {
  Statement sched(db,
                  "SELECT rank, start_us, coalesce(ready_us, start_us), end_us, phase, "
                  "micro_batch, stage, step, coalesce(transfer_us, 0) FROM sched_events WHERE "
                  "run_id = ?");
  sched.bind(1, run_id);
  while (sched.run()) {
    const int rank = static_cast<int>(sched.columnInt(0));
    const auto start = static_cast<double>(sched.columnInt(1));
    const auto end = std::max(start, static_cast<double>(sched.columnInt(3)));
    const double ready = std::clamp(static_cast<double>(sched.columnInt(2)), start, end);
    const std::string action = fmt::format("{}{}", sched.columnText(4), sched.columnInt(5));
    const json args = {{"stage", sched.columnInt(6)},
                       {"micro_batch", sched.columnInt(5)},
                       {"step", sched.columnInt(7)}};
    const double transfer_start =
        std::clamp(ready - static_cast<double>(sched.columnInt(8)), start, ready);
    if (transfer_start > start)
      slices.push_back({rank, kPipeline, start, transfer_start, "wait " + action, args});
    if (ready > transfer_start)
      slices.push_back({rank, kPipeline, transfer_start, ready, "transfer " + action, args});
    slices.push_back({rank, kPipeline, ready, end, action, args});
  }
}

// A slice beyond any clock (not finite, or more than 30,000 years from 1970: times of a
// hand-edited database or an older version's) has no place on a time axis; leaving it out keeps
// every time below finite and the sort by start well defined.
void dropSlicesBeyondAnyClock(std::vector<Slice>& slices) {
  constexpr double kFarthestUs = 1e18;
  std::erase_if(slices, [](const Slice& slice) {
    return !(std::fabs(slice.start_us) <= kFarthestUs && std::fabs(slice.end_us) <= kFarthestUs);
  });
}

// Each rank as a process of the trace, named by its host and device, in rank order.
void addProcessNames(const Database& db, const RunRecord& run, json& events) {
  const std::vector<RankRecord> ranks = loadRanks(db, run.id);
  for (int rank = 0; rank < run.world_size; ++rank) {
    std::string label = fmt::format("rank {}", rank);
    for (const RankRecord& record : ranks)
      if (record.rank == rank) label += fmt::format(" ({}, {})", record.host, record.device);
    events.push_back(
        {{"ph", "M"}, {"pid", rank}, {"name", "process_name"}, {"args", {{"name", label}}}});
    events.push_back({{"ph", "M"},
                      {"pid", rank},
                      {"name", "process_sort_index"},
                      {"args", {{"sort_index", rank}}}});
  }
}

// Each lane as a named track of its rank's process, with its slices (and their nested ones).
void addTracks(const std::map<std::pair<int, int>, std::vector<std::vector<Slice>>>& lanes,
               double origin, json& events) {
  for (const auto& [key, tracks] : lanes) {
    const auto [rank, category] = key;
    for (size_t lane = 0; lane < tracks.size(); ++lane) {
      const int track = trackId(category, static_cast<int>(lane));
      const std::string name =
          lane == 0 ? kTrackNames[category] : fmt::format("{} {}", kTrackNames[category], lane + 1);
      events.push_back({{"ph", "M"},
                        {"pid", rank},
                        {"tid", track},
                        {"name", "thread_name"},
                        {"args", {{"name", name}}}});
      events.push_back({{"ph", "M"},
                        {"pid", rank},
                        {"tid", track},
                        {"name", "thread_sort_index"},
                        {"args", {{"sort_index", category * 1000 + static_cast<int>(lane)}}}});
      for (const Slice& slice : tracks[lane]) {
        events.push_back(completeEvent(slice, track, origin));
        for (const Slice& child : slice.children)
          events.push_back(completeEvent(child, track, origin));
      }
    }
  }
}

}  // namespace

int64_t exportRunTrace(const Database& db, int64_t run_id, const std::string& path) {
  const RunRecord run = loadRun(db, run_id);
  std::vector<Slice> slices;
  addStepSlices(db, run_id, slices);
  addCommSlices(db, run_id, slices);
  addPipelineSlices(db, run_id, slices);
  dropSlicesBeyondAnyClock(slices);
  const int64_t count = static_cast<int64_t>(slices.size());
  double origin = std::numeric_limits<double>::infinity();
  for (const Slice& slice : slices) origin = std::min(origin, slice.start_us);
  if (slices.empty()) origin = 0;

  json events = json::array();
  addProcessNames(db, run, events);
  addTracks(laneSlices(std::move(slices)), origin, events);
  OutputFile out(path);
  out.write(json{{"traceEvents", std::move(events)},
                 {"displayTimeUnit", "ms"},
                 {"otherData", {{"run", run.id}, {"name", run.name}, {"strategy", run.strategy}}}}
                .dump() +
            '\n');
  out.close();
  return count;
}

}  // namespace ringmaster::storage
