// The HTTP side: cpp-httplib's server with a fixed thread pool, the token check and security
// headers before routing, the assets listed once at start-up, the API and the event stream.
#include "web_server.h"

#include <sys/socket.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

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
  std::string body;
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
    Asset asset{contentTypeOf(it->path()), body.str()};
    total += asset.body.size();
    if (total > kMaxTotal)
      RM_THROW(kInvalidArgument, fmt::format("--assets {}: more than 256 MiB of files", dir));
    assets.emplace(fs::relative(it->path(), dir).generic_string(), std::move(asset));
  }
  if (ec) RM_THROW(kIo, fmt::format("--assets {}: {}", dir, ec.message()));
  return assets;
}

void setError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(json{{"error", {{"status", status}, {"message", message}}}}.dump(),
                  "application/json");
}

std::optional<std::string> queryParameter(const httplib::Request& req, const std::string& name) {
  if (!req.has_param(name.c_str())) return std::nullopt;
  return req.get_param_value(name.c_str());
}

}  // namespace

struct WebServer::Impl {
  WebServerOptions options;
  std::map<std::string, Asset> assets;
  httplib::Server server;
  std::unique_ptr<LiveFeed> feed;
  std::thread listener;
  std::atomic<int> streams{0};
  int port = 0;
  bool started = false, stopped = false;

  void route();
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
  impl_->assets = listAssets(options.assets_dir);
  impl_->options = std::move(options);
}

WebServer::~WebServer() {
  stop();
}

void WebServer::Impl::route() {
  const WebServerOptions& o = options;
  const size_t threads = static_cast<size_t>(o.max_connections);
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  const auto seconds = [](std::chrono::milliseconds d) { return d.count() / 1000; };
  const auto micros = [](std::chrono::milliseconds d) { return (d.count() % 1000) * 1000; };
  server.set_read_timeout(seconds(o.io_timeout), micros(o.io_timeout));
  server.set_write_timeout(seconds(o.io_timeout), micros(o.io_timeout));
  server.set_keep_alive_timeout(2);
  server.set_keep_alive_max_count(100);
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

  // The token, on every request: API, stream and pages alike.
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.method != "GET" && req.method != "HEAD") {
      setError(res, 405,
               fmt::format("method {} not allowed: the dashboard is read-only",
                           req.method.substr(0, 16)));
      return httplib::Server::HandlerResponse::Handled;
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

  const auto serveAsset = [this](const std::string& name, httplib::Response& res) {
    const auto found = assets.find(name);
    if (found == assets.end()) return setError(res, 404, "no such page or asset");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(found->second.body, found->second.content_type.c_str());
  };
  server.Get("/", [serveAsset](const httplib::Request&, httplib::Response& res) {
    serveAsset("index.html", res);
  });
  server.Get(R"(/assets/(.+))", [serveAsset](const httplib::Request& req, httplib::Response& res) {
    serveAsset(req.matches[1].str(), res);
  });
  server.Get("/api/v1/stream", [this](const httplib::Request& req, httplib::Response& res) {
    serveStream(req, res);
  });
  server.Get(R"(/api/v1(/.*))", [this](const httplib::Request& req, httplib::Response& res) {
    QueryParams params(req.params.begin(), req.params.end());
    try {
      storage::DatabaseOptions db_options;
      db_options.read_only = true;
      storage::Database db(options.db_path, db_options);
      const json document = handleApi(db, req.matches[1].str(), params, options.api);
      res.set_header("Cache-Control", "no-store");
      res.set_content(document.dump(), "application/json");
    } catch (const ApiError& error) {
      setError(res, error.status(), error.what());
    }
  });
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
    if (res.body.empty())
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
  impl.feed->start();
  impl.listener = std::thread([&impl] { impl.server.listen_after_bind(); });
}

void WebServer::stop() {
  Impl& impl = *impl_;
  if (!impl.started || impl.stopped) return;
  impl.stopped = true;
  impl.feed->stop();  // the stream clients' writers return, so the pool can join
  impl.server.stop();
  if (impl.listener.joinable()) impl.listener.join();
}

int WebServer::port() const {
  return impl_->port;
}

int WebServer::streamClients() const {
  return impl_->streams.load();
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
