// The collective benchmark behind `ringmaster-node bench-comm`, in the manner of nccl-tests: a
// sweep of message sizes per operation, each timed over warm-up and measured iterations on every
// rank (the slowest rank's time is reported), with algorithm and bus bandwidth, and with --check
// the number of wrong elements against an exactly predictable result.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/reduce_op.h"

namespace ringmaster {

// nccl-tests' operations: the collectives, and sendrecv (each rank sends to the next, receives
// from the previous).
enum class BenchOp {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kGather,
  kScatter,
  kSendRecv,
};

// "all_reduce", ..., "sendrecv".
std::string_view toString(BenchOp op);
// Accepts PyTorch's spelling (all_reduce) and nccl-tests' (allreduce); throws kInvalidArgument
// listing the known operations.
BenchOp parseBenchOp(std::string_view text);
std::vector<BenchOp> allBenchOps();
bool takesReduceOp(BenchOp op);
bool isRooted(BenchOp op);

// "65536", "64K", "1M", "2G" (powers of 1024, as nccl-tests reads them) -> bytes; throws
// kInvalidArgument naming the text.
uint64_t parseByteSize(std::string_view text);
// "float32" (or "float", "f32"), "float64", "int32", "int64", "uint8", "bfloat16", "float16".
DType parseCommDType(std::string_view text);
// "sum", "avg", "prod" (or "product"), "min", "max", "band", "bor", "bxor", "premul_sum".
ReduceKind parseReduceKind(std::string_view text);
// Every reduce op PyTorch accepts for `dtype`.
std::vector<ReduceKind> reduceKindsFor(DType dtype);

struct CommBenchOptions {
  std::vector<BenchOp> ops{BenchOp::kAllReduce};
  uint64_t min_bytes = 32u << 20;  // -b
  uint64_t max_bytes = 32u << 20;  // -e
  double step_factor = 2;          // -f: multiply the size by this each step...
  uint64_t step_bytes = 0;         // -i: ...or, when non-zero, add this
  int iters = 20;                  // -n
  int warmup = 5;                  // -w
  DType dtype = DType::kF32;
  std::vector<ReduceKind> redops{ReduceKind::kSum};
  double premul_factor = 0.5;  // PREMUL_SUM's scalar
  int root = 0;
  bool check = false;
};

// The sizes of the sweep: min, then times the factor (or plus the step) while not above max.
std::vector<uint64_t> sweepSizes(const CommBenchOptions& options);

struct CommBenchRow {
  BenchOp op = BenchOp::kAllReduce;
  uint64_t bytes = 0;  // as nccl-tests counts them (docs/comm.md)
  int64_t count = 0;   // elements in those bytes
  DType dtype = DType::kF32;
  std::optional<ReduceKind> redop;  // for the reducing ops
  int root = -1;                    // for the rooted ops
  double time_us = 0;               // per operation, the slowest rank's
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::optional<int64_t> wrong;  // wrong elements over every rank, with check
};

// Runs the sweep on `comm`; every rank of the group calls it with the same options. `on_row` is
// called on every rank as each row is measured (rows agree across ranks).
std::vector<CommBenchRow> runCommBenchmark(
    Communicator& comm, const CommBenchOptions& options,
    const std::function<void(const CommBenchRow&)>& on_row = {});

// nccl-tests' table: a two-line header and one line per row.
std::string benchTableHeader();
std::string benchTableRow(const CommBenchRow& row);
// The mean bus bandwidth over the rows, as nccl-tests' "Avg bus bandwidth".
double averageBusBandwidth(const std::vector<CommBenchRow>& rows);

}  // namespace ringmaster
