// DDP's plan: the bucket cap and reduce dtype options, and the memory of a replicated model (shared
// with `single`), with the 16-bit copies a 16-bit reduce dtype adds.
#include "spec/strategies/ddp.h"

#include <fmt/format.h>

#include "spec/strategies/plan.h"

namespace ringmaster {

namespace {

constexpr double kBytes = 4;  // float32

class DdpPlan final : public StrategyPlan {
 public:
  StrategyKind kind() const override { return StrategyKind::kDdp; }
  std::vector<std::string_view> optionKeys() const override {
    return {"bucket_cap_mb", "reduce_dtype"};
  }
  void readOptions(OptionReader& reader, StrategySpec& out) const override {
    reader.positive("bucket_cap_mb", out.ddp.bucket_cap_mb, kMaxBucketCapMb);
    readPrecisionOption(reader, "reduce_dtype", out.ddp.reduce_dtype);
  }
  void writeOptions(const StrategySpec& spec, nlohmann::json& block) const override {
    block["bucket_cap_mb"] = spec.ddp.bucket_cap_mb;
    writePrecisionOption("reduce_dtype", spec.ddp.reduce_dtype, block);
  }
  std::vector<SpecField> fields() const override {
    return {{.path = "strategy.bucket_cap_mb",
             .section = "Strategy",
             .label = "Bucket cap (MiB)",
             .type = FieldType::kNumber,
             .default_value = DdpSpec{}.bucket_cap_mb,
             .minimum = 0,
             .maximum = kMaxBucketCapMb,
             .exclusive_minimum = true,
             .help = "gradients are all-reduced in buckets of at most this size"},
            precisionOptionField("strategy.reduce_dtype", "Reduce dtype",
                                 "the dtype gradient buckets are all-reduced in")};
  }
  void check(const JobSpec&, StrategyCheck&) const override {}
  std::vector<MemoryPart> estimateMemory(const MemoryInputs& inputs, int) const override {
    std::vector<MemoryPart> parts = replicatedMemory(inputs);
    const std::optional<Precision> reduce = inputs.spec.strategy.ddp.reduce_dtype;
    if (reduce && *reduce != Precision::kFp32) {
      // parallel/ddp.h: each bucket's pre-divided 16-bit copy lives from its all-reduce's start to
      // the step's gradient sync, so every bucket's at once when backward ends.
      parts.push_back({"16-bit reduce buffers (transient)",
                       static_cast<double>(inputs.parameters) * 2,
                       fmt::format("2 B × Ψ: each bucket's {} copy, from its all-reduce's start to "
                                   "the step's gradient sync",
                                   toString(*reduce))});
    }
    return parts;
  }
};

}  // namespace

std::vector<MemoryPart> replicatedMemory(const MemoryInputs& inputs) {
  const double p = static_cast<double>(inputs.parameters);
  const int64_t batch = inputs.spec.train.batch_size;
  std::vector<MemoryPart> parts = {
      {"parameters", p * kBytes, fmt::format("4 B × Ψ = 4 × {} parameters", inputs.parameters)},
      {"gradients", p * kBytes,
       fmt::format("4 B × Ψ (DDP's buckets hold them; float32 under every train.precision)")},
      {"optimizer state", p * kBytes * inputs.moments,
       fmt::format("4 B × {} × Ψ ({})", inputs.moments, inputs.moment_text)},
      {"activations", inputs.activation_bytes(0, inputs.layers.size(), batch),
       fmt::format("batch {} × {}", batch, inputs.activation_text)}};
  appendRecomputePart(inputs, 0, inputs.layers.size(), batch, parts);
  return parts;
}

void readPrecisionOption(OptionReader& reader, std::string_view key,
                         std::optional<Precision>& out) {
  if (std::optional<std::string> name = reader.choice(key, enumNames<Precision>()))
    out = *fromString<Precision>(*name);
}

void writePrecisionOption(std::string_view key, const std::optional<Precision>& value,
                          nlohmann::json& block) {
  if (value) block[std::string(key)] = toString(*value);
}

SpecField precisionOptionField(std::string path, std::string label, std::string help) {
  return {.path = std::move(path),
          .section = "Strategy",
          .label = std::move(label),
          .type = FieldType::kChoice,
          .choices = optionChoices<Precision>(),
          .default_value = nullptr,
          .help = std::move(help) + "; empty: fp32, the parameters' own"};
}

const StrategyPlan& ddpPlan() {
  static const DdpPlan plan;
  return plan;
}

}  // namespace ringmaster
