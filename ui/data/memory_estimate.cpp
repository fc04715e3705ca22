// estimateMemory: the ZeRO formulas per strategy, with activations for the batch on each rank.
#include "data/memory_estimate.h"

#include <algorithm>

#include <fmt/format.h>

#include "parallel/pipeline.h"

namespace ringmaster::ui {

namespace {
constexpr double kBytes = 4;  // float32
}  // namespace

double RankMemoryEstimate::total() const {
  double sum = 0;
  for (const auto& part : parts) sum += part.bytes;
  return sum;
}

std::vector<int64_t> layerParameters(const ModelSpec& model) {
  std::vector<int64_t> layers;
  for (size_t i = 0; i + 1 < model.layers.size(); ++i) {
    int64_t n = model.layers[i] * model.layers[i + 1] + model.layers[i + 1];
    const bool hidden = i + 2 < model.layers.size();
    if (model.layer_norm && hidden) n += 2 * model.layers[i + 1];
    layers.push_back(n);
  }
  return layers;
}

std::vector<RankMemoryEstimate> estimateMemory(const JobSpec& spec) {
  const int world = std::max(worldSize(spec), 1);
  const std::vector<int64_t> layers = layerParameters(spec.model);
  int64_t psi = 0;
  for (int64_t n : layers) psi += n;
  const auto& o = spec.optimizer;
  const double moments = o.kind == OptimizerKind::kSgd ? (o.momentum > 0 ? 1 : 0) : 2;
  const std::string moment_text = o.kind == OptimizerKind::kSgd
                                      ? (o.momentum > 0 ? "1 momentum buffer" : "no state")
                                      : "2 Adam moments";
  // Activations: each Linear keeps its input ([batch, width_in]); the activation function its
  // output.
  auto activationBytes = [&](size_t first, size_t end, int64_t batch) {
    double elements = 0;
    for (size_t l = first; l < end; ++l) {
      elements += static_cast<double>(batch * spec.model.layers[l]);
      if (l + 2 < spec.model.layers.size())
        elements += static_cast<double>(batch * spec.model.layers[l + 1]);
    }
    return elements * kBytes;
  };

  std::vector<RankMemoryEstimate> ranks(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    RankMemoryEstimate& est = ranks[static_cast<size_t>(r)];
    est.rank = r;
    const int64_t batch = spec.train.batch_size;
    switch (spec.strategy.kind) {
      case StrategyKind::kSingle:
      case StrategyKind::kDdp: {
        const double p = static_cast<double>(psi);
        est.parts = {
            {"parameters", p * kBytes, fmt::format("4 B × Ψ = 4 × {} parameters", psi)},
            {"gradients", p * kBytes, fmt::format("4 B × Ψ (DDP's buckets hold them)")},
            {"optimizer state", p * kBytes * moments,
             fmt::format("4 B × {} × Ψ ({})", moments, moment_text)},
            {"activations", activationBytes(0, layers.size(), batch),
             fmt::format("4 B × batch {} × the inputs every layer keeps for backward", batch)}};
        break;
      }
      case StrategyKind::kFsdp: {
        const auto sharding = spec.strategy.fsdp.sharding;
        const double p = static_cast<double>(psi);
        const double shard = p / world;
        const bool no_shard = sharding == FsdpSharding::kNoShard;
        std::vector<int64_t> sorted = layers;
        std::sort(sorted.rbegin(), sorted.rend());
        const double unit =
            spec.strategy.fsdp.units == FsdpUnits::kModel
                ? p
                : static_cast<double>(sorted[0] + (sorted.size() > 1 ? sorted[1] : 0));
        est.parts = {
            {"parameters", (no_shard ? p : shard) * kBytes,
             no_shard ? "4 B × Ψ (no_shard)"
                      : fmt::format("4 B × Ψ / N = 4 × {} / {}", psi, world)},
            {"gradients", (no_shard ? p : shard) * kBytes,
             no_shard ? "4 B × Ψ" : "4 B × Ψ / N (reduce-scattered)"},
            {"optimizer state", (no_shard ? p : shard) * kBytes * moments,
             fmt::format("4 B × {} × Ψ{} ({})", moments, no_shard ? "" : " / N", moment_text)},
            {"activations", activationBytes(0, layers.size(), batch),
             fmt::format("4 B × batch {} × the inputs every layer keeps", batch)}};
        if (sharding == FsdpSharding::kFullShard)
          est.parts.push_back(
              {"all-gathered units (transient)", unit * kBytes,
               spec.strategy.fsdp.units == FsdpUnits::kModel
                   ? "4 B × Ψ: the whole model gathered during forward and backward"
                   : "4 B × the two largest units: one gathered, the next prefetched"});
        else if (sharding == FsdpSharding::kShardGradOp)
          est.parts.push_back({"unsharded parameters (forward to backward)", (p - shard) * kBytes,
                               "4 B × (Ψ − Ψ / N): ZeRO-2 keeps the gathered parameters"});
        break;
      }
      case StrategyKind::kPipeline: {
        const int v = std::max(spec.strategy.pipeline.virtual_stages, 1);
        const std::vector<size_t> starts = balancedSplit(layers, world * v);
        double own = 0;
        double acts = 0;
        const int m = std::max(spec.train.micro_batches, 1);
        const int64_t micro = batch / m;
        // Micro-batches whose activations a stage holds at once: all of them for GPipe, up to
        // the number of stages after it (warm-up depth) for the 1F1B family.
        const int in_flight = spec.strategy.pipeline.schedule == PipelineSchedule::kGpipe
                                  ? m
                                  : std::min(m, world - r);
        for (int s = r; s < world * v; s += world) {
          const size_t first = starts[static_cast<size_t>(s)];
          const size_t end = static_cast<size_t>(s) + 1 < starts.size()
                                 ? starts[static_cast<size_t>(s) + 1]
                                 : layers.size();
          for (size_t l = first; l < end; ++l) own += static_cast<double>(layers[l]);
          acts += activationBytes(first, end, micro) * in_flight;
        }
        est.parts = {
            {"parameters", own * kBytes,
             fmt::format("4 B × the {:.0f} parameters of this rank's stage{}", own,
                         v > 1 ? "s" : "")},
            {"gradients", own * kBytes, "4 B × the stage's parameters"},
            {"optimizer state", own * kBytes * moments,
             fmt::format("4 B × {} × the stage's parameters ({})", moments, moment_text)},
            {"activations", acts,
             fmt::format("4 B × micro-batch {} × the stage's saved inputs × {} micro-batch{} in "
                         "flight",
                         micro, in_flight, in_flight == 1 ? "" : "es")}};
        break;
      }
    }
  }
  return ranks;
}

}  // namespace ringmaster::ui
