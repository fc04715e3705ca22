// estimateMemory: the model's and the optimizer's figures, handed to the strategy's plan for its
// formulas rank by rank.
#include "spec/memory_estimate.h"

#include <algorithm>

#include <fmt/format.h>

#include "spec/job_spec.h"
#include "spec/strategies/plan.h"
#include "tensor/allocator.h"

namespace ringmaster {

MemoryInputs modelMemoryInputs(const JobSpec& spec) {
  MemoryInputs inputs{.spec = spec, .world = std::max(worldSize(spec), 1)};
  // Activations as the modules keep them under train.precision's autocast, of the model as one
  // tensor-parallel rank holds it.
  const ModelDescription description = describeModelShare(
      spec.model, precisionDType(spec.train.precision),
      {.ranks = spec.strategy.mesh.tp, .sequence_parallel = spec.strategy.tp.sequence_parallel});
  for (const ModelBlock& block : description.blocks) {
    inputs.layers.push_back(block.parameters);
    inputs.input_elements.push_back(shapeNumel(block.input_shape));
  }
  for (int64_t n : inputs.layers) inputs.parameters += n;
  // Which block holds each parameter (the parameters are listed block by block), for the ties.
  std::vector<size_t> holder;
  for (size_t b = 0, filled = 0; const ParameterInfo& p : description.parameters) {
    while (b + 1 < description.blocks.size() && filled >= static_cast<size_t>(inputs.layers[b])) {
      ++b;
      filled = 0;
    }
    holder.push_back(b);
    filled += static_cast<size_t>(shapeNumel(p.shape));
    inputs.parameter_tensors.push_back({b, shapeNumel(p.shape)});
  }
  inputs.output_elements = shapeNumel(description.outputShape());
  inputs.target_elements =
      inputs.output_elements / std::max<int64_t>(description.outputShape().back(), 1);
  for (size_t b = 0; b < description.blocks.size(); ++b) {
    for (const std::string& name : description.blocks[b].tied_parameters) {
      for (size_t i = 0; i < description.parameters.size(); ++i) {
        if (description.parameters[i].name == name)
          inputs.tied.push_back({b, holder[i], shapeNumel(description.parameters[i].shape)});
      }
    }
  }
  const OptimizerSpec& o = spec.optimizer;
  inputs.moments = o.kind == OptimizerKind::kSgd ? (o.momentum > 0 ? 1 : 0) : 2;
  inputs.moment_text = o.kind == OptimizerKind::kSgd
                           ? (o.momentum > 0 ? "1 momentum buffer" : "no state")
                           : "2 Adam moments";
  // Bytes per sample, per block: what its forward keeps, and its input (4-byte elements: float32
  // activations or int32 tokens).
  std::vector<int64_t> kept, input, backward, deferred;
  for (const ModelBlock& block : description.blocks) {
    kept.push_back(block.activation_bytes_per_sample);
    input.push_back(shapeNumel(block.input_shape) * 4);
    backward.push_back(block.backward_bytes_per_sample);
    deferred.push_back(block.deferred_weight_bytes_per_sample);
    inputs.keeps_input.push_back(block.keeps_input || spec.train.activation_checkpointing);
  }
  auto sum = [](const std::vector<int64_t>& per_block) {
    return [per_block](size_t first, size_t end, int64_t batch) {
      double bytes = 0;
      for (size_t b = first; b < end; ++b) bytes += static_cast<double>(batch * per_block[b]);
      return bytes;
    };
  };
  inputs.backward_bytes = [backward](size_t first, size_t end, int64_t batch) {
    double most = 0;
    for (size_t b = first; b < end; ++b)
      most = std::max(most, static_cast<double>(batch * backward[b]));
    return most;
  };
  inputs.deferred_weight_bytes = sum(deferred);
  if (!spec.train.activation_checkpointing) {
    inputs.activation_bytes = sum(kept);
    inputs.activation_text = "the activations every block keeps for backward";
    inputs.recompute_bytes = [](size_t, size_t, int64_t) { return 0.0; };
    return inputs;
  }
  // Checkpointed: each block keeps its input; in its backward its forward runs again and keeps
  // what it keeps without checkpointing (of which the input is already counted), one block at a
  // time.
  inputs.activation_bytes = sum(input);
  inputs.activation_text = "the blocks' inputs (activation checkpointing)";
  inputs.recompute_bytes = [kept, input](size_t first, size_t end, int64_t batch) {
    double most = 0;
    for (size_t b = first; b < end; ++b)
      most = std::max(most, static_cast<double>(batch * std::max<int64_t>(kept[b] - input[b], 0)));
    return most;
  };
  return inputs;
}

double allocatedBytes(double bytes) {
  return static_cast<double>(CachingAllocator::roundSize(static_cast<size_t>(bytes)));
}

double parameterTensorBytes(const MemoryInputs& inputs, size_t first, size_t end,
                            double element_bytes) {
  double bytes = 0;
  for (const MemoryInputs::ParameterTensor& tensor : inputs.parameter_tensors) {
    if (tensor.block >= first && tensor.block < end)
      bytes += allocatedBytes(static_cast<double>(tensor.elements) * element_bytes);
  }
  return bytes;
}

namespace {

// The one block of [first, end) whose backward holds the most at once: its working set with,
// under activation checkpointing, its own forward re-run beside it (another block's are not).
size_t costliestBackwardBlock(const MemoryInputs& inputs, size_t first, size_t end, int64_t batch) {
  size_t costliest = first;
  double most = -1;
  for (size_t b = first; b < end; ++b) {
    const double held =
        inputs.backward_bytes(b, b + 1, batch) + inputs.recompute_bytes(b, b + 1, batch);
    if (held > most) {
      most = held;
      costliest = b;
    }
  }
  return costliest;
}

}  // namespace

void appendBackwardParts(const MemoryInputs& inputs, size_t first, size_t end, int64_t batch,
                         bool computes_loss, std::vector<MemoryPart>& parts) {
  // nn/loss.h: the logits, the softmax's probabilities and the logits' gradient, all float32,
  // alive together from the loss's backward into the last block's.
  const double loss_buffers =
      computes_loss ? 3 * allocatedBytes(static_cast<double>(batch * inputs.output_elements) * 4)
                    : 0;
  const std::string loss_formula =
      fmt::format("3 × 4 B × batch {} × {} outputs: the logits, their softmax and its gradient",
                  batch, inputs.output_elements);
  const std::string working_set_formula = fmt::format(
      "batch {} × the most one block's backward holds beyond what it kept: the "
      "gradients it receives, works on and returns",
      batch);
  if (!inputs.spec.train.activation_checkpointing) {
    if (computes_loss) parts.push_back({"loss buffers (transient)", loss_buffers, loss_formula});
    parts.push_back({"backward working set (transient)", inputs.backward_bytes(first, end, batch),
                     working_set_formula});
    return;
  }
  // Checkpointed: only the blocks' inputs stay, so the backward's transients are one phase at a
  // time. The loss's buffers are freed once the last block's backward has the logits' gradient;
  // each other block's working set and re-run forward once its backward returns.
  auto phase = [&](size_t b) {
    return inputs.backward_bytes(b, b + 1, batch) + inputs.recompute_bytes(b, b + 1, batch);
  };
  const size_t last = end - 1;
  const size_t others_end = computes_loss ? last : end;
  const size_t costliest = costliestBackwardBlock(inputs, first, others_end, batch);
  const double others_phase = others_end > first ? phase(costliest) : 0;
  const bool loss_phase_wins = computes_loss && loss_buffers + phase(last) > others_phase;
  const size_t block = loss_phase_wins ? last : costliest;
  if (loss_phase_wins) parts.push_back({"loss buffers (transient)", loss_buffers, loss_formula});
  const std::string phase_text =
      loss_phase_wins ? fmt::format(
                            "the last block's, beside the loss's buffers (more than any "
                            "other block's phase, {:.3f} MiB)",
                            others_phase / (1 << 20))
      : computes_loss ? fmt::format(
                            "block {}'s, whose phase is more than the loss's buffers with "
                            "the last block's ({:.3f} MiB)",
                            block, (loss_buffers + phase(last)) / (1 << 20))
                      : fmt::format("block {}'s, the most of any block", block);
  parts.push_back({"backward working set (transient)",
                   inputs.backward_bytes(block, block + 1, batch),
                   fmt::format("batch {} × {}: the gradients it receives, works on and returns",
                               batch, phase_text)});
  parts.push_back({"recomputed block (transient)", inputs.recompute_bytes(block, block + 1, batch),
                   fmt::format("batch {} × that block's activations beyond its input, re-run in "
                               "its backward",
                               batch)});
}

double RankMemoryEstimate::total() const {
  double sum = 0;
  for (const auto& part : parts) sum += part.bytes;
  return sum;
}

std::vector<double> estimatedRankTotals(std::string_view spec_json) {
  const SpecParseResult parsed = parseJobSpec(spec_json);
  if (!parsed.ok()) return {};
  std::vector<double> totals;
  for (const RankMemoryEstimate& rank : estimateMemory(*parsed.spec))
    totals.push_back(rank.total());
  return totals;
}

std::vector<int64_t> layerParameters(const ModelSpec& model) {
  std::vector<int64_t> blocks;
  for (const ModelBlock& block : describeModel(model).blocks) blocks.push_back(block.parameters);
  return blocks;
}

std::vector<RankMemoryEstimate> estimateMemory(const JobSpec& spec) {
  if (spec.program) return {};
  const MemoryInputs inputs = modelMemoryInputs(spec);
  // One rank ("single"), a one-dimension layout (its plan's formulas), or a mixed mesh.
  const bool single = strategyLabel(spec) == "single";
  const DimensionPlan* plan = soleDimensionPlan(spec);
  std::vector<RankMemoryEstimate> ranks(static_cast<size_t>(inputs.world));
  for (int r = 0; r < inputs.world; ++r) {
    ranks[static_cast<size_t>(r)].rank = r;
    ranks[static_cast<size_t>(r)].parts = single ? singleMemory(inputs)
                                          : plan ? plan->estimateMemory(inputs, r)
                                                 : meshMemory(inputs, r);
  }
  return ranks;
}

}  // namespace ringmaster
