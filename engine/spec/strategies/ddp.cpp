// DDP's plan (strategy.dp.kind "ddp"): the bucket cap and reduce dtype options, and the memory of a
// replicated model (shared with one rank's, "single"), with the 16-bit copies a 16-bit reduce
// dtype adds.
#include "spec/strategies/ddp.h"

#include <fmt/format.h>

#include "spec/strategies/plan.h"

namespace ringmaster {

namespace {

constexpr double kBytes = 4;  // float32

class DdpPlan final : public DimensionPlan {
 public:
  MeshDim dim() const override { return MeshDim::kDp; }
  std::string_view name() const override { return "ddp"; }
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
    return {{.path = "strategy.dp.bucket_cap_mb",
             .section = "Strategy",
             .label = "Bucket cap (MiB)",
             .type = FieldType::kNumber,
             .default_value = DdpSpec{}.bucket_cap_mb,
             .minimum = 0,
             .maximum = kMaxBucketCapMb,
             .exclusive_minimum = true,
             .help = "gradients are all-reduced in buckets of at most this size"},
            precisionOptionField("strategy.dp.reduce_dtype", "Reduce dtype",
                                 "the dtype gradient buckets are all-reduced in")};
  }
  void check(const JobSpec& spec, StrategyCheck& check) const override {
    checkPrecisionOptionWithoutStages(spec, "reduce_dtype", spec.strategy.ddp.reduce_dtype, check);
  }
  std::vector<MemoryPart> estimateMemory(const MemoryInputs& inputs, int) const override {
    const std::vector<double> buckets = bucketBytes(inputs);
    double bucketed = 0;
    for (double bytes : buckets) bucketed += allocatedBytes(bytes);
    std::vector<MemoryPart> parts = replicatedMemory(
        inputs, {"gradients", bucketed,
                 fmt::format("4 B × Ψ in {} bucket{} (the first of {} MiB, then up to {} MiB; "
                             "float32 under every train.precision)",
                             buckets.size(), buckets.size() == 1 ? "" : "s", kDdpFirstBucketMb,
                             inputs.spec.strategy.ddp.bucket_cap_mb)});
    const std::optional<Precision> reduce = inputs.spec.strategy.ddp.reduce_dtype;
    if (reduce && *reduce != Precision::kFp32) {
      // parallel/ddp.h: each bucket's pre-divided 16-bit copy lives from its all-reduce's start to
      // the step's gradient sync, so every bucket's at once when backward ends.
      double copies = 0;
      for (double bytes : buckets) copies += allocatedBytes(bytes / 2);
      parts.push_back({"16-bit reduce buffers (transient)", copies,
                       fmt::format("2 B × Ψ: each bucket's {} copy, from its all-reduce's start to "
                                   "the step's gradient sync",
                                   toString(*reduce))});
    }
    return parts;
  }

 private:
  // parallel/ddp.cpp: the gradient buckets' bytes, filled with the parameters in reverse order
  // (backward's), each closed once it holds its cap (kDdpFirstBucketMb for the first).
  static std::vector<double> bucketBytes(const MemoryInputs& inputs) {
    std::vector<double> buckets;
    double cap = kDdpFirstBucketMb * 1024 * 1024;
    for (auto it = inputs.parameter_tensors.rbegin(); it != inputs.parameter_tensors.rend(); ++it) {
      if (buckets.empty() || buckets.back() >= cap) {
        if (!buckets.empty()) cap = inputs.spec.strategy.ddp.bucket_cap_mb * 1024 * 1024;
        buckets.push_back(0);
      }
      buckets.back() += static_cast<double>(it->elements) * kBytes;
    }
    return buckets;
  }
};

}  // namespace

std::vector<MemoryPart> singleMemory(const MemoryInputs& inputs) {
  return replicatedMemory(
      inputs, {"gradients", parameterTensorBytes(inputs, 0, inputs.layers.size(), kBytes),
               "4 B × Ψ, one gradient per parameter tensor"});
}

std::vector<MemoryPart> replicatedMemory(const MemoryInputs& inputs, MemoryPart gradients) {
  const size_t blocks = inputs.layers.size();
  const int64_t batch = inputs.spec.train.batch_size;
  std::vector<MemoryPart> parts = {
      {"parameters", parameterTensorBytes(inputs, 0, blocks, kBytes),
       fmt::format("4 B × Ψ = 4 × {} parameters", inputs.parameters)},
      std::move(gradients),
      {"optimizer state", inputs.moments * parameterTensorBytes(inputs, 0, blocks, kBytes),
       fmt::format("4 B × {} × Ψ ({})", inputs.moments, inputs.moment_text)},
      {"activations", inputs.activation_bytes(0, blocks, batch),
       fmt::format("batch {} × {}", batch, inputs.activation_text)}};
  appendBackwardParts(inputs, 0, blocks, batch, /*computes_loss=*/true, parts);
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

void checkPrecisionOptionWithoutStages(const JobSpec& spec, std::string_view option,
                                       const std::optional<Precision>& value,
                                       StrategyCheck& check) {
  if (!value || *value == Precision::kFp32 || stageCount(spec) == 1) return;
  check.report(fmt::format("strategy.dp.{}", option),
               fmt::format("{} is not taken with pipeline stages (strategy.mesh.pp {}): the "
                           "stages' gradients are averaged over dp in fp32 after the schedule; "
                           "leave it out or set pp to 1",
                           toString(*value), spec.strategy.mesh.pp));
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

const DimensionPlan& ddpPlan() {
  static const DdpPlan plan;
  return plan;
}

}  // namespace ringmaster
