// Each dimension of the device mesh as the job spec, the CLI and the window know it before anything
// runs: its name, the spec options it owns, the spec checks that involve them, and the memory a
// rank needs under it. Light: no communicator, no tensors, so every front end links it. The
// running half is in engine/parallel/ (parallel/strategy.h). Every plan is listed once, in
// strategies/table.cpp.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spec/job_spec.h"
#include "spec/memory_estimate.h"
#include "spec/mesh_layout.h"
#include "spec/spec_fields.h"

namespace ringmaster {

// What a plan's spec check may ask of the parser: whether a path was read without problems
// (so a cross-field check can trust it), the world size when launch.hosts is valid, and where to
// report.
struct StrategyCheck {
  std::function<bool(std::string_view path)> ok_at;
  std::optional<int> world_size;
  std::function<void(std::string path, std::string message)> report;
};

// The inputs of a rank's memory estimate under every strategy (memory_estimate.cpp fills them
// from the spec's model and optimizer).
struct MemoryInputs {
  const JobSpec& spec;
  int world = 1;
  std::vector<int64_t> layers;  // parameters per block (a Linear layer with what follows it)
  int64_t parameters = 0;       // Ψ: their sum
  // A tied parameter (nn/model.h ModelBlock::tied_parameters) that block `reader` reads and block
  // `owner` holds: a pipeline rank with the reader's stage but not the owner's keeps a copy.
  struct TiedCopy {
    size_t reader = 0, owner = 0;
    int64_t parameters = 0;
  };
  std::vector<TiedCopy> tied;
  // Elements of each block's input per sample (what a pipeline stage starting at the block
  // receives, and the stage before it sends; float32 between stages under every precision).
  std::vector<int64_t> input_elements;
  double moments = 0;       // optimizer state per parameter, in parameter copies
  std::string moment_text;  // "2 Adam moments"
  // Bytes of the activations that blocks [first, end) keep for backward for `batch` samples;
  // under train.activation_checkpointing, their inputs only.
  std::function<double(size_t first, size_t end, int64_t batch)> activation_bytes;
  // What activation_bytes counts, for the formulas: "the activations every block keeps for
  // backward" or "the blocks' inputs (activation checkpointing)".
  std::string activation_text;
  // Under activation checkpointing: the most that one block of [first, end) adds while its
  // forward is re-run in its backward (its kept activations beyond its input); 0 without it.
  std::function<double(size_t first, size_t end, int64_t batch)> recompute_bytes;
  // Each parameter tensor's elements and the block holding it, in the model's order: the
  // allocator gives each tensor its own block, and so each gradient and optimizer moment.
  struct ParameterTensor {
    size_t block = 0;
    int64_t elements = 0;
    bool tied_copy = false;  // a pipeline rank's copy of a tied parameter another rank holds
  };
  std::vector<ParameterTensor> parameter_tensors;
  // What the backward of one block of [first, end) holds at once beyond its kept activations, at
  // the most of any (nn/model.h ModelBlock::backward_bytes_per_sample), for `batch` samples.
  std::function<double(size_t first, size_t end, int64_t batch)> backward_bytes;
  // zb_h1: what blocks [first, end) keep between a micro-batch's B and its W, for `batch`
  // samples (ModelBlock::deferred_weight_bytes_per_sample).
  std::function<double(size_t first, size_t end, int64_t batch)> deferred_weight_bytes;
  int64_t output_elements = 0;  // the model's output per sample: what the loss reads (logits)
  int64_t target_elements = 0;  // the labels per sample: one per row of the output
  // Per block: whether the activations it keeps include its input tensor itself
  // (ModelBlock::keeps_input, or a checkpointed block's kept input).
  std::vector<bool> keeps_input;
};

// The model's side of the estimate, from what the model declares (nn/model.h) as one
// tensor-parallel rank of strategy.mesh holds it: parameters and activation bytes per block, and
// the optimizer's state per parameter (defined in memory_estimate.cpp).
MemoryInputs modelMemoryInputs(const JobSpec& spec);

// The bytes the caching allocator hands out for a request of `bytes` (tensor/allocator.h
// CachingAllocator::roundSize): every tensor of the estimate is rounded so.
double allocatedBytes(double bytes);
// The allocated bytes of the parameter tensors of blocks [first, end), at `element_bytes` each
// (4: the float32 values, their gradients, each optimizer moment).
double parameterTensorBytes(const MemoryInputs& inputs, size_t first, size_t end,
                            double element_bytes);

// The transient parts of a training step's backward for the blocks [first, end) at `batch`
// samples, which every plan adds after its persistent ones (memory_estimate.cpp): the loss's
// buffers where the rank computes the loss (`computes_loss`), the largest block's backward
// working set, and under activation checkpointing the recomputed block. Under checkpointing,
// where only the blocks' inputs stay, these are one phase of the backward at a time: the loss's
// buffers with the last block's backward and re-run, or one other block's backward and re-run,
// whichever holds more; the parts are that phase's.
void appendBackwardParts(const MemoryInputs& inputs, size_t first, size_t end, int64_t batch,
                         bool computes_loss, std::vector<MemoryPart>& parts);

// How a plan reads its options from its block of the document (strategy.dp, or the legacy form's
// strategy block). Each call does nothing when the option is absent, and reports a bad value at
// "<block>.<key>" (leaving `out` as it was).
class OptionReader {
 public:
  virtual ~OptionReader() = default;
  // true or false.
  virtual void boolean(std::string_view key, bool& out) = 0;
  // A finite number in (0, max].
  virtual void positive(std::string_view key, double& out, double max) = 0;
  // An integer in [min, max]; `expected` names the lower bound ("a positive integer").
  virtual void integer(std::string_view key, int& out, int64_t min, int64_t max,
                       std::string_view expected) = 0;
  // One of `names`: the name read, or nullopt (absent or reported).
  virtual std::optional<std::string> choice(std::string_view key,
                                            const std::vector<std::string_view>& names) = 0;
  // A non-empty array of non-empty arrays of indices in [0, max] (a pipeline's stages).
  virtual void indexLists(std::string_view key, std::vector<std::vector<int>>& out,
                          int64_t max) = 0;
};

// A choice option into its kind (fromString<E> / enumNames<E> of spec/job_spec.h).
template <typename E>
void readChoice(OptionReader& reader, std::string_view key, E& out) {
  if (std::optional<std::string> name = reader.choice(key, enumNames<E>()))
    out = *fromString<E>(*name);
}

// One dimension of the device mesh as a plan: the data-parallel plans ("ddp", "fsdp", registered
// by name as model.kind is: strategy.dp.kind), the tensor-parallel plan and the pipeline plan.
// Each owns its options (the keys of its block, strategy.dp / strategy.tp / strategy.pp), its
// form fields and its checks; they compose over the mesh (spec/mesh_layout.h).
class DimensionPlan {
 public:
  virtual ~DimensionPlan() = default;

  virtual MeshDim dim() const = 0;
  // A data-parallel plan's strategy.dp.kind ("ddp"); "tp" and "pipeline" for the others: its part
  // of strategyLabel.
  virtual std::string_view name() const = 0;
  // The keys of its block that it reads (strategy.dp's beside "kind"); for a data-parallel plan,
  // also the legacy flat form's options beside strategy.kind.
  virtual std::vector<std::string_view> optionKeys() const { return {}; }
  // Reads its options from its block into `out`'s own member (called for the chosen data-parallel
  // plan, and for every one while strategy.dp.kind is unknown, so that every value is checked).
  virtual void readOptions(OptionReader& reader, StrategySpec& out) const {}
  // Writes the options it reads into `block` (its canonical block: every option with its default
  // filled in).
  virtual void writeOptions(const StrategySpec& spec, nlohmann::json& block) const {}
  // The description of its options (spec/spec_fields.h), in form order, at their canonical paths
  // ("strategy.dp.bucket_cap_mb"); specFields() lists them after the mesh.
  virtual std::vector<SpecField> fields() const { return {}; }
  // The spec checks involving its options and the rest of the spec, run once every block has been
  // read, where the plan is used (the chosen data-parallel plan; tp's and pp's always, which say
  // what their options need of a dimension of 1). Paths are canonical ("strategy.pp.stages");
  // the parser reports them at the legacy form's own where the document has that form.
  virtual void check(const JobSpec& spec, StrategyCheck& check) const {}
  // Rank `rank`'s memory when this plan's dimension is the mesh's only non-trivial one (a
  // data-parallel plan: dp = world; the pipeline: pp = world). Mixed meshes: meshMemory.
  virtual std::vector<MemoryPart> estimateMemory(const MemoryInputs& inputs, int rank) const = 0;
};

// The data-parallel plans, in table order (strategies/table.cpp): "ddp", "fsdp".
std::span<const DimensionPlan* const> dataParallelPlans();
// Their names, for strategy.dp.kind's choices.
std::vector<std::string_view> dataParallelPlanNames();
// The data-parallel plan called `name`, or nullptr.
const DimensionPlan* findDataParallelPlan(std::string_view name);
const DimensionPlan& tensorParallelPlan();
const DimensionPlan& pipelineParallelPlan();
// Every plan: the data-parallel ones, then tp's, then pp's.
std::vector<const DimensionPlan*> dimensionPlans();

// The plan of the one non-trivial dimension of the spec's mesh (strategyLabel's one part: the
// data-parallel plan, or the pipeline), or nullptr for "single" and for a mixed layout.
const DimensionPlan* soleDimensionPlan(const JobSpec& spec);

// One rank and the whole model (strategyLabel "single"): one gradient per parameter tensor
// (defined in ddp.cpp).
std::vector<MemoryPart> singleMemory(const MemoryInputs& inputs);

// The spellings of an option's kinds, for SpecField::choices.
template <typename E>
std::vector<std::string> optionChoices() {
  std::vector<std::string> names;
  for (std::string_view name : enumNames<E>()) names.emplace_back(name);
  return names;
}

// strategy.dp.reduce_dtype / param_dtype: a precision option, left out = nullopt (the parameters'
// fp32). Shared by the data-parallel plans (ddp.cpp, fsdp.cpp), which list the same key.
void readPrecisionOption(OptionReader& reader, std::string_view key, std::optional<Precision>& out);
void writePrecisionOption(std::string_view key, const std::optional<Precision>& value,
                          nlohmann::json& block);
// Under pipeline stages (pp x virtual_stages > 1) the stage's gradients are averaged over dp in
// float32 after the schedule (parallel/replica_gradients.h): a 16-bit `option`
// (strategy.dp.reduce_dtype, param_dtype) there is refused rather than ignored.
void checkPrecisionOptionWithoutStages(const JobSpec& spec, std::string_view option,
                                       const std::optional<Precision>& value, StrategyCheck& check);
// The form field of such an option: a choice of fp32 / bf16 / fp16, empty meaning fp32.
SpecField precisionOptionField(std::string path, std::string label, std::string help);

// Single and DDP: every rank holds the whole model, its `gradients` (one tensor per parameter, or
// DDP's buckets) and its optimizer state, and trains on the whole batch (defined in ddp.cpp).
std::vector<MemoryPart> replicatedMemory(const MemoryInputs& inputs, MemoryPart gradients);

// A rank's place in a pipeline: its position among the pipeline's `ranks` and the first block of
// each of the ranks × virtual_stages model stages (stage s runs on position s % ranks).
struct PipelinePosition {
  int rank = 0;
  int ranks = 1;
  std::vector<size_t> starts;
};
// The model stages' first blocks: strategy.pipeline.stages where it lists `stages` of them, else
// the balanced split of the blocks' parameter counts `weights` (pipeline.h balancedSplit), as
// parallel/pipeline.cpp partitions the model.
std::vector<size_t> pipelineStageStarts(const JobSpec& spec, const std::vector<int64_t>& weights,
                                        int stages);
// The parameter tensors a pipeline rank holds: its stages' and a copy of each tied parameter its
// stages read but another rank's stage holds (counted with the block that reads it).
std::vector<MemoryInputs::ParameterTensor> pipelineRankTensors(const MemoryInputs& inputs,
                                                               const PipelinePosition& at);
// A pipeline rank's parameters, gradients (one per tensor) and optimizer state.
std::vector<MemoryPart> pipelineStateMemory(const MemoryInputs& inputs, const PipelinePosition& at);
// The rest of a pipeline rank's memory, played through its schedule: the activations of the
// micro-batches it holds at its peak, the buffers between stages, the loss's buffers on the last
// stage and the backward's transients (the pipeline plan's estimate is both; the mesh's stages
// take this one with their data-parallel plan's state).
std::vector<MemoryPart> pipelineActivationMemory(const MemoryInputs& inputs,
                                                 const PipelinePosition& at);

// Rank `rank`'s memory on the device mesh (strategy.mesh: dp x tp x pp), composed from its
// dimensions' plans: the model as one tensor-parallel rank holds it (`inputs` describe that share),
// the pipeline stage at the rank's pp coordinate with the micro-batches its schedule holds, and
// the data-parallel plan (strategy.dp.kind) over its dp group. A one-dimension layout gets that
// dimension's plan (defined in mesh_memory.cpp).
std::vector<MemoryPart> meshMemory(const MemoryInputs& inputs, int rank);

}  // namespace ringmaster
