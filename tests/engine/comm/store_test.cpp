// The stores behind init methods: TcpStore (rank 0 hosts, every rank a client) and FileStore,
// checked against the same c10d semantics, including concurrent adds and wait timeouts.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <thread>

#include "comm/file_store.h"
#include "comm/tcp_store.h"
#include "core/error.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;

// Makes the n-th handle on one shared store: for TCP the first hosts it, for files they share a
// path.
class StoreFactory {
 public:
  explicit StoreFactory(bool tcp) : tcp_(tcp) {
    path_ = std::filesystem::temp_directory_path() /
            ("rm_store_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::remove(path_);
  }
  std::shared_ptr<Store> make(Millis timeout = 5s) {
    if (!tcp_) return std::make_shared<FileStore>(path_.string(), timeout);
    TcpStoreOptions options;
    options.timeout = timeout;
    if (!server_) {
      options.is_server = true;
      auto store = std::make_shared<TcpStore>(options);
      server_ = store;
      return store;
    }
    options.port = server_->port();
    return std::make_shared<TcpStore>(options);
  }
  ~StoreFactory() { std::filesystem::remove(path_); }

 private:
  static inline int counter_ = 0;
  bool tcp_;
  std::filesystem::path path_;
  std::shared_ptr<TcpStore> server_;
};

class StoreTest : public ::testing::TestWithParam<bool> {
 protected:
  StoreFactory factory_{GetParam()};
};

TEST_P(StoreTest, SetThenGetFromAnotherHandle) {
  auto a = factory_.make();
  auto b = factory_.make();
  a->set("key", toBytes("value"));
  EXPECT_EQ(toString(b->get("key")), "value");
  a->set("key", toBytes(""));  // an empty value is a value
  EXPECT_EQ(toString(b->get("key")), "");
  Bytes binary{0, 1, 255, 0, 7};
  b->set("bin", binary);
  EXPECT_EQ(a->get("bin"), binary);
}

TEST_P(StoreTest, GetWaitsForALaterSet) {
  auto a = factory_.make();
  auto b = factory_.make();
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    a->set("late", toBytes("here"));
  });
  EXPECT_EQ(toString(b->get("late")), "here");
  setter.join();
}

TEST_P(StoreTest, AddCountsFromZeroAndIsAtomicAcrossHandles) {
  auto first = factory_.make();
  EXPECT_EQ(first->add("counter", 5), 5);
  EXPECT_EQ(first->add("counter", -2), 3);
  std::vector<std::shared_ptr<Store>> handles;
  for (int i = 0; i < 4; ++i) handles.push_back(factory_.make());
  std::vector<std::thread> threads;
  for (auto& h : handles) {
    threads.emplace_back([&h] {
      for (int i = 0; i < 50; ++i) h->add("counter", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(first->add("counter", 0), 3 + 4 * 50);
  EXPECT_EQ(toString(first->get("counter")), "203");
}

TEST_P(StoreTest, AddOnANonIntegerIsAnError) {
  auto s = factory_.make();
  s->set("text", toBytes("abc"));
  EXPECT_THROW(s->add("text", 1), Error);
  EXPECT_EQ(s->add("fine", 1), 1);  // and the store still works
}

TEST_P(StoreTest, CompareSetFollowsC10d) {
  auto s = factory_.make();
  // Absent key with an empty expected value: set.
  EXPECT_EQ(toString(s->compareSet("k", {}, toBytes("v1"))), "v1");
  // Wrong expected value: unchanged, returns the current value.
  EXPECT_EQ(toString(s->compareSet("k", toBytes("nope"), toBytes("v2"))), "v1");
  // Right expected value: swapped.
  EXPECT_EQ(toString(s->compareSet("k", toBytes("v1"), toBytes("v2"))), "v2");
  EXPECT_EQ(toString(s->get("k")), "v2");
  // Absent key with a non-empty expected value: nothing set, the expected value comes back.
  EXPECT_EQ(toString(s->compareSet("absent", toBytes("x"), toBytes("y"))), "x");
  EXPECT_FALSE(s->check({"absent"}));
}

TEST_P(StoreTest, DeleteCheckAndNumKeys) {
  auto s = factory_.make();
  EXPECT_EQ(s->numKeys(), 0);
  s->set("a", toBytes("1"));
  s->set("b", toBytes("2"));
  EXPECT_EQ(s->numKeys(), 2);
  EXPECT_TRUE(s->check({"a", "b"}));
  EXPECT_FALSE(s->check({"a", "c"}));
  EXPECT_TRUE(s->deleteKey("a"));
  EXPECT_FALSE(s->deleteKey("a"));
  EXPECT_FALSE(s->check({"a"}));
  EXPECT_EQ(s->numKeys(), 1);
}

TEST_P(StoreTest, WaitTimesOutNamingTheMissingKeys) {
  auto s = factory_.make(200ms);
  s->set("present", toBytes("1"));
  try {
    s->wait({"present", "missing"}, 150ms);
    FAIL() << "wait returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
    EXPECT_NE(e.message().find("missing"), std::string::npos) << e.message();
    EXPECT_EQ(e.message().find("present"), std::string::npos) << e.message();
  }
  EXPECT_THROW(s->get("never"), Error);  // get waits at most the store's timeout
}

TEST_P(StoreTest, PrefixStoreScopesKeys) {
  auto base = factory_.make();
  PrefixStore group("group1", base);
  group.set("x", toBytes("inner"));
  base->set("x", toBytes("outer"));
  EXPECT_EQ(toString(group.get("x")), "inner");
  EXPECT_EQ(toString(base->get("group1/x")), "inner");
  EXPECT_EQ(group.add("n", 2), 2);
  EXPECT_TRUE(group.check({"x", "n"}));
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Tcp" : "File"; });

TEST(TcpStore, ClientGivesUpWhenNoServerComesUp) {
  // Find a port nobody listens on: host a store, note its port, close it.
  int port;
  {
    TcpStoreOptions options;
    options.is_server = true;
    options.timeout = 1s;
    TcpStore server(options);
    port = server.port();
  }
  TcpStoreOptions client;
  client.port = port;
  client.timeout = 300ms;
  try {
    TcpStore store(client);
    FAIL() << "connected to nothing";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
    EXPECT_NE(e.message().find(std::to_string(port)), std::string::npos) << e.message();
  }
}

TEST(TcpStore, ClientSeesTheServerGoAway) {
  TcpStoreOptions options;
  options.is_server = true;
  auto server = std::make_unique<TcpStore>(options);
  TcpStoreOptions client_options;
  client_options.port = server->port();
  TcpStore client(client_options);
  client.set("k", toBytes("v"));
  server.reset();
  try {
    client.set("k", toBytes("v2"));
    FAIL() << "set succeeded without a server";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kComm);
  }
}

TEST(TcpStore, ServesIpv6Loopback) {
  TcpStoreOptions options;
  options.host = "::1";
  options.is_server = true;
  std::unique_ptr<TcpStore> server;
  try {
    server = std::make_unique<TcpStore>(options);
  } catch (const Error& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.message();
  }
  TcpStoreOptions client;
  client.host = "::1";
  client.port = server->port();
  TcpStore store(client);
  store.set("six", toBytes("6"));
  EXPECT_EQ(toString(server->get("six")), "6");
}

TEST(FileStore, LastUserRemovesTheFile) {
  auto path =
      std::filesystem::temp_directory_path() / ("rm_store_last_" + std::to_string(::getpid()));
  {
    FileStore a(path.string());
    {
      FileStore b(path.string());
      b.set("k", toBytes("v"));
    }
    EXPECT_TRUE(std::filesystem::exists(path));
    EXPECT_EQ(toString(a.get("k")), "v");
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace ringmaster
