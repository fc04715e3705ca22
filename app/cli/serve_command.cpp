// `ringmaster serve`: options into a WebServer, the URL printed once, SIGINT / SIGTERM awaited with
// sigwait on the main thread (blocked before the server's threads start, so they inherit the
// mask and the signal always reaches sigwait).
#include "cli/serve_command.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "web_server.h"

namespace ringmaster::cli {

namespace {

namespace fs = std::filesystem;

// <directory of the running binary>/web, where the build puts the pages built from resources/web.
std::string defaultAssetsDir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return (self.parent_path() / "web").string();
}

}  // namespace

int serveCommand(const ServeCommandOptions& options) {
  web::WebServerOptions server_options;
  server_options.db_path = options.db_path;
  server_options.listen = web::parseListenAddress(options.listen);
  bool generated = false;
  if (!options.token_file.empty()) {
    server_options.token = web::readTokenFile(options.token_file);
  } else if (web::tokenRequired(server_options.listen)) {
    server_options.token = web::generateToken();
    generated = true;
  }
  server_options.assets_dir = options.assets_dir;
  if (server_options.assets_dir.empty()) {
    server_options.assets_dir = defaultAssetsDir();
    std::error_code ec;
    if (server_options.assets_dir.empty() || !fs::is_directory(server_options.assets_dir, ec)) {
      fmt::print(stderr,
                 "ringmaster serve: no web pages at {} (the build makes them from resources/web "
                 "with npm; --assets names another directory): serving the API only\n",
                 server_options.assets_dir);
      server_options.assets_dir.clear();
    }
  }

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  web::WebServer server(std::move(server_options));
  server.start();
  // The token is printed once, here, only when it was generated: a token read from a file stays
  // out of logs.
  fmt::print("ringmaster serve: {} (database {}; Ctrl-C stops)\n", server.url(generated),
             options.db_path);
  std::fflush(stdout);
  int received = 0;
  sigwait(&stop_signals, &received);
  fmt::print(stderr, "ringmaster serve: stopping ({})\n",
             received == SIGINT ? "SIGINT" : "SIGTERM");
  server.stop();
  return 0;
}

}  // namespace ringmaster::cli
