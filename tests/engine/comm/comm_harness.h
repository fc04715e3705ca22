// Runs N ranks as threads over a loopback TcpStore (rank 0 hosts it) with the Gloo (TCP), shm
// (shared memory) or NCCL backend, and collects every rank's failure, in the manner of
// gloo/test/base_test.h.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/process_group.h"
#include "comm/tcp_store.h"

namespace ringmaster::testing {

struct RankFailure {
  int rank;
  std::string message;
};

// Calls body(comm) on `world` threads, one communicator each, rank r's made with
// options_of(r); returns the failures (empty when every rank succeeded).
inline std::vector<RankFailure> runRanksWith(int world,
                                             const std::function<void(Communicator&)>& body,
                                             const std::function<CommOptions(int)>& options_of,
                                             const std::string& backend = "gloo") {
  TcpStoreOptions server_options;
  server_options.is_server = true;
  server_options.timeout = std::chrono::seconds(60);
  auto server = std::make_shared<TcpStore>(server_options);
  std::mutex mutex;
  std::vector<RankFailure> failures;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        Rendezvous rdv;
        rdv.rank = rank;
        rdv.world_size = world;
        rdv.master_host = "127.0.0.1";
        if (rank == 0) {
          rdv.store = server;
        } else {
          TcpStoreOptions client;
          client.port = server->port();
          client.timeout = std::chrono::seconds(60);
          rdv.store = std::make_shared<TcpStore>(client);
        }
        ProcessGroupOptions options;
        // "gloo" is Gloo's TCP even on one host; "shm" is the CPU backend's shared memory.
        options.backend = backend == "shm" ? "gloo" : backend;
        options.shared_memory = backend == "shm";
        options.cuda_device = rank;  // nccl: rank r drives device r
        options.comm = options_of(rank);
        if (options.comm.timeout == std::chrono::seconds(300))
          options.comm.timeout = std::chrono::seconds(60);
        auto comm = makeCommunicator(rdv, options);
        if (world > 1 && backend != "nccl" && comm->backendName() != backend)
          throw std::runtime_error("asked for " + backend + ", got " + comm->backendName());
        body(*comm);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back({rank, e.what()});
      }
    });
  }
  for (auto& t : threads) t.join();
  return failures;
}

// The same, every rank's communicator made with `comm_options`.
inline std::vector<RankFailure> runRanks(int world, const std::function<void(Communicator&)>& body,
                                         CommOptions comm_options = {},
                                         const std::string& backend = "gloo") {
  return runRanksWith(
      world, body, [&](int) { return comm_options; }, backend);
}

// An environment of exactly `vars`, for the init methods.
inline EnvLookup fakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

inline std::string describe(const std::vector<RankFailure>& failures) {
  std::string out;
  for (const auto& f : failures) out += "rank " + std::to_string(f.rank) + ": " + f.message + "\n";
  return out;
}

#define EXPECT_ALL_RANKS_OK(failures) \
  EXPECT_TRUE((failures).empty()) << ::ringmaster::testing::describe(failures)

}  // namespace ringmaster::testing
