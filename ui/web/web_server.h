// The web dashboard's HTTP server (docs/web.md): the packaged pages, the JSON API (api.h) and the
// event stream (live_feed.h) over one run database opened read-only per request, so the recorder
// writing the same file is never blocked. Connections are served by a fixed pool of threads behind
// a bounded queue (a connection past it is answered 503 and closed, never left waiting); every
// request is checked for the token when one is set, every response carries the security headers.
// cpp-httplib stays inside web_server.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "access.h"
#include "api.h"

namespace ringmaster::web {

struct WebServerOptions {
  std::string db_path;
  ListenAddress listen;  // 127.0.0.1:8765 by default; port 0 picks a free port
  // Required for an address that is not loopback (start() refuses without one); may be set for a
  // loopback address too.
  std::optional<std::string> token;
  std::string assets_dir;  // the packaged pages; "" serves the API only
  // Issue 33: the API's writes (a run's tags, note, name; DELETE of a run: api.h) are served, to
  // requests that pass the token rule and come from the server's own page (same origin, JSON;
  // web_server.cpp, sameOriginWriteRefusal). Off: every method but GET and HEAD is refused (405).
  bool allow_writes = false;

  ApiLimits api;  // buckets, log lines, compared runs
  // Threads serving connections, streams included. A live page holds one stream and at most a few
  // API requests at a time; an idle thread costs its stack's touched pages (tens of KiB).
  int max_connections = 160;
  int max_streams = 128;            // event-stream clients at once (the rest: 503)
  int max_queued_connections = 64;  // accepted, waiting for a thread (the rest: 503 and closed)
  size_t max_request_bytes = 64 * 1024;  // a request's body (the API reads none)
  size_t stream_queue_bound = 256;       // runs pending for one stream client before it is dropped
  std::chrono::milliseconds poll_interval{250};    // how often the database is looked at
  std::chrono::milliseconds stream_interval{250};  // at most one update per client this often
  std::chrono::milliseconds heartbeat{15000};      // ": keepalive" on a quiet stream
  std::chrono::milliseconds io_timeout{5000};      // a read or write that makes no progress
  int socket_send_buffer = 0;  // SO_SNDBUF of connections in bytes; 0: the system's
};

// The security headers every response carries (docs/web.md).
inline constexpr char kContentSecurityPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'";

class WebServer {
 public:
  // Checks the options (a non-loopback address without a token, a missing database, an assets
  // directory that cannot be listed: kInvalidArgument) and lists the assets; serves nothing yet.
  explicit WebServer(WebServerOptions options);
  ~WebServer();
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  // Binds (kUnavailable naming the address when it cannot) and serves on background threads.
  void start();
  // Drops the stream clients, stops accepting and joins every thread. Idempotent.
  void stop();

  int port() const;           // the bound port, after start()
  int streamClients() const;  // event-stream connections open now
  struct Connections {
    int serving = 0;      // held by a connection thread now (streams included)
    int queued = 0;       // accepted, waiting for a thread now
    int64_t refused = 0;  // answered 503 and closed since start(): the queue was full
  };
  Connections connections() const;
  // http://HOST:PORT/ (brackets for IPv6), with ?token=... when `with_token` and a token is set.
  std::string url(bool with_token) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringmaster::web
