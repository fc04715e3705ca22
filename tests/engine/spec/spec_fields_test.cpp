// Tests of the spec's field description against the parser, so that the two cannot drift: every
// described default is what the parser yields when the field is left out, every required field is
// reported as required, every choice list is exactly what the parser accepts, every bound is where
// the parser draws it, every key the parser knows is described, and each field's kind of job
// (engine, program, both) is where the parser reads it.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "spec/job_spec.h"
#include "spec/spec_fields.h"

namespace ringmaster {
namespace {

using json = nlohmann::json;

// A small valid gpt model section.
json gptModel() {
  return {{"kind", "gpt"}, {"vocab_size", 64}, {"context", 16},
          {"layers", 2},   {"heads", 2},       {"dim", 32}};
}

// Token data (data.kind tokens or text) over a gpt model whose vocabulary holds every byte.
void useTokenData(json& document, const std::string& kind) {
  document["model"] = gptModel();
  document["model"]["vocab_size"] = 256;
  if (kind == "tokens") {
    document["data"] = {{"kind", "tokens"}, {"train", "t/*.bin"}};
  } else {
    document["data"] = {{"kind", "text"}, {"path", "t.txt"}};
  }
}

// Issue 35: a field of launch.scheduler applies to a spec with a Slurm scheduler (in place of
// launch.hosts), one of its submit_from to one with a login node.
void useSchedulerFor(const SpecField& field, json& document) {
  if (!field.path.starts_with("launch.scheduler.")) return;
  if (document.contains("launch")) document["launch"].erase("hosts");
  document["launch"]["scheduler"]["kind"] = "slurm";
  if (field.path.starts_with("launch.scheduler.submit_from."))
    document["launch"]["scheduler"]["submit_from"] = {{"host", "login1"}};
}

// A valid program job (issue 19): the user's script on two ranks.
json programJob() {
  return json::parse(R"({
    "name": "t",
    "program": {"script": "train.py"},
    "launch": {"hosts": [{"host": "localhost", "ranks": 2}]}
  })");
}

// A valid spec in which `field` applies, with every kind its conditions need.
json validFor(const SpecField& field, const std::string& kind = {}) {
  if (field.job == JobKind::kProgram) return programJob();
  json document = json::parse(R"({
    "name": "t",
    "strategy": {},
    "model": {"kind": "mlp", "layers": [4, 8, 3]},
    "data": {"kind": "synthetic", "samples": 32, "features": 4, "classes": 3},
    "train": {"steps": 10, "batch_size": 8},
    "optimizer": {"kind": "sgd", "lr": 0.1},
    "checkpoint": {"dir": "ckpt"}
  })");
  if (field.shown_when) {
    const std::string& controller = field.shown_when->controller;
    const std::string chosen = kind.empty() ? field.shown_when->kinds.front() : kind;
    std::string pointer;  // "optimizer.schedule.kind": /optimizer/schedule/kind
    for (char c : controller) pointer += c == '.' ? '/' : c;
    document[json::json_pointer("/" + pointer)] = chosen;
    if (chosen == "gpt") useTokenData(document, "tokens");  // a gpt reads token ids
    if (chosen == "idx") {
      document["data"] = {{"kind", "idx"}, {"images", "i"}, {"labels", "l"}};
    }
    if (chosen == "tokens" || chosen == "text") useTokenData(document, chosen);
    if (chosen == "pipeline" || chosen == "ddp" || chosen == "fsdp") {
      document["launch"] = {{"hosts", {{{"host", "localhost"}, {"ranks", 2}}}}};
      document["train"]["batch_size"] = 8;
    }
  }
  // A dimension's options apply where it is used: tp ranks (of a gpt), pipeline stages.
  if (field.path.starts_with("strategy.tp.")) {
    useTokenData(document, "tokens");
    document["strategy"]["mesh"] = {{"tp", 2}};
    document["launch"] = {{"hosts", {{{"host", "localhost"}, {"ranks", 2}}}}};
  }
  if (field.path.starts_with("strategy.pp.")) {
    document["strategy"]["mesh"] = {{"pp", 2}};
    document["launch"] = {{"hosts", {{{"host", "localhost"}, {"ranks", 2}}}}};
  }
  useSchedulerFor(field, document);
  EXPECT_TRUE(parseJobSpec(document).ok()) << document.dump() << "\n"
                                           << parseJobSpec(document).describe();
  return document;
}

json::json_pointer pointerOf(const std::string& path) {
  std::string pointer;
  for (char c : path) pointer += c == '.' ? '/' : c;
  return json::json_pointer("/" + pointer);
}

// The paths of fields inside each launch host, as in a document: launch.hosts[0].ranks.
std::string inFirstHost(const std::string& path) {
  std::string p = path;
  p.replace(p.find("[]"), 2, "/0");
  return p;
}

bool isHostField(const SpecField& field) {
  return field.path.find("[]") != std::string::npos;
}

// Every kind of the field's controller for which it applies (one empty kind when unconditional).
std::vector<std::string> kindsFor(const SpecField& field) {
  if (!field.shown_when) return {""};
  return field.shown_when->kinds;
}

TEST(SpecFields, PathsAreUniqueAndSectionsContiguous) {
  std::set<std::string> paths;
  std::vector<std::string> sections;
  for (const SpecField& field : specFields()) {
    EXPECT_TRUE(paths.insert(field.path).second) << field.path;
    EXPECT_FALSE(field.label.empty()) << field.path;
    if (sections.empty() || sections.back() != field.section) sections.push_back(field.section);
    EXPECT_EQ(findSpecField(field.path), &field);
  }
  std::set<std::string> unique(sections.begin(), sections.end());
  EXPECT_EQ(unique.size(), sections.size()) << "a section is split";
  EXPECT_EQ(findSpecField("no.such"), nullptr);
}

TEST(SpecFields, DefaultsAreTheParsers) {
  for (const SpecField& field : specFields()) {
    if (field.required || isHostField(field)) continue;
    for (const std::string& kind : kindsFor(field)) {
      json document = validFor(field, kind);
      // Leave the field out.
      const json::json_pointer pointer = pointerOf(field.path);
      if (document.contains(pointer)) document[pointer.parent_pointer()].erase(pointer.back());
      const SpecParseResult parsed = parseJobSpec(document);
      ASSERT_TRUE(parsed.ok()) << field.path << ": " << parsed.describe();
      const json canonical = toJson(*parsed.spec);
      const json expected = defaultFor(field, document);
      // Two defaults are computed from the ranks: the mesh's dp is what tp and pp leave of the
      // world (here 1, or the 2 ranks a data-parallel plan's document has); a program job's
      // strategy kind is ddp on several ranks (the program job has 2).
      if (field.path == "strategy.mesh.dp") {
        EXPECT_EQ(canonical[pointer], document.contains("launch") ? 2 : 1);
        continue;
      }
      if (field.path == "strategy.kind") {
        EXPECT_EQ(canonical[pointer], "ddp");
        continue;
      }
      if (expected.is_null()) {
        EXPECT_FALSE(canonical.contains(pointer)) << field.path;
      } else {
        ASSERT_TRUE(canonical.contains(pointer)) << field.path;
        EXPECT_EQ(canonical[pointer], expected) << field.path << " (" << kind << ")";
      }
    }
  }
}

TEST(SpecFields, WeightDecayDefaultFollowsTheOptimizer) {
  const SpecField* field = findSpecField("optimizer.weight_decay");
  ASSERT_NE(field, nullptr);
  for (const std::string& kind : findSpecField("optimizer.kind")->choices) {
    json document = validFor(*field);
    document["optimizer"] = {{"kind", kind}, {"lr", 0.1}};
    const SpecParseResult parsed = parseJobSpec(document);
    ASSERT_TRUE(parsed.ok()) << parsed.describe();
    EXPECT_EQ(toJson(*parsed.spec)["optimizer"]["weight_decay"], defaultFor(*field, document))
        << kind;
  }
}

TEST(SpecFields, RequiredFieldsAreReportedAsRequired) {
  for (const SpecField& field : specFields()) {
    if (!field.required) continue;
    json document = validFor(field);
    std::string path = field.path;
    json::json_pointer pointer;
    if (isHostField(field)) {
      path = field.path.substr(0, field.path.find("[]")) + "[0]" +
             field.path.substr(field.path.find("[]") + 2);
      pointer = pointerOf(inFirstHost(field.path));
      document["launch"] = {{"hosts", {{{"host", "localhost"}, {"ranks", 1}}}}};
    } else {
      pointer = pointerOf(field.path);
    }
    document[pointer.parent_pointer()].erase(pointer.back());
    const SpecParseResult parsed = parseJobSpec(document);
    EXPECT_TRUE(std::count(parsed.problems.begin(), parsed.problems.end(),
                           SpecProblem{path, "required"}) == 1)
        << field.path << ": " << parsed.describe();
    EXPECT_TRUE(field.default_value.is_null()) << field.path;
  }
}

TEST(SpecFields, InitialValuesAreANewSpecs) {
  const json fresh = toJson(JobSpec{});
  for (const SpecField& field : specFields()) {
    if (field.initial_value.is_null()) continue;
    EXPECT_TRUE(field.required) << field.path;
    EXPECT_EQ(fresh[pointerOf(field.path)], field.initial_value) << field.path;
  }
}

TEST(SpecFields, ChoicesAreExactlyWhatTheParserAccepts) {
  for (const SpecField& field : specFields()) {
    if (field.type != FieldType::kChoice) {
      EXPECT_TRUE(field.choices.empty()) << field.path;
      continue;
    }
    ASSERT_FALSE(field.choices.empty()) << field.path;
    const json::json_pointer pointer = pointerOf(field.path);
    for (const std::string& name : field.choices) {
      json document = validFor(field);
      if (field.path == "data.kind" && name == "idx") {
        document["data"] = {{"kind", "idx"}, {"images", "i"}, {"labels", "l"}};
      } else if (field.path == "data.kind" && (name == "tokens" || name == "text")) {
        useTokenData(document, name);
      } else if (field.path == "strategy.kind" && name != "single") {
        document["launch"] = {{"hosts", {{{"host", "localhost"}, {"ranks", 2}}}}};
      }
      if (field.path == "optimizer.kind") document["optimizer"] = {{"lr", 0.1}};
      if (name == "interleaved_1f1b") {
        document["strategy"]["pp"]["virtual_stages"] = 2;
        document["model"]["layers"] = {4, 8, 8, 8, 3};
        document["train"]["micro_batches"] = 2;  // a multiple of the 2 pipeline ranks
      }
      if (field.path == "backend" && name == "nccl") document["device"] = "cuda";
      if (name == "gpt") useTokenData(document, "tokens");
      document[pointer] = name;
      const SpecParseResult parsed = parseJobSpec(document);
      EXPECT_TRUE(parsed.ok()) << field.path << " = " << name << ": " << parsed.describe();
    }
    json document = validFor(field);
    document[pointer] = "not_a_" + field.path;
    const SpecParseResult parsed = parseJobSpec(document);
    ASSERT_FALSE(parsed.problems.empty()) << field.path;
    EXPECT_EQ(parsed.problems.front().path, field.path);
    // The parser names every spelling it accepts: the same list, in the same order.
    std::string listed;
    for (const std::string& name : field.choices) listed += "\"" + name + "\", ";
    EXPECT_EQ(parsed.problems.front().message,
              "expected one of " + listed + "got \"not_a_" + field.path + "\"");
    if (!field.default_value.is_null())
      EXPECT_NE(std::find(field.choices.begin(), field.choices.end(), field.default_value),
                field.choices.end())
          << field.path;
  }
}

// The bounds the parser draws: at a bound accepted unless exclusive, just beyond refused.
TEST(SpecFields, BoundsAreTheParsers) {
  for (const SpecField& field : specFields()) {
    if (field.type != FieldType::kInteger && field.type != FieldType::kNumber) continue;
    if (field.path == "launch.hosts[].ranks") continue;  // bounded by the world size too
    const bool integer = field.type == FieldType::kInteger;
    const json::json_pointer pointer =
        pointerOf(isHostField(field) ? inFirstHost(field.path) : field.path);
    const std::string at_path =
        isHostField(field) ? "launch.hosts[0]." + field.path.substr(field.path.find("].") + 2)
                           : field.path;
    auto problemsAt = [&](double value) {
      json document = validFor(field);
      if (isHostField(field))
        document["launch"] = {{"hosts", {{{"host", "localhost"}, {"ranks", 1}}}}};
      if (integer && value > 9.2e18)
        document[pointer] = static_cast<uint64_t>(value);
      else if (integer)
        document[pointer] = static_cast<int64_t>(value);
      else
        document[pointer] = value;
      size_t at = 0;
      for (const SpecProblem& problem : parseJobSpec(document).problems)
        at += problem.path == at_path;
      return at;
    };
    ASSERT_TRUE(field.minimum.has_value()) << field.path;
    const double step = integer ? 1 : std::max(std::abs(*field.minimum) * 1e-9, 1e-9);
    // Values at a bound may break a cross-field rule (data.features must match the model), so
    // only refusals just beyond each bound and acceptance of inside values are asserted.
    EXPECT_GT(problemsAt(*field.minimum - (field.exclusive_minimum ? 0 : step)), 0u)
        << field.path << " below its minimum";
    if (field.maximum && *field.maximum < 1e18) {
      EXPECT_GT(problemsAt(*field.maximum + (field.exclusive_maximum ? 0 : step)), 0u)
          << field.path << " above its maximum";
    }
  }
}

// The described paths are exactly the keys of canonical specs, over every kind and with every
// optional value set: nothing the parser knows is missing from the form, nothing described is
// unknown to it.
TEST(SpecFields, EveryKeyTheParserKnowsIsDescribed) {
  std::set<std::string> canonical;
  // Every data-parallel plan, and the mesh's tp and pp dimensions used (toJson writes what a
  // spec holds; whether a model has tp is the checks').
  for (const std::string& kind : {"ddp", "fsdp", "tp", "pipeline"}) {
    JobSpec spec;
    if (kind == "tp")
      spec.strategy.mesh.tp = 2;
    else
      applyLegacyStrategyKind(kind, 2, spec.strategy);
    spec.model.layers = {4, 8, 3};
    spec.strategy.pipeline.stages = {{0}, {1}};
    spec.checkpoint = CheckpointSpec{};
    spec.model.init_checkpoint = "w";
    spec.data.val = "v";  // written only when set
    spec.launch.node_binary = "n";
    spec.launch.env = {{"A", "1"}};  // written only when not empty
    spec.launch.env_file = "e";
    spec.launch.hosts = {LaunchHostSpec{"h", 1, 22, "u", "id", true, "jump"}};
    spec.optimizer.clip_grad_norm = 1;
    spec.optimizer.schedule = {.kind = LrScheduleKind::kCosine, .decay_steps = 5};
    spec.train.peak_tflops = 100;
    spec.train.precision = Precision::kFp16;  // writes train.loss_scale
    spec.strategy.ddp.reduce_dtype = spec.strategy.fsdp.reduce_dtype = Precision::kBf16;
    spec.strategy.fsdp.param_dtype = Precision::kBf16;
    for (const std::string& model : findSpecField("model.kind")->choices)
      for (const std::string& optimizer : findSpecField("optimizer.kind")->choices) {
        spec.model.kind = model;
        spec.optimizer.kind = *fromString<OptimizerKind>(optimizer);
        for (const std::string& data : findSpecField("data.kind")->choices) {
          spec.data.kind = *fromString<DataKind>(data);
          const json flat = toJson(spec).flatten();
          for (const auto& [pointer, value] : flat.items()) {
            std::string path = pointer.substr(1);
            for (char& c : path) c = c == '/' ? '.' : c;
            if (path.starts_with("launch.hosts.")) {
              canonical.insert("launch.hosts");
              path = "launch.hosts[]." + path.substr(path.find('.', 13) + 1);
            } else if (path.starts_with("strategy.pp.stages")) {
              path = "strategy.pp.stages";
            } else if (path.starts_with("model.layers") || path.starts_with("optimizer.betas") ||
                       path.starts_with("program.args") || path.starts_with("launch.env.")) {
              path = path.substr(0, path.find('.', path.find('.') + 1));
            }
            canonical.insert(path);
          }
        }
      }
  }
  // Issue 35: a Slurm job, every optional value of launch.scheduler set.
  JobSpec slurm;
  slurm.launch.hosts.clear();
  slurm.launch.slurm =
      SlurmSpec{.gpus_per_node = 8,
                .cpus_per_task = 4,
                .mem = "16G",
                .partition = "p",
                .account = "a",
                .qos = "q",
                .constraint = "c",
                .reservation = "r",
                .job_name = "j",
                .time = "10",
                .extra_sbatch = {"--exclusive"},
                .submit_from = LaunchHostSpec{"login", 1, 22, "u", "id", true, "bastion"}};
  const json slurm_flat = toJson(slurm).flatten();
  for (const auto& [pointer, value] : slurm_flat.items()) {
    std::string path = pointer.substr(1);
    for (char& c : path) c = c == '/' ? '.' : c;
    if (!path.starts_with("launch.scheduler.")) continue;
    if (path.starts_with("launch.scheduler.extra_sbatch")) path = "launch.scheduler.extra_sbatch";
    canonical.insert(path);
  }
  // A program job, with every optional value set; its canonical form writes only what it reads.
  JobSpec program;
  program.program = ProgramSpec{.python = "python3",
                                .script = "train.py",
                                .args = {"--steps", "3"},
                                .workdir = "w",
                                .upload = true,
                                .steps = 3};
  const json program_flat = toJson(program).flatten();
  for (const auto& [pointer, value] : program_flat.items()) {
    std::string path = pointer.substr(1);
    for (char& c : path) c = c == '/' ? '.' : c;
    if (path.starts_with("launch.hosts.")) continue;  // the engine job's hosts, above
    if (path.starts_with("program.args")) path = "program.args";
    canonical.insert(path);
  }
  std::set<std::string> described;
  for (const SpecField& field : specFields()) described.insert(field.path);
  EXPECT_EQ(described, canonical);
}

// Issue 19: the job kind of a document is the parser's (a program section that is not null), and
// each field's is where the parser reads it: an engine field beside a program is refused at its
// section (a strategy option at itself), a field of both kinds is read in either.
TEST(SpecFields, EachFieldsJobKindIsTheParsers) {
  EXPECT_EQ(jobKindOf(programJob()), JobKind::kProgram);
  EXPECT_EQ(jobKindOf(json::object()), JobKind::kEngine);
  EXPECT_EQ(jobKindOf({{"program", nullptr}}), JobKind::kEngine);
  EXPECT_EQ(toString(JobKind::kEngine), "engine");
  EXPECT_EQ(toString(JobKind::kProgram), "program");
  size_t engine = 0, program = 0, both = 0;
  for (const SpecField& field : specFields()) {
    if (isHostField(field)) {
      EXPECT_FALSE(field.job.has_value()) << field.path;
      continue;
    }
    const json::json_pointer pointer = pointerOf(field.path);
    if (field.job == JobKind::kEngine) {
      ++engine;
      // The value a valid engine spec holds there (its default when it has none written).
      const json engine_document = validFor(field);
      const json value = engine_document.contains(pointer)   ? engine_document[pointer]
                         : !field.default_value.is_null()    ? field.default_value
                         : field.type == FieldType::kNumber  ? json(1.0)
                         : field.type == FieldType::kInteger ? json(1)
                                                             : json("x");
      json document = programJob();
      document[pointer] = value;
      const std::string section = field.path.substr(0, field.path.find('.'));
      // Whole sections are refused, and the engine's fields elsewhere one by one.
      // A strategy's mesh and dimension blocks are refused as a whole.
      const std::string refused_at =
          section == "strategy" ? field.path.substr(0, field.path.find('.', 9)) : section;
      bool refused = false;
      for (const SpecProblem& problem : parseJobSpec(document).problems)
        refused |= problem.path == refused_at;
      EXPECT_TRUE(refused) << field.path << ": " << parseJobSpec(document).describe();
      EXPECT_FALSE(appliesTo(field, programJob())) << field.path;
    } else if (field.job == JobKind::kProgram) {
      ++program;
      // The program section's, and the strategy's kind (what the script does).
      EXPECT_TRUE(field.path.starts_with("program.") || field.path == "strategy.kind")
          << field.path;
      EXPECT_TRUE(appliesTo(field, programJob())) << field.path;
      EXPECT_FALSE(appliesTo(field, validFor(*findSpecField("name")))) << field.path;
    } else {
      ++both;
      // Read in a program job: its default (or a new spec's value) written there is accepted.
      const json value = !field.default_value.is_null() ? field.default_value : field.initial_value;
      if (value.is_null() || field.type == FieldType::kHostList) continue;
      json document = programJob();
      useSchedulerFor(field, document);
      EXPECT_TRUE(appliesTo(field, document)) << field.path;
      document[pointer] = value;
      EXPECT_TRUE(parseJobSpec(document).ok())
          << field.path << ": " << parseJobSpec(document).describe();
    }
  }
  EXPECT_EQ(program, 7u);  // python, script, args, workdir, upload, steps; strategy.kind
  EXPECT_GT(engine, 40u);
  EXPECT_GE(both, 6u);  // name, description, launch (hosts, node binary, port, timeout)
}

TEST(SpecFields, ConditionsNameChoiceFieldsAndTheirKinds) {
  for (const SpecField& field : specFields()) {
    if (!field.shown_when) continue;
    const SpecField* controller = findSpecField(field.shown_when->controller);
    ASSERT_NE(controller, nullptr) << field.path;
    EXPECT_EQ(controller->type, FieldType::kChoice);
    for (const std::string& kind : field.shown_when->kinds)
      EXPECT_NE(std::find(controller->choices.begin(), controller->choices.end(), kind),
                controller->choices.end())
          << field.path << ": " << kind;
  }
  // A controller's value: the document's, else its default, else a new spec's.
  const json document = {{"data", {{"kind", "idx"}}}};
  EXPECT_EQ(choiceIn(document, "data.kind"), "idx");
  EXPECT_EQ(choiceIn(document, "strategy.dp.kind"), "ddp");
  EXPECT_EQ(choiceIn(document, "optimizer.kind"), "adamw");
  EXPECT_EQ(choiceIn(document, "backend"), "auto");
  EXPECT_TRUE(appliesTo(*findSpecField("data.images"), document));
  EXPECT_FALSE(appliesTo(*findSpecField("data.samples"), document));
  EXPECT_TRUE(appliesTo(*findSpecField("optimizer.betas"), document));
  EXPECT_TRUE(appliesTo(*findSpecField("train.steps"), document));
}

// A plain value's binding names the member its path says ("train.steps": spec.train.steps), and
// that member holds the field's type.
TEST(SpecFields, BindingsNameTheirPathsMemberOfTheirType) {
  JobSpec spec;
  spec.checkpoint.emplace();
  spec.program.emplace();
  spec.launch.slurm.emplace().submit_from.emplace();
  LaunchHostSpec host;
  size_t bound = 0;
  for (const SpecField& field : specFields()) {
    if (!field.binding) continue;
    SCOPED_TRACE(field.path);
    ++bound;
    const SpecValueBinding& binding = *field.binding;
    EXPECT_EQ(binding.member, field.path);
    ASSERT_NE(binding.in_spec == nullptr, binding.in_host == nullptr);
    EXPECT_EQ(binding.in_host != nullptr, field.path.starts_with("launch.hosts[]."));
    const SpecValueRef ref = binding.in_spec ? binding.in_spec(spec) : binding.in_host(host);
    switch (field.type) {
      case FieldType::kInteger:
        EXPECT_TRUE(std::holds_alternative<int*>(ref) || std::holds_alternative<int64_t*>(ref) ||
                    std::holds_alternative<uint64_t*>(ref) ||
                    std::holds_alternative<std::optional<int>*>(ref) ||
                    std::holds_alternative<std::optional<int64_t>*>(ref));
        break;
      case FieldType::kNumber:
        EXPECT_TRUE(std::holds_alternative<double*>(ref) ||
                    std::holds_alternative<std::optional<double>*>(ref));
        break;
      case FieldType::kBoolean:
        EXPECT_TRUE(std::holds_alternative<bool*>(ref));
        break;
      case FieldType::kChoice:
        EXPECT_TRUE(std::holds_alternative<EnumValueRef>(ref) ||
                    std::holds_alternative<std::string*>(ref));
        break;
      default:
        EXPECT_TRUE(std::holds_alternative<std::string*>(ref) ||
                    std::holds_alternative<std::optional<std::string>*>(ref));
    }
  }
  EXPECT_GE(bound, 60u);
}

TEST(SpecFields, TypeNames) {
  EXPECT_EQ(toString(FieldType::kInteger), "integer");
  EXPECT_EQ(toString(FieldType::kIntegerList), "integer list");
  EXPECT_EQ(toString(FieldType::kHostList), "host list");
  EXPECT_EQ(toString(FieldType::kDirectory), "directory");
  EXPECT_EQ(toString(FieldType::kTextList), "text list");
  EXPECT_EQ(toString(FieldType::kTextMap), "text map");
}

}  // namespace
}  // namespace ringmaster
