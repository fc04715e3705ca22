// Builds a RunReport from the storage queries and writes its JSON form. The rules every front end
// shows the same way live here: which steps a restart rolled back, which rank row merges which
// records, how an ended run's hang view is aged, and what a program job's spec leaves unknown.
#include "query/run_report.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "spec/job_spec.h"
#include "spec/memory_estimate.h"

namespace ringmaster::storage {

namespace {

using nlohmann::json;

// A number as JSON: NaN and infinities (a hand-edited database) become null.
json number(double value) {
  return std::isfinite(value) ? json(value) : json(nullptr);
}

json optionalJson(const std::optional<double>& value) {
  return value ? number(*value) : json(nullptr);
}

template <typename T>
json optionalJson(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

// --- building ------------------------------------------------------------------------------------

std::vector<AttemptReport> attemptReports(const std::vector<AttemptRecord>& attempts) {
  std::vector<AttemptReport> reports;
  for (size_t i = 0; i < attempts.size(); ++i) {
    AttemptReport report{.record = attempts[i]};
    const std::optional<int64_t> first = attempts[i].first_step;
    const std::optional<int64_t> before = i > 0 ? attempts[i - 1].last_step : std::nullopt;
    if (first && before && *before >= *first) report.rolled_back = std::pair(*first, *before);
    reports.push_back(std::move(report));
  }
  return reports;
}

// What the stored spec says: the spec itself, a program job's section, the planned steps and each
// rank's estimated memory (an engine job's only).
std::vector<double> readStoredSpec(RunReport& report) {
  const std::string& text = report.summary.run.spec_json;
  report.spec = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (report.spec.is_discarded()) report.spec = nullptr;
  const SpecParseResult parsed = parseJobSpec(text);
  std::vector<double> estimates;
  if (!parsed.ok()) {
    // One written by another version: train.steps as written, if it says.
    const json* steps =
        report.spec.is_object() && report.spec.contains("train") ? &report.spec["train"] : nullptr;
    if (steps && steps->is_object() && steps->contains("steps") &&
        (*steps)["steps"].is_number_integer())
      report.planned_steps = (*steps)["steps"].get<int64_t>();
  } else if (parsed.spec->program) {
    report.program = parsed.spec->program;
    report.planned_steps = parsed.spec->program->steps;
  } else {
    report.planned_steps = expectedSteps(*parsed.spec);
    try {
      for (const RankMemoryEstimate& rank : estimateMemory(*parsed.spec))
        estimates.push_back(rank.total());
    } catch (const Error& e) {
      // A layout without memory formulas yet (spec/strategies/mesh_memory.cpp): no estimate.
      if (e.kind() != ErrorKind::kUnavailable) throw;
      estimates.clear();
    }
  }
  return estimates;
}

std::vector<RankReport> rankReports(const Database& db, const RunReport& report,
                                    const std::vector<double>& estimates) {
  const int64_t run_id = report.summary.run.id;
  std::vector<RankReport> ranks;
  for (const RankSummary& figures : report.summary.ranks) ranks.push_back({.figures = figures});
  const auto rankAt = [&](int rank) -> RankReport* {
    return rank >= 0 && static_cast<size_t>(rank) < ranks.size() ? &ranks[static_cast<size_t>(rank)]
                                                                 : nullptr;
  };
  // The latest attempt's records (loadRanks): a restarted rank's host or pid may have changed.
  for (const RankRecord& record : loadRanks(db, run_id))
    if (RankReport* rank = rankAt(record.rank)) rank->record = record;
  for (const RankCommStats& comm : commStatsByRank(db, run_id))
    if (RankReport* rank = rankAt(comm.rank)) rank->comm = comm;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (r < estimates.size()) ranks[r].estimated_memory = estimates[r];
    if (r < report.live.rank_states.size()) ranks[r].waiting_on = report.live.rank_states[r];
  }
  return ranks;
}

// --- JSON ----------------------------------------------------------------------------------------

json rankFiguresJson(const RankSummary& rank) {
  return {{"rank", rank.rank},
          {"last_step", rank.last_step},
          {"samples_per_second", number(rank.samples_per_second)},
          {"mean_step_ms", number(rank.mean_step_ms)},
          {"peak_memory", rank.peak_memory},
          {"tokens_per_second", optionalJson(rank.tokens_per_second)},
          {"mfu", optionalJson(rank.mfu)},
          {"lr", optionalJson(rank.lr)},
          {"loss_scale", optionalJson(rank.loss_scale)},
          {"skipped_steps", optionalJson(rank.skipped_steps)}};
}

json rankJson(const RankReport& rank) {
  json row = rankFiguresJson(rank.figures);
  const std::optional<RankRecord>& record = rank.record;
  row["host"] = record ? json(record->host) : json(nullptr);
  row["pid"] = record ? json(record->pid) : json(nullptr);
  row["device"] = record ? json(record->device) : json(nullptr);
  row["device_name"] = record ? json(record->device_name) : json(nullptr);
  row["status"] = record ? optionalJson(record->status) : json(nullptr);
  row["coords"] =
      record && record->coords
          ? json{{"dp", record->coords->dp}, {"tp", record->coords->tp}, {"pp", record->coords->pp}}
          : json(nullptr);
  row["estimated_memory"] = optionalJson(rank.estimated_memory);
  // Its communication, but the step time is its step events' (figures), as everywhere else.
  json comm = toJson(rank.comm);
  comm.erase("rank");
  comm.erase("mean_step_ms");
  row.update(comm);
  row["waiting_on"] = rank.waiting_on.empty() ? json(nullptr) : json(rank.waiting_on);
  return row;
}

json attemptJson(const AttemptReport& attempt) {
  const AttemptRecord& a = attempt.record;
  const auto& rolled = attempt.rolled_back;
  return {{"attempt", a.attempt},
          {"started_at", number(a.started_at)},
          {"ended_at", optionalJson(a.ended_at)},
          {"first_step", optionalJson(a.first_step)},
          {"last_step", optionalJson(a.last_step)},
          {"rolled_back", rolled ? json::array({rolled->first, rolled->second}) : json(nullptr)},
          {"error", optionalJson(a.error)},
          {"error_rank", optionalJson(a.error_rank)},
          {"error_host", optionalJson(a.error_host)}};
}

json evalJson(const EvalPoint& eval) {
  return {{"step", eval.step},
          {"rank", eval.rank},
          {"val_loss", optionalJson(eval.val_loss)},
          {"perplexity", optionalJson(eval.perplexity)},
          {"tokens", eval.tokens},
          {"eval_ms", number(eval.eval_ms)}};
}

json diagnosisJson(const HangDiagnosis& d) {
  return {{"group", d.group},     {"op", d.op},
          {"seq", d.op_seq},      {"peer", optionalJson(d.peer)},
          {"stuck", d.stuck},     {"silent", d.silent},
          {"waiting", d.waiting}, {"waiting_s", number(d.waiting_s)},
          {"message", d.message}};
}

json progressJson(const RankProgress& r) {
  return {{"rank", r.rank},
          {"group", r.group},
          {"t", number(r.t)},
          {"age_s", number(r.age_s)},
          {"step", optionalJson(r.step)},
          {"started", r.started},
          {"completed", r.completed},
          {"completed_op", optionalJson(r.completed_op)},
          {"op", optionalJson(r.op)},
          {"op_seq", optionalJson(r.op_seq)},
          {"waiting_s", optionalJson(r.waiting_s)}};
}

json hangJson(const LiveProgress& live) {
  json diagnoses = json::array();
  for (const HangDiagnosis& d : live.hangs) diagnoses.push_back(diagnosisJson(d));
  json ranks = json::array();
  for (const RankProgress& r : live.ranks) {
    json row = progressJson(r);
    const auto i = static_cast<size_t>(r.rank);
    row["state"] = i < live.rank_states.size() ? live.rank_states[i] : "";
    ranks.push_back(std::move(row));
  }
  return {{"running", live.running}, {"diagnoses", diagnoses}, {"ranks", ranks}};
}

json logLineJson(const LogLine& line) {
  return {{"rank", optionalJson(line.rank)},
          {"t", number(line.t)},
          {"level", line.level},
          {"message", line.message}};
}

template <typename T, typename Format>
json arrayOf(const std::vector<T>& items, Format format) {
  json out = json::array();
  for (const T& item : items) out.push_back(format(item));
  return out;
}

}  // namespace

json toJson(const CommOpStats& op) {
  return {{"op", op.op},
          {"bytes", op.bytes},
          {"count", op.count},
          {"total_ms", number(op.total_ms)},
          {"wait_ms", optionalJson(op.wait_ms)},
          {"p50_ms", number(op.p50_ms)},
          {"p99_ms", number(op.p99_ms)},
          {"algbw_gbps", number(op.algbw_gbps)},
          {"busbw_gbps", number(op.busbw_gbps)}};
}

json toJson(const RankCommStats& rank) {
  return {{"rank", rank.rank},
          {"operations", rank.operations},
          {"comm_ms", number(rank.comm_ms)},
          {"wait_ms", optionalJson(rank.wait_ms)},
          {"transfer_ms", optionalJson(rank.transfer_ms)},
          {"mean_step_ms", number(rank.mean_step_ms)},
          {"mean_compute_ms", number(rank.mean_compute_ms)},
          {"mean_exposed_comm_ms", number(rank.mean_exposed_comm_ms)},
          {"collectives_measured", rank.collectives_measured},
          {"mean_wait_ms", optionalJson(rank.mean_wait_ms)},
          {"peers_mean_wait_ms", optionalJson(rank.peers_mean_wait_ms)},
          {"straggler", rank.straggler}};
}

RunReport buildRunReport(const Database& db, int64_t run_id, double now) {
  RunReport report;
  report.summary = summarizeRun(db, run_id);
  const RunRecord& run = report.summary.run;
  const std::vector<double> estimates = readStoredSpec(report);
  for (const RankSummary& rank : report.summary.ranks)
    report.peak_memory = std::max(report.peak_memory, rank.peak_memory);
  // An ended run's reports are aged to its end, not to whenever the report is read.
  const double clock =
      run.status == "running" || run.status == "pending" ? now : run.ended_at.value_or(now);
  report.live = loadLiveProgress(db, run_id, clock);
  report.ranks = rankReports(db, report, estimates);
  report.attempts = attemptReports(loadAttempts(db, run_id));
  report.evals = loadEvals(db, run_id);
  report.comm_ops = commStatsByOp(db, run_id);
  report.comm_dims = commByDimension(db, run_id);
  report.bubble_split = runBubbleSplit(db, run_id, run.spec_json);
  report.ingest = loadIngestCounts(db, run_id);
  report.problems = loadProblemLines(db, run_id, kReportedProblems);
  if (run.error && run.error_rank) {
    const int attempt = report.attempts.empty() ? 0 : report.attempts.back().record.attempt;
    report.error_output = loadErrorOutput(db, run_id, attempt, *run.error_rank);
  }
  report.metrics = metricNames(db, run_id);
  return report;
}

// The run's own fields, as every run has them.
static json recordJson(const RunRecord& run) {
  return {{"id", run.id},
          {"name", run.name},
          {"strategy", run.strategy},
          {"world_size", run.world_size},
          {"mesh", {{"dp", run.mesh.dp}, {"tp", run.mesh.tp}, {"pp", run.mesh.pp}}},
          {"status", run.status},
          {"detached", run.detached},
          {"created_at", number(run.created_at)},
          {"started_at", optionalJson(run.started_at)},
          {"ended_at", optionalJson(run.ended_at)},
          {"duration_s", number(run.durationSeconds())},
          {"error", optionalJson(run.error)},
          {"error_rank", optionalJson(run.error_rank)},
          {"error_host", optionalJson(run.error_host)},
          {"tags", run.tags},
          {"note", optionalJson(run.note)}};
}

json toJson(const RunRecord& run) {
  json out = recordJson(run);
  // A run handed to a scheduler (issue 35): its kind, job id, state, reason and nodes.
  if (const std::optional<SchedulerJob>& job = run.scheduler)
    out["scheduler"] = {{"kind", job->kind},
                        {"job_id", job->job_id},
                        {"state", job->state},
                        {"reason", job->reason},
                        {"nodes", job->nodes}};
  return out;
}

json runListEntry(const Database& db, const RunRecord& run) {
  json entry = toJson(run);
  const std::optional<FinalLoss> loss = finalLoss(db, run.id, run.world_size);
  entry["final_step"] = loss ? loss->step : 0;
  entry["final_loss"] = loss ? number(loss->loss) : json(nullptr);
  return entry;
}

// The run, its summary figures and each rank's from its step events.
static json summaryJson(const RunSummary& summary) {
  return {{"run", toJson(summary.run)},
          {"final_step", summary.final_step},
          {"final_loss", optionalJson(summary.final_loss)},
          {"final_accuracy", optionalJson(summary.final_accuracy)},
          {"samples_per_second", number(summary.samples_per_second)},
          {"tokens_per_second", optionalJson(summary.tokens_per_second)},
          {"mfu", optionalJson(summary.mfu)},
          {"lr", optionalJson(summary.lr)},
          {"loss_scale", optionalJson(summary.loss_scale)},
          {"skipped_steps", optionalJson(summary.skipped_steps)},
          {"mean_step_ms", number(summary.mean_step_ms)},
          {"comm_share", number(summary.comm_share)},
          {"bubble_fraction", optionalJson(summary.bubble_fraction)},
          {"ranks", arrayOf(summary.ranks, rankFiguresJson)}};
}

json toJson(const BubbleSplit& split) {
  json stages = arrayOf(split.stages, [](const StageCost& stage) {
    return json{{"stage", stage.stage},
                {"rank", stage.rank},
                {"forward_ms", number(stage.forward_us / 1000)},
                {"backward_ms", number(stage.backward_us / 1000)},
                {"weight_ms", number(stage.weight_us / 1000)}};
  });
  return {{"planned", number(split.planned)},
          {"replayed", number(split.replayed)},
          {"measured", number(split.measured)},
          {"imbalance_pts", number(split.imbalancePoints())},
          {"overhead_pts", number(split.overheadPoints())},
          {"slowest_stage", split.slowest_stage},
          {"slowest_rank", split.stages.at(static_cast<size_t>(split.slowest_stage)).rank},
          {"steps", split.steps},
          {"stages", stages},
          {"text", describeBubbleSplit(split)}};
}

json toJson(const RunReport& report) {
  json document = summaryJson(report.summary);
  document["version"] = kRunReportVersion;
  document["spec"] = report.spec;
  document["program"] = report.program ? toJson(*report.program) : json(nullptr);
  document["planned_steps"] = report.planned_steps;
  document["peak_memory"] = report.peak_memory;
  document["ranks"] = arrayOf(report.ranks, rankJson);
  document["attempts"] = arrayOf(report.attempts, attemptJson);
  document["evals"] = arrayOf(report.evals, evalJson);
  document["comm_ops"] = arrayOf(report.comm_ops, [](const CommOpStats& op) { return toJson(op); });
  document["comm_dims"] = toJson(report.comm_dims);
  document["bubble_split"] = report.bubble_split ? toJson(*report.bubble_split) : json(nullptr);
  document["hang"] = hangJson(report.live);
  document["ingest"] = {{"stored", report.ingest.stored},
                        {"duplicates", report.ingest.duplicates},
                        {"malformed", report.ingest.malformed},
                        {"dropped", report.ingest.dropped}};
  document["problems"] = {{"total", report.problems.total},
                          {"last", arrayOf(report.problems.last, logLineJson)}};
  document["error_output"] = report.error_output;
  document["metrics"] = report.metrics;
  return document;
}

}  // namespace ringmaster::storage
