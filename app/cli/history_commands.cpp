// Reports over the run database, as tables or JSON: the run list, one run's report
// (query/run_report.h, which `--json` writes as it is) and the comparison of runs.
#include "cli/history_commands.h"

#include <cctype>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/comm_dims_output.h"
#include "cli/metric_overlay.h"
#include "cli/sweep_command.h"
#include "cli/terminal.h"
#include "core/display_text.h"
#include "core/error.h"
#include "exit_codes.h"
#include "query/compare_axes.h"
#include "query/figures.h"
#include "query/run_report.h"
#include "query/run_search.h"
#include "query/series.h"
#include "spec/job_spec.h"
#include "telemetry/fields.h"
#include "telemetry/writer.h"

namespace ringmaster::cli {

using namespace storage;
using nlohmann::json;

namespace {

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

// A figure's one name (query/figures.h), with its unit where a value in ms is shown bare.
std::string named(std::string_view id) {
  const Figure& f = figure(id);
  return f.kind == FigureKind::kMilliseconds ? fmt::format("{} ms", f.name) : std::string(f.name);
}

// A figure's name as a column title: upper case, as every column of the tables.
std::string column(std::string_view id) {
  std::string title = named(id);
  for (char& c : title) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return title;
}

// " rank 2 on node-b", naming where a root cause was raised (empty when nothing says).
std::string whereRaised(const std::optional<int>& rank, const std::optional<std::string>& host) {
  std::string where;
  if (rank) where += fmt::format(" rank {}", *rank);
  if (host) where += fmt::format(" on {}", displaySafeLine(*host));
  return where;
}

// The last lines the failed rank wrote on its stderr, under its root cause (issue 33).
void printErrorOutput(const std::vector<std::string>& lines, std::FILE* out) {
  if (lines.empty()) return;
  fmt::print(out, "    its stderr ended:\n");
  for (const std::string& line : lines) fmt::print(out, "      {}\n", displaySafeMessageLine(line));
}

// A run's tags, comma-separated, cut to `widest` bytes (--json has them all).
std::string tagCell(const std::vector<std::string>& tags, size_t widest = 32) {
  if (tags.empty()) return "-";
  std::string cell;
  for (const std::string& tag : tags) cell += (cell.empty() ? "" : ",") + displaySafeLine(tag);
  if (cell.size() <= widest) return cell;
  size_t cut = widest - 3;  // at a UTF-8 character's start
  while (cut > 0 && (static_cast<unsigned char>(cell[cut]) & 0xC0) == 0x80) --cut;
  return cell.substr(0, cut) + "...";
}

// A run's status as the run list and `show` print it: a run handed to a scheduler (issue 35) with
// its job, the scheduler's word and reason ("pending (Slurm 4242: PENDING, Resources)"), a
// detached one running as "running (detached)".
std::string statusText(const RunRecord& run) {
  if (run.scheduler) {
    const SchedulerJob& job = *run.scheduler;
    std::string text = fmt::format("{} ({} {}", run.status,
                                   job.kind == "slurm" ? "Slurm" : displaySafeLine(job.kind),
                                   displaySafeLine(job.job_id));
    if (!job.state.empty()) text += ": " + displaySafeLine(job.state);
    if (!job.reason.empty()) text += ", " + displaySafeLine(job.reason);
    return text + ")";
  }
  return run.detached && run.status == "running" ? "running (detached)" : run.status;
}

// The run's line, its program, its figures, the latest evaluation and its root cause.
void printHeadline(const RunReport& report, bool colour, std::FILE* out) {
  const RunSummary& summary = report.summary;
  const RunRecord& run = summary.run;
  fmt::print(out, "{} {}  {}\n", paint(fmt::format("Run {}", run.id), Colour::kBold, colour),
             displaySafeLine(run.name), paint(statusText(run), statusColour(run.status), colour));
  if (run.scheduler && !run.scheduler->nodes.empty())
    fmt::print(out, "  nodes: {}\n", displaySafeLine(run.scheduler->nodes));
  fmt::print(out, "  {} on {} rank{}, started {}, took {}\n", run.strategy, run.world_size,
             run.world_size == 1 ? "" : "s",
             formatTimestamp(run.started_at.value_or(run.created_at)),
             formatDuration(run.durationSeconds()));
  // What a person wrote about the run (issue 33): its tags and note.
  if (!run.tags.empty()) fmt::print(out, "  tags: {}\n", tagCell(run.tags, 1024));
  if (run.note) fmt::print(out, "  note: {}\n", displaySafeMessageLine(*run.note));
  if (report.program) {
    // A program job: the command every rank ran (each argument as it was passed).
    std::string command =
        displaySafeLine(report.program->python) + " " + displaySafeLine(report.program->script);
    for (const std::string& arg : report.program->args) command += " " + displaySafeLine(arg);
    fmt::print(out, "  program: {}\n", command);
  }
  // Each figure by its name in the table of figures (query/figures.h).
  const auto name = [](std::string_view id) { return figure(id).name; };
  std::string figures = fmt::format("  {} {}  {} {}", name("final_step"), summary.final_step,
                                    name("final_loss"), formatOptional(summary.final_loss));
  if (summary.final_accuracy)
    figures += fmt::format("  {} {}", name("final_accuracy"), percent(*summary.final_accuracy));
  figures += fmt::format("  {} {}  {} {} ms  {} {}", name("samples_per_second"),
                         formatNumber(summary.samples_per_second, 1), name("mean_step_ms"),
                         formatNumber(summary.mean_step_ms, 3), name("comm_share"),
                         percent(summary.comm_share));
  if (summary.bubble_fraction)
    figures += fmt::format("  {} {}", name("bubble_fraction"), percent(*summary.bubble_fraction));
  // Throughput in tokens, MFU where a peak was known, and the learning rate at the last step.
  if (summary.tokens_per_second)
    figures += fmt::format("\n  {} {}", name("tokens_per_second"),
                           formatNumber(*summary.tokens_per_second, 1));
  if (summary.mfu) figures += fmt::format("  {} {}", name("mfu"), percent(*summary.mfu));
  if (summary.lr) figures += fmt::format("  {} {}", name("lr"), formatOptional(summary.lr));
  // fp16: the loss scale at the last step and the steps skipped on an inf or NaN gradient.
  if (summary.loss_scale) {
    const int64_t skipped = summary.skipped_steps.value_or(0);
    figures += fmt::format("\n  {} {:g}  {} skipped step{}", name("loss_scale"),
                           *summary.loss_scale, skipped, skipped == 1 ? "" : "s");
  }
  fmt::print(out, "{}\n", figures);
  if (!report.evals.empty()) {
    const EvalPoint& latest = report.evals.back();
    fmt::print(out, "  eval at step {}: val loss {}  perplexity {}  ({} tokens)\n", latest.step,
               formatOptional(latest.val_loss), formatOptional(latest.perplexity), latest.tokens);
  }
  if (const auto& split = report.bubble_split) {
    // Issue 33: the gap between planned and measured bubble, explained (docs/parallel.md).
    fmt::print(out, "  bubble planned {}, planned with measured costs {}, measured {}: {}\n",
               percent(split->planned), percent(split->replayed), percent(split->measured),
               describeBubbleSplit(*split));
  }
  if (run.error) {
    fmt::print(out, "  {}{}: {}\n", paint("root cause", Colour::kRed, colour),
               whereRaised(run.error_rank, run.error_host), displaySafe(*run.error));
    printErrorOutput(report.error_output, out);
  }
}

// Restarts (launch.max_restarts): when each attempt began, where it resumed, what ended it.
void printAttempts(const RunReport& report, bool colour, std::FILE* out) {
  if (report.attempts.size() < 2) return;
  for (size_t i = 0; i < report.attempts.size(); ++i) {
    const AttemptRecord& a = report.attempts[i].record;
    std::string line =
        fmt::format("  attempt {}: began {}", a.attempt, formatTimestamp(a.started_at));
    if (a.first_step && a.last_step)
      line += fmt::format(", steps {}..{}", *a.first_step, *a.last_step);
    if (i > 0 && a.first_step) {
      line += *a.first_step > 1
                  ? fmt::format(", resumed from the checkpoint of step {}", *a.first_step - 1)
                  : std::string(", started again from step 1");
    }
    if (const auto& rolled = report.attempts[i].rolled_back)
      line +=
          fmt::format(" ({} step{} rolled back: {}..{})", rolled->second - rolled->first + 1,
                      rolled->second == rolled->first ? "" : "s", rolled->first, rolled->second);
    fmt::print(out, "{}\n", line);
    if (a.error) {
      fmt::print(out, "    {}{}: {}\n", paint("root cause", Colour::kRed, colour),
                 whereRaised(a.error_rank, a.error_host), displaySafeMessageLine(*a.error));
    }
  }
}

// The live hang view (a running run only): which rank holds up which collective.
void printHang(const LiveProgress& live, bool colour, std::FILE* out) {
  for (const HangDiagnosis& hang : live.hangs) {
    fmt::print(out, "  {}: {}\n", paint("hang", Colour::kYellow, colour),
               displaySafeMessageLine(hang.message));
  }
  for (size_t r = 0; r < live.rank_states.size(); ++r)
    if (!live.rank_states[r].empty())
      fmt::print(out, "    rank {}: {}\n", r, displaySafeLine(live.rank_states[r]));
}

// One row per rank, the estimate from the stored spec beside the measured peak: how far the
// prediction was off (n/a for a program job: the spec does not describe its script's model).
void printRankTable(const RunReport& report, bool colour, std::FILE* out) {
  Table table({"RANK", "HOST", "PID", "DEVICE", "STATUS", column("last_step"),
               column("samples_per_second"), column("tokens_per_second"), column("mfu"),
               column("mean_step_ms"), column("mean_compute_ms"), column("mean_exposed_comm_ms"),
               column("peak_memory"), column("estimated_memory"), column("wait_ms"),
               column("transfer_ms"), ""});
  table.alignRight({0, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  for (const RankReport& rank : report.ranks) {
    const RankSummary& figures = rank.figures;
    const RankCommStats& comm = rank.comm;
    const std::optional<RankRecord>& record = rank.record;
    const std::string status = record && record->status ? *record->status : "-";
    table.addRow({std::to_string(figures.rank), record ? displaySafeLine(record->host) : "-",
                  record ? std::to_string(record->pid) : "-",
                  record ? displaySafeLine(record->device) : "-",
                  paint(status, statusColour(status), colour && status != "-"),
                  std::to_string(figures.last_step), formatNumber(figures.samples_per_second, 1),
                  figures.tokens_per_second ? formatNumber(*figures.tokens_per_second, 1) : "-",
                  figures.mfu ? percent(*figures.mfu) : "-", formatNumber(figures.mean_step_ms, 3),
                  formatNumber(comm.mean_compute_ms, 3), formatNumber(comm.mean_exposed_comm_ms, 3),
                  formatBytes(static_cast<double>(figures.peak_memory)),
                  report.program          ? "n/a"
                  : rank.estimated_memory ? formatBytes(*rank.estimated_memory)
                                          : "-",
                  comm.wait_ms ? formatNumber(*comm.wait_ms) : "-",
                  comm.transfer_ms ? formatNumber(*comm.transfer_ms) : "-",
                  comm.straggler ? paint("straggler", Colour::kYellow, colour) : ""});
  }
  table.print(out);
}

// Why each straggler is one: the others' wait for it, measured, or its compute time. Apart from
// the rank table by a blank line, as every section.
void printStragglers(const RunReport& report, bool colour, std::FILE* out) {
  bool first = true;
  for (const RankReport& rank : report.ranks) {
    const RankCommStats& comm = rank.comm;
    if (!comm.straggler) continue;
    if (std::exchange(first, false)) fmt::print(out, "\n");
    const std::string why =
        comm.peers_mean_wait_ms && comm.mean_wait_ms
            ? fmt::format("the other ranks wait {} ms per collective for it, it waits {} ms",
                          formatNumber(*comm.peers_mean_wait_ms, 3),
                          formatNumber(*comm.mean_wait_ms, 3))
            : fmt::format("its compute takes {} ms per step, more than {:g} times its peers'",
                          formatNumber(comm.mean_compute_ms, 3), kStragglerRatio);
    fmt::print(out, "  {}: rank {}: {}\n", paint("straggler", Colour::kYellow, colour),
               rank.figures.rank, why);
  }
}

void printCommOps(const std::vector<CommOpStats>& ops, std::FILE* out) {
  if (ops.empty()) return;
  fmt::print(out, "\n");
  // Summed over every rank's operations, overlapping ones counted each (the rank table's times
  // count them once).
  Table table({"OP", "SIZE", "COUNT", "SUM TRANSFER MS", "SUM WAIT MS", "P50 MS", "P99 MS",
               "ALGBW GB/s", "BUSBW GB/s"});
  table.alignRight({1, 2, 3, 4, 5, 6, 7, 8});
  for (const CommOpStats& op : ops) {
    table.addRow({displaySafeLine(op.op), formatBytes(static_cast<double>(op.bytes)),
                  std::to_string(op.count), formatNumber(op.total_ms),
                  op.wait_ms ? formatNumber(*op.wait_ms) : "-", formatNumber(op.p50_ms, 3),
                  formatNumber(op.p99_ms, 3), formatNumber(op.algbw_gbps, 3),
                  formatNumber(op.busbw_gbps, 3)});
  }
  table.print(out);
}

// The validation loss by step (the last ones when there are many; --json has them all).
void printEvals(const std::vector<EvalPoint>& evals, std::FILE* out) {
  if (evals.empty()) return;
  constexpr size_t kShownEvals = 10;
  fmt::print(out, "\n");
  Table table({"EVAL STEP", "VAL LOSS", "PERPLEXITY", "TOKENS", "EVAL MS"});
  table.alignRight({0, 1, 2, 3, 4});
  for (size_t i = evals.size() > kShownEvals ? evals.size() - kShownEvals : 0; i < evals.size();
       ++i) {
    const EvalPoint& eval = evals[i];
    table.addRow({std::to_string(eval.step), formatOptional(eval.val_loss),
                  formatOptional(eval.perplexity), std::to_string(eval.tokens),
                  formatNumber(eval.eval_ms, 3)});
  }
  table.print(out);
}

// What the recorder counted, and the last warnings and errors.
void printIngestAndProblems(const RunReport& report, bool colour, std::FILE* out) {
  // Bad lines: malformed, oversized, or from a rank the run does not have. Drops happen only in
  // runs recorded before the recorder made its producers wait instead.
  const IngestCounts& ingest = report.ingest;
  fmt::print(out, "\n  events: {} stored, {} duplicate, {} bad lines{}\n", ingest.stored,
             ingest.duplicates, ingest.malformed,
             ingest.dropped > 0 ? fmt::format(", {} dropped", ingest.dropped) : "");
  constexpr size_t kShownProblems = 10;
  const std::vector<LogLine>& problems = report.problems.last;
  if (problems.empty()) return;
  const size_t shown = std::min(kShownProblems, problems.size());
  fmt::print(out, "\n{} (last {} of {}):\n", paint("Warnings and errors", Colour::kBold, colour),
             shown, report.problems.total);
  for (size_t i = problems.size() - shown; i < problems.size(); ++i) {
    const LogLine& line = problems[i];
    fmt::print(out, "  {} {}{}\n",
               paint(line.level, line.level == "error" ? Colour::kRed : Colour::kYellow, colour),
               line.rank ? fmt::format("[rank {}] ", *line.rank) : "", displaySafe(line.message));
  }
}

// The search options of `runs` (issue 33): --search takes the search line (query/run_search.h),
// and each option adds the term it names; a term that is none is a usage error naming it.
struct RunSearchOptions {
  std::string search;
  std::vector<std::string> tags, where;
  std::string note, since, until;
};

RunFilter runsFilter(RunFilter given, const RunSearchOptions& options) {
  const double now = telemetryNow();
  RunSearch search = parseRunSearch(options.search, now);
  RunFilter& filter = search.filter;
  if (given.name_contains) filter.name_contains = given.name_contains;
  if (given.strategy) filter.strategy = given.strategy;
  if (given.status) filter.status = given.status;
  filter.limit = given.limit;
  std::vector<std::string> terms;
  for (const std::string& tag : options.tags) terms.push_back("tag:" + tag);
  for (const std::string& field : options.where) {
    if (field.find('=') == std::string::npos)
      search.problems.push_back(fmt::format("--where {}: expected FIELD=VALUE", field));
    else
      terms.push_back(field);
  }
  if (!options.since.empty()) terms.push_back("since:" + options.since);
  if (!options.until.empty()) terms.push_back("until:" + options.until);
  for (const std::string& term : terms)
    if (std::string problem = applySearchTerm(filter, term, now); !problem.empty())
      search.problems.push_back(std::move(problem));
  if (!options.note.empty()) filter.note_contains = options.note;
  if (!search.problems.empty())
    RM_THROW(kInvalidArgument, fmt::format("{}", fmt::join(search.problems, "; ")));
  return filter;
}

}  // namespace

int runsCommand(const Database& db, const RunFilter& filter, bool as_json) {
  const std::vector<RunRecord> runs = listRuns(db, filter);
  if (as_json) {
    json out = json::array();
    for (const RunRecord& run : runs) out.push_back(runListEntry(db, run));
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  if (runs.empty()) {
    fmt::print(stderr, "no runs in {}\n", db.path());
    return 0;
  }
  const bool colour = colourFor(stdout);
  Table table({"ID", "NAME", "TAGS", "STATUS", "STRATEGY", "RANKS", "STARTED", "DURATION", "STEPS",
               "FINAL LOSS"});
  table.alignRight({0, 5, 7, 8, 9});
  for (const RunRecord& run : runs) {
    const std::optional<FinalLoss> loss = finalLoss(db, run.id, run.world_size);
    table.addRow({std::to_string(run.id), displaySafeLine(run.name), tagCell(run.tags),
                  paint(statusText(run), statusColour(run.status), colour), run.strategy,
                  std::to_string(run.world_size),
                  formatTimestamp(run.started_at.value_or(run.created_at)),
                  formatDuration(run.durationSeconds()), loss ? std::to_string(loss->step) : "-",
                  loss ? formatNumber(loss->loss) : "-"});
  }
  table.print(stdout);
  return 0;
}

void printRunReport(const Database& db, int64_t run_id, bool as_json, std::FILE* out) {
  const RunReport report = buildRunReport(db, run_id, telemetryNow());
  if (as_json) {
    fmt::print(out, "{}\n", toJson(report).dump(2));
    return;
  }
  const bool colour = colourFor(out);
  printHeadline(report, colour, out);
  printAttempts(report, colour, out);
  printHang(report.live, colour, out);
  fmt::print(out, "\n");
  printRankTable(report, colour, out);
  printStragglers(report, colour, out);
  printCommOps(report.comm_ops, out);
  printCommByDimension(report.comm_dims, out);
  printEvals(report.evals, out);
  printMetricNames(report.metrics, out);
  printIngestAndProblems(report, colour, out);
}

int showCommand(const Database& db, int64_t run_id, bool as_json) {
  printRunReport(db, run_id, as_json, stdout);
  return 0;
}

int compareCommand(const Database& db, const std::vector<int64_t>& run_ids, bool as_json,
                   const std::vector<std::string>& metrics) {
  const RunComparison comparison = compareRuns(db, run_ids);
  std::vector<MetricOverlay> overlays;  // --metric: each overlaid on ten buckets, as the loss
  for (const std::string& metric : metrics)
    overlays.push_back(loadMetricOverlay(db, run_ids, metric, 10));
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
      json entry = toJson(buildRunReport(db, comparison.runs[i].run.id, telemetryNow()));
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
    json document{{"runs", runs}, {"spec_differences", differences}};
    if (!overlays.empty()) {
      document["metric_overlays"] = json::array();
      for (const MetricOverlay& overlay : overlays)
        document["metric_overlays"].push_back(overlayJson(overlay));
    }
    fmt::print("{}\n", document.dump(2));
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
  row("mesh (dp x tp x pp)", [](const RunSummary& s) { return formatMesh(s.run.mesh); });
  row(named("final_step"), [](const RunSummary& s) { return std::to_string(s.final_step); });
  row(named("final_loss"), [](const RunSummary& s) { return formatOptional(s.final_loss); });
  row(named("samples_per_second"),
      [](const RunSummary& s) { return formatNumber(s.samples_per_second, 1); });
  row(named("mean_step_ms"), [](const RunSummary& s) { return formatNumber(s.mean_step_ms, 3); });
  row(named("comm_share"), [](const RunSummary& s) { return percent(s.comm_share); });
  row(named("bubble_fraction"),
      [](const RunSummary& s) { return s.bubble_fraction ? percent(*s.bubble_fraction) : "-"; });
  row(named("peak_memory"),
      [](const RunSummary& s) { return formatBytes(static_cast<double>(peakMemory(s))); });
  row(named("duration_s"),
      [](const RunSummary& s) { return formatDuration(s.run.durationSeconds()); });
  figures.print(stdout);
  printCommByDimensionComparison(db, comparison.runs, {headers.begin() + 1, headers.end()}, stdout);

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
  for (const MetricOverlay& overlay : overlays)
    printOverlay(overlay, {headers.begin() + 1, headers.end()}, stdout);

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

// One value of a comparison axis as a cell: a figure formatted by its kind, a spec field as
// written, "-" where the run has none.
static std::string axisCell(const ComparisonAxis& axis, size_t run) {
  const AxisPoint& point = axis.points[run];
  if (point.category < 0) return "-";
  if (!axis.is_figure || !point.number) return displaySafeLine(point.text);
  const double value = *point.number;
  switch (figure(axis.key).kind) {
    case FigureKind::kFraction:
      return percent(value);
    case FigureKind::kBytes:
      return formatBytes(value);
    case FigureKind::kSeconds:
      return formatDuration(value);
    case FigureKind::kCount:
      return fmt::format("{:.0f}", value);
    case FigureKind::kRate:
      return formatNumber(value, 1);
    default:
      return formatNumber(value);
  }
}

// An axis's title: the figure's name with its unit, or the spec field's path.
static std::string axisTitle(const ComparisonAxis& axis) {
  if (axis.unit.empty() || axis.unit == axis.name) return axis.name;
  return fmt::format("{} ({})", axis.name, axis.unit);
}

int compareAxesCommand(const Database& db, const std::vector<int64_t>& run_ids,
                       const std::string& x, const std::string& y, bool as_json) {
  std::vector<json> reports;
  for (int64_t id : run_ids) reports.push_back(toJson(buildRunReport(db, id, telemetryNow())));
  const ComparisonAxis x_axis = comparisonAxis(reports, x);
  const ComparisonAxis y_axis = comparisonAxis(reports, y);
  if (as_json) {
    json x_json = toJson(x_axis), y_json = toJson(y_axis);
    json points = json::array();
    for (size_t i = 0; i < reports.size(); ++i)
      points.push_back({{"run", run_ids[i]},
                        {"name", reports[i]["run"]["name"]},
                        {"x", x_json["values"][i]},
                        {"y", y_json["values"][i]}});
    x_json.erase("values");
    y_json.erase("values");
    fmt::print("{}\n", json{{"x", x_json}, {"y", y_json}, {"points", points}}.dump(2));
    return 0;
  }
  Table table({"RUN", "NAME", axisTitle(x_axis), axisTitle(y_axis)});
  table.alignRight({0, 2, 3});
  for (size_t i = 0; i < reports.size(); ++i)
    table.addRow({std::to_string(run_ids[i]),
                  displaySafeLine(reports[i]["run"]["name"].get<std::string>()),
                  axisCell(x_axis, i), axisCell(y_axis, i)});
  table.print(stdout);
  return 0;
}

void addHistoryCommands(CLI::App& app, Commands& commands) {
  struct Options {
    RunFilter filter;
    int64_t run_id = 0;
    std::vector<int64_t> run_ids;
    std::string x, y;                  // compare's axes
    std::vector<std::string> metrics;  // compare --metric
    bool json = false;
  };
  auto options = std::make_shared<Options>();

  CLI::App* runs = app.add_subcommand("runs", "list past runs, newest first");
  runs->add_option("--name", options->filter.name_contains, "only names containing this text");
  const std::vector<std::string> strategies = strategyLabels();
  runs->add_option("--strategy", options->filter.strategy, "only this strategy")
      ->check(CLI::IsMember(strategies));
  runs->add_option("--status", options->filter.status, "only this status")
      ->check(
          CLI::IsMember({"pending", "running", "completed", "failed", "cancelled", "interrupted"}));
  runs->add_option("--limit", options->filter.limit, "at most this many runs")
      ->default_val(50)
      ->check(CLI::PositiveNumber);
  runs->add_flag("--json", options->json, "JSON instead of a table");
  auto search = std::make_shared<RunSearchOptions>();
  runs->add_option("--search,-s", search->search,
                   "words in the name, a tag or the note, and terms: tag:T note:TEXT status:S "
                   "strategy:S since:DATE until:DATE optimizer.lr=3e-4");
  runs->add_option("--tag", search->tags, "only runs with this tag (repeatable)");
  runs->add_option("--note", search->note, "only runs whose note holds this text");
  runs->add_option("--where", search->where,
                   "only runs whose spec field has this value: optimizer.lr=3e-4 (repeatable)");
  runs->add_option("--since", search->since,
                   "only runs created from this date: 2026-11-28, 2026-11-28T14:05, 7d, 12h");
  runs->add_option("--until", search->until, "only runs created up to this date (a day: its end)");
  commands.add(runs, [options, search](const CommonOptions& common) {
    const RunFilter filter = runsFilter(options->filter, *search);
    const std::string path = common.databasePath();
    std::error_code ec;
    if (common.db_path.empty() && !std::filesystem::exists(path, ec)) {
      // The first start, before any run: an empty history rather than an error.
      if (options->json) fmt::print("[]\n");
      fmt::print(stderr, "no runs yet: {} does not exist (`ringmaster run SPEC` creates it)\n",
                 path);
      return static_cast<int>(kExitOk);
    }
    return runsCommand(*openDatabaseForReading(path), filter, options->json);
  });

  CLI::App* show = app.add_subcommand("show", "a run's summary, ranks, communication and errors");
  CLI::Option* show_run = show->add_option("run", options->run_id, "run id");
  show->add_flag("--json", options->json, "JSON instead of tables");
  // A sweep's report instead (issue 37, cli/sweep_command.h).
  auto sweep = std::make_shared<std::pair<int64_t, std::string>>();
  CLI::Option* show_sweep =
      show->add_option("--sweep", sweep->first, "a sweep's report instead: its table and best run");
  show->add_option("--by", sweep->second,
                   "with --sweep: the run figure the best run is chosen by (default final_loss)");
  show_run->excludes(show_sweep);
  commands.add(show, [options, show_run, show_sweep, sweep](const CommonOptions& common) {
    if (show_sweep->count() > 0)
      return showSweepCommand(*openDatabaseForReading(common.databasePath()), sweep->first,
                              sweep->second, options->json);
    if (show_run->count() == 0) RM_THROW(kInvalidArgument, "show: a run id (or --sweep ID)");
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
  compare->add_option("--x", options->x,
                      "with --y: one point per run, X a figure (final_loss, mean_step_ms, ...) "
                      "or a spec field (optimizer.lr, ...)");
  compare->add_option("--y", options->y, "with --x: Y, a figure or a spec field");
  compare
      ->add_option("--metric", options->metrics,
                   "overlay this metric too (rank 0 of each run; any `show` lists; repeatable)")
      ->type_name("NAME")
      ->allow_extra_args(false);
  commands.add(compare, [options](const CommonOptions& common) {
    if (options->x.empty() != options->y.empty())
      RM_THROW(kInvalidArgument, "compare: --x and --y go together (a point needs both)");
    const auto db = openDatabaseForReading(common.databasePath());
    if (!options->x.empty())
      return compareAxesCommand(*db, options->run_ids, options->x, options->y, options->json);
    return compareCommand(*db, options->run_ids, options->json, options->metrics);
  });
}

}  // namespace ringmaster::cli
