// The description of every job spec field, in form order. Defaults come from the spec's structs
// and bounds from its limits; tests/engine/spec/spec_fields_test.cpp holds both to the parser.
#include "spec/spec_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "spec/job_spec.h"
#include "spec/strategies/plan.h"

namespace ringmaster {

using json = nlohmann::json;

std::string_view toString(FieldType type) {
  switch (type) {
    case FieldType::kInteger:
      return "integer";
    case FieldType::kNumber:
      return "number";
    case FieldType::kBoolean:
      return "boolean";
    case FieldType::kText:
      return "text";
    case FieldType::kPath:
      return "path";
    case FieldType::kDirectory:
      return "directory";
    case FieldType::kTextList:
      return "text list";
    case FieldType::kChoice:
      return "choice";
    case FieldType::kIntegerList:
      return "integer list";
    case FieldType::kNumberList:
      return "number list";
    case FieldType::kIntegerListList:
      return "list of integer lists";
    case FieldType::kHostList:
      return "host list";
    case FieldType::kTextMap:
      return "text map";
  }
  return "?";
}

std::string_view toString(JobKind kind) {
  return kind == JobKind::kProgram ? "program" : "engine";
}

JobKind jobKindOf(const json& document) {
  return document.is_object() && document.contains("program") && !document["program"].is_null()
             ? JobKind::kProgram
             : JobKind::kEngine;
}

namespace {

template <typename E>
std::vector<std::string> choicesOf() {
  std::vector<std::string> names;
  for (std::string_view name : enumNames<E>()) names.emplace_back(name);
  return names;
}

template <typename E>
SpecField choice(std::string path, std::string section, std::string label, E default_kind,
                 std::string help = {}) {
  SpecField f{.path = std::move(path),
              .section = std::move(section),
              .label = std::move(label),
              .type = FieldType::kChoice,
              .choices = choicesOf<E>(),
              .default_value = std::string(toString(default_kind)),
              .help = std::move(help)};
  return f;
}

// A choice the parser insists on; `initial` is JobSpec{}'s.
template <typename E>
SpecField requiredChoice(std::string path, std::string section, std::string label, E initial,
                         std::string help = {}) {
  SpecField f =
      choice(std::move(path), std::move(section), std::move(label), initial, std::move(help));
  f.default_value = nullptr;
  f.initial_value = std::string(toString(initial));
  f.required = true;
  return f;
}

SpecField field(std::string path, std::string section, std::string label, FieldType type,
                json default_value, std::string help = {}) {
  return SpecField{.path = std::move(path),
                   .section = std::move(section),
                   .label = std::move(label),
                   .type = type,
                   .default_value = std::move(default_value),
                   .help = std::move(help)};
}

SpecField required(std::string path, std::string section, std::string label, FieldType type,
                   std::string help = {}) {
  SpecField f =
      field(std::move(path), std::move(section), std::move(label), type, nullptr, std::move(help));
  f.required = true;
  return f;
}

SpecField bounded(SpecField f, std::optional<double> minimum, std::optional<double> maximum,
                  bool exclusive_minimum = false, bool exclusive_maximum = false) {
  f.minimum = minimum;
  f.maximum = maximum;
  f.exclusive_minimum = exclusive_minimum;
  f.exclusive_maximum = exclusive_maximum;
  return f;
}

SpecField only(SpecField f, std::string controller, std::vector<std::string> kinds) {
  f.shown_when = FieldCondition{std::move(controller), std::move(kinds)};
  return f;
}

// The model kinds whose model.layers are widths: every registered kind but gpt.
std::vector<std::string> widthKinds() {
  std::vector<std::string> kinds;
  for (std::string_view kind : modelKinds())
    if (kind != "gpt") kinds.emplace_back(kind);
  return kinds;
}

// A plain value member of the spec, as the generic parser and writer reach it.
template <typename T>
SpecValueRef valueRef(T& value) {
  if constexpr (std::is_enum_v<T>) {
    return EnumValueRef{.value = &value,
                        .name = [](const void* v) { return toString(*static_cast<const T*>(v)); },
                        .set =
                            [](void* v, std::string_view name) {
                              const std::optional<T> parsed = fromString<T>(name);
                              if (parsed) *static_cast<T*>(v) = *parsed;
                              return parsed.has_value();
                            }};
  } else {
    return &value;
  }
}

// Where the field is: RM_SPEC(train.steps) a JobSpec member, RM_SPEC_IN(checkpoint, dir) one of an
// optional block (none while the block is unset), RM_HOST(port) a launch host's.
#define RM_SPEC(name)                                                       \
  SpecValueBinding {                                                        \
    .in_spec = [](JobSpec& s) { return valueRef(s.name); }, .member = #name \
  }
#define RM_SPEC_IN(block, name)                                                               \
  SpecValueBinding {                                                                          \
    .in_spec = [](JobSpec& s) { return s.block ? valueRef(s.block->name) : SpecValueRef{}; }, \
    .member = #block "." #name                                                                \
  }
#define RM_HOST(name)                                              \
  SpecValueBinding {                                               \
    .in_host = [](LaunchHostSpec& h) { return valueRef(h.name); }, \
    .member = "launch.hosts[]." #name                              \
  }

SpecField boundTo(SpecField f, SpecValueBinding where) {
  f.binding = where;
  return f;
}

// The parser's words for a valid value, which state every bound.
SpecField saying(SpecField f, std::string expected) {
  f.expected = std::move(expected);
  return f;
}

constexpr double kSeedMax = static_cast<double>(std::numeric_limits<uint64_t>::max());

std::vector<SpecField> describe() {
  using T = FieldType;
  const JobSpec spec;
  const LaunchHostSpec host;
  const CheckpointSpec checkpoint;
  const ProgramSpec program;
  const std::string data_parallel = "strategy.dp.kind", data = "data.kind",
                    optimizer = "optimizer.kind", model = "model.kind";
  const std::string schedule = "optimizer.schedule.kind";
  std::vector<SpecField> fields = {
      // Job
      required("name", "Job", "Name", T::kText, "letters, digits, . _ - (up to 64)"),
      [&] {
        SpecField f =
            boundTo(field("description", "Job", "Description", T::kText, spec.description),
                    RM_SPEC(description));
        f.empty_allowed = true;
        return f;
      }(),
      // Program (a program job's own section: the user's script as every rank's worker)
      boundTo(field("program.python", "Program", "Python", T::kText, program.python,
                    "the interpreter: a name looked up on each host's PATH, or a path there"),
              RM_SPEC_IN(program, python)),
      boundTo(required("program.script", "Program", "Script", T::kPath,
                       "what every rank runs, relative to program.workdir or absolute"),
              RM_SPEC_IN(program, script)),
      field("program.args", "Program", "Arguments", T::kTextList, program.args,
            "after the script, each passed as it is (never through a shell)"),
      [&] {
        SpecField f = boundTo(
            field("program.workdir", "Program", "Working directory", T::kDirectory, nullptr,
                  "where the script starts; empty: where `ringmaster run` started (over SSH: "
                  "the remote home, unless upload)"),
            RM_SPEC_IN(program, workdir));
        f.empty_allowed = true;
        return f;
      }(),
      boundTo(field("program.upload", "Program", "Upload", T::kBoolean, program.upload,
                    "over SSH: copy the working directory's files to each host and start there"),
              RM_SPEC_IN(program, upload)),
      boundTo(bounded(field("program.steps", "Program", "Steps", T::kInteger, program.steps,
                            "the steps the script will log, for the progress bar; 0: unknown"),
                      0, kMaxSteps),
              RM_SPEC_IN(program, steps)),
      // Strategy: a program job's kind (what the script does, for the history), an engine job's
      // mesh and data-parallel plan; the dimensions' options follow (their plans').
      [] {
        SpecField f{.path = "strategy.kind",
                    .section = "Strategy",
                    .label = "Kind",
                    .type = T::kChoice,
                    .default_value = nullptr,
                    .help =
                        "what the script does, for the history: single (one rank), ddp, fsdp "
                        "or pipeline; left out: ddp on several ranks, single on one"};
        f.choices = {"single"};
        for (std::string_view name : dataParallelPlanNames()) f.choices.emplace_back(name);
        f.choices.emplace_back("pipeline");
        return f;
      }(),
      boundTo(
          bounded(field("strategy.mesh.dp", "Strategy", "Data parallel (dp)", T::kInteger, nullptr,
                        "replicas of the model, each training on its own samples; left out: "
                        "the world size / (tp × pp)"),
                  1, kMaxWorldSize),
          RM_SPEC(strategy.mesh.dp)),
      boundTo(bounded(field("strategy.mesh.tp", "Strategy", "Tensor parallel (tp)", T::kInteger,
                            spec.strategy.mesh.tp,
                            "ranks splitting each layer (attention heads, MLP, vocabulary); gpt "
                            "only; the fastest-varying rank coordinate"),
                      1, kMaxWorldSize),
              RM_SPEC(strategy.mesh.tp)),
      boundTo(bounded(field("strategy.mesh.pp", "Strategy", "Pipeline parallel (pp)", T::kInteger,
                            spec.strategy.mesh.pp,
                            "ranks each holding a pipeline stage of the layers; dp × tp × pp must "
                            "be the world size"),
                      1, kMaxWorldSize),
              RM_SPEC(strategy.mesh.pp)),
      // Read and written with the plan's options (job_spec.cpp: parseDataParallel).
      [&] {
        SpecField f{.path = "strategy.dp.kind",
                    .section = "Strategy",
                    .label = "Data parallelism",
                    .type = T::kChoice,
                    .default_value = spec.strategy.data_parallel,
                    .help =
                        "ddp: replicate and all-reduce gradients; fsdp: shard parameters, "
                        "gradients and optimizer state"};
        for (std::string_view name : dataParallelPlanNames()) f.choices.emplace_back(name);
        return f;
      }(),
      // Model
      // The kinds are the registered models' (nn/models.cpp).
      boundTo(SpecField{.path = "model.kind",
                        .section = "Model",
                        .label = "Kind",
                        .type = T::kChoice,
                        .choices =
                            [] {
                              std::vector<std::string> kinds;
                              for (std::string_view kind : modelKinds()) kinds.emplace_back(kind);
                              return kinds;
                            }(),
                        .default_value = nullptr,
                        .required = true,
                        .initial_value = spec.model.kind},
              RM_SPEC(model.kind)),
      bounded(required("model.layers", "Model", "Layers", T::kIntegerList,
                       "widths, input first, comma-separated: 784, 256, 256, 10 (gpt: one "
                       "integer, the number of transformer blocks, up to 1024)"),
              1, kMaxLayerWidth),
      only(boundTo(bounded(required("model.vocab_size", "Model", "Vocabulary", T::kInteger,
                                    "token ids are in [0, vocab_size)"),
                           1, kMaxVocabSize),
                   RM_SPEC(model.vocab_size)),
           model, {"gpt"}),
      only(boundTo(bounded(required("model.context", "Model", "Context", T::kInteger,
                                    "tokens per sample (the position embedding's length)"),
                           1, kMaxContext),
                   RM_SPEC(model.context)),
           model, {"gpt"}),
      only(boundTo(bounded(required("model.heads", "Model", "Heads", T::kInteger,
                                    "attention heads; must divide model.dim"),
                           1, kMaxHeads),
                   RM_SPEC(model.heads)),
           model, {"gpt"}),
      only(boundTo(bounded(required("model.dim", "Model", "Width", T::kInteger,
                                    "the embedding and residual width"),
                           1, kMaxLayerWidth),
                   RM_SPEC(model.dim)),
           model, {"gpt"}),
      only(boundTo(field("model.bias", "Model", "Biases", T::kBoolean, spec.model.bias,
                         "biases in the Linear layers and LayerNorms"),
                   RM_SPEC(model.bias)),
           model, {"gpt"}),
      only(boundTo(choice("model.activation", "Model", "Activation", spec.model.activation),
                   RM_SPEC(model.activation)),
           model, widthKinds()),
      only(boundTo(field("model.layer_norm", "Model", "LayerNorm", T::kBoolean,
                         spec.model.layer_norm, "after every hidden layer"),
                   RM_SPEC(model.layer_norm)),
           model, widthKinds()),
      boundTo(saying(bounded(field("model.dropout", "Model", "Dropout", T::kNumber,
                                   spec.model.dropout, "probability in [0, 1)"),
                             0, 1, false, true),
                     "a number in [0, 1)"),
              RM_SPEC(model.dropout)),
      boundTo(bounded(field("model.seed", "Model", "Seed", T::kInteger, spec.model.seed,
                            "initial weights"),
                      0, kSeedMax),
              RM_SPEC(model.seed)),
      boundTo(field("model.init_checkpoint", "Model", "Initial weights", T::kPath, nullptr,
                    "a safetensors file to start from instead of the seed's weights"),
              RM_SPEC(model.init_checkpoint)),
      // Data
      boundTo(requiredChoice("data.kind", "Data", "Kind", spec.data.kind), RM_SPEC(data.kind)),
      only(
          boundTo(bounded(required("data.samples", "Data", "Samples", T::kInteger), 1, kMaxSamples),
                  RM_SPEC(data.samples)),
          data, {"synthetic"}),
      only(boundTo(bounded(required("data.features", "Data", "Features", T::kInteger), 1,
                           kMaxLayerWidth),
                   RM_SPEC(data.features)),
           data, {"synthetic"}),
      only(boundTo(
               bounded(required("data.classes", "Data", "Classes", T::kInteger), 2, kMaxLayerWidth),
               RM_SPEC(data.classes)),
           data, {"synthetic"}),
      only(boundTo(bounded(field("data.seed", "Data", "Seed", T::kInteger, spec.data.seed), 0,
                           kSeedMax),
                   RM_SPEC(data.seed)),
           data, {"synthetic"}),
      only(boundTo(required("data.images", "Data", "Images (IDX)", T::kPath,
                            "e.g. data/train-images-idx3-ubyte"),
                   RM_SPEC(data.images)),
           data, {"idx"}),
      only(boundTo(required("data.labels", "Data", "Labels (IDX)", T::kPath,
                            "e.g. data/train-labels-idx1-ubyte"),
                   RM_SPEC(data.labels)),
           data, {"idx"}),
      only(boundTo(required("data.train", "Data", "Training shards", T::kPath,
                            "llm.c token shards, a glob: data/fineweb_train_*.bin"),
                   RM_SPEC(data.train)),
           data, {"tokens"}),
      only(boundTo(field("data.val", "Data", "Validation shards", T::kPath, nullptr,
                         "llm.c token shards, a glob: data/fineweb_val_*.bin"),
                   RM_SPEC(data.val)),
           data, {"tokens"}),
      only(boundTo(required("data.path", "Data", "Text file", T::kPath,
                            "UTF-8 text, one token per byte (model.vocab_size >= 256)"),
                   RM_SPEC(data.path)),
           data, {"text"}),
      only(boundTo(saying(bounded(field("data.val_fraction", "Data", "Validation fraction",
                                        T::kNumber, spec.data.val_fraction,
                                        "the end of the file held out, in (0, 1)"),
                                  0, 1, true, true),
                          "a number in (0, 1)"),
                   RM_SPEC(data.val_fraction)),
           data, {"text"}),
      boundTo(
          field("data.shuffle", "Data", "Shuffle", T::kBoolean, spec.data.shuffle, "every epoch"),
          RM_SPEC(data.shuffle)),
      boundTo(field("data.drop_last", "Data", "Drop last", T::kBoolean, spec.data.drop_last,
                    "the last incomplete batch"),
              RM_SPEC(data.drop_last)),
      // Training
      boundTo(bounded(required("train.steps", "Training", "Steps", T::kInteger), 1, kMaxSteps),
              RM_SPEC(train.steps)),
      boundTo(bounded(required("train.batch_size", "Training", "Batch size", T::kInteger,
                               "samples per rank per step"),
                      1, kMaxBatchSize),
              RM_SPEC(train.batch_size)),
      // Accepted for every layout, but only as 1 without pipeline stages (the cross checks).
      boundTo(bounded(field("train.micro_batches", "Training", "Micro-batches", T::kInteger,
                            spec.train.micro_batches,
                            "pipeline stages only (strategy.mesh.pp > 1): must divide the batch "
                            "size"),
                      1, kMaxBatchSize),
              RM_SPEC(train.micro_batches)),
      boundTo(
          bounded(field("train.grad_accum_steps", "Training", "Accumulation", T::kInteger,
                        spec.train.grad_accum_steps,
                        "micro-steps per optimizer step (gradients synchronised on the last only)"),
                  1, kMaxBatchSize),
          RM_SPEC(train.grad_accum_steps)),
      boundTo(bounded(field("train.seed", "Training", "Seed", T::kInteger, spec.train.seed,
                            "shuffling and dropout"),
                      0, kSeedMax),
              RM_SPEC(train.seed)),
      [&] {
        SpecField f =
            boundTo(bounded(field("train.eval_every", "Training", "Evaluate every", T::kInteger,
                                  spec.train.eval_every,
                                  "steps between validation passes (and after the last); 0: "
                                  "never; needs a data kind with a validation set"),
                            0, kMaxSteps),
                    RM_SPEC(train.eval_every));
        f.zero_means = "never";
        return f;
      }(),
      boundTo(bounded(field("train.eval_batches", "Training", "Eval batches", T::kInteger,
                            spec.train.eval_batches, "validation batches per rank per evaluation"),
                      1, kMaxSteps),
              RM_SPEC(train.eval_batches)),
      boundTo(
          field("train.activation_checkpointing", "Training", "Activation checkpointing",
                T::kBoolean, spec.train.activation_checkpointing,
                "keep only each block's input; re-run its forward in the backward (less memory, "
                "about a third more compute)"),
          RM_SPEC(train.activation_checkpointing)),
      boundTo(
          bounded(field("train.peak_tflops", "Training", "Peak TFLOP/s", T::kNumber, nullptr,
                        "each rank's peak, for MFU; empty: the device's known peak (H100, H200, "
                        "A100), else no MFU"),
                  0, kMaxPeakTflops, true),
          RM_SPEC(train.peak_tflops)),
      boundTo(choice("train.precision", "Training", "Precision", spec.train.precision,
                     "matrix products in bf16 or fp16 as torch.autocast (fp32 master weights and "
                     "optimizer state); fp16 adds dynamic loss scaling"),
              RM_SPEC(train.precision)),
      // Below 1 the scale would shrink gradients towards fp16's underflow; above 2^64 every
      // gradient overflows.
      only(boundTo(saying(bounded(field("train.loss_scale.init", "Training", "Initial loss scale",
                                        T::kNumber, spec.train.loss_scale.init,
                                        "GradScaler's init_scale (2^16)"),
                                  1, 18446744073709551616.0),
                          "a number in [1, 2^64]"),
                   RM_SPEC(train.loss_scale.init)),
           "train.precision", {"fp16"}),
      only(boundTo(bounded(field("train.loss_scale.growth_interval", "Training",
                                 "Scale growth interval", T::kInteger,
                                 spec.train.loss_scale.growth_interval,
                                 "clean steps before the scale doubles"),
                           1, kMaxSteps),
                   RM_SPEC(train.loss_scale.growth_interval)),
           "train.precision", {"fp16"}),
      // Optimizer
      boundTo(requiredChoice("optimizer.kind", "Optimizer", "Kind", spec.optimizer.kind),
              RM_SPEC(optimizer.kind)),
      boundTo(bounded(required("optimizer.lr", "Optimizer", "Learning rate", T::kNumber), 0,
                      std::nullopt, true),
              RM_SPEC(optimizer.lr)),
      only(boundTo(saying(bounded(field("optimizer.momentum", "Optimizer", "Momentum", T::kNumber,
                                        spec.optimizer.momentum),
                                  0, 1, false, true),
                          "a number in [0, 1)"),
                   RM_SPEC(optimizer.momentum)),
           optimizer, {"sgd"}),
      only(boundTo(saying(bounded(field("optimizer.dampening", "Optimizer", "Dampening", T::kNumber,
                                        spec.optimizer.dampening),
                                  0, 1),
                          "a number in [0, 1]"),
                   RM_SPEC(optimizer.dampening)),
           optimizer, {"sgd"}),
      only(boundTo(field("optimizer.nesterov", "Optimizer", "Nesterov", T::kBoolean,
                         spec.optimizer.nesterov),
                   RM_SPEC(optimizer.nesterov)),
           optimizer, {"sgd"}),
      only(saying(bounded(field("optimizer.betas", "Optimizer", "Betas", T::kNumberList,
                                spec.optimizer.betas, "two numbers: 0.9, 0.999"),
                          0, 1, false, true),
                  "a number in [0, 1)"),
           optimizer, {"adam", "adamw"}),
      only(boundTo(bounded(field("optimizer.eps", "Optimizer", "Epsilon", T::kNumber,
                                 spec.optimizer.eps),
                           0, std::nullopt, true),
                   RM_SPEC(optimizer.eps)),
           optimizer, {"adam", "adamw"}),
      boundTo(bounded(field("optimizer.weight_decay", "Optimizer", "Weight decay", T::kNumber,
                            defaultWeightDecay(OptimizerKind::kSgd)),
                      0, std::nullopt),
              RM_SPEC(optimizer.weight_decay)),
      boundTo(bounded(field("optimizer.clip_grad_norm", "Optimizer", "Clip grad norm", T::kNumber,
                            nullptr, "max global L2 norm; empty: no clipping"),
                      0, std::nullopt, true),
              RM_SPEC(optimizer.clip_grad_norm)),
      boundTo(
          choice("optimizer.schedule.kind", "Optimizer", "LR schedule",
                 spec.optimizer.schedule.kind,
                 "constant: lr every step; cosine: linear warm-up to lr, cosine decay to min_lr "
                 "(nanoGPT)"),
          RM_SPEC(optimizer.schedule.kind)),
      only(boundTo(bounded(field("optimizer.schedule.warmup_steps", "Optimizer", "Warm-up steps",
                                 T::kInteger, spec.optimizer.schedule.warmup_steps,
                                 "steps of linear warm-up; less than train.steps (or decay_steps)"),
                           0, kMaxSteps),
                   RM_SPEC(optimizer.schedule.warmup_steps)),
           schedule, {"cosine"}),
      only(boundTo(bounded(field("optimizer.schedule.min_lr", "Optimizer", "Minimum LR", T::kNumber,
                                 spec.optimizer.schedule.min_lr,
                                 "the learning rate at the end of the decay; at most lr"),
                           0, std::nullopt),
                   RM_SPEC(optimizer.schedule.min_lr)),
           schedule, {"cosine"}),
      only(boundTo(bounded(field("optimizer.schedule.decay_steps", "Optimizer", "Decay steps",
                                 T::kInteger, nullptr,
                                 "the step where the decay reaches min_lr; empty: train.steps"),
                           1, kMaxSteps),
                   RM_SPEC(optimizer.schedule.decay_steps)),
           schedule, {"cosine"}),
      // Where
      boundTo(
          choice("backend", "Where", "Backend", spec.backend, "auto: NCCL on GPUs, Gloo on CPUs"),
          RM_SPEC(backend)),
      boundTo(choice("device", "Where", "Device", spec.device), RM_SPEC(device)),
      field("launch.hosts", "Where", "Hosts", T::kHostList,
            json::array({{{"host", host.host}, {"ranks", host.ranks}}}),
            "the machines and how many ranks each runs"),
      field("launch.hosts[].host", "Where", "Host", T::kText, host.host, "name or address"),
      boundTo(bounded(required("launch.hosts[].ranks", "Where", "Ranks", T::kInteger,
                               "workers on this host"),
                      1, kMaxRanksPerHost),
              RM_HOST(ranks)),
      field("launch.hosts[].user", "Where", "User", T::kText, nullptr,
            "left out: ~/.ssh/config or the local user"),
      boundTo(saying(bounded(field("launch.hosts[].port", "Where", "Port", T::kInteger, nullptr,
                                   "SSH port; left out: ~/.ssh/config or 22"),
                             1, 65535),
                     "a port number in 1..65535"),
              RM_HOST(port)),
      boundTo(field("launch.hosts[].identity_file", "Where", "Identity file", T::kPath, nullptr,
                    "left out: ~/.ssh/config or the agent"),
              RM_HOST(identity_file)),
      boundTo(
          field("launch.hosts[].password_auth", "Where", "Password", T::kBoolean,
                host.password_auth,
                "allow SSH password authentication for this host (asked at launch, never stored)"),
          RM_HOST(password_auth)),
      boundTo(field("launch.node_binary", "Where", "ringmaster-node", T::kPath, nullptr,
                    "its path on the hosts; empty: this build's"),
              RM_SPEC(launch.node_binary)),
      field("launch.env", "Where", "Environment", T::kTextMap, nullptr,
            "NAME=VALUE, added to every worker's environment on every host, values as written; "
            "not torchrun's or RINGMASTER_* variables, and no secrets (the spec is recorded): "
            "those go in the env file"),
      boundTo(
          field("launch.env_file", "Where", "Env file", T::kText, nullptr,
                "a NAME=VALUE file on each host, read when the workers start and recorded nowhere "
                "(for tokens and keys); relative: to where `ringmaster run` started, over SSH the "
                "remote home"),
          RM_SPEC(launch.env_file)),
      boundTo(saying(bounded(field("launch.master_port", "Where", "Master port", T::kInteger,
                                   spec.launch.master_port, "0 picks a free port"),
                             0, 65535),
                     "a port number in 0..65535 (0 picks a free port)"),
              RM_SPEC(launch.master_port)),
      boundTo(bounded(field("launch.timeout_s", "Where", "Timeout (s)", T::kNumber,
                            spec.launch.timeout_s, "rendezvous and collective timeout"),
                      0, kMaxTimeoutSeconds, true),
              RM_SPEC(launch.timeout_s)),
      boundTo(
          saying(bounded(field("launch.max_restarts", "Where", "Max restarts", T::kInteger,
                               spec.launch.max_restarts,
                               "a failed worker restarts every worker (an engine job's from its "
                               "newest checkpoint) up to this many times"),
                         0, kMaxRestarts),
                 fmt::format("an integer in 0..{}", kMaxRestarts)),
          RM_SPEC(launch.max_restarts)),
      boundTo(bounded(field("telemetry.every_steps", "Where", "Telemetry every", T::kInteger,
                            spec.telemetry.every_steps, "steps"),
                      1, kMaxSteps),
              RM_SPEC(telemetry.every_steps)),
      // Checkpoints (an optional block: present when it has a dir)
      boundTo(required("checkpoint.dir", "Checkpoints", "Directory", T::kDirectory,
                       "empty: no checkpoints"),
              RM_SPEC_IN(checkpoint, dir)),
      boundTo(bounded(field("checkpoint.every_steps", "Checkpoints", "Every", T::kInteger,
                            checkpoint.every_steps, "steps; 0: at the end"),
                      0, kMaxSteps),
              RM_SPEC_IN(checkpoint, every_steps)),
      boundTo(field("checkpoint.resume", "Checkpoints", "Resume", T::kBoolean, checkpoint.resume,
                    "from the latest checkpoint"),
              RM_SPEC_IN(checkpoint, resume)),
      boundTo(field("checkpoint.consolidate", "Checkpoints", "Consolidate", T::kBoolean,
                    checkpoint.consolidate, "FSDP: also write one full checkpoint"),
              RM_SPEC_IN(checkpoint, consolidate)),
  };
  // Each dimension's options, described by its plan (spec/strategies/), after strategy.dp.kind:
  // a data-parallel plan's when strategy.dp.kind names it, tp's and pp's always (the cross checks
  // say what they need of a dimension of 1).
  std::vector<SpecField> options;
  for (const DimensionPlan* plan : dimensionPlans()) {
    for (SpecField f : plan->fields()) {
      if (plan->dim() != MeshDim::kDp) {
        options.push_back(std::move(f));
        continue;
      }
      const std::string name(plan->name());
      auto same = std::find_if(options.begin(), options.end(),
                               [&](const SpecField& o) { return o.path == f.path; });
      if (same != options.end())
        same->shown_when->kinds.push_back(name);  // an option several plans share
      else
        options.push_back(only(std::move(f), data_parallel, {name}));
    }
  }
  const auto kind_field = std::find_if(fields.begin(), fields.end(), [](const SpecField& f) {
    return f.path == "strategy.dp.kind";
  });
  fields.insert(kind_field + 1, options.begin(), options.end());
  // optimizer.weight_decay follows PyTorch: 0.01 for AdamW; a gpt's model.layers is a count.
  // Each field's kind of job, by the parser's rule: the engine's sections and a strategy's options
  // are refused in a program job, the program section makes the job one.
  for (SpecField& f : fields) {
    const std::string_view section = std::string_view(f.path).substr(0, f.path.find('.'));
    if (std::find(kEngineOnlySections.begin(), kEngineOnlySections.end(), section) !=
            kEngineOnlySections.end() ||
        (section == "strategy" && f.path != "strategy.kind"))
      f.job = JobKind::kEngine;
    if (f.path == "strategy.kind") f.job = JobKind::kProgram;
    if (section == "program") f.job = JobKind::kProgram;
    if (f.path == "model.layers")
      f.types_when.push_back({FieldCondition{model, {"gpt"}}, T::kInteger});
    if (f.path == "optimizer.weight_decay") {
      f.defaults_when.push_back(
          {FieldCondition{optimizer, {"adamw"}}, defaultWeightDecay(OptimizerKind::kAdamW)});
    }
  }
  return fields;
}

#undef RM_SPEC
#undef RM_SPEC_IN
#undef RM_HOST

const json* at(const json& document, std::string_view path) {
  const json* node = &document;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string key(
        path.substr(start, dot == std::string_view::npos ? path.npos : dot - start));
    if (!node->is_object() || !node->contains(key)) return nullptr;
    node = &(*node)[key];
    if (dot == std::string_view::npos) return node;
    start = dot + 1;
  }
}

bool holds(const FieldCondition& condition, const json& document) {
  const std::string kind = choiceIn(document, condition.controller);
  return std::find(condition.kinds.begin(), condition.kinds.end(), kind) != condition.kinds.end();
}

}  // namespace

const std::vector<SpecField>& specFields() {
  static const std::vector<SpecField> fields = describe();
  return fields;
}

const SpecField* findSpecField(std::string_view path) {
  for (const SpecField& f : specFields())
    if (f.path == path) return &f;
  return nullptr;
}

json defaultFor(const SpecField& field, const json& document) {
  for (const ConditionalDefault& d : field.defaults_when)
    if (holds(d.when, document)) return d.value;
  return field.default_value;
}

FieldType typeIn(const SpecField& field, const json& document) {
  for (const ConditionalType& t : field.types_when)
    if (holds(t.when, document)) return t.type;
  return field.type;
}

std::string choiceIn(const json& document, std::string_view path) {
  if (const json* value = at(document, path); value && value->is_string())
    return value->get<std::string>();
  const SpecField* f = findSpecField(path);
  if (!f) return {};
  if (f->default_value.is_string()) return f->default_value.get<std::string>();
  if (f->initial_value.is_string()) return f->initial_value.get<std::string>();
  return {};
}

bool appliesTo(const SpecField& field, const json& document) {
  if (field.job && *field.job != jobKindOf(document)) return false;
  return !field.shown_when || holds(*field.shown_when, document);
}

}  // namespace ringmaster
