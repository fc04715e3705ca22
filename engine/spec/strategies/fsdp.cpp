// FSDP's plan (strategy.dp.kind "fsdp"): the sharding, units and mixed-precision options, and
// ZeRO's memory formulas per sharding, with what a 16-bit param_dtype or reduce_dtype adds or
// changes.
#include "spec/strategies/fsdp.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "spec/strategies/plan.h"

namespace ringmaster {

namespace {

constexpr double kBytes = 4;  // float32

// Whether the job's collectives run over Gloo's TCP: its backend, or `auto` on the CPU, with
// ranks on more than one host (or a scheduler's nodes). Ranks that all run on one host use shared
// memory instead (comm/shm, issue 36), whose reduce-scatter makes no copy.
bool usesGloo(const JobSpec& spec) {
  const bool cpu_backend = spec.backend == BackendKind::kGloo ||
                           (spec.backend == BackendKind::kAuto && spec.device == DeviceKind::kCpu);
  return cpu_backend && spec.launch.hosts.size() != 1;
}

// Bytes per element of a precision option (left out: float32).
double bytesOf(const std::optional<Precision>& precision) {
  return precision && *precision != Precision::kFp32 ? 2 : 4;
}

// The flat parameters, one tensor per unit padded to N shards, each rounded by the allocator:
// what a rank holds of each (its shard, or under no_shard the whole), as the optimizer sees it
// with its gradient and moments, and each unit's whole flat parameter as all-gathered.
struct FlatBytes {
  double held = 0, gathered = 0;
};

FlatBytes flatBytes(const std::vector<int64_t>& units, int world, bool no_shard) {
  FlatBytes bytes;
  for (int64_t unit : units) {
    if (unit == 0) continue;  // merged into its tied unit
    const int64_t padded = (unit + world - 1) / world * world;
    bytes.held += allocatedBytes(static_cast<double>(padded / (no_shard ? 1 : world)) * kBytes);
    bytes.gathered += allocatedBytes(static_cast<double>(padded) * kBytes);
  }
  return bytes;
}

// Units: one per block, blocks sharing a tied parameter merged (the GPT's root unit: the
// embedding and the head; 0 left where a merged block was), and whether each spans other units
// (stays gathered from its first block to its last).
std::pair<std::vector<int64_t>, std::vector<bool>> layerUnits(const MemoryInputs& inputs) {
  std::vector<int64_t> units = inputs.layers;
  std::vector<bool> spans(units.size(), false);
  for (const MemoryInputs::TiedCopy& tied : inputs.tied) {
    if (tied.reader == tied.owner) continue;
    units[tied.owner] += units[tied.reader];
    units[tied.reader] = 0;
    spans[tied.owner] = spans[tied.owner] || tied.reader > tied.owner + 1;
  }
  return {units, spans};
}

// ZeRO-2's backward (parallel/fsdp.cpp): a unit stays gathered from its forward until its own
// backward has reduce-scattered its gradient, so while unit u's gradient is reduced the units
// before it (and a spanning unit) are still gathered. The unit whose backward holds the most
// (`reduction_bytes` an element of its gradient while reduced), and what is gathered then.
struct Zero2Peak {
  double gathered = 0;  // bytes
  double unit = 0;      // elements of the unit being reduced
};

Zero2Peak zero2Peak(const std::vector<int64_t>& units, const std::vector<bool>& spans, int world,
                    double reduction_bytes) {
  Zero2Peak peak;
  double most = -1;
  for (size_t u = units.size(); u-- > 0;) {
    if (units[u] == 0) continue;
    double gathered = 0;
    for (size_t k = 0; k < units.size(); ++k) {
      const int64_t padded = (units[k] + world - 1) / world * world;
      if (units[k] > 0 && (k <= u || spans[k]))
        gathered += allocatedBytes(static_cast<double>(padded) * kBytes);
    }
    const double unit = static_cast<double>(units[u]);
    if (gathered + unit * reduction_bytes > most) {
      most = gathered + unit * reduction_bytes;
      peak = {gathered, unit};
    }
  }
  return peak;
}

// comm/gloo: the ring reduce-scatter works on a copy of its input (a unit's whole gradient,
// `input_bytes`) and receives one shard at a time.
MemoryPart reduceScatterCopies(double input_bytes, int world, double element_bytes) {
  return {"reduce-scatter buffers (transient)", input_bytes * (1 + 1.0 / world),
          fmt::format("{} B × (1 + 1 / {}) × the unit reduced: Gloo's ring reduce-scatter's copy "
                      "of its input and its receive block",
                      element_bytes, world)};
}

// A unit's gradient while reduced: float32, and its 16-bit copy under a 16-bit reduce_dtype.
double bytesInReduction(double reduce_bytes) {
  return reduce_bytes < kBytes ? kBytes + reduce_bytes : kBytes;
}

// The gradients' reduction, `reduced_unit` parameters being the unit whose reduction is counted.
void appendReductionParts(const MemoryInputs& inputs, double reduced_unit,
                          std::vector<MemoryPart>& parts) {
  const FsdpSpec& fsdp = inputs.spec.strategy.fsdp;
  const int world = inputs.world;
  const double p = static_cast<double>(inputs.parameters);
  const double shard = p / world;
  const bool no_shard = fsdp.sharding == FsdpSharding::kNoShard;
  const double reduce_bytes = bytesOf(fsdp.reduce_dtype);
  const double in_reduction = bytesInReduction(reduce_bytes);
  const std::string reduce_what =
      reduce_bytes < kBytes ? std::string(toString(*fsdp.reduce_dtype)) : std::string("float32");
  if (!no_shard) {
    // parallel/fsdp.h: a unit's full float32 gradient lives through its backward and is
    // reduce-scattered (16-bit: cast to a copy, the float32 one dropped); each unit's reduced
    // shard waits for the step's gradient sync.
    parts.push_back(
        {"gradients in reduction (transient)", shard * reduce_bytes + reduced_unit * in_reduction,
         fmt::format("{} B × Ψ / N: each unit's reduced {} shard until the step's gradient "
                     "sync, and {} B × the unit reduced: its flat float32 gradient{} while it "
                     "is reduce-scattered",
                     reduce_bytes, reduce_what, in_reduction,
                     reduce_bytes < kBytes ? fmt::format(" and the {} copy", reduce_what) : "")});
    // On one host (shared memory) the reduce-scatter copies nothing; but with a 16-bit
    // reduction the measured peak there still holds about that much more than the parts above
    // explain (fsdp_mlp_bf16: 12.95 MiB measured over shared memory, 11.42 MiB estimated without
    // this part; issue 36), so the part stays for 16-bit reductions until that is found.
    if (usesGloo(inputs.spec) || reduce_bytes < kBytes)
      parts.push_back(reduceScatterCopies(reduced_unit * reduce_bytes, world, reduce_bytes));
  } else if (reduce_bytes < kBytes) {
    parts.push_back({"16-bit reduce buffers (transient)", p * reduce_bytes,
                     fmt::format("2 B × Ψ: each unit's {} copy, from its all-reduce's start to "
                                 "the step's gradient sync",
                                 reduce_what)});
  }
}

class FsdpPlan final : public DimensionPlan {
 public:
  MeshDim dim() const override { return MeshDim::kDp; }
  std::string_view name() const override { return "fsdp"; }
  std::vector<std::string_view> optionKeys() const override {
    return {"sharding", "units", "reduce_dtype", "param_dtype"};
  }
  void readOptions(OptionReader& reader, StrategySpec& out) const override {
    readChoice(reader, "sharding", out.fsdp.sharding);
    readChoice(reader, "units", out.fsdp.units);
    readPrecisionOption(reader, "reduce_dtype", out.fsdp.reduce_dtype);
    readPrecisionOption(reader, "param_dtype", out.fsdp.param_dtype);
  }
  void writeOptions(const StrategySpec& spec, nlohmann::json& block) const override {
    block["sharding"] = toString(spec.fsdp.sharding);
    block["units"] = toString(spec.fsdp.units);
    writePrecisionOption("reduce_dtype", spec.fsdp.reduce_dtype, block);
    writePrecisionOption("param_dtype", spec.fsdp.param_dtype, block);
  }
  std::vector<SpecField> fields() const override {
    const FsdpSpec defaults;
    return {
        {.path = "strategy.dp.sharding",
         .section = "Strategy",
         .label = "Sharding",
         .type = FieldType::kChoice,
         .choices = optionChoices<FsdpSharding>(),
         .default_value = std::string(toString(defaults.sharding))},
        {.path = "strategy.dp.units",
         .section = "Strategy",
         .label = "Units",
         .type = FieldType::kChoice,
         .choices = optionChoices<FsdpUnits>(),
         .default_value = std::string(toString(defaults.units)),
         .help = "layer: one FSDP unit per Linear layer; model: the whole model is one unit"},
        precisionOptionField("strategy.dp.reduce_dtype", "Reduce dtype",
                             "the dtype gradients are reduce-scattered in"),
        precisionOptionField("strategy.dp.param_dtype", "All-gather dtype",
                             "the dtype shards are all-gathered in (MixedPrecision.param_dtype)")};
  }
  void check(const JobSpec& spec, StrategyCheck& check) const override {
    checkPrecisionOptionWithoutStages(spec, "reduce_dtype", spec.strategy.fsdp.reduce_dtype, check);
    checkPrecisionOptionWithoutStages(spec, "param_dtype", spec.strategy.fsdp.param_dtype, check);
  }
  std::vector<MemoryPart> estimateMemory(const MemoryInputs& inputs, int) const override {
    const FsdpSpec& fsdp = inputs.spec.strategy.fsdp;
    const int world = inputs.world;
    const int64_t psi = inputs.parameters, batch = inputs.spec.train.batch_size;
    const double p = static_cast<double>(psi);
    const bool no_shard = fsdp.sharding == FsdpSharding::kNoShard;
    const auto [units, spans] = layerUnits(inputs);
    double held = 0;  // the spanning units, gathered while the blocks between them run
    std::vector<int64_t> sorted;
    for (size_t u = 0; u < units.size(); ++u) {
      if (spans[u])
        held += static_cast<double>(units[u]);
      else
        sorted.push_back(units[u]);
    }
    std::sort(sorted.rbegin(), sorted.rend());
    const double largest = fsdp.units == FsdpUnits::kModel ? p : (sorted.empty() ? 0 : sorted[0]);
    const double second = fsdp.units == FsdpUnits::kModel || sorted.size() < 2 ? 0 : sorted[1];
    if (fsdp.units == FsdpUnits::kModel) held = 0;
    const FlatBytes flat =
        flatBytes(fsdp.units == FsdpUnits::kModel ? std::vector{psi} : units, world, no_shard);
    const double gather_bytes = bytesOf(fsdp.param_dtype);
    const bool low_gather = gather_bytes < kBytes;
    const double reduce_bytes = bytesOf(fsdp.reduce_dtype);
    const double in_reduction = bytesInReduction(reduce_bytes);
    double reduced_unit = std::max(largest, held);  // the unit whose reduction is counted
    std::vector<MemoryPart> parts = {
        {"parameters", flat.held,
         no_shard ? "4 B × Ψ (no_shard)" : fmt::format("4 B × Ψ / N = 4 × {} / {}", psi, world)},
        {"gradients", flat.held, no_shard ? "4 B × Ψ" : "4 B × Ψ / N (reduce-scattered)"},
        {"optimizer state", flat.held * inputs.moments,
         fmt::format("4 B × {} × Ψ{} ({})", inputs.moments, no_shard ? "" : " / N",
                     inputs.moment_text)},
        {"activations", inputs.activation_bytes(0, inputs.layers.size(), batch),
         fmt::format("batch {} × {}", batch, inputs.activation_text)}};
    appendBackwardParts(inputs, 0, inputs.layers.size(), batch, /*computes_loss=*/true, parts);
    if (fsdp.sharding == FsdpSharding::kFullShard && !low_gather) {
      parts.push_back({"all-gathered units (transient)", (held + largest + second) * kBytes,
                       fsdp.units == FsdpUnits::kModel
                           ? "4 B × Ψ: the whole model gathered during forward and backward"
                       : held > 0 ? fmt::format("4 B × the {:.0f} parameters of the tied "
                                                "unit, gathered from its first block to its "
                                                "last, and the two largest other units: one "
                                                "gathered, the next prefetched",
                                                held)
                                  : "4 B × the two largest units: one gathered, the next "
                                    "prefetched"});
    } else if (fsdp.sharding == FsdpSharding::kFullShard) {
      // parallel/fsdp.h: a unit arrives in 16 bits and is widened into the float32 flat
      // parameter the modules read, both alive while it is widened (6 B an element); then the
      // next unit's prefetch runs beside the gathered one: its 16-bit gather buffer (2 B) and
      // this rank's shard cast for it (2 B / N).
      const std::string what(toString(*fsdp.param_dtype));
      const double prefetch = 2 + 2.0 / world;
      const double bytes =
          std::max(6 * held, 4 * held + std::max(6 * largest, 4 * largest + prefetch * second));
      parts.push_back(
          {"all-gathered units (transient)", bytes,
           fsdp.units == FsdpUnits::kModel
               ? fmt::format("(2 + 4) B × Ψ: the whole model gathered in {} and widened into "
                             "float32",
                             what)
               : fmt::format("{}the larger of (2 + 4) B × the largest unit (gathered in {} and "
                             "widened into float32) and 4 B × it with (2 + 2 / {}) B × the "
                             "second largest prefetched ({} gather buffer and cast shard)",
                             held > 0 ? fmt::format("4 B × the {:.0f} parameters of the tied "
                                                    "unit, gathered from its first block to "
                                                    "its last, and ",
                                                    held)
                                      : "",
                             what, world, what)});
    } else if (fsdp.sharding == FsdpSharding::kShardGradOp) {
      // parallel/fsdp.cpp: each unit is gathered into a whole flat parameter beside the shard,
      // and kept from its forward to its backward.
      const Zero2Peak peak =
          zero2Peak(fsdp.units == FsdpUnits::kModel ? std::vector{psi} : units,
                    fsdp.units == FsdpUnits::kModel ? std::vector{false} : spans, world,
                    in_reduction + (usesGloo(inputs.spec) ? reduce_bytes * (1 + 1.0 / world) : 0));
      reduced_unit = peak.unit;
      parts.push_back({"unsharded parameters (forward to backward)", peak.gathered,
                       "4 B × the units ZeRO-2 still keeps gathered (beside their shards) while "
                       "the unit whose backward holds the most is reduced"});
      if (low_gather) {
        parts.push_back({"16-bit gather buffer (transient)",
                         largest * (gather_bytes + gather_bytes / world),
                         fmt::format("(2 + 2 / {}) B × the largest unit: its {} all-gather "
                                     "buffer and cast shard, until widened into float32",
                                     world, toString(*fsdp.param_dtype))});
      }
    } else if (low_gather) {
      parts.push_back({"rounded parameters", p * kBytes,
                       fmt::format("4 B × Ψ: the float32 copy rounded to {} that the modules "
                                   "read (no_shard keeps the parameters whole)",
                                   toString(*fsdp.param_dtype))});
    }
    appendReductionParts(inputs, reduced_unit, parts);
    return parts;
  }
};

}  // namespace

const DimensionPlan& fsdpPlan() {
  static const FsdpPlan plan;
  return plan;
}

}  // namespace ringmaster
