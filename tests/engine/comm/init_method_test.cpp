// Init methods: env://, tcp:// and file:// with PyTorch's meanings, and errors that name every
// bad or missing variable.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <thread>

#include "comm/init_method.h"
#include "comm/tcp_store.h"
#include "comm_harness.h"
#include "core/error.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using testing::fakeEnv;

std::string errorOf(const InitOptions& options, const EnvLookup& env) {
  try {
    rendezvous(options, env);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    return e.message();
  }
  return "";
}

int freePort() {
  TcpStoreOptions options;
  options.is_server = true;
  TcpStore probe(options);
  return probe.port();
}

TEST(InitMethod, EnvNamesEveryMissingVariable) {
  std::string message = errorOf({}, fakeEnv({}));
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}) {
    EXPECT_NE(message.find(name), std::string::npos) << name << " in: " << message;
  }
}

TEST(InitMethod, EnvNamesBadValues) {
  std::string message = errorOf({}, fakeEnv({{"MASTER_ADDR", "127.0.0.1"},
                                             {"MASTER_PORT", "70000"},
                                             {"RANK", "one"},
                                             {"WORLD_SIZE", "0"}}));
  EXPECT_NE(message.find("MASTER_PORT='70000'"), std::string::npos) << message;
  EXPECT_NE(message.find("RANK='one'"), std::string::npos) << message;
  EXPECT_NE(message.find("WORLD_SIZE='0'"), std::string::npos) << message;
  EXPECT_EQ(message.find("MASTER_ADDR"), std::string::npos) << message;
}

TEST(InitMethod, RankMustBeBelowWorldSize) {
  std::string message = errorOf({}, fakeEnv({{"MASTER_ADDR", "127.0.0.1"},
                                             {"MASTER_PORT", "29500"},
                                             {"RANK", "4"},
                                             {"WORLD_SIZE", "4"}}));
  EXPECT_NE(message.find("RANK=4 is out of range for WORLD_SIZE=4"), std::string::npos) << message;
}

TEST(InitMethod, TcpAndFileNeedRankAndWorldSize) {
  InitOptions tcp;
  tcp.init_method = "tcp://127.0.0.1:29500";
  std::string message = errorOf(tcp, fakeEnv({}));
  EXPECT_NE(message.find("world_size must be given"), std::string::npos) << message;
  EXPECT_NE(message.find("rank must be given"), std::string::npos) << message;

  InitOptions file;
  file.init_method = "file://relative/path";
  file.rank = 0;
  file.world_size = 1;
  EXPECT_NE(errorOf(file, fakeEnv({})).find("expected file:///ABSOLUTE/PATH"), std::string::npos);
}

TEST(InitMethod, UnknownSchemesAndMalformedUrlsAreNamed) {
  InitOptions bad;
  bad.init_method = "udp://x:1";
  bad.rank = 0;
  bad.world_size = 1;
  EXPECT_NE(errorOf(bad, fakeEnv({})).find("expected env://, tcp://HOST:PORT or file:///PATH"),
            std::string::npos);
  bad.init_method = "tcp://no-port";
  EXPECT_NE(errorOf(bad, fakeEnv({})).find("expected tcp://HOST:PORT"), std::string::npos);
  bad.init_method = "tcp://127.0.0.1:0";
  EXPECT_NE(errorOf(bad, fakeEnv({})).find("is not a port number"), std::string::npos);
}

// Three ranks rendezvous with env:// (rank 0 hosts the TCP store) and see each other's keys.
TEST(InitMethod, EnvRendezvousOfThreeRanks) {
  std::string port = std::to_string(freePort());
  std::vector<std::thread> threads;
  std::vector<std::string> seen(3);
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      auto env = fakeEnv({{"MASTER_ADDR", "127.0.0.1"},
                          {"MASTER_PORT", port},
                          {"RANK", std::to_string(rank)},
                          {"WORLD_SIZE", "3"}});
      InitOptions options;
      options.timeout = 10s;
      Rendezvous rdv = rendezvous(options, env);
      EXPECT_EQ(rdv.rank, rank);
      EXPECT_EQ(rdv.world_size, 3);
      rdv.store->set("hello/" + std::to_string(rank), toBytes("from " + std::to_string(rank)));
      rdv.store->add("arrived", 1);
      rdv.store->wait({"hello/0", "hello/1", "hello/2"});
      seen[static_cast<size_t>(rank)] =
          toString(rdv.store->get("hello/" + std::to_string((rank + 1) % 3)));
      // Rank 0 hosts the store: it leaves only after everyone else has.
      if (rank != 0) {
        rdv.store->add("left", 1);
      } else {
        while (rdv.store->add("left", 0) != 2) std::this_thread::sleep_for(1ms);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(seen[0], "from 1");
  EXPECT_EQ(seen[1], "from 2");
  EXPECT_EQ(seen[2], "from 0");
}

// With TORCHELASTIC_USE_AGENT_STORE=True the launcher hosts the store and every rank, rank 0 too,
// connects to it as a client.
TEST(InitMethod, EnvWithTheAgentsStore) {
  TcpStoreOptions server_options;
  server_options.is_server = true;
  TcpStore agent_store(server_options);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      auto env = fakeEnv({{"MASTER_ADDR", "127.0.0.1"},
                          {"MASTER_PORT", std::to_string(agent_store.port())},
                          {"RANK", std::to_string(rank)},
                          {"WORLD_SIZE", "2"},
                          {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
      InitOptions options;
      options.timeout = 10s;
      Rendezvous rdv = rendezvous(options, env);
      rdv.store->add("arrived", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(agent_store.add("arrived", 0), 2);
}

TEST(InitMethod, FileRendezvousOfTwoRanks) {
  auto path =
      std::filesystem::temp_directory_path() / ("rm_init_file_" + std::to_string(::getpid()));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      InitOptions options;
      options.init_method = "file://" + path.string();
      options.rank = rank;
      options.world_size = 2;
      options.timeout = 10s;
      Rendezvous rdv = rendezvous(options, fakeEnv({}));
      rdv.store->set(std::to_string(rank), toBytes("x"));
      rdv.store->wait({"0", "1"});
      rdv.store->add("done", 1);
      while (toString(rdv.store->get("done")) != "2") std::this_thread::sleep_for(1ms);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(std::filesystem::exists(path));  // the last user removed it
}

TEST(InitMethod, TcpRendezvousWithExplicitRank) {
  int port = freePort();
  std::thread server([&] {
    InitOptions options;
    options.init_method = "tcp://127.0.0.1:" + std::to_string(port);
    options.rank = 0;
    options.world_size = 2;
    Rendezvous rdv = rendezvous(options, fakeEnv({}));
    rdv.store->set("ready", toBytes("1"));
    rdv.store->wait({"bye"});
  });
  InitOptions options;
  options.init_method = "tcp://127.0.0.1:" + std::to_string(port);
  options.rank = 1;
  options.world_size = 2;
  options.timeout = 10s;
  Rendezvous rdv = rendezvous(options, fakeEnv({}));
  EXPECT_EQ(toString(rdv.store->get("ready")), "1");
  rdv.store->set("bye", {});
  server.join();
}

}  // namespace
}  // namespace ringmaster
