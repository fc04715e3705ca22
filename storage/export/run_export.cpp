// CSV from SQL result columns, and the trace assembled from steps, comm events and sched events.
#include "export/run_export.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "db/statement.h"
#include "query/runs.h"

namespace ringmaster::storage {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::ofstream openForWriting(const fs::path& path) {
  std::ofstream out(path);
  if (!out) RM_THROW(kIo, fmt::format("cannot write {}", path.string()));
  return out;
}

// Writes every row of `sql` (parameter 1: the run id) with a header of its column names.
void writeCsv(const Database& db, int64_t run_id, const std::string& sql, const fs::path& path) {
  std::ofstream out = openForWriting(path);
  Statement select(db, sql);
  select.bind(1, run_id);
  const int columns = select.columnCount();
  for (int c = 0; c < columns; ++c) out << (c ? "," : "") << csvField(select.columnName(c));
  out << '\n';
  while (select.run()) {
    for (int c = 0; c < columns; ++c) {
      if (c) out << ',';
      switch (select.columnType(c)) {
        case SQLITE_NULL:
          break;
        case SQLITE_INTEGER:
          out << select.columnInt(c);
          break;
        case SQLITE_FLOAT:
          out << fmt::format("{}", select.columnDouble(c));
          break;
        default:
          out << csvField(select.columnText(c));
      }
    }
    out << '\n';
  }
  if (!out) RM_THROW(kIo, fmt::format("writing {} failed", path.string()));
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
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) RM_THROW(kIo, fmt::format("cannot create {}: {}", directory, error.message()));
  std::vector<std::string> written;
  {
    const fs::path path = fs::path(directory) / "run.json";
    std::ofstream out = openForWriting(path);
    json spec = json::parse(run.spec_json, nullptr, false);
    out << json{{"id", run.id},
                {"name", run.name},
                {"strategy", run.strategy},
                {"world_size", run.world_size},
                {"status", run.status},
                {"created_at", run.created_at},
                {"started_at", run.started_at ? json(*run.started_at) : json(nullptr)},
                {"ended_at", run.ended_at ? json(*run.ended_at) : json(nullptr)},
                {"error", run.error ? json(*run.error) : json(nullptr)},
                {"spec", spec.is_discarded() ? json(run.spec_json) : spec}}
               .dump(2)
        << '\n';
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
       "SELECT rank, attempt, step, stage, virtual_stage, micro_batch, phase, start_us, end_us "
       "FROM sched_events WHERE run_id = ? ORDER BY step, start_us, rank"},
      {"logs.csv", "SELECT rank, t, level, message FROM logs WHERE run_id = ? ORDER BY rowid"},
  };
  for (const auto& [name, sql] : tables) {
    const fs::path path = fs::path(directory) / name;
    writeCsv(db, run_id, sql, path);
    written.push_back(path.string());
  }
  return written;
}

int64_t exportRunTrace(const Database& db, int64_t run_id, const std::string& path) {
  const RunRecord run = loadRun(db, run_id);
  struct Slice {
    int rank;
    int track;  // 1 steps, 2 communication, 3 pipeline
    double start_us, duration_us;
    std::string name;
    json args;
  };
  std::vector<Slice> slices;
  {
    Statement steps(db,
                    "SELECT rank, step, wall_time_s, step_ms, loss FROM steps WHERE run_id = ? AND "
                    "wall_time_s IS NOT NULL AND step_ms IS NOT NULL");
    steps.bind(1, run_id);
    while (steps.run()) {
      const double end_us = steps.columnDouble(2) * 1e6;
      const double duration_us = steps.columnDouble(3) * 1e3;
      json args = {{"step", steps.columnInt(1)}};
      if (!steps.isNull(4)) args["loss"] = steps.columnDouble(4);
      slices.push_back({static_cast<int>(steps.columnInt(0)), 1, end_us - duration_us, duration_us,
                        fmt::format("step {}", steps.columnInt(1)), std::move(args)});
    }
  }
  {
    Statement comm(db,
                   "SELECT rank, t, duration_ms, op, bytes, algbw_gbps, busbw_gbps, step FROM "
                   "comm_events WHERE run_id = ?");
    comm.bind(1, run_id);
    while (comm.run()) {
      const double duration_us = comm.columnDouble(2) * 1e3;
      json args = {{"bytes", comm.columnInt(4)},
                   {"algbw_gbps", comm.columnDouble(5)},
                   {"busbw_gbps", comm.columnDouble(6)}};
      if (!comm.isNull(7)) args["step"] = comm.columnInt(7);
      slices.push_back({static_cast<int>(comm.columnInt(0)), 2,
                        comm.columnDouble(1) * 1e6 - duration_us, duration_us, comm.columnText(3),
                        std::move(args)});
    }
  }
  {
    Statement sched(db,
                    "SELECT rank, start_us, end_us, phase, micro_batch, stage, step FROM "
                    "sched_events WHERE run_id = ?");
    sched.bind(1, run_id);
    while (sched.run()) {
      slices.push_back({static_cast<int>(sched.columnInt(0)),
                        3,
                        static_cast<double>(sched.columnInt(1)),
                        static_cast<double>(sched.columnInt(2) - sched.columnInt(1)),
                        fmt::format("{}{}", sched.columnText(3), sched.columnInt(4)),
                        {{"stage", sched.columnInt(5)},
                         {"micro_batch", sched.columnInt(4)},
                         {"step", sched.columnInt(6)}}});
    }
  }
  double origin = std::numeric_limits<double>::infinity();
  for (const Slice& slice : slices) origin = std::min(origin, slice.start_us);
  if (slices.empty()) origin = 0;

  json events = json::array();
  const std::vector<RankRecord> ranks = loadRanks(db, run_id);
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
    const char* tracks[] = {"", "steps", "communication", "pipeline"};
    for (int track = 1; track <= 3; ++track) {
      events.push_back({{"ph", "M"},
                        {"pid", rank},
                        {"tid", track},
                        {"name", "thread_name"},
                        {"args", {{"name", tracks[track]}}}});
    }
  }
  for (Slice& slice : slices) {
    json event = {{"ph", "X"},
                  {"pid", slice.rank},
                  {"tid", slice.track},
                  {"name", std::move(slice.name)},
                  {"cat", slice.track == 1   ? "step"
                          : slice.track == 2 ? "comm"
                                             : "pipeline"},
                  {"ts", std::round((slice.start_us - origin) * 1000) / 1000},
                  {"dur", std::max(0.0, std::round(slice.duration_us * 1000) / 1000)},
                  {"args", std::move(slice.args)}};
    events.push_back(std::move(event));
  }
  std::ofstream out(path);
  if (!out) RM_THROW(kIo, fmt::format("cannot write {}", path));
  out << json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"otherData", {{"run", run.id}, {"name", run.name}, {"strategy", run.strategy}}}}
             .dump()
      << '\n';
  if (!out) RM_THROW(kIo, fmt::format("writing {} failed", path));
  return static_cast<int64_t>(slices.size());
}

}  // namespace ringmaster::storage
