// DDP's spec options (strategy.dp.bucket_cap_mb, strategy.dp.reduce_dtype). Its plan is in ddp.cpp,
// its runtime in parallel/ddp.h.
#pragma once

#include <optional>

#include "spec/precision.h"

namespace ringmaster {

// The first gradient bucket's cap, MiB (PyTorch's _DEFAULT_FIRST_BUCKET_BYTES): the first bucket
// (the last layers) is small so that communication starts early.
inline constexpr double kDdpFirstBucketMb = 1.0;

struct DdpSpec {
  double bucket_cap_mb = 25;  // gradient bucket size cap, MiB (PyTorch's bucket_cap_mb)
  // The dtype buckets are all-reduced in (the gradients cast to it and back, as FSDP's
  // MixedPrecision.reduce_dtype or DDP's bf16 compress hook); nullopt: the gradients' fp32.
  std::optional<Precision> reduce_dtype;
  bool operator==(const DdpSpec&) const = default;
};

}  // namespace ringmaster
