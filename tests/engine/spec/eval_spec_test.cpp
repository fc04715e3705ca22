// train.eval_every and train.eval_batches in the spec: defaults, bounds, the canonical form, and
// the refusals naming train.eval_every (a data kind without a validation set).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spec/job_spec.h"

namespace ringmaster {
namespace {

using json = nlohmann::json;

// A small gpt over byte-level text, with `patch` merged in.
json textSpec(const json& patch = json::object()) {
  json document = json::parse(R"({
    "name": "eval",
    "strategy": {"kind": "single"},
    "model": {"kind": "gpt", "layers": 1, "vocab_size": 256, "context": 8, "heads": 2, "dim": 16},
    "data": {"kind": "text", "path": "corpus.txt"},
    "train": {"steps": 10, "batch_size": 4, "eval_every": 5},
    "optimizer": {"kind": "adamw", "lr": 0.001}
  })");
  document.merge_patch(patch);
  return document;
}

std::vector<std::string> problems(const json& document) {
  std::vector<std::string> lines;
  for (const SpecProblem& problem : parseJobSpec(document.dump()).problems)
    lines.push_back(problem.path + ": " + problem.message);
  return lines;
}

TEST(EvalSpec, DefaultsToNeverAndTenBatches) {
  json document = textSpec();
  document["train"].erase("eval_every");
  const SpecParseResult parsed = parseJobSpec(document.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  EXPECT_EQ(parsed.spec->train.eval_every, 0);
  EXPECT_EQ(parsed.spec->train.eval_batches, 10);
}

TEST(EvalSpec, IsReadAndRoundTrips) {
  const SpecParseResult parsed = parseJobSpec(textSpec({{"train", {{"eval_batches", 3}}}}).dump());
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  EXPECT_EQ(parsed.spec->train.eval_every, 5);
  EXPECT_EQ(parsed.spec->train.eval_batches, 3);
  const json canonical = toJson(*parsed.spec);
  EXPECT_EQ(canonical["train"]["eval_every"], 5);
  EXPECT_EQ(canonical["train"]["eval_batches"], 3);
  const SpecParseResult again = parseJobSpec(canonical.dump());
  ASSERT_TRUE(again.ok()) << again.describe();
  EXPECT_EQ(again.spec->train, parsed.spec->train);
}

TEST(EvalSpec, BoundsAreChecked) {
  EXPECT_EQ(problems(textSpec({{"train", {{"eval_every", -1}}}})),
            std::vector<std::string>{
                "train.eval_every: expected a non-negative integer (0: never), got -1"});
  EXPECT_EQ(problems(textSpec({{"train", {{"eval_batches", 0}}}})),
            std::vector<std::string>{"train.eval_batches: expected a positive integer, got 0"});
}

TEST(EvalSpec, NeedsAValidationSet) {
  const json synthetic = json::parse(R"({
    "strategy": {"kind": "single"},
    "model": {"kind": "mlp", "layers": [4, 8, 3], "vocab_size": null, "context": null,
              "heads": null, "dim": null},
    "data": {"kind": "synthetic", "samples": 32, "features": 4, "classes": 3, "path": null}
  })");
  const std::vector<std::string> found = problems(textSpec(synthetic));
  ASSERT_EQ(found.size(), 1u) << found.front();
  EXPECT_TRUE(
      found[0].starts_with("train.eval_every: data.kind \"synthetic\" has no validation "
                           "set"))
      << found[0];
  // tokens without data.val have none either; with it, they do.
  const json tokens = {{"data", {{"kind", "tokens"}, {"path", nullptr}, {"train", "train_*.bin"}}}};
  const std::vector<std::string> without_val = problems(textSpec(tokens));
  ASSERT_EQ(without_val.size(), 1u);
  EXPECT_TRUE(without_val[0].starts_with("train.eval_every: data.kind \"tokens\" without data.val"))
      << without_val[0];
  EXPECT_TRUE(problems(textSpec({{"data",
                                  {{"kind", "tokens"},
                                   {"path", nullptr},
                                   {"train", "train_*.bin"},
                                   {"val", "val_*.bin"}}}}))
                  .empty());
  // Never evaluating needs no validation set.
  json never = textSpec(synthetic);
  never["train"]["eval_every"] = 0;
  EXPECT_TRUE(problems(never).empty());
}

// The pipeline evaluates too: its last stage's loss reaches every rank (parallel/pipeline.h).
TEST(EvalSpec, IsAcceptedUnderThePipeline) {
  const json pipeline = {{"strategy", {{"kind", "pipeline"}}},
                         {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", 2}}}}}},
                         {"model", {{"layers", 2}}}};
  const std::vector<std::string> found = problems(textSpec(pipeline));
  EXPECT_TRUE(found.empty()) << testing::PrintToString(found);
}

}  // namespace
}  // namespace ringmaster
