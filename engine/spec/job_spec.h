// The job spec: one JSON document that describes a training job completely (strategy, model, data,
// training loop, optimizer, backend, hosts, checkpoints, telemetry), as plain structs with their
// defaults, a parser that reports every problem with its JSON path, and the canonical JSON form.
// It validates what can be known from the document alone; files, hosts and devices are not touched.
// Field reference: docs/spec.md.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "spec/precision.h"
#include "spec/program.h"
#include "spec/strategies/ddp.h"
#include "spec/strategies/fsdp.h"
#include "spec/strategies/pipeline.h"

#include "nn/model.h"  // ModelSpec, ActivationKind: the model section belongs to the models
#include "optim/lr_schedule.h"  // LrSchedule: optimizer.schedule

namespace ringmaster {

// ---------------------------------------------------------------------------------------------
// Kinds. Each has toString() (the JSON spelling) and fromString<E>() (nullopt for an unknown
// name); enumNames<E>() lists every spelling in declaration order, for menus.

// A mesh dimension's own options and kinds (FsdpSharding, FsdpUnits, PipelineSchedule) are in its
// header under spec/strategies/; what it knows beyond them is its plan (spec/strategies/plan.h).
enum class DataKind { kSynthetic, kIdx, kTokens, kText };
enum class OptimizerKind { kSgd, kAdam, kAdamW };
enum class BackendKind { kAuto, kGloo, kNccl };
enum class DeviceKind { kAuto, kCpu, kCuda };

std::string_view toString(ActivationKind value);
std::string_view toString(DataKind value);
std::string_view toString(OptimizerKind value);
std::string_view toString(LrScheduleKind value);
std::string_view toString(BackendKind value);
std::string_view toString(DeviceKind value);

template <typename E>
std::optional<E> fromString(std::string_view name);
template <typename E>
std::vector<std::string_view> enumNames();

#define RINGMASTER_SPEC_ENUM_NAMES(E)                    \
  template <>                                            \
  std::optional<E> fromString<E>(std::string_view name); \
  template <>                                            \
  std::vector<std::string_view> enumNames<E>()
RINGMASTER_SPEC_ENUM_NAMES(FsdpSharding);
RINGMASTER_SPEC_ENUM_NAMES(FsdpUnits);
RINGMASTER_SPEC_ENUM_NAMES(PipelineSchedule);
RINGMASTER_SPEC_ENUM_NAMES(ActivationKind);
RINGMASTER_SPEC_ENUM_NAMES(DataKind);
RINGMASTER_SPEC_ENUM_NAMES(OptimizerKind);
RINGMASTER_SPEC_ENUM_NAMES(LrScheduleKind);
RINGMASTER_SPEC_ENUM_NAMES(BackendKind);
RINGMASTER_SPEC_ENUM_NAMES(DeviceKind);
RINGMASTER_SPEC_ENUM_NAMES(Precision);
#undef RINGMASTER_SPEC_ENUM_NAMES

// ---------------------------------------------------------------------------------------------
// Limits beyond which a value is rejected as absurd rather than attempted.

inline constexpr int kMaxNameLength = 64;
inline constexpr int64_t kMaxLayerWidth = int64_t{1} << 20;
inline constexpr int64_t kMaxLayerCount = 1024;             // entries of model.layers
inline constexpr int64_t kMaxParameters = 10'000'000'000;   // weights + biases of the MLP
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 20;  // model.vocab_size (gpt)
inline constexpr int64_t kMaxContext = int64_t{1} << 16;    // model.context (gpt)
inline constexpr int64_t kMaxHeads = 1024;                  // model.heads (gpt)
inline constexpr int64_t kMaxSteps = 1'000'000'000;         // train.steps, every_steps
inline constexpr int64_t kMaxBatchSize = int64_t{1} << 20;  // also grad_accum, micro_batches
inline constexpr int64_t kMaxSamples = 1'000'000'000;
inline constexpr int64_t kMaxRanksPerHost = 1024;
inline constexpr int64_t kMaxWorldSize = 65536;
inline constexpr int64_t kMaxVirtualStages = 1024;
inline constexpr double kMaxBucketCapMb = 65536;
inline constexpr double kMaxTimeoutSeconds = 86400;
inline constexpr int64_t kMaxRestarts = 1000;            // launch.max_restarts
inline constexpr double kMaxPeakTflops = 1e6;            // train.peak_tflops: an exaflop per rank
inline constexpr int64_t kMaxEnvVariables = 256;         // launch.env, launch.env_file's lines
inline constexpr int64_t kMaxEnvNameLength = 256;        // a variable's name
inline constexpr int64_t kMaxEnvValueBytes = 32 * 1024;  // a variable's value
inline constexpr int64_t kMaxSlurmNodes = 1024;          // launch.scheduler.nodes
inline constexpr int64_t kMaxSlurmGpusPerNode = 64;      // launch.scheduler.gpus_per_node
inline constexpr int64_t kMaxSlurmCpusPerTask = 1024;    // launch.scheduler.cpus_per_task
inline constexpr int64_t kMaxSlurmWordBytes = 256;       // a Slurm text value, an extra option
inline constexpr int64_t kMaxSlurmJobName = 64;          // launch.scheduler.job_name
inline constexpr int64_t kMaxExtraSbatch = 64;           // launch.scheduler.extra_sbatch's items

// ---------------------------------------------------------------------------------------------
// The spec. Fields marked "required" have no default: the parser insists on them, and the values
// here are placeholders. Only the options of the chosen data-parallel plan and of the mesh's
// tensor and pipeline dimensions where they are used are read and written; the others keep their
// defaults.

// The device mesh (strategy.mesh): dp x tp x pp ranks, the world size. Rank order is tp fastest,
// then dp, then pp, as Megatron-LM (spec/mesh_layout.h maps ranks to coordinates).
struct MeshSpec {
  int dp = 1;  // data-parallel replicas
  int tp = 1;  // tensor-parallel ranks inside each replica's stage
  int pp = 1;  // pipeline stages' ranks
  int size() const { return dp * tp * pp; }
  bool operator==(const MeshSpec&) const = default;
};

// Tensor parallelism's options (strategy.tp).
struct TensorParallelSpec {
  // Megatron-LM's sequence parallelism (Korthikanti et al. 2022): reduce-scatter and all-gather
  // instead of all-reduce; LayerNorm and dropout on sequence shards.
  bool sequence_parallel = false;
  bool operator==(const TensorParallelSpec&) const = default;
};

// strategy: the mesh and each dimension's plan (spec/strategies/plan.h). The default is one rank
// (1 x 1 x 1, ddp), which strategyLabel calls "single". The legacy flat form ({"kind": "ddp",
// ...}) is read into the same members (docs/spec.md).
struct StrategySpec {
  MeshSpec mesh;
  // strategy.dp.kind: the registered data-parallel plan over the mesh's dp dimension ("ddp",
  // "fsdp"); its options are `ddp` or `fsdp` below.
  std::string data_parallel = "ddp";
  DdpSpec ddp;
  FsdpSpec fsdp;
  TensorParallelSpec tp;
  PipelineSpec pipeline;
  bool operator==(const StrategySpec&) const = default;
};

// ModelSpec (the model section) is nn/model.h's: its kind is any registered model.

struct DataSpec {
  DataKind kind = DataKind::kSynthetic;
  // kSynthetic (all required but seed): features == model.layers.front(),
  // classes == model.layers.back().
  int64_t samples = 0;
  int64_t features = 0;
  int64_t classes = 0;
  uint64_t seed = 0;
  // kIdx (both required): IDX files as MNIST ships them.
  std::string images;
  std::string labels;
  // kTokens: llm.c token shards (data/token_shards.h); `train` (required) and `val` (optional:
  // empty means no validation set) are glob patterns, each matching files taken in sorted order.
  std::string train;
  std::string val;
  // kText (path required): a UTF-8 file read as bytes (tokens 0..255); its last `val_fraction`
  // is the validation set.
  std::string path;
  double val_fraction = 0.1;
  // Every kind.
  bool shuffle = true;
  bool drop_last = false;
  bool operator==(const DataSpec&) const = default;
};

// GradScaler's dynamic loss scale for train.precision fp16 (torch.cuda.amp.GradScaler's defaults):
// the loss is multiplied by the scale before the backward and the gradients divided by it before
// the optimizer; a step whose gradients hold an inf or NaN is skipped and the scale halved, and
// after growth_interval clean steps in a row the scale doubles.
struct LossScaleSpec {
  double init = 65536.0;  // 2^16
  int64_t growth_interval = 2000;
  bool operator==(const LossScaleSpec&) const = default;
};

struct TrainSpec {
  int64_t steps = 0;       // required: optimizer steps
  int64_t batch_size = 0;  // required: samples per rank per micro-step
  int grad_accum_steps = 1;
  int micro_batches = 1;  // pipeline only: must divide batch_size
  uint64_t seed = 0;      // shuffling and dropout
  // Evaluation on the validation set every eval_every steps and after the last (0: never), over
  // eval_batches batches of batch_size samples per rank. Needs a data kind with a validation set.
  int64_t eval_every = 0;
  int64_t eval_batches = 10;
  // Each model block's forward re-run in its backward, keeping only block inputs in between
  // (nn/layers.h: Sequential's activation checkpointing).
  bool activation_checkpointing = false;
  // Each rank's peak FLOP/s in TFLOP/s (1e12), over which the step event's MFU is taken; nullopt:
  // the device's known peak (train/throughput.h), or no MFU where none is known.
  std::optional<double> peak_tflops;
  // torch.autocast: matrix products in bf16 or fp16 (fp32 accumulation, fp32 master weights and
  // optimizer state; LayerNorm, softmax and the loss in fp32); fp16 adds loss scaling.
  Precision precision = Precision::kFp32;
  LossScaleSpec loss_scale;  // read for fp16 only
  bool operator==(const TrainSpec&) const = default;
};

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::kAdamW;
  double lr = 0;  // required
  // kSgd only.
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
  // kAdam / kAdamW only.
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  // Every kind. The parser fills defaultWeightDecay(kind) when the document has none.
  double weight_decay = 0;
  std::optional<double> clip_grad_norm;  // max global L2 norm; nullopt: no clipping
  // The learning rate of each step (optim/lr_schedule.h); lr is its peak.
  LrSchedule schedule;
  bool operator==(const OptimizerSpec&) const = default;
};

// PyTorch's default: 0.01 for AdamW, 0 otherwise.
double defaultWeightDecay(OptimizerKind kind);

struct LaunchHostSpec {
  std::string host = "localhost";
  int ranks = 1;                             // required in JSON: workers on this host
  std::optional<int> port;                   // SSH port; nullopt: ~/.ssh/config or 22
  std::optional<std::string> user;           // nullopt: ~/.ssh/config or the local user
  std::optional<std::string> identity_file;  // nullopt: ~/.ssh/config or the agent
  bool password_auth = false;  // SSH password authentication allowed (asked, never stored)
  // A bastion in front of this host ([user@]host[:port], OpenSSH's ProxyJump; issue 35), its key
  // verified as this host's is; nullopt: ~/.ssh/config's ProxyJump, or none.
  std::optional<std::string> proxy_jump;
  bool operator==(const LaunchHostSpec&) const = default;
};

// launch.scheduler {"kind": "slurm", ...} (issue 35, docs/slurm.md): the job is handed to Slurm
// with sbatch; one `ringmaster-node agent` per allocated node (srun), the world nodes x
// ranks_per_node. Every text value is validated as one word of its kind (no blank, quote, control
// character or leading '-'), so that it reaches sbatch as data, never as shell.
struct SlurmSpec {
  int nodes = 1;           // --nodes
  int ranks_per_node = 1;  // workers per node (srun starts one agent per node; it starts these)
  std::optional<int> gpus_per_node;  // --gpus-per-node
  std::optional<int> cpus_per_task;  // --cpus-per-task (the agent's task holds every rank's CPUs)
  std::optional<std::string> mem;    // --mem: "16G", "2000M", "0" (all of the node's)
  std::optional<std::string> partition, account, qos, constraint, reservation, job_name;
  std::optional<std::string> time;  // --time: Slurm's forms, "30", "1:30:00", "2-00:00:00"
  // Further sbatch options, each one "--name=value" word (or "--name"), never pasted into a
  // shell; the options Ringmaster sets itself (nodes, ntasks, output, ...) are refused.
  std::vector<std::string> extra_sbatch;
  // Where sbatch, squeue, sacct and scancel run: this machine (nullopt), or a login node reached
  // over SSH as a launch.hosts entry is (host keys verified; `proxy_jump` for a bastion).
  std::optional<LaunchHostSpec> submit_from;
  bool operator==(const SlurmSpec&) const = default;
};

struct LaunchSpec {
  // Empty under a scheduler (the parser leaves no hosts: the allocation's nodes are known only
  // when the job starts).
  std::vector<LaunchHostSpec> hosts = {LaunchHostSpec{}};
  // A scheduler instead of hosts (issue 35): the job is submitted to it; launch.hosts is refused
  // beside it, and the world size is slurm->nodes x slurm->ranks_per_node.
  std::optional<SlurmSpec> slurm;
  std::optional<std::string> node_binary;  // ringmaster-node on the hosts; nullopt: on the PATH
  int master_port = 0;                     // rank 0's store; 0 picks a free port
  double timeout_s = 300;                  // rendezvous and collective timeout
  // Variables added to every worker's environment on every host (checkEnvName's rules: not one
  // Ringmaster sets, not a secret-looking name), values as they are (no NUL).
  std::map<std::string, std::string> env;
  // NAME=VALUE lines read by each host's agent before it starts the workers, after `env`
  // (agent/env_file.h); absolute, or relative to the agent's working directory. Only the path is
  // in the spec: secrets go here.
  std::optional<std::string> env_file;
  // torchrun's --max-restarts: a failed worker stops every worker on every host, and all start
  // again (from the newest complete checkpoint when checkpoint.dir is set) up to this many times.
  int max_restarts = 0;
  bool operator==(const LaunchSpec&) const = default;
};

struct CheckpointSpec {
  std::string dir;          // required
  int64_t every_steps = 0;  // 0: only at the end
  // Continue from the newest step directory in `dir` when there is one: weights, optimizer state,
  // step count and the position in the data order.
  bool resume = false;
  // FSDP: besides each rank's shard, rank 0 writes the whole model in the unwrapped model's
  // state_dict naming (gathered from every rank), loadable as model.init_checkpoint.
  bool consolidate = false;
  bool operator==(const CheckpointSpec&) const = default;
};

struct TelemetrySpec {
  int64_t every_steps = 1;  // a step event every this many steps
  bool operator==(const TelemetrySpec&) const = default;
};

struct JobSpec {
  std::string name;  // required: [A-Za-z0-9._-]{1,64}
  std::string description;
  StrategySpec strategy;
  ModelSpec model;
  DataSpec data;
  TrainSpec train;
  OptimizerSpec optimizer;
  BackendKind backend = BackendKind::kAuto;
  DeviceKind device = DeviceKind::kAuto;
  LaunchSpec launch;
  std::optional<CheckpointSpec> checkpoint;  // nullopt: no checkpoints
  TelemetrySpec telemetry;
  // Set: a program job. Every rank runs the user's script instead of the engine's worker; only
  // name, description, strategy.kind (what the script does, for the history: default ddp, single
  // for one rank; read into the one-dimension mesh it names, as the legacy form is) and launch
  // are read with it, and the engine's sections are refused.
  std::optional<ProgramSpec> program;
  bool operator==(const JobSpec&) const = default;
};

// The sections only the engine's worker reads, refused in a program job.
inline constexpr std::array<std::string_view, 8> kEngineOnlySections = {
    "model", "data", "train", "optimizer", "backend", "device", "checkpoint", "telemetry"};

// ---------------------------------------------------------------------------------------------
// Worker environment names (launch.env, launch.env_file).

// Why `name` cannot be one of the variables a job adds to its workers' environment, or nullopt
// when it can: not a name ([A-Za-z_][A-Za-z0-9_]*, at most kMaxEnvNameLength), one of those
// Ringmaster sets for every worker (torchrun's MASTER_ADDR, RANK, ..., TORCHELASTIC_*, ROLE_*,
// RINGMASTER_*), or, unless `allow_secret` (an env_file's lines), a name that looks secret
// (TOKEN, KEY, PASSWORD, PASSWD, SECRET, CREDENTIAL, in any case).
std::optional<std::string> checkEnvName(std::string_view name, bool allow_secret);

// Why `value` cannot be a variable's value, or nullopt when it can: a NUL, or more than
// kMaxEnvValueBytes.
std::optional<std::string> checkEnvValue(std::string_view value);

// ---------------------------------------------------------------------------------------------
// Parsing.

struct SpecProblem {
  std::string path;     // "train.batch_size", "launch.hosts[1].ranks"; "" for the document
  std::string message;  // "expected a positive integer, got -3"
  bool operator==(const SpecProblem&) const = default;
};

struct SpecParseResult {
  std::optional<JobSpec> spec;  // set exactly when there are no problems
  std::vector<SpecProblem> problems;

  bool ok() const { return spec.has_value() && problems.empty(); }
  // One problem per line, "path: message" (just the message for the document itself).
  std::string describe() const;
};

// The bounds of a job spec, checked before a document is built from its text: a real spec is a
// few kilobytes and 4 levels deep (launch.hosts[0].host). A document beyond either is refused
// with one problem naming the bound, in time and memory linear in the bound.
constexpr size_t kMaxSpecBytes = size_t{1} << 20;
constexpr int kMaxSpecDepth = 32;

// Never throw on bad input (invalid JSON included: one problem at path "" with the parser's
// position); every problem of the document is reported at once. The text form also reports
// duplicate keys, which a parsed nlohmann::json can no longer show, and refuses a text beyond
// kMaxSpecBytes or kMaxSpecDepth; the document form refuses a document nested deeper than
// kMaxSpecDepth.
SpecParseResult parseJobSpec(std::string_view json_text);
SpecParseResult parseJobSpec(const nlohmann::json& document);
// Text overloads, so that a string is never taken for a JSON string value.
inline SpecParseResult parseJobSpec(const std::string& json_text) {
  return parseJobSpec(std::string_view(json_text));
}
inline SpecParseResult parseJobSpec(const char* json_text) {
  return parseJobSpec(std::string_view(json_text));
}

// The problem that keeps `json_text` (a spec or a value put into one) from being parsed at all:
// invalid JSON, more than kMaxSpecBytes, nested deeper than kMaxSpecDepth; nullopt otherwise.
std::optional<SpecProblem> checkSpecText(std::string_view json_text);

// The text of a spec file, read only when within kMaxSpecBytes (a FIFO or device is read up to
// it): Error kIo when it cannot be read, kSpec naming the file and the bound when it is larger.
std::string readJobSpecText(const std::string& path);

// Throws Error kIo when the file cannot be read and kSpec, with describe(), when it is invalid.
JobSpec loadJobSpecFile(const std::string& path);

// The canonical form: every default filled in, only the chosen kinds' options; keys sorted.
// parseJobSpec(toJson(spec)) gives back spec for any spec that parseJobSpec produced.
nlohmann::json toJson(const JobSpec& spec);
// A program job's section in its canonical form (what toJson(spec)["program"] holds).
nlohmann::json toJson(const ProgramSpec& program);

// The problems of a spec built or edited in code (parseJobSpec(toJson(spec)).problems).
std::vector<SpecProblem> validateJobSpec(const JobSpec& spec);

// The optimizer steps a run is expected to make: train.steps, or a program's program.steps (0:
// unknown).
int64_t expectedSteps(const JobSpec& spec);

// The ranks of the job: launch.scheduler's nodes × ranks_per_node under a scheduler, else the sum
// of launch.hosts[].ranks.
int worldSize(const JobSpec& spec);

// The nodes the job runs on, one agent each: launch.scheduler.nodes under a scheduler, else the
// entries of launch.hosts.
int nodeCount(const JobSpec& spec);
// The ranks node `node` (0 .. nodeCount - 1) runs: launch.scheduler.ranks_per_node, else
// launch.hosts[node].ranks.
int ranksOnNode(const JobSpec& spec, int node);
// The global rank of node `node`'s local rank 0: the ranks of the nodes before it.
int firstRankOnNode(const JobSpec& spec, int node);

// Pipeline stages: strategy.mesh.pp * strategy.pp.virtual_stages (1: no pipeline).
int stageCount(const JobSpec& spec);

// Ranks that split each batch's data between them: strategy.mesh.dp (a pipeline's stages and a
// tensor-parallel group all see the same samples). The one place that rule is applied.
int dataParallelSize(const JobSpec& spec);

// What the run's strategy is called in the hello event, the run history and the runs table:
// "single" (one rank, ddp), else the mesh's non-trivial parts joined by "+" in dp, tp, pp order:
// the data-parallel plan's name where mesh.dp > 1 or the plan is not ddp ("fsdp" on one rank),
// "tp" where mesh.tp > 1, "pipeline" where stageCount > 1 ("ddp", "fsdp+tp+pipeline").
std::string strategyLabel(const JobSpec& spec);
// Every label strategyLabel can give, for menus and filters: "single", the one-part labels, then
// the combinations.
std::vector<std::string> strategyLabels();
// Whether the job trains over the world communicator: every layout but "single".
bool needsWorldCommunicator(const JobSpec& spec);

// The legacy flat form's kinds (and a program job's strategy.kind): "single", each data-parallel
// plan's name, "pipeline".
std::vector<std::string_view> legacyStrategyKinds();
// Sets `out`'s mesh (and data-parallel plan) to what the legacy {"kind": kind} means over `world`
// ranks: "single" 1 x 1 x 1 with ddp, a data-parallel plan over dp, "pipeline" over pp. The data-
// parallel plans' options are kept; tp's, and pp's for a kind other than pipeline, reset (the
// legacy form has none). False (nothing set) for a name that is none of legacyStrategyKinds().
bool applyLegacyStrategyKind(std::string_view kind, int world, StrategySpec& out);

}  // namespace ringmaster
