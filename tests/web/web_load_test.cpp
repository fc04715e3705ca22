// The web server's bounds under load (issue 20), proved by what the clients see, never by timing:
// fifty live clients (a stream each, and API requests beside it) are all served while a real run
// records, each receiving that run's events, and the API's shared documents are never older than
// the event a page fetches on; connections past the accept queue's bound are turned away at once
// (503 or closed) while the queued ones are served once a thread frees.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/test_paths.h"
#include "storage/storage_test_support.h"
#include "web_server.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using testing::CapturedProcess;
using web::WebServer;
using web::WebServerOptions;

const std::string kRingmaster = std::string(ringmaster::testBinaryDir()) + "/app/ringmaster";
const std::string kSpec =
    std::string(ringmaster::testSourceDir()) + "/resources/examples/ddp_mlp.json";

template <typename Predicate>
bool waitFor(Predicate predicate, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// One event-stream client on its own thread, keeping the largest `last_step` of each run's `run`
// events and the HTTP status it was answered with.
class LiveClient {
 public:
  explicit LiveClient(int port) : client_("127.0.0.1", port) {
    client_.set_read_timeout(30, 0);
    thread_ = std::thread([this] {
      httplib::Result res = client_.Get(
          "/api/v1/stream",
          [this](const httplib::Response& response) {
            status_ = response.status;
            return true;
          },
          [this](const char* data, size_t size) {
            std::lock_guard lock(mutex_);
            pending_.append(data, size);
            parseLocked();
            return !stop_.load();
          });
      if (res && status_ == 0) status_ = res->status;
    });
  }
  ~LiveClient() { close(); }
  void close() {
    stop_ = true;
    client_.stop();
    if (thread_.joinable()) thread_.join();
  }
  int status() const { return status_; }
  int64_t lastStep(int64_t run_id) const {
    std::lock_guard lock(mutex_);
    return run_id == run_id_ ? last_step_ : -1;
  }
  std::string lastStatus() const {
    std::lock_guard lock(mutex_);
    return last_status_;
  }
  void follow(int64_t run_id) {
    std::lock_guard lock(mutex_);
    run_id_ = run_id;
  }

 private:
  void parseLocked() {
    const std::string head = "event: run\ndata: ";
    size_t end;
    while ((end = pending_.find("\n\n")) != std::string::npos) {
      const std::string frame = pending_.substr(0, end);
      pending_.erase(0, end + 2);
      size_t at = 0;
      while ((at = frame.find(head, at)) != std::string::npos) {
        at += head.size();
        const json event = json::parse(frame.substr(at, frame.find('\n', at) - at));
        if (event["id"].get<int64_t>() != run_id_) continue;
        last_step_ = std::max(last_step_, event["final_step"].get<int64_t>());
        last_status_ = event["status"].get<std::string>();
      }
    }
  }

  httplib::Client client_;
  mutable std::mutex mutex_;
  std::string pending_;
  int64_t run_id_ = -1, last_step_ = -1;
  std::string last_status_;
  std::atomic<int> status_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A raw connection to the server; `send` writes what the test gives, `answer` reads until the
// server closes or `limit` passes.
class RawConnection {
 public:
  explicit RawConnection(int port) : sock_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ =
        sock_ >= 0 && connect(sock_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  ~RawConnection() {
    if (sock_ >= 0) ::close(sock_);
  }
  bool connected() const { return connected_; }
  bool send(const std::string& text) {
    return ::send(sock_, text.data(), text.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(text.size());
  }
  // Whether the server has written or closed anything on this connection yet.
  bool answered() const {
    pollfd fd{sock_, POLLIN, 0};
    return ::poll(&fd, 1, 0) > 0;
  }
  // What the server sends until it closes (or resets) the connection; `closed` says whether it did
  // so within `limit`.
  std::string answer(std::chrono::milliseconds limit, bool& closed) {
    std::string text;
    closed = false;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return text;
      pollfd fd{sock_, POLLIN, 0};
      if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) return text;
      char buffer[4096];
      const ssize_t n = ::recv(sock_, buffer, sizeof buffer, 0);
      if (n <= 0) {
        closed = true;
        return text;
      }
      text.append(buffer, static_cast<size_t>(n));
    }
  }

 private:
  int sock_;
  bool connected_ = false;
};

class WebLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("ringmaster_web_load_{}", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "web");
    std::ofstream(dir_ / "web" / "index.html") << "<!doctype html><title>Ringmaster</title>";
    // A database with one short run, so that the server has something to open.
    CapturedProcess run(kRingmaster,
                        {"--db", dbPath(), "run", kSpec, "--set", "train.steps=2", "-q"});
    const ExitStatus status = run.wait(120s);
    ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.out() << run.err();
  }
  void TearDown() override {
    if (server_) server_->stop();
    fs::remove_all(dir_);
  }

  std::string dbPath() const { return (dir_ / "runs.db").string(); }
  WebServerOptions options() const {
    WebServerOptions o;
    o.db_path = dbPath();
    o.listen = {"127.0.0.1", 0};
    o.assets_dir = (dir_ / "web").string();
    return o;
  }

  fs::path dir_;
  std::unique_ptr<WebServer> server_;
};

TEST_F(WebLoadTest, FiftyLiveClientsAreAllServedWhileARunRecordsAndEachGetsItsEvents) {
  constexpr int kClients = 50;
  server_ = std::make_unique<WebServer>(options());  // the default bounds
  server_->start();
  std::vector<std::unique_ptr<LiveClient>> clients;
  for (int i = 0; i < kClients; ++i)
    clients.push_back(std::make_unique<LiveClient>(server_->port()));
  ASSERT_TRUE(waitFor([&] { return server_->streamClients() == kClients; }, 30s))
      << server_->streamClients() << " of " << kClients << " streams open";
  // The server counts a stream before the client has read its response's headers.
  EXPECT_TRUE(waitFor(
      [&] {
        return std::all_of(clients.begin(), clients.end(),
                           [](const auto& client) { return client->status() != 0; });
      },
      30s));
  for (const auto& client : clients) EXPECT_EQ(client->status(), 200);

  CapturedProcess run(kRingmaster, {"--db", dbPath(), "run", kSpec, "--set", "train.steps=1000000",
                                    "--set", "telemetry.every_steps=1", "-q"});
  int64_t live_id = 0;
  {
    storage::DatabaseOptions read_only;
    read_only.read_only = true;
    ASSERT_TRUE(waitFor(
        [&] {
          storage::Database db(dbPath(), read_only);
          live_id = queryInt(db, "SELECT max(id) FROM runs");
          return live_id > 1;
        },
        60s));
  }
  for (const auto& client : clients) client->follow(live_id);
  // Every client gets the run's progress while the pages' API requests are answered beside the
  // streams: a page's detail and loss series, all fifty at once.
  const bool all_received = waitFor(
      [&] {
        for (const auto& client : clients)
          if (client->lastStep(live_id) < 1) return false;
        return true;
      },
      90s);
  std::vector<int> statuses(kClients, 0);
  {
    std::vector<std::thread> pages;
    for (int i = 0; i < kClients; ++i)
      pages.emplace_back([&, i] {
        httplib::Client api("127.0.0.1", server_->port());
        api.set_read_timeout(30, 0);
        httplib::Result detail = api.Get(fmt::format("/api/v1/runs/{}", live_id).c_str());
        httplib::Result series = api.Get(
            fmt::format("/api/v1/runs/{}/series?metric=loss&buckets=1000", live_id).c_str());
        statuses[i] = detail && series ? std::max(detail->status, series->status) : -1;
      });
    for (std::thread& page : pages) page.join();
  }
  run.signal(SIGINT);
  const ExitStatus stopped = run.wait(60s);
  EXPECT_EQ(stopped.signal, 0) << stopped.describe();  // cancelled by SIGINT: exit code 130
  // The run's end reaches the streams, and an API request made after that event says so: the
  // documents the pages share were made after the change the event announces, never before.
  ASSERT_TRUE(waitFor([&] { return clients[0]->lastStatus() == "cancelled"; }, 30s))
      << clients[0]->lastStatus();
  {
    httplib::Client api("127.0.0.1", server_->port());
    api.set_read_timeout(30, 0);
    httplib::Result detail = api.Get(fmt::format("/api/v1/runs/{}", live_id).c_str());
    ASSERT_TRUE(detail);
    EXPECT_EQ(json::parse(detail->body)["run"]["status"], "cancelled");
  }

  EXPECT_TRUE(all_received);
  for (int i = 0; i < kClients; ++i) {
    EXPECT_GE(clients[i]->lastStep(live_id), 1) << "client " << i << " got no run event";
    EXPECT_EQ(statuses[i], 200) << "page " << i;
  }
  EXPECT_EQ(server_->streamClients(), kClients);
  EXPECT_EQ(server_->connections().refused, 0);
}

TEST_F(WebLoadTest, ConnectionsPastTheQueueBoundAreTurnedAwayAndTheQueuedOnesServed) {
  WebServerOptions o = options();
  o.max_connections = 2;
  o.max_streams = 1;
  o.max_queued_connections = 2;
  o.io_timeout = 60s;  // a half-sent request holds its thread for the whole test
  server_ = std::make_unique<WebServer>(o);
  server_->start();
  const int port = server_->port();

  // Both threads busy with requests that never finish.
  auto busy_a = std::make_unique<RawConnection>(port);
  RawConnection busy_b(port);
  ASSERT_TRUE(busy_a->connected() && busy_b.connected());
  ASSERT_TRUE(busy_a->send("GET /api/v1/runs HTTP/1.1\r\n") &&
              busy_b.send("GET /api/v1/runs HTTP/1.1\r\n"));
  ASSERT_TRUE(waitFor([&] { return server_->connections().serving == 2; }, 10s));
  // Two complete requests wait in the queue.
  const std::string request = "GET /api/v1/runs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  RawConnection queued_a(port), queued_b(port);
  ASSERT_TRUE(queued_a.connected() && queued_b.connected());
  ASSERT_TRUE(queued_a.send(request) && queued_b.send(request));
  ASSERT_TRUE(waitFor([&] { return server_->connections().queued == 2; }, 10s));

  // The next is turned away at once: a 503 naming the queue, then closed (or reset before the
  // client read it); never left waiting.
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    RawConnection refused(port);
    ASSERT_TRUE(refused.connected());
    refused.send(request);
    bool closed = false;
    const std::string answer = refused.answer(30s, closed);
    EXPECT_TRUE(closed) << "the connection past the queue was left open: " << answer;
    EXPECT_TRUE(answer.empty() || answer.starts_with("HTTP/1.1 503")) << answer;
    if (!answer.empty()) {
      EXPECT_NE(answer.find("Retry-After: 5"), std::string::npos) << answer;
      EXPECT_NE(answer.find("Content-Security-Policy"), std::string::npos) << answer;
    }
    EXPECT_EQ(server_->connections().refused, i + 1);
  }
  EXPECT_FALSE(queued_a.answered());
  EXPECT_FALSE(queued_b.answered());
  EXPECT_EQ(server_->connections().queued, 2);

  // One stuck client goes; the queued requests are served in full on its thread, one after the
  // other.
  busy_a.reset();
  for (RawConnection* queued : {&queued_a, &queued_b}) {
    bool closed = false;
    const std::string answer = queued->answer(30s, closed);
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 200")) << answer;
    EXPECT_NE(answer.find("\"runs\""), std::string::npos) << answer;
  }
}

}  // namespace
}  // namespace ringmaster
