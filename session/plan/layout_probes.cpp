// The probes of layout_probes.h: GEMMs on threads, bench-comm's sweep on threads over a loopback
// store, and the file that keeps what they measured.
#include "plan/layout_probes.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "comm/bench/comm_benchmark.h"
#include "comm/process_group.h"
#include "comm/tcp_store.h"
#include "core/error.h"
#include "db/files.h"
#include "tensor/host_gemm.h"
#include "tensor/ops.h"

namespace ringmaster::plan {
namespace {

using Clock = std::chrono::steady_clock;

// Runs body(rank) on `count` threads and rethrows the first failure.
void onThreads(int count, const std::function<void(int)>& body) {
  std::mutex mutex;
  std::exception_ptr failure;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < count; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (failure) std::rethrow_exception(failure);
}

std::unique_ptr<Communicator> connectRank(const std::shared_ptr<TcpStore>& server, int rank,
                                          int world) {
  Rendezvous rendezvous{.rank = rank, .world_size = world, .master_host = "127.0.0.1"};
  if (rank == 0) {
    rendezvous.store = server;
  } else {
    TcpStoreOptions client;
    client.port = server->port();
    client.timeout = std::chrono::seconds(60);
    rendezvous.store = std::make_shared<TcpStore>(client);
  }
  ProcessGroupOptions options;
  options.shared_memory = true;
  options.comm.timeout = std::chrono::seconds(60);
  options.comm.verify_calls = false;  // time the collective alone, as bench-comm does
  return makeCommunicator(rendezvous, options);
}

// latency + bytes / bandwidth through the two sizes' times; where noise made the larger size no
// slower, its own time is all bandwidth.
CommCurve fitCurve(const std::string& op, int ranks, const CommBenchRow& small,
                   const CommBenchRow& large) {
  const double large_s = std::max(1e-9, large.time_us * 1e-6);
  if (large.time_us <= small.time_us)
    return {op, ranks, 0, static_cast<double>(large.bytes) / large_s};
  const double bandwidth =
      static_cast<double>(large.bytes - small.bytes) / ((large.time_us - small.time_us) * 1e-6);
  const double latency = std::max(0.0, small.time_us * 1e-6 - small.bytes / bandwidth);
  return {op, ranks, latency, bandwidth};
}

nlohmann::json readKept(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  nlohmann::json kept = nlohmann::json::parse(in, nullptr, false);
  return kept.is_object() ? kept : nlohmann::json::object();
}

}  // namespace

double probeMatmulFlops(Precision precision, int concurrent, Device device, int iterations) {
  RM_CHECK_ARG(concurrent >= 1 && iterations >= 1, "the GEMM probe needs a rank and an iteration");
  constexpr int64_t m = 256, k = 1024, n = 1024;
  // A worker among several on its host runs with one GEMM thread (OMP_NUM_THREADS and
  // OPENBLAS_NUM_THREADS=1), and the probe does as it does.
  const int gemm_threads = cpu::gemmThreads();
  if (!device.isCuda()) cpu::setGemmThreads(1);
  std::vector<double> seconds(static_cast<size_t>(concurrent));
  try {
    onThreads(!device.isCuda() ? concurrent : 1, [&](int rank) {
      const DType dtype = precisionDType(precision);
      const Tensor a = ops::cast(Tensor::full({m, k}, 0.5f, device), dtype);
      const Tensor b = ops::cast(Tensor::full({k, n}, 0.25f, device), dtype);
      Tensor c = Tensor::zeros({m, n}, DType::kF32, device);
      ops::matmul(a, false, b, false, c);  // warm-up
      synchronize(device);
      const Clock::time_point start = Clock::now();
      for (int i = 0; i < iterations; ++i) ops::matmul(a, false, b, false, c);
      synchronize(device);
      seconds[static_cast<size_t>(rank)] =
          std::chrono::duration<double>(Clock::now() - start).count();
    });
  } catch (...) {
    cpu::setGemmThreads(gemm_threads);
    throw;
  }
  cpu::setGemmThreads(gemm_threads);
  const double slowest = *std::max_element(seconds.begin(), seconds.end());
  return 2.0 * m * n * k * iterations / std::max(slowest, 1e-9);
}

std::vector<CommCurve> probeCommCurves(int ranks, uint64_t small_bytes, uint64_t large_bytes,
                                       int iterations) {
  RM_CHECK_ARG(ranks >= 2, fmt::format("a collective probe needs 2 ranks or more, got {}", ranks));
  CommBenchOptions options;
  options.ops = {BenchOp::kAllReduce, BenchOp::kAllGather, BenchOp::kReduceScatter};
  if (ranks == 2) options.ops.push_back(BenchOp::kSendRecv);
  options.min_bytes = small_bytes;
  options.max_bytes = large_bytes;
  options.step_factor = static_cast<double>(large_bytes) / static_cast<double>(small_bytes);
  options.iters = iterations;
  options.warmup = 2;
  TcpStoreOptions server_options;
  server_options.is_server = true;
  server_options.timeout = std::chrono::seconds(60);
  auto server = std::make_shared<TcpStore>(server_options);
  std::vector<CommBenchRow> rows;
  onThreads(ranks, [&](int rank) {
    std::unique_ptr<Communicator> comm = connectRank(server, rank, ranks);
    std::vector<CommBenchRow> measured = runCommBenchmark(*comm, options);
    if (rank == 0) rows = std::move(measured);  // every rank's rows agree
  });
  std::vector<CommCurve> curves;
  for (BenchOp op : options.ops) {
    std::vector<CommBenchRow> of_op;
    for (const CommBenchRow& row : rows) {
      if (row.op == op) of_op.push_back(row);
    }
    RM_ENFORCE(of_op.size() >= 2, "bench-comm measured fewer than two sizes");
    curves.push_back(fitCurve(std::string(toString(op)), ranks, of_op.front(), of_op.back()));
  }
  return curves;
}

std::string hostSetKey(const JobSpec& spec) {
  std::string key = computesOnCuda(spec) ? "cuda" : "cpu";
  for (const LaunchHostSpec& host : spec.launch.hosts)
    key += fmt::format(" {}:{}", host.host, host.ranks);
  return key;
}

Measurements measureHosts(const JobSpec& spec, const std::vector<Precision>& precisions) {
  const bool local =
      !spec.launch.slurm &&
      std::all_of(spec.launch.hosts.begin(), spec.launch.hosts.end(), [](const LaunchHostSpec& h) {
        return h.host == "localhost" || h.host == "127.0.0.1";
      });
  if (!local) {
    RM_THROW(kUnavailable,
             "the layout advisor measures local hosts only: run `ringmaster plan` "
             "on a spec whose launch.hosts are localhost (or give the "
             "measurements through the API)");
  }
  int per_host = 1;
  for (const LaunchHostSpec& host : spec.launch.hosts) per_host = std::max(per_host, host.ranks);
  const Device device = computesOnCuda(spec) ? Device::cuda(0) : Device::cpu();
  Measurements out;
  for (Precision precision : precisions)
    out.flops_per_s[precision] = probeMatmulFlops(precision, per_host, device);
  const int world = worldSize(spec);
  for (int ranks = 2; ranks <= world; ++ranks) {
    if (world % ranks != 0) continue;
    for (CommCurve& curve : probeCommCurves(ranks)) out.curves.push_back(std::move(curve));
  }
  if (world % 2 != 0) {  // sendrecv between two pipeline neighbours is always measured
    for (CommCurve& curve : probeCommCurves(2)) out.curves.push_back(std::move(curve));
  }
  return out;
}

std::filesystem::path measurementsPath(const std::string& db_path) {
  return db_path + ".plan-measurements.json";
}

Measurements keptMeasurements(const std::filesystem::path& file, const std::string& key,
                              bool remeasure, const std::function<Measurements()>& measure,
                              bool* measured_now) {
  nlohmann::json kept = readKept(file);
  if (!remeasure && kept.contains(key)) {
    try {
      Measurements out = Measurements::fromJson(kept[key]);
      if (measured_now) *measured_now = false;
      return out;
    } catch (const Error&) {
      // A malformed entry is measured again and replaced.
    }
  }
  Measurements measured = measure();
  kept[key] = measured.toJson();
  storage::writeFileAtomically(file, kept.dump(2) + "\n");
  ::chmod(file.c_str(), 0600);
  if (measured_now) *measured_now = true;
  return measured;
}

}  // namespace ringmaster::plan
