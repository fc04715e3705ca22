// FSDP's spec options (strategy.dp.sharding, strategy.dp.units, strategy.dp.reduce_dtype,
// strategy.dp.param_dtype). Its plan is in fsdp.cpp, its runtime in parallel/fsdp.h.
#pragma once

#include <optional>
#include <string_view>

#include "spec/precision.h"

namespace ringmaster {

enum class FsdpSharding { kFullShard, kShardGradOp, kNoShard };
// What one FSDP unit (one flat parameter) holds: one Linear layer with what follows it, or the
// whole model.
enum class FsdpUnits { kLayer, kModel };

// The JSON spellings ("full_shard", "layer"); fromString and enumNames are in spec/job_spec.h.
std::string_view toString(FsdpSharding value);
std::string_view toString(FsdpUnits value);

struct FsdpSpec {
  FsdpSharding sharding = FsdpSharding::kFullShard;
  FsdpUnits units = FsdpUnits::kLayer;
  // FSDP's MixedPrecision: the dtype gradients are reduce-scattered in (reduce_dtype) and the
  // dtype shards are all-gathered in (param_dtype; the gathered values are the shards rounded to
  // it). nullopt: the parameters' fp32.
  std::optional<Precision> reduce_dtype;
  std::optional<Precision> param_dtype;
  bool operator==(const FsdpSpec&) const = default;
};

}  // namespace ringmaster
