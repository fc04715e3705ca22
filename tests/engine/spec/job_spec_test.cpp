// Tests of the job spec: defaults, the canonical form and its round trip, the example files, and
// every problem the parser reports, message by message. Most error cases are one table: a JSON
// merge patch (RFC 7386; null deletes a key) applied to a minimal valid spec, and the exact
// problems expected back.
#include <gtest/gtest.h>

#include <set>

#include <sys/resource.h>
#include <unistd.h>
#include <deque>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "common/test_paths.h"
#include "core/error.h"
#include "spec/job_spec.h"
#include "spec/spec_fields.h"

namespace ringmaster {
namespace {

using json = nlohmann::json;

const char* const kMinimal = R"({
  "name": "t",
  "strategy": {"kind": "single"},
  "model": {"kind": "mlp", "layers": [4, 8, 3]},
  "data": {"kind": "synthetic", "samples": 32, "features": 4, "classes": 3},
  "train": {"steps": 10, "batch_size": 8},
  "optimizer": {"kind": "sgd", "lr": 0.1}
})";

json minimal() {
  return json::parse(kMinimal);
}

json patched(const json& patch) {
  json document = minimal();
  document.merge_patch(patch);
  return document;
}

std::vector<std::string> problemLines(const SpecParseResult& result) {
  std::vector<std::string> lines;
  for (const SpecProblem& problem : result.problems) {
    lines.push_back(problem.path.empty() ? problem.message : problem.path + ": " + problem.message);
  }
  return lines;
}

std::vector<std::string> problemsOf(const json& document) {
  return problemLines(parseJobSpec(document));
}

std::string examplesDir() {
  return std::string(ringmaster::testSourceDir()) + "/resources/examples";
}

std::vector<std::string> exampleFiles() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(examplesDir())) {
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// ---------------------------------------------------------------------------------------------
// Valid specs

TEST(JobSpec, MinimalSpecGetsEveryDefault) {
  SpecParseResult result = parseJobSpec(kMinimal);
  ASSERT_TRUE(result.ok()) << result.describe();
  const JobSpec& spec = *result.spec;
  EXPECT_EQ(spec.name, "t");
  EXPECT_EQ(spec.description, "");
  EXPECT_EQ(strategyLabel(spec), "single");
  EXPECT_EQ(spec.strategy.ddp.bucket_cap_mb, 25);
  EXPECT_EQ(spec.strategy.fsdp.sharding, FsdpSharding::kFullShard);
  EXPECT_EQ(spec.strategy.fsdp.units, FsdpUnits::kLayer);
  EXPECT_EQ(spec.strategy.pipeline.schedule, PipelineSchedule::k1f1b);
  EXPECT_EQ(spec.strategy.pipeline.virtual_stages, 1);
  EXPECT_TRUE(spec.strategy.pipeline.stages.empty());
  EXPECT_EQ(spec.model.kind, "mlp");
  EXPECT_EQ(spec.model.layers, (std::vector<int64_t>{4, 8, 3}));
  EXPECT_EQ(spec.model.activation, ActivationKind::kRelu);
  EXPECT_EQ(spec.model.dropout, 0);
  EXPECT_FALSE(spec.model.layer_norm);
  EXPECT_EQ(spec.model.seed, 0u);
  EXPECT_FALSE(spec.model.init_checkpoint);
  EXPECT_EQ(spec.data.kind, DataKind::kSynthetic);
  EXPECT_EQ(spec.data.samples, 32);
  EXPECT_EQ(spec.data.features, 4);
  EXPECT_EQ(spec.data.classes, 3);
  EXPECT_EQ(spec.data.seed, 0u);
  EXPECT_TRUE(spec.data.shuffle);
  EXPECT_FALSE(spec.data.drop_last);
  EXPECT_EQ(spec.train.steps, 10);
  EXPECT_EQ(spec.train.batch_size, 8);
  EXPECT_EQ(spec.train.grad_accum_steps, 1);
  EXPECT_EQ(spec.train.micro_batches, 1);
  EXPECT_EQ(spec.train.seed, 0u);
  EXPECT_EQ(spec.optimizer.kind, OptimizerKind::kSgd);
  EXPECT_EQ(spec.optimizer.lr, 0.1);
  EXPECT_EQ(spec.optimizer.momentum, 0);
  EXPECT_EQ(spec.optimizer.dampening, 0);
  EXPECT_FALSE(spec.optimizer.nesterov);
  EXPECT_EQ(spec.optimizer.weight_decay, 0);
  EXPECT_FALSE(spec.optimizer.clip_grad_norm);
  EXPECT_EQ(spec.backend, BackendKind::kAuto);
  EXPECT_EQ(spec.device, DeviceKind::kAuto);
  ASSERT_EQ(spec.launch.hosts.size(), 1u);
  EXPECT_EQ(spec.launch.hosts[0].host, "localhost");
  EXPECT_EQ(spec.launch.hosts[0].ranks, 1);
  EXPECT_FALSE(spec.launch.hosts[0].port);
  EXPECT_FALSE(spec.launch.hosts[0].user);
  EXPECT_FALSE(spec.launch.hosts[0].identity_file);
  EXPECT_FALSE(spec.launch.node_binary);
  EXPECT_EQ(spec.launch.master_port, 0);
  EXPECT_EQ(spec.launch.timeout_s, 300);
  EXPECT_FALSE(spec.checkpoint);
  EXPECT_EQ(spec.telemetry.every_steps, 1);
  EXPECT_EQ(worldSize(spec), 1);
  EXPECT_EQ(stageCount(spec), 1);
  EXPECT_EQ(dataParallelSize(spec), 1);
}

TEST(JobSpec, CanonicalFormFillsEveryDefault) {
  json expected = json::parse(R"({
    "name": "t",
    "description": "",
    "strategy": {"mesh": {"dp": 1, "tp": 1, "pp": 1}, "dp": {"kind": "ddp", "bucket_cap_mb": 25.0}},
    "model": {"kind": "mlp", "layers": [4, 8, 3], "activation": "relu", "dropout": 0.0,
              "layer_norm": false, "seed": 0},
    "data": {"kind": "synthetic", "samples": 32, "features": 4, "classes": 3, "seed": 0,
             "shuffle": true, "drop_last": false},
    "train": {"steps": 10, "batch_size": 8, "grad_accum_steps": 1, "micro_batches": 1, "seed": 0,
              "activation_checkpointing": false, "eval_every": 0, "eval_batches": 10,
              "precision": "fp32"},
    "optimizer": {"kind": "sgd", "lr": 0.1, "momentum": 0.0, "dampening": 0.0, "nesterov": false,
                  "weight_decay": 0.0, "schedule": {"kind": "constant"}},
    "backend": "auto",
    "device": "auto",
    "launch": {"hosts": [{"host": "localhost", "ranks": 1}], "master_port": 0, "timeout_s": 300.0,
               "max_restarts": 0},
    "telemetry": {"every_steps": 1}
  })");
  EXPECT_EQ(toJson(*parseJobSpec(kMinimal).spec), expected);
}

// Issue 21, automatic restarts: launch.max_restarts is torchrun's count of restarts, 0 by default,
// kept through the canonical form; a negative, fractional-looking or absurd count is refused there.
TEST(JobSpec, MaxRestartsCountsTheRestartsAllowed) {
  json document = minimal();
  EXPECT_EQ(parseJobSpec(document).spec->launch.max_restarts, 0);
  document["launch"]["max_restarts"] = 2;
  const SpecParseResult two = parseJobSpec(document);
  ASSERT_TRUE(two.ok()) << two.describe();
  EXPECT_EQ(two.spec->launch.max_restarts, 2);
  EXPECT_EQ(toJson(*two.spec)["launch"]["max_restarts"], 2);
  EXPECT_EQ(parseJobSpec(toJson(*two.spec)).spec->launch, two.spec->launch);
  for (const json& bad : {json(-1), json(kMaxRestarts + 1), json("2"), json(true)}) {
    document["launch"]["max_restarts"] = bad;
    const SpecParseResult refused = parseJobSpec(document);
    EXPECT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.describe().find("launch.max_restarts"), std::string::npos)
        << refused.describe();
  }
  // A program job restarts too (issue 32, point 3), on one host: its workers host their own
  // store, which agents on several hosts cannot coordinate a restart through.
  json program = {{"name", "p"},
                  {"program", {{"script", "train.py"}}},
                  {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", 2}}}}}}};
  const SpecParseResult plain = parseJobSpec(program);
  ASSERT_TRUE(plain.ok()) << plain.describe();
  EXPECT_EQ(plain.spec->launch.max_restarts, 0);
  program["launch"]["max_restarts"] = 3;
  const SpecParseResult restarting = parseJobSpec(program);
  ASSERT_TRUE(restarting.ok()) << restarting.describe();
  EXPECT_EQ(restarting.spec->launch.max_restarts, 3);
  EXPECT_EQ(toJson(*restarting.spec)["launch"]["max_restarts"], 3);
  EXPECT_EQ(parseJobSpec(toJson(*restarting.spec)).spec->launch, restarting.spec->launch);
  for (const json& bad : {json(-1), json(kMaxRestarts + 1), json("2")}) {
    program["launch"]["max_restarts"] = bad;
    EXPECT_FALSE(parseJobSpec(program).ok()) << bad;
  }
  for (int64_t restarts : {int64_t{1}, int64_t{2}, kMaxRestarts}) {
    program["launch"]["max_restarts"] = restarts;
    program["launch"]["hosts"] = {{{"host", "a"}, {"ranks", 1}}, {{"host", "b"}, {"ranks", 1}}};
    const SpecParseResult several = parseJobSpec(program);
    EXPECT_FALSE(several.ok()) << restarts;
    EXPECT_NE(
        several.describe().find("launch.max_restarts: a program job restarts on one host only"),
        std::string::npos)
        << several.describe();
    program["launch"]["max_restarts"] = 0;
    EXPECT_TRUE(parseJobSpec(program).ok()) << parseJobSpec(program).describe();
  }
}

TEST(JobSpec, AdamAndAdamWDefaults) {
  auto adam = parseJobSpec(patched({{"optimizer", {{"kind", "adam"}}}}));
  ASSERT_TRUE(adam.ok()) << adam.describe();
  EXPECT_EQ(adam.spec->optimizer.betas, (std::array<double, 2>{0.9, 0.999}));
  EXPECT_EQ(adam.spec->optimizer.eps, 1e-8);
  EXPECT_EQ(adam.spec->optimizer.weight_decay, 0.0);

  auto adamw = parseJobSpec(patched({{"optimizer", {{"kind", "adamw"}}}}));
  ASSERT_TRUE(adamw.ok()) << adamw.describe();
  EXPECT_EQ(adamw.spec->optimizer.weight_decay, 0.01);
  EXPECT_EQ(defaultWeightDecay(OptimizerKind::kAdamW), 0.01);
  EXPECT_EQ(defaultWeightDecay(OptimizerKind::kSgd), 0.0);

  auto explicit_decay =
      parseJobSpec(patched({{"optimizer", {{"kind", "adamw"}, {"weight_decay", 0}}}}));
  ASSERT_TRUE(explicit_decay.ok());
  EXPECT_EQ(explicit_decay.spec->optimizer.weight_decay, 0.0);
}

TEST(JobSpec, EveryFieldIsRead) {
  json document = json::parse(R"({
    "name": "full-spec_1.0",
    "description": "everything set",
    "strategy": {"kind": "pipeline", "schedule": "interleaved_1f1b", "virtual_stages": 2,
                 "stages": [[0], [1, 2], [3], [4]]},
    "model": {"kind": "mlp", "layers": [16, 32, 32, 32, 32, 4], "activation": "gelu",
              "dropout": 0.25, "layer_norm": true, "seed": 7, "init_checkpoint": "init.safetensors"},
    "data": {"kind": "synthetic", "samples": 1000, "features": 16, "classes": 4, "seed": 3,
             "shuffle": false, "drop_last": true},
    "train": {"steps": 50, "batch_size": 32, "grad_accum_steps": 2, "micro_batches": 4,
              "seed": 11},
    "optimizer": {"kind": "adam", "lr": 0.002, "betas": [0.8, 0.95], "eps": 1e-6,
                  "weight_decay": 0.1, "clip_grad_norm": 0.5},
    "backend": "nccl",
    "device": "cuda",
    "launch": {"hosts": [{"host": "node-a.example.org", "ranks": 1, "port": 2222, "user": "ml",
                          "identity_file": "~/.ssh/id_ed25519"},
                         {"host": "10.0.0.2", "ranks": 1}],
               "node_binary": "/opt/ringmaster/bin/ringmaster-node", "master_port": 29500,
               "timeout_s": 60},
    "checkpoint": {"dir": "ckpt", "every_steps": 25},
    "telemetry": {"every_steps": 5}
  })");
  SpecParseResult result = parseJobSpec(document);
  ASSERT_TRUE(result.ok()) << result.describe();
  const JobSpec& spec = *result.spec;
  EXPECT_EQ(spec.name, "full-spec_1.0");
  EXPECT_EQ(spec.description, "everything set");
  EXPECT_EQ(strategyLabel(spec), "pipeline");
  EXPECT_EQ(spec.strategy.pipeline.schedule, PipelineSchedule::kInterleaved1f1b);
  EXPECT_EQ(spec.strategy.pipeline.virtual_stages, 2);
  EXPECT_EQ(spec.strategy.pipeline.stages, (std::vector<std::vector<int>>{{0}, {1, 2}, {3}, {4}}));
  EXPECT_EQ(spec.model.layers, (std::vector<int64_t>{16, 32, 32, 32, 32, 4}));
  EXPECT_EQ(spec.model.activation, ActivationKind::kGelu);
  EXPECT_EQ(spec.model.dropout, 0.25);
  EXPECT_TRUE(spec.model.layer_norm);
  EXPECT_EQ(spec.model.seed, 7u);
  EXPECT_EQ(spec.model.init_checkpoint, "init.safetensors");
  EXPECT_EQ(spec.data.samples, 1000);
  EXPECT_EQ(spec.data.seed, 3u);
  EXPECT_FALSE(spec.data.shuffle);
  EXPECT_TRUE(spec.data.drop_last);
  EXPECT_EQ(spec.train.steps, 50);
  EXPECT_EQ(spec.train.batch_size, 32);
  EXPECT_EQ(spec.train.grad_accum_steps, 2);
  EXPECT_EQ(spec.train.micro_batches, 4);
  EXPECT_EQ(spec.train.seed, 11u);
  EXPECT_EQ(spec.optimizer.kind, OptimizerKind::kAdam);
  EXPECT_EQ(spec.optimizer.lr, 0.002);
  EXPECT_EQ(spec.optimizer.betas, (std::array<double, 2>{0.8, 0.95}));
  EXPECT_EQ(spec.optimizer.eps, 1e-6);
  EXPECT_EQ(spec.optimizer.weight_decay, 0.1);
  EXPECT_EQ(spec.optimizer.clip_grad_norm, 0.5);
  EXPECT_EQ(spec.backend, BackendKind::kNccl);
  EXPECT_EQ(spec.device, DeviceKind::kCuda);
  ASSERT_EQ(spec.launch.hosts.size(), 2u);
  EXPECT_EQ(spec.launch.hosts[0].host, "node-a.example.org");
  EXPECT_EQ(spec.launch.hosts[0].port, 2222);
  EXPECT_EQ(spec.launch.hosts[0].user, "ml");
  EXPECT_EQ(spec.launch.hosts[0].identity_file, "~/.ssh/id_ed25519");
  EXPECT_EQ(spec.launch.hosts[1].host, "10.0.0.2");
  EXPECT_FALSE(spec.launch.hosts[1].port);
  EXPECT_EQ(spec.launch.node_binary, "/opt/ringmaster/bin/ringmaster-node");
  EXPECT_EQ(spec.launch.master_port, 29500);
  EXPECT_EQ(spec.launch.timeout_s, 60);
  ASSERT_TRUE(spec.checkpoint);
  EXPECT_EQ(spec.checkpoint->dir, "ckpt");
  EXPECT_EQ(spec.checkpoint->every_steps, 25);
  EXPECT_EQ(spec.telemetry.every_steps, 5);
  EXPECT_EQ(worldSize(spec), 2);
  EXPECT_EQ(stageCount(spec), 4);
  EXPECT_EQ(dataParallelSize(spec), 1);

  // Canonical form and back.
  EXPECT_EQ(parseJobSpec(toJson(spec)).spec, spec);
  EXPECT_EQ(parseJobSpec(toJson(spec).dump(2)).spec, spec);
}

TEST(JobSpec, StrategyOptionsOfEachKind) {
  auto ddp = parseJobSpec(patched({{"strategy", {{"kind", "ddp"}, {"bucket_cap_mb", 12.5}}}}));
  ASSERT_TRUE(ddp.ok()) << ddp.describe();
  EXPECT_EQ(ddp.spec->strategy.ddp.bucket_cap_mb, 12.5);
  EXPECT_EQ(toJson(*ddp.spec)["strategy"], json::parse(R"({"mesh": {"dp": 1, "tp": 1, "pp": 1},
                            "dp": {"kind": "ddp", "bucket_cap_mb": 12.5}})"));

  for (std::string_view sharding : enumNames<FsdpSharding>()) {
    for (std::string_view units : enumNames<FsdpUnits>()) {
      auto fsdp = parseJobSpec(
          patched({{"strategy", {{"kind", "fsdp"}, {"sharding", sharding}, {"units", units}}}}));
      ASSERT_TRUE(fsdp.ok()) << fsdp.describe();
      EXPECT_EQ(toString(fsdp.spec->strategy.fsdp.sharding), sharding);
      EXPECT_EQ(toString(fsdp.spec->strategy.fsdp.units), units);
      EXPECT_EQ(parseJobSpec(toJson(*fsdp.spec)).spec, fsdp.spec);
    }
  }

  for (std::string_view schedule : {"gpipe", "1f1b", "zb_h1"}) {
    auto pipeline =
        parseJobSpec(patched({{"strategy", {{"kind", "pipeline"}, {"schedule", schedule}}},
                              {"launch", {{"hosts", {{{"ranks", 2}}}}}},
                              {"train", {{"micro_batches", 4}}}}));
    ASSERT_TRUE(pipeline.ok()) << pipeline.describe();
    EXPECT_EQ(toString(pipeline.spec->strategy.pipeline.schedule), schedule);
    EXPECT_EQ(stageCount(*pipeline.spec), 2);
    EXPECT_EQ(dataParallelSize(*pipeline.spec), 1);
  }
}

TEST(JobSpec, IdxDataAndNullOptionals) {
  json document = patched(json::parse(R"({
    "data": {"kind": "idx", "samples": null, "features": null, "classes": null,
             "images": "a-images", "labels": "a-labels"},
    "model": {"init_checkpoint": null},
    "optimizer": {"clip_grad_norm": null},
    "launch": {"hosts": [{"host": "h", "ranks": 1, "port": null, "user": null,
                          "identity_file": null}], "node_binary": null}
  })"));
  document["checkpoint"] = nullptr;  // merge_patch would delete it; null means "no checkpoints"
  SpecParseResult result = parseJobSpec(document);
  ASSERT_TRUE(result.ok()) << result.describe();
  EXPECT_EQ(result.spec->data.kind, DataKind::kIdx);
  EXPECT_EQ(result.spec->data.images, "a-images");
  EXPECT_EQ(result.spec->data.labels, "a-labels");
  EXPECT_FALSE(result.spec->model.init_checkpoint);
  EXPECT_FALSE(result.spec->optimizer.clip_grad_norm);
  EXPECT_FALSE(result.spec->launch.hosts[0].port);
  EXPECT_FALSE(result.spec->checkpoint);
  json canonical_data = toJson(*result.spec)["data"];
  EXPECT_EQ(canonical_data, json::parse(R"({"kind":"idx","images":"a-images","labels":"a-labels",
                                            "shuffle":true,"drop_last":false})"));
}

TEST(JobSpec, IntegralFloatsAndLargeSeedsAreAccepted) {
  SpecParseResult result = parseJobSpec(patched(
      json::parse(R"({"train": {"steps": 1e3, "batch_size": 8.0, "seed": 18446744073709551615},
                              "model": {"seed": 1e15}})")));
  ASSERT_TRUE(result.ok()) << result.describe();
  EXPECT_EQ(result.spec->train.steps, 1000);
  EXPECT_EQ(result.spec->train.batch_size, 8);
  EXPECT_EQ(result.spec->train.seed, 18446744073709551615ull);
  EXPECT_EQ(result.spec->model.seed, 1000000000000000ull);
  EXPECT_EQ(parseJobSpec(toJson(*result.spec)).spec, result.spec);
}

TEST(JobSpec, NcclWithCudaOrAutoDeviceIsValid) {
  EXPECT_TRUE(parseJobSpec(patched({{"backend", "nccl"}, {"device", "cuda"}})).ok());
  EXPECT_TRUE(parseJobSpec(patched({{"backend", "nccl"}, {"device", "auto"}})).ok());
  EXPECT_TRUE(parseJobSpec(patched({{"backend", "gloo"}, {"device", "cuda"}})).ok());
}

TEST(JobSpec, DropLastWithEnoughSamplesIsValid) {
  // 2 DDP ranks × 8 = 16 samples exactly.
  EXPECT_TRUE(parseJobSpec(patched({{"strategy", {{"kind", "ddp"}}},
                                    {"data", {{"samples", 16}, {"drop_last", true}}},
                                    {"launch", {{"hosts", {{{"ranks", 2}}}}}}}))
                  .ok());
}

// ---------------------------------------------------------------------------------------------
// Example files

TEST(JobSpecExamples, EveryExampleParsesAndRoundTrips) {
  std::vector<std::string> files = exampleFiles();
  ASSERT_GE(files.size(), 5u) << examplesDir();
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    JobSpec spec;
    ASSERT_NO_THROW(spec = loadJobSpecFile(file));
    EXPECT_EQ(spec.name + ".json", std::filesystem::path(file).filename().string())
        << "an example's name should match its file name";
    EXPECT_EQ(parseJobSpec(toJson(spec)).spec, spec);
    EXPECT_EQ(parseJobSpec(toJson(spec).dump()).spec, spec);
  }
}

TEST(JobSpecExamples, SingleMlp) {
  JobSpec spec = loadJobSpecFile(examplesDir() + "/single_mlp.json");
  EXPECT_EQ(spec.name, "single_mlp");
  EXPECT_EQ(strategyLabel(spec), "single");
  EXPECT_EQ(spec.model.layers, (std::vector<int64_t>{784, 256, 256, 10}));
  EXPECT_EQ(spec.model.activation, ActivationKind::kRelu);
  EXPECT_EQ(spec.data.kind, DataKind::kSynthetic);
  EXPECT_EQ(spec.data.samples, 8192);
  EXPECT_EQ(spec.data.features, 784);
  EXPECT_EQ(spec.data.classes, 10);
  EXPECT_EQ(spec.data.seed, 1u);
  EXPECT_EQ(spec.train.steps, 300);
  EXPECT_EQ(spec.train.batch_size, 64);
  EXPECT_EQ(spec.optimizer.kind, OptimizerKind::kAdamW);
  EXPECT_EQ(spec.optimizer.lr, 1e-3);
  EXPECT_EQ(spec.optimizer.weight_decay, 0.01);
  EXPECT_EQ(spec.telemetry.every_steps, 10);
  EXPECT_EQ(spec.device, DeviceKind::kCpu);
  EXPECT_EQ(spec.backend, BackendKind::kAuto);
  EXPECT_EQ(worldSize(spec), 1);
}

TEST(JobSpecExamples, StrategiesAndWorldSizes) {
  JobSpec ddp = loadJobSpecFile(examplesDir() + "/ddp_mlp.json");
  EXPECT_EQ(strategyLabel(ddp), "ddp");
  EXPECT_EQ(worldSize(ddp), 4);
  EXPECT_EQ(dataParallelSize(ddp), 4);

  JobSpec fsdp = loadJobSpecFile(examplesDir() + "/fsdp_mlp.json");
  EXPECT_EQ(strategyLabel(fsdp), "fsdp");
  EXPECT_EQ(fsdp.strategy.fsdp.sharding, FsdpSharding::kFullShard);
  EXPECT_EQ(worldSize(fsdp), 4);

  JobSpec pipeline = loadJobSpecFile(examplesDir() + "/pipeline_mlp.json");
  EXPECT_EQ(strategyLabel(pipeline), "pipeline");
  EXPECT_EQ(pipeline.strategy.pipeline.schedule, PipelineSchedule::k1f1b);
  EXPECT_EQ(pipeline.train.micro_batches, 8);
  EXPECT_EQ(worldSize(pipeline), 4);
  EXPECT_EQ(stageCount(pipeline), 4);
  EXPECT_GE(static_cast<int>(pipeline.model.layers.size()) - 1, stageCount(pipeline));

  JobSpec mnist = loadJobSpecFile(examplesDir() + "/idx_mnist.json");
  EXPECT_EQ(mnist.data.kind, DataKind::kIdx);
  EXPECT_EQ(mnist.data.images, "data/train-images-idx3-ubyte");
  EXPECT_EQ(mnist.data.labels, "data/train-labels-idx1-ubyte");
}

// ---------------------------------------------------------------------------------------------
// Every problem, message by message

struct ErrorCase {
  const char* patch;  // JSON merge patch on kMinimal
  std::vector<std::string> expected;
};

void PrintTo(const ErrorCase& c, std::ostream* os) {
  *os << c.patch;
}

class JobSpecErrors : public testing::TestWithParam<ErrorCase> {};

TEST_P(JobSpecErrors, ReportsExactly) {
  const ErrorCase& c = GetParam();
  json document = patched(json::parse(c.patch));
  SpecParseResult result = parseJobSpec(document);
  EXPECT_EQ(problemLines(result), c.expected);
  EXPECT_FALSE(result.ok());
  EXPECT_FALSE(result.spec);
  // The text path reports the same.
  EXPECT_EQ(problemLines(parseJobSpec(document.dump())), c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Root, JobSpecErrors,
    testing::Values(
        ErrorCase{R"({"name": null})", {"name: required"}},
        ErrorCase{R"({"name": ""})", {"name: expected a non-empty string, got \"\""}},
        ErrorCase{R"({"name": 5})", {"name: expected a non-empty string, got 5"}},
        ErrorCase{R"({"name": "my job"})",
                  {"name: expected only letters, digits, '.', '_' and '-', got \"my job\""}},
        ErrorCase{R"({"name": "a/b"})",
                  {"name: expected only letters, digits, '.', '_' and '-', got \"a/b\""}},
        ErrorCase{
            R"({"name": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})",
            {"name: expected at most 64 characters, got 65"}},
        ErrorCase{R"({"description": 3})", {"description: expected a string, got 3"}},
        ErrorCase{R"({"nmae": "x"})", {"nmae: unknown key (did you mean \"name\"?)"}},
        ErrorCase{R"({"steps": 10})", {"steps: unknown key (did you mean \"train.steps\"?)"}},
        ErrorCase{R"({"zzz": 1})", {"zzz: unknown key"}},
        ErrorCase{R"({"backend": "mpi"})",
                  {"backend: expected one of \"auto\", \"gloo\", \"nccl\", got \"mpi\""}},
        ErrorCase{R"({"device": "tpu"})",
                  {"device: expected one of \"auto\", \"cpu\", \"cuda\", got \"tpu\""}},
        ErrorCase{R"({"device": 1})",
                  {"device: expected one of \"auto\", \"cpu\", \"cuda\", got 1"}},
        ErrorCase{R"({"backend": "nccl", "device": "cpu"})",
                  {"backend: nccl needs CUDA devices, but device is \"cpu\""}}));

INSTANTIATE_TEST_SUITE_P(
    Strategy, JobSpecErrors,
    testing::Values(
        ErrorCase{R"({"strategy": null})", {"strategy: required"}},
        ErrorCase{R"({"strategy": "ddp"})", {"strategy: expected an object, got \"ddp\""}},
        ErrorCase{R"({"strategy": {"kind": "tp"}})",
                  {"strategy.kind: expected one of \"single\", \"ddp\", \"fsdp\", \"pipeline\", "
                   "got \"tp\""}},
        // Without a kind the block has the mesh form, whose keys a legacy kind's typo is held to.
        ErrorCase{R"({"strategy": {"kind": null, "knd": "single"}})",
                  {"strategy.knd: unknown key (did you mean \"kind\"?)"}},
        ErrorCase{R"({"strategy": {"bucket_cap_mb": 25}})",
                  {"strategy.bucket_cap_mb: only valid when strategy.kind is ddp"}},
        ErrorCase{R"({"strategy": {"sharding": "full_shard"}})",
                  {"strategy.sharding: only valid when strategy.kind is fsdp"}},
        ErrorCase{R"({"strategy": {"units": "layer"}})",
                  {"strategy.units: only valid when strategy.kind is fsdp"}},
        ErrorCase{R"({"strategy": {"kind": "ddp", "schedule": "1f1b"}})",
                  {"strategy.schedule: only valid when strategy.kind is pipeline"}},
        ErrorCase{R"({"strategy": {"kind": "fsdp", "virtual_stages": 1}})",
                  {"strategy.virtual_stages: only valid when strategy.kind is pipeline"}},
        ErrorCase{R"({"strategy": {"stages": [[0], [1]]}})",
                  {"strategy.stages: only valid when strategy.kind is pipeline"}},
        ErrorCase{R"({"strategy": {"kind": "ddp", "bucket_cap_mb": 0}})",
                  {"strategy.bucket_cap_mb: expected a positive number, got 0"}},
        ErrorCase{R"({"strategy": {"kind": "ddp", "bucket_cap_mb": "25"}})",
                  {"strategy.bucket_cap_mb: expected a positive number, got \"25\""}},
        ErrorCase{R"({"strategy": {"kind": "ddp", "bucket_cap_mb": 1e6}})",
                  {"strategy.bucket_cap_mb: expected a positive number no larger than 65536, got "
                   "1000000.0"}},
        ErrorCase{R"({"strategy": {"kind": "ddp", "find_unused_parameters": true}})",
                  {"strategy.find_unused_parameters: unknown key"}},
        ErrorCase{R"({"strategy": {"kind": "fsdp", "sharding": "zero3"}})",
                  {"strategy.sharding: expected one of \"full_shard\", \"shard_grad_op\", "
                   "\"no_shard\", got \"zero3\""}},
        ErrorCase{R"({"strategy": {"kind": "fsdp", "units": "block"}})",
                  {"strategy.units: expected one of \"layer\", \"model\", got \"block\""}},
        ErrorCase{R"({"strategy": {"kind": "fsdp", "shardng": "no_shard"}})",
                  {"strategy.shardng: unknown key (did you mean \"sharding\"?)"}},
        // An unknown kind still has its options' values checked, but none is misplaced.
        ErrorCase{R"({"strategy": {"kind": "zero", "sharding": "x", "bucket_cap_mb": -1}})",
                  {"strategy.kind: expected one of \"single\", \"ddp\", \"fsdp\", \"pipeline\", "
                   "got \"zero\"",
                   "strategy.bucket_cap_mb: expected a positive number, got -1",
                   "strategy.sharding: expected one of \"full_shard\", \"shard_grad_op\", "
                   "\"no_shard\", got \"x\""}},
        ErrorCase{R"({"launch": {"hosts": [{"ranks": 2}]}})",
                  {"strategy.kind: single runs exactly 1 rank, but launch.hosts give a world size "
                   "of 2"}}));

// Issue 34: the mesh form's problems, each at its path. The patches drop the minimal spec's legacy
// kind (a merge patch's null) to write the mesh form.
INSTANTIATE_TEST_SUITE_P(
    Mesh, JobSpecErrors,
    testing::Values(
        ErrorCase{R"({"strategy": {"kind": null, "mesh": 2}})",
                  {"strategy.mesh: expected an object, got 2"}},
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"dp": 2}}})",
                  {"strategy.mesh: dp 2 × tp 1 × pp 1 = 2 ranks, but launch.hosts give a world "
                   "size of 1; change the mesh or launch.hosts[].ranks so that they agree (left "
                   "out, strategy.mesh.dp is the world size / (tp × pp))"}},
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"dp": 1, "tp": 2, "pp": 2}},
                      "launch": {"hosts": [{"ranks": 8}]}})",
                  {"strategy.mesh: dp 1 × tp 2 × pp 2 = 4 ranks, but launch.hosts give a world "
                   "size of 8; change the mesh or launch.hosts[].ranks so that they agree (left "
                   "out, strategy.mesh.dp is the world size / (tp × pp))"}},
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"pp": 2}},
                      "launch": {"hosts": [{"ranks": 3}]}})",
                  {"strategy.mesh: tp 1 × pp 2 = 2 ranks per replica do not divide the world size "
                   "3 (launch.hosts), so strategy.mesh.dp cannot be inferred; change tp or pp, or "
                   "launch.hosts[].ranks"}},
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"tp": 0}}})",
                  {"strategy.mesh.tp: expected a positive integer, got 0"}},
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"dp": -2}}})",
                  {"strategy.mesh.dp: expected a positive integer, got -2"}},
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"pp": 1.5}}})",
                  {"strategy.mesh.pp: expected a positive integer, got 1.5"}},
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"pp": "2"}}})",
                  {"strategy.mesh.pp: expected a positive integer, got \"2\""}},
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"dq": 1}}})",
                  {"strategy.mesh.dq: unknown key (did you mean \"dp\"?)"}},
        ErrorCase{R"({"strategy": {"kind": null, "bucket_cap_mb": 25}})",
                  {"strategy.bucket_cap_mb: unknown key"}},
        ErrorCase{R"({"strategy": {"kind": null, "dp": {"kind": "fdsp"}}})",
                  {"strategy.dp.kind: unknown data-parallel plan \"fdsp\" (did you mean "
                   "\"fsdp\"?)"}},
        ErrorCase{R"({"strategy": {"kind": null, "dp": {"kind": "zero3"}}})",
                  {"strategy.dp.kind: expected one of \"ddp\", \"fsdp\", got \"zero3\""}},
        ErrorCase{R"({"strategy": {"kind": null, "dp": {"kind": 2}}})",
                  {"strategy.dp.kind: expected one of \"ddp\", \"fsdp\", got 2"}},
        ErrorCase{R"({"strategy": {"kind": null, "dp": {"kind": "ddp", "sharding": "no_shard"}}})",
                  {"strategy.dp.sharding: only valid when strategy.dp.kind is fsdp"}},
        ErrorCase{R"({"strategy": {"kind": null, "dp": {"units": "layer"}}})",
                  {"strategy.dp.units: only valid when strategy.dp.kind is fsdp"}},
        ErrorCase{R"({"strategy": {"kind": null, "dp": {"kind": "fsdp", "bucket_cap_mb": 5}}})",
                  {"strategy.dp.bucket_cap_mb: only valid when strategy.dp.kind is ddp"}},
        ErrorCase{R"({"strategy": {"kind": null, "dp": {"bucket_cap": 5}}})",
                  {"strategy.dp.bucket_cap: unknown key (did you mean \"bucket_cap_mb\"?)"}},
        ErrorCase{R"({"strategy": {"kind": null, "dp": {"kind": "ddp", "bucket_cap_mb": 0}}})",
                  {"strategy.dp.bucket_cap_mb: expected a positive number, got 0"}},
        // An unknown plan still has its options' values checked, but none is misplaced.
        ErrorCase{R"({"strategy": {"kind": null, "dp": {"kind": "zero", "sharding": "x"}}})",
                  {"strategy.dp.kind: expected one of \"ddp\", \"fsdp\", got \"zero\"",
                   "strategy.dp.sharding: expected one of \"full_shard\", \"shard_grad_op\", "
                   "\"no_shard\", got \"x\""}},
        ErrorCase{R"({"strategy": {"kind": null, "tp": {"sequence_paralel": true}}})",
                  {"strategy.tp.sequence_paralel: unknown key (did you mean "
                   "\"sequence_parallel\"?)"}},
        ErrorCase{R"({"strategy": {"kind": null, "tp": {"sequence_parallel": 1}}})",
                  {"strategy.tp.sequence_parallel: expected true or false, got 1"}},
        ErrorCase{R"({"strategy": {"kind": null, "pp": {"schedul": "gpipe"}}})",
                  {"strategy.pp.schedul: unknown key (did you mean \"schedule\"?)"}},
        ErrorCase{R"({"strategy": {"kind": null, "pp": []}})",
                  {"strategy.pp: expected an object, got []"}},
        // The legacy form's kind with the mesh form's keys.
        ErrorCase{R"({"strategy": {"kind": "ddp", "mesh": {"dp": 1}}})",
                  {"strategy.mesh: not valid beside strategy.kind (the legacy form); write the "
                   "strategy as strategy.mesh and strategy.dp.kind without strategy.kind"}},
        // tp on a model without tensor parallelism; sequence parallelism without tp.
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"tp": 2}},
                      "launch": {"hosts": [{"ranks": 2}]}})",
                  {"strategy.mesh.tp: model.kind \"mlp\" has no tensor parallelism (only gpt "
                   "splits its layers over tp ranks), got tp 2; set strategy.mesh.tp to 1"}},
        ErrorCase{R"({"strategy": {"kind": null, "tp": {"sequence_parallel": true}}})",
                  {"strategy.tp.sequence_parallel: splits the sequence over the tensor-parallel "
                   "ranks, so it needs strategy.mesh.tp > 1 (this mesh's tp is 1); set it to "
                   "false or raise tp"}},
        // Fewer blocks than pipeline stages, at the mesh's pp.
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"pp": 3}},
                      "launch": {"hosts": [{"ranks": 3}]}})",
                  {"strategy.mesh.pp: 3 pipeline ranks (strategy.mesh.pp) × virtual_stages 1 = 3 "
                   "pipeline stages, but model.layers has only 2 Linear layers (each stage needs "
                   "one)"}},
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"dp": 2, "pp": 2},
                                   "pp": {"stages": [[0, 1]]}},
                      "launch": {"hosts": [{"ranks": 4}]}})",
                  {"strategy.pp.stages: expected 2 stages (2 pipeline ranks (strategy.mesh.pp) × "
                   "virtual_stages 1), got 1"}},
        // Micro-batches are the pipeline's, with any dp.
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"dp": 2}}, "train": {"micro_batches": 2},
                      "launch": {"hosts": [{"ranks": 2}]}})",
                  {"train.micro_batches: must be 1 unless the model is split into pipeline stages "
                   "(strategy.mesh.pp > 1), got 2"}},
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"dp": 2, "pp": 2}},
                      "train": {"micro_batches": 3}, "launch": {"hosts": [{"ranks": 4}]}})",
                  {"train.micro_batches: must divide train.batch_size (8), got 3"}},
        // drop_last needs a full batch per data-parallel rank: mesh.dp of them, not the world.
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"dp": 2, "pp": 2}},
                      "data": {"samples": 15, "drop_last": true},
                      "launch": {"hosts": [{"ranks": 4}]}})",
                  {"data.samples: with drop_last, 2 data-parallel ranks × batch_size 8 need at "
                   "least 16 samples, got 15"}}));

// Issue 34: tensor parallelism's needs of the GPT (heads, vocabulary and, with sequence
// parallelism, the context divisible by tp), each at the field to change.
INSTANTIATE_TEST_SUITE_P(
    TensorParallel, JobSpecErrors,
    testing::Values(
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"tp": 2}},
                      "model": {"kind": "gpt", "layers": 2, "vocab_size": 257, "context": 8,
                                "heads": 3, "dim": 12},
                      "data": {"kind": "text", "path": "c.txt", "samples": null, "features": null,
                               "classes": null},
                      "launch": {"hosts": [{"ranks": 2}]}})",
                  {"strategy.mesh.tp: must divide model.heads (3): each tp rank holds 1 / tp of "
                   "its attention heads, got tp 2",
                   "strategy.mesh.tp: must divide model.vocab_size (257): each tp rank holds 1 / "
                   "tp of its rows of the vocabulary-parallel embedding and head, got tp 2"}},
        ErrorCase{R"({"strategy": {"kind": null, "mesh": {"tp": 2},
                                   "tp": {"sequence_parallel": true}},
                      "model": {"kind": "gpt", "layers": 2, "vocab_size": 256, "context": 9,
                                "heads": 2, "dim": 16},
                      "data": {"kind": "text", "path": "c.txt", "samples": null, "features": null,
                               "classes": null},
                      "launch": {"hosts": [{"ranks": 2}]}})",
                  {"strategy.tp.sequence_parallel: needs model.context (9) divisible by "
                   "strategy.mesh.tp (2): each tp rank holds context / tp positions"}}));

INSTANTIATE_TEST_SUITE_P(
    Pipeline, JobSpecErrors,
    testing::Values(
        ErrorCase{R"({"strategy": {"kind": "pipeline", "schedule": "looped"}})",
                  {"strategy.schedule: expected one of \"gpipe\", \"1f1b\", \"interleaved_1f1b\", "
                   "\"zb_h1\", got \"looped\""}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "virtual_stages": 0}})",
                  {"strategy.virtual_stages: expected a positive integer, got 0"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "virtual_stages": 5000}})",
                  {"strategy.virtual_stages: expected a positive integer no larger than 1024, got "
                   "5000"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "virtual_stages": 2}})",
                  {"strategy.virtual_stages: must be 1 unless the schedule is "
                   "interleaved_1f1b, got 2"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "schedule": "interleaved_1f1b"}})",
                  {"strategy.virtual_stages: interleaved_1f1b needs at least 2 virtual stages per "
                   "rank, got 1"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "schedule": "interleaved_1f1b",
                                   "virtual_stages": 3}})",
                  {"strategy: 1 pipeline rank (strategy.mesh.pp) × virtual_stages 3 = 3 pipeline "
                   "stages, but model.layers has only 2 Linear layers (each stage needs one)"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "schedule": "interleaved_1f1b",
                                   "virtual_stages": 2},
                      "train": {"batch_size": 6, "micro_batches": 3},
                      "model": {"layers": [4, 8, 8, 8, 3]}, "launch": {"hosts": [{"ranks": 2}]}})",
                  {"train.micro_batches: interleaved_1f1b needs a multiple of the 2 pipeline "
                   "ranks, got 3"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline"}, "launch": {"hosts": [{"ranks": 3}]}})",
                  {"strategy: 3 pipeline ranks (strategy.mesh.pp) × virtual_stages 1 = 3 pipeline "
                   "stages, but model.layers has only 2 Linear layers (each stage needs one)"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "stages": [[0], [1], [2]]},
                      "model": {"layers": [4, 8, 8, 8, 3]}, "launch": {"hosts": [{"ranks": 2}]}})",
                  {"strategy.stages: expected 2 stages (2 pipeline ranks (strategy.mesh.pp) × "
                   "virtual_stages 1), got 3"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "stages": [[1], [0]]},
                      "launch": {"hosts": [{"ranks": 2}]}})",
                  {"strategy.stages[0][0]: expected layer 0 (stages must list layers 0..1 in "
                   "order, each once), got 1"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "stages": [[0], [0]]},
                      "launch": {"hosts": [{"ranks": 2}]}})",
                  {"strategy.stages[1][0]: expected layer 1 (stages must list layers 0..1 in "
                   "order, each once), got 0"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "stages": [[0], [1]]},
                      "model": {"layers": [4, 8, 8, 3]}, "launch": {"hosts": [{"ranks": 2}]}})",
                  {"strategy.stages: layer 2 is in no stage (stages must list layers 0..2 in "
                   "order, each once)"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "stages": [[0], [1]]},
                      "model": {"layers": [4, 8, 8, 8, 3]}, "launch": {"hosts": [{"ranks": 2}]}})",
                  {"strategy.stages: layers 2..3 are in no stage (stages must list layers 0..3 in "
                   "order, each once)"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "stages": "balanced"}})",
                  {"strategy.stages: expected a non-empty array of stages (arrays of layer "
                   "indices), got \"balanced\""}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "stages": []}})",
                  {"strategy.stages: expected a non-empty array of stages (arrays of layer "
                   "indices), got []"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "stages": [[]]}})",
                  {"strategy.stages[0]: expected a non-empty array of layer indices, got []"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline", "stages": [[0, -1]]}})",
                  {"strategy.stages[0][1]: expected a non-negative integer, got -1"}},
        ErrorCase{R"({"strategy": {"kind": "pipeline"}, "train": {"micro_batches": 3},
                      "launch": {"hosts": [{"ranks": 2}]}})",
                  {"train.micro_batches: must divide train.batch_size (8), got 3"}},
        ErrorCase{R"({"train": {"micro_batches": 2}})",
                  {"train.micro_batches: must be 1 unless the model is split into pipeline stages "
                   "(strategy.mesh.pp > 1), got 2"}},
        // A legacy pipeline of one rank is one stage, no pipeline (issue 34): no micro-batches.
        ErrorCase{R"({"strategy": {"kind": "pipeline"}, "train": {"micro_batches": 2}})",
                  {"train.micro_batches: must be 1 unless the model is split into pipeline stages "
                   "(strategy.mesh.pp > 1), got 2"}}));

INSTANTIATE_TEST_SUITE_P(
    Model, JobSpecErrors,
    testing::Values(
        ErrorCase{R"({"model": null})", {"model: required"}},
        ErrorCase{R"({"model": [784, 10]})", {"model: expected an object, got [784,10]"}},
        ErrorCase{R"({"model": {"kind": null}})", {"model.kind: required"}},
        ErrorCase{R"({"model": {"kind": "cnn"}})",
                  {"model.kind: expected one of \"mlp\", \"residual_mlp\", \"gpt\", got "
                   "\"cnn\""}},
        ErrorCase{R"({"model": {"layers": null}})", {"model.layers: required"}},
        ErrorCase{R"({"model": {"layers": [4]}})",
                  {"model.layers: expected an array of at least 2 layer widths, got [4]"}},
        ErrorCase{R"({"model": {"layers": "4,8,3"}})",
                  {"model.layers: expected an array of at least 2 layer widths, got \"4,8,3\""}},
        ErrorCase{R"({"model": {"layers": [4, 0, 3]}})",
                  {"model.layers[1]: expected a positive integer, got 0"}},
        ErrorCase{R"({"model": {"layers": [4, 8.5, -3]}})",
                  {"model.layers[1]: expected a positive integer, got 8.5",
                   "model.layers[2]: expected a positive integer, got -3"}},
        ErrorCase{R"({"model": {"layers": [4, 2000000, 3]}})",
                  {"model.layers[1]: expected a positive integer no larger than 1048576, got "
                   "2000000"}},
        ErrorCase{R"({"model": {"layers": [4, 1048576, 1048576, 3]}})",
                  {"model.layers: 1099521064963 parameters is more than the 10000000000 "
                   "supported"}},
        ErrorCase{R"({"model": {"activation": "tanh"}})",
                  {"model.activation: expected one of \"relu\", \"gelu\", got \"tanh\""}},
        ErrorCase{R"({"model": {"dropout": 1}})",
                  {"model.dropout: expected a number in [0, 1), got 1"}},
        ErrorCase{R"({"model": {"dropout": -0.5}})",
                  {"model.dropout: expected a number in [0, 1), got -0.5"}},
        ErrorCase{R"({"model": {"dropout": "0.1"}})",
                  {"model.dropout: expected a number in [0, 1), got \"0.1\""}},
        ErrorCase{R"({"model": {"layer_norm": "yes"}})",
                  {"model.layer_norm: expected true or false, got \"yes\""}},
        ErrorCase{R"({"model": {"seed": -1}})",
                  {"model.seed: expected a non-negative integer, got -1"}},
        ErrorCase{R"({"model": {"seed": 1.5}})",
                  {"model.seed: expected a non-negative integer, got 1.5"}},
        ErrorCase{R"({"model": {"init_checkpoint": ""}})",
                  {"model.init_checkpoint: expected a non-empty string, got \"\""}},
        ErrorCase{R"({"model": {"layer": [4, 3]}})",
                  {"model.layer: unknown key (did you mean \"layers\"?)"}}));

// A gpt model section: {"model": {"kind": "gpt", <fields>}} over a small valid one, reading token
// shards (a model of token ids refuses the base document's synthetic features); the text lives as
// long as the test program, as ErrorCase's patch must.
const char* gptPatch(const std::string& fields) {
  static std::deque<std::string> patches;
  json model = {{"kind", "gpt"}, {"layers", 2}, {"vocab_size", 64},      {"context", 16},
                {"heads", 2},    {"dim", 32},   {"activation", nullptr}, {"layer_norm", nullptr}};
  model.merge_patch(json::parse("{" + fields + "}"));
  const json data = {{"kind", "tokens"},
                     {"train", "shards/train_*.bin"},
                     {"samples", nullptr},
                     {"features", nullptr},
                     {"classes", nullptr}};
  return patches.emplace_back(json{{"model", model}, {"data", data}}.dump()).c_str();
}

INSTANTIATE_TEST_SUITE_P(
    Gpt, JobSpecErrors,
    testing::Values(
        ErrorCase{gptPatch(R"("heads": 5)"), {"model.heads: must divide model.dim (32), got 5"}},
        ErrorCase{gptPatch(R"("vocab_size": null)"), {"model.vocab_size: required"}},
        ErrorCase{gptPatch(R"("layers": [4, 8])"),
                  {"model.layers: expected a positive integer (gpt: the number of transformer "
                   "blocks), got [4,8]"}},
        ErrorCase{gptPatch(R"("layers": 1025)"),
                  {"model.layers: expected a positive integer (gpt: the number of transformer "
                   "blocks) no larger than 1024, got 1025"}},
        ErrorCase{gptPatch(R"("context": 0)"),
                  {"model.context: expected a positive integer, got 0"}},
        ErrorCase{gptPatch(R"("context": 100000)"),
                  {"model.context: expected a positive integer no larger than 65536, got 100000"}},
        ErrorCase{gptPatch(R"("bias": 1)"), {"model.bias: expected true or false, got 1"}},
        ErrorCase{gptPatch(R"("activation": "gelu")"),
                  {"model.activation: not valid when model.kind is gpt"}},
        ErrorCase{R"({"model": {"heads": 2}})", {"model.heads: only valid when model.kind is gpt"}},
        ErrorCase{gptPatch(R"("vocab_size": 1048576, "dim": 65536)"),
                  {"model: 171801575424 parameters, more than the limit of 10000000000"}}));

TEST(JobSpecGpt, ParsesAndRoundTrips) {
  json document = patched(json::parse(gptPatch(R"("dropout": 0.1, "bias": false)")));
  const SpecParseResult parsed = parseJobSpec(document);
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  const ModelSpec& model = parsed.spec->model;
  EXPECT_EQ(model.kind, "gpt");
  EXPECT_EQ(model.block_count, 2);
  EXPECT_TRUE(model.layers.empty());
  EXPECT_EQ(model.vocab_size, 64);
  EXPECT_EQ(model.context, 16);
  EXPECT_EQ(model.heads, 2);
  EXPECT_EQ(model.dim, 32);
  EXPECT_FALSE(model.bias);
  EXPECT_DOUBLE_EQ(model.dropout, 0.1);
  const json canonical = toJson(*parsed.spec);
  EXPECT_EQ(canonical["model"]["layers"], 2);
  EXPECT_FALSE(canonical["model"].contains("activation"));
  const SpecParseResult again = parseJobSpec(canonical);
  ASSERT_TRUE(again.ok()) << again.describe();
  EXPECT_EQ(again.spec->model, model);
  // bias defaults to true.
  EXPECT_TRUE(parseJobSpec(patched(json::parse(gptPatch("")))).spec->model.bias);
}

INSTANTIATE_TEST_SUITE_P(
    Data, JobSpecErrors,
    testing::Values(
        ErrorCase{R"({"data": null})", {"data: required"}},
        ErrorCase{R"({"data": "mnist"})", {"data: expected an object, got \"mnist\""}},
        ErrorCase{R"({"data": {"kind": null}})", {"data.kind: required"}},
        ErrorCase{R"({"data": {"kind": "csv"}})",
                  {"data.kind: expected one of \"synthetic\", \"idx\", \"tokens\", \"text\", "
                   "got \"csv\""}},
        ErrorCase{R"({"data": {"samples": null, "features": null, "classes": null}})",
                  {"data.samples: required", "data.features: required", "data.classes: required"}},
        ErrorCase{R"({"data": {"samples": 0}})",
                  {"data.samples: expected a positive integer, got 0"}},
        ErrorCase{R"({"data": {"samples": 2000000000}})",
                  {"data.samples: expected a positive integer no larger than 1000000000, got "
                   "2000000000"}},
        ErrorCase{R"({"data": {"features": -4}})",
                  {"data.features: expected a positive integer, got -4"}},
        ErrorCase{R"({"data": {"features": 5}})",
                  {"data.features: must equal model.layers[0] (4), got 5"}},
        ErrorCase{R"({"data": {"classes": 1}})",
                  {"data.classes: expected an integer of at least 2, got 1"}},
        ErrorCase{R"({"data": {"classes": 4}})",
                  {"data.classes: must equal model.layers[2] (3), got 4"}},
        ErrorCase{R"({"data": {"seed": "x"}})",
                  {"data.seed: expected a non-negative integer, got \"x\""}},
        ErrorCase{R"({"data": {"images": "i", "labels": "l"}})",
                  {"data.images: only valid when data.kind is idx",
                   "data.labels: only valid when data.kind is idx"}},
        ErrorCase{R"({"data": {"kind": "idx", "features": null, "classes": null, "seed": 1}})",
                  {"data.samples: only valid when data.kind is synthetic",
                   "data.seed: only valid when data.kind is synthetic", "data.images: required",
                   "data.labels: required"}},
        ErrorCase{R"({"data": {"kind": "idx", "samples": null, "features": null, "classes": null,
                               "images": "", "labels": 7}})",
                  {"data.images: expected a non-empty string, got \"\"",
                   "data.labels: expected a non-empty string, got 7"}},
        ErrorCase{R"({"data": {"shuffle": 1}})", {"data.shuffle: expected true or false, got 1"}},
        ErrorCase{R"({"data": {"drop_last": "no"}})",
                  {"data.drop_last: expected true or false, got \"no\""}},
        ErrorCase{R"({"data": {"samples": 4, "drop_last": true}})",
                  {"data.samples: with drop_last, 1 data-parallel rank × batch_size 8 need at "
                   "least 8 samples, got 4"}},
        ErrorCase{R"({"strategy": {"kind": "ddp"}, "data": {"samples": 20, "drop_last": true},
                      "launch": {"hosts": [{"ranks": 3}]}})",
                  {"data.samples: with drop_last, 3 data-parallel ranks × batch_size 8 need at "
                   "least 24 samples, got 20"}},
        ErrorCase{R"({"data": {"sample": 4}})",
                  {"data.sample: unknown key (did you mean \"samples\"?)"}}));

// Token data over a gpt model: {"model": gpt with <model> fields, "data": <data> with the
// minimal spec's synthetic keys removed} (the text lives as long as the test program, as
// ErrorCase's patch must).
const char* tokenDataPatch(const std::string& data, const std::string& model = "") {
  static std::deque<std::string> patches;
  json model_json = {{"kind", "gpt"},         {"layers", 2},          {"vocab_size", 300},
                     {"context", 16},         {"heads", 2},           {"dim", 32},
                     {"activation", nullptr}, {"layer_norm", nullptr}};
  model_json.merge_patch(json::parse("{" + model + "}"));
  json data_json = {{"samples", nullptr}, {"features", nullptr}, {"classes", nullptr}};
  data_json.merge_patch(json::parse("{" + data + "}"));
  return patches.emplace_back(json{{"model", model_json}, {"data", data_json}}.dump()).c_str();
}

INSTANTIATE_TEST_SUITE_P(
    TokenData, JobSpecErrors,
    testing::Values(
        ErrorCase{tokenDataPatch(R"("kind": "tokens")"), {"data.train: required"}},
        ErrorCase{tokenDataPatch(R"("kind": "tokens", "train": "a/*.bin", "val": "",
                                    "path": "t.txt", "val_fraction": 0.5)"),
                  {"data.path: only valid when data.kind is text",
                   "data.val_fraction: only valid when data.kind is text",
                   "data.val: expected a non-empty string, got \"\""}},
        ErrorCase{tokenDataPatch(R"("kind": "text")"), {"data.path: required"}},
        ErrorCase{tokenDataPatch(R"("kind": "text", "path": "t.txt", "train": "a.bin")"),
                  {"data.train: only valid when data.kind is tokens"}},
        ErrorCase{tokenDataPatch(R"("kind": "text", "path": "t.txt", "val_fraction": 1)"),
                  {"data.val_fraction: expected a number in (0, 1), got 1"}},
        ErrorCase{tokenDataPatch(R"("kind": "text", "path": "t.txt", "val_fraction": 0)"),
                  {"data.val_fraction: expected a number in (0, 1), got 0"}},
        ErrorCase{tokenDataPatch(R"("kind": "text", "path": "t.txt")", R"("vocab_size": 100)"),
                  {"model.vocab_size: must be at least 256 for data.kind text (one token per "
                   "byte), got 100"}},
        ErrorCase{R"({"data": {"kind": "tokens", "samples": null, "features": null,
                               "classes": null, "train": "a.bin"}})",
                  {"data.kind: tokens data are token ids, but model.kind mlp reads float features "
                   "(use a model of token ids: gpt)"}}));

TEST(JobSpecTokenData, ParsesAndRoundTrips) {
  struct Case {
    const char* data;
    DataSpec expected;
  };
  const std::vector<Case> cases = {
      {R"("kind": "tokens", "train": "d/train_*.bin", "val": "d/val_*.bin")",
       DataSpec{.kind = DataKind::kTokens, .train = "d/train_*.bin", .val = "d/val_*.bin"}},
      {R"("kind": "tokens", "train": "d/train_*.bin", "shuffle": false)",
       DataSpec{.kind = DataKind::kTokens, .train = "d/train_*.bin", .shuffle = false}},
      {R"("kind": "text", "path": "t.txt")", DataSpec{.kind = DataKind::kText, .path = "t.txt"}},
      {R"("kind": "text", "path": "t.txt", "val_fraction": 0.05)",
       DataSpec{.kind = DataKind::kText, .path = "t.txt", .val_fraction = 0.05}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.data);
    const SpecParseResult parsed = parseJobSpec(patched(json::parse(tokenDataPatch(c.data))));
    ASSERT_TRUE(parsed.ok()) << parsed.describe();
    EXPECT_EQ(parsed.spec->data, c.expected);
    const json canonical = toJson(*parsed.spec);
    EXPECT_FALSE(canonical["data"].contains("samples"));
    EXPECT_EQ(canonical["data"].contains("val"), !c.expected.val.empty());
    EXPECT_EQ(canonical["data"].contains("val_fraction"), c.expected.kind == DataKind::kText);
    const SpecParseResult again = parseJobSpec(canonical);
    ASSERT_TRUE(again.ok()) << again.describe();
    EXPECT_EQ(again.spec->data, c.expected);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Train, JobSpecErrors,
    testing::Values(
        ErrorCase{R"({"train": null})", {"train: required"}},
        ErrorCase{R"({"train": 10})", {"train: expected an object, got 10"}},
        ErrorCase{R"({"train": {"steps": null, "batch_size": null}})",
                  {"train.steps: required", "train.batch_size: required"}},
        ErrorCase{R"({"train": {"steps": 0}})",
                  {"train.steps: expected a positive integer, got 0"}},
        ErrorCase{R"({"train": {"steps": 1.5}})",
                  {"train.steps: expected a positive integer, got 1.5"}},
        ErrorCase{R"({"train": {"steps": 2000000000}})",
                  {"train.steps: expected a positive integer no larger than 1000000000, got "
                   "2000000000"}},
        ErrorCase{R"({"train": {"steps": 18446744073709551615}})",
                  {"train.steps: expected a positive integer no larger than 1000000000, got "
                   "18446744073709551615"}},
        ErrorCase{R"({"train": {"steps": 1e300}})",
                  {"train.steps: expected a positive integer, got 1e+300"}},
        ErrorCase{R"({"train": {"batch_size": -3}})",
                  {"train.batch_size: expected a positive integer, got -3"}},
        ErrorCase{R"({"train": {"batch_size": "abc"}})",
                  {"train.batch_size: expected a positive integer, got \"abc\""}},
        ErrorCase{R"({"train": {"batch_size": 2097152}})",
                  {"train.batch_size: expected a positive integer no larger than 1048576, got "
                   "2097152"}},
        ErrorCase{R"({"train": {"grad_accum_steps": 0}})",
                  {"train.grad_accum_steps: expected a positive integer, got 0"}},
        ErrorCase{R"({"train": {"micro_batches": 0}})",
                  {"train.micro_batches: expected a positive integer, got 0"}},
        ErrorCase{R"({"train": {"seed": -5}})",
                  {"train.seed: expected a non-negative integer, got -5"}},
        ErrorCase{R"({"train": {"batchsize": 8}})",
                  {"train.batchsize: unknown key (did you mean \"batch_size\"?)"}}));

INSTANTIATE_TEST_SUITE_P(
    Optimizer, JobSpecErrors,
    testing::Values(
        ErrorCase{R"({"optimizer": null})", {"optimizer: required"}},
        ErrorCase{R"({"optimizer": "adam"})", {"optimizer: expected an object, got \"adam\""}},
        ErrorCase{R"({"optimizer": {"kind": null}})", {"optimizer.kind: required"}},
        ErrorCase{R"({"optimizer": {"kind": "lamb"}})",
                  {"optimizer.kind: expected one of \"sgd\", \"adam\", \"adamw\", got \"lamb\""}},
        ErrorCase{R"({"optimizer": {"lr": null}})", {"optimizer.lr: required"}},
        ErrorCase{R"({"optimizer": {"lr": 0}})",
                  {"optimizer.lr: expected a positive number, got 0"}},
        ErrorCase{R"({"optimizer": {"lr": "fast"}})",
                  {"optimizer.lr: expected a positive number, got \"fast\""}},
        ErrorCase{R"({"optimizer": {"momentum": 1}})",
                  {"optimizer.momentum: expected a number in [0, 1), got 1"}},
        ErrorCase{R"({"optimizer": {"dampening": 2}})",
                  {"optimizer.dampening: expected a number in [0, 1], got 2"}},
        ErrorCase{R"({"optimizer": {"nesterov": "y"}})",
                  {"optimizer.nesterov: expected true or false, got \"y\""}},
        ErrorCase{R"({"optimizer": {"nesterov": true}})",
                  {"optimizer.nesterov: requires momentum > 0 and dampening 0 (as in PyTorch), got "
                   "momentum 0 and dampening 0"}},
        ErrorCase{R"({"optimizer": {"nesterov": true, "momentum": 0.9, "dampening": 0.1}})",
                  {"optimizer.nesterov: requires momentum > 0 and dampening 0 (as in PyTorch), got "
                   "momentum 0.9 and dampening 0.1"}},
        ErrorCase{R"({"optimizer": {"betas": [0.9, 0.99], "eps": 1e-8}})",
                  {"optimizer.betas: only valid when optimizer.kind is adam or adamw",
                   "optimizer.eps: only valid when optimizer.kind is adam or adamw"}},
        ErrorCase{R"({"optimizer": {"kind": "adam", "momentum": 0.9, "dampening": 0,
                                    "nesterov": false}})",
                  {"optimizer.dampening: only valid when optimizer.kind is sgd",
                   "optimizer.momentum: only valid when optimizer.kind is sgd",
                   "optimizer.nesterov: only valid when optimizer.kind is sgd"}},
        ErrorCase{R"({"optimizer": {"kind": "adamw", "betas": [0.9]}})",
                  {"optimizer.betas: expected an array of two numbers in [0, 1), got [0.9]"}},
        ErrorCase{R"({"optimizer": {"kind": "adamw", "betas": [0.9, 1.0]}})",
                  {"optimizer.betas[1]: expected a number in [0, 1), got 1.0"}},
        ErrorCase{R"({"optimizer": {"kind": "adam", "eps": 0}})",
                  {"optimizer.eps: expected a positive number, got 0"}},
        ErrorCase{R"({"optimizer": {"weight_decay": -0.1}})",
                  {"optimizer.weight_decay: expected a non-negative number, got -0.1"}},
        ErrorCase{R"({"optimizer": {"clip_grad_norm": 0}})",
                  {"optimizer.clip_grad_norm: expected a positive number, got 0"}},
        ErrorCase{R"({"optimizer": {"kind": "rmsprop", "momentum": -1}})",
                  {"optimizer.kind: expected one of \"sgd\", \"adam\", \"adamw\", got \"rmsprop\"",
                   "optimizer.momentum: expected a number in [0, 1), got -1"}},
        ErrorCase{R"({"optimizer": {"learning_rate": 0.1}})",
                  {"optimizer.learning_rate: unknown key"}},
        ErrorCase{R"({"optimizer": {"momentm": 0.9}})",
                  {"optimizer.momentm: unknown key (did you mean \"momentum\"?)"}},
        ErrorCase{R"({"optimizer": {"schedule": "cosine"}})",
                  {"optimizer.schedule: expected an object, got \"cosine\""}},
        ErrorCase{R"({"optimizer": {"schedule": {"kind": "linear"}}})",
                  {"optimizer.schedule.kind: expected one of \"constant\", \"cosine\", got "
                   "\"linear\""}},
        ErrorCase{R"({"optimizer": {"schedule": {"warmup_steps": 2}}})",
                  {"optimizer.schedule.warmup_steps: only valid when optimizer.schedule.kind is "
                   "cosine"}},
        ErrorCase{R"({"optimizer": {"schedule": {"kind": "cosine", "warmup_steps": -1,
                                                 "min_lr": -0.1, "decay_steps": 0}}})",
                  {"optimizer.schedule.warmup_steps: expected a non-negative integer, got -1",
                   "optimizer.schedule.min_lr: expected a non-negative number, got -0.1",
                   "optimizer.schedule.decay_steps: expected a positive integer, got 0"}},
        ErrorCase{R"({"optimizer": {"schedule": {"kind": "cosine", "warmup_steps": 10}}})",
                  {"optimizer.schedule.warmup_steps: must be less than train.steps (10), got 10"}},
        ErrorCase{R"({"optimizer": {"schedule": {"kind": "cosine", "warmup_steps": 5,
                                                 "decay_steps": 5}}})",
                  {"optimizer.schedule.warmup_steps: must be less than "
                   "optimizer.schedule.decay_steps (5), got 5"}},
        ErrorCase{R"({"optimizer": {"schedule": {"kind": "cosine", "min_lr": 0.2}}})",
                  {"optimizer.schedule.min_lr: must be at most optimizer.lr (0.1), got 0.2"}},
        ErrorCase{R"({"optimizer": {"schedule": {"kind": "cosine", "warmup_step": 2}}})",
                  {"optimizer.schedule.warmup_step: unknown key (did you mean \"warmup_steps\"?)"}},
        ErrorCase{R"({"train": {"peak_tflops": 0}})",
                  {"train.peak_tflops: expected a positive number, got 0"}},
        ErrorCase{R"({"train": {"peak_tflops": "h100"}})",
                  {"train.peak_tflops: expected a positive number, got \"h100\""}}));

TEST(JobSpec, ScheduleAndPeakRoundTrip) {
  json document = patched(json::parse(R"({"optimizer": {"kind": "adamw", "lr": 6e-4,
      "schedule": {"kind": "cosine", "warmup_steps": 2, "min_lr": 6e-5, "decay_steps": 8}},
      "train": {"peak_tflops": 989.5}})"));
  const SpecParseResult parsed = parseJobSpec(document);
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  const LrSchedule& schedule = parsed.spec->optimizer.schedule;
  EXPECT_EQ(schedule.kind, LrScheduleKind::kCosine);
  EXPECT_EQ(schedule.warmup_steps, 2);
  EXPECT_EQ(schedule.min_lr, 6e-5);
  EXPECT_EQ(schedule.decay_steps, 8);
  EXPECT_EQ(parsed.spec->train.peak_tflops, 989.5);
  EXPECT_EQ(parseJobSpec(toJson(*parsed.spec)).spec, parsed.spec);
  // Without decay_steps the canonical form leaves it out (the decay ends at train.steps).
  document["optimizer"]["schedule"].erase("decay_steps");
  const json canonical = toJson(*parseJobSpec(document).spec);
  EXPECT_EQ(canonical["optimizer"]["schedule"],
            json::parse(R"({"kind": "cosine", "warmup_steps": 2, "min_lr": 6e-5})"));
  EXPECT_FALSE(canonical["train"].contains("decay_steps"));
}

INSTANTIATE_TEST_SUITE_P(
    Launch, JobSpecErrors,
    testing::Values(
        ErrorCase{R"({"launch": "local"})", {"launch: expected an object, got \"local\""}},
        ErrorCase{R"({"launch": {"hosts": []}})",
                  {"launch.hosts: expected a non-empty array of hosts, got []"}},
        ErrorCase{R"({"launch": {"hosts": [1]}})", {"launch.hosts[0]: expected an object, got 1"}},
        ErrorCase{R"({"launch": {"hosts": [{"host": "a"}]}})", {"launch.hosts[0].ranks: required"}},
        ErrorCase{R"({"launch": {"hosts": [{"ranks": 1}, {"ranks": 0}]}})",
                  {"launch.hosts[1].ranks: expected a positive integer, got 0"}},
        ErrorCase{R"({"launch": {"hosts": [{"ranks": 2000}]}})",
                  {"launch.hosts[0].ranks: expected a positive integer no larger than 1024, got "
                   "2000"}},
        ErrorCase{R"({"launch": {"hosts": [{"ranks": 1, "host": ""}]}})",
                  {"launch.hosts[0].host: expected a host name or address, got \"\""}},
        ErrorCase{R"({"launch": {"hosts": [{"ranks": 1, "host": "-oProxyCommand=x"}]}})",
                  {"launch.hosts[0].host: expected a host name or address, got "
                   "\"-oProxyCommand=x\""}},
        ErrorCase{R"({"launch": {"hosts": [{"ranks": 1, "host": "a b"}]}})",
                  {"launch.hosts[0].host: expected a host name or address, got \"a b\""}},
        ErrorCase{R"({"launch": {"hosts": [{"ranks": 1, "port": 0}]}})",
                  {"launch.hosts[0].port: expected a port number in 1..65535, got 0"}},
        ErrorCase{R"({"launch": {"hosts": [{"ranks": 1, "port": 70000}]}})",
                  {"launch.hosts[0].port: expected a port number in 1..65535, got 70000"}},
        ErrorCase{R"({"launch": {"hosts": [{"ranks": 1, "user": ""}]}})",
                  {"launch.hosts[0].user: expected a non-empty string, got \"\""}},
        ErrorCase{R"({"launch": {"hosts": [{"ranks": 1, "user": "a b"}]}})",
                  {"launch.hosts[0].user: expected a user name, got \"a b\""}},
        ErrorCase{R"({"launch": {"hosts": [{"ranks": 1, "identity_file": 3}]}})",
                  {"launch.hosts[0].identity_file: expected a non-empty string, got 3"}},
        ErrorCase{R"({"launch": {"hosts": [{"ranks": 1, "hots": "a"}]}})",
                  {"launch.hosts[0].hots: unknown key (did you mean \"host\"?)"}},
        ErrorCase{R"({"launch": {"node_binary": ""}})",
                  {"launch.node_binary: expected a non-empty string, got \"\""}},
        ErrorCase{R"({"launch": {"master_port": -1}})",
                  {"launch.master_port: expected a port number in 0..65535 (0 picks a free port), "
                   "got -1"}},
        ErrorCase{R"({"launch": {"master_port": 65536}})",
                  {"launch.master_port: expected a port number in 0..65535 (0 picks a free port), "
                   "got 65536"}},
        ErrorCase{R"({"launch": {"timeout_s": 0}})",
                  {"launch.timeout_s: expected a positive number, got 0"}},
        ErrorCase{R"({"launch": {"timeout_s": 1e9}})",
                  {"launch.timeout_s: expected a positive number no larger than 86400, got "
                   "1000000000.0"}},
        ErrorCase{R"({"launch": {"host": []}})",
                  {"launch.host: unknown key (did you mean \"hosts\"?)"}}));

INSTANTIATE_TEST_SUITE_P(
    CheckpointAndTelemetry, JobSpecErrors,
    testing::Values(
        ErrorCase{R"({"checkpoint": "ckpt"})", {"checkpoint: expected an object, got \"ckpt\""}},
        ErrorCase{R"({"checkpoint": {}})", {"checkpoint.dir: required"}},
        ErrorCase{R"({"checkpoint": {"dir": ""}})",
                  {"checkpoint.dir: expected a non-empty string, got \"\""}},
        ErrorCase{R"({"checkpoint": {"dir": "c", "every_steps": -1}})",
                  {"checkpoint.every_steps: expected a non-negative integer, got -1"}},
        ErrorCase{R"({"checkpoint": {"dir": "c", "every_step": 10}})",
                  {"checkpoint.every_step: unknown key (did you mean \"every_steps\"?)"}},
        ErrorCase{R"({"telemetry": 1})", {"telemetry: expected an object, got 1"}},
        ErrorCase{R"({"telemetry": {"every_steps": 0}})",
                  {"telemetry.every_steps: expected a positive integer, got 0"}},
        ErrorCase{R"({"telemetry": {"every": 10}})", {"telemetry.every: unknown key"}}));

TEST(JobSpecErrors, WorldSizeAboveTheLimit) {
  json hosts = json::array();
  for (int i = 0; i < 65; ++i)
    hosts.push_back({{"host", "h" + std::to_string(i)}, {"ranks", 1024}});
  EXPECT_EQ(problemsOf(patched({{"launch", {{"hosts", hosts}}}})),
            std::vector<std::string>{
                "launch.hosts: a world size of 66560 is more than the 65536 supported"});
}

TEST(JobSpecErrors, TooManyLayers) {
  json layers = json::array();
  for (int i = 0; i < 1025; ++i) layers.push_back(4);
  EXPECT_EQ(problemsOf(patched({{"model", {{"layers", layers}}}})),
            std::vector<std::string>{"model.layers: expected at most 1024 layer widths, got 1025"});
}

TEST(JobSpecErrors, LongValuesAreShortenedInMessages) {
  std::string long_name(200, 'x');
  long_name[0] = ' ';
  std::vector<std::string> problems = problemsOf(patched({{"name", long_name}}));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "name: expected at most 64 characters, got 200");
  problems = problemsOf(patched({{"device", long_name}}));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_LT(problems[0].size(), 200u);
  EXPECT_TRUE(problems[0].ends_with("...")) << problems[0];
}

// ---------------------------------------------------------------------------------------------
// Several problems at once, the document itself, duplicates

TEST(JobSpecErrors, EveryProblemIsReportedTogether) {
  json document = json::parse(R"({
    "name": "bad name",
    "strategy": {"kind": "ddp", "sharding": "full_shard"},
    "model": {"kind": "mlp", "layers": [4, 8, 3], "dropout": 1.5, "layer": 1},
    "data": {"kind": "synthetic", "samples": 32, "features": 5, "classes": 3},
    "train": {"steps": 0, "batch_size": -3},
    "optimizer": {"kind": "adamw", "lr": -1, "momentum": 0.9},
    "backend": "nccl",
    "device": "cpu",
    "launch": {"hosts": [{"ranks": 2}, {"host": "b", "ranks": "two"}]},
    "telemetry": {"every_steps": 0},
    "extra": true
  })");
  SpecParseResult result = parseJobSpec(document);
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(problemLines(result),
            (std::vector<std::string>{
                "extra: unknown key",
                "name: expected only letters, digits, '.', '_' and '-', got \"bad name\"",
                "strategy.sharding: only valid when strategy.kind is fsdp",
                "model.layer: unknown key (did you mean \"layers\"?)",
                "model.dropout: expected a number in [0, 1), got 1.5",
                "train.steps: expected a positive integer, got 0",
                "train.batch_size: expected a positive integer, got -3",
                "optimizer.momentum: only valid when optimizer.kind is sgd",
                "optimizer.lr: expected a positive number, got -1",
                "launch.hosts[1].ranks: expected a positive integer, got \"two\"",
                "telemetry.every_steps: expected a positive integer, got 0",
                "data.features: must equal model.layers[0] (4), got 5",
                "backend: nccl needs CUDA devices, but device is \"cpu\"",
            }));
  EXPECT_EQ(result.describe(),
            "extra: unknown key\n"
            "name: expected only letters, digits, '.', '_' and '-', got \"bad name\"\n"
            "strategy.sharding: only valid when strategy.kind is fsdp\n"
            "model.layer: unknown key (did you mean \"layers\"?)\n"
            "model.dropout: expected a number in [0, 1), got 1.5\n"
            "train.steps: expected a positive integer, got 0\n"
            "train.batch_size: expected a positive integer, got -3\n"
            "optimizer.momentum: only valid when optimizer.kind is sgd\n"
            "optimizer.lr: expected a positive number, got -1\n"
            "launch.hosts[1].ranks: expected a positive integer, got \"two\"\n"
            "telemetry.every_steps: expected a positive integer, got 0\n"
            "data.features: must equal model.layers[0] (4), got 5\n"
            "backend: nccl needs CUDA devices, but device is \"cpu\"");
}

TEST(JobSpecErrors, UnknownKeysAtEveryLevelTogether) {
  json document = patched(json::parse(R"({
    "x0": 1, "strategy": {"x1": 1}, "model": {"x2": 1}, "data": {"x3": 1}, "train": {"x4": 1},
    "optimizer": {"x5": 1}, "launch": {"x6": 1, "hosts": [{"ranks": 1, "x7": 1}]},
    "checkpoint": {"dir": "c", "x8": 1}, "telemetry": {"x9": 1}
  })"));
  EXPECT_EQ(problemsOf(document),
            (std::vector<std::string>{"x0: unknown key", "strategy.x1: unknown key",
                                      "model.x2: unknown key", "data.x3: unknown key",
                                      "train.x4: unknown key", "optimizer.x5: unknown key",
                                      "launch.x6: unknown key", "launch.hosts[0].x7: unknown key",
                                      "checkpoint.x8: unknown key", "telemetry.x9: unknown key"}));
}

TEST(JobSpecErrors, MissingBlocksAreEachRequired) {
  EXPECT_EQ(problemsOf(json::object()),
            (std::vector<std::string>{"name: required", "strategy: required", "model: required",
                                      "data: required", "train: required", "optimizer: required"}));
}

TEST(JobSpecErrors, DocumentMustBeAnObject) {
  SpecParseResult result = parseJobSpec("[1, 2]");
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_EQ(result.problems[0], (SpecProblem{"", "expected a JSON object, got [1,2]"}));
  EXPECT_EQ(result.describe(), "expected a JSON object, got [1,2]");
  EXPECT_EQ(problemsOf(json("spec")),
            std::vector<std::string>{"expected a JSON object, got \"spec\""});
}

TEST(JobSpecErrors, InvalidJsonNamesThePosition) {
  for (const char* text : {"", "{", "{\"name\": \"a\",}", "{\n  \"name\": tru\n}", "nul",
                           "{\"name\": \"a\"} trailing"}) {
    SCOPED_TRACE(text);
    SpecParseResult result;
    ASSERT_NO_THROW(result = parseJobSpec(std::string_view(text)));
    EXPECT_FALSE(result.ok());
    ASSERT_EQ(result.problems.size(), 1u);
    EXPECT_EQ(result.problems[0].path, "");
    EXPECT_TRUE(result.problems[0].message.starts_with("invalid JSON: parse error at line "))
        << result.problems[0].message;
    EXPECT_EQ(result.problems[0].message.find("[json.exception"), std::string::npos);
  }
  SpecParseResult result = parseJobSpec("{\n  \"name\": \"a\",\n  \"x\": ]\n}");
  EXPECT_EQ(result.problems[0].message,
            "invalid JSON: parse error at line 3, column 8: syntax error while parsing value - "
            "unexpected ']'; expected '[', '{', or a literal")
      << result.problems[0].message;
}

TEST(JobSpecErrors, DuplicateKeysAreReported) {
  std::string text = kMinimal;
  text.insert(text.find("\"steps\""), "\"steps\": 5, ");
  text.insert(1, "\"name\": \"first\", ");
  SpecParseResult result = parseJobSpec(text);
  EXPECT_EQ(
      problemLines(result),
      (std::vector<std::string>{"name: duplicate key (only the last one would be used)",
                                "train.steps: duplicate key (only the last one would be used)"}));
  EXPECT_FALSE(result.spec);
}

TEST(JobSpecErrors, DuplicateKeyPathsInsideArrays) {
  SpecParseResult result = parseJobSpec(
      R"({"name": "t", "strategy": {"kind": "ddp"},
          "model": {"kind": "mlp", "layers": [4, 8, 3]},
          "data": {"kind": "synthetic", "samples": 32, "features": 4, "classes": 3},
          "train": {"steps": 10, "batch_size": 8},
          "optimizer": {"kind": "sgd", "lr": 0.1},
          "launch": {"hosts": [{"host": "a", "ranks": 1}, {"host": "b", "ranks": 1, "ranks": 2}]}})");
  EXPECT_EQ(problemLines(result),
            std::vector<std::string>{
                "launch.hosts[1].ranks: duplicate key (only the last one would be used)"});
}

// ---------------------------------------------------------------------------------------------
// Bounds (issue 16, finding 4): a small text nested deep, or a large one, is refused with a clear
// problem before a document is built, in memory linear in the text

// The peak resident memory of this process so far, in MiB (printed, not asserted).
long peakMiB() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

std::string nested(size_t depth, const std::string& open, const std::string& close) {
  std::string text;
  text.reserve(depth * (open.size() + close.size()));
  for (size_t i = 0; i < depth; ++i) text += open;
  if (open.ends_with(':')) text += '0';  // valid JSON: the innermost key has a value
  for (size_t i = 0; i < depth; ++i) text += close;
  return text;
}

TEST(JobSpecBounds, DepthBombsAreRefusedNamingTheBound) {
  // Objects keyed "a" (the 160 KB spec of the issue is 40,000 of them), arrays, and a mix.
  for (size_t depth : {size_t{40'000}, size_t{1'000'000}}) {
    for (const auto& [open, close] : std::vector<std::pair<std::string, std::string>>{
             {"{\"a\":", "}"}, {"[", "]"}, {"{\"a\":[", "]}"}}) {
      SCOPED_TRACE(fmt::format("{} x {}", depth, open));
      const std::string text = nested(depth, open, close);
      SpecParseResult result = parseJobSpec(text);
      ASSERT_EQ(result.problems.size(), 1u);
      EXPECT_FALSE(result.spec);
      // Past 1 MiB the size bound refuses the text before its depth is looked at.
      EXPECT_TRUE(result.problems[0].message.starts_with(
          text.size() > kMaxSpecBytes
              ? fmt::format("the document is {} bytes, more than the 1 MiB", text.size())
              : "the document nests deeper than the 32 levels a job spec may have (at "))
          << result.problems[0].message;
      std::printf("depth %zu of '%s' (%zu bytes): peak memory so far %ld MiB\n", depth,
                  open.c_str(), text.size(), peakMiB());
    }
  }
  // The first level past the bound is named by its path.
  SpecParseResult result = parseJobSpec(nested(40, "{\"a\":", "}"));
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_EQ(result.problems[0].message,
            "the document nests deeper than the 32 levels a job spec may have (at "
            "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a)");
}

TEST(JobSpecBounds, ADepthBombFileIsRefusedNamingTheFile) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            fmt::format("ringmaster_depth_bomb_{}.json", ::getpid()))
                               .string();
  for (size_t depth : {size_t{40'000}, size_t{1'000'000}}) {
    std::ofstream(path) << nested(depth, "[", "]");
    try {
      loadJobSpecFile(path);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kSpec);
      EXPECT_NE(e.message().find(path), std::string::npos) << e.message();
      EXPECT_NE(e.message().find(depth == 40'000 ? "nests deeper than the 32 levels"
                                                 : "more than the 1 MiB a job spec may have"),
                std::string::npos)
          << e.message();
    }
    std::printf("depth %zu file: peak memory so far %ld MiB\n", depth, peakMiB());
  }
  std::filesystem::remove(path);
}

TEST(JobSpecBounds, DocumentsWithinTheBoundsParseAndDeeperOnesAreRefused) {
  // 32 levels are allowed (an unknown key, reported as such), 33 are not, as text or document.
  json deep = minimal();
  deep["extra"] = json::parse(nested(31, "[", "]"));
  EXPECT_EQ(problemsOf(deep), std::vector<std::string>{"extra: unknown key"});
  EXPECT_EQ(problemLines(parseJobSpec(deep.dump())),
            std::vector<std::string>{"extra: unknown key"});
  // A document built in code (a --set value) is bounded too, however deep.
  deep["extra"] = json::parse(nested(1'000'000, "[", "]"));
  EXPECT_EQ(problemsOf(deep),
            std::vector<std::string>{"the document nests deeper than the 32 levels a job spec may "
                                     "have"});
  deep["extra"] = json::parse(nested(32, "[", "]"));
  EXPECT_EQ(problemsOf(deep),
            std::vector<std::string>{"the document nests deeper than the 32 levels a job spec may "
                                     "have"});
  EXPECT_EQ(problemLines(parseJobSpec(deep.dump())),
            std::vector<std::string>{"the document nests deeper than the 32 levels a job spec "
                                     "may have (at extra[0][0][0][0][0][0][0][0][0][0][0][0][0]"
                                     "[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0])"});
}

TEST(JobSpecBounds, ATextLargerThanTheBoundIsRefusedBeforeParsing) {
  std::string text = kMinimal;
  text.insert(1, fmt::format("\"description\": \"{}\", ", std::string(kMaxSpecBytes, 'x')));
  EXPECT_EQ(problemLines(parseJobSpec(text)),
            std::vector<std::string>{fmt::format(
                "the document is {} bytes, more than the 1 MiB a job spec may have", text.size())});
  ASSERT_TRUE(checkSpecText(text));
  EXPECT_FALSE(checkSpecText(kMinimal));
  EXPECT_EQ(checkSpecText("[[1]")->message.substr(0, 28), "invalid JSON: parse error at");
}

TEST(JobSpecBounds, ADeviceOrFifoIsReadOnlyUpToTheBound) {
  try {
    loadJobSpecFile("/dev/zero");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kSpec);
    EXPECT_EQ(e.message(), "/dev/zero: more than the 1 MiB a job spec may have");
  }
}

TEST(JobSpecBounds, DuplicateKeysInAWideDocumentAreFoundInLinearMemory) {
  // 20,000 keys in one object and 10,000 sibling objects: each duplicate is found once.
  std::string text = "{\"name\": \"t\"";
  for (int i = 0; i < 20'000; ++i) text += fmt::format(", \"k{}\": {{\"x\": 1, \"x\": 2}}", i);
  text += ", \"k7\": 0}";
  SpecParseResult result = parseJobSpec(text);
  size_t duplicates = 0;
  for (const SpecProblem& problem : result.problems) {
    duplicates += problem.message == "duplicate key (only the last one would be used)";
  }
  EXPECT_EQ(duplicates, 20'001u);
  EXPECT_EQ(result.problems[0].path, "k0.x");
}

// ---------------------------------------------------------------------------------------------
// Robustness: every value of every example replaced by values of every type never throws

void forEachLeaf(const json& value, const json::json_pointer& at,
                 const std::function<void(const json::json_pointer&)>& visit) {
  visit(at);
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) forEachLeaf(child, at / key, visit);
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) forEachLeaf(value[i], at / i, visit);
  }
}

TEST(JobSpecRobustness, NeverThrowsOnAnyReplacedValue) {
  const std::vector<json> replacements = {nullptr,
                                          true,
                                          0,
                                          -1,
                                          1.5,
                                          1e300,
                                          "",
                                          "x",
                                          json::array(),
                                          json::object(),
                                          json::array({1, 2}),
                                          18446744073709551615ull};
  int documents = 0;
  for (const std::string& file : exampleFiles()) {
    json original = toJson(loadJobSpecFile(file));
    forEachLeaf(original, json::json_pointer(), [&](const json::json_pointer& at) {
      for (const json& replacement : replacements) {
        json document = original;
        document[at] = replacement;
        SpecParseResult result;
        ASSERT_NO_THROW(result = parseJobSpec(document)) << at.to_string();
        ASSERT_EQ(result.ok(), result.problems.empty()) << at.to_string();
        ASSERT_EQ(result.spec.has_value(), result.problems.empty()) << at.to_string();
        for (const SpecProblem& problem : result.problems) {
          EXPECT_FALSE(problem.message.empty()) << at.to_string();
        }
        ++documents;
      }
    });
  }
  EXPECT_GT(documents, 1000);
}

// ---------------------------------------------------------------------------------------------
// Every plain value field, from its description (spec/spec_fields.h): a valid value round-trips,
// a value of the wrong type and one beyond its bounds are refused naming the field.

// A valid document in which `field` is read: the minimal one with its job kind and the first of
// the kinds it belongs to.
json documentReading(const SpecField& field) {
  if (field.job == JobKind::kProgram)
    return json{{"name", "p"}, {"program", {{"script", "train.py"}}}};
  json document = minimal();
  // The strategy's fields are the mesh form's: no legacy kind beside them.
  if (field.path.starts_with("strategy.")) document["strategy"] = json::object();
  if (field.path.starts_with("checkpoint.")) document["checkpoint"] = {{"dir", "ckpt"}};
  if (field.path.starts_with("launch.hosts[].")) document["launch"] = {{"hosts", {{{"ranks", 1}}}}};
  // Issue 35: launch.scheduler's fields in a Slurm job, its submit_from's with a login node.
  if (field.path.starts_with("launch.scheduler."))
    document["launch"] = {{"scheduler", {{"kind", "slurm"}}}};
  if (field.path.starts_with("launch.scheduler.submit_from."))
    document["launch"]["scheduler"]["submit_from"] = {{"host", "login1"}};
  if (!field.shown_when || field.form_condition_only) return document;
  const std::string& controller = field.shown_when->controller;
  const std::string& kind = field.shown_when->kinds.front();
  if (controller == "model.kind" && kind == "gpt")
    return patched(json::parse(tokenDataPatch(R"("kind": "tokens", "train": "t/*.bin")")));
  if (controller == "data.kind" && kind == "idx") {
    return patched({{"data",
                     {{"kind", "idx"},
                      {"images", "i"},
                      {"labels", "l"},
                      {"samples", nullptr},
                      {"features", nullptr},
                      {"classes", nullptr}}}});
  }
  if (controller == "data.kind" && kind == "tokens")
    return patched(json::parse(tokenDataPatch(R"("kind": "tokens", "train": "t/*.bin")")));
  if (controller == "data.kind" && kind == "text")
    return patched(json::parse(tokenDataPatch(R"("kind": "text", "path": "t.txt")")));
  // Every other controller is a plain choice of its block ("optimizer.kind": "adam").
  document[json::json_pointer("/" + std::regex_replace(controller, std::regex("\\."), "/"))] = kind;
  return document;
}

// Where `field` is in a document: a host's field in the first host.
json::json_pointer pointerTo(const SpecField& field) {
  std::string path = std::regex_replace(field.path, std::regex("\\[\\]"), ".0");
  return json::json_pointer("/" + std::regex_replace(path, std::regex("\\."), "/"));
}

// The name a problem gives the field: "launch.hosts[0].port" for "launch.hosts[].port".
std::string problemPath(const SpecField& field) {
  return std::regex_replace(field.path, std::regex("\\[\\]"), "[0]");
}

// A valid value of `field` in `document`: the one there, else its default, else one of its type
// within its bounds.
json validValue(const SpecField& field, const json& document) {
  if (document.contains(pointerTo(field))) return document[pointerTo(field)];
  if (!field.default_value.is_null()) return field.default_value;
  // Slurm's words each have a form of their own (issue 35).
  if (field.path == "launch.scheduler.mem") return "16G";
  if (field.path == "launch.scheduler.time") return "1:30:00";
  if (field.path.starts_with("launch.scheduler.") && field.type == FieldType::kText) return "gpu";
  switch (field.type) {
    case FieldType::kInteger:
      return static_cast<int64_t>(field.minimum.value_or(0)) + (field.exclusive_minimum ? 1 : 0);
    case FieldType::kNumber:
      return field.minimum.value_or(0) + (field.exclusive_minimum ? 0.5 : 0.0);
    case FieldType::kBoolean:
      return true;
    case FieldType::kChoice:
      return field.choices.front();
    default:
      return "some/path";
  }
}

// A value of another type than the field's.
json wrongTypedValue(const SpecField& field) {
  switch (field.type) {
    case FieldType::kInteger:
    case FieldType::kNumber:
    case FieldType::kBoolean:
      return "1";
    default:
      return 1;
  }
}

std::vector<const SpecField*> plainValueFields() {
  std::vector<const SpecField*> fields;
  for (const SpecField& field : specFields())
    if (field.binding) fields.push_back(&field);
  return fields;
}

class PlainValueField : public testing::TestWithParam<const SpecField*> {};

TEST_P(PlainValueField, AValidValueRoundTrips) {
  const SpecField& field = *GetParam();
  json document = documentReading(field);
  const json value = validValue(field, document);
  document[pointerTo(field)] = value;
  const SpecParseResult parsed = parseJobSpec(document);
  ASSERT_TRUE(parsed.ok()) << parsed.describe() << "\n" << document.dump();
  const json canonical = toJson(*parsed.spec);
  // A host's value equal to its default is left out of the canonical form.
  const json written =
      canonical.contains(pointerTo(field)) ? canonical[pointerTo(field)] : field.default_value;
  EXPECT_EQ(written, value) << canonical.dump();
  EXPECT_EQ(parseJobSpec(canonical).spec, parsed.spec);
}

TEST_P(PlainValueField, AValueOfAnotherTypeIsRefusedNamingTheField) {
  const SpecField& field = *GetParam();
  json document = documentReading(field);
  document[pointerTo(field)] = wrongTypedValue(field);
  const std::vector<std::string> problems = problemsOf(document);
  const std::string prefix = problemPath(field) + ": expected ";
  EXPECT_TRUE(std::any_of(problems.begin(), problems.end(), [&](const std::string& p) {
    return p.starts_with(prefix);
  })) << testing::PrintToString(problems);
}

// The plain value fields with a minimum.
class BoundedValueField : public PlainValueField {};

std::vector<const SpecField*> boundedValueFields() {
  std::vector<const SpecField*> fields = plainValueFields();
  std::erase_if(fields, [](const SpecField* field) { return !field->minimum; });
  return fields;
}

TEST_P(BoundedValueField, AValueBelowItsMinimumIsRefusedNamingTheField) {
  const SpecField& field = *GetParam();
  json document = documentReading(field);
  const double below = field.exclusive_minimum ? *field.minimum : *field.minimum - 1;
  document[pointerTo(field)] =
      field.type == FieldType::kInteger ? json(static_cast<int64_t>(below)) : json(below);
  const std::vector<std::string> problems = problemsOf(document);
  const std::string prefix = problemPath(field) + ": expected ";
  EXPECT_TRUE(std::any_of(problems.begin(), problems.end(), [&](const std::string& p) {
    return p.starts_with(prefix);
  })) << testing::PrintToString(problems);
}

// "train_loss_scale_init" for train.loss_scale.init.
std::string fieldCaseName(const testing::TestParamInfo<const SpecField*>& info) {
  return std::regex_replace(info.param->path, std::regex("[^A-Za-z0-9]+"), "_");
}

INSTANTIATE_TEST_SUITE_P(EverySpecField, PlainValueField, testing::ValuesIn(plainValueFields()),
                         fieldCaseName);
INSTANTIATE_TEST_SUITE_P(EverySpecField, BoundedValueField, testing::ValuesIn(boundedValueFields()),
                         fieldCaseName);

// ---------------------------------------------------------------------------------------------
// The device mesh (issue 34): the mesh form, the legacy flat form read as the same strategy, the
// canonical form, the labels.

// The minimal spec with `strategy` as its whole strategy block, `ranks` ranks and `patch` merged.
json withStrategy(const json& strategy, int ranks, const json& patch = json::object()) {
  json document = patched(patch);
  document["strategy"] = strategy;
  document["launch"] = {{"hosts", {{{"host", "localhost"}, {"ranks", ranks}}}}};
  return document;
}

JobSpec parsedOk(const json& document) {
  SpecParseResult parsed = parseJobSpec(document);
  EXPECT_TRUE(parsed.ok()) << document.dump() << "\n" << parsed.describe();
  return parsed.ok() ? *parsed.spec : JobSpec{};
}

struct LegacyTwin {
  const char* legacy;
  std::vector<const char*> twins;  // mesh forms of the same strategy
  int ranks;
  const char* patch;
};

TEST(JobSpecMesh, ALegacyStrategyParsesAsItsMeshFormTwin) {
  const char* const four_blocks = R"({"model": {"layers": [4, 8, 8, 8, 3]},
                                      "train": {"micro_batches": 2}})";
  const std::vector<LegacyTwin> twins = {
      {R"({"kind": "single"})", {"{}", R"({"mesh": {"dp": 1, "tp": 1, "pp": 1}})"}, 1, "{}"},
      // One rank of ddp is one rank: single.
      {R"({"kind": "ddp"})", {R"({"kind": "single"})", "{}"}, 1, "{}"},
      {R"({"kind": "ddp", "bucket_cap_mb": 10, "reduce_dtype": "bf16"})",
       {R"({"mesh": {"dp": 4}, "dp": {"kind": "ddp", "bucket_cap_mb": 10, "reduce_dtype": "bf16"}})",
        R"({"dp": {"bucket_cap_mb": 10, "reduce_dtype": "bf16"}})",
        R"({"mesh": {"tp": 1, "pp": 1}, "dp": {"kind": "ddp", "bucket_cap_mb": 10,
                                               "reduce_dtype": "bf16"}})"},
       4,
       "{}"},
      {R"({"kind": "fsdp", "sharding": "shard_grad_op", "units": "model", "param_dtype": "bf16"})",
       {R"({"mesh": {"dp": 3}, "dp": {"kind": "fsdp", "sharding": "shard_grad_op", "units": "model",
                                      "param_dtype": "bf16"}})"},
       3,
       "{}"},
      {R"({"kind": "fsdp"})", {R"({"dp": {"kind": "fsdp"}})"}, 1, "{}"},
      {R"({"kind": "pipeline", "schedule": "gpipe", "stages": [[0], [1, 2], [3]]})",
       {R"({"mesh": {"pp": 3}, "pp": {"schedule": "gpipe", "stages": [[0], [1, 2], [3]]}})",
        R"({"mesh": {"dp": 1, "tp": 1, "pp": 3}, "dp": {"kind": "ddp"},
            "pp": {"schedule": "gpipe", "virtual_stages": 1, "stages": [[0], [1, 2], [3]]}})"},
       3,
       four_blocks},
      // A pipeline of one rank and two interleaved virtual stages is still a pipeline.
      {R"({"kind": "pipeline", "schedule": "interleaved_1f1b", "virtual_stages": 2})",
       {R"({"mesh": {"pp": 1}, "pp": {"schedule": "interleaved_1f1b", "virtual_stages": 2}})"},
       1,
       four_blocks},
      // One stage is no pipeline: its options are read, checked and dropped.
      {R"({"kind": "pipeline", "schedule": "gpipe", "stages": [[0, 1]]})",
       {"{}", R"({"pp": {"schedule": "zb_h1"}})"},
       1,
       "{}"},
  };
  for (const LegacyTwin& twin : twins) {
    SCOPED_TRACE(twin.legacy);
    const json patch = json::parse(twin.patch);
    const JobSpec legacy = parsedOk(withStrategy(json::parse(twin.legacy), twin.ranks, patch));
    for (const char* mesh : twin.twins)
      EXPECT_EQ(parsedOk(withStrategy(json::parse(mesh), twin.ranks, patch)), legacy) << mesh;
    // The canonical form is the mesh form, and reads back as the same spec.
    const json canonical = toJson(legacy);
    EXPECT_FALSE(canonical["strategy"].contains("kind")) << canonical["strategy"];
    EXPECT_EQ(canonical["strategy"]["mesh"]["dp"].get<int>() *
                  canonical["strategy"]["mesh"]["tp"].get<int>() *
                  canonical["strategy"]["mesh"]["pp"].get<int>(),
              twin.ranks);
    EXPECT_EQ(parsedOk(canonical), legacy);
  }
}

TEST(JobSpecMesh, TheCanonicalFormWritesTheMeshTheDataParallelPlanAndTheUsedDimensions) {
  EXPECT_EQ(toJson(parsedOk(withStrategy(json::parse(R"({"kind": "ddp"})"), 2)))["strategy"],
            json::parse(R"({"mesh": {"dp": 2, "tp": 1, "pp": 1},
                            "dp": {"kind": "ddp", "bucket_cap_mb": 25.0}})"));
  EXPECT_EQ(toJson(parsedOk(withStrategy(json::parse(R"({"kind": "pipeline"})"), 2)))["strategy"],
            json::parse(R"({"mesh": {"dp": 1, "tp": 1, "pp": 2},
                            "dp": {"kind": "ddp", "bucket_cap_mb": 25.0},
                            "pp": {"schedule": "1f1b", "virtual_stages": 1}})"));
  const json gpt = json::parse(tokenDataPatch(R"("kind": "text", "path": "t.txt")"));
  const JobSpec tp = parsedOk(
      withStrategy(json::parse(R"({"mesh": {"dp": 2, "tp": 2}, "dp": {"kind": "fsdp"}})"), 4, gpt));
  EXPECT_EQ(toJson(tp)["strategy"], json::parse(R"({"mesh": {"dp": 2, "tp": 2, "pp": 1},
                            "dp": {"kind": "fsdp", "sharding": "full_shard", "units": "layer"},
                            "tp": {"sequence_parallel": false}})"));
}

// Every layout of 4 and of 8 ranks with dp as DDP and as FSDP, with and without sequence
// parallelism: the spec reads back from its canonical form, and says its sizes and its label.
TEST(JobSpecMesh, EveryLayoutOfAGptRoundTripsWithItsSizesAndLabel) {
  const json gpt = json::parse(tokenDataPatch(R"("kind": "text", "path": "t.txt")"));
  for (int world : {1, 2, 4, 8}) {
    for (int tp = 1; tp <= world; tp *= 2) {
      for (int pp = 1; tp * pp <= world; pp *= 2) {
        for (const char* plan : {"ddp", "fsdp"}) {
          for (bool sequence_parallel : {false, true}) {
            if (sequence_parallel && tp == 1) continue;
            const int dp = world / (tp * pp);
            SCOPED_TRACE(
                fmt::format("{} x {} x {} {}{}", dp, tp, pp, plan, sequence_parallel ? " sp" : ""));
            json strategy = {{"mesh", {{"dp", dp}, {"tp", tp}, {"pp", pp}}},
                             {"dp", {{"kind", plan}}},
                             {"tp", {{"sequence_parallel", sequence_parallel}}}};
            json patch = gpt;
            if (pp > 1) patch["train"] = {{"micro_batches", 2}};
            // Enough blocks for the stages (embedding, the transformer blocks, head); heads,
            // vocabulary and context divisible by every tp.
            patch["model"]["layers"] = pp;
            patch["model"]["heads"] = 8;
            patch["model"]["dim"] = 64;
            patch["model"]["vocab_size"] = 512;
            const JobSpec spec = parsedOk(withStrategy(strategy, world, patch));
            EXPECT_EQ(spec.strategy.mesh, (MeshSpec{.dp = dp, .tp = tp, .pp = pp}));
            EXPECT_EQ(spec.strategy.tp.sequence_parallel, sequence_parallel);
            EXPECT_EQ(dataParallelSize(spec), dp);
            EXPECT_EQ(stageCount(spec), pp);
            EXPECT_EQ(parsedOk(toJson(spec)), spec);
            std::vector<std::string> parts;
            if (dp > 1 || std::string(plan) != "ddp") parts.emplace_back(plan);
            if (tp > 1) parts.emplace_back("tp");
            if (pp > 1) parts.emplace_back("pipeline");
            const std::string label =
                parts.empty() ? "single" : fmt::format("{}", fmt::join(parts, "+"));
            EXPECT_EQ(strategyLabel(spec), label);
            const std::vector<std::string> labels = strategyLabels();
            EXPECT_NE(std::find(labels.begin(), labels.end(), label), labels.end()) << label;
            EXPECT_EQ(needsWorldCommunicator(spec), label != "single");
          }
        }
      }
    }
  }
}

// Under pipeline stages the stage's gradients are averaged in fp32 after the schedule: a 16-bit
// reduce_dtype or param_dtype is refused naming the option, for either data-parallel plan, and
// taken without stages.
TEST(JobSpecMesh, SixteenBitDataParallelOptionsAreRefusedUnderPipelineStages) {
  const json gpt = json::parse(tokenDataPatch(R"("kind": "text", "path": "t.txt")"));
  for (const char* plan : {"ddp", "fsdp"}) {
    for (const char* option : {"reduce_dtype", "param_dtype"}) {
      if (std::string(plan) == "ddp" && std::string(option) == "param_dtype") continue;
      SCOPED_TRACE(fmt::format("{} {}", plan, option));
      json patch = gpt;
      patch["model"]["layers"] = 2;
      const json with_stages = {{"mesh", {{"dp", 2}, {"pp", 2}}},
                                {"dp", {{"kind", plan}, {option, "bf16"}}}};
      patch["train"] = {{"micro_batches", 2}};
      const std::vector<std::string> problems = problemsOf(withStrategy(with_stages, 4, patch));
      ASSERT_EQ(problems.size(), 1u);
      EXPECT_TRUE(problems[0].starts_with(fmt::format("strategy.dp.{}: bf16 is not taken", option)))
          << problems[0];
      patch.erase("train");
      const json without_stages = {{"mesh", {{"dp", 2}, {"tp", 2}}},
                                   {"dp", {{"kind", plan}, {option, "bf16"}}}};
      parsedOk(withStrategy(without_stages, 4, patch));
    }
  }
}

TEST(JobSpecMesh, StrategyLabelsListEveryLayoutOnce) {
  const std::vector<std::string> labels = strategyLabels();
  EXPECT_EQ(std::vector<std::string>(labels.begin(), labels.begin() + 5),
            (std::vector<std::string>{"single", "ddp", "fsdp", "pipeline", "tp"}));
  EXPECT_EQ(std::set<std::string>(labels.begin(), labels.end()).size(), labels.size());
  // single; ddp, fsdp, tp, pipeline; 2 x tp+pipeline... : 1 + 4 + (2 + 2 + 1) + 2 = 12
  EXPECT_EQ(labels.size(), 12u);
  EXPECT_NE(std::find(labels.begin(), labels.end(), "fsdp+tp+pipeline"), labels.end());
}

// What the options of a dimension of size 1 do (docs/spec.md): the data-parallel plan's are kept
// (fsdp on one rank is fsdp), tp's sequence_parallel false is accepted (true is refused: it needs
// tp ranks), and a one-stage pipeline's options are read, checked and dropped.
TEST(JobSpecMesh, OptionsOfADimensionOfOne) {
  const JobSpec fsdp =
      parsedOk(withStrategy(json::parse(R"({"dp": {"kind": "fsdp", "sharding": "no_shard"}})"), 1));
  EXPECT_EQ(strategyLabel(fsdp), "fsdp");
  EXPECT_EQ(fsdp.strategy.fsdp.sharding, FsdpSharding::kNoShard);
  const JobSpec tp =
      parsedOk(withStrategy(json::parse(R"({"tp": {"sequence_parallel": false}})"), 1));
  EXPECT_EQ(strategyLabel(tp), "single");
  const JobSpec pp = parsedOk(
      withStrategy(json::parse(R"({"pp": {"schedule": "gpipe", "stages": [[0, 1]]}})"), 1));
  EXPECT_EQ(pp.strategy.pipeline, PipelineSpec{});
  EXPECT_FALSE(toJson(pp)["strategy"].contains("pp"));
  // Still checked: a bad value is reported at its path.
  EXPECT_EQ(problemsOf(withStrategy(json::parse(R"({"pp": {"schedule": "looped"}})"), 1)).at(0),
            "strategy.pp.schedule: expected one of \"gpipe\", \"1f1b\", \"interleaved_1f1b\", "
            "\"zb_h1\", got \"looped\"");
}

// Runs recorded before issue 34 keep their specs in the database as the canonical JSON of the
// time: the legacy flat form with every default written. They still parse, as the strategy they
// ran, and their canonical form is now the mesh form.
TEST(JobSpecMesh, StoredLegacyCanonicalSpecsStillParse) {
  struct Stored {
    const char* strategy;
    int ranks;
    const char* label;
  };
  for (const Stored& stored :
       {Stored{R"({"kind": "single"})", 1, "single"},
        Stored{R"({"kind": "ddp", "bucket_cap_mb": 25.0})", 4, "ddp"},
        Stored{R"({"kind": "ddp", "bucket_cap_mb": 25.0, "reduce_dtype": "bf16"})", 2, "ddp"},
        Stored{R"({"kind": "fsdp", "sharding": "full_shard", "units": "layer"})", 4, "fsdp"},
        Stored{R"({"kind": "pipeline", "schedule": "1f1b", "virtual_stages": 1})", 2,
               "pipeline"}}) {
    SCOPED_TRACE(stored.strategy);
    // The old canonical form's other sections, as toJson wrote them.
    json document = toJson(*parseJobSpec(kMinimal).spec);
    document["strategy"] = json::parse(stored.strategy);
    document["launch"]["hosts"][0]["ranks"] = stored.ranks;
    const JobSpec spec = parsedOk(json::parse(document.dump(2)));
    EXPECT_EQ(strategyLabel(spec), stored.label);
    EXPECT_EQ(spec.strategy.mesh.size(), stored.ranks);
    EXPECT_TRUE(toJson(spec)["strategy"].contains("mesh"));
  }
}

// ---------------------------------------------------------------------------------------------
// Round trip, files, helpers

TEST(JobSpecRoundTrip, EveryKindCombination) {
  for (std::string_view strategy : legacyStrategyKinds()) {
    for (std::string_view optimizer : enumNames<OptimizerKind>()) {
      for (std::string_view data : enumNames<DataKind>()) {
        SCOPED_TRACE(fmt::format("{} {} {}", strategy, optimizer, data));
        json patch = {{"strategy", {{"kind", strategy}}},
                      {"optimizer", {{"kind", optimizer}, {"clip_grad_norm", 2.5}}},
                      {"model", {{"layers", {4, 8, 8, 3}}}}};
        if (data == "idx") {
          patch["data"] = {{"kind", "idx"},      {"samples", nullptr}, {"features", nullptr},
                           {"classes", nullptr}, {"images", "i"},      {"labels", "l"}};
        } else if (data != "synthetic") {
          const json gpt = json::parse(tokenDataPatch(
              data == "tokens" ? R"("kind": "tokens", "train": "t/*.bin", "val": "v/*.bin")"
                               : R"("kind": "text", "path": "t.txt", "val_fraction": 0.25)"));
          patch["model"] = gpt["model"];  // assigned: merging would drop its nulls
          patch["data"] = gpt["data"];
        }
        if (strategy != "single") patch["launch"] = {{"hosts", {{{"ranks", 3}}}}};
        SpecParseResult first = parseJobSpec(patched(patch));
        ASSERT_TRUE(first.ok()) << first.describe();
        json canonical = toJson(*first.spec);
        SpecParseResult second = parseJobSpec(canonical.dump());
        ASSERT_TRUE(second.ok()) << second.describe();
        EXPECT_EQ(*second.spec, *first.spec);
        EXPECT_EQ(toJson(*second.spec), canonical);
      }
    }
  }
}

TEST(JobSpecFiles, LoadErrors) {
  try {
    loadJobSpecFile("/nonexistent/ringmaster/spec.json");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(e.message().find("/nonexistent/ringmaster/spec.json"), std::string::npos);
  }

  std::string path = std::string(ringmaster::testBinaryDir()) + "/spec_test_invalid.json";
  {
    std::ofstream out(path);
    out << R"({"name": "bad name", "strategy": {"kind": "single"}})";
  }
  try {
    loadJobSpecFile(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kSpec);
    EXPECT_EQ(e.message(), path +
                               " is not a valid job spec:\n"
                               "name: expected only letters, digits, '.', '_' and '-', got \"bad "
                               "name\"\n"
                               "model: required\ndata: required\ntrain: required\n"
                               "optimizer: required");
  }
  std::filesystem::remove(path);
}

TEST(JobSpecHelpers, EnumNamesRoundTrip) {
  auto check = [](auto tag, std::vector<std::string_view> names) {
    using E = decltype(tag);
    EXPECT_EQ(enumNames<E>(), names);
    for (std::string_view name : names) {
      std::optional<E> value = fromString<E>(name);
      ASSERT_TRUE(value) << name;
      EXPECT_EQ(toString(*value), name);
    }
    EXPECT_FALSE(fromString<E>("nonsense"));
    EXPECT_FALSE(fromString<E>(""));
  };
  // The legacy strategy kinds: single, every data-parallel plan, pipeline.
  EXPECT_EQ(legacyStrategyKinds(),
            (std::vector<std::string_view>{"single", "ddp", "fsdp", "pipeline"}));
  check(FsdpSharding{}, {"full_shard", "shard_grad_op", "no_shard"});
  check(FsdpUnits{}, {"layer", "model"});
  check(PipelineSchedule{}, {"gpipe", "1f1b", "interleaved_1f1b", "zb_h1"});
  // Model kinds are the registered models' (nn/models.cpp), looked up the same way.
  EXPECT_EQ(modelKinds(), (std::vector<std::string_view>{"mlp", "residual_mlp", "gpt"}));
  for (std::string_view kind : modelKinds()) EXPECT_EQ(findModel(kind)->kind, kind);
  EXPECT_EQ(findModel("nonsense"), nullptr);
  EXPECT_EQ(findModel(""), nullptr);
  check(ActivationKind{}, {"relu", "gelu"});
  check(DataKind{}, {"synthetic", "idx", "tokens", "text"});
  check(OptimizerKind{}, {"sgd", "adam", "adamw"});
  check(LrScheduleKind{}, {"constant", "cosine"});
  check(BackendKind{}, {"auto", "gloo", "nccl"});
  check(DeviceKind{}, {"auto", "cpu", "cuda"});
  EXPECT_EQ(fromString<OptimizerKind>("SGD"), std::nullopt) << "names are case-sensitive";
}

TEST(JobSpecHelpers, ValidateEditedSpec) {
  JobSpec spec = *parseJobSpec(kMinimal).spec;
  EXPECT_TRUE(validateJobSpec(spec).empty());
  spec.launch.hosts.assign(2, LaunchHostSpec{});
  spec.launch.hosts[0].host = "a";
  spec.launch.hosts[0].ranks = 2;
  spec.launch.hosts[1].host = "b";
  spec.launch.hosts[1].ranks = 3;
  applyLegacyStrategyKind("ddp", worldSize(spec), spec.strategy);
  EXPECT_TRUE(validateJobSpec(spec).empty());
  EXPECT_EQ(worldSize(spec), 5);
  EXPECT_EQ(dataParallelSize(spec), 5);
  EXPECT_EQ(stageCount(spec), 1);
  spec.train.batch_size = 0;
  spec.data.features = 5;
  EXPECT_EQ(validateJobSpec(spec),
            (std::vector<SpecProblem>{{"train.batch_size", "expected a positive integer, got 0"},
                                      {"data.features", "must equal model.layers[0] (4), got 5"}}));
}

TEST(JobSpecHelpers, DescribeOfValidSpecIsEmpty) {
  SpecParseResult result = parseJobSpec(kMinimal);
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.describe(), "");
  // parseJobSpec accepts std::string, const char* and string_view alike.
  EXPECT_TRUE(parseJobSpec(std::string(kMinimal)).ok());
  EXPECT_TRUE(parseJobSpec(std::string_view(kMinimal)).ok());
}

}  // namespace
}  // namespace ringmaster

// Found by fuzz_spec_parser: a number too large for a double made nlohmann-json throw
// out_of_range, which escaped the parser. It must come back as a problem instead.
TEST(JobSpecParse, NumberOutOfRangeIsAProblemNotACrash) {
  ringmaster::SpecParseResult result = ringmaster::parseJobSpec("\n 2e7777");
  ASSERT_FALSE(result.spec.has_value());
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_NE(result.problems[0].message.find("invalid JSON"), std::string::npos)
      << result.problems[0].message;
}
