// The pipeline's plan and rules: schedule, virtual stages and explicit partitions checked once for
// the parser and the runtime, the balanced split by parameter count, and the memory of a rank's
// stages with the micro-batches its schedule keeps in flight.
#include "spec/strategies/pipeline.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "spec/strategies/pipeline_schedule.h"
#include "spec/strategies/plan.h"

namespace ringmaster {

namespace {

constexpr double kBytes = 4;  // float32

// "1 stage", "2 stages".
std::string counted(int64_t n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

class PipelineParallelPlan final : public DimensionPlan {
 public:
  MeshDim dim() const override { return MeshDim::kPp; }
  std::string_view name() const override { return "pipeline"; }
  std::vector<std::string_view> optionKeys() const override {
    return {"schedule", "virtual_stages", "stages"};
  }
  void readOptions(OptionReader& reader, StrategySpec& out) const override {
    readChoice(reader, "schedule", out.pipeline.schedule);
    reader.integer("virtual_stages", out.pipeline.virtual_stages, 1, kMaxVirtualStages,
                   "a positive integer");
    reader.indexLists("stages", out.pipeline.stages, kMaxLayerCount);
  }
  void writeOptions(const StrategySpec& spec, nlohmann::json& block) const override {
    block["schedule"] = toString(spec.pipeline.schedule);
    block["virtual_stages"] = spec.pipeline.virtual_stages;
    if (!spec.pipeline.stages.empty()) block["stages"] = spec.pipeline.stages;
  }
  std::vector<SpecField> fields() const override {
    const PipelineSpec defaults;
    return {
        {.path = "strategy.pp.schedule",
         .section = "Strategy",
         .label = "Schedule",
         .type = FieldType::kChoice,
         .choices = optionChoices<PipelineSchedule>(),
         .default_value = std::string(toString(defaults.schedule))},
        {.path = "strategy.pp.virtual_stages",
         .section = "Strategy",
         .label = "Virtual stages",
         .type = FieldType::kInteger,
         .default_value = defaults.virtual_stages,
         .minimum = 1,
         .maximum = kMaxVirtualStages,
         .help = "model chunks per rank (interleaved_1f1b needs 2 or more)"},
        {.path = "strategy.pp.stages",
         .section = "Strategy",
         .label = "Stages",
         .type = FieldType::kIntegerListList,
         .default_value = nullptr,
         .minimum = 0,
         .maximum = kMaxLayerCount,
         .help =
             "the model's block indices of each stage (the MLP's blocks are its Linear layers), "
             "in model order; left out: balanced by parameter count"}};
  }

  // Runs for every spec: micro-batches are the pipeline's alone, and a pipeline of one stage
  // (strategy.mesh.pp 1, virtual_stages 1) is none, whose other options the parser drops.
  void check(const JobSpec& spec, StrategyCheck& check) const override {
    const PipelineSpec& pipeline = spec.strategy.pipeline;
    const auto report = [&](const std::optional<PipelineRuleProblem>& problem) {
      if (problem) check.report(problem->path, problem->message);
      return problem.has_value();
    };
    const bool virtual_ok = check.ok_at("strategy.pp.virtual_stages");
    if (check.ok_at("strategy.pp.schedule") && virtual_ok)
      report(virtualStagesProblem(pipeline.schedule, pipeline.virtual_stages));
    const bool mesh_ok = check.ok_at("strategy.mesh.pp");
    if (!(virtual_ok && mesh_ok && check.ok_at("train.micro_batches"))) return;
    const int ranks = spec.strategy.mesh.pp;
    const bool pipelined = stageCount(spec) > 1;
    if (!pipelined && spec.train.micro_batches != 1) {
      check.report("train.micro_batches",
                   fmt::format("must be 1 unless the model is split into pipeline stages "
                               "(strategy.mesh.pp > 1), got {}",
                               spec.train.micro_batches));
      return;
    }
    if (!pipelined) return;
    if (check.ok_at("train.batch_size") && spec.train.batch_size % spec.train.micro_batches != 0) {
      check.report("train.micro_batches",
                   fmt::format("must divide train.batch_size ({}), got {}", spec.train.batch_size,
                               spec.train.micro_batches));
    }
    if (check.ok_at("strategy.pp.schedule"))
      report(microBatchesProblem(pipeline.schedule, spec.train.micro_batches, ranks));
    if (!(check.ok_at("model.kind") && check.ok_at("model.layers"))) return;
    // Stages are cut between the blocks the model declares (nn/model.h): the MLP's Linear layers.
    if (!validateModel(spec.model).empty()) return;  // reported at the model's fields
    const int64_t stages = int64_t{ranks} * pipeline.virtual_stages;
    const auto linear = static_cast<int64_t>(describeModel(spec.model).blocks.size());
    const std::string origin =
        fmt::format("{} (strategy.mesh.pp) × virtual_stages {}", counted(ranks, "pipeline rank"),
                    pipeline.virtual_stages);
    if (report(stageCountProblem(stages, fmt::format("{} = {}", origin, stages), linear))) return;
    if (pipeline.stages.empty() || !check.ok_at("strategy.pp.stages")) return;
    report(partitionProblem(pipeline.stages, stages, origin, linear));
  }

  std::vector<MemoryPart> estimateMemory(const MemoryInputs& inputs, int r) const override {
    const int stages = inputs.world * std::max(inputs.spec.strategy.pipeline.virtual_stages, 1);
    const PipelinePosition at{.rank = r,
                              .ranks = inputs.world,
                              .starts = pipelineStageStarts(inputs.spec, inputs.layers, stages)};
    std::vector<MemoryPart> parts = pipelineStateMemory(inputs, at);
    for (MemoryPart& part : pipelineActivationMemory(inputs, at)) parts.push_back(std::move(part));
    return parts;
  }
};

// ---------------------------------------------------------------------------------------------
// A pipeline rank's memory (the plan's estimate, and each stage's under a mesh).

// One of a rank's model stages (a chunk), with the bytes a micro-batch of it holds.
struct ChunkBytes {
  size_t first = 0, end = 0;  // its blocks
  bool first_stage = false, last_stage = false;
  double activations = 0;    // kept from its F to its B (zb_h1: to its W)
  double deferred = 0;       // zb_h1: kept from its B to its W
  double loss_gradient = 0;  // the last stage: the loss's gradient, from its F to its B
  double input = 0, output_gradient = 0;  // its receive buffers (0 where nothing is received)
  double kept_input = 0;  // of `input`, what its activations count already (the same tensor)
};

// The model stages the rank at `at` runs, as [first, end) blocks, in order.
std::vector<std::pair<size_t, size_t>> rankChunks(const MemoryInputs& inputs,
                                                  const PipelinePosition& at) {
  const auto stages = static_cast<int>(at.starts.size());
  std::vector<std::pair<size_t, size_t>> chunks;
  for (int s = at.rank; s < stages; s += at.ranks) {
    const size_t end =
        s + 1 < stages ? at.starts[static_cast<size_t>(s) + 1] : inputs.layers.size();
    chunks.emplace_back(at.starts[static_cast<size_t>(s)], end);
  }
  return chunks;
}

std::vector<ChunkBytes> chunkBytes(const MemoryInputs& inputs, const PipelinePosition& at,
                                   int64_t micro) {
  const auto stages = static_cast<int>(at.starts.size());
  std::vector<ChunkBytes> chunks;
  int s = at.rank;
  for (const auto& [first, end] : rankChunks(inputs, at)) {
    ChunkBytes chunk{.first = first, .end = end};
    chunk.first_stage = s == 0;
    chunk.last_stage = s + 1 == stages;
    chunk.activations = inputs.activation_bytes(chunk.first, chunk.end, micro);
    if (inputs.spec.strategy.pipeline.schedule == PipelineSchedule::kZbH1)
      chunk.deferred = inputs.deferred_weight_bytes(chunk.first, chunk.end, micro);
    if (chunk.last_stage)
      chunk.loss_gradient =
          allocatedBytes(static_cast<double>(micro * inputs.output_elements) * kBytes);
    // parallel/pipeline.cpp: float32 between stages under every train.precision; a stage on the
    // same rank as its neighbour (one rank) receives nothing.
    if (at.ranks > 1 && s > 0)
      chunk.input =
          allocatedBytes(static_cast<double>(micro * inputs.input_elements[chunk.first]) * kBytes);
    if (inputs.keeps_input[chunk.first]) chunk.kept_input = chunk.input;
    if (at.ranks > 1 && s + 1 < stages)
      chunk.output_gradient =
          allocatedBytes(static_cast<double>(micro * inputs.input_elements[chunk.end]) * kBytes);
    chunks.push_back(chunk);
    s += at.ranks;
  }
  return chunks;
}

// What a rank holds at the most of its step, played through its schedule's actions
// (pipeline_schedule.h): each micro-batch's activations from its F to its B (zb_h1: its W), every
// receive (posted when the step starts and kept to its end: parallel/pipeline.cpp runStep) and
// the sends in transfer.
struct HeldAtPeak {
  int micro_batches = 0;  // whose activations are held then
  double activations = 0, deferred = 0, loss_gradients = 0, receives = 0, sends = 0;
  double total() const { return activations + deferred + loss_gradients + receives + sends; }
};

HeldAtPeak heldAtPeak(const JobSpec& spec, const PipelinePosition& at,
                      const std::vector<ChunkBytes>& chunks) {
  const int m = std::max(spec.train.micro_batches, 1);
  const PipelinePlan plan = makePipelinePlan(at.ranks, m, spec.strategy.pipeline.schedule,
                                             std::max(spec.strategy.pipeline.virtual_stages, 1));
  const bool zb = plan.schedule == PipelineSchedule::kZbH1;
  std::vector<int> forwards(chunks.size(), 0), backwards(chunks.size(), 0),
      weights(chunks.size(), 0);
  HeldAtPeak peak;
  auto measure = [&] {
    HeldAtPeak now;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const int held = forwards[c] - (zb ? weights[c] : backwards[c]);
      now.micro_batches += held;
      now.activations += held * chunks[c].activations;
      now.deferred += (backwards[c] - weights[c]) * chunks[c].deferred;
      now.loss_gradients += (forwards[c] - backwards[c]) * chunks[c].loss_gradient;
      now.receives +=
          m * (chunks[c].input + chunks[c].output_gradient) - held * chunks[c].kept_input;
      // Every receive is posted, so a send completes as soon as it is transferred: the latest of
      // each direction is in flight (an F's output, the size of the next stage's input; a B's
      // input gradient).
      now.sends += (forwards[c] > 0 ? chunks[c].output_gradient : 0) +
                   (backwards[c] > 0 ? chunks[c].input : 0);
    }
    if (now.total() > peak.total()) peak = now;
  };
  measure();
  for (const PipelineAction& action : plan.actions[static_cast<size_t>(at.rank)]) {
    const auto c = static_cast<size_t>(action.chunk);
    switch (action.phase) {
      case PipelinePhase::kForward:
        ++forwards[c];
        measure();
        break;
      case PipelinePhase::kBackward:
        measure();  // its activations are still held while it runs
        ++backwards[c];
        measure();  // and its input gradient is sent
        break;
      case PipelinePhase::kWeight:
        ++weights[c];
        break;
    }
  }
  return peak;
}

// The parts of the activations a rank's stages hold at the schedule's peak: what the micro-batches
// in flight keep, the buffers between stages, and what the last stage holds for the loss.
void appendHeldParts(const MemoryInputs& inputs, const PipelinePosition& at,
                     const std::vector<ChunkBytes>& chunks, int64_t micro,
                     std::vector<MemoryPart>& parts) {
  const int m = std::max(inputs.spec.train.micro_batches, 1);
  const HeldAtPeak held = heldAtPeak(inputs.spec, at, chunks);
  const bool zb = inputs.spec.strategy.pipeline.schedule == PipelineSchedule::kZbH1;
  parts.push_back(
      {"activations", held.activations,
       fmt::format("micro-batch {} × {} of the stage, for the {} the schedule holds "
                   "at its most{}",
                   micro, inputs.activation_text, counted(held.micro_batches, "micro-batch"),
                   zb ? " (zb_h1: from each F to its W)" : " (from each F to its B)")});
  if (held.deferred > 0) {
    parts.push_back({"deferred weight-gradient inputs", held.deferred,
                     "the output gradients each Linear keeps from a micro-batch's B to its W "
                     "(zb_h1)"});
  }
  if (held.loss_gradients > 0) {
    parts.push_back({"loss gradients", held.loss_gradients,
                     "4 B × the outputs of each micro-batch between its F (where the loss and its "
                     "gradient are computed) and its B"});
  }
  if (held.receives > 0) {
    parts.push_back({"receive buffers (transient)", held.receives,
                     fmt::format("4 B × {} micro-batch{} × the elements each stage receives (its "
                                 "input, its output's gradient): every receive is posted when the "
                                 "step starts and kept to its end (less the inputs the held "
                                 "activations count)",
                                 m, m == 1 ? "" : "es")});
  }
  if (held.sends > 0) {
    parts.push_back({"send buffers (transient)", held.sends,
                     "4 B × the latest send of each direction (an F's output, a B's input "
                     "gradient), in transfer"});
  }
}

}  // namespace

std::vector<size_t> pipelineStageStarts(const JobSpec& spec, const std::vector<int64_t>& weights,
                                        int stages) {
  const std::vector<std::vector<int>>& explicit_stages = spec.strategy.pipeline.stages;
  if (explicit_stages.size() != static_cast<size_t>(stages)) return balancedSplit(weights, stages);
  std::vector<size_t> starts;
  for (const std::vector<int>& stage : explicit_stages)
    starts.push_back(stage.empty() ? 0 : static_cast<size_t>(stage.front()));
  return starts;
}

std::vector<MemoryInputs::ParameterTensor> pipelineRankTensors(const MemoryInputs& inputs,
                                                               const PipelinePosition& at) {
  const std::vector<std::pair<size_t, size_t>> chunks = rankChunks(inputs, at);
  auto on_rank = [&](size_t block) {
    const auto stage =
        std::upper_bound(at.starts.begin(), at.starts.end(), block) - at.starts.begin() - 1;
    return static_cast<int>(stage) % at.ranks == at.rank;
  };
  std::vector<MemoryInputs::ParameterTensor> tensors;
  for (const MemoryInputs::ParameterTensor& tensor : inputs.parameter_tensors)
    if (on_rank(tensor.block)) tensors.push_back(tensor);
  // Tied parameters read on this rank and held on another (the GPT's wte on the last stage): a
  // copy, with its gradient and optimizer state, counted with the block that reads it.
  for (const MemoryInputs::TiedCopy& tied : inputs.tied) {
    if (on_rank(tied.reader) && !on_rank(tied.owner))
      tensors.push_back({.block = tied.reader, .elements = tied.parameters, .tied_copy = true});
  }
  return tensors;
}

std::vector<MemoryPart> pipelineStateMemory(const MemoryInputs& inputs,
                                            const PipelinePosition& at) {
  double own = 0, copies = 0, tensors = 0;  // elements, of them tied copies; allocated bytes
  for (const MemoryInputs::ParameterTensor& tensor : pipelineRankTensors(inputs, at)) {
    own += static_cast<double>(tensor.elements);
    if (tensor.tied_copy) copies += static_cast<double>(tensor.elements);
    tensors += allocatedBytes(static_cast<double>(tensor.elements) * kBytes);
  }
  const bool several = at.starts.size() > static_cast<size_t>(at.ranks);
  return {
      {"parameters", tensors,
       fmt::format("4 B × the {:.0f} parameters of this rank's stage{}{}", own, several ? "s" : "",
                   copies > 0
                       ? fmt::format(" (with a {:.0f}-parameter copy of a tied weight)", copies)
                       : "")},
      {"gradients", tensors, "4 B × the stage's parameters"},
      {"optimizer state", tensors * inputs.moments,
       fmt::format("4 B × {} × the stage's parameters ({})", inputs.moments, inputs.moment_text)}};
}

std::vector<MemoryPart> pipelineActivationMemory(const MemoryInputs& inputs,
                                                 const PipelinePosition& at) {
  const JobSpec& spec = inputs.spec;
  const int m = std::max(spec.train.micro_batches, 1);
  const int64_t micro = spec.train.batch_size / m;
  const std::vector<ChunkBytes> chunks = chunkBytes(inputs, at, micro);
  double backward = 0;   // one block at a time, whichever of this rank's stages runs
  double recompute = 0;  // likewise
  for (const ChunkBytes& chunk : chunks) {
    backward = std::max(backward, inputs.backward_bytes(chunk.first, chunk.end, micro));
    recompute = std::max(recompute, inputs.recompute_bytes(chunk.first, chunk.end, micro));
  }
  std::vector<MemoryPart> parts;
  appendHeldParts(inputs, at, chunks, micro, parts);
  if (chunks.back().last_stage) {
    // The loss's logits and probabilities for the micro-batch in its F (its gradient is held
    // above, per micro-batch).
    const double tensor = allocatedBytes(static_cast<double>(micro * inputs.output_elements) * 4);
    parts.push_back({"loss buffers (transient)", 2 * tensor,
                     fmt::format("2 × 4 B × micro-batch {} × {} outputs: the logits and their "
                                 "softmax",
                                 micro, inputs.output_elements)});
  }
  if (chunks.back().last_stage && !chunks.front().first_stage) {
    // parallel/pipeline.cpp: the last stage reads the whole micro-batch for its labels during its
    // F (the first stage's is its input, counted in its activations).
    const double samples =
        allocatedBytes(static_cast<double>(micro * inputs.input_elements.front()) * 4) +
        allocatedBytes(static_cast<double>(micro * inputs.target_elements) * 4);
    parts.push_back({"micro-batch read for its labels (transient)", samples,
                     fmt::format("4 B × micro-batch {} × ({} inputs + {} labels) a sample", micro,
                                 inputs.input_elements.front(), inputs.target_elements)});
  }
  parts.push_back({"backward working set (transient)", backward,
                   fmt::format("micro-batch {} × the most one block's backward holds beyond what "
                               "it kept",
                               micro)});
  if (spec.train.activation_checkpointing) {
    parts.push_back({"recomputed block (transient)", recompute,
                     fmt::format("micro-batch {} × the largest block's activations beyond its "
                                 "input, re-run in its backward",
                                 micro)});
  }
  return parts;
}

std::optional<PipelineRuleProblem> virtualStagesProblem(PipelineSchedule schedule,
                                                        int virtual_stages) {
  const bool interleaved = schedule == PipelineSchedule::kInterleaved1f1b;
  if (interleaved && virtual_stages < 2) {
    return PipelineRuleProblem{
        "strategy.pp.virtual_stages",
        fmt::format("interleaved_1f1b needs at least 2 virtual stages per rank, got {}",
                    virtual_stages)};
  }
  if (!interleaved && virtual_stages != 1) {
    return PipelineRuleProblem{
        "strategy.pp.virtual_stages",
        fmt::format("must be 1 unless the schedule is interleaved_1f1b, got {}", virtual_stages)};
  }
  return std::nullopt;
}

std::optional<PipelineRuleProblem> microBatchesProblem(PipelineSchedule schedule, int micro_batches,
                                                       int ranks) {
  if (schedule != PipelineSchedule::kInterleaved1f1b || ranks < 1 || micro_batches % ranks == 0)
    return std::nullopt;
  return PipelineRuleProblem{
      "train.micro_batches",
      fmt::format("interleaved_1f1b needs a multiple of the {} pipeline ranks, got {}", ranks,
                  micro_batches)};
}

std::optional<PipelineRuleProblem> stageCountProblem(int64_t stages, std::string_view count_text,
                                                     int64_t linear_layers) {
  if (stages <= linear_layers) return std::nullopt;
  return PipelineRuleProblem{"strategy.mesh.pp",
                             fmt::format("{} pipeline stages, but model.layers has only {} Linear "
                                         "layers (each stage needs one)",
                                         count_text, linear_layers)};
}

std::optional<PipelineRuleProblem> partitionProblem(const std::vector<std::vector<int>>& partition,
                                                    int64_t stages, std::string_view stages_origin,
                                                    int64_t linear_layers) {
  if (static_cast<int64_t>(partition.size()) != stages) {
    return PipelineRuleProblem{"strategy.pp.stages",
                               fmt::format("expected {} ({}), got {}", counted(stages, "stage"),
                                           stages_origin, partition.size())};
  }
  const std::string rule =
      fmt::format("stages must list layers 0..{} in order, each once", linear_layers - 1);
  int64_t next = 0;
  for (size_t s = 0; s < partition.size(); ++s) {
    for (size_t i = 0; i < partition[s].size(); ++i) {
      if (partition[s][i] != next) {
        return PipelineRuleProblem{
            fmt::format("strategy.pp.stages[{}][{}]", s, i),
            fmt::format("expected layer {} ({}), got {}", next, rule, partition[s][i])};
      }
      ++next;
    }
  }
  if (next < linear_layers) {
    const std::string missing = next + 1 == linear_layers
                                    ? fmt::format("layer {} is", next)
                                    : fmt::format("layers {}..{} are", next, linear_layers - 1);
    return PipelineRuleProblem{"strategy.pp.stages",
                               fmt::format("{} in no stage ({})", missing, rule)};
  }
  return std::nullopt;
}

std::vector<size_t> balancedSplit(const std::vector<int64_t>& weights, int parts) {
  const size_t n = weights.size();
  std::vector<int64_t> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[i];
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  // best[k][i]: the smallest largest-run sum splitting the first i weights into k runs.
  std::vector<std::vector<int64_t>> best(parts + 1, std::vector<int64_t>(n + 1, kInf));
  std::vector<std::vector<size_t>> cut(parts + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= parts; ++k) {
    for (size_t i = k; i <= n; ++i) {
      for (size_t j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == kInf) continue;
        const int64_t cost = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (cost < best[k][i]) {
          best[k][i] = cost;
          cut[k][i] = j;
        }
      }
    }
  }
  std::vector<size_t> starts(parts);
  size_t i = n;
  for (int k = parts; k >= 1; --k) {
    starts[k - 1] = cut[k][i];
    i = cut[k][i];
  }
  return starts;
}

const DimensionPlan& pipelineParallelPlan() {
  static const PipelineParallelPlan plan;
  return plan;
}

}  // namespace ringmaster
