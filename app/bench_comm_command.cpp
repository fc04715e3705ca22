// bench-comm: parses nccl-tests' options, launches local ranks when asked, and prints the table
// from rank 0.
#include "bench_comm_command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "comm/bench/comm_benchmark.h"
#include "comm/process_group.h"
#include "comm/tcp_store.h"
#include "core/error.h"
#include "process/child_process.h"

namespace ringmaster {
namespace {

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

CommBenchOptions benchOptions(const BenchCommArgs& args) {
  CommBenchOptions o;
  o.ops.clear();
  for (const auto& name : splitList(args.ops)) {
    if (name == "all") {
      o.ops = allBenchOps();
      break;
    }
    o.ops.push_back(parseBenchOp(name));
  }
  RM_CHECK_ARG(!o.ops.empty(), "--op: no operation given");
  o.min_bytes = parseByteSize(args.min_bytes);
  o.max_bytes = parseByteSize(args.max_bytes);
  o.step_factor = args.step_factor;
  o.step_bytes = parseByteSize(args.step_bytes);
  o.iters = args.iters;
  o.warmup = args.warmup;
  o.dtype = parseCommDType(args.dtype);
  o.redops.clear();
  for (const auto& name : splitList(args.redop)) {
    if (name == "all") {
      o.redops = reduceKindsFor(o.dtype);
      break;
    }
    o.redops.push_back(parseReduceKind(name));
  }
  RM_CHECK_ARG(!o.redops.empty(), "--redop: no reduce op given");
  o.premul_factor = args.premul_factor;
  o.root = args.root;
  o.check = args.check;
  sweepSizes(o);  // refuses a bad sweep before any rank starts
  return o;
}

// One rank: joins the group through `init` and runs the sweep; rank 0 prints the table.
int runRank(const BenchCommArgs& args, const CommBenchOptions& options, InitOptions init) {
  ProcessGroupOptions pg;
  pg.backend = args.backend;
  pg.init = std::move(init);
  pg.comm.timeout = std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000));
  pg.init.timeout = pg.comm.timeout;
  pg.comm.verify_calls = false;  // time the collective alone, as nccl-tests does
  if (const char* local_rank = std::getenv("LOCAL_RANK")) pg.cuda_device = std::atoi(local_rank);
  auto comm = initProcessGroup(pg);
  const bool printer = comm->rank() == 0;
  if (printer) {
    std::vector<std::string> names;
    for (BenchOp op : options.ops) names.emplace_back(toString(op));
    fmt::print("# ringmaster-node bench-comm: {} on {} rank(s), backend {}, device {}\n",
               fmt::join(names, ", "), comm->size(), comm->backendName(), comm->device().str());
    fmt::print("# minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} validation: {}\n",
               options.min_bytes, options.max_bytes,
               options.step_bytes > 0 ? fmt::format("{}(bytes)", options.step_bytes)
                                      : fmt::format("{}(factor)", options.step_factor),
               options.warmup, options.iters, options.check ? 1 : 0);
    fmt::print("#\n{}", benchTableHeader());
    std::fflush(stdout);
  }
  auto rows = runCommBenchmark(*comm, options, [&](const CommBenchRow& row) {
    if (!printer) return;
    fmt::print("{}", benchTableRow(row));
    std::fflush(stdout);
  });
  int64_t wrong = 0;
  for (const auto& row : rows) wrong += row.wrong.value_or(0);
  if (printer) {
    if (options.check)
      fmt::print("# Out of bounds values : {} {}\n", wrong, wrong ? "FAILED" : "OK");
    fmt::print("# Avg bus bandwidth    : {:.3f} GB/s\n#\n", averageBusBandwidth(rows));
  }
  return wrong == 0 ? 0 : 1;
}

// --ranks N: this process hosts the store and runs N copies of itself as ranks 0..N-1, stopping
// them all when one fails.
int launchLocalRanks(const BenchCommArgs& args, const std::vector<std::string>& argv) {
  TcpStoreOptions store_options;
  store_options.is_server = true;
  TcpStore store(store_options);

  std::vector<std::string> rank_argv{"/proc/self/exe"};
  for (size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == "--ranks") {
      ++i;  // and its value
    } else if (argv[i].rfind("--ranks=", 0) != 0) {
      rank_argv.push_back(argv[i]);
    }
  }
  std::vector<ChildProcess> ranks;
  for (int rank = 0; rank < args.ranks; ++rank) {
    ChildOptions child;
    child.argv = rank_argv;
    child.environment = {{"MASTER_ADDR", "127.0.0.1"},
                         {"MASTER_PORT", std::to_string(store.port())},
                         {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                         {"RANK", std::to_string(rank)},
                         {"WORLD_SIZE", std::to_string(args.ranks)},
                         {"LOCAL_RANK", std::to_string(rank)},
                         {"LOCAL_WORLD_SIZE", std::to_string(args.ranks)}};
    // As the agent and torchrun do for several ranks on one host: otherwise each rank's OpenBLAS
    // starts a thread per core that spins (sched_yield) for its first ~100 ms, taking the cores
    // the ranks wait on each other with (small all_reduces 2-3x slower in runs this short).
    for (const char* name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
      if (std::getenv(name) == nullptr && args.ranks > 1) child.environment.emplace(name, "1");
    }
    child.stdout_mode = StreamMode::kInherit;
    child.stderr_mode = StreamMode::kInherit;
    ranks.emplace_back(child);
  }
  auto failure = superviseGroup(ranks, std::chrono::seconds(3));
  if (!failure) return 0;
  fmt::print(stderr, "bench-comm: rank {} failed ({}); stopped the other ranks\n", failure->index,
             failure->status.describe());
  return failure->status.signal == 0 ? failure->status.exit_code : 1;
}

}  // namespace

CLI::App* addBenchCommCommand(CLI::App& app, BenchCommArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "bench-comm", "benchmark collectives in the manner of nccl-tests (sizes take K / M / G)");
  cmd->add_option("--op", args.ops,
                  "all_reduce, broadcast, reduce, all_gather, reduce_scatter, all_to_all, gather, "
                  "scatter, sendrecv, a comma-separated list, or all")
      ->capture_default_str();
  cmd->add_option("-b,--minbytes", args.min_bytes, "smallest message size")->capture_default_str();
  cmd->add_option("-e,--maxbytes", args.max_bytes, "largest message size")->capture_default_str();
  cmd->add_option("-f,--stepfactor", args.step_factor, "size multiplier between steps")
      ->capture_default_str();
  cmd->add_option("-i,--stepbytes", args.step_bytes, "size increment between steps (instead of -f)")
      ->capture_default_str();
  cmd->add_option("-n,--iters", args.iters, "timed iterations per size")->capture_default_str();
  cmd->add_option("-w,--warmup_iters", args.warmup, "untimed iterations first")
      ->capture_default_str();
  cmd->add_option("-d,--dtype", args.dtype,
                  "float32, float64, int32, int64, uint8, bfloat16 or float16")
      ->capture_default_str();
  cmd->add_option("-o,--redop", args.redop,
                  "sum, avg, prod, min, max, band, bor, bxor, premul_sum, a list, or all")
      ->capture_default_str();
  cmd->add_option("--premul-factor", args.premul_factor, "premul_sum's scalar")
      ->capture_default_str();
  cmd->add_option("-r,--root", args.root, "root of the rooted ops")->capture_default_str();
  cmd->add_flag("-c,--check", args.check, "check every result and count the wrong elements");
  cmd->add_option("--backend", args.backend, "gloo or nccl")->capture_default_str();
  cmd->add_option("--ranks", args.ranks,
                  "launch this many local ranks (otherwise RANK, WORLD_SIZE, MASTER_ADDR and "
                  "MASTER_PORT come from the environment, as under torchrun)");
  cmd->add_option("--timeout", args.timeout_s, "seconds before an operation times out")
      ->capture_default_str();
  return cmd;
}

int runBenchComm(const BenchCommArgs& args, const std::vector<std::string>& argv) {
  CommBenchOptions options = benchOptions(args);
  RM_CHECK_ARG(args.ranks >= 0, fmt::format("--ranks must be positive, got {}", args.ranks));
  if (args.ranks > 0) return launchLocalRanks(args, argv);
  InitOptions init;  // env://, as under torchrun
  if (std::getenv("RANK") == nullptr && std::getenv("WORLD_SIZE") == nullptr) {
    // A single rank with nothing to rendezvous with: a private file store.
    init.init_method = fmt::format("file:///tmp/ringmaster-bench-comm-{}", ::getpid());
    init.rank = 0;
    init.world_size = 1;
  }
  return runRank(args, options, init);
}

}  // namespace ringmaster
