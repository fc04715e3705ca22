// Collective benchmark in the manner of nccl-tests: for each op and message size, the time per
// operation, algorithm bandwidth and bus bandwidth of Ringmaster's Gloo backend (ranks as threads
// over loopback TCP), beside torch.distributed's Gloo (Debian's python3-torch, one process per
// rank) measured in the same run, and their ratio. --segments sweeps Gloo's all_reduce segment
// size, the measurement behind GlooBackend::allreduceSegmentBytes.
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "comm/gloo/gloo_backend.h"
#include "comm/process_group.h"
#include "comm/tcp_store.h"

namespace {

using namespace ringmaster;
using Clock = std::chrono::steady_clock;

struct Result {
  double us = 0;
};

// Times `iters` runs of op on `world` ranks (threads); returns rank 0's mean time per op.
double timeOp(int world, const std::string& op, size_t bytes, int iters, size_t segment) {
  TcpStoreOptions server_options;
  server_options.is_server = true;
  auto server = std::make_shared<TcpStore>(server_options);
  std::vector<std::thread> threads;
  double result_us = 0;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      std::shared_ptr<Store> store = server;
      if (rank != 0) {
        TcpStoreOptions client;
        client.port = server->port();
        store = std::make_shared<TcpStore>(client);
      }
      auto prefixed = std::make_shared<PrefixStore>("world", store);
      GlooOptions gloo;
      gloo.allreduce_segment_bytes = segment;
      auto comm =
          std::make_unique<Communicator>(GlooBackend::connect(prefixed, rank, world, gloo),
                                         prefixed, store, rank, world, "world", CommOptions{});
      int64_t n = std::max<int64_t>(static_cast<int64_t>(bytes / 4), world);
      n -= n % world;
      Tensor a = Tensor::full({n}, 1.0f);
      Tensor b = Tensor::full({n}, 1.0f);
      Tensor block = Tensor::full({n / world}, 1.0f);
      auto call = [&] {
        if (op == "all_reduce")
          comm->allReduce(a)->wait();
        else if (op == "broadcast")
          comm->broadcast(a, 0)->wait();
        else if (op == "all_gather")
          comm->allGather(a, block)->wait();
        else if (op == "reduce_scatter")
          comm->reduceScatter(block, a)->wait();
        else if (op == "all_to_all")
          comm->allToAll(b, a)->wait();
      };
      call();
      double best = 0;
      for (int run = 0; run < 3; ++run) {  // best of three: these machines are noisy
        comm->barrier()->wait();
        auto start = Clock::now();
        for (int i = 0; i < iters; ++i) call();
        double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters;
        best = run == 0 ? us : std::min(best, us);
      }
      comm->barrier()->wait();
      if (rank == 0) result_us = best;
    });
  }
  for (auto& t : threads) t.join();
  return result_us;
}

int itersFor(size_t bytes) {
  return bytes >= (16u << 20) ? 5 : bytes >= (1u << 20) ? 20 : 100;
}

int freePort() {
  TcpStoreOptions options;
  options.is_server = true;
  TcpStore probe(options);
  return probe.port();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Collective benchmark: Ringmaster's Gloo backend beside torch.distributed's Gloo"};
  int world = 2;
  std::vector<std::string> ops{"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                               "all_to_all"};
  std::vector<size_t> sizes{4u << 10, 64u << 10, 1u << 20, 16u << 20, 64u << 20};
  bool with_torch = true;
  bool segments = false;
  app.add_option("--ranks", world, "ranks (threads here, processes for PyTorch)");
  app.add_option("--ops", ops, "operations");
  app.add_option("--bytes", sizes, "message sizes in bytes (nccl-tests' counting)");
  app.add_flag("!--no-torch", with_torch, "skip the PyTorch anchor");
  app.add_flag("--segments", segments, "sweep Gloo's all_reduce segment size instead");
  CLI11_PARSE(app, argc, argv);

  if (segments) {
    fmt::print("all_reduce, {} ranks: microseconds per op by segment size\n", world);
    fmt::print("{:>12} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "bytes", "seg 1MiB", "seg 4MiB",
               "seg 16MiB", "auto", "auto seg");
    for (size_t bytes : sizes) {
      int iters = itersFor(bytes);
      std::vector<double> t;
      for (size_t seg : {size_t{1} << 20, size_t{4} << 20, size_t{16} << 20, size_t{0}})
        t.push_back(timeOp(world, "all_reduce", bytes, iters, seg));
      fmt::print("{:>12} {:>12.0f} {:>12.0f} {:>12.0f} {:>12.0f} {:>12}\n", bytes, t[0], t[1], t[2],
                 t[3], GlooBackend::allreduceSegmentBytes(bytes, world, 0));
    }
    return 0;
  }

  std::map<std::pair<std::string, size_t>, double> torch_us;
  if (with_torch) {
    std::string size_list, op_list;
    for (size_t s : sizes) size_list += (size_list.empty() ? "" : ",") + std::to_string(s);
    for (const auto& o : ops) op_list += (op_list.empty() ? "" : ",") + o;
    std::string cmd = fmt::format("/usr/bin/python3 {}/torch_collectives.py {} {} {} {}",
                                  RINGMASTER_BENCH_DIR, world, freePort(), op_list, size_list);
    if (FILE* pipe = popen(cmd.c_str(), "r")) {
      char line[4096];
      while (fgets(line, sizeof(line), pipe)) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j["us"].is_number())
          torch_us[{j["op"], j["bytes"].get<size_t>()}] = j["us"];
      }
      if (pclose(pipe) != 0)
        fmt::print(stderr, "PyTorch anchor failed (is python3-torch installed?)\n");
    }
  }

  fmt::print(
      "Gloo over loopback TCP, {} ranks, float32, sum. Times in microseconds per operation.\n",
      world);
  fmt::print("{:>15} {:>10} {:>11} {:>10} {:>10} {:>12} {:>10}\n", "op", "bytes", "time us",
             "algbw GB/s", "busbw GB/s", "torch us", "torch/ours");
  for (const auto& op : ops) {
    for (size_t bytes : sizes) {
      int64_t n = std::max<int64_t>(static_cast<int64_t>(bytes / 4), world);
      n -= n % world;
      size_t counted = static_cast<size_t>(n) * 4;
      double us = timeOp(world, op, bytes, itersFor(bytes), 0);
      CommOp kind = op == "all_reduce"       ? CommOp::kAllReduce
                    : op == "broadcast"      ? CommOp::kBroadcast
                    : op == "all_gather"     ? CommOp::kAllGather
                    : op == "reduce_scatter" ? CommOp::kReduceScatter
                                             : CommOp::kAllToAll;
      double algbw = counted / (us * 1e3);
      std::string anchor = "-", ratio = "-";
      if (auto it = torch_us.find({op, counted}); it != torch_us.end()) {
        anchor = fmt::format("{:.0f}", it->second);
        ratio = fmt::format("{:.2f}", it->second / us);
      }
      fmt::print("{:>15} {:>10} {:>11.1f} {:>10.3f} {:>10.3f} {:>12} {:>10}\n", op, counted, us,
                 algbw, algbw * busFactor(kind, world), anchor, ratio);
    }
  }
  return 0;
}
