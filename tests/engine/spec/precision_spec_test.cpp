// train.precision, train.loss_scale, strategy.reduce_dtype and strategy.param_dtype in the spec:
// defaults, the canonical form, and the refusals naming the field (a loss scale without fp16, a
// dtype option under a strategy that has none, an unknown precision, bounds).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spec/job_spec.h"
#include "spec/spec_fields.h"

namespace ringmaster {
namespace {

using json = nlohmann::json;

json gptSpec(const json& patch = json::object()) {
  json document = json::parse(R"({
    "name": "precision",
    "strategy": {"kind": "ddp"},
    "model": {"kind": "gpt", "layers": 1, "vocab_size": 256, "context": 8, "heads": 2, "dim": 16},
    "data": {"kind": "text", "path": "corpus.txt"},
    "train": {"steps": 10, "batch_size": 4},
    "optimizer": {"kind": "adamw", "lr": 0.001},
    "launch": {"hosts": [{"host": "localhost", "ranks": 2}]}
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

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& line) { return line.find(text) != std::string::npos; });
}

TEST(PrecisionSpec, DefaultsToFp32WithGradScalersDefaults) {
  const SpecParseResult parsed = parseJobSpec(gptSpec().dump());
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  EXPECT_EQ(parsed.spec->train.precision, Precision::kFp32);
  EXPECT_EQ(parsed.spec->train.loss_scale.init, 65536.0);
  EXPECT_EQ(parsed.spec->train.loss_scale.growth_interval, 2000);
  EXPECT_FALSE(parsed.spec->strategy.ddp.reduce_dtype.has_value());
  const json canonical = toJson(*parsed.spec);
  EXPECT_EQ(canonical["train"]["precision"], "fp32");
  EXPECT_FALSE(canonical["train"].contains("loss_scale"));  // fp16 only
  EXPECT_FALSE(canonical["strategy"].contains("reduce_dtype"));
}

TEST(PrecisionSpec, Fp16WithALossScaleRoundTrips) {
  const json document = gptSpec(
      {{"train", {{"precision", "fp16"}, {"loss_scale", {{"init", 1024}, {"growth_interval", 3}}}}},
       {"strategy", {{"reduce_dtype", "bf16"}}}});
  const SpecParseResult parsed = parseJobSpec(document.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  EXPECT_EQ(parsed.spec->train.precision, Precision::kFp16);
  EXPECT_EQ(parsed.spec->train.loss_scale.init, 1024.0);
  EXPECT_EQ(parsed.spec->train.loss_scale.growth_interval, 3);
  EXPECT_EQ(parsed.spec->strategy.ddp.reduce_dtype, Precision::kBf16);
  const json canonical = toJson(*parsed.spec);
  EXPECT_EQ(canonical["train"]["loss_scale"]["growth_interval"], 3);
  EXPECT_EQ(canonical["strategy"]["dp"]["reduce_dtype"], "bf16");
  const SpecParseResult again = parseJobSpec(canonical.dump());
  ASSERT_TRUE(again.ok()) << again.describe();
  EXPECT_EQ(*again.spec, *parsed.spec);
}

TEST(PrecisionSpec, FsdpTakesBothDtypes) {
  const SpecParseResult parsed = parseJobSpec(
      gptSpec({{"strategy", {{"kind", "fsdp"}, {"reduce_dtype", "fp16"}, {"param_dtype", "bf16"}}}})
          .dump());
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  EXPECT_EQ(parsed.spec->strategy.fsdp.reduce_dtype, Precision::kFp16);
  EXPECT_EQ(parsed.spec->strategy.fsdp.param_dtype, Precision::kBf16);
  EXPECT_EQ(toJson(*parsed.spec)["strategy"]["dp"]["param_dtype"], "bf16");
}

TEST(PrecisionSpec, RefusalsNameTheField) {
  EXPECT_TRUE(mentions(problems(gptSpec({{"train", {{"precision", "fp8"}}}})), "train.precision: "))
      << "an unknown precision";
  EXPECT_TRUE(mentions(problems(gptSpec({{"train", {{"loss_scale", {{"init", 8}}}}}})),
                       "train.loss_scale: applies to train.precision \"fp16\" only"));
  const json fp16 = {{"precision", "fp16"}};
  json bad_init = gptSpec({{"train", fp16}});
  bad_init["train"]["loss_scale"] = {{"init", 0.5}};
  EXPECT_TRUE(mentions(problems(bad_init), "train.loss_scale.init: expected a number in [1"));
  json bad_growth = gptSpec({{"train", fp16}});
  bad_growth["train"]["loss_scale"] = {{"growth_interval", 0}};
  EXPECT_TRUE(mentions(problems(bad_growth), "train.loss_scale.growth_interval: "));
  json unknown_key = gptSpec({{"train", fp16}});
  unknown_key["train"]["loss_scale"] = {{"backoff", 0.5}};
  EXPECT_TRUE(mentions(problems(unknown_key), "train.loss_scale.backoff"));
  // param_dtype is FSDP's alone; reduce_dtype belongs to ddp and fsdp, not to the pipeline.
  EXPECT_TRUE(mentions(problems(gptSpec({{"strategy", {{"param_dtype", "bf16"}}}})),
                       "strategy.param_dtype: only valid when strategy.kind is fsdp"));
  const std::vector<std::string> pipeline =
      problems(gptSpec({{"strategy", {{"kind", "pipeline"}, {"reduce_dtype", "bf16"}}}}));
  EXPECT_TRUE(mentions(pipeline, "strategy.reduce_dtype: only valid when strategy.kind is ddp"))
      << (pipeline.empty() ? "" : pipeline.front());
  EXPECT_TRUE(mentions(problems(gptSpec({{"strategy", {{"reduce_dtype", "float16"}}}})),
                       "strategy.reduce_dtype: "));
}

// Not a precision rule, but the same document: a model of token ids refuses float features at
// parse time instead of at the first batch.
TEST(PrecisionSpec, AGptRefusesFloatFeatureData) {
  const std::vector<std::string> lines = problems(gptSpec(
      {{"data", {{"kind", "synthetic"}, {"samples", 8}, {"features", 4}, {"classes", 2}}}}));
  EXPECT_TRUE(mentions(lines, "data.kind: model.kind gpt reads token ids, but synthetic data"))
      << (lines.empty() ? "no problem" : lines.front());
}

TEST(PrecisionSpec, FormFieldsFollowTheKinds) {
  const std::vector<SpecField> fields = specFields();
  const auto find = [&](const std::string& path) {
    auto it = std::find_if(fields.begin(), fields.end(),
                           [&](const SpecField& f) { return f.path == path; });
    EXPECT_NE(it, fields.end()) << path;
    return it == fields.end() ? SpecField{} : *it;
  };
  EXPECT_EQ(std::count_if(fields.begin(), fields.end(),
                          [](const SpecField& f) { return f.path == "strategy.dp.reduce_dtype"; }),
            1);
  const SpecField reduce = find("strategy.dp.reduce_dtype");
  ASSERT_TRUE(reduce.shown_when.has_value());
  EXPECT_EQ(reduce.shown_when->kinds, (std::vector<std::string>{"ddp", "fsdp"}));
  EXPECT_EQ(find("strategy.dp.param_dtype").shown_when->kinds, (std::vector<std::string>{"fsdp"}));
  EXPECT_EQ(find("train.precision").choices, (std::vector<std::string>{"fp32", "bf16", "fp16"}));
  const SpecField growth = find("train.loss_scale.growth_interval");
  ASSERT_TRUE(growth.shown_when.has_value());
  EXPECT_EQ(growth.shown_when->controller, "train.precision");
}

}  // namespace
}  // namespace ringmaster
