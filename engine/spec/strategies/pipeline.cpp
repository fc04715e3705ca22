// The pipeline's plan and rules: schedule, virtual stages and explicit partitions checked once for
// the parser and the runtime, the balanced split by parameter count, and the memory of a rank's
// stages with the micro-batches its schedule keeps in flight.
#include "spec/strategies/pipeline.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "spec/strategies/plan.h"

namespace ringmaster {

namespace {

constexpr double kBytes = 4;  // float32

// "1 stage", "2 stages".
std::string counted(int64_t n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

class PipelineStrategyPlan final : public StrategyPlan {
 public:
  StrategyKind kind() const override { return StrategyKind::kPipeline; }
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
        {.path = "strategy.schedule",
         .section = "Strategy",
         .label = "Schedule",
         .type = FieldType::kChoice,
         .choices = optionChoices<PipelineSchedule>(),
         .default_value = std::string(toString(defaults.schedule))},
        {.path = "strategy.virtual_stages",
         .section = "Strategy",
         .label = "Virtual stages",
         .type = FieldType::kInteger,
         .default_value = defaults.virtual_stages,
         .minimum = 1,
         .maximum = kMaxVirtualStages,
         .help = "model chunks per rank (interleaved_1f1b needs 2 or more)"},
        {.path = "strategy.stages",
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
  bool ranksShareSamples() const override { return true; }
  bool takesMicroBatches() const override { return true; }

  void check(const JobSpec& spec, StrategyCheck& check) const override {
    const PipelineSpec& pipeline = spec.strategy.pipeline;
    const auto report = [&](const std::optional<PipelineRuleProblem>& problem) {
      if (problem) check.report(problem->path, problem->message);
      return problem.has_value();
    };
    const bool virtual_ok = check.ok_at("strategy.virtual_stages");
    if (check.ok_at("strategy.schedule") && virtual_ok)
      report(virtualStagesProblem(pipeline.schedule, pipeline.virtual_stages));
    if (check.ok_at("train.micro_batches") && check.ok_at("train.batch_size") &&
        spec.train.batch_size % spec.train.micro_batches != 0) {
      check.report("train.micro_batches",
                   fmt::format("must divide train.batch_size ({}), got {}", spec.train.batch_size,
                               spec.train.micro_batches));
    }
    if (!(virtual_ok && check.ok_at("model.kind") && check.ok_at("model.layers") &&
          check.world_size))
      return;
    // Stages are cut between the blocks the model declares (nn/model.h): the MLP's Linear layers.
    if (!validateModel(spec.model).empty()) return;  // reported at the model's fields
    const int world = *check.world_size;
    const int64_t stages = int64_t{world} * pipeline.virtual_stages;
    const auto linear = static_cast<int64_t>(describeModel(spec.model).blocks.size());
    const std::string origin =
        fmt::format("world size {} × virtual_stages {}", world, pipeline.virtual_stages);
    if (report(stageCountProblem(stages, fmt::format("{} = {}", origin, stages), linear))) return;
    if (pipeline.stages.empty() || !check.ok_at("strategy.stages")) return;
    report(partitionProblem(pipeline.stages, stages, origin, linear));
  }

  std::vector<MemoryPart> estimateMemory(const MemoryInputs& inputs, int r) const override {
    const JobSpec& spec = inputs.spec;
    const int world = inputs.world;
    const int v = std::max(spec.strategy.pipeline.virtual_stages, 1);
    const std::vector<int64_t>& layers = inputs.layers;
    const std::vector<size_t> starts = balancedSplit(layers, world * v);
    double own = 0;
    double acts = 0;
    double recompute = 0;  // one block at a time, whichever of this rank's stages runs
    double received = 0;   // the step's receive buffers
    const int m = std::max(spec.train.micro_batches, 1);
    const int64_t micro = spec.train.batch_size / m;
    // Micro-batches whose activations a stage holds at once: all of them for GPipe, up to the
    // number of stages after it (warm-up depth) for the 1F1B family.
    const int in_flight =
        spec.strategy.pipeline.schedule == PipelineSchedule::kGpipe ? m : std::min(m, world - r);
    for (int s = r; s < world * v; s += world) {
      const size_t first = starts[static_cast<size_t>(s)];
      const size_t end = static_cast<size_t>(s) + 1 < starts.size()
                             ? starts[static_cast<size_t>(s) + 1]
                             : layers.size();
      for (size_t l = first; l < end; ++l) own += static_cast<double>(layers[l]);
      acts += inputs.activation_bytes(first, end, micro) * in_flight;
      recompute = std::max(recompute, inputs.recompute_bytes(first, end, micro));
      // parallel/pipeline.cpp posts every receive of the step before its first action: for each
      // micro-batch, the stage's input from the stage before and its output's gradient from the
      // stage after (float32 under every train.precision), when those stages are on other ranks.
      if (world > 1 && s > 0)
        received += static_cast<double>(m * micro * inputs.input_elements[first]) * kBytes;
      if (world > 1 && s + 1 < world * v)
        received += static_cast<double>(m * micro * inputs.input_elements[end]) * kBytes;
    }
    // Tied parameters read on this rank and held on another (the GPT's wte on the last stage):
    // a copy, with its gradient and optimizer state.
    auto rank_of_block = [&](size_t block) {
      const auto stage = std::upper_bound(starts.begin(), starts.end(), block) - starts.begin() - 1;
      return static_cast<int>(stage) % world;
    };
    double copies = 0;
    for (const MemoryInputs::TiedCopy& tied : inputs.tied) {
      if (rank_of_block(tied.reader) == r && rank_of_block(tied.owner) != r)
        copies += static_cast<double>(tied.parameters);
    }
    own += copies;
    std::vector<MemoryPart> parts = {
        {"parameters", own * kBytes,
         fmt::format("4 B × the {:.0f} parameters of this rank's stage{}{}", own, v > 1 ? "s" : "",
                     copies > 0
                         ? fmt::format(" (with a {:.0f}-parameter copy of a tied weight)", copies)
                         : "")},
        {"gradients", own * kBytes, "4 B × the stage's parameters"},
        {"optimizer state", own * kBytes * inputs.moments,
         fmt::format("4 B × {} × the stage's parameters ({})", inputs.moments, inputs.moment_text)},
        {"activations", acts,
         fmt::format("micro-batch {} × {} of the stage × {} micro-batch{} in flight", micro,
                     inputs.activation_text, in_flight, in_flight == 1 ? "" : "es")}};
    if (received > 0) {
      parts.push_back({"receive buffers (transient)", received,
                       fmt::format("4 B × {} micro-batch{} × {} samples × the elements each stage "
                                   "receives (its input, its output's gradient), every receive "
                                   "posted when the step starts",
                                   m, m == 1 ? "" : "es", micro)});
    }
    if (spec.train.activation_checkpointing) {
      parts.push_back({"recomputed block (transient)", recompute,
                       fmt::format("micro-batch {} × the largest block's activations beyond its "
                                   "input, re-run in its backward",
                                   micro)});
    }
    return parts;
  }
};

}  // namespace

std::optional<PipelineRuleProblem> virtualStagesProblem(PipelineSchedule schedule,
                                                        int virtual_stages) {
  const bool interleaved = schedule == PipelineSchedule::kInterleaved1f1b;
  if (interleaved && virtual_stages < 2) {
    return PipelineRuleProblem{
        "strategy.virtual_stages",
        fmt::format("interleaved_1f1b needs at least 2 virtual stages per rank, got {}",
                    virtual_stages)};
  }
  if (!interleaved && virtual_stages != 1) {
    return PipelineRuleProblem{
        "strategy.virtual_stages",
        fmt::format("must be 1 unless strategy.schedule is interleaved_1f1b, got {}",
                    virtual_stages)};
  }
  return std::nullopt;
}

std::optional<PipelineRuleProblem> stageCountProblem(int64_t stages, std::string_view count_text,
                                                     int64_t linear_layers) {
  if (stages <= linear_layers) return std::nullopt;
  return PipelineRuleProblem{
      "strategy", fmt::format("{} pipeline stages, but model.layers has only {} Linear layers "
                              "(each stage needs one)",
                              count_text, linear_layers)};
}

std::optional<PipelineRuleProblem> partitionProblem(const std::vector<std::vector<int>>& partition,
                                                    int64_t stages, std::string_view stages_origin,
                                                    int64_t linear_layers) {
  if (static_cast<int64_t>(partition.size()) != stages) {
    return PipelineRuleProblem{"strategy.stages",
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
            fmt::format("strategy.stages[{}][{}]", s, i),
            fmt::format("expected layer {} ({}), got {}", next, rule, partition[s][i])};
      }
      ++next;
    }
  }
  if (next < linear_layers) {
    const std::string missing = next + 1 == linear_layers
                                    ? fmt::format("layer {} is", next)
                                    : fmt::format("layers {}..{} are", next, linear_layers - 1);
    return PipelineRuleProblem{"strategy.stages",
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

const StrategyPlan& pipelinePlan() {
  static const PipelineStrategyPlan plan;
  return plan;
}

}  // namespace ringmaster
