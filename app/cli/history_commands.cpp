// Reports over the run database, as tables or JSON.
#include "cli/history_commands.h"

#include <cmath>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/terminal.h"
#include "core/display_text.h"
#include "exit_codes.h"
#include "query/comm_stats.h"
#include "query/evals.h"
#include "query/hang.h"
#include "query/schedule.h"
#include "query/series.h"
#include "query/summary.h"
#include "spec/job_spec.h"
#include "spec/memory_estimate.h"
#include "telemetry/fields.h"
#include "telemetry/writer.h"

namespace ringmaster::cli {

using namespace storage;
using nlohmann::json;

namespace {

json optionalJson(const auto& value) {
  return value ? json(*value) : json(nullptr);
}

json runJson(const RunRecord& run) {
  return {{"id", run.id},
          {"name", run.name},
          {"strategy", run.strategy},
          {"world_size", run.world_size},
          {"status", run.status},
          {"created_at", run.created_at},
          {"started_at", optionalJson(run.started_at)},
          {"ended_at", optionalJson(run.ended_at)},
          {"duration_s", run.durationSeconds()},
          {"error", optionalJson(run.error)},
          {"error_rank", optionalJson(run.error_rank)},
          {"error_host", optionalJson(run.error_host)}};
}

// The steps a restart rolled back: those of the attempt before `index` from where attempt `index`
// resumed on (it stored them again). Empty for the first attempt.
std::optional<std::pair<int64_t, int64_t>> rolledBack(const std::vector<AttemptRecord>& attempts,
                                                      size_t index) {
  if (index == 0 || !attempts[index].first_step || !attempts[index - 1].last_step) return {};
  const int64_t first = *attempts[index].first_step, last = *attempts[index - 1].last_step;
  if (last < first) return {};
  return std::pair(first, last);
}

json attemptsJson(const std::vector<AttemptRecord>& attempts) {
  json rows = json::array();
  for (size_t i = 0; i < attempts.size(); ++i) {
    const AttemptRecord& a = attempts[i];
    const auto rolled = rolledBack(attempts, i);
    rows.push_back(
        {{"attempt", a.attempt},
         {"started_at", a.started_at},
         {"ended_at", optionalJson(a.ended_at)},
         {"first_step", optionalJson(a.first_step)},
         {"last_step", optionalJson(a.last_step)},
         {"rolled_back", rolled ? json::array({rolled->first, rolled->second}) : json(nullptr)},
         {"error", optionalJson(a.error)},
         {"error_rank", optionalJson(a.error_rank)},
         {"error_host", optionalJson(a.error_host)}});
  }
  return rows;
}

// The live hang view of a running run: each diagnosis and each rank's latest progress report.
json hangJson(const LiveProgress& live) {
  json diagnoses = json::array();
  for (const HangDiagnosis& d : live.hangs) {
    diagnoses.push_back({{"group", d.group},
                         {"op", d.op},
                         {"seq", d.op_seq},
                         {"peer", optionalJson(d.peer)},
                         {"stuck", d.stuck},
                         {"silent", d.silent},
                         {"waiting", d.waiting},
                         {"waiting_s", d.waiting_s},
                         {"message", d.message}});
  }
  json ranks = json::array();
  for (const RankProgress& r : live.ranks) {
    const size_t i = static_cast<size_t>(r.rank);
    ranks.push_back({{"rank", r.rank},
                     {"group", r.group},
                     {"t", r.t},
                     {"age_s", r.age_s},
                     {"step", optionalJson(r.step)},
                     {"started", r.started},
                     {"completed", r.completed},
                     {"completed_op", optionalJson(r.completed_op)},
                     {"op", optionalJson(r.op)},
                     {"op_seq", optionalJson(r.op_seq)},
                     {"waiting_s", optionalJson(r.waiting_s)},
                     {"state", i < live.rank_states.size() ? live.rank_states[i] : ""}});
  }
  return {{"running", live.running}, {"diagnoses", diagnoses}, {"ranks", ranks}};
}

// The run's stored spec, parsed; nullopt when it does not parse (one written by another version).
std::optional<JobSpec> storedSpec(const std::string& spec_json) {
  SpecParseResult parsed = parseJobSpec(spec_json);
  return parsed.ok() ? std::move(parsed.spec) : std::nullopt;
}

// Each rank's estimated memory from the run's stored spec (spec/memory_estimate.h); none for a
// program job (issue 19: its script's model is not in the spec, and the engine's defaults are no
// estimate of it) or a spec that does not parse.
std::vector<double> rankEstimates(const std::optional<JobSpec>& spec) {
  std::vector<double> totals;
  if (!spec || spec->program) return totals;
  for (const RankMemoryEstimate& rank : estimateMemory(*spec)) totals.push_back(rank.total());
  return totals;
}

// The rank's estimated memory, or null.
json estimatedMemoryJson(const std::vector<double>& estimates, int rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= estimates.size()) return nullptr;
  return estimates[static_cast<size_t>(rank)];
}

// A program job's section in its canonical form (every default filled in), or null for an engine
// job.
json programJson(const std::optional<JobSpec>& spec) {
  if (!spec || !spec->program) return nullptr;
  return toJson(*spec)["program"];
}

json summaryJson(const RunSummary& summary) {
  const std::optional<JobSpec> spec = storedSpec(summary.run.spec_json);
  const std::vector<double> estimates = rankEstimates(spec);
  json ranks = json::array();
  for (const RankSummary& rank : summary.ranks) {
    ranks.push_back({{"rank", rank.rank},
                     {"last_step", rank.last_step},
                     {"samples_per_second", rank.samples_per_second},
                     {"mean_step_ms", rank.mean_step_ms},
                     {"peak_memory", rank.peak_memory},
                     {"tokens_per_second", optionalJson(rank.tokens_per_second)},
                     {"mfu", optionalJson(rank.mfu)},
                     {"lr", optionalJson(rank.lr)},
                     {"loss_scale", optionalJson(rank.loss_scale)},
                     {"skipped_steps", optionalJson(rank.skipped_steps)},
                     {"estimated_memory", estimatedMemoryJson(estimates, rank.rank)}});
  }
  return {{"run", runJson(summary.run)},
          {"program", programJson(spec)},
          {"final_step", summary.final_step},
          {"final_loss", optionalJson(summary.final_loss)},
          {"final_accuracy", optionalJson(summary.final_accuracy)},
          {"samples_per_second", summary.samples_per_second},
          {"tokens_per_second", optionalJson(summary.tokens_per_second)},
          {"mfu", optionalJson(summary.mfu)},
          {"lr", optionalJson(summary.lr)},
          {"loss_scale", optionalJson(summary.loss_scale)},
          {"skipped_steps", optionalJson(summary.skipped_steps)},
          {"mean_step_ms", summary.mean_step_ms},
          {"comm_share", summary.comm_share},
          {"bubble_fraction", optionalJson(summary.bubble_fraction)},
          {"ranks", ranks}};
}

std::string percent(double fraction) {
  const double percent = fraction * 100;
  // Bounded whatever a database holds: a share of 1e306 is no 309-digit figure.
  if (std::fabs(percent) < 1e6) return fmt::format("{:.1f}%", percent);
  return fmt::format("{:.3g}%", percent);
}

int64_t peakMemory(const RunSummary& summary) {
  int64_t peak = 0;
  for (const RankSummary& rank : summary.ranks) peak = std::max(peak, rank.peak_memory);
  return peak;
}

}  // namespace

int runsCommand(const Database& db, const RunFilter& filter, bool as_json) {
  const std::vector<RunRecord> runs = listRuns(db, filter);
  if (as_json) {
    json out = json::array();
    for (const RunRecord& run : runs) {
      json entry = runJson(run);
      const std::optional<FinalLoss> loss = finalLoss(db, run.id, run.world_size);
      entry["final_step"] = loss ? loss->step : 0;
      entry["final_loss"] = loss ? json(loss->loss) : json(nullptr);
      out.push_back(std::move(entry));
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  if (runs.empty()) {
    fmt::print(stderr, "no runs in {}\n", db.path());
    return 0;
  }
  const bool colour = colourFor(stdout);
  Table table(
      {"ID", "NAME", "STATUS", "STRATEGY", "RANKS", "STARTED", "DURATION", "STEPS", "FINAL LOSS"});
  table.alignRight({0, 4, 6, 7, 8});
  for (const RunRecord& run : runs) {
    const std::optional<FinalLoss> loss = finalLoss(db, run.id, run.world_size);
    table.addRow({std::to_string(run.id), displaySafeLine(run.name),
                  paint(run.detached && run.status == "running" ? "running (detached)" : run.status,
                        statusColour(run.status), colour),
                  run.strategy, std::to_string(run.world_size),
                  formatTimestamp(run.started_at.value_or(run.created_at)),
                  formatDuration(run.durationSeconds()), loss ? std::to_string(loss->step) : "-",
                  loss ? formatNumber(loss->loss) : "-"});
  }
  table.print(stdout);
  return 0;
}

void printRunReport(const Database& db, int64_t run_id, bool as_json, std::FILE* out) {
  const RunSummary summary = summarizeRun(db, run_id);
  const std::vector<RankRecord> ranks = loadRanks(db, run_id);
  const std::vector<AttemptRecord> attempts = loadAttempts(db, run_id);
  const std::vector<RankCommStats> comm_ranks = commStatsByRank(db, run_id);
  const std::vector<CommOpStats> ops = commStatsByOp(db, run_id);
  const IngestCounts ingest = loadIngestCounts(db, run_id);
  const std::vector<EvalPoint> evals = loadEvals(db, run_id);
  std::vector<LogLine> problems;
  for (const LogLine& line : loadLogs(db, run_id, std::nullopt, 100000))
    if (line.level == "error" || line.level == "warn") problems.push_back(line);
  const LiveProgress live = loadLiveProgress(db, run_id, telemetryNow());
  const RunRecord& run = summary.run;
  const std::optional<JobSpec> spec = storedSpec(run.spec_json);
  const bool program = spec && spec->program;

  if (as_json) {
    json document = summaryJson(summary);
    json rank_rows = json::array();
    for (const RankRecord& rank : ranks) {
      rank_rows.push_back({{"rank", rank.rank},
                           {"host", rank.host},
                           {"pid", rank.pid},
                           {"device", rank.device},
                           {"device_name", rank.device_name},
                           {"status", optionalJson(rank.status)}});
    }
    document["rank_records"] = rank_rows;
    document["attempts"] = attemptsJson(attempts);
    json comm = json::array();
    for (const CommOpStats& op : ops) {
      comm.push_back({{"op", op.op},
                      {"bytes", op.bytes},
                      {"count", op.count},
                      {"total_ms", op.total_ms},
                      {"wait_ms", optionalJson(op.wait_ms)},
                      {"p50_ms", op.p50_ms},
                      {"p99_ms", op.p99_ms},
                      {"algbw_gbps", op.algbw_gbps},
                      {"busbw_gbps", op.busbw_gbps}});
    }
    document["comm_ops"] = comm;
    json comm_by_rank = json::array();
    for (const RankCommStats& rank : comm_ranks) {
      comm_by_rank.push_back({{"rank", rank.rank},
                              {"operations", rank.operations},
                              {"comm_ms", rank.comm_ms},
                              {"wait_ms", optionalJson(rank.wait_ms)},
                              {"transfer_ms", optionalJson(rank.transfer_ms)},
                              {"mean_compute_ms", rank.mean_compute_ms},
                              {"mean_exposed_comm_ms", rank.mean_exposed_comm_ms},
                              {"collectives_measured", rank.collectives_measured},
                              {"mean_wait_ms", optionalJson(rank.mean_wait_ms)},
                              {"peers_mean_wait_ms", optionalJson(rank.peers_mean_wait_ms)},
                              {"straggler", rank.straggler}});
    }
    document["comm_ranks"] = comm_by_rank;
    json eval_rows = json::array();
    for (const EvalPoint& eval : evals) {
      eval_rows.push_back({{"step", eval.step},
                           {"rank", eval.rank},
                           {"val_loss", optionalJson(eval.val_loss)},
                           {"perplexity", optionalJson(eval.perplexity)},
                           {"tokens", eval.tokens},
                           {"eval_ms", eval.eval_ms}});
    }
    document["evals"] = eval_rows;
    document["events"] = {{"stored", ingest.stored},
                          {"duplicates", ingest.duplicates},
                          {"dropped", ingest.dropped},
                          {"malformed", ingest.malformed}};
    json problem_lines = json::array();
    for (const LogLine& line : problems) {
      problem_lines.push_back({{"rank", optionalJson(line.rank)},
                               {"t", line.t},
                               {"level", line.level},
                               {"message", line.message}});
    }
    document["problems"] = problem_lines;
    document["hang"] = hangJson(live);
    fmt::print(out, "{}\n", document.dump(2));
    return;
  }

  const bool colour = colourFor(out);
  fmt::print(out, "{} {}  {}\n", paint(fmt::format("Run {}", run.id), Colour::kBold, colour),
             displaySafeLine(run.name), paint(run.status, statusColour(run.status), colour));
  fmt::print(out, "  {} on {} rank{}, started {}, took {}\n", run.strategy, run.world_size,
             run.world_size == 1 ? "" : "s",
             formatTimestamp(run.started_at.value_or(run.created_at)),
             formatDuration(run.durationSeconds()));
  if (program) {
    // A program job: the command every rank ran (each argument as it was passed).
    std::string command =
        displaySafeLine(spec->program->python) + " " + displaySafeLine(spec->program->script);
    for (const std::string& arg : spec->program->args) command += " " + displaySafeLine(arg);
    fmt::print(out, "  program: {}\n", command);
  }
  std::string figures = fmt::format("  step {}  final loss {}", summary.final_step,
                                    formatOptional(summary.final_loss));
  if (summary.final_accuracy)
    figures += fmt::format("  accuracy {}", percent(*summary.final_accuracy));
  figures += fmt::format("  {} samples/s  step {} ms  exposed comm {}",
                         formatNumber(summary.samples_per_second, 1),
                         formatNumber(summary.mean_step_ms, 3), percent(summary.comm_share));
  if (summary.bubble_fraction)
    figures += fmt::format("  bubble {}", percent(*summary.bubble_fraction));
  // Throughput in tokens, MFU where a peak was known, and the learning rate at the last step.
  if (summary.tokens_per_second)
    figures += fmt::format("\n  {} tokens/s", formatNumber(*summary.tokens_per_second, 1));
  if (summary.mfu) figures += fmt::format("  MFU {}", percent(*summary.mfu));
  if (summary.lr) figures += fmt::format("  lr {}", formatOptional(summary.lr));
  // fp16: the loss scale at the last step and the steps skipped on an inf or NaN gradient.
  if (summary.loss_scale) {
    const int64_t skipped = summary.skipped_steps.value_or(0);
    figures += fmt::format("\n  loss scale {:g}  {} skipped step{}", *summary.loss_scale, skipped,
                           skipped == 1 ? "" : "s");
  }
  fmt::print(out, "{}\n", figures);
  if (!evals.empty()) {
    const EvalPoint& latest = evals.back();
    fmt::print(out, "  eval at step {}: val loss {}  perplexity {}  ({} tokens)\n", latest.step,
               formatOptional(latest.val_loss), formatOptional(latest.perplexity), latest.tokens);
  }
  if (run.error) {
    std::string where;
    if (run.error_rank) where += fmt::format(" rank {}", *run.error_rank);
    if (run.error_host) where += fmt::format(" on {}", displaySafeLine(*run.error_host));
    fmt::print(out, "  {}{}: {}\n", paint("root cause", Colour::kRed, colour), where,
               displaySafe(*run.error));
  }
  // Restarts (launch.max_restarts): when each attempt began, where it resumed, what ended it.
  if (attempts.size() > 1) {
    for (size_t i = 0; i < attempts.size(); ++i) {
      const AttemptRecord& a = attempts[i];
      std::string line =
          fmt::format("  attempt {}: began {}", a.attempt, formatTimestamp(a.started_at));
      if (a.first_step && a.last_step)
        line += fmt::format(", steps {}..{}", *a.first_step, *a.last_step);
      if (i > 0 && a.first_step) {
        line += *a.first_step > 1
                    ? fmt::format(", resumed from the checkpoint of step {}", *a.first_step - 1)
                    : std::string(", started again from step 1");
      }
      if (const auto rolled = rolledBack(attempts, i))
        line +=
            fmt::format(" ({} step{} rolled back: {}..{})", rolled->second - rolled->first + 1,
                        rolled->second == rolled->first ? "" : "s", rolled->first, rolled->second);
      fmt::print(out, "{}\n", line);
      if (a.error) {
        std::string where;
        if (a.error_rank) where += fmt::format(" rank {}", *a.error_rank);
        if (a.error_host) where += fmt::format(" on {}", displaySafeLine(*a.error_host));
        fmt::print(out, "    {}{}: {}\n", paint("root cause", Colour::kRed, colour), where,
                   displaySafeLine(*a.error));
      }
    }
  }

  // The live hang view (a running run only): which rank holds up which collective.
  for (const HangDiagnosis& hang : live.hangs) {
    fmt::print(out, "  {}: {}\n", paint("hang", Colour::kYellow, colour),
               displaySafeLine(hang.message));
  }
  for (size_t r = 0; r < live.rank_states.size(); ++r)
    if (!live.rank_states[r].empty())
      fmt::print(out, "    rank {}: {}\n", r, displaySafeLine(live.rank_states[r]));

  fmt::print(out, "\n");
  // The estimate from the stored spec beside the measured peak: how far the prediction was off
  // (n/a for a program job: the spec does not describe its script's model).
  const std::vector<double> estimates = rankEstimates(spec);
  Table rank_table({"RANK", "HOST", "PID", "DEVICE", "STATUS", "STEP", "SAMPLES/S", "TOKENS/S",
                    "MFU", "STEP MS", "COMPUTE MS", "EXPOSED COMM MS", "PEAK MEM", "ESTIMATED",
                    "WAIT MS", "TRANSFER MS", ""});
  rank_table.alignRight({0, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  for (int r = 0; r < run.world_size; ++r) {
    const RankRecord* record = nullptr;
    for (const RankRecord& candidate : ranks)
      if (candidate.rank == r) record = &candidate;
    const RankSummary& figures = summary.ranks[static_cast<size_t>(r)];
    const RankCommStats& comm = comm_ranks[static_cast<size_t>(r)];
    const std::string status = record && record->status ? *record->status : "-";
    const std::string host = record ? displaySafeLine(record->host) : "-";
    const std::string device = record ? displaySafeLine(record->device) : "-";
    rank_table.addRow(
        {std::to_string(r), host, record ? std::to_string(record->pid) : "-", device,
         paint(status, statusColour(status), colour && status != "-"),
         std::to_string(figures.last_step), formatNumber(figures.samples_per_second, 1),
         figures.tokens_per_second ? formatNumber(*figures.tokens_per_second, 1) : "-",
         figures.mfu ? percent(*figures.mfu) : "-", formatNumber(figures.mean_step_ms, 3),
         formatNumber(comm.mean_compute_ms, 3), formatNumber(comm.mean_exposed_comm_ms, 3),
         formatBytes(static_cast<double>(figures.peak_memory)),
         program ? "n/a"
         : static_cast<size_t>(r) < estimates.size()
             ? formatBytes(estimates[static_cast<size_t>(r)])
             : "-",
         comm.wait_ms ? formatNumber(*comm.wait_ms) : "-",
         comm.transfer_ms ? formatNumber(*comm.transfer_ms) : "-",
         comm.straggler ? paint("straggler", Colour::kYellow, colour) : ""});
  }
  rank_table.print(out);
  // Why each straggler is one: the others' wait for it, measured, or its compute time.
  for (const RankCommStats& comm : comm_ranks) {
    if (!comm.straggler) continue;
    const std::string why =
        comm.peers_mean_wait_ms && comm.mean_wait_ms
            ? fmt::format("the other ranks wait {} ms per collective for it, it waits {} ms",
                          formatNumber(*comm.peers_mean_wait_ms, 3),
                          formatNumber(*comm.mean_wait_ms, 3))
            : fmt::format("its compute takes {} ms per step, more than {:g} times its peers'",
                          formatNumber(comm.mean_compute_ms, 3), kStragglerRatio);
    fmt::print(out, "  {}: rank {}: {}\n", paint("straggler", Colour::kYellow, colour), comm.rank,
               why);
  }

  if (!ops.empty()) {
    fmt::print(out, "\n");
    Table comm_table({"OP", "SIZE", "COUNT", "TRANSFER MS", "WAIT MS", "P50 MS", "P99 MS",
                      "ALGBW GB/s", "BUSBW GB/s"});
    comm_table.alignRight({1, 2, 3, 4, 5, 6, 7, 8});
    for (const CommOpStats& op : ops) {
      comm_table.addRow({displaySafeLine(op.op), formatBytes(static_cast<double>(op.bytes)),
                         std::to_string(op.count), formatNumber(op.total_ms),
                         op.wait_ms ? formatNumber(*op.wait_ms) : "-", formatNumber(op.p50_ms, 3),
                         formatNumber(op.p99_ms, 3), formatNumber(op.algbw_gbps, 3),
                         formatNumber(op.busbw_gbps, 3)});
    }
    comm_table.print(out);
  }
  if (!evals.empty()) {
    // The validation loss by step (the last ones when there are many; --json has them all).
    constexpr size_t kShownEvals = 10;
    fmt::print(out, "\n");
    Table eval_table({"EVAL STEP", "VAL LOSS", "PERPLEXITY", "TOKENS", "EVAL MS"});
    eval_table.alignRight({0, 1, 2, 3, 4});
    for (size_t i = evals.size() > kShownEvals ? evals.size() - kShownEvals : 0; i < evals.size();
         ++i) {
      const EvalPoint& eval = evals[i];
      eval_table.addRow({std::to_string(eval.step), formatOptional(eval.val_loss),
                         formatOptional(eval.perplexity), std::to_string(eval.tokens),
                         formatNumber(eval.eval_ms, 3)});
    }
    eval_table.print(out);
  }
  // Bad lines: malformed, oversized, or from a rank the run does not have. Drops happen only in
  // runs recorded before the recorder made its producers wait instead.
  fmt::print(out, "\n  events: {} stored, {} duplicate, {} bad lines{}\n", ingest.stored,
             ingest.duplicates, ingest.malformed,
             ingest.dropped > 0 ? fmt::format(", {} dropped", ingest.dropped) : "");
  constexpr size_t kShownProblems = 10;
  if (!problems.empty()) {
    fmt::print(out, "\n{} (last {} of {}):\n", paint("Warnings and errors", Colour::kBold, colour),
               std::min(kShownProblems, problems.size()), problems.size());
    for (size_t i = problems.size() > kShownProblems ? problems.size() - kShownProblems : 0;
         i < problems.size(); ++i) {
      const LogLine& line = problems[i];
      fmt::print(out, "  {} {}{}\n",
                 paint(line.level, line.level == "error" ? Colour::kRed : Colour::kYellow, colour),
                 line.rank ? fmt::format("[rank {}] ", *line.rank) : "", displaySafe(line.message));
    }
  }
}

int showCommand(const Database& db, int64_t run_id, bool as_json) {
  printRunReport(db, run_id, as_json, stdout);
  return 0;
}

int compareCommand(const Database& db, const std::vector<int64_t>& run_ids, bool as_json) {
  const RunComparison comparison = compareRuns(db, run_ids);
  // Overlaid loss: every run's series on the same ten buckets of the longest run's steps.
  int64_t last_step = 1;
  for (const RunSummary& summary : comparison.runs)
    last_step = std::max(last_step, summary.final_step);
  std::vector<Series> losses;
  for (const RunSummary& summary : comparison.runs)
    losses.push_back(loadSeries(db, summary.run.id, step_field::kLoss, 0,
                                {.from_step = 1, .to_step = last_step, .buckets = 10}));

  if (as_json) {
    json runs = json::array();
    for (size_t i = 0; i < comparison.runs.size(); ++i) {
      json entry = summaryJson(comparison.runs[i]);
      json series = json::array();
      for (const SeriesBucket& bucket : losses[i].buckets) {
        series.push_back({{"start", bucket.start},
                          {"mean", bucket.summary.mean()},
                          {"min", bucket.summary.min},
                          {"max", bucket.summary.max},
                          {"last", bucket.summary.last_value}});
      }
      entry["loss_rank0"] = series;
      runs.push_back(std::move(entry));
    }
    json differences = json::array();
    for (const SpecDifference& difference : comparison.differences)
      differences.push_back({{"path", difference.path}, {"values", difference.values}});
    fmt::print("{}\n", json{{"runs", runs}, {"spec_differences", differences}}.dump(2));
    return 0;
  }

  std::vector<std::string> headers = {""};
  for (const RunSummary& summary : comparison.runs)
    headers.push_back(fmt::format("#{} {}", summary.run.id, displaySafeLine(summary.run.name)));
  Table figures(headers);
  std::vector<size_t> right;
  for (size_t i = 1; i < headers.size(); ++i) right.push_back(i);
  figures.alignRight(right);
  auto row = [&](const std::string& label, auto cell) {
    std::vector<std::string> cells = {label};
    for (const RunSummary& summary : comparison.runs) cells.push_back(cell(summary));
    figures.addRow(std::move(cells));
  };
  row("status", [](const RunSummary& s) { return s.run.status; });
  row("strategy",
      [](const RunSummary& s) { return fmt::format("{} x{}", s.run.strategy, s.run.world_size); });
  row("steps", [](const RunSummary& s) { return std::to_string(s.final_step); });
  row("final loss", [](const RunSummary& s) { return formatOptional(s.final_loss); });
  row("samples/s", [](const RunSummary& s) { return formatNumber(s.samples_per_second, 1); });
  row("step ms", [](const RunSummary& s) { return formatNumber(s.mean_step_ms, 3); });
  row("exposed comm", [](const RunSummary& s) { return percent(s.comm_share); });
  row("bubble",
      [](const RunSummary& s) { return s.bubble_fraction ? percent(*s.bubble_fraction) : "-"; });
  row("peak memory",
      [](const RunSummary& s) { return formatBytes(static_cast<double>(peakMemory(s))); });
  row("duration", [](const RunSummary& s) { return formatDuration(s.run.durationSeconds()); });
  figures.print(stdout);

  fmt::print("\nLoss (rank 0, mean per bucket)\n");
  std::vector<std::string> loss_headers = {"STEPS"};
  for (size_t i = 1; i < headers.size(); ++i) loss_headers.push_back(headers[i]);
  Table loss_table(loss_headers);
  loss_table.alignRight(right);
  std::map<int64_t, std::vector<std::string>> by_start;
  for (size_t i = 0; i < losses.size(); ++i) {
    for (const SeriesBucket& bucket : losses[i].buckets) {
      auto& cells = by_start[bucket.start];
      cells.resize(losses.size(), "-");
      cells[i] = formatNumber(bucket.summary.mean());
    }
  }
  for (auto& [start, cells] : by_start) {
    cells.resize(losses.size(), "-");
    std::vector<std::string> full = {fmt::format("{}-{}", start, losses.front().lastStepOf(start))};
    full.insert(full.end(), cells.begin(), cells.end());
    loss_table.addRow(std::move(full));
  }
  loss_table.print(stdout);

  fmt::print("\nSpec differences\n");
  if (comparison.differences.empty()) {
    fmt::print("  none: the specs are identical\n");
    return 0;
  }
  std::vector<std::string> diff_headers = {"FIELD"};
  for (size_t i = 1; i < headers.size(); ++i) diff_headers.push_back(headers[i]);
  Table differences(diff_headers);
  for (const SpecDifference& difference : comparison.differences) {
    std::vector<std::string> cells = {displaySafeLine(difference.path)};
    for (const std::string& value : difference.values) {
      constexpr size_t kWidest = 40;  // --json carries the whole value
      cells.push_back(displaySafeLine(value.empty() ? "-"
                                      : value.size() <= kWidest
                                          ? value
                                          : value.substr(0, kWidest - 3) + "..."));
    }
    differences.addRow(std::move(cells));
  }
  differences.print(stdout);
  return 0;
}

void addHistoryCommands(CLI::App& app, Commands& commands) {
  struct Options {
    RunFilter filter;
    int64_t run_id = 0;
    std::vector<int64_t> run_ids;
    bool json = false;
  };
  auto options = std::make_shared<Options>();

  CLI::App* runs = app.add_subcommand("runs", "list past runs, newest first");
  runs->add_option("--name", options->filter.name_contains, "only names containing this text");
  std::vector<std::string> strategies;
  for (std::string_view name : enumNames<StrategyKind>()) strategies.emplace_back(name);
  runs->add_option("--strategy", options->filter.strategy, "only this strategy")
      ->check(CLI::IsMember(strategies));
  runs->add_option("--status", options->filter.status, "only this status")
      ->check(
          CLI::IsMember({"pending", "running", "completed", "failed", "cancelled", "interrupted"}));
  runs->add_option("--limit", options->filter.limit, "at most this many runs")
      ->default_val(50)
      ->check(CLI::PositiveNumber);
  runs->add_flag("--json", options->json, "JSON instead of a table");
  commands.add(runs, [options](const CommonOptions& common) {
    const std::string path = common.databasePath();
    std::error_code ec;
    if (common.db_path.empty() && !std::filesystem::exists(path, ec)) {
      // The first start, before any run: an empty history rather than an error.
      if (options->json) fmt::print("[]\n");
      fmt::print(stderr, "no runs yet: {} does not exist (`ringmaster run SPEC` creates it)\n",
                 path);
      return static_cast<int>(kExitOk);
    }
    return runsCommand(*openDatabaseForReading(path), options->filter, options->json);
  });

  CLI::App* show = app.add_subcommand("show", "a run's summary, ranks, communication and errors");
  show->add_option("run", options->run_id, "run id")->required();
  show->add_flag("--json", options->json, "JSON instead of tables");
  commands.add(show, [options](const CommonOptions& common) {
    return showCommand(*openDatabaseForReading(common.databasePath()), options->run_id,
                       options->json);
  });

  CLI::App* compare =
      app.add_subcommand("compare", "compare runs: figures, loss, spec differences");
  compare->add_option("runs", options->run_ids, "two or more run ids")
      ->required()
      ->expected(-2)  // at least two, no upper bound
      ->type_name("RUN");
  compare->add_flag("--json", options->json, "JSON instead of tables");
  commands.add(compare, [options](const CommonOptions& common) {
    return compareCommand(*openDatabaseForReading(common.databasePath()), options->run_ids,
                          options->json);
  });
}

}  // namespace ringmaster::cli
