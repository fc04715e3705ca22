// DDP's spec options (strategy.bucket_cap_mb). Its plan is in ddp.cpp, its runtime in
// parallel/ddp.h.
#pragma once

namespace ringmaster {

struct DdpSpec {
  double bucket_cap_mb = 25;  // gradient bucket size cap, MiB (PyTorch's bucket_cap_mb)
  bool operator==(const DdpSpec&) const = default;
};

}  // namespace ringmaster
