// The run list and a run's records, read with prepared statements.
#include "query/runs.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <regex>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/display_text.h"
#include "core/error.h"
#include "db/series_summary.h"
#include "db/statement.h"
#include "db/step_columns.h"
#include "db/step_rollups.h"

namespace ringmaster::storage {

namespace {

constexpr const char* kRunColumns =
    "id, name, spec, strategy, world_size, status, created_at, started_at, ended_at, error, "
    "error_rank, error_host, detached, note, (SELECT json_group_array(tag) FROM (SELECT tag FROM "
    "run_tags WHERE run_id = runs.id ORDER BY tag)), mesh_dp, mesh_tp, mesh_pp, scheduler, "
    "scheduler_job_id, scheduler_state, scheduler_reason, scheduler_nodes";

std::vector<std::string> tagsFromJson(const std::string& text) {
  std::vector<std::string> tags;
  const nlohmann::json array = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!array.is_array()) return tags;
  for (const nlohmann::json& tag : array)
    if (tag.is_string()) tags.push_back(tag.get<std::string>());
  return tags;
}

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
  run.note = row.optionalText(13);
  run.tags = tagsFromJson(row.columnText(14));
  run.mesh = {.dp = static_cast<int>(row.columnInt(15)),
              .tp = static_cast<int>(row.columnInt(16)),
              .pp = static_cast<int>(row.columnInt(17))};
  if (!row.isNull(18))
    run.scheduler = SchedulerJob{.kind = row.columnText(18),
                                 .job_id = row.columnText(19),
                                 .state = row.columnText(20),
                                 .reason = row.columnText(21),
                                 .nodes = row.columnText(22)};
  return run;
}

// A spec field path ("optimizer.lr", "strategy.mesh[0]") as an SQLite JSON path, each key quoted.
std::string specJsonPath(const std::string& path) {
  static const std::regex kPath(
      R"(([A-Za-z_][A-Za-z0-9_-]*(\[[0-9]{1,9}\])*)(\.[A-Za-z_][A-Za-z0-9_-]*(\[[0-9]{1,9}\])*)*)");
  if (path.size() > 256 || !std::regex_match(path, kPath))
    RM_THROW(kInvalidArgument,
             fmt::format("spec field '{}': expected a path of keys such as optimizer.lr or "
                         "strategy.mesh[0]",
                         path.substr(0, 256)));
  std::string json_path = "$";
  static const std::regex kSegment(R"(([A-Za-z_][A-Za-z0-9_-]*)((\[[0-9]+\])*))");
  for (auto it = std::sregex_iterator(path.begin(), path.end(), kSegment);
       it != std::sregex_iterator(); ++it)
    json_path += fmt::format(".\"{}\"{}", (*it)[1].str(), (*it)[2].str());
  return json_path;
}

// Binds a spec field's value as what it reads as: a finite number, a boolean, else text.
void bindSpecValue(Statement& select, int index, const std::string& value) {
  if (value == "true" || value == "false") {
    select.bind(index, int64_t{value == "true"});
    return;
  }
  char* end = nullptr;
  const double number = std::strtod(value.c_str(), &end);
  if (!value.empty() && end == value.c_str() + value.size() && std::isfinite(number) &&
      !std::isspace(static_cast<unsigned char>(value.front())))
    select.bind(index, number);
  else
    select.bind(index, value);
}

}  // namespace

double RunRecord::durationSeconds() const {
  if (!started_at) return 0;
  const double end = ended_at.value_or(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  return std::max(0.0, end - *started_at);
}

std::vector<RunRecord> listRuns(const Database& db, const RunFilter& filter) {
  // Each condition binds its own numbered parameters, so the SQL holds no text of the filter.
  std::string where = "1";
  int next = 6;
  const auto parameter = [&next] { return next++; };
  for (size_t i = 0; i < filter.words.size(); ++i) {
    const int p = parameter();
    where += fmt::format(
        " AND (instr(lower(name), lower(?{0})) > 0 OR instr(lower(coalesce(note, '')), "
        "lower(?{0})) > 0 OR EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = runs.id AND "
        "instr(lower(t.tag), lower(?{0})) > 0))",
        p);
  }
  for (size_t i = 0; i < filter.tags.size(); ++i)
    where += fmt::format(
        " AND EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = runs.id AND t.tag = ?{})",
        parameter());
  if (filter.note_contains)
    where += fmt::format(" AND instr(lower(coalesce(note, '')), lower(?{})) > 0", parameter());
  std::vector<std::string> json_paths;
  for (const SpecFieldMatch& field : filter.spec_fields) {
    json_paths.push_back(specJsonPath(field.path));
    const int p = parameter();
    where += fmt::format(" AND (CASE WHEN json_valid(spec) THEN json_extract(spec, ?{}) END) = ?{}",
                         p, parameter());
  }
  Statement select(db, fmt::format("SELECT {} FROM runs WHERE (?1 IS NULL OR instr(name, ?1) > 0) "
                                   "AND (?2 IS NULL OR strategy = ?2) AND (?3 IS NULL OR status = "
                                   "?3) AND (?4 IS NULL OR created_at >= ?4) AND (?5 IS NULL OR "
                                   "created_at < ?5) AND {} ORDER BY created_at DESC, id DESC "
                                   "LIMIT ?{}",
                                   kRunColumns, where, next));
  select.bind(1, filter.name_contains).bind(2, filter.strategy).bind(3, filter.status);
  select.bind(4, filter.created_after).bind(5, filter.created_before).bind(next, filter.limit);
  int index = 6;
  for (const std::string& word : filter.words) select.bind(index++, word);
  for (const std::string& tag : filter.tags) select.bind(index++, tag);
  if (filter.note_contains) select.bind(index++, *filter.note_contains);
  for (size_t i = 0; i < filter.spec_fields.size(); ++i) {
    select.bind(index++, json_paths[i]);
    bindSpecValue(select, index++, filter.spec_fields[i].value);
  }
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
                   "status, coord_dp, coord_tp, coord_pp FROM ranks WHERE run_id = ?1 AND attempt "
                   "= (SELECT max(attempt) FROM ranks WHERE run_id = ?1) ORDER BY rank");
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
    if (!select.isNull(9) && !select.isNull(10) && !select.isNull(11)) {
      ranks.back().coords = MeshAxes{.dp = static_cast<int>(select.columnInt(9)),
                                     .tp = static_cast<int>(select.columnInt(10)),
                                     .pp = static_cast<int>(select.columnInt(11))};
    }
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
  // A metric has a series in the run when it has rollups there (every point is in a bucket of
  // every width, kRollupWidths; migrations 2 and 4 filled the wider ones from the 64-step ones).
  // A custom metric's: one primary-key seek per known name. Reading the run's rollups instead, as
  // a DISTINCT over width = 4096 did, scans every width's rows of every series (width follows rank
  // in the key): 16M rows, seconds, for 64 ranks x 1M steps, on every series request of the web
  // API. The step columns': one pass over the run's widest rows (width leads rank in that key),
  // 15,600 rows for 64 ranks x 1M steps.
  Statement custom(db,
                   "SELECT name FROM metrics AS m WHERE EXISTS (SELECT 1 FROM scalar_rollups "
                   "WHERE run_id = ? AND metric_id = m.id)");
  custom.bind(1, run_id);
  std::vector<std::string> names;
  while (custom.run()) names.push_back(custom.columnText(0));
  std::vector<std::string> present;
  for (std::string_view column : kStepColumns)
    present.push_back(fmt::format("max({} > 0)", stepRollupColumn(column, "n")));
  Statement steps(db, fmt::format("SELECT {} FROM step_rollups WHERE run_id = ? AND width = ?",
                                  fmt::join(present, ", ")));
  steps.bind(1, run_id).bind(2, kRollupWidths[std::size(kRollupWidths) - 1]);
  if (steps.run()) {
    for (size_t i = 0; i < kStepColumns.size(); ++i)
      if (!steps.isNull(static_cast<int>(i)) && steps.columnInt(static_cast<int>(i)) != 0)
        names.emplace_back(kStepColumns[i]);
    steps.reset();
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
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
