// TcpStore: the rendezvous store of env:// and tcp:// init. Rank 0 (is_server) hosts it on a
// listening socket served by one thread; every rank, rank 0 included, talks to it as a client over
// its own connection. Requests are length-prefixed binary messages answered at once; waits poll.
// It does not authenticate peers: like PyTorch's, it belongs on a trusted network.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "comm/store.h"

namespace ringmaster {

struct TcpStoreOptions {
  std::string host = "127.0.0.1";
  int port = 0;            // 0 on the server: choose a free port (read it back with port())
  bool is_server = false;  // host the store in this process
  Millis timeout{std::chrono::seconds(300)};  // connecting, waiting for keys
};

class TcpStore : public Store {
 public:
  explicit TcpStore(const TcpStoreOptions& options);
  ~TcpStore() override;

  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t numKeys() override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;

  // The port the store listens on (the server's choice when options.port was 0).
  int port() const { return port_; }
  const std::string& host() const { return host_; }

 private:
  class Server;
  // Sends one request and returns the reply's payload; serialised by client_mutex_.
  Bytes roundTrip(const Bytes& request);
  void connectClient(Millis timeout);

  std::string host_;
  int port_ = 0;
  std::unique_ptr<Server> server_;
  std::mutex client_mutex_;
  int client_fd_ = -1;  // guarded by client_mutex_
};

}  // namespace ringmaster
