// The memory a rank needs for a job spec, before launch: parameters, gradients, optimizer state
// and saved activations, plus what the strategy adds (the transient all-gathered FSDP units), each
// with the formula used (ZeRO's accounting for float32: 4 bytes per parameter, per gradient, per
// Adam moment). Each strategy's formulas are in its plan (spec/strategies/); the window, the CLI
// and later the web page all ask here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringmaster {

struct JobSpec;
struct ModelSpec;

struct MemoryPart {
  std::string name;  // "parameters", "gradients", "optimizer state", "activations", ...
  double bytes = 0;
  std::string formula;  // how it was computed, with the figures put in
};

struct RankMemoryEstimate {
  int rank = 0;
  std::vector<MemoryPart> parts;
  double total() const;
};

// One entry per rank of the world. Pipeline stages follow the engine's balanced partition by
// parameter count; activations are what the model declares its blocks keep for backward, or
// under train.activation_checkpointing the blocks' inputs plus one block's activations while its
// forward is re-run (the "recomputed block (transient)" part). Empty for a program job: its
// script builds a model the spec does not describe.
std::vector<RankMemoryEstimate> estimateMemory(const JobSpec& spec);

// Each rank's estimated total for the spec a run was stored with (its JSON text), to put beside
// the rank's measured peak; empty when the text does not parse as a valid spec (say, one written
// by another version) or is a program job's.
std::vector<double> estimatedRankTotals(std::string_view spec_json);

// Parameters per block of the spec's model (for the MLP: a Linear layer and the LayerNorm after
// it).
std::vector<int64_t> layerParameters(const ModelSpec& model);

}  // namespace ringmaster
