// Issue 37, a sweep's plan (session/sweep/sweep_plan.h, sweep_runner.h prepareSweep): the grid's
// order (first axis slowest), random search reproducible from its seed and within its bounds on
// every distribution, the section of a spec file (its axes in the file's order, beside --axis), and
// every class of bad input refused with a message naming the axis and the problem.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/test_paths.h"
#include "core/error.h"
#include "sweep/sweep_plan.h"
#include "sweep/sweep_runner.h"

namespace ringmaster::session {
namespace {

using nlohmann::json;

SweepPlan planOf(const std::vector<std::string>& axes, std::optional<int> count = {},
                 std::optional<uint64_t> seed = {}, const std::string& spec = "{}") {
  return makeSweepPlan(spec, {.axes = axes, .count = count, .seed = seed});
}

// The message of the kInvalidArgument `make` throws ("" when it throws none).
template <typename F>
std::string refusal(F make) {
  try {
    make();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.message();
    return e.message();
  }
  return "";
}

TEST(SweepPlan, GridIsTheCartesianProductFirstAxisSlowest) {
  const SweepPlan plan = planOf({"optimizer.lr=1e-3,3e-3", "train.batch_size=16,32,64"});
  EXPECT_FALSE(plan.random);
  const std::vector<MemberOverrides> members = plan.members();
  ASSERT_EQ(members.size(), 6u);
  EXPECT_EQ(plan.count, 6);
  const std::vector<std::pair<double, int>> expected = {{1e-3, 16}, {1e-3, 32}, {1e-3, 64},
                                                        {3e-3, 16}, {3e-3, 32}, {3e-3, 64}};
  for (size_t i = 0; i < members.size(); ++i) {
    ASSERT_EQ(members[i].size(), 2u);
    EXPECT_EQ(members[i][0].first, "optimizer.lr");
    EXPECT_DOUBLE_EQ(members[i][0].second.get<double>(), expected[i].first) << i;
    EXPECT_EQ(members[i][1].second.get<int>(), expected[i].second) << i;
  }
  EXPECT_EQ(overrideArguments(members[1]),
            (std::vector<std::string>{"optimizer.lr=0.001", "train.batch_size=32"}));
  EXPECT_EQ(overridesJson(members[1]), R"({"optimizer.lr":0.001,"train.batch_size":32})");
  EXPECT_EQ(plan.toJson()["method"], "grid");
  EXPECT_EQ(plan.toJson()["axes"][1]["values"], json::array({16, 32, 64}));
}

TEST(SweepPlan, GridValuesAreJsonWhereTheyParseElseStrings) {
  const SweepPlan plan = planOf({R"(x.y=adamw, 2,true,[1,2],{"a":1,"b":2},"q,r")"});
  const std::vector<json>& values = plan.axes[0].values;
  ASSERT_EQ(values.size(), 6u);
  EXPECT_EQ(values[0], "adamw");
  EXPECT_EQ(values[1], 2);
  EXPECT_EQ(values[2], true);
  EXPECT_EQ(values[3], json::array({1, 2}));
  EXPECT_EQ(values[4], json({{"a", 1}, {"b", 2}}));
  EXPECT_EQ(values[5], "q,r");
  // A string value reaches the spec as a JSON string.
  EXPECT_EQ(overrideArguments({{"optimizer.kind", "sgd"}})[0], "optimizer.kind=\"sgd\"");
}

TEST(SweepPlan, RandomSearchIsReproducibleFromItsSeedAndWithinBounds) {
  const std::vector<std::string> axes = {
      "optimizer.lr=log_uniform(1e-4,1e-2)", "model.dropout=uniform(0,0.5)",
      "train.micro_batches=int_uniform(2,8)", "optimizer.kind=adamw,sgd"};
  const SweepPlan plan = planOf(axes, 200, 7);
  EXPECT_TRUE(plan.random);
  const std::vector<MemberOverrides> a = plan.members(), b = planOf(axes, 200, 7).members();
  ASSERT_EQ(a.size(), 200u);
  EXPECT_EQ(overridesJson(a[0]), overridesJson(b[0]));
  EXPECT_EQ(overridesJson(a[199]), overridesJson(b[199]));
  EXPECT_NE(overridesJson(a[0]), overridesJson(planOf(axes, 200, 8).members()[0]));
  std::set<int64_t> micro_batches;
  std::set<std::string> kinds;
  for (const MemberOverrides& member : a) {
    const double lr = member[0].second.get<double>();
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1e-2);
    EXPECT_GE(member[1].second.get<double>(), 0.0);
    EXPECT_LE(member[1].second.get<double>(), 0.5);
    ASSERT_TRUE(member[2].second.is_number_integer());
    micro_batches.insert(member[2].second.get<int64_t>());
    kinds.insert(member[3].second.get<std::string>());
  }
  EXPECT_EQ(micro_batches, (std::set<int64_t>{2, 3, 4, 5, 6, 7, 8}));  // both bounds drawn
  EXPECT_EQ(kinds, (std::set<std::string>{"adamw", "sgd"}));
  // The mapping is ours, on the standard's generator: the first draw by hand.
  std::mt19937_64 generator(7);
  const double u = static_cast<double>(generator() >> 11) * 0x1.0p-53;
  EXPECT_DOUBLE_EQ(a[0][0].second.get<double>(),
                   std::exp(std::log(1e-4) + u * (std::log(1e-2) - std::log(1e-4))));
  // The standard fixes mt19937_64's 10000th output for the default seed.
  std::mt19937_64 standard;
  standard.discard(9999);
  EXPECT_EQ(standard(), 9981545732273789042ull);
  EXPECT_EQ(unitInterval(~0ull), 1.0 - 0x1.0p-53);
  EXPECT_EQ(unitInterval(0), 0.0);
  const json plan_json = plan.toJson();
  EXPECT_EQ(plan_json["method"], "random");
  EXPECT_EQ(plan_json["seed"], 7);
  EXPECT_EQ(plan_json["count"], 200);
  EXPECT_EQ(plan_json["axes"][0]["distribution"], "log_uniform");
  EXPECT_EQ(planOf({"a.b=uniform(0,1)"}, 3).seed, 0u);  // the default seed
}

TEST(SweepPlan, TheSpecSectionKeepsTheFilesAxisOrderBesideTheCommandLines) {
  const std::string spec = R"({"name": "x", "sweep": {"method": "random", "count": 5, "seed": 3,
      "parallel": 2, "axes": {"train.micro_batches": {"distribution": "int_uniform", "min": 2,
      "max": 8}, "optimizer.lr": [0.001, 0.003]}}})";
  const SweepPlan plan = planOf({"train.steps=5,10"}, {}, {}, spec);
  ASSERT_EQ(plan.axes.size(), 3u);
  EXPECT_EQ(plan.axes[0].field, "train.micro_batches");  // not sorted: the file's order
  EXPECT_EQ(plan.axes[1].field, "optimizer.lr");
  EXPECT_EQ(plan.axes[2].field, "train.steps");
  EXPECT_TRUE(plan.random);
  EXPECT_EQ(plan.count, 5);
  EXPECT_EQ(plan.seed, 3u);
  EXPECT_EQ(plan.parallel, 2);
  // The command line's count and seed replace the section's.
  const SweepPlan replaced = planOf({}, 9, 11, spec);
  EXPECT_EQ(replaced.count, 9);
  EXPECT_EQ(replaced.seed, 11u);
  EXPECT_FALSE(withoutSweepSection(json::parse(spec)).contains("sweep"));
  // A grid section.
  const SweepPlan grid =
      planOf({}, {}, {}, R"({"sweep": {"method": "grid", "axes": {"b.c": [1, 2], "a.b": [3]}}})");
  EXPECT_FALSE(grid.random);
  EXPECT_EQ(grid.members().size(), 2u);
  EXPECT_EQ(grid.axes[0].field, "b.c");
}

TEST(SweepPlan, EveryBadInputIsRefusedNamingTheAxisAndTheProblem) {
  struct Case {
    std::vector<std::string> axes;
    std::optional<int> count;
    std::optional<uint64_t> seed;
    std::string spec;
    std::vector<std::string> said;  // each must be in the message
  };
  const std::vector<Case> cases = {
      {{"optimizer.lr=gaussian(0,1)"},
       3,
       {},
       "{}",
       {"--axis optimizer.lr", "unknown distribution 'gaussian'"}},
      {{"optimizer.lr=uniform(2,1)"}, 3, {}, "{}", {"--axis optimizer.lr", "min 2 is above max 1"}},
      {{"optimizer.lr=log_uniform(0,1)"},
       3,
       {},
       "{}",
       {"--axis optimizer.lr", "log_uniform needs min > 0"}},
      {{"optimizer.lr=log_uniform(-1,1)"}, 3, {}, "{}", {"log_uniform needs min > 0"}},
      {{"train.steps=int_uniform(1.5,3)"}, 3, {}, "{}", {"--axis train.steps", "integer bounds"}},
      {{"optimizer.lr=uniform(a,1)"},
       3,
       {},
       "{}",
       {"--axis optimizer.lr", "min 'a' is not a number"}},
      {{"optimizer.lr=uniform(1)"}, 3, {}, "{}", {"--axis optimizer.lr", "two bounds"}},
      {{"optimizer.lr="}, {}, {}, "{}", {"--axis optimizer.lr", "an empty list of values"}},
      {{"optimizer.lr=1,,2"}, {}, {}, "{}", {"--axis optimizer.lr", "an empty value"}},
      {{"optimizer.lr"}, {}, {}, "{}", {"--axis optimizer.lr", "expected FIELD=V1,V2"}},
      {{"=1,2"}, {}, {}, "{}", {"no field before '='"}},
      {{"optimizer..lr=1"}, {}, {}, "{}", {"not a dotted spec path"}},
      {{"optimizer.lr=1,2", "optimizer.lr=3"},
       {},
       {},
       "{}",
       {"--axis optimizer.lr", "swept twice"}},
      {{"optimizer=1,2", "optimizer.lr=3"}, {}, {}, "{}", {"--axis optimizer.lr", "overlaps"}},
      {{"optimizer.lr=uniform(0,1)"}, {}, {}, "{}", {"random search needs a count"}},
      {{"optimizer.lr=1,2"}, 4, {}, "{}", {"a count is for random search", "2 combinations"}},
      {{"optimizer.lr=1,2"}, {}, 5, "{}", {"a seed is for random search"}},
      {{}, {}, {}, "{}", {"at least one axis"}},
      {{},
       {},
       {},
       R"({"sweep": {"axes": {"optimizer.lr": []}}})",
       {"sweep.axes.optimizer.lr", "an empty list"}},
      {{},
       {},
       {},
       R"({"sweep": {"axes": {"optimizer.lr": 3}}})",
       {"sweep.axes.optimizer.lr", "expected a list"}},
      {{},
       2,
       {},
       R"({"sweep": {"axes": {"a.b": {"distribution": "poisson", "min": 1, "max": 2}}}})",
       {"sweep.axes.a.b", "unknown distribution 'poisson'"}},
      {{},
       2,
       {},
       R"({"sweep": {"axes": {"a.b": {"distribution": "uniform", "min": 3, "max": 2}}}})",
       {"sweep.axes.a.b", "min 3 is above max 2"}},
      {{},
       2,
       {},
       R"({"sweep": {"axes": {"a.b": {"distribution": "uniform", "mn": 1, "max": 2}}}})",
       {"sweep.axes.a.b", "unknown key 'mn'", "did you mean 'min'"}},
      {{},
       2,
       {},
       R"({"sweep": {"axes": {"a.b": {"distribution": "uniform", "max": 2}}}})",
       {"sweep.axes.a.b", "\"min\" must be a number"}},
      {{},
       {},
       {},
       R"({"sweep": {"method": "grid", "count": 2, "axes": {"a.b": {"distribution": "uniform", "min": 1, "max": 2}}}})",
       {"sweep.axes.a.b", "a random axis in a grid sweep"}},
      {{},
       {},
       {},
       R"({"sweep": {"method": "grd", "axes": {"a.b": [1]}}})",
       {"sweep.method", "\"grid\" or \"random\""}},
      {{},
       {},
       {},
       R"({"sweep": {"axis": {"a.b": [1]}}})",
       {"sweep", "unknown key 'axis'", "did you mean 'axes'"}},
      {{}, {}, {}, R"({"sweep": {"count": 0, "axes": {"a.b": [1]}}})", {"sweep.count", "1..10000"}},
      {{"a.b=1,2"},
       {},
       {},
       R"({"sweep": {"axes": {"a.b": [1]}}})",
       {"--axis a.b", "swept twice", "sweep.axes.a.b"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.axes.empty() ? c.spec : c.axes[0]);
    const std::string message = refusal([&] { planOf(c.axes, c.count, c.seed, c.spec); });
    ASSERT_FALSE(message.empty());
    for (const std::string& said : c.said)
      EXPECT_NE(message.find(said), std::string::npos) << message;
  }
}

TEST(SweepPlan, AFieldNoSpecHasIsRefusedWithTheNearestOne) {
  const json spec = {{"name", "x"}, {"optimizer", {{"kind", "adamw"}, {"lr", 0.001}}}};
  const std::string message =
      refusal([&] { checkAxisFields(planOf({"optimizer.lrr=1e-3,3e-3"}), spec); });
  EXPECT_NE(message.find("--axis optimizer.lrr"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean optimizer.lr?"), std::string::npos) << message;
  EXPECT_FALSE(refusal([&] { checkAxisFields(planOf({"nonsense.field=1"}), spec); }).empty());
  // A spec field the document leaves out, and a path the document has, are both settable.
  EXPECT_TRUE(refusal([&] { checkAxisFields(planOf({"train.micro_batches=1,2"}), spec); }).empty());
  EXPECT_TRUE(refusal([&] { checkAxisFields(planOf({"optimizer.lr=1,2"}), spec); }).empty());
}

class PrepareSweep : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("sweep_plan_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string writeSpec(const json& spec) const {
    const std::string path = (dir_ / "spec.json").string();
    std::ofstream(path) << spec.dump(2);
    return path;
  }
  static json example() {
    std::ifstream in(std::string(testSourceDir()) + "/resources/examples/ddp_mlp.json");
    return json::parse(in);
  }
  std::filesystem::path dir_;
};

TEST_F(PrepareSweep, AMemberRefusedAloneIsLeftToRecordButASweepOfNoValidMemberIsRefused) {
  json spec = example();
  spec["sweep"] = {{"axes", {{"optimizer.lr", {0.001, -1}}}}};
  const std::string path = writeSpec(spec);
  const PreparedSweep sweep = prepareSweep(path, {}, {"train.steps=3"});
  EXPECT_EQ(sweep.members.size(), 2u);
  EXPECT_EQ(sweep.name, "spec");
  EXPECT_FALSE(sweep.base.contains("sweep"));
  EXPECT_EQ(sweep.base["train"]["steps"], 3);  // the --set applied
  EXPECT_EQ(sweep.world_size, 4);
  EXPECT_TRUE(sweep.local);
  // --parallel auto: as many whole runs as the cores hold, at least one.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(autoParallel(sweep), std::max(1, cores / 4));
  PreparedSweep remote = sweep;
  remote.local = false;
  EXPECT_EQ(autoParallel(remote), 1);
  try {
    prepareSweep(path, {.axes = {"train.batch_size=0,-3"}}, {});
    FAIL() << "a sweep of no valid member ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kSpec);
    EXPECT_NE(e.message().find("no member of the sweep has a valid spec"), std::string::npos)
        << e.message();
  }
  // A typo'd field is refused before anything starts.
  const std::string message =
      refusal([&] { prepareSweep(path, {.axes = {"train.batch_sise=8,16"}}, {}); });
  EXPECT_NE(message.find("did you mean train.batch_size?"), std::string::npos) << message;
}

}  // namespace
}  // namespace ringmaster::session
