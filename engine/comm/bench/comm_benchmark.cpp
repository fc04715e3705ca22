// Sizes and names parsed as nccl-tests reads them, buffers filled so every result is exactly
// predictable, timing over the group (slowest rank), and nccl-tests' table.
#include "comm/bench/comm_benchmark.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>

#include <fmt/format.h>

#include "comm/host_values.h"
#include "core/error.h"

namespace ringmaster {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::array<std::pair<BenchOp, std::string_view>, 9> kOpNames{{
    {BenchOp::kAllReduce, "all_reduce"},
    {BenchOp::kBroadcast, "broadcast"},
    {BenchOp::kReduce, "reduce"},
    {BenchOp::kAllGather, "all_gather"},
    {BenchOp::kReduceScatter, "reduce_scatter"},
    {BenchOp::kAllToAll, "all_to_all"},
    {BenchOp::kGather, "gather"},
    {BenchOp::kScatter, "scatter"},
    {BenchOp::kSendRecv, "sendrecv"},
}};

CommOp commOpOf(BenchOp op) {
  switch (op) {
    case BenchOp::kAllReduce:
      return CommOp::kAllReduce;
    case BenchOp::kBroadcast:
      return CommOp::kBroadcast;
    case BenchOp::kReduce:
      return CommOp::kReduce;
    case BenchOp::kAllGather:
      return CommOp::kAllGather;
    case BenchOp::kReduceScatter:
      return CommOp::kReduceScatter;
    case BenchOp::kAllToAll:
      return CommOp::kAllToAll;
    case BenchOp::kGather:
      return CommOp::kGather;
    case BenchOp::kScatter:
      return CommOp::kScatter;
    case BenchOp::kSendRecv:
      return CommOp::kSend;
  }
  return CommOp::kAllReduce;
}

// Whether the op's buffers are `ranks` blocks (its count must be a multiple of the group size).
bool isBlocked(BenchOp op) {
  return op == BenchOp::kAllGather || op == BenchOp::kReduceScatter || op == BenchOp::kAllToAll ||
         op == BenchOp::kGather || op == BenchOp::kScatter;
}

// Element i of rank r's input when reducing with `kind`: small integers, so every reduction is
// exact in every dtype (products stay powers of two, bitwise ops see one bit per rank).
double inputValue(ReduceKind kind, int rank, int64_t i) {
  switch (kind) {
    case ReduceKind::kProduct:
      return 1 + (rank + i) % 2;
    case ReduceKind::kBand:
    case ReduceKind::kBor:
    case ReduceKind::kBxor:
      return static_cast<double>((1 << (rank % 4)) | ((i % 8) << 4));
    default:
      return 1 + (rank + i) % 4;
  }
}

// The reduction over `ranks` ranks of value(q), computed directly in double (int64 for the
// bitwise ops), rounded to what `dtype` holds.
double expectedReduction(ReduceKind kind, double premul_factor, DType dtype, int ranks,
                         const std::function<double(int)>& value) {
  double acc = value(0);
  int64_t bits = static_cast<int64_t>(acc);
  for (int q = 1; q < ranks; ++q) {
    double v = value(q);
    switch (kind) {
      case ReduceKind::kSum:
      case ReduceKind::kAvg:
      case ReduceKind::kPremulSum:
        acc += v;
        break;
      case ReduceKind::kProduct:
        acc *= v;
        break;
      case ReduceKind::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceKind::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceKind::kBand:
        bits &= static_cast<int64_t>(v);
        break;
      case ReduceKind::kBor:
        bits |= static_cast<int64_t>(v);
        break;
      case ReduceKind::kBxor:
        bits ^= static_cast<int64_t>(v);
        break;
    }
  }
  if (kind == ReduceKind::kBand || kind == ReduceKind::kBor || kind == ReduceKind::kBxor)
    acc = static_cast<double>(bits);
  if (kind == ReduceKind::kPremulSum) acc *= premul_factor;
  if (kind == ReduceKind::kAvg) acc = isFloating(dtype) ? acc / ranks : std::trunc(acc / ranks);
  return roundTrip(dtype, acc);
}

// Relative tolerance of a float result: two units in the last place (the order of a ring's sums
// differs from the reference's for AVG's division).
double tolerance(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return 1e-12;
    case DType::kF32:
      return 1e-6;
    case DType::kF16:
      return 2e-3;
    case DType::kBF16:
      return 1.6e-2;
    default:
      return 0;
  }
}

int64_t countWrong(const Tensor& result, const std::function<double(int64_t)>& expected) {
  Tensor host = result.device().isCuda() ? result.to(Device::cpu()) : result;
  std::vector<double> got = hostValues(host);
  const double tol = tolerance(result.dtype());
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double e = expected(static_cast<int64_t>(i));
    if (std::abs(got[i] - e) > tol * std::max(1.0, std::abs(e))) ++wrong;
  }
  return wrong;
}

// One op's buffers for one size, on the communicator's device, and how to run and check it.
class Case {
 public:
  Case(Communicator& comm, const CommBenchOptions& options, BenchOp op, int64_t count,
       ReduceKind kind)
      : comm_(comm), options_(options), op_(op), count_(count), kind_(kind) {
    const int n = comm.size();
    block_ = isBlocked(op) ? count / n : count;
    count = isBlocked(op) ? block_ * n : count;  // nccl-tests rounds down to whole blocks
    count_ = count;
    const DType dtype = options.dtype;
    const Device device = comm.device();
    auto make = [&](int64_t elements) { return Tensor::zeros({elements}, dtype, device); };
    switch (op) {
      case BenchOp::kAllReduce:
      case BenchOp::kBroadcast:
      case BenchOp::kReduce:
        input_ = make(count);
        break;
      case BenchOp::kAllGather:
      case BenchOp::kGather:
        input_ = make(block_), output_ = make(count);
        break;
      case BenchOp::kReduceScatter:
      case BenchOp::kScatter:
        input_ = make(count), output_ = make(block_);
        break;
      case BenchOp::kAllToAll:
      case BenchOp::kSendRecv:
        input_ = make(count), output_ = make(count);
        break;
    }
  }

  ReduceOp reduceOp() const {
    return kind_ == ReduceKind::kPremulSum ? ReduceOp::premulSum(options_.premul_factor)
                                           : ReduceOp{kind_};
  }

  // Starts one operation; appends the Works to wait for to `works` (no allocation per
  // operation beyond the communicator's own).
  void launch(std::deque<WorkPtr>& works) {
    const int root = options_.root;
    switch (op_) {
      case BenchOp::kAllReduce:
        return works.push_back(comm_.allReduce(input_, reduceOp()));
      case BenchOp::kBroadcast:
        return works.push_back(comm_.broadcast(input_, root));
      case BenchOp::kReduce:
        return works.push_back(comm_.reduce(input_, root, reduceOp()));
      case BenchOp::kAllGather:
        return works.push_back(comm_.allGather(output_, input_));
      case BenchOp::kReduceScatter:
        return works.push_back(comm_.reduceScatter(output_, input_, reduceOp()));
      case BenchOp::kAllToAll:
        return works.push_back(comm_.allToAll(output_, input_));
      case BenchOp::kGather:
        return works.push_back(comm_.gather(output_, input_, root));
      case BenchOp::kScatter:
        return works.push_back(comm_.scatter(output_, input_, root));
      case BenchOp::kSendRecv: {
        const int n = comm_.size(), r = comm_.rank();
        works.push_back(comm_.isend(input_, (r + 1) % n));
        return works.push_back(comm_.irecv(output_, (r + n - 1) % n));
      }
    }
  }

  // Launches one operation and waits for it.
  void run() {
    std::deque<WorkPtr> works;
    launch(works);
    for (auto& work : works) work->wait();
  }

  // Fills the input with this rank's predictable values (only the root's matters for broadcast
  // and scatter; the others get zeros).
  void fillInput() {
    const int r = comm_.rank();
    const bool rooted_source = op_ == BenchOp::kBroadcast || op_ == BenchOp::kScatter;
    Tensor host = Tensor::zeros({input_.numel()}, input_.dtype());
    if (!rooted_source || r == options_.root)
      fillHostTensor(host, [&](int64_t i) { return inputValue(kind_, r, i); });
    input_.copyFrom(host);
    if (output_.numel() > 0) output_.copyFrom(Tensor::zeros({output_.numel()}, output_.dtype()));
  }

  // The wrong elements of this rank's result after one operation on fresh inputs.
  int64_t check() {
    fillInput();
    run();
    const int n = comm_.size(), r = comm_.rank(), root = options_.root;
    const DType dtype = options_.dtype;
    auto v = [&](int q, int64_t i) { return roundTrip(dtype, inputValue(kind_, q, i)); };
    auto reduced = [&](int64_t i) {
      return expectedReduction(kind_, options_.premul_factor, dtype, n,
                               [&](int q) { return inputValue(kind_, q, i); });
    };
    switch (op_) {
      case BenchOp::kAllReduce:
        return countWrong(input_, reduced);
      case BenchOp::kBroadcast:
        return countWrong(input_, [&](int64_t i) { return v(root, i); });
      case BenchOp::kReduce:
        return r == root ? countWrong(input_, reduced) : 0;
      case BenchOp::kAllGather:
        return countWrong(output_, [&](int64_t j) { return v(j / block_, j % block_); });
      case BenchOp::kReduceScatter:
        return countWrong(output_, [&](int64_t i) { return reduced(r * block_ + i); });
      case BenchOp::kAllToAll:
        return countWrong(output_,
                          [&](int64_t j) { return v(j / block_, r * block_ + j % block_); });
      case BenchOp::kGather:
        return r != root
                   ? 0
                   : countWrong(output_, [&](int64_t j) { return v(j / block_, j % block_); });
      case BenchOp::kScatter:
        return countWrong(output_, [&](int64_t i) { return v(root, r * block_ + i); });
      case BenchOp::kSendRecv:
        return countWrong(output_, [&](int64_t i) { return v((r + n - 1) % n, i); });
    }
    return 0;
  }

  // nccl-tests' bytes for this op (docs/comm.md): the whole buffer of the blocked ops.
  uint64_t bytes() const { return static_cast<uint64_t>(count_) * dtypeSize(options_.dtype); }

 private:
  Communicator& comm_;
  const CommBenchOptions& options_;
  BenchOp op_;
  int64_t count_;
  int64_t block_ = 0;
  ReduceKind kind_;
  Tensor input_, output_;
};

// The slowest rank's value (MAX over the group) or the group's total (SUM).
double acrossRanks(Communicator& comm, double value, ReduceOp op) {
  Tensor t = Tensor::empty({1}, DType::kF64, comm.device());
  t.copyFrom(makeHostTensor(DType::kF64, 1, [&](int64_t) { return value; }));
  comm.allReduce(t, op)->wait();
  return hostValues(t.device().isCuda() ? t.to(Device::cpu()) : t)[0];
}

}  // namespace

std::string_view toString(BenchOp op) {
  for (const auto& [o, name] : kOpNames)
    if (o == op) return name;
  return "?";
}

BenchOp parseBenchOp(std::string_view text) {
  std::string plain;
  for (char c : text)
    if (c != '_') plain += c;
  for (const auto& [op, name] : kOpNames) {
    std::string plain_name;
    for (char c : name)
      if (c != '_') plain_name += c;
    if (text == name || plain == plain_name) return op;
  }
  std::vector<std::string_view> names;
  for (const auto& entry : kOpNames) names.push_back(entry.second);
  RM_THROW(kInvalidArgument, fmt::format("unknown operation '{}': expected one of {} or all", text,
                                         fmt::join(names, ", ")));
}

std::vector<BenchOp> allBenchOps() {
  std::vector<BenchOp> out;
  for (const auto& entry : kOpNames) out.push_back(entry.first);
  return out;
}

bool takesReduceOp(BenchOp op) {
  return op == BenchOp::kAllReduce || op == BenchOp::kReduce || op == BenchOp::kReduceScatter;
}

bool isRooted(BenchOp op) {
  return op == BenchOp::kBroadcast || op == BenchOp::kReduce || op == BenchOp::kGather ||
         op == BenchOp::kScatter;
}

uint64_t parseByteSize(std::string_view text) {
  auto bad = [&] {
    RM_THROW(kInvalidArgument,
             fmt::format("'{}' is not a size: expected bytes with an optional K, M or G suffix "
                         "(powers of 1024), e.g. 64K",
                         text));
  };
  if (text.empty()) bad();
  uint64_t multiplier = 1;
  std::string digits(text);
  switch (digits.back()) {
    case 'K':
    case 'k':
      multiplier = 1ull << 10;
      break;
    case 'M':
    case 'm':
      multiplier = 1ull << 20;
      break;
    case 'G':
    case 'g':
      multiplier = 1ull << 30;
      break;
    default:
      break;
  }
  if (multiplier != 1) digits.pop_back();
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit) || digits.size() > 12)
    bad();
  return std::stoull(digits) * multiplier;
}

DType parseCommDType(std::string_view text) {
  static const std::vector<std::pair<std::string_view, DType>> names{
      {"float32", DType::kF32}, {"float", DType::kF32},     {"f32", DType::kF32},
      {"float64", DType::kF64}, {"double", DType::kF64},    {"f64", DType::kF64},
      {"int32", DType::kI32},   {"int", DType::kI32},       {"i32", DType::kI32},
      {"int64", DType::kI64},   {"i64", DType::kI64},       {"uint8", DType::kU8},
      {"u8", DType::kU8},       {"bfloat16", DType::kBF16}, {"bf16", DType::kBF16},
      {"float16", DType::kF16}, {"half", DType::kF16},      {"f16", DType::kF16}};
  for (const auto& [name, dtype] : names)
    if (text == name) return dtype;
  RM_THROW(kInvalidArgument,
           fmt::format("unknown dtype '{}': expected float32, float64, int32, int64, uint8, "
                       "bfloat16 or float16",
                       text));
}

ReduceKind parseReduceKind(std::string_view text) {
  if (text == "prod") return ReduceKind::kProduct;
  for (ReduceKind kind : {ReduceKind::kSum, ReduceKind::kAvg, ReduceKind::kProduct,
                          ReduceKind::kMin, ReduceKind::kMax, ReduceKind::kBand, ReduceKind::kBor,
                          ReduceKind::kBxor, ReduceKind::kPremulSum}) {
    if (text == toString(kind)) return kind;
  }
  RM_THROW(
      kInvalidArgument,
      fmt::format("unknown reduce op '{}': expected sum, avg, prod, min, max, band, bor, bxor, "
                  "premul_sum or all",
                  text));
}

std::vector<ReduceKind> reduceKindsFor(DType dtype) {
  std::vector<ReduceKind> out{ReduceKind::kSum, ReduceKind::kAvg, ReduceKind::kProduct,
                              ReduceKind::kMin, ReduceKind::kMax};
  if (isFloating(dtype)) {
    out.push_back(ReduceKind::kPremulSum);
  } else {
    out.insert(out.end(), {ReduceKind::kBand, ReduceKind::kBor, ReduceKind::kBxor});
  }
  return out;
}

std::vector<uint64_t> sweepSizes(const CommBenchOptions& options) {
  RM_CHECK_ARG(options.min_bytes <= options.max_bytes,
               fmt::format("minimum size {} is above maximum size {}", options.min_bytes,
                           options.max_bytes));
  RM_CHECK_ARG(
      options.step_bytes > 0 || options.step_factor > 1 || options.min_bytes == options.max_bytes,
      "the size step factor must be above 1 (or give an increment)");
  std::vector<uint64_t> sizes;
  for (uint64_t size = options.min_bytes; size <= options.max_bytes;) {
    sizes.push_back(size);
    uint64_t next =
        options.step_bytes > 0
            ? size + options.step_bytes
            : static_cast<uint64_t>(std::ceil(std::max<double>(size, 1) * options.step_factor));
    if (next <= size) break;
    size = next;
  }
  return sizes;
}

std::vector<CommBenchRow> runCommBenchmark(Communicator& comm, const CommBenchOptions& options,
                                           const std::function<void(const CommBenchRow&)>& on_row) {
  RM_CHECK_ARG(options.iters >= 1, "iterations (-n) must be at least 1");
  RM_CHECK_ARG(options.warmup >= 0, "warm-up iterations (-w) must not be negative");
  RM_CHECK_ARG(options.root >= 0 && options.root < comm.size(),
               fmt::format("root {} is not a rank of the {} ranks", options.root, comm.size()));
  for (BenchOp op : options.ops) {
    RM_CHECK_ARG(op != BenchOp::kSendRecv || comm.size() > 1, "sendrecv needs 2 or more ranks");
  }
  for (ReduceKind kind : options.redops) checkReduceSupported(ReduceOp{kind}, options.dtype);

  const std::vector<uint64_t> sizes = sweepSizes(options);
  const uint64_t width = dtypeSize(options.dtype);
  std::vector<CommBenchRow> rows;
  for (BenchOp op : options.ops) {
    const std::vector<ReduceKind> kinds =
        takesReduceOp(op) ? options.redops : std::vector<ReduceKind>{ReduceKind::kSum};
    for (ReduceKind kind : kinds) {
      for (uint64_t size : sizes) {
        Case c(comm, options, op, static_cast<int64_t>(size / width), kind);
        c.fillInput();
        for (int i = 0; i < options.warmup; ++i) c.run();
        comm.barrier()->wait();
        // Every operation is launched without waiting for the previous one, as nccl-tests does;
        // those already complete are let go on the way (wait() rethrows a failure), so that the
        // loop reuses their memory instead of faulting in pages for thousands of handles.
        std::deque<WorkPtr> works;
        const auto start = Clock::now();
        for (int i = 0; i < options.iters; ++i) {
          c.launch(works);
          while (!works.empty() && works.front()->isCompleted()) {
            works.front()->wait();
            works.pop_front();
          }
        }
        for (auto& work : works) work->wait();
        const double us =
            std::chrono::duration<double, std::micro>(Clock::now() - start).count() / options.iters;

        CommBenchRow row;
        row.op = op;
        row.bytes = c.bytes();
        row.count = static_cast<int64_t>(row.bytes / width);
        row.dtype = options.dtype;
        if (takesReduceOp(op)) row.redop = kind;
        row.root = isRooted(op) ? options.root : -1;
        row.time_us = acrossRanks(comm, us, ReduceOp::max());
        row.algbw_gbps = row.time_us > 0 ? static_cast<double>(row.bytes) / (row.time_us * 1e3) : 0;
        row.busbw_gbps = row.algbw_gbps * busFactor(commOpOf(op), comm.size());
        if (options.check) {
          row.wrong = static_cast<int64_t>(
              acrossRanks(comm, static_cast<double>(c.check()), ReduceOp::sum()));
        }
        if (on_row) on_row(row);
        rows.push_back(row);
      }
    }
  }
  return rows;
}

std::string benchTableHeader() {
  return fmt::format(
      "#{:>14} {:>12} {:>9} {:>10} {:>6} {:>10} {:>8} {:>8} {:>7}  {}\n"
      "#{:>14} {:>12} {:>9} {:>10} {:>6} {:>10} {:>8} {:>8} {:>7}\n",
      "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "op", "(B)",
      "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "");
}

std::string benchTableRow(const CommBenchRow& row) {
  return fmt::format(" {:>14} {:>12} {:>9} {:>10} {:>6} {:>10.1f} {:>8.3f} {:>8.3f} {:>7}  {}\n",
                     row.bytes, row.count, commDTypeName(row.dtype),
                     row.redop ? toString(*row.redop) : "none", row.root, row.time_us,
                     row.algbw_gbps, row.busbw_gbps, row.wrong ? std::to_string(*row.wrong) : "N/A",
                     toString(row.op));
}

double averageBusBandwidth(const std::vector<CommBenchRow>& rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const auto& row : rows) sum += row.busbw_gbps;
  return sum / static_cast<double>(rows.size());
}

}  // namespace ringmaster
