// FSDP's spec options (strategy.sharding, strategy.units). Its plan is in fsdp.cpp, its runtime in
// parallel/fsdp.h.
#pragma once

#include <string_view>

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
  bool operator==(const FsdpSpec&) const = default;
};

}  // namespace ringmaster
