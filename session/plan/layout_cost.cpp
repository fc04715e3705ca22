// The cost model of layout_cost.h: each term from the layout's spec (the model's description, the
// plans' partition and schedule) and the measurements; the formulas are in docs/sweeps.md ("The
// layout advisor").
#include "plan/layout_cost.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/number_format.h"
#include "spec/strategies/pipeline_schedule.h"
#include "spec/strategies/plan.h"
#include "train/throughput.h"

namespace ringmaster::plan {
namespace {

constexpr double kFloatBytes = 4;  // gradients, gathered parameters and activations between ranks
constexpr double kMiB = 1024.0 * 1024.0;

// What one rank of the layout holds and computes: the share of the model's blocks on its pipeline
// stages (the busiest rank's), as one tensor-parallel rank holds them.
struct RankShare {
  MemoryInputs inputs;
  double parameters = 0;      // on the busiest rank, this tp rank's share
  double block_share = 1;     // that rank's parameters over the model's (1 without a pipeline)
  double boundary_bytes = 0;  // per sample: the activations its stages send and receive
  int blocks = 0;             // blocks it holds (FSDP's units)
};

RankShare rankShare(const JobSpec& spec) {
  RankShare share{.inputs = modelMemoryInputs(spec)};
  const MemoryInputs& in = share.inputs;
  const int ranks = spec.strategy.mesh.pp;
  const int stages = stageCount(spec);
  if (stages <= 1) {
    share.parameters = static_cast<double>(in.parameters);
    share.blocks = static_cast<int>(in.layers.size());
    return share;
  }
  std::vector<size_t> starts = pipelineStageStarts(spec, in.layers, stages);
  starts.push_back(in.layers.size());
  for (int rank = 0; rank < ranks; ++rank) {
    double parameters = 0, boundary = 0;
    int blocks = 0;
    for (int s = rank; s < stages; s += ranks) {
      const size_t first = starts[static_cast<size_t>(s)], end = starts[static_cast<size_t>(s) + 1];
      for (size_t b = first; b < end; ++b) parameters += static_cast<double>(in.layers[b]);
      blocks += static_cast<int>(end - first);
      // Its input's gradient goes back (not the first stage), its output forward (not the last).
      if (s > 0) boundary += static_cast<double>(in.input_elements[first]);
      if (s + 1 < stages) boundary += static_cast<double>(in.input_elements[end]);
    }
    if (parameters < share.parameters) continue;
    share.parameters = parameters;
    share.boundary_bytes = boundary * kFloatBytes;
    share.blocks = blocks;
  }
  share.block_share = share.parameters / std::max<double>(1, static_cast<double>(in.parameters));
  return share;
}

// Samples one dp replica trains on per optimizer step, and the micro-steps they come in.
double replicaSamples(const JobSpec& spec) {
  return static_cast<double>(spec.train.batch_size) * spec.train.grad_accum_steps;
}
double microSteps(const JobSpec& spec) {
  return static_cast<double>(spec.train.grad_accum_steps) *
         (stageCount(spec) > 1 ? spec.train.micro_batches : 1);
}

DimensionCost costOf(MeshDim dim, const std::string& op, int ranks, double bytes, double operations,
                     const Measurements& measured, std::string formula) {
  return {.dim = dim,
          .op = op,
          .ranks = ranks,
          .bytes = bytes,
          .operations = operations,
          .seconds = measured.curve(op, ranks).seconds(bytes, operations),
          .formula = std::move(formula)};
}

// dp: DDP all-reduces the rank's gradients in buckets; FSDP all-gathers the parameters (twice
// under full_shard: forward and backward) and reduce-scatters the gradients, one unit a block;
// under a pipeline the stage's gradients are all-reduced after the schedule.
DimensionCost dataParallelCost(const JobSpec& spec, const RankShare& share,
                               const Measurements& measured) {
  const int dp = spec.strategy.mesh.dp;
  const double bytes = share.parameters * kFloatBytes;
  const std::string size = formatBytes(bytes, kTerminalBytes);
  const bool fsdp = spec.strategy.data_parallel == "fsdp" && stageCount(spec) == 1;
  if (!fsdp || spec.strategy.fsdp.sharding == FsdpSharding::kNoShard) {
    const double cap = spec.strategy.ddp.bucket_cap_mb * kMiB;
    const double buckets =
        stageCount(spec) > 1 ? 1
                             : 1 + std::ceil(std::max(0.0, bytes - kDdpFirstBucketMb * kMiB) / cap);
    return costOf(
        MeshDim::kDp, "all_reduce", dp, bytes, buckets, measured,
        fmt::format("all-reduce of the rank's gradients ({}) in {} op(s)", size, buckets));
  }
  const double gathers = spec.strategy.fsdp.sharding == FsdpSharding::kFullShard ? 2 : 1;
  const double units =
      spec.strategy.fsdp.units == FsdpUnits::kModel ? 1 : std::max(1, share.blocks);
  DimensionCost cost =
      costOf(MeshDim::kDp, "all_gather", dp, gathers * bytes, gathers * units, measured,
             fmt::format("{} all-gather(s) of the parameters ({}) and one reduce-scatter of the "
                         "gradients, {} unit(s) each",
                         gathers, size, units));
  cost.op = "all_gather+reduce_scatter";
  cost.seconds += measured.curve("reduce_scatter", dp).seconds(bytes, units);
  cost.bytes += bytes;
  cost.operations += units;
  return cost;
}

// tp (the GPT, Megatron-LM's): per transformer block two all-reduces of the [batch, context, dim]
// activations forward and two backward, the vocabulary-parallel embedding's and LM head's one
// each, and the cross-entropy's three of [batch, context].
DimensionCost tensorParallelCost(const JobSpec& spec, const RankShare& share,
                                 const Measurements& measured) {
  const ModelSpec& model = spec.model;
  const double blocks = static_cast<double>(model.block_count) * share.block_share;
  const double activation = static_cast<double>(model.context * model.dim) * kFloatBytes;
  const double per_sample =
      (4 * blocks + 2) * activation + 3 * static_cast<double>(model.context) * kFloatBytes;
  const double operations = microSteps(spec) * (4 * blocks + 5);
  return costOf(MeshDim::kTp, "all_reduce", spec.strategy.mesh.tp,
                per_sample * replicaSamples(spec), operations, measured,
                fmt::format("(4 x {:.3g} blocks + 2) all-reduces of [batch, {}, {}] and 3 of "
                            "[batch, {}] per micro-step",
                            blocks, model.context, model.dim, model.context));
}

// pp: each stage sends its output forward and its input's gradient back, per micro-batch.
DimensionCost pipelineCost(const JobSpec& spec, const RankShare& share,
                           const Measurements& measured) {
  const double bytes = share.boundary_bytes * replicaSamples(spec);
  const double sends = 2.0 * spec.strategy.pipeline.virtual_stages * microSteps(spec);
  return costOf(MeshDim::kPp, "sendrecv", 2, bytes, sends, measured,
                fmt::format("activations and their gradients across the stage boundaries "
                            "({} per sample), {} send(s)",
                            formatBytes(share.boundary_bytes, kTerminalBytes), sends));
}

}  // namespace

double CommCurve::seconds(double bytes, double operations) const {
  return operations * latency_s + (bytes_per_s > 0 ? bytes / bytes_per_s : 0);
}

const CommCurve& Measurements::curve(const std::string& op, int ranks) const {
  const CommCurve* nearest = nullptr;
  for (const CommCurve& c : curves) {
    if (c.op != op) continue;
    if (!nearest || std::abs(c.ranks - ranks) < std::abs(nearest->ranks - ranks)) nearest = &c;
  }
  if (!nearest) RM_THROW(kUnavailable, fmt::format("no {} bandwidth was measured", op));
  return *nearest;
}

nlohmann::json Measurements::toJson() const {
  nlohmann::json flops = nlohmann::json::object();
  for (const auto& [precision, value] : flops_per_s)
    flops[std::string(toString(precision))] = value;
  nlohmann::json list = nlohmann::json::array();
  for (const CommCurve& c : curves) {
    list.push_back({{"op", c.op},
                    {"ranks", c.ranks},
                    {"latency_s", c.latency_s},
                    {"bytes_per_s", c.bytes_per_s}});
  }
  return {{"flops_per_s", flops}, {"comm", list}};
}

Measurements Measurements::fromJson(const nlohmann::json& json) {
  Measurements out;
  try {
    for (const auto& [name, value] : json.at("flops_per_s").items()) {
      const std::optional<Precision> precision = fromString<Precision>(name);
      if (!precision) RM_THROW(kFormat, fmt::format("unknown precision '{}'", name));
      out.flops_per_s[*precision] = value.get<double>();
    }
    for (const nlohmann::json& c : json.at("comm")) {
      out.curves.push_back({c.at("op").get<std::string>(), c.at("ranks").get<int>(),
                            c.at("latency_s").get<double>(), c.at("bytes_per_s").get<double>()});
    }
  } catch (const nlohmann::json::exception& e) {
    RM_THROW(kFormat, fmt::format("the layout advisor's measurements: {}", e.what()));
  }
  return out;
}

double StepPrediction::rate() const {
  return step_s > 0 ? samples_per_step * tokens_per_sample / step_s : 0;
}

double StepPrediction::commSeconds() const {
  double total = 0;
  for (const DimensionCost& cost : comm) total += cost.seconds;
  return total;
}

std::optional<double> StepPrediction::commSeconds(MeshDim dim) const {
  for (const DimensionCost& cost : comm) {
    if (cost.dim == dim) return cost.seconds;
  }
  return std::nullopt;
}

std::pair<double, double> pipelineUnits(const JobSpec& spec) {
  const PipelineSpec& pipeline = spec.strategy.pipeline;
  const PipelinePlan plan = makePipelinePlan(spec.strategy.mesh.pp, spec.train.micro_batches,
                                             pipeline.schedule, pipeline.virtual_stages);
  const double rerun = spec.train.activation_checkpointing ? 1 : 0;
  PhaseCosts costs{.forward = 1, .backward = 2 + rerun, .weight = 0};
  if (pipeline.schedule == PipelineSchedule::kZbH1) costs = {1, 1 + rerun, 1};
  // simulateSchedule gives each of a rank's virtual stages its share of these costs.
  const ScheduleTimeline timeline = simulateSchedule(plan, costs);
  double busy = 0;
  for (const std::vector<TimedAction>& actions : timeline.per_rank) {
    double rank_busy = 0;
    for (const TimedAction& action : actions) rank_busy += action.end - action.start;
    busy = std::max(busy, rank_busy);
  }
  return {busy, timeline.makespan};
}

StepPrediction predictStep(const JobSpec& spec, const Measurements& measured) {
  const RankShare share = rankShare(spec);
  StepPrediction out;
  const ModelDescription model = describeModel(spec.model);
  out.tokens_per_sample = static_cast<double>(std::max<int64_t>(1, share.inputs.target_elements));
  out.has_tokens = share.inputs.target_elements > 1 || spec.model.kind == "gpt";
  out.samples_per_step = replicaSamples(spec) * dataParallelSize(spec);
  // Compute: the training FLOPs the step event counts for MFU, the rank's share, one more forward
  // under checkpointing; at the throughput measured for the precision.
  const auto flops = measured.flops_per_s.find(spec.train.precision);
  if (flops == measured.flops_per_s.end() || flops->second <= 0) {
    RM_THROW(kUnavailable, fmt::format("no {} matrix-product throughput was measured",
                                       toString(spec.train.precision)));
  }
  const double per_sample =
      trainingFlopsPerToken(model, static_cast<int64_t>(out.tokens_per_sample)) *
      out.tokens_per_sample * (spec.train.activation_checkpointing ? 4.0 / 3.0 : 1.0);
  out.compute_s =
      per_sample * replicaSamples(spec) * share.block_share / spec.strategy.mesh.tp / flops->second;
  if (stageCount(spec) > 1) {
    const auto [busy, makespan] = pipelineUnits(spec);
    out.bubble_s = out.compute_s * (makespan / busy - 1);
  }
  if (spec.strategy.mesh.dp > 1) out.comm.push_back(dataParallelCost(spec, share, measured));
  if (spec.strategy.mesh.tp > 1) out.comm.push_back(tensorParallelCost(spec, share, measured));
  if (spec.strategy.mesh.pp > 1) out.comm.push_back(pipelineCost(spec, share, measured));
  out.step_s = out.compute_s + out.bubble_s + out.commSeconds();
  return out;
}

std::vector<RankedLayout> rankLayouts(const LayoutEnumeration& layouts,
                                      const Measurements& measured) {
  std::vector<RankedLayout> kept, dropped;
  for (const PlannedLayout& planned : layouts.layouts) {
    if (planned.dropped) {
      dropped.push_back({planned, std::nullopt});
    } else {
      kept.push_back({planned, predictStep(planned.spec, measured)});
    }
  }
  std::stable_sort(kept.begin(), kept.end(), [](const RankedLayout& a, const RankedLayout& b) {
    return a.prediction->rate() > b.prediction->rate();
  });
  kept.insert(kept.end(), dropped.begin(), dropped.end());
  return kept;
}

std::vector<SpecOverrides> topLayoutMembers(const std::vector<RankedLayout>& ranked, int k) {
  std::vector<SpecOverrides> members;
  for (const RankedLayout& layout : ranked) {
    if (static_cast<int>(members.size()) >= k || !layout.prediction) break;
    members.push_back(layout.planned.overrides);
  }
  return members;
}

nlohmann::json planJson(const LayoutEnumeration& layouts, const std::vector<RankedLayout>& ranked,
                        const Measurements& measured, int top) {
  nlohmann::json rows = nlohmann::json::array();
  int position = 0;
  for (const RankedLayout& entry : ranked) {
    const Layout& layout = entry.planned.layout;
    nlohmann::json row = {
        {"rank", nullptr},
        {"top", false},
        {"label", layout.label()},
        {"mesh", {{"dp", layout.mesh.dp}, {"tp", layout.mesh.tp}, {"pp", layout.mesh.pp}}},
        {"dp_mode", layout.dpMode()},
        {"schedule", layout.schedule ? nlohmann::json(toString(*layout.schedule)) : nullptr},
        {"virtual_stages", layout.virtual_stages},
        {"micro_batches", layout.micro_batches},
        {"batch_size", layout.batch_size},
        {"checkpointing", layout.checkpointing},
        {"precision", toString(layout.precision)},
        {"overrides", overridesObject(entry.planned.overrides)},
        {"memory_bytes", entry.planned.memory_bytes},
        {"memory_rank", entry.planned.memory_rank},
        {"dropped", entry.planned.dropped ? nlohmann::json(*entry.planned.dropped) : nullptr},
        {"prediction", nullptr}};
    if (const std::optional<StepPrediction>& p = entry.prediction) {
      ++position;
      row["rank"] = position;
      row["top"] = position <= top;
      nlohmann::json comm = nlohmann::json::array();
      for (const DimensionCost& c : p->comm) {
        comm.push_back({{"dim", toString(c.dim)},
                        {"op", c.op},
                        {"ranks", c.ranks},
                        {"bytes", c.bytes},
                        {"operations", c.operations},
                        {"ms", 1e3 * c.seconds},
                        {"formula", c.formula}});
      }
      row["prediction"] = {{"step_ms", 1e3 * p->step_s},
                           {"compute_ms", 1e3 * p->compute_s},
                           {"bubble_ms", 1e3 * p->bubble_s},
                           {"comm", comm},
                           {"rate", p->rate()},
                           {"rate_unit", p->has_tokens ? "tokens/s" : "samples/s"}};
    }
    rows.push_back(std::move(row));
  }
  nlohmann::json refused = nlohmann::json::array();
  for (const RefusedLayout& r : layouts.refused)
    refused.push_back({{"label", r.layout.label()}, {"problem", r.problem}});
  return {
      {"world", worldSize(layouts.base)},
      {"global_batch", layouts.global_batch},
      {"device_memory", layouts.device_memory ? nlohmann::json(*layouts.device_memory) : nullptr},
      {"device_memory_source", layouts.device_memory_source},
      {"measurements", measured.toJson()},
      {"layouts", rows},
      {"refused", refused}};
}

}  // namespace ringmaster::plan
