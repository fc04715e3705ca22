// The HTTP side: cpp-httplib's server with a fixed thread pool behind a bounded queue, the token
// check and security headers before routing, the assets listed once at start-up, the API and the
// event stream. Bodies go out as they are: nothing is compressed per request.
#include "web_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <httplib.h>

#include "core/error.h"
#include "db/database.h"
#include "live_feed.h"

namespace ringmaster::web {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Asset {
  std::string content_type;
  std::shared_ptr<const std::string> body;
};

std::string contentTypeOf(const fs::path& path) {
  static const std::map<std::string, std::string> kTypes = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".woff2", "font/woff2"},
      {".txt", "text/plain; charset=utf-8"}};
  const auto found = kTypes.find(path.extension().string());
  return found != kTypes.end() ? found->second : "application/octet-stream";
}

// Every regular file under `dir` (symbolic links are not followed), by its name relative to `dir`
// with '/' separators, read into memory once: a URL is only ever looked up in this table.
std::map<std::string, Asset> listAssets(const std::string& dir) {
  std::map<std::string, Asset> assets;
  if (dir.empty()) return assets;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    RM_THROW(kInvalidArgument, fmt::format("--assets {}: not a directory", dir));
  constexpr size_t kMaxTotal = size_t{256} << 20;
  size_t total = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::ostringstream body;
    body << in.rdbuf();
    if (!in) RM_THROW(kIo, fmt::format("reading the asset {}", it->path().string()));
    Asset asset{contentTypeOf(it->path()), std::make_shared<const std::string>(body.str())};
    total += asset.body->size();
    if (total > kMaxTotal)
      RM_THROW(kInvalidArgument, fmt::format("--assets {}: more than 256 MiB of files", dir));
    assets.emplace(fs::relative(it->path(), dir).generic_string(), std::move(asset));
  }
  if (ec) RM_THROW(kIo, fmt::format("--assets {}: {}", dir, ec.message()));
  return assets;
}

// A body sent as it is. cpp-httplib 0.11.4 compresses a text or JSON body given by set_content on
// every request whose client accepts it, with Brotli at quality 11 when the client accepts br, as
// browsers do: 0.1-1.3 s of CPU for the 145 KiB chart library under load, on the threads the API
// needs. A body given by a provider of known length goes out uncompressed.
void setBody(httplib::Response& res, std::shared_ptr<const std::string> body,
             const std::string& content_type) {
  if (body->empty()) return res.set_content("", content_type);
  const size_t size = body->size();
  res.set_content_provider(
      size, content_type,
      [body = std::move(body)](size_t offset, size_t length, httplib::DataSink& sink) {
        return sink.write(body->data() + offset, length);
      });
}

std::string errorDocument(int status, const std::string& message) {
  return json{{"error", {{"status", status}, {"message", message}}}}.dump();
}

void setError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  setBody(res, std::make_shared<const std::string>(errorDocument(status, message)),
          "application/json");
}

// A write is a POST or DELETE below /api/v1/runs/ (api.h, handleApiWrite).
bool isWrite(const httplib::Request& req) {
  return (req.method == "POST" || req.method == "DELETE") &&
         req.path.rfind("/api/v1/runs/", 0) == 0;
}

// The name in a Host header: "127.0.0.1:8765" is 127.0.0.1, "[::1]:8765" is ::1.
std::string hostName(const std::string& host) {
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    return close == std::string::npos ? host : host.substr(1, close - 1);
  }
  return host.substr(0, host.find(':'));
}

// Why a write is refused as not coming from the server's own page; empty when it may go on. A
// browser sends Origin with every POST and DELETE: it must be this server as the Host header
// names it, and Sec-Fetch-Site, where sent, "same-origin". A POST's body must be JSON, which a
// page of another origin cannot send without a preflight (OPTIONS), which this server never
// grants. Without a token (a loopback address) the Host must be a loopback name, so that a name
// of another site that resolves to this machine (DNS rebinding) writes nothing. A client that is
// no browser (curl) sends no Origin and passes on the token rule alone.
std::string sameOriginWriteRefusal(const httplib::Request& req, bool loopback_without_token) {
  const std::string host = req.get_header_value("Host");
  const std::string origin = req.get_header_value("Origin");
  if (!origin.empty() && origin != "http://" + host)
    return "a write must come from the dashboard's own page (its Origin is another site)";
  const std::string fetch_site = req.get_header_value("Sec-Fetch-Site");
  if (!fetch_site.empty() && fetch_site != "same-origin")
    return "a write must come from the dashboard's own page (Sec-Fetch-Site: " +
           fetch_site.substr(0, 32) + ")";
  if (req.method == "POST" &&
      req.get_header_value("Content-Type").rfind("application/json", 0) != 0)
    return "a write's body must be JSON (Content-Type: application/json)";
  if (loopback_without_token) {
    const std::string name = hostName(host);
    if (name != "localhost" && !isLoopbackAddress(name))
      return "a write without a token must name this machine (Host: localhost or a loopback "
             "address)";
  }
  return {};
}

std::optional<std::string> queryParameter(const httplib::Request& req, const std::string& name) {
  if (!req.has_param(name.c_str())) return std::nullopt;
  return req.get_param_value(name.c_str());
}

// --- API documents ---------------------------------------------------------------------------

// The API's documents of the database as the live feed last saw it: a request for the same path and
// parameters in the same generation (LiveFeed::generation, one poll interval at most while a run
// records) gets the document already made, and requests arriving while it is made wait for that
// one. Fifty live pages refreshing on the same `run` event cost one query, not fifty. A generation
// ends when the poller sees the database change, before the stream tells anyone, so a page
// fetching after an event never gets a document older than that event. Holds the current
// generation's documents only, at most kEntries of at most kMaxBytes each.
class DocumentCache {
 public:
  using Document = std::shared_ptr<const std::string>;
  static constexpr size_t kEntries = 64;
  static constexpr size_t kMaxBytes = size_t{2} << 20;

  Document get(const std::string& key, uint64_t generation,
               const std::function<std::string()>& make) {
    std::promise<Document> promise;
    std::shared_future<Document> document;
    bool mine = false;
    {
      std::lock_guard lock(mutex_);
      if (generation != generation_) {  // older ones can never be asked for again
        entries_.clear();
        generation_ = generation;
      }
      const auto found = entries_.find(key);
      if (found != entries_.end()) {
        document = found->second;
      } else {
        document = promise.get_future().share();
        mine = true;
        if (entries_.size() < kEntries) entries_.emplace(key, document);
      }
    }
    if (mine) {
      try {
        promise.set_value(std::make_shared<const std::string>(make()));
      } catch (...) {
        promise.set_exception(std::current_exception());
      }
      // Refusals and large documents are not kept (the waiters have them).
      const bool keep = document.wait_for(std::chrono::seconds(0)) == std::future_status::ready &&
                        !hasException(document) && document.get()->size() <= kMaxBytes;
      if (!keep) {
        std::lock_guard lock(mutex_);
        const auto found = entries_.find(key);
        if (found != entries_.end() && generation_ == generation) entries_.erase(found);
      }
    }
    return document.get();  // rethrows make()'s exception
  }

  // After a write: nothing made before it is served again (a document being made now is not
  // kept either: only its waiters get it).
  void clear() {
    std::lock_guard lock(mutex_);
    entries_.clear();
  }

 private:
  static bool hasException(const std::shared_future<Document>& document) {
    try {
      document.get();
      return false;
    } catch (...) {
      return true;
    }
  }

  std::mutex mutex_;
  uint64_t generation_ = 0;
  std::map<std::string, std::shared_future<Document>> entries_;
};

// --- connections ---------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

// Set on the listening thread while it turns away a connection the queue has no room for.
thread_local bool t_refusing = false;

// Waits until `sock` is ready for `events` or `timeout` passes; false on a timeout or an error.
bool waitReady(int sock, short events, std::chrono::milliseconds timeout) {
  pollfd fd{sock, events, 0};
  const Clock::time_point deadline = Clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const int ready = ::poll(&fd, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (ready > 0) return true;
    if (ready == 0 || errno != EINTR) return false;
  }
}

void socketAddress(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t size = sizeof address;
  auto* raw = reinterpret_cast<sockaddr*>(&address);
  if ((peer ? getpeername(sock, raw, &size) : getsockname(sock, raw, &size)) != 0) return;
  char host[NI_MAXHOST], service[NI_MAXSERV];
  if (getnameinfo(raw, size, host, sizeof host, service, sizeof service,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return;
  ip = host;
  port = std::atoi(service);
}

// A connection as cpp-httplib's Stream: reads buffered (the request parser reads a byte at a time),
// every wait one poll() bounded by the read or write timeout, writes that never raise SIGPIPE.
class SocketStream final : public httplib::Stream {
 public:
  SocketStream(int sock, std::chrono::milliseconds read_timeout,
               std::chrono::milliseconds write_timeout)
      : sock_(sock), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  bool buffered() const { return begin_ < end_; }

  bool is_readable() const override {
    return buffered() || waitReady(sock_, POLLIN, read_timeout_);
  }
  // Writable within the write timeout, and the client has not closed its end.
  bool is_writable() const override {
    if (!waitReady(sock_, POLLOUT, write_timeout_)) return false;
    char byte;
    const ssize_t peeked = ::recv(sock_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return peeked > 0 || (peeked < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  }

  ssize_t read(char* ptr, size_t size) override {
    if (!buffered()) {
      if (!waitReady(sock_, POLLIN, read_timeout_)) return -1;
      if (size >= buffer_.size()) return receive(ptr, size);
      const ssize_t received = receive(buffer_.data(), buffer_.size());
      if (received <= 0) return received;
      begin_ = 0;
      end_ = static_cast<size_t>(received);
    }
    const size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_.data() + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  // Some of `ptr`, as soon as the socket takes it; -1 when it takes nothing for the write timeout.
  ssize_t write(const char* ptr, size_t size) override {
    const Clock::time_point deadline = Clock::now() + write_timeout_;
    for (;;) {
      const ssize_t sent = ::send(sock_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent >= 0) return sent;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 || !waitReady(sock_, POLLOUT, left)) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    socketAddress(sock_, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    socketAddress(sock_, false, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  ssize_t receive(char* ptr, size_t size) {
    for (;;) {
      const ssize_t received = ::recv(sock_, ptr, size, MSG_DONTWAIT);
      if (received >= 0 || errno != EINTR) return received;
    }
  }

  const int sock_;
  const std::chrono::milliseconds read_timeout_, write_timeout_;
  std::array<char, 4096> buffer_{};
  size_t begin_ = 0, end_ = 0;
};

// cpp-httplib's server with its per-connection loop replaced: 0.11.4's waits for a keep-alive
// connection's next request by polling every 10 ms (a hundred wake-ups a second per idle
// connection), and its listening socket's backlog is 5, so a burst of connections has its SYNs
// dropped and waits a second for the retry. Here an idle connection sleeps in one poll() until its
// next request, its keep-alive timeout or the server's stop; a connection turned away by the queue
// (t_refusing) gets a 503 without being read, and is closed.
class HttpServer final : public httplib::Server {
 public:
  HttpServer() {
    if (::pipe2(stop_pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
      RM_THROW(kIo, fmt::format("creating the web server's stop pipe: {}", std::strerror(errno)));
  }
  ~HttpServer() override {
    ::close(stop_pipe_[0]);
    ::close(stop_pipe_[1]);
  }

  void setTimeouts(std::chrono::milliseconds io_timeout, std::chrono::seconds keep_alive) {
    io_timeout_ = io_timeout;
    keep_alive_ = keep_alive;
  }
  // The complete response sent to a connection turned away.
  void setRefusal(std::string response) { refusal_ = std::move(response); }
  // After binding: how many connections the kernel holds before the listening thread accepts them.
  bool setBacklog(int backlog) { return ::listen(svr_sock_, backlog) == 0; }
  // Idle keep-alive connections stop waiting for a next request (the server is stopping).
  void wakeIdleConnections() {
    const char byte = 1;
    [[maybe_unused]] const ssize_t written = ::write(stop_pipe_[1], &byte, 1);
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    bool ok = false;
    if (t_refusing) {
      char request[4096];  // what already came, so that the close is no reset where possible
      [[maybe_unused]] const ssize_t received = ::recv(sock, request, sizeof request, MSG_DONTWAIT);
      ::send(sock, refusal_.data(), refusal_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::shutdown(sock, SHUT_WR);
    } else {
      const int yes = 1;
      setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);  // headers, then the body
      SocketStream stream(sock, io_timeout_, io_timeout_);
      for (size_t left = keep_alive_max_count_; left > 0 && nextRequest(stream, sock); --left) {
        bool closed = false;
        ok = process_request(stream, left == 1, closed, nullptr);
        if (!ok || closed) break;
      }
      ::shutdown(sock, SHUT_RDWR);
    }
    ::close(sock);
    return ok;
  }

  // Whether a request comes on `sock` before its keep-alive timeout and the server's stop.
  bool nextRequest(const SocketStream& stream, int sock) const {
    if (svr_sock_ == INVALID_SOCKET) return false;
    if (stream.buffered()) return true;
    pollfd fds[2] = {{sock, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    const Clock::time_point deadline = Clock::now() + keep_alive_;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      const int ready = ::poll(fds, 2, static_cast<int>(std::max<int64_t>(left.count(), 0)));
      if (ready > 0) return fds[1].revents == 0 && fds[0].revents != 0;
      if (ready == 0 || errno != EINTR) return false;
    }
  }

  int stop_pipe_[2] = {-1, -1};
  std::chrono::milliseconds io_timeout_{5000};
  std::chrono::seconds keep_alive_{2};
  std::string refusal_;
};

// The connection threads: a fixed pool taking accepted connections from a queue of at most
// `max_queued`. A connection past it is turned away on the listening thread at once (a 503, closed)
// rather than waiting behind the others for as long as they take.
class ConnectionPool final : public httplib::TaskQueue {
 public:
  struct Counts {
    std::atomic<int> serving{0}, queued{0};
    std::atomic<int64_t> refused{0};
  };

  ConnectionPool(size_t threads, size_t max_queued, Counts& counts)
      : max_queued_(max_queued), counts_(counts) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }

  void enqueue(std::function<void()> connection) override {
    {
      std::lock_guard lock(mutex_);
      if (queue_.size() < max_queued_) {
        queue_.push_back(std::move(connection));
        counts_.queued.store(static_cast<int>(queue_.size()));
        ready_.notify_one();
        return;
      }
    }
    counts_.refused.fetch_add(1);
    t_refusing = true;
    connection();  // HttpServer::process_and_close_socket: the 503, then the close
    t_refusing = false;
  }

  // Serves what is queued (the server sees it is stopping and closes it) and joins the threads.
  void shutdown() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> connection;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        connection = std::move(queue_.front());
        queue_.pop_front();
        counts_.queued.store(static_cast<int>(queue_.size()));
        counts_.serving.fetch_add(1);
      }
      connection();
      counts_.serving.fetch_sub(1);
    }
  }

  const size_t max_queued_;
  Counts& counts_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

struct WebServer::Impl {
  WebServerOptions options;
  std::map<std::string, Asset> assets;
  HttpServer server;
  std::unique_ptr<LiveFeed> feed;
  DocumentCache documents;
  std::thread listener;
  std::atomic<int> streams{0};
  ConnectionPool::Counts connections;
  int port = 0;
  bool started = false, stopped = false;

  void route();
  void configureConnections();
  void checkTokenFirst();
  void routePages();
  void routeApi();
  void routeWrites();
  void answerErrorsAsJson();
  void serveStream(const httplib::Request& req, httplib::Response& res);
};

WebServer::WebServer(WebServerOptions options) : impl_(std::make_unique<Impl>()) {
  if (tokenRequired(options.listen) && !options.token)
    RM_THROW(kInvalidArgument,
             fmt::format("listening on {} (not a loopback address) needs an access token",
                         options.listen.host));
  if (options.token && options.token->empty())
    RM_THROW(kInvalidArgument, "the access token is empty");
  std::error_code ec;
  if (!fs::is_regular_file(options.db_path, ec))
    RM_THROW(kInvalidArgument,
             fmt::format("no run database at {}: the file does not exist (`ringmaster run SPEC` "
                         "creates it; --db names another)",
                         options.db_path));
  {
    storage::DatabaseOptions db_options;
    db_options.read_only = true;
    storage::Database check(options.db_path, db_options);  // a newer schema fails here, once
  }
  if (options.max_streams >= options.max_connections)
    RM_THROW(kInvalidArgument, "max_streams must leave connections for the API");
  if (options.max_streams < 0 || options.max_queued_connections < 1)
    RM_THROW(kInvalidArgument, "max_streams and max_queued_connections must be positive");
  impl_->assets = listAssets(options.assets_dir);
  impl_->options = std::move(options);
}

WebServer::~WebServer() {
  stop();
}

// Every route and setting of the HTTP server, by concern.
void WebServer::Impl::route() {
  configureConnections();
  checkTokenFirst();
  routePages();
  routeApi();
  routeWrites();
  answerErrorsAsJson();
}

// The connection pool and its bound, the timeouts, the socket options and the security headers.
void WebServer::Impl::configureConnections() {
  const WebServerOptions& o = options;
  const size_t threads = static_cast<size_t>(o.max_connections);
  const size_t max_queued = static_cast<size_t>(o.max_queued_connections);
  server.new_task_queue = [this, threads, max_queued] {
    return new ConnectionPool(threads, max_queued, connections);
  };
  const auto seconds = [](std::chrono::milliseconds d) { return d.count() / 1000; };
  const auto micros = [](std::chrono::milliseconds d) { return (d.count() % 1000) * 1000; };
  // The listening thread's SO_RCVTIMEO / SO_SNDTIMEO on accepted sockets; HttpServer's own stream
  // waits with poll() for io_timeout.
  server.set_read_timeout(seconds(o.io_timeout), micros(o.io_timeout));
  server.set_write_timeout(seconds(o.io_timeout), micros(o.io_timeout));
  server.setTimeouts(o.io_timeout, std::chrono::seconds(2));
  server.set_keep_alive_max_count(100);
  server.set_tcp_nodelay(true);
  {
    const std::string body =
        errorDocument(503, fmt::format("the server is busy ({} connections waiting), try again",
                                       o.max_queued_connections));
    server.setRefusal(fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Content-Length: {}\r\nRetry-After: 5\r\nCache-Control: no-store\r\n"
        "Content-Security-Policy: {}\r\nX-Content-Type-Options: nosniff\r\n"
        "Referrer-Policy: no-referrer\r\nX-Frame-Options: DENY\r\nConnection: close\r\n\r\n{}",
        body.size(), kContentSecurityPolicy, body));
  }
  server.set_payload_max_length(o.max_request_bytes);
  const int send_buffer = o.socket_send_buffer;
  server.set_socket_options([send_buffer](socket_t sock) {
    // SO_REUSEADDR only: cpp-httplib's default also sets SO_REUSEPORT, with which a second server
    // binds the same port and takes a share of the connections.
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    // Accepted connections inherit the listening socket's buffer size.
    if (send_buffer > 0) setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof send_buffer);
  });
  server.set_default_headers({{"Content-Security-Policy", kContentSecurityPolicy},
                              {"X-Content-Type-Options", "nosniff"},
                              {"Referrer-Policy", "no-referrer"},
                              {"X-Frame-Options", "DENY"}});
}

// The token, on every request: API, stream and pages alike (and only GET or HEAD).
void WebServer::Impl::checkTokenFirst() {
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const bool write = isWrite(req);
    if (req.method != "GET" && req.method != "HEAD" && !(write && options.allow_writes)) {
      setError(res, 405,
               fmt::format("method {} not allowed: the dashboard is read-only{}",
                           req.method.substr(0, 16),
                           options.allow_writes
                               ? " but for POST and DELETE below /api/v1/runs/ (docs/web.md)"
                               : ""));
      res.set_header("Connection", "close");  // a body it sent is not read
      return httplib::Server::HandlerResponse::Handled;
    }
    if (write) {
      if (const std::string why = sameOriginWriteRefusal(req, !options.token); !why.empty()) {
        setError(res, 403, why);
        // Its body is not read: the connection cannot carry another request after it.
        res.set_header("Connection", "close");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (!options.token) return httplib::Server::HandlerResponse::Unhandled;
    const std::optional<std::string> from_query = queryParameter(req, "token");
    const std::optional<std::string> presented = presentedToken(
        req.get_header_value("Authorization"), from_query, req.get_header_value("Cookie"));
    if (!presented || !constantTimeEquals(*presented, *options.token)) {
      setError(res, 401,
               presented ? "wrong access token"
                         : "an access token is required (Authorization: Bearer TOKEN or ?token=)");
      res.set_header("WWW-Authenticate", "Bearer");
      return httplib::Server::HandlerResponse::Handled;
    }
    // A page opened with ?token= loads its scripts and styles without it: they carry the cookie.
    if (from_query && req.get_header_value("Authorization").empty())
      res.set_header("Set-Cookie", fmt::format("{}={}; HttpOnly; SameSite=Strict; Path=/",
                                               kTokenCookie, *options.token));
    return httplib::Server::HandlerResponse::Unhandled;
  });
}

// The page and its assets, only ever looked up in the table listed at start-up.
void WebServer::Impl::routePages() {
  const auto serveAsset = [this](const std::string& name, httplib::Response& res) {
    const auto found = assets.find(name);
    if (found == assets.end()) return setError(res, 404, "no such page or asset");
    res.set_header("Cache-Control", "no-cache");
    setBody(res, found->second.body, found->second.content_type);
  };
  server.Get("/", [serveAsset](const httplib::Request&, httplib::Response& res) {
    serveAsset("index.html", res);
  });
  server.Get(R"(/assets/(.+))", [serveAsset](const httplib::Request& req, httplib::Response& res) {
    serveAsset(req.matches[1].str(), res);
  });
}

// The event stream, and every document below /api/v1 (api.h), shared per live-feed generation.
void WebServer::Impl::routeApi() {
  server.Get("/api/v1/stream", [this](const httplib::Request& req, httplib::Response& res) {
    serveStream(req, res);
  });
  server.Get(R"(/api/v1(/.*))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string path = req.matches[1].str();
    std::string key = path;
    for (const auto& [name, value] : req.params) key += fmt::format("\n{}={}", name, value);
    try {
      DocumentCache::Document document =
          documents.get(key, feed->generation(), [this, &req, &path] {
            QueryParams params(req.params.begin(), req.params.end());
            storage::DatabaseOptions db_options;
            db_options.read_only = true;
            storage::Database db(options.db_path, db_options);
            return handleApi(db, path, params, options.api).dump();
          });
      res.set_header("Cache-Control", "no-store");
      setBody(res, std::move(document), "application/json");
    } catch (const ApiError& error) {
      setError(res, error.status(), error.what());
    }
  });
}

// The writes (issue 33), each on its own read-write connection; what was cached before is dropped.
void WebServer::Impl::routeWrites() {
  const auto write = [this](const httplib::Request& req, httplib::Response& res) {
    try {
      storage::Database db(options.db_path);
      const json answer = handleApiWrite(db, req.method, req.matches[1].str(), req.body);
      documents.clear();
      res.set_header("Cache-Control", "no-store");
      setBody(res, std::make_shared<const std::string>(answer.dump()), "application/json");
    } catch (const ApiError& error) {
      setError(res, error.status(), error.what());
    }
  };
  server.Post(R"(/api/v1(/runs/.*))", write);
  server.Delete(R"(/api/v1(/runs/.*))", write);
}

// An exception or an error status becomes the JSON error document.
void WebServer::Impl::answerErrorsAsJson() {
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(error);
        } catch (const Error& e) {
          message = e.kind() == ErrorKind::kTimeout ? "the database is busy, try again"
                                                    : std::string(e.what());
          setError(res, e.kind() == ErrorKind::kTimeout ? 503 : 500, message);
          return;
        } catch (const std::exception& e) {
          message = e.what();
        }
        setError(res, 500, message);
      });
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.has_header("Content-Type"))  // not one of setError's
      setError(res, res.status,
               res.status == 404 ? "no such page or API path" : fmt::format("HTTP {}", res.status));
  });
}

// text/event-stream: `retry: 2000` first, then at most one update per stream_interval with the
// subscriber's coalesced events, a keepalive comment when quiet. A write that cannot proceed within
// io_timeout, or a subscriber over its queue bound, ends the connection.
void WebServer::Impl::serveStream(const httplib::Request&, httplib::Response& res) {
  if (streams.fetch_add(1) >= options.max_streams) {
    streams.fetch_sub(1);
    setError(res, 503,
             fmt::format("too many event-stream clients (at most {})", options.max_streams));
    res.set_header("Retry-After", "5");
    return;
  }
  std::shared_ptr<Subscriber> subscriber = feed->subscribe();
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
  struct StreamState {
    bool greeted = false;
    std::chrono::steady_clock::time_point last_sent = std::chrono::steady_clock::now();
  };
  auto state = std::make_shared<StreamState>();
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, subscriber, state](size_t, httplib::DataSink& sink) {
        using clock = std::chrono::steady_clock;
        std::string frame;
        if (!state->greeted) {
          state->greeted = true;
          frame = "retry: 2000\n: connected\n\n";
        } else {
          // Coalescing: nothing sooner than stream_interval after the last update.
          const clock::time_point earliest = state->last_sent + options.stream_interval;
          while (clock::now() < earliest && !subscriber->closed())
            std::this_thread::sleep_for(
                std::min<clock::duration>(earliest - clock::now(), std::chrono::milliseconds(50)));
          // Wait a little at a time, so that a stopping server is noticed.
          const clock::time_point quiet_until = state->last_sent + options.heartbeat;
          while (frame.empty() && !subscriber->closed() && !subscriber->overflowed() &&
                 clock::now() < quiet_until)
            frame = subscriber->take(std::min(quiet_until, clock::now() + options.stream_interval));
          if (subscriber->closed() || subscriber->overflowed()) return false;
          if (frame.empty()) frame = ": keepalive\n\n";
        }
        if (!sink.is_writable() || !sink.write(frame.data(), frame.size())) return false;
        state->last_sent = clock::now();
        return true;
      },
      [this, subscriber](bool) {
        feed->unsubscribe(subscriber);
        streams.fetch_sub(1);
      });
}

void WebServer::start() {
  Impl& impl = *impl_;
  if (impl.started) RM_THROW(kInvalidArgument, "the web server was started already");
  impl.started = true;
  impl.feed = std::make_unique<LiveFeed>(impl.options.db_path, impl.options.poll_interval,
                                         impl.options.stream_queue_bound);
  impl.route();
  const ListenAddress& listen = impl.options.listen;
  if (listen.port == 0) {
    impl.port = impl.server.bind_to_any_port(listen.host);
    if (impl.port < 0) impl.port = 0;
  } else if (impl.server.bind_to_port(listen.host, listen.port)) {
    impl.port = listen.port;
  }
  if (impl.port == 0)
    RM_THROW(kUnavailable, fmt::format("cannot listen on {}:{} (in use, or not an address of "
                                       "this machine)",
                                       listen.host, listen.port));
  if (!impl.server.setBacklog(impl.options.max_queued_connections))
    RM_THROW(kIo,
             fmt::format("listen() on {}:{}: {}", listen.host, impl.port, std::strerror(errno)));
  impl.feed->start();
  auto listening_ended = std::make_shared<std::atomic<bool>>(false);
  impl.listener = std::thread([&impl, listening_ended] {
    impl.server.listen_after_bind();
    *listening_ended = true;
  });
  // cpp-httplib's stop() does nothing until the listening thread has marked the server running,
  // after which that thread would listen forever and stop() would wait on it: a stop right after
  // start (Ctrl-C as the URL is printed, on a loaded machine) hung. Return once it runs (or has
  // already ended).
  while (!impl.server.is_running() && !*listening_ended)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void WebServer::stop() {
  Impl& impl = *impl_;
  if (!impl.started || impl.stopped) return;
  impl.stopped = true;
  impl.feed->stop();  // the stream clients' writers return, so the pool can join
  impl.server.wakeIdleConnections();
  impl.server.stop();
  if (impl.listener.joinable()) impl.listener.join();
}

int WebServer::port() const {
  return impl_->port;
}

int WebServer::streamClients() const {
  return impl_->streams.load();
}

WebServer::Connections WebServer::connections() const {
  const ConnectionPool::Counts& counts = impl_->connections;
  return {counts.serving.load(), counts.queued.load(), counts.refused.load()};
}

std::string WebServer::url(bool with_token) const {
  const std::string& host = impl_->options.listen.host;
  std::string url = host.find(':') != std::string::npos
                        ? fmt::format("http://[{}]:{}/", host, impl_->port)
                        : fmt::format("http://{}:{}/", host, impl_->port);
  if (with_token && impl_->options.token) url += "?token=" + *impl_->options.token;
  return url;
}

}  // namespace ringmaster::web
