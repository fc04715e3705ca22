// `ringmaster plan`: reads the spec (with --set), enumerates and ranks its layouts, and prints
// them.
#include "cli/plan_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/run_command.h"
#include "cli/sweep_command.h"
#include "comm/bench/comm_benchmark.h"
#include "core/error.h"
#include "core/number_format.h"
#include "db/database.h"
#include "db/files.h"
#include "plan/layout_cost.h"
#include "plan/layout_probes.h"
#include "plan/layout_trials.h"
#include "query/sweep_report.h"
#include "run/run_session.h"
#include "sweep/sweep_runner.h"
#include "telemetry/writer.h"

namespace ringmaster::cli {
namespace {

std::string msText(std::optional<double> seconds) {
  return seconds ? fmt::format("{:.2f}", 1e3 * *seconds) : "-";
}

std::string layoutLine(const plan::RankedLayout& entry, int position, int top) {
  const plan::Layout& layout = entry.planned.layout;
  const std::string schedule =
      layout.schedule
          ? fmt::format("{}{}", toString(*layout.schedule),
                        layout.virtual_stages > 1 ? fmt::format("x{}", layout.virtual_stages) : "")
          : "-";
  std::string line = fmt::format(
      "{}{:>4} {:>2}x{}x{} {:<19} {:<17} {:>3} {:>4} {:<4} {:>10}",
      position > 0 && position <= top ? '*' : ' ', position > 0 ? std::to_string(position) : "-",
      layout.mesh.dp, layout.mesh.tp, layout.mesh.pp, layout.dpMode(), schedule,
      layout.micro_batches, layout.checkpointing ? "on" : "off", toString(layout.precision),
      formatBytes(entry.planned.memory_bytes, kTerminalBytes));
  if (!entry.prediction) return line + "\n";
  const plan::StepPrediction& p = *entry.prediction;
  return line + fmt::format(" {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>10.0f}\n", msText(p.step_s),
                            msText(p.compute_s), msText(p.bubble_s),
                            msText(p.commSeconds(MeshDim::kDp)),
                            msText(p.commSeconds(MeshDim::kTp)),
                            msText(p.commSeconds(MeshDim::kPp)), p.rate());
}

std::string measurementsText(const plan::Measurements& measured, bool measured_now) {
  std::string text = fmt::format("# measurements ({}):", measured_now ? "measured now" : "kept");
  for (const auto& [precision, flops] : measured.flops_per_s)
    text += fmt::format(" {} {:.1f} GFLOP/s a rank;", toString(precision), flops / 1e9);
  for (const plan::CommCurve& c : measured.curves) {
    text += fmt::format(" {}@{} {:.0f} us + {:.2f} GB/s;", c.op, c.ranks, 1e6 * c.latency_s,
                        c.bytes_per_s / 1e9);
  }
  return text + "\n";
}

std::string dropsText(const plan::LayoutEnumeration& layouts) {
  std::string text;
  for (const plan::PlannedLayout& planned : layouts.layouts) {
    if (planned.dropped)
      text += fmt::format("  {}: {}\n", planned.layout.label(), *planned.dropped);
  }
  if (!text.empty()) text = "Dropped for memory:\n" + text;
  if (!layouts.refused.empty()) {
    text += fmt::format("Refused by the spec validation ({}):\n", layouts.refused.size());
    for (const plan::RefusedLayout& refused : layouts.refused)
      text += fmt::format("  {}: {}\n", refused.layout.label(), refused.problem);
  }
  return text;
}

nlohmann::json baseDocument(const PlanCommandOptions& options) {
  const std::string text = readJobSpecText(options.spec_path);
  if (const std::optional<SpecProblem> problem = checkSpecText(text))
    RM_THROW(kSpec, fmt::format("{}: {}", options.spec_path, problem->message));
  nlohmann::json document = nlohmann::json::parse(text);
  session::applyOverrides(document, options.overrides);
  return document;
}

// The table as text: one line per layout (a '*' on the top K), its terms, then the dropped and
// the refused.
std::string planText(const plan::LayoutEnumeration& layouts,
                     const std::vector<plan::RankedLayout>& ranked,
                     const plan::Measurements& measured, int top, bool measured_now) {
  int kept = 0;
  for (const plan::RankedLayout& entry : ranked) kept += entry.prediction ? 1 : 0;
  const bool tokens = kept > 0 && ranked.front().prediction->has_tokens;
  std::string text = fmt::format(
      "# {} ranks, global batch {}; {} valid layout(s), {} dropped for memory, {} refused; "
      "device memory a rank: {}\n",
      worldSize(layouts.base), layouts.global_batch, layouts.layouts.size(),
      layouts.layouts.size() - static_cast<size_t>(kept), layouts.refused.size(),
      layouts.device_memory
          ? fmt::format("{} ({})", formatBytes(*layouts.device_memory, kTerminalBytes),
                        layouts.device_memory_source)
          : "unknown (nothing dropped)");
  text += measurementsText(measured, measured_now);
  text += fmt::format(
      " rank  dpxtpxpp dp mode             schedule          m  ckpt prec     memory   step ms "
      "compute   bubble  comm dp  comm tp  comm pp {:>10}\n",
      tokens ? "tokens/s" : "samples/s");
  int position = 0;
  for (const plan::RankedLayout& entry : ranked)
    text += layoutLine(entry, entry.prediction ? ++position : 0, top);
  return text + dropsText(layouts);
}

// The top layouts as a sweep of short runs: each member one layout's overrides, the base spec
// with --set applied and `trial_steps` steps.
session::PreparedSweep trialSweep(const PlanCommandOptions& options, nlohmann::json document,
                                  const std::vector<plan::SpecOverrides>& members) {
  document["train"]["steps"] = options.trial_steps;
  session::PreparedSweep sweep{
      .name = "plan " + std::filesystem::path(options.spec_path).stem().string(),
      .spec_path = options.spec_path,
      .base = std::move(document),
      .plan = {.count = static_cast<int>(members.size()), .given = true},
      .members = members};
  // An axis per field the layouts set, listing its values in the members' order.
  for (const plan::SpecOverrides& member : members) {
    for (const auto& [field, value] : member) {
      const std::string& name = field;  // (Debian 12's clang 14 captures no structured binding)
      auto axis = std::find_if(sweep.plan.axes.begin(), sweep.plan.axes.end(),
                               [&](const session::SweepAxis& a) { return a.field == name; });
      if (axis == sweep.plan.axes.end())
        axis = sweep.plan.axes.insert(sweep.plan.axes.end(), {.field = name, .source = name});
      if (std::find(axis->values.begin(), axis->values.end(), value) == axis->values.end())
        axis->values.push_back(value);
    }
  }
  return sweep;
}

struct TrialsOutcome {
  int exit_code = 0;
  plan::TrialsReport report;
};

// Runs the trials in the foreground (Ctrl-C cancels them) and compares them with the predictions.
TrialsOutcome runTrials(const PlanCommandOptions& options, const nlohmann::json& document,
                        const std::vector<plan::RankedLayout>& ranked) {
  const std::vector<plan::SpecOverrides> members = plan::topLayoutMembers(ranked, options.trials);
  RM_CHECK_ARG(!members.empty(), "--trials: no layout fits this spec's hosts");
  const session::PreparedSweep sweep = trialSweep(options, document, members);
  int64_t sweep_id = 0;
  {
    storage::Database db(options.db_path);
    sweep_id = session::recordSweep(db, sweep, 1, false, telemetryNow());
  }
  fmt::print(stderr, "ringmaster plan: trials of the top {} layouts, {} steps each, as sweep {}\n",
             members.size(), options.trial_steps, sweep_id);
  TrialsOutcome outcome;
  outcome.exit_code = driveSweep(options.db_path, sweep_id, options.grace_s, false, false,
                                 /*print_report=*/!options.json);
  const std::vector<plan::RankedLayout> predicted(
      ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(members.size()));
  storage::Database db(options.db_path);
  outcome.report = plan::compareTrials(db, storage::sweepReport(db, sweep_id, telemetryNow()),
                                       predicted, telemetryNow());
  return outcome;
}

// The layout to launch: the trials' fastest measured where any completed, else the best
// predicted.
plan::SpecOverrides winnerOf(const std::vector<plan::RankedLayout>& ranked,
                             const std::optional<plan::TrialsReport>& trials) {
  const std::vector<plan::SpecOverrides> top =
      plan::topLayoutMembers(ranked, trials ? static_cast<int>(trials->trials.size()) : 1);
  RM_CHECK_ARG(!top.empty(), "--launch: no layout fits this spec's hosts");
  std::optional<size_t> fastest;
  for (size_t i = 0; trials && i < trials->trials.size() && i < top.size(); ++i) {
    const std::optional<double> rate = trials->trials[i].measured_rate;
    if (rate && trials->trials[i].status == "completed" &&
        (!fastest || *rate > *trials->trials[*fastest].measured_rate))
      fastest = i;
  }
  return top[fastest.value_or(0)];
}

int launchWinner(const PlanCommandOptions& options, const plan::SpecOverrides& winner) {
  RunCommandOptions run{.spec_path = options.spec_path,
                        .db_path = options.db_path,
                        .overrides = options.overrides,
                        .report_on_stderr = options.json,
                        .grace_s = options.grace_s};
  for (const std::string& each : session::overrideArguments(winner)) run.overrides.push_back(each);
  fmt::print(stderr, "ringmaster plan: launching {} {}\n", options.spec_path,
             fmt::join(run.overrides, " "));
  return runCommand(run);
}

}  // namespace

int planCommand(const PlanCommandOptions& options) {
  RM_CHECK_ARG(options.top >= 0, fmt::format("--top must not be negative, got {}", options.top));
  const nlohmann::json document = baseDocument(options);
  std::optional<double> device_memory;
  if (!options.device_memory.empty())
    device_memory = static_cast<double>(parseByteSize(options.device_memory));
  const plan::LayoutEnumeration layouts = plan::enumerateLayouts(document, device_memory);
  const std::vector<Precision> precisions = plan::defaultChoices(layouts.base).precisions;
  const std::filesystem::path file = plan::measurementsPath(options.db_path);
  if (file.has_parent_path()) storage::createDirectories(file.parent_path());
  bool measured_now = false;
  const plan::Measurements measured = plan::keptMeasurements(
      file, plan::hostSetKey(layouts.base), options.remeasure,
      [&] { return plan::measureHosts(layouts.base, precisions); }, &measured_now);
  const std::vector<plan::RankedLayout> ranked = plan::rankLayouts(layouts, measured);
  if (!options.json)
    fmt::print("{}", planText(layouts, ranked, measured, options.top, measured_now));
  std::fflush(stdout);
  std::optional<TrialsOutcome> trials;
  if (options.trials > 0) trials = runTrials(options, document, ranked);
  if (options.json) {
    nlohmann::json out = plan::planJson(layouts, ranked, measured, options.top);
    if (trials) out["trials"] = plan::toJson(trials->report);
    fmt::print("{}\n", out.dump(2));
  } else if (trials) {
    fmt::print("\n{}", plan::trialsText(trials->report));
  }
  std::fflush(stdout);
  if (options.launch)
    return launchWinner(options,
                        winnerOf(ranked, trials ? std::optional(trials->report) : std::nullopt));
  return trials ? trials->exit_code : 0;
}

void addPlanCommand(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<PlanCommandOptions>();
  CLI::App* plan = app.add_subcommand(
      "plan",
      "the layout advisor: every valid layout of a job spec's world with its memory "
      "estimate and predicted step time, best first");
  plan->add_option("spec", options->spec_path, "job spec (JSON)")->required();
  plan->add_option("--set", options->overrides,
                   "override a spec field first, FIELD=VALUE (VALUE as JSON, else a string); "
                   "repeatable")
      ->allow_extra_args(false);
  plan->add_option("--top", options->top, "mark the best K layouts")->capture_default_str();
  plan->add_flag("--json", options->json, "print the plan as JSON");
  plan->add_flag("--remeasure", options->remeasure,
                 "measure the hosts' throughput and bandwidths again instead of using the kept "
                 "figures (DB.plan-measurements.json)");
  plan->add_option("--device-memory", options->device_memory,
                   "memory a rank has (K / M / G), instead of the host's over its ranks");
  plan->add_option("--trials", options->trials,
                   "run the best K layouts as a sweep of short trials and compare predicted with "
                   "measured step time, term by term")
      ->check(CLI::Range(0, 1000));
  plan->add_option("--trial-steps", options->trial_steps, "steps of each trial")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  plan->add_flag("--launch", options->launch,
                 "run the winner (the trials' fastest, else the best predicted) as a run of the "
                 "spec's own length");
  commands.add(plan, [options](const CommonOptions& common) {
    options->db_path = common.databasePath();
    return planCommand(*options);
  });
}

}  // namespace ringmaster::cli
