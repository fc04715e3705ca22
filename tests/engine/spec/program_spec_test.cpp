// The program section: a job whose ranks run the user's Python script. Its fields, their
// defaults and refusals, the engine's sections refused beside it, and the canonical form.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "spec/job_spec.h"
#include "spec/memory_estimate.h"

namespace ringmaster {
namespace {

using nlohmann::json;

json programJob() {
  return json::parse(R"({
    "name": "torch-ddp",
    "program": {"script": "train.py"},
    "launch": {"hosts": [{"host": "localhost", "ranks": 4}]}
  })");
}

std::vector<SpecProblem> problemsOf(const json& document) {
  return parseJobSpec(document).problems;
}

TEST(ProgramSpec, AMinimalProgramJobTakesItsDefaults) {
  const SpecParseResult parsed = parseJobSpec(programJob());
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  const JobSpec& spec = *parsed.spec;
  ASSERT_TRUE(spec.program.has_value());
  EXPECT_EQ(spec.program->python, "python3");
  EXPECT_EQ(spec.program->script, "train.py");
  EXPECT_TRUE(spec.program->args.empty());
  EXPECT_EQ(spec.program->workdir, "");
  EXPECT_FALSE(spec.program->upload);
  EXPECT_EQ(spec.program->steps, 0);
  EXPECT_EQ(worldSize(spec), 4);
  // Several ranks of a script are taken for DDP, one for a single process, unless it says.
  EXPECT_EQ(strategyLabel(spec), "ddp");
  json one = programJob();
  one["launch"]["hosts"][0]["ranks"] = 1;
  EXPECT_EQ(strategyLabel(*parseJobSpec(one).spec), "single");
  json fsdp = programJob();
  fsdp["strategy"] = {{"kind", "fsdp"}};
  EXPECT_EQ(strategyLabel(*parseJobSpec(fsdp).spec), "fsdp");
  // The kind is the one-dimension mesh it names, as the legacy strategy form is.
  EXPECT_EQ(parseJobSpec(fsdp).spec->strategy.mesh, (MeshSpec{.dp = 4, .tp = 1, .pp = 1}));
  json pipeline = programJob();
  pipeline["strategy"] = {{"kind", "pipeline"}};
  EXPECT_EQ(strategyLabel(*parseJobSpec(pipeline).spec), "pipeline");
  EXPECT_EQ(dataParallelSize(*parseJobSpec(pipeline).spec), 1);
  EXPECT_EQ(toJson(*parseJobSpec(pipeline).spec)["strategy"], json({{"kind", "pipeline"}}));
}

TEST(ProgramSpec, EveryFieldIsReadAndTheCanonicalFormRoundTrips) {
  json document = programJob();
  document["description"] = "the user's own DDP script";
  document["program"] = {{"python", "/usr/bin/python3"},
                         {"script", "examples/train.py"},
                         {"args", {"--steps", "30", "a b 'c' $(d)"}},
                         {"workdir", "/srv/project"},
                         {"upload", true},
                         {"steps", 30}};
  const SpecParseResult parsed = parseJobSpec(document);
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  const JobSpec& spec = *parsed.spec;
  EXPECT_EQ(spec.program->args, (std::vector<std::string>{"--steps", "30", "a b 'c' $(d)"}));
  EXPECT_EQ(spec.program->workdir, "/srv/project");
  EXPECT_TRUE(spec.program->upload);
  EXPECT_EQ(expectedSteps(spec), 30);

  const json canonical = toJson(spec);
  // Only what a program job reads is written: no engine section reappears.
  for (std::string_view section : kEngineOnlySections)
    EXPECT_FALSE(canonical.contains(section)) << section;
  const SpecParseResult again = parseJobSpec(canonical);
  ASSERT_TRUE(again.ok()) << again.describe();
  EXPECT_EQ(*again.spec, spec);
  EXPECT_TRUE(validateJobSpec(spec).empty());
}

TEST(ProgramSpec, TheEngineSectionsAreRefusedNamingEach) {
  json document = programJob();
  document["model"] = {{"kind", "mlp"}, {"layers", {4, 2}}};
  document["train"] = {{"steps", 5}, {"batch_size", 2}};
  document["checkpoint"] = {{"dir", "ckpt"}};
  const std::vector<SpecProblem> problems = problemsOf(document);
  ASSERT_EQ(problems.size(), 3u);
  for (const SpecProblem& problem : problems) {
    EXPECT_TRUE(problem.path == "model" || problem.path == "train" || problem.path == "checkpoint")
        << problem.path;
    EXPECT_NE(problem.message.find("not read by a program job"), std::string::npos)
        << problem.message;
  }
}

TEST(ProgramSpec, AStrategyIsOnlyItsKind) {
  json document = programJob();
  document["strategy"] = {{"kind", "ddp"}, {"bucket_cap_mb", 25}};
  const std::vector<SpecProblem> problems = problemsOf(document);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].path, "strategy.bucket_cap_mb");
  document["strategy"] = {{"kind", "tensor"}};
  ASSERT_EQ(problemsOf(document).size(), 1u);
  EXPECT_EQ(problemsOf(document)[0].path, "strategy.kind");
}

TEST(ProgramSpec, BadFieldsAreNamed) {
  auto problemAt = [](json program) {
    json document = programJob();
    document["program"] = std::move(program);
    const std::vector<SpecProblem> problems = problemsOf(document);
    return problems.size() == 1 ? problems[0].path + ": " + problems[0].message
                                : fmt::format("{} problems", problems.size());
  };
  EXPECT_EQ(problemAt(json::object()), "program.script: required");
  EXPECT_EQ(problemAt({{"script", ""}}), "program.script: expected a non-empty string, got \"\"");
  EXPECT_EQ(problemAt({{"script", "t.py"}, {"args", "--steps 3"}}),
            "program.args: expected an array of strings, got \"--steps 3\"");
  EXPECT_EQ(problemAt({{"script", "t.py"}, {"args", {"--steps", 3}}}),
            "program.args[1]: expected a string without NUL characters, got 3");
  EXPECT_EQ(problemAt({{"script", "t.py"}, {"steps", -1}}),
            "program.steps: expected a non-negative integer, got -1");
  EXPECT_EQ(problemAt({{"script", "t.py"}, {"upload", "yes"}}),
            "program.upload: expected true or false, got \"yes\"");
  EXPECT_EQ(problemAt({{"script", "t.py"}, {"pyhton", "python3"}}),
            "program.pyhton: unknown key (did you mean \"python\"?)");
  EXPECT_EQ(problemAt("train.py"), "program: expected an object, got \"train.py\"");
}

TEST(ProgramSpec, NoMemoryIsEstimatedForAScriptTheSpecDoesNotDescribe) {
  const JobSpec spec = *parseJobSpec(programJob()).spec;
  EXPECT_TRUE(estimateMemory(spec).empty());
  EXPECT_TRUE(estimatedRankTotals(toJson(spec).dump()).empty());
}

}  // namespace
}  // namespace ringmaster
