// Names and bus-bandwidth factors of comm_op.h.
#include "comm/comm_op.h"

namespace ringmaster {

std::string_view toString(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce:
      return "all_reduce";
    case CommOp::kBroadcast:
      return "broadcast";
    case CommOp::kReduce:
      return "reduce";
    case CommOp::kAllGather:
      return "all_gather";
    case CommOp::kReduceScatter:
      return "reduce_scatter";
    case CommOp::kAllToAll:
      return "all_to_all";
    case CommOp::kGather:
      return "gather";
    case CommOp::kScatter:
      return "scatter";
    case CommOp::kBarrier:
      return "barrier";
    case CommOp::kSend:
      return "send";
    case CommOp::kRecv:
      return "recv";
  }
  return "?";
}

double busFactor(CommOp op, int ranks) {
  double n = ranks;
  switch (op) {
    case CommOp::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CommOp::kAllGather:
    case CommOp::kReduceScatter:
    case CommOp::kAllToAll:
    case CommOp::kGather:
    case CommOp::kScatter:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

}  // namespace ringmaster
