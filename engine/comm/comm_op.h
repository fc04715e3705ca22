// CommOp: the kinds of operation the communicator runs, their names as telemetry carries them, and
// their nccl-tests bus-bandwidth factors.
#pragma once

#include <string_view>

namespace ringmaster {

enum class CommOp {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kBarrier,
  kSend,
  kRecv,
};
// "all_reduce", "broadcast", ..., "send", "recv".
std::string_view toString(CommOp op);
// nccl-tests' bus-bandwidth factor for `op` over `ranks` ranks (docs/comm.md):
// all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all, gather, scatter (n-1)/n; others 1.
double busFactor(CommOp op, int ranks);
// Whether `op` is a send or a receive (numbered and completed apart from the collectives).
inline bool isPointToPoint(CommOp op) {
  return op == CommOp::kSend || op == CommOp::kRecv;
}

}  // namespace ringmaster
