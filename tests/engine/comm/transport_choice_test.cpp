// Issue 36: which CPU transport a group takes. Ranks that all run on this host use shared memory;
// RINGMASTER_COMM_SHM=0 in any one rank's environment (or ProcessGroupOptions::shared_memory off)
// keeps the whole group on Gloo's TCP, every rank agreeing; either way the group then works.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm_harness.h"
#include "comm_values.h"

namespace ringmaster {
namespace {

using namespace ringmaster::testing;

// Makes a 3-rank group whose rank r sees `env_of(r)` and wants shared memory unless
// `option_off_rank` is r; returns each rank's backend name after one all_reduce checked.
std::vector<std::string> backendsChosen(const std::function<EnvLookup(int)>& env_of,
                                        int option_off_rank = -1) {
  constexpr int kWorld = 3;
  TcpStoreOptions server_options;
  server_options.is_server = true;
  auto server = std::make_shared<TcpStore>(server_options);
  std::vector<std::string> names(kWorld);
  std::vector<std::string> errors;
  std::mutex mutex;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        Rendezvous rdv;
        rdv.rank = rank;
        rdv.world_size = kWorld;
        rdv.master_host = "127.0.0.1";
        if (rank == 0) {
          rdv.store = server;
        } else {
          TcpStoreOptions client;
          client.port = server->port();
          rdv.store = std::make_shared<TcpStore>(client);
        }
        ProcessGroupOptions options;
        options.comm.timeout = std::chrono::seconds(60);
        options.shared_memory = rank != option_off_rank;
        auto comm = makeCommunicator(rdv, options, env_of(rank));
        Tensor t = makeTensor(DType::kF32, 5, [&](int64_t i) { return rank + i; });
        comm->allReduce(t)->wait();
        EXPECT_EQ(values(t), (std::vector<double>{3, 6, 9, 12, 15}));
        names[static_cast<size_t>(rank)] = comm->backendName();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        errors.push_back(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(errors.empty()) << errors.front();
  return names;
}

const std::vector<std::string> kAllShm{"shm", "shm", "shm"};
const std::vector<std::string> kAllGloo{"gloo", "gloo", "gloo"};

TEST(TransportChoice, RanksOnThisHostUseSharedMemory) {
  EXPECT_EQ(backendsChosen([](int) { return fakeEnv({}); }), kAllShm);
  EXPECT_EQ(backendsChosen([](int) { return fakeEnv({{"RINGMASTER_COMM_SHM", "1"}}); }), kAllShm);
}

TEST(TransportChoice, OneRankAskingForTcpKeepsTheWholeGroupOnGloo) {
  for (int off = 0; off < 3; ++off) {
    SCOPED_TRACE("rank " + std::to_string(off) + " sets RINGMASTER_COMM_SHM=0");
    EXPECT_EQ(backendsChosen([&](int rank) {
                return rank == off ? fakeEnv({{"RINGMASTER_COMM_SHM", "0"}}) : fakeEnv({});
              }),
              kAllGloo);
  }
  EXPECT_EQ(backendsChosen([](int) { return fakeEnv({{"RINGMASTER_COMM_SHM", "0"}}); }), kAllGloo);
}

TEST(TransportChoice, OneRankTurningTheOptionOffKeepsTheWholeGroupOnGloo) {
  EXPECT_EQ(backendsChosen([](int) { return fakeEnv({}); }, 2), kAllGloo);
}

}  // namespace
}  // namespace ringmaster
