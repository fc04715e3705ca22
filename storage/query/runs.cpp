// The run list and a run's records, read with prepared statements.
#include "query/runs.h"

#include <chrono>

#include <fmt/format.h>

#include "core/display_text.h"
#include "core/error.h"
#include "db/statement.h"

namespace ringmaster::storage {

namespace {

constexpr const char* kRunColumns =
    "id, name, spec, strategy, world_size, status, created_at, started_at, ended_at, error, "
    "error_rank, error_host, detached";

RunRecord readRun(const Statement& row) {
  RunRecord run;
  run.id = row.columnInt(0);
  run.name = row.columnText(1);
  run.spec_json = row.columnText(2);
  run.strategy = row.columnText(3);
  run.world_size = static_cast<int>(row.columnInt(4));
  run.status = row.columnText(5);
  run.created_at = row.columnDouble(6);
  run.started_at = row.optionalDouble(7);
  run.ended_at = row.optionalDouble(8);
  run.error = row.optionalText(9);
  if (auto rank = row.optionalInt(10)) run.error_rank = static_cast<int>(*rank);
  run.error_host = row.optionalText(11);
  run.detached = row.columnInt(12) != 0;
  return run;
}

}  // namespace

double RunRecord::durationSeconds() const {
  if (!started_at) return 0;
  const double end = ended_at.value_or(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  return std::max(0.0, end - *started_at);
}

std::vector<RunRecord> listRuns(const Database& db, const RunFilter& filter) {
  Statement select(db, fmt::format("SELECT {} FROM runs WHERE (?1 IS NULL OR instr(name, ?1) > 0) "
                                   "AND (?2 IS NULL OR strategy = ?2) AND (?3 IS NULL OR status = "
                                   "?3) AND (?4 IS NULL OR created_at >= ?4) AND (?5 IS NULL OR "
                                   "created_at < ?5) ORDER BY created_at DESC, id DESC LIMIT ?6",
                                   kRunColumns));
  select.bind(1, filter.name_contains).bind(2, filter.strategy).bind(3, filter.status);
  select.bind(4, filter.created_after).bind(5, filter.created_before).bind(6, filter.limit);
  std::vector<RunRecord> runs;
  while (select.run()) runs.push_back(readRun(select));
  return runs;
}

RunRecord loadRun(const Database& db, int64_t run_id) {
  Statement select(db, fmt::format("SELECT {} FROM runs WHERE id = ?", kRunColumns));
  select.bind(1, run_id);
  if (!select.run()) RM_THROW(kInvalidArgument, fmt::format("no run {} in {}", run_id, db.path()));
  RunRecord run = readRun(select);
  select.reset();
  return run;
}

std::vector<RankRecord> loadRanks(const Database& db, int64_t run_id) {
  Statement select(db,
                   "SELECT rank, attempt, host, device, device_name, version, pid, memory_total, "
                   "status FROM ranks WHERE run_id = ?1 AND attempt = (SELECT max(attempt) FROM "
                   "ranks WHERE run_id = ?1) ORDER BY rank");
  select.bind(1, run_id);
  std::vector<RankRecord> ranks;
  while (select.run()) {
    ranks.push_back(RankRecord{.rank = static_cast<int>(select.columnInt(0)),
                               .attempt = static_cast<int>(select.columnInt(1)),
                               .host = select.columnText(2),
                               .device = select.columnText(3),
                               .device_name = select.columnText(4),
                               .version = select.columnText(5),
                               .pid = select.columnInt(6),
                               .memory_total = select.columnUnsigned(7),
                               .status = select.optionalText(8)});
  }
  return ranks;
}

std::vector<AttemptRecord> loadAttempts(const Database& db, int64_t run_id) {
  Statement select(db,
                   "SELECT attempt, started_at, ended_at, first_step, last_step, error, "
                   "error_rank, error_host FROM attempts WHERE run_id = ? ORDER BY attempt");
  select.bind(1, run_id);
  std::vector<AttemptRecord> attempts;
  while (select.run()) {
    AttemptRecord attempt{.attempt = static_cast<int>(select.columnInt(0)),
                          .started_at = select.columnDouble(1),
                          .ended_at = select.optionalDouble(2),
                          .first_step = select.optionalInt(3),
                          .last_step = select.optionalInt(4),
                          .error = select.optionalText(5),
                          .error_host = select.optionalText(7)};
    if (const auto rank = select.optionalInt(6)) attempt.error_rank = static_cast<int>(*rank);
    attempts.push_back(std::move(attempt));
  }
  return attempts;
}

std::vector<LogLine> loadLogs(const Database& db, int64_t run_id, std::optional<int> rank,
                              int limit) {
  Statement select(db,
                   "SELECT rank, t, level, message FROM (SELECT rowid, rank, t, level, message "
                   "FROM logs WHERE run_id = ?1 AND (?2 IS NULL OR rank = ?2) ORDER BY rowid DESC "
                   "LIMIT ?3) ORDER BY rowid");
  select.bind(1, run_id).bind(2, rank).bind(3, limit);
  std::vector<LogLine> lines;
  while (select.run()) {
    LogLine line{.t = select.columnDouble(1),
                 .level = select.columnText(2),
                 .message = select.columnText(3)};
    if (auto r = select.optionalInt(0)) line.rank = static_cast<int>(*r);
    lines.push_back(std::move(line));
  }
  return lines;
}

LogPage loadLogsAfter(const Database& db, int64_t run_id, int64_t after_row,
                      const LogQuery& query) {
  Statement select(db,
                   "SELECT rowid, rank, t, level, message FROM logs WHERE run_id = ?1 AND rowid > "
                   "?2 AND (?3 IS NULL OR rank = ?3) AND (?4 IS NULL OR instr(message, ?4) > 0) "
                   "ORDER BY rowid LIMIT ?5");
  select.bind(1, run_id).bind(2, after_row).bind(3, query.rank).bind(4, query.containing);
  select.bind(5, query.limit);
  LogPage page{.last_row = after_row};
  while (select.run()) {
    page.last_row = select.columnInt(0);
    LogLine line{.t = select.columnDouble(2),
                 .level = select.columnText(3),
                 .message = select.columnText(4)};
    if (auto r = select.optionalInt(1)) line.rank = static_cast<int>(*r);
    page.lines.push_back(std::move(line));
  }
  return page;
}

namespace {

// `line` without a leading "[rank N] " naming `rank`.
std::string_view withoutRankPrefix(std::string_view line, int rank) {
  const std::string prefix = fmt::format("[rank {}] ", rank);
  return line.starts_with(prefix) ? line.substr(prefix.size()) : line;
}

// At most `bytes` bytes of `text`, cut at a UTF-8 character's boundary, "..." saying it was cut.
std::string cutAt(std::string_view text, size_t bytes) {
  if (text.size() <= bytes) return std::string(text);
  size_t end = bytes - 3;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end)) + "...";
}

}  // namespace

std::vector<std::string> loadErrorOutput(const Database& db, int64_t run_id, int attempt,
                                         int rank) {
  Statement select(db,
                   "SELECT message FROM logs WHERE run_id = ?1 AND rank = ?2 AND attempt = ?3 "
                   "AND level = 'stderr' ORDER BY rowid DESC LIMIT ?4");
  select.bind(1, run_id).bind(2, rank).bind(3, attempt).bind(4, kErrorOutputLines);
  std::vector<std::string> newest_first;
  size_t total = 0;
  while (select.run()) {
    const std::string message = select.columnText(0);
    std::string line =
        cutAt(displaySafeMessageLine(withoutRankPrefix(message, rank)), kErrorOutputLineBytes);
    total += line.size() + 1;
    if (total > kErrorOutputBytes) break;
    newest_first.push_back(std::move(line));
  }
  return {newest_first.rbegin(), newest_first.rend()};
}

ProblemLines loadProblemLines(const Database& db, int64_t run_id, int limit) {
  constexpr const char* kProblem = "run_id = ?1 AND level IN ('error', 'warn')";
  ProblemLines problems;
  Statement count(db, fmt::format("SELECT count(*) FROM logs WHERE {}", kProblem));
  count.bind(1, run_id);
  if (count.run()) problems.total = count.columnInt(0);
  Statement select(db,
                   fmt::format("SELECT rank, t, level, message FROM (SELECT rowid, rank, t, "
                               "level, message FROM logs WHERE {} ORDER BY rowid DESC LIMIT ?2) "
                               "ORDER BY rowid",
                               kProblem));
  select.bind(1, run_id).bind(2, limit);
  while (select.run()) {
    LogLine line{.t = select.columnDouble(1),
                 .level = select.columnText(2),
                 .message = select.columnText(3)};
    if (auto r = select.optionalInt(0)) line.rank = static_cast<int>(*r);
    problems.last.push_back(std::move(line));
  }
  return problems;
}

std::vector<FlightRecorderDump> loadFlightRecorderDumps(const Database& db, int64_t run_id) {
  Statement select(db,
                   "SELECT rank, t, dump FROM flight_recorder_dumps WHERE run_id = ? ORDER BY t");
  select.bind(1, run_id);
  std::vector<FlightRecorderDump> dumps;
  while (select.run()) {
    dumps.push_back(
        {static_cast<int>(select.columnInt(0)), select.columnDouble(1), select.columnText(2)});
  }
  return dumps;
}

std::vector<std::string> metricNames(const Database& db, int64_t run_id) {
  // One primary-key seek per known metric name: a metric has a series in the run when it has
  // rollups there (every point is in a bucket of every width, kRollupWidths; migrations 2 and 4
  // filled the wider ones from the 64-step ones). Reading the run's rollups instead, as a DISTINCT
  // over width = 4096 did, scans every width's rows of every series (width follows rank in the
  // key): 16M rows, seconds, for 64 ranks x 1M steps, on every series request of the web API.
  Statement select(db,
                   "SELECT name FROM metrics AS m WHERE EXISTS (SELECT 1 FROM scalar_rollups "
                   "WHERE run_id = ? AND metric_id = m.id) ORDER BY name");
  select.bind(1, run_id);
  std::vector<std::string> names;
  while (select.run()) names.push_back(select.columnText(0));
  return names;
}

IngestCounts loadIngestCounts(const Database& db, int64_t run_id) {
  Statement select(db,
                   "SELECT total(events_stored), total(events_duplicate), total(events_dropped), "
                   "total(lines_malformed) FROM attempts WHERE run_id = ?");
  select.bind(1, run_id);
  IngestCounts counts;
  if (select.run()) {
    counts = {select.columnInt(0), select.columnInt(1), select.columnInt(2), select.columnInt(3)};
    select.reset();
  }
  return counts;
}

}  // namespace ringmaster::storage
