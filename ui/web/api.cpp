// The JSON API: routing of the path below /api/v1, parameter checking (every refusal names the
// parameter) and the documents built from storage/query's results.
#include "api.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "charts/chart_table.h"
#include "core/error.h"
#include "db/statement.h"
#include "query/bubble_split.h"
#include "query/comm_by_dimension.h"
#include "query/comm_stats.h"
#include "query/compare_axes.h"
#include "query/evals.h"
#include "query/figures.h"
#include "query/hang.h"
#include "query/run_report.h"
#include "query/run_search.h"
#include "query/runs.h"
#include "query/schedule.h"
#include "query/series.h"
#include "query/summary.h"
#include "query/sweep_report.h"
#include "query/sweeps.h"
#include "spec/job_spec.h"
#include "spec/strategies/pipeline_schedule.h"
#include "telemetry/fields.h"

namespace ringmaster::web {

namespace {

using nlohmann::json;
using namespace ringmaster::storage;

constexpr int64_t kMaxStep = std::numeric_limits<int64_t>::max();

json optionalJson(const auto& value) {
  return value ? json(*value) : json(nullptr);
}

// A number as JSON: NaN and infinities (a hand-edited database) become null.
json number(double value) {
  return std::isfinite(value) ? json(value) : json(nullptr);
}

[[noreturn]] void badParameter(std::string_view name, std::string_view message) {
  throw ApiError(400, fmt::format("{}: {}", name, message));
}

// Shown back in an error message: at most 64 characters, control characters as '?'.
std::string shown(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 64)) out += static_cast<unsigned char>(c) < 0x20 ? '?' : c;
  if (text.size() > 64) out += "...";
  return out;
}

std::optional<std::string> parameter(const QueryParams& params, const std::string& name) {
  const auto found = params.find(name);
  if (found == params.end()) return std::nullopt;
  return found->second;
}

std::optional<int64_t> parseInteger(std::string_view text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// An integer parameter in [low, high]; `fallback` when absent.
int64_t integerParameter(const QueryParams& params, const std::string& name, int64_t low,
                         int64_t high, int64_t fallback) {
  const std::optional<std::string> text = parameter(params, name);
  if (!text) return fallback;
  const std::optional<int64_t> value = parseInteger(*text);
  if (!value || *value < low || *value > high)
    badParameter(name,
                 fmt::format("expected an integer in {}..{}, got '{}'", low, high, shown(*text)));
  return *value;
}

std::optional<std::string> textParameter(const QueryParams& params, const std::string& name,
                                         const ApiLimits& limits) {
  std::optional<std::string> text = parameter(params, name);
  if (text && text->size() > limits.max_text_parameter)
    badParameter(name, fmt::format("at most {} characters", limits.max_text_parameter));
  return text;
}

std::optional<std::string> choiceParameter(const QueryParams& params, const std::string& name,
                                           const std::vector<std::string>& choices) {
  std::optional<std::string> text = parameter(params, name);
  if (text && std::find(choices.begin(), choices.end(), *text) == choices.end())
    badParameter(
        name, fmt::format("expected one of {}, got '{}'", fmt::join(choices, ", "), shown(*text)));
  return text;
}

bool runExists(const Database& db, int64_t run_id) {
  Statement query(db, "SELECT 1 FROM runs WHERE id = ?");
  query.bind(1, run_id);
  const bool found = query.run();
  query.reset();
  return found;
}

int64_t runIdOf(const Database& db, std::string_view segment) {
  const std::optional<int64_t> id = parseInteger(segment);
  if (!id || *id < 1)
    throw ApiError(400,
                   fmt::format("run id: expected a positive integer, got '{}'", shown(segment)));
  if (!runExists(db, *id)) throw ApiError(404, fmt::format("no run {}", *id));
  return *id;
}

json parsedOrNull(const std::string& text) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? json(nullptr) : parsed;
}

// The clock a running run's hang view is judged by.
double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// --- /runs ---------------------------------------------------------------------------------------

// Issue 33, colour by a spec field: the fields the listed runs' specs have (those that differ
// first), and with colour_by=PATH each run's group, its index in "groups" (the field's distinct
// values) or null where the run's spec lacks it.
void addSpecGroups(json& document, const std::vector<RunRecord>& records,
                   const std::optional<std::string>& colour_by) {
  std::vector<json> specs;
  for (const RunRecord& run : records) specs.push_back(specOnlyReport(run.spec_json));
  const AxisChoices choices = axisChoices(specs);
  document["spec_fields"] = choices.spec_fields;
  if (!colour_by || colour_by->empty()) return;
  if (std::find(choices.spec_fields.begin(), choices.spec_fields.end(), *colour_by) ==
      choices.spec_fields.end())
    badParameter("colour_by", fmt::format("no listed run's spec has '{}'", shown(*colour_by)));
  const ComparisonAxis groups = comparisonAxis(specs, *colour_by);
  document["groups"] = groups.categories;
  for (size_t i = 0; i < records.size(); ++i) {
    const int category = groups.points[i].category;
    document["runs"][i]["group"] = category < 0 ? json(nullptr) : json(category);
  }
}

// Issue 37: a run started for a sweep has "sweep": {"id", "position"} (no key for other runs), so
// the runs list links it to its sweep's page.
json withSweep(const Database& db, json entry, int64_t run_id) {
  if (const std::optional<SweepMembership> member = sweepOfRun(db, run_id))
    entry["sweep"] = {{"id", member->sweep_id}, {"position", member->position}};
  return entry;
}

json runsList(const Database& db, const QueryParams& params, const ApiLimits& limits) {
  RunFilter filter;
  filter.status = choiceParameter(
      params, "status", {"pending", "running", "completed", "failed", "cancelled", "interrupted"});
  const std::vector<std::string> strategies = strategyLabels();
  filter.strategy = choiceParameter(params, "strategy", strategies);
  filter.name_contains = textParameter(params, "name", limits);
  filter.limit = static_cast<int>(integerParameter(params, "limit", 1, 10000, 1000));
  const std::optional<std::string> colour_by = textParameter(params, "colour_by", limits);
  if (const std::optional<std::string> q = textParameter(params, "q", limits)) {
    // The search line (query/run_search.h); the parameters above narrow it further.
    RunSearch search = parseRunSearch(*q, now());
    if (!search.problems.empty())
      badParameter("q", fmt::format("{}", fmt::join(search.problems, "; ")));
    search.filter.limit = filter.limit;
    if (filter.status) search.filter.status = filter.status;
    if (filter.strategy) search.filter.strategy = filter.strategy;
    if (filter.name_contains) search.filter.name_contains = filter.name_contains;
    filter = std::move(search.filter);
  }
  const std::vector<RunRecord> records = listRuns(db, filter);
  json runs = json::array();
  for (const RunRecord& run : records) runs.push_back(withSweep(db, runListEntry(db, run), run.id));
  json document = {{"runs", runs}};
  addSpecGroups(document, records, colour_by);
  return document;
}

// --- /runs/ID ------------------------------------------------------------------------------------

// The run's report (query/run_report.h), as `ringmaster show --json` writes it.
json runDetail(const Database& db, int64_t run_id) {
  return toJson(buildRunReport(db, run_id, now()));
}

// --- /runs/ID/series -----------------------------------------------------------------------------

SeriesRange rangeParameters(const QueryParams& params, const ApiLimits& limits) {
  SeriesRange range;
  range.from_step = integerParameter(params, "from", 0, kMaxStep, 0);
  range.to_step = integerParameter(params, "to", 0, kMaxStep, kMaxStep);
  if (range.to_step < range.from_step)
    badParameter("to",
                 fmt::format("must not be below from ({} < {})", range.to_step, range.from_step));
  range.buckets = static_cast<int>(integerParameter(params, "buckets", 1, limits.max_buckets,
                                                    std::min(1000, limits.max_buckets)));
  return range;
}

json bucketsJson(const Series& series) {
  json buckets = json::array();
  for (const SeriesBucket& bucket : series.buckets)
    buckets.push_back({bucket.start, number(bucket.summary.min), number(bucket.summary.max),
                       number(bucket.summary.mean()), number(bucket.summary.last_value)});
  return buckets;
}

json series(const Database& db, int64_t run_id, const QueryParams& params,
            const ApiLimits& limits) {
  const RunRecord run = loadRun(db, run_id);
  const std::vector<std::string> metrics = metricNames(db, run_id);
  const std::optional<std::string> metric = parameter(params, "metric");
  if (!metric) badParameter("metric", "required (one of the run's metrics)");
  if (std::find(metrics.begin(), metrics.end(), *metric) == metrics.end())
    badParameter("metric", fmt::format("the run has no metric '{}' (it has: {})", shown(*metric),
                                       fmt::join(metrics, ", ")));
  const SeriesRange range = rangeParameters(params, limits);
  const std::string ranks = parameter(params, "ranks").value_or("all");
  if (ranks == "band") {
    const Band band = loadRankBand(db, run_id, *metric, range);
    json buckets = json::array();
    for (const BandBucket& bucket : band.buckets)
      buckets.push_back(
          {bucket.start, number(bucket.min), number(bucket.median), number(bucket.max)});
    return {{"metric", *metric}, {"bucket_width", band.bucket_width}, {"band", buckets}};
  }
  std::vector<int> wanted;
  if (ranks == "all") {
    for (int rank = 0; rank < run.world_size; ++rank) wanted.push_back(rank);
  } else {
    std::string_view rest = ranks;
    while (true) {
      const size_t comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      const std::optional<int64_t> rank = parseInteger(item);
      if (!rank || *rank < 0 || *rank >= run.world_size)
        badParameter("ranks", fmt::format("expected all, band or ranks in 0..{} separated by "
                                          "commas, got '{}'",
                                          run.world_size - 1, shown(ranks)));
      if (std::find(wanted.begin(), wanted.end(), *rank) == wanted.end())
        wanted.push_back(static_cast<int>(*rank));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  json out_ranks = json::array();
  int64_t width = 1;
  for (int rank : wanted) {
    const Series one = loadSeries(db, run_id, *metric, rank, range);
    width = std::max(width, one.bucket_width);
    out_ranks.push_back({{"rank", rank}, {"buckets", bucketsJson(one)}});
  }
  return {{"metric", *metric}, {"bucket_width", width}, {"ranks", out_ranks}};
}

// --- /runs/ID/comm -------------------------------------------------------------------------------

json comm(const Database& db, int64_t run_id) {
  json by_op = json::array();
  for (const CommOpStats& op : commStatsByOp(db, run_id)) by_op.push_back(toJson(op));
  json by_rank = json::array();
  for (const RankCommStats& rank : commStatsByRank(db, run_id)) by_rank.push_back(toJson(rank));
  return {{"by_op", by_op}, {"by_rank", by_rank}};
}

// Exposed communication per rank and step bucket, as the desktop's heat map: each rank's
// exposed_comm_ms series on one grid, the mean per bucket (null where a rank has no point).
json commHeatmap(const Database& db, int64_t run_id, const QueryParams& params,
                 const ApiLimits& limits) {
  const RunRecord run = loadRun(db, run_id);
  SeriesRange range = rangeParameters(params, limits);
  if (!parameter(params, "buckets")) range.buckets = std::min(200, limits.max_buckets);
  std::vector<Series> per_rank;
  int64_t width = 1;
  for (int rank = 0; rank < run.world_size; ++rank) {
    per_rank.push_back(loadSeries(db, run_id, step_field::kExposedCommMs, rank, range));
    width = std::max(width, per_rank.back().bucket_width);
  }
  std::map<int64_t, size_t> column;
  for (const Series& one : per_rank)
    for (const SeriesBucket& bucket : one.buckets) column.emplace(bucket.start / width * width, 0);
  json starts = json::array();
  for (auto& [start, index] : column) {
    index = starts.size();
    starts.push_back(start);
  }
  json values = json::array();
  for (const Series& one : per_rank) {
    json row = json::array();
    for (size_t i = 0; i < column.size(); ++i) row.push_back(nullptr);
    for (const SeriesBucket& bucket : one.buckets)
      row[column[bucket.start / width * width]] = number(bucket.summary.mean());
    values.push_back(std::move(row));
  }
  return {{"metric", step_field::kExposedCommMs},
          {"bucket_width", width},
          {"bucket_starts", starts},
          {"values", values}};
}

// Transfer time per step in each collective op over steps, as the desktop's "communication time
// by op" chart: storage::commTimeByOp, the mean over ranks unless `rank` names one (the desktop's
// band mode is that mean too).
json commSeries(const Database& db, int64_t run_id, const QueryParams& params,
                const ApiLimits& limits) {
  const RunRecord run = loadRun(db, run_id);
  const SeriesRange range = rangeParameters(params, limits);
  std::optional<int> rank;
  if (parameter(params, "rank"))
    rank = static_cast<int>(integerParameter(params, "rank", 0, run.world_size - 1, 0));
  const CommTimeByOp by_op =
      commTimeByOp(db, run_id, range.from_step, range.to_step, range.buckets, rank);
  json ops = json::array();
  for (const OpTimeSeries& op : by_op.ops) {
    json buckets = json::array();
    for (const OpTimeBucket& bucket : op.buckets)
      buckets.push_back({bucket.start, number(bucket.ms_per_step)});
    ops.push_back({{"op", op.op}, {"buckets", buckets}});
  }
  return {{"rank", optionalJson(rank)}, {"bucket_width", by_op.bucket_width}, {"ops", ops}};
}

// --- /runs/ID/logs, /runs/ID/flight-recorder -----------------------------------------------------

json logs(const Database& db, int64_t run_id, const QueryParams& params, const ApiLimits& limits) {
  const RunRecord run = loadRun(db, run_id);
  std::optional<int> rank;
  if (parameter(params, "rank"))
    rank = static_cast<int>(integerParameter(params, "rank", 0, run.world_size - 1, 0));
  const std::optional<std::string> level =
      choiceParameter(params, "level", {"debug", "info", "warn", "error"});
  const std::optional<std::string> contains = textParameter(params, "contains", limits);
  const int limit =
      static_cast<int>(integerParameter(params, "limit", 1, limits.max_log_lines, 1000));
  // Filtering by level or text looks through more lines than it returns, within a bound.
  const bool filtered = level || contains;
  const std::vector<LogLine> lines =
      loadLogs(db, run_id, rank, filtered ? limits.max_log_lines * 10 : limit);
  json out = json::array();
  for (const LogLine& line : lines) {
    if (level && line.level != *level) continue;
    if (contains && line.message.find(*contains) == std::string::npos) continue;
    out.push_back({{"t", line.t},
                   {"rank", optionalJson(line.rank)},
                   {"level", line.level},
                   {"message", line.message}});
  }
  if (out.size() > static_cast<size_t>(limit))
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(out.size() - limit));
  return {{"logs", out}};
}

json flightRecorder(const Database& db, int64_t run_id) {
  json dumps = json::array();
  for (const FlightRecorderDump& dump : loadFlightRecorderDumps(db, run_id))
    dumps.push_back(
        {{"rank", dump.rank}, {"t", dump.t}, {"records", parsedOrNull(dump.dump_json)}});
  return {{"dumps", dumps}};
}

// --- /runs/ID/schedule ---------------------------------------------------------------------------

// The engine's schedule played with unit costs, as the job editor and the desktop pipeline view
// show it; null for a run that is no engine pipeline run.
json plannedSchedule(const RunRecord& run) {
  const SpecParseResult parsed = parseJobSpec(run.spec_json);
  if (!parsed.ok() || parsed.spec->program || stageCount(*parsed.spec) == 1) return nullptr;
  const JobSpec& spec = *parsed.spec;
  const int ranks = spec.strategy.mesh.pp;
  const PipelineSchedule kind = spec.strategy.pipeline.schedule;
  const int virtual_stages = spec.strategy.pipeline.virtual_stages;
  const int micro_batches = spec.train.micro_batches;
  const PipelinePlan plan = makePipelinePlan(ranks, micro_batches, kind, virtual_stages);
  const ScheduleTimeline timeline = simulateSchedule(plan);
  json actions = json::array();
  for (const auto& per_rank : timeline.per_rank)
    for (const TimedAction& timed : per_rank)
      actions.push_back({{"rank", timed.rank},
                         {"micro_batch", timed.action.micro_batch},
                         {"chunk", timed.action.chunk},
                         {"phase", std::string(1, phaseLetter(timed.action.phase))},
                         {"start", timed.start},
                         {"end", timed.end}});
  return {{"time_unit", "units"},
          {"ranks", ranks},
          {"actions", actions},
          {"rank_bubble", timeline.bubble_fraction},
          {"bubble_fraction", number(timeline.bubbleFraction())},
          {"theoretical_bubble",
           number(theoreticalBubbleFraction(kind, ranks, micro_batches, virtual_stages))}};
}

// Issue 33: the shown step's bubble split ("split", null without one) and the planned schedule
// replayed with that step's measured stage costs ("replayed": its actions in µs from the first and
// each rank's bubble, null without a split).
void addReplayedSchedule(json& document, const RunRecord& run,
                         const std::optional<StepSchedule>& step) {
  document["split"] = nullptr;
  document["replayed"] = nullptr;
  const SpecParseResult parsed = parseJobSpec(run.spec_json);
  if (!step || !parsed.ok()) return;
  const std::optional<PipelinePlan> plan = pipelinePlanOf(*parsed.spec);
  if (!plan) return;
  const std::optional<BubbleSplit> split = splitBubble(*plan, {*step});
  if (!split) return;
  json actions = json::array();
  for (const auto& per_rank : split->replay.per_rank)
    for (const TimedAction& timed : per_rank)
      actions.push_back({{"rank", timed.rank},
                         {"micro_batch", timed.action.micro_batch},
                         {"chunk", timed.action.chunk},
                         {"phase", std::string(1, phaseLetter(timed.action.phase))},
                         {"start_us", number(timed.start)},
                         {"end_us", number(timed.end)}});
  document["split"] = toJson(*split);
  document["replayed"] = {{"actions", actions},
                          {"rank_bubble", split->replay.bubble_fraction},
                          {"bubble_fraction", number(split->replayed)}};
}

json schedule(const Database& db, int64_t run_id, const QueryParams& params) {
  const RunRecord run = loadRun(db, run_id);
  const std::vector<int64_t> steps = scheduledSteps(db, run_id);
  json measured = nullptr;
  std::optional<StepSchedule> shown;
  if (!steps.empty() || parameter(params, "step")) {
    // Default: the second scheduled step (the first includes the warm-up), else the only one.
    const int64_t fallback = steps.empty() ? 0 : steps.size() > 1 ? steps[1] : steps.front();
    const int64_t step = integerParameter(params, "step", 0, kMaxStep, fallback);
    const std::optional<StepSchedule> loaded = loadStepSchedule(db, run_id, step);
    if (!loaded)
      badParameter("step", fmt::format("run {} has no schedule events at step {}", run_id, step));
    shown = loaded;
    json actions = json::array();
    for (const ScheduledAction& action : loaded->actions)
      actions.push_back({{"rank", action.rank},
                         {"stage", action.stage},
                         {"virtual_stage", action.virtual_stage},
                         {"micro_batch", action.micro_batch},
                         {"phase", std::string(1, action.phase)},
                         {"start_us", action.start_us},
                         {"ready_us", action.ready_us},
                         {"end_us", action.end_us},
                         {"transfer_us", action.transfer_us}});
    json ranks = json::array();
    for (const RankBubble& rank : loaded->ranks)
      ranks.push_back({{"rank", rank.rank},
                       {"busy_us", number(rank.busy_us)},
                       {"transfer_us", number(rank.transfer_us)},
                       {"wait_us", number(rank.wait_us)},
                       {"bubble_fraction", number(rank.bubble_fraction)}});
    measured = {{"step", loaded->step},     {"start_us", loaded->start_us},
                {"end_us", loaded->end_us}, {"actions", actions},
                {"ranks", ranks},           {"bubble_fraction", number(loaded->bubble_fraction)}};
  }
  json document = {{"measured", measured},
                   {"planned", plannedSchedule(run)},
                   {"mean_bubble_fraction", optionalJson(meanBubbleFraction(db, run_id))}};
  addReplayedSchedule(document, run, shown);
  return document;
}

// --- /compare ------------------------------------------------------------------------------------

json compareAxes(const json& reports);

json compare(const Database& db, const QueryParams& params, const ApiLimits& limits) {
  const std::optional<std::string> text = parameter(params, "runs");
  const std::string expected =
      fmt::format("expected 1 to {} run ids separated by commas", limits.max_compare_runs);
  if (!text) badParameter("runs", expected);
  std::vector<int64_t> ids;
  std::string_view rest = *text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::optional<int64_t> id = parseInteger(rest.substr(0, comma));
    if (!id || *id < 1) badParameter("runs", fmt::format("{}, got '{}'", expected, shown(*text)));
    ids.push_back(*id);
    if (ids.size() > static_cast<size_t>(limits.max_compare_runs))
      badParameter("runs", fmt::format("{}, got more", expected));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  for (int64_t id : ids)
    if (!runExists(db, id)) throw ApiError(404, fmt::format("no run {}", id));
  const RunComparison comparison = compareRuns(db, ids);
  json runs = json::array();
  for (const RunSummary& summary : comparison.runs)
    runs.push_back(toJson(buildRunReport(db, summary.run.id, now())));
  json differences = json::array();
  for (const SpecDifference& difference : comparison.differences)
    differences.push_back({{"path", difference.path}, {"values", difference.values}});
  // What may be overlaid: every metric of any of the runs (issue 33), with its chart's title.
  std::vector<std::vector<std::string>> per_run;
  for (const json& run : runs) per_run.push_back(run["metrics"].get<std::vector<std::string>>());
  json metrics = json::array();
  for (const std::string& metric : ui::comparableMetrics(per_run))
    metrics.push_back({{"key", metric}, {"title", ui::metricTitle(metric)}});
  return {{"runs", runs},
          {"spec_differences", differences},
          {"metrics", metrics},
          {"axes", compareAxes(runs)}};
}

// Issue 33: every axis a scatter of the compared runs can take, with each run's value (any run
// figure, then the spec fields, those whose values differ first): {"choices", "axes": {KEY: axis}}.
json compareAxes(const json& reports) {
  const std::vector<json> list(reports.begin(), reports.end());
  const AxisChoices choices = axisChoices(list);
  json axes = json::object();
  for (const auto* keys : {&choices.figures, &choices.spec_fields})
    for (const std::string& key : *keys) axes[key] = toJson(comparisonAxis(list, key));
  return {{"figures", choices.figures},
          {"spec_fields", choices.spec_fields},
          {"differing_fields", choices.differing_fields},
          {"values", axes}};
}

// --- /sweeps (issue 37) -------------------------------------------------------------------------

// GET /sweeps: the sweeps, newest first (at most `limit`), with how many of their members there are
// and have ended.
json sweepsList(const Database& db, const QueryParams& params) {
  const int64_t limit = integerParameter(params, "limit", 1, 10000, 1000);
  json sweeps = json::array();
  for (const SweepRecord& sweep : listSweeps(db)) {
    if (static_cast<int64_t>(sweeps.size()) == limit) break;
    sweeps.push_back({{"id", sweep.id},
                      {"name", sweep.name},
                      {"spec_path", sweep.spec_path},
                      {"status", sweep.status},
                      {"members", sweep.members.size()},
                      {"ended", sweep.membersEnded()},
                      {"created_at", sweep.created_at},
                      {"ended_at", optionalJson(sweep.ended_at)}});
  }
  return {{"sweeps", sweeps}};
}

int64_t sweepIdOf(const Database& db, std::string_view segment) {
  const std::optional<int64_t> id = parseInteger(segment);
  if (!id || *id < 1)
    throw ApiError(400,
                   fmt::format("sweep id: expected a positive integer, got '{}'", shown(segment)));
  Statement query(db, "SELECT 1 FROM sweeps WHERE id = ?");
  query.bind(1, *id);
  const bool found = query.run();
  query.reset();
  if (!found) throw ApiError(404, fmt::format("no sweep {}", *id));
  return *id;
}

// GET /runs/ID/sweep: the sweep the run was started for, for the run page's link to it:
// {"sweep": {"id", "name", "position", "members"}}, or {"sweep": null} for a run of no sweep.
json sweepOfRunDocument(const Database& db, int64_t run_id) {
  const std::optional<SweepMembership> member = sweepOfRun(db, run_id);
  if (!member) return {{"sweep", nullptr}};
  const SweepRecord sweep = loadSweep(db, member->sweep_id);
  return {{"sweep",
           {{"id", sweep.id},
            {"name", sweep.name},
            {"position", member->position},
            {"members", sweep.members.size()}}}};
}

// GET /sweeps/ID?by=FIGURE: the sweep's report (query/sweep_report.h), its best run by `by`, a run
// figure of the table of figures (default final_loss).
json sweepDetail(const Database& db, int64_t sweep_id, const QueryParams& params) {
  std::vector<std::string> run_figures;
  for (const Figure& figure : figureTable())
    if (isRunFigure(figure)) run_figures.emplace_back(figure.id);
  const std::optional<std::string> by = choiceParameter(params, "by", run_figures);
  return sweepReport(db, sweep_id, now(), by.value_or(""));
}

// GET /charts: the chart table (ui/charts/chart_table.h), every chart; with run=ID, the charts
// that run shows (those that apply, and one per metric of its own, each with its panel).
json charts(const Database& db, const QueryParams& params) {
  std::vector<ui::ChartSpec> shown;
  if (parameter(params, "run")) {
    const int64_t run_id = integerParameter(params, "run", 1, kMaxStep, 0);
    if (!runExists(db, run_id)) throw ApiError(404, fmt::format("no run {}", run_id));
    shown = ui::chartsFor({.metrics = metricNames(db, run_id)});
  } else {
    shown = ui::chartTable();
  }
  json list = json::array();
  for (const ui::ChartSpec& chart : shown) {
    json metrics = json::array();
    for (const ui::ChartMetric& metric : chart.metrics)
      metrics.push_back({{"key", metric.key}, {"label", metric.label}});
    list.push_back(
        {{"id", chart.id},
         {"title", chart.title},
         {"unit", chart.unit},
         {"source", chart.source == ui::ChartSource::kCommByOp ? "comm_by_op" : "step_metrics"},
         {"metrics", metrics},
         {"every_rank", ui::everyRankName(chart.every_rank)},
         {"validation_loss", chart.validation_loss},
         {"applies_when", ui::conditionName(chart.applies_when)},
         {"panel", chart.panel}});
  }
  return {{"charts", list}, {"default_panel", ui::kDefaultPanelTitle}};
}

// GET /figures: the table of figures (storage/query/figures.h), the one name of every number of
// the run report, for the pages to name them as the desktop and the CLI do.
json figures() {
  json list = json::array();
  for (const Figure& figure : figureTable())
    list.push_back({{"id", figure.id},
                    {"name", figure.name},
                    {"unit", figure.unit},
                    {"kind", figureKindName(figure.kind)},
                    {"scope", figureScopeName(figure.scope)},
                    {"description", figure.description}});
  return {{"figures", list}};
}

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    if (path.front() == '/') {
      path.remove_prefix(1);
      continue;
    }
    const size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash);
  }
  return out;
}

}  // namespace

json runListEntry(const Database& db, int64_t run_id) {
  return withSweep(db, storage::runListEntry(db, loadRun(db, run_id)), run_id);
}

json handleApi(const Database& db, std::string_view path, const QueryParams& params,
               const ApiLimits& limits) {
  const std::vector<std::string_view> parts = segments(path);
  const auto unknown = [&]() -> json {
    throw ApiError(404, fmt::format("no such API path /api/v1{}", shown(path)));
  };
  if (parts.empty()) return unknown();
  if (parts[0] == "compare" && parts.size() == 1) return compare(db, params, limits);
  if (parts[0] == "charts" && parts.size() == 1) return charts(db, params);
  if (parts[0] == "figures" && parts.size() == 1) return figures();
  if (parts[0] == "sweeps" && parts.size() == 1) return sweepsList(db, params);
  if (parts[0] == "sweeps" && parts.size() == 2)
    return sweepDetail(db, sweepIdOf(db, parts[1]), params);
  if (parts[0] != "runs") return unknown();
  if (parts.size() == 1) return runsList(db, params, limits);
  const int64_t run_id = runIdOf(db, parts[1]);
  if (parts.size() == 2) return runDetail(db, run_id);
  const std::string_view what = parts[2];
  if (parts.size() == 3) {
    if (what == "series") return series(db, run_id, params, limits);
    if (what == "comm") return comm(db, run_id);
    if (what == "comm_dims") return toJson(commByDimension(db, run_id));
    if (what == "logs") return logs(db, run_id, params, limits);
    if (what == "flight-recorder") return flightRecorder(db, run_id);
    if (what == "schedule") return schedule(db, run_id, params);
    if (what == "sweep") return sweepOfRunDocument(db, run_id);
  }
  if (parts.size() == 4 && what == "comm" && parts[3] == "heatmap")
    return commHeatmap(db, run_id, params, limits);
  if (parts.size() == 4 && what == "comm" && parts[3] == "series")
    return commSeries(db, run_id, params, limits);
  if (parts.size() == 4 && what == "schedule" && parts[3] == "steps")
    return {{"steps", scheduledSteps(db, run_id)}};
  return unknown();
}

}  // namespace ringmaster::web
