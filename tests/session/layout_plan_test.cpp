// The layout advisor as a library (issue 37): its enumeration lists exactly what the spec
// validation accepts over every mesh of 4 ranks and the models' limits, its memory filter drops
// exactly the layouts over a given memory and says why, its cost model's terms move the way the
// planner's schedule and byte counts say, and its measurements are kept once per host set.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "common/test_paths.h"
#include "core/number_format.h"
#include "plan/layout_cost.h"
#include "plan/layout_plan.h"
#include "plan/layout_probes.h"
#include "plan/layout_trials.h"
#include "run/run_session.h"
#include "spec/strategies/pipeline_schedule.h"
#include "sweep/sweep_plan.h"

namespace ringmaster::plan {
namespace {

using nlohmann::json;

json gptOnRanks(int ranks) {
  std::ifstream in(std::string(testSourceDir()) + "/resources/examples/gpt_text.json");
  json spec = json::parse(in);
  spec["launch"]["hosts"] = json::array({{{"host", "localhost"}, {"ranks", ranks}}});
  return spec;
}

// Figures for the cost model, as a probe would give them (the tests do not time anything).
Measurements injected() {
  Measurements m;
  m.flops_per_s = {{Precision::kFp32, 10e9}, {Precision::kBf16, 20e9}};
  for (int ranks : {2, 4}) {
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "sendrecv"})
      m.curves.push_back({op, ranks, 50e-6, 1e9 / ranks});
  }
  return m;
}

bool listed(const LayoutEnumeration& layouts, const Layout& layout) {
  return std::any_of(layouts.layouts.begin(), layouts.layouts.end(),
                     [&](const PlannedLayout& p) { return p.layout == layout; });
}

// Every mesh of dp, tp, pp in 1..4 (products other than the world included) with every choice
// the enumeration makes, for the model `model_changes` gives: listed exactly when the spec
// validation accepts it.
void expectListedExactlyWhenValid(const json& model_changes) {
  json base = gptOnRanks(4);
  base["model"].update(model_changes);
  const LayoutEnumeration layouts = enumerateLayouts(base, 1e15);
  ASSERT_FALSE(layouts.layouts.empty());
  const LayoutChoices choices = defaultChoices(layouts.base);
  int valid = 0;
  for (int dp = 1; dp <= 4; ++dp) {
    for (int tp = 1; tp <= 4; ++tp) {
      for (int pp = 1; pp <= 4; ++pp) {
        const int world = dp * tp * pp;
        for (Layout layout : candidateLayouts(world, layouts.global_batch, choices)) {
          if (layout.mesh != MeshSpec{dp, tp, pp}) continue;
          const bool validates = validateWithOverrides(base, layoutOverrides(layout)).empty();
          EXPECT_EQ(listed(layouts, layout), validates)
              << layout.label() << " with " << model_changes.dump();
          valid += validates ? 1 : 0;
        }
      }
    }
  }
  EXPECT_EQ(valid, static_cast<int>(layouts.layouts.size()));
  for (const RefusedLayout& refused : layouts.refused) {
    EXPECT_FALSE(validateWithOverrides(base, layoutOverrides(refused.layout)).empty());
    EXPECT_FALSE(refused.problem.empty());
  }
}

TEST(LayoutPlan, ListsExactlyTheLayoutsTheSpecValidationAccepts) {
  expectListedExactlyWhenValid(json::object());   // 4 heads, 4 blocks: tp 4 and pp 4 allowed
  expectListedExactlyWhenValid({{"heads", 2}});   // tp 4 refused
  expectListedExactlyWhenValid({{"layers", 1}});  // 3 blocks: pp 4 refused
}

TEST(LayoutPlan, EveryMeshFactorisationOfTheWorldIsTriedAndEachLayoutRunsAsItsOverrides) {
  const json base = gptOnRanks(4);
  const LayoutEnumeration layouts = enumerateLayouts(base, 1e15);
  std::set<std::tuple<int, int, int>> meshes;
  for (const PlannedLayout& planned : layouts.layouts) {
    const MeshSpec& mesh = planned.layout.mesh;
    meshes.insert({mesh.dp, mesh.tp, mesh.pp});
    EXPECT_EQ(planned.spec.strategy.mesh, mesh);
    EXPECT_EQ(planned.spec.train.batch_size * mesh.dp, layouts.global_batch);
    EXPECT_EQ(planned.spec.train.precision, planned.layout.precision);
    EXPECT_EQ(planned.spec.train.activation_checkpointing, planned.layout.checkpointing);
    EXPECT_EQ(planned.spec.strategy.data_parallel, planned.layout.dp_kind);
    // The overrides as a sweep member stores them (one JSON object), applied as the runner
    // applies a member's, give the same spec.
    json document = base;
    std::vector<std::string> assignments;
    const json member_overrides = overridesObject(planned.overrides);
    for (const auto& [field, value] : member_overrides.items())
      assignments.push_back(field + "=" + value.dump());
    session::applyOverrides(document, assignments);
    const SpecParseResult member = parseJobSpec(document);
    ASSERT_TRUE(member.ok()) << member.describe();
    EXPECT_EQ(*member.spec, planned.spec) << planned.layout.label();
  }
  EXPECT_EQ(meshes, (std::set<std::tuple<int, int, int>>{
                        {4, 1, 1}, {2, 2, 1}, {2, 1, 2}, {1, 4, 1}, {1, 2, 2}, {1, 1, 4}}));
}

// The base's own layout (sequence parallelism, an explicit pipeline partition, the legacy form)
// keeps no layout out: each member's overrides replace it.
TEST(LayoutPlan, TheBasesOwnLayoutOptionsKeepNoLayoutOut) {
  const size_t plain = enumerateLayouts(gptOnRanks(4), 1e15).layouts.size();
  json sequence_parallel = gptOnRanks(4);
  sequence_parallel["strategy"] = {{"mesh", {{"tp", 2}}}, {"tp", {{"sequence_parallel", true}}}};
  const LayoutEnumeration sp = enumerateLayouts(sequence_parallel, 1e15);
  EXPECT_EQ(sp.layouts.size(), plain);
  for (const PlannedLayout& planned : sp.layouts)
    EXPECT_EQ(planned.spec.strategy.tp.sequence_parallel, planned.layout.mesh.tp > 1);
  json partitioned = gptOnRanks(4);
  partitioned["strategy"] = {{"mesh", {{"pp", 2}}},
                             {"pp", {{"schedule", "gpipe"}, {"stages", {{0, 1, 2}, {3, 4, 5}}}}}};
  partitioned["train"]["micro_batches"] = 2;
  EXPECT_EQ(enumerateLayouts(partitioned, 1e15).layouts.size(), plain);
  json legacy = gptOnRanks(4);
  legacy["strategy"] = {{"kind", "ddp"}, {"bucket_cap_mb", 10}};
  const LayoutEnumeration from_legacy = enumerateLayouts(legacy, 1e15);
  ASSERT_EQ(from_legacy.layouts.size(), plain);
  for (const PlannedLayout& planned : from_legacy.layouts) {
    ASSERT_EQ(planned.overrides.front().first, "strategy");  // the mesh form first
    EXPECT_TRUE(validateWithOverrides(legacy, planned.overrides).empty());
  }
}

TEST(LayoutPlan, DropsTheLayoutsOverTheDeviceMemoryAndSaysWhy) {
  const json base = gptOnRanks(4);
  const LayoutEnumeration all = enumerateLayouts(base, 1e15);
  std::vector<double> needs;
  for (const PlannedLayout& planned : all.layouts) needs.push_back(planned.memory_bytes);
  std::sort(needs.begin(), needs.end());
  const double limit = needs[needs.size() / 2];
  const LayoutEnumeration limited = enumerateLayouts(base, limit);
  ASSERT_EQ(limited.layouts.size(), all.layouts.size());
  int dropped = 0;
  for (const PlannedLayout& planned : limited.layouts) {
    EXPECT_EQ(planned.dropped.has_value(), planned.memory_bytes > limit) << planned.layout.label();
    if (!planned.dropped) continue;
    ++dropped;
    EXPECT_NE(planned.dropped->find(formatBytes(planned.memory_bytes, kTerminalBytes)),
              std::string::npos)
        << *planned.dropped;
    EXPECT_NE(planned.dropped->find(formatBytes(limit, kTerminalBytes)), std::string::npos);
    EXPECT_NE(planned.dropped->find(fmt::format("rank {}", planned.memory_rank)),
              std::string::npos);
  }
  EXPECT_GT(dropped, 0);
  // Ranked: the kept first, each predicted; the dropped after them, unpredicted.
  const std::vector<RankedLayout> ranked = rankLayouts(limited, injected());
  ASSERT_EQ(ranked.size(), limited.layouts.size());
  const size_t kept = limited.layouts.size() - static_cast<size_t>(dropped);
  for (size_t i = 0; i < ranked.size(); ++i) EXPECT_EQ(ranked[i].prediction.has_value(), i < kept);
  for (size_t i = 1; i < kept; ++i)
    EXPECT_GE(ranked[i - 1].prediction->rate(), ranked[i].prediction->rate());
  EXPECT_EQ(topLayoutMembers(ranked, 3).size(), 3u);
  EXPECT_EQ(topLayoutMembers(ranked, 3)[0], ranked[0].planned.overrides);
  // The sweep runner's own type: it runs them as they are.
  const std::vector<session::MemberOverrides> members = topLayoutMembers(ranked, 2);
  EXPECT_EQ(session::overrideArguments(members[1]),
            overrideAssignments(ranked[1].planned.overrides));
}

// The predictions of every layout of the GPT on 4 ranks with the injected measurements.
std::vector<std::pair<Layout, StepPrediction>> predictions() {
  const LayoutEnumeration layouts = enumerateLayouts(gptOnRanks(4), 1e15);
  std::vector<std::pair<Layout, StepPrediction>> out;
  for (const PlannedLayout& planned : layouts.layouts)
    out.emplace_back(planned.layout, predictStep(planned.spec, injected()));
  return out;
}

double termBytes(const StepPrediction& p, MeshDim dim) {
  for (const DimensionCost& cost : p.comm) {
    if (cost.dim == dim) return cost.bytes;
  }
  return 0;
}

TEST(LayoutCost, MoreTensorParallelRanksMoveMoreTensorParallelBytes) {
  std::map<int, double> tp_bytes;  // pp = 1, DDP, fp32, no checkpointing: by tp
  for (const auto& [layout, p] : predictions()) {
    if (layout.mesh.pp != 1 || layout.dp_kind != "ddp" || layout.checkpointing ||
        layout.precision != Precision::kFp32)
      continue;
    tp_bytes[layout.mesh.tp] = termBytes(p, MeshDim::kTp);
    EXPECT_EQ(p.commSeconds(MeshDim::kTp).has_value(), layout.mesh.tp > 1);
  }
  ASSERT_EQ(tp_bytes.size(), 3u);  // tp 1, 2, 4
  EXPECT_EQ(tp_bytes[1], 0);
  EXPECT_LT(tp_bytes[1], tp_bytes[2]);
  EXPECT_LT(tp_bytes[2], tp_bytes[4]);
}

TEST(LayoutCost, MoreMicroBatchesShrinkTheBubbleAsTheScheduleMathSays) {
  int families = 0;
  std::map<std::string, std::vector<std::pair<int, StepPrediction>>> by_family;
  for (const auto& [layout, p] : predictions()) {
    if (!layout.schedule || (*layout.schedule != PipelineSchedule::kGpipe &&
                             *layout.schedule != PipelineSchedule::k1f1b))
      continue;
    Layout family = layout;
    family.micro_batches = 0;
    by_family[family.label()].emplace_back(layout.micro_batches, p);
    // The bubble is the planned schedule's: (p-1)/(m+p-1) of the step's compute and bubble.
    const double fraction =
        theoreticalBubbleFraction(*layout.schedule, layout.mesh.pp, layout.micro_batches);
    EXPECT_NEAR(p.bubble_s / (p.bubble_s + p.compute_s), fraction, 1e-9) << layout.label();
  }
  for (auto& [family, points] : by_family) {
    std::sort(points.begin(), points.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    ASSERT_GE(points.size(), 2u) << family;
    for (size_t i = 1; i < points.size(); ++i)
      EXPECT_LT(points[i].second.bubble_s, points[i - 1].second.bubble_s) << family;
    ++families;
  }
  EXPECT_GT(families, 0);
}

TEST(LayoutCost, ComputeFollowsTheMeasuredThroughputAndCheckpointingAddsAForward) {
  std::map<std::string, StepPrediction> by_label;
  for (const auto& [layout, p] : predictions()) by_label[layout.label()] = p;
  const StepPrediction& fp32 = by_label.at("dp4 tp1 pp1 ddp fp32");
  EXPECT_NEAR(by_label.at("dp4 tp1 pp1 ddp bf16").compute_s, fp32.compute_s / 2, 1e-12);
  EXPECT_NEAR(by_label.at("dp4 tp1 pp1 ddp ckpt fp32").compute_s, fp32.compute_s * 4 / 3, 1e-12);
  EXPECT_EQ(fp32.tokens_per_sample, 64);  // model.context
  EXPECT_NEAR(fp32.step_s, fp32.compute_s + fp32.commSeconds(), 1e-15);
  // Full sharding gathers the parameters twice where shard_grad_op gathers them once.
  EXPECT_GT(termBytes(by_label.at("dp4 tp1 pp1 fsdp:full_shard fp32"), MeshDim::kDp),
            termBytes(by_label.at("dp4 tp1 pp1 fsdp:shard_grad_op fp32"), MeshDim::kDp));
}

TEST(LayoutProbes, MeasurementsAreKeptOwnerOnlyPerHostSetAndRemeasuredOnRequest) {
  const std::string dir =
      ::testing::TempDir() + "/layout_probes_kept_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = measurementsPath(dir + "/runs.db");
  int measured = 0;
  auto measure = [&] {
    ++measured;
    Measurements m = injected();
    m.flops_per_s[Precision::kFp32] = measured;
    return m;
  };
  bool now = false;
  EXPECT_EQ(keptMeasurements(file, "cpu localhost:4", false, measure, &now)
                .flops_per_s.at(Precision::kFp32),
            1);
  EXPECT_TRUE(now);
  struct stat info {};
  ASSERT_EQ(::stat(file.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(keptMeasurements(file, "cpu localhost:4", false, measure, &now)
                .flops_per_s.at(Precision::kFp32),
            1);
  EXPECT_FALSE(now);
  EXPECT_EQ(
      keptMeasurements(file, "cpu localhost:2", false, measure).flops_per_s.at(Precision::kFp32),
      2);  // another host set
  EXPECT_EQ(
      keptMeasurements(file, "cpu localhost:4", true, measure).flops_per_s.at(Precision::kFp32),
      3);  // --remeasure
  EXPECT_EQ(
      keptMeasurements(file, "cpu localhost:2", false, measure).flops_per_s.at(Precision::kFp32),
      2);  // kept beside it
  EXPECT_EQ(measured, 3);
  // A malformed entry is measured again and replaced; the others stay.
  {
    std::ifstream in(file);
    json kept = json::parse(in);
    kept["cpu localhost:4"] = {{"flops_per_s", "fast"}};
    std::ofstream(file) << kept.dump();
  }
  EXPECT_EQ(
      keptMeasurements(file, "cpu localhost:4", false, measure).flops_per_s.at(Precision::kFp32),
      4);
  EXPECT_EQ(
      keptMeasurements(file, "cpu localhost:2", false, measure).flops_per_s.at(Precision::kFp32),
      2);
  EXPECT_EQ(measured, 4);
  std::filesystem::remove_all(dir);
}

TEST(LayoutProbes, ShortProbesGiveAThroughputAndCurvesForEveryCollective) {
  EXPECT_GT(probeMatmulFlops(Precision::kFp32, 2, Device::cpu(), 1), 0);
  EXPECT_GT(probeMatmulFlops(Precision::kBf16, 1, Device::cpu(), 1), 0);
  const std::vector<CommCurve> curves = probeCommCurves(2, 4096, 65536, 2);
  std::set<std::string> ops;
  for (const CommCurve& curve : curves) {
    ops.insert(curve.op);
    EXPECT_EQ(curve.ranks, 2);
    EXPECT_GT(curve.bytes_per_s, 0) << curve.op;
    EXPECT_GE(curve.latency_s, 0) << curve.op;
  }
  EXPECT_EQ(ops, (std::set<std::string>{"all_reduce", "all_gather", "reduce_scatter", "sendrecv"}));
}

TEST(LayoutTrials, RankCorrelationIsSpearmans) {
  EXPECT_NEAR(*rankCorrelation({1, 2, 3, 4}, {10, 20, 30, 40}), 1, 1e-12);
  EXPECT_NEAR(*rankCorrelation({1, 2, 3, 4}, {4, 3, 2, 1}), -1, 1e-12);
  EXPECT_NEAR(*rankCorrelation({1, 2, 3}, {1, 3, 2}), 0.5, 1e-12);
  EXPECT_NEAR(*rankCorrelation({1, 2, 2, 3}, {1, 2, 3, 4}), 0.9486832980505138, 1e-9);  // ties
  EXPECT_FALSE(rankCorrelation({1}, {1}).has_value());
  EXPECT_FALSE(rankCorrelation({1, 1}, {1, 2}).has_value());
}

}  // namespace
}  // namespace ringmaster::plan
