// Issue 37, the layout advisor: `ringmaster plan` run as a real program on the GPT example over 4
// local ranks lists the layouts the library enumerates, with their estimates, predictions and the
// top K marked, as text and as JSON; it uses the measurements kept beside the database and takes
// new ones with --remeasure; a device memory given drops layouts saying why; what it cannot do is
// refused with the error policy's exit codes. Every process is reaped by CapturedProcess.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "plan/layout_cost.h"
#include "plan/layout_probes.h"
#include "plan/layout_trials.h"
#include "query/run_report.h"
#include "query/runs.h"
#include "query/sweep_report.h"
#include "query/sweeps.h"
#include "recorder/sweep_records.h"

namespace ringmaster {
namespace {

using nlohmann::json;
using testing::CliResult;
using testing::exitedWith;

constexpr double kDeviceMemory = 40.0 * 1024 * 1024;  // --device-memory 40M

json gptOnRanks(int ranks) {
  json spec = testing::exampleSpec("gpt_text");
  spec["launch"]["hosts"] = json::array({{{"host", "localhost"}, {"ranks", ranks}}});
  return spec;
}

// Figures as a probe would give them, kept for the host set so that no probe runs.
plan::Measurements keptFigures() {
  plan::Measurements m;
  m.flops_per_s = {{Precision::kFp32, 8e9}, {Precision::kBf16, 7e9}};
  for (int ranks : {2, 4}) {
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "sendrecv"})
      m.curves.push_back({op, ranks, 40e-6, 2e9 / ranks});
  }
  return m;
}

class PlanCli : public testing::CliRunTest {
 protected:
  void keep(const std::string& host_set, const plan::Measurements& measured) {
    json kept = json::object();
    kept[host_set] = measured.toJson();
    std::ofstream(plan::measurementsPath(dbPath())) << kept.dump();
  }
};

TEST_F(PlanCli, JsonListsEveryValidLayoutWithItsEstimatePredictionAndTheTopMarked) {
  const json spec = gptOnRanks(4);
  const std::string path = writeSpec("gpt4", spec);
  keep("cpu localhost:4", keptFigures());
  const CliResult r =
      runRingmaster({"plan", path, "--json", "--top", "3", "--device-memory", "40M"});
  ASSERT_TRUE(exitedWith(r.status, 0)) << r.status.describe() << r.err;
  const json out = json::parse(r.out);
  const plan::LayoutEnumeration expected = plan::enumerateLayouts(spec, kDeviceMemory);
  EXPECT_EQ(out["world"], 4);
  EXPECT_EQ(out["measurements"], keptFigures().toJson());  // kept: nothing measured again
  ASSERT_EQ(out["layouts"].size(), expected.layouts.size());
  EXPECT_EQ(out["refused"].size(), expected.refused.size());
  int top = 0, dropped = 0, position = 0;
  double previous_rate = 1e300;
  for (const json& layout : out["layouts"]) {
    top += layout["top"].get<bool>() ? 1 : 0;
    if (!layout["dropped"].is_null()) {
      ++dropped;
      EXPECT_GT(layout["memory_bytes"].get<double>(), kDeviceMemory) << layout["label"];
      EXPECT_TRUE(layout["prediction"].is_null());
      EXPECT_NE(layout["dropped"].get<std::string>().find("40.0 MiB"), std::string::npos)
          << layout["dropped"];
      continue;
    }
    EXPECT_LE(layout["memory_bytes"].get<double>(), kDeviceMemory) << layout["label"];
    EXPECT_EQ(layout["rank"], ++position);
    const json& p = layout["prediction"];
    double terms = p["compute_ms"].get<double>() + p["bubble_ms"].get<double>();
    for (const json& comm : p["comm"]) terms += comm["ms"].get<double>();
    EXPECT_NEAR(p["step_ms"].get<double>(), terms, 1e-9 * terms) << layout["label"];
    EXPECT_EQ(p["rate_unit"], "tokens/s");
    EXPECT_LE(p["rate"].get<double>(), previous_rate);
    previous_rate = p["rate"].get<double>();
    EXPECT_EQ(layout["mesh"]["dp"].get<int>() * layout["mesh"]["tp"].get<int>() *
                  layout["mesh"]["pp"].get<int>(),
              4);
    EXPECT_EQ(layout["overrides"]["strategy.mesh.dp"], layout["mesh"]["dp"]);
  }
  EXPECT_EQ(top, 3);
  EXPECT_GT(dropped, 0);
  EXPECT_GT(position, 3);
}

TEST_F(PlanCli, TextPrintsTheTableTheDroppedWithWhyAndTheRefused) {
  const std::string path = writeSpec("gpt4", gptOnRanks(4));
  keep("cpu localhost:4", keptFigures());
  const CliResult r = runRingmaster({"plan", path, "--top", "2", "--device-memory", "40M"});
  ASSERT_TRUE(exitedWith(r.status, 0)) << r.status.describe() << r.err;
  const plan::LayoutEnumeration expected = plan::enumerateLayouts(gptOnRanks(4), kDeviceMemory);
  const std::regex kRow(R"(^[ *] *([0-9]+|-) +[0-9]+x[0-9]+x[0-9]+ )");  // rank, dp x tp x pp
  int marked = 0, rows = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("*")) ++marked;
    if (std::regex_search(line, kRow)) ++rows;
  }
  EXPECT_EQ(marked, 2) << r.out;
  EXPECT_EQ(rows, static_cast<int>(expected.layouts.size())) << r.out;
  EXPECT_NE(r.out.find("step ms"), std::string::npos);
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos);
  EXPECT_NE(r.out.find("# measurements (kept)"), std::string::npos);
  EXPECT_NE(r.out.find("Dropped for memory:"), std::string::npos);
  for (const plan::PlannedLayout& planned : expected.layouts) {
    if (planned.dropped)
      EXPECT_NE(r.out.find(planned.layout.label() + ": " + *planned.dropped), std::string::npos);
  }
  EXPECT_NE(r.out.find(fmt::format("Refused by the spec validation ({})", expected.refused.size())),
            std::string::npos);
}

TEST_F(PlanCli, RemeasureProbesTheHostsAndKeepsTheNewFiguresOwnerOnly) {
  const std::string path = writeSpec("gpt2", gptOnRanks(2));
  keep("cpu localhost:2", keptFigures());
  const CliResult r = runRingmaster({"plan", path, "--json", "--remeasure"});
  ASSERT_TRUE(exitedWith(r.status, 0)) << r.status.describe() << r.err;
  const json measured = json::parse(r.out)["measurements"];
  EXPECT_NE(measured, keptFigures().toJson());
  EXPECT_GT(measured["flops_per_s"]["fp32"].get<double>(), 0);
  std::ifstream in(plan::measurementsPath(dbPath()));
  EXPECT_EQ(json::parse(in)["cpu localhost:2"], measured);
  EXPECT_EQ(std::filesystem::status(plan::measurementsPath(dbPath())).permissions() &
                std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

TEST_F(PlanCli, WhatItCannotDoIsRefusedWithTheErrorPolicysExitCodes) {
  const std::string path = writeSpec("gpt4", gptOnRanks(4));
  CliResult r = runRingmaster({"plan", path, "--top", "-1"});
  EXPECT_TRUE(exitedWith(r.status, 2)) << r.status.describe() << r.err;
  r = runRingmaster({"plan", path, "--set", "train.batch_size=-3"});
  EXPECT_TRUE(exitedWith(r.status, 2)) << r.status.describe() << r.err;
  EXPECT_NE(r.err.find("train.batch_size"), std::string::npos) << r.err;
  // Ranks on another host: nothing kept for that host set, and this build measures local hosts.
  json remote = gptOnRanks(4);
  remote["launch"]["hosts"] = json::array({{{"host", "gpu-node-7"}, {"ranks", 4}}});
  r = runRingmaster({"plan", writeSpec("remote", remote)});
  EXPECT_TRUE(exitedWith(r.status, 3)) << r.status.describe() << r.err;
  EXPECT_NE(r.err.find("local hosts only"), std::string::npos) << r.err;
}

// A tiny GPT on 2 ranks: a few steps of each layout take a second or two.
json tinyGpt() {
  json spec = gptOnRanks(2);
  spec["model"].update({{"context", 16}, {"dim", 32}, {"heads", 2}, {"layers", 2}});
  spec["data"] = {{"kind", "text"}, {"path", "licenses.txt"}, {"val_fraction", 0.1}};
  spec["train"].update({{"steps", 4}, {"batch_size", 8}, {"eval_every", 0}});
  spec["telemetry"]["every_steps"] = 1;
  return spec;
}

TEST_F(PlanCli, TrialsSetEachRunsMeasuredTermsBesideItsPrediction) {
  // Three layouts run for real as a sweep runs its members; a fourth never started.
  json spec = tinyGpt();
  spec["data"]["path"] = (dir_ / "licenses.txt").string();
  std::filesystem::create_directories(dir_);
  {
    std::ofstream text(dir_ / "licenses.txt");
    for (int i = 0; i < 400; ++i)
      text << "The quick brown fox jumps over the lazy dog. " << i << "\n";
  }
  const plan::LayoutEnumeration layouts = plan::enumerateLayouts(spec, 1e15);
  std::vector<plan::RankedLayout> predicted;
  for (const char* label : {"dp2 tp1 pp1 ddp fp32", "dp1 tp1 pp2 - 1f1b m4 fp32",
                            "dp1 tp2 pp1 - fp32", "dp1 tp1 pp2 - gpipe m2 fp32"}) {
    for (const plan::PlannedLayout& planned : layouts.layouts) {
      if (planned.layout.label() == label)
        predicted.push_back({planned, plan::predictStep(planned.spec, keptFigures())});
    }
  }
  ASSERT_EQ(predicted.size(), 4u);
  const std::string path = writeSpec("tiny", spec);
  std::vector<int64_t> runs;
  for (int position = 0; position < 3; ++position) {
    std::vector<std::string> args = {"run", path, "--json"};
    for (const std::string& assignment :
         plan::overrideAssignments(predicted[position].planned.overrides))
      args.insert(args.end(), {"--set", assignment});
    const CliResult run = runRingmaster(args);
    ASSERT_TRUE(exitedWith(run.status, 0)) << run.status.describe() << run.err;
    runs.push_back(json::parse(run.out)["run"]["id"].get<int64_t>());
  }
  // The sweep as its runner records it: every member planned, three started with their runs, the
  // fourth not started (cancelled before it).
  storage::Database db(dbPath());
  storage::NewSweep sweep{.name = "trials",
                          .spec_path = path,
                          .spec_json = spec.dump(),
                          .plan_json = R"({"method": "grid", "axes": []})",
                          .created_at = 1};
  for (const plan::RankedLayout& layout : predicted)
    sweep.member_overrides_json.push_back(plan::overridesObject(layout.planned.overrides).dump());
  const int64_t sweep_id = storage::createSweep(db, sweep);
  for (int position = 0; position < 3; ++position)
    storage::recordSweepMemberStarted(db, sweep_id, position, runs[position]);
  EXPECT_EQ(storage::recordSweepMembersNotStarted(db, sweep_id), 1);
  storage::finishSweep(db, sweep_id, "cancelled", 2);
  const plan::TrialsReport report =
      plan::compareTrials(db, storage::sweepReport(db, sweep_id, 3), predicted, 3);
  ASSERT_EQ(report.trials.size(), 4u);
  auto term = [](const plan::TrialComparison& trial, const std::string& name) {
    for (const plan::TermPair& t : trial.terms) {
      if (t.term == name) return t;
    }
    ADD_FAILURE() << "no term " << name;
    return plan::TermPair{};
  };
  for (int position = 0; position < 3; ++position) {
    const plan::TrialComparison& trial = report.trials[position];
    EXPECT_EQ(trial.status, "completed");
    ASSERT_TRUE(trial.run.has_value());
    const storage::RunReport run = storage::buildRunReport(db, *trial.run, 0);
    EXPECT_EQ(term(trial, "step").measured_ms, run.summary.mean_step_ms);
    EXPECT_EQ(trial.measured_rate, run.summary.tokens_per_second);
    EXPECT_TRUE(term(trial, "compute").measured_ms.has_value());
    EXPECT_EQ(trial.predicted_rate, predicted[position].prediction->rate());
  }
  EXPECT_TRUE(term(report.trials[0], "comm dp").measured_ms.has_value());
  EXPECT_GT(*term(report.trials[1], "bubble").measured_ms, 0);  // the pipeline's, measured
  EXPECT_TRUE(term(report.trials[1], "comm pp").measured_ms.has_value());
  // tp's collectives wait inside compute: its term is the dimension's time per step.
  const storage::RunReport tp_run = storage::buildRunReport(db, *report.trials[2].run, 0);
  ASSERT_EQ(tp_run.comm_dims.dims.at(0).dim, "tp");
  EXPECT_EQ(term(report.trials[2], "comm tp").measured_ms, tp_run.comm_dims.dims[0].ms_per_step);
  EXPECT_GT(*term(report.trials[2], "comm tp").measured_ms, 0);
  EXPECT_EQ(report.trials[3].status, "not_started");
  EXPECT_FALSE(report.trials[3].measured_rate.has_value());
  EXPECT_TRUE(report.rank_correlation.has_value());  // three measured trials
  EXPECT_TRUE(report.furthest_term.has_value());
  const std::string text = plan::trialsText(report);
  for (const plan::RankedLayout& layout : predicted)
    EXPECT_NE(text.find(layout.planned.layout.label()), std::string::npos) << text;
  EXPECT_NE(text.find("rank correlation"), std::string::npos);
  EXPECT_EQ(plan::toJson(report)["trials"].size(), 4u);
}

TEST_F(PlanCli, TrialsRunTheTopLayoutsAsASweepAndLaunchRunsTheFastest) {
  json spec = tinyGpt();
  spec["data"]["path"] = (dir_ / "licenses.txt").string();
  spec["train"]["steps"] = 7;
  std::filesystem::create_directories(dir_);
  {
    std::ofstream text(dir_ / "licenses.txt");
    for (int i = 0; i < 400; ++i) text << "Pack my box with five dozen liquor jugs. " << i << "\n";
  }
  const std::string path = writeSpec("tiny", spec);
  keep("cpu localhost:2", keptFigures());
  const CliResult r =
      runRingmaster({"plan", path, "--json", "--trials", "2", "--trial-steps", "3", "--launch"});
  ASSERT_TRUE(exitedWith(r.status, 0)) << r.status.describe() << r.err;
  const json out = json::parse(r.out);
  // The trials are the two best predicted layouts, in that order, each a real run of 3 steps.
  std::vector<json> top;
  for (const json& layout : out["layouts"])
    if (layout["rank"].is_number() && layout["rank"].get<int>() <= 2) top.push_back(layout);
  ASSERT_EQ(top.size(), 2u);
  ASSERT_EQ(out["trials"]["trials"].size(), 2u);
  storage::Database db(dbPath());
  const storage::SweepRecord sweep = storage::loadSweep(db, 1);
  EXPECT_EQ(json::parse(sweep.plan_json)["method"], "advisor");
  ASSERT_EQ(sweep.members.size(), 2u);
  double fastest_rate = 0;
  int64_t fastest_run = 0;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(json::parse(sweep.members[i].overrides_json), top[i]["overrides"]);
    const json& trial = out["trials"]["trials"][i];
    ASSERT_TRUE(sweep.members[i].run_id);
    EXPECT_EQ(trial["run"], *sweep.members[i].run_id);
    const storage::RunReport run = storage::buildRunReport(db, *sweep.members[i].run_id, 0);
    EXPECT_EQ(run.summary.final_step, 3);
    EXPECT_EQ(trial["measured_rate"].get<double>(), run.summary.tokens_per_second);
    ASSERT_TRUE(run.summary.tokens_per_second.has_value());
    if (*run.summary.tokens_per_second > fastest_rate)
      fastest_rate = *run.summary.tokens_per_second, fastest_run = *sweep.members[i].run_id;
  }
  // --launch ran the fastest trial's layout at the spec's own length.
  const std::vector<storage::RunRecord> runs = storage::listRuns(db);
  ASSERT_EQ(runs.size(), 3u);
  const storage::RunRecord& launched = runs.front();
  EXPECT_FALSE(storage::sweepOfRun(db, launched.id).has_value());
  EXPECT_EQ(storage::buildRunReport(db, launched.id, 0).summary.final_step, 7);
  const json fastest_spec = json::parse(storage::loadRun(db, fastest_run).spec_json);
  const json launched_spec = json::parse(launched.spec_json);
  EXPECT_EQ(launched_spec["strategy"], fastest_spec["strategy"]);
  EXPECT_EQ(launched_spec["train"]["batch_size"], fastest_spec["train"]["batch_size"]);
}

}  // namespace
}  // namespace ringmaster
