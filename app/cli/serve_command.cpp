// `ringmaster serve`: options into a WebServer at a lowered CPU priority, the URL printed once,
// then SIGINT / SIGTERM awaited on the main thread, and a clean stop.
#include "cli/serve_command.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

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

// Lowers every thread of this process to `nice`, never raising one: on Linux the nice value is per
// thread; threads made later inherit the main thread's, and some exist before main (OpenBLAS's).
void lowerPriority(int nice) {
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/self/task", ec)) {
    const id_t thread = static_cast<id_t>(std::stol(task.path().filename().string()));
    errno = 0;
    const int current = getpriority(PRIO_PROCESS, thread);
    if (errno != 0 || current >= nice) continue;
    if (setpriority(PRIO_PROCESS, thread, nice) != 0) {
      fmt::print(stderr, "ringmaster serve: cannot lower its priority to nice {}: {}\n", nice,
                 std::strerror(errno));
      return;
    }
  }
}

// SIGINT and SIGTERM run this handler in whichever thread takes them (the main thread, or one
// started before main, OpenBLAS's), which hands the signal to the main thread through a pipe.
int stop_pipe_write = -1;
extern "C" void forwardStopSignal(int signo) {
  const int saved = errno;
  const char byte = static_cast<char>(signo);
  [[maybe_unused]] const ssize_t written = write(stop_pipe_write, &byte, 1);
  errno = saved;
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
  server_options.allow_writes = !options.read_only;
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

  // The server's threads start with SIGINT and SIGTERM blocked (a signal never interrupts their
  // system calls); the main thread unblocks them once the server runs and waits on the pipe.
  int stop_pipe[2];
  if (pipe2(stop_pipe, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "ringmaster serve: pipe");
  }
  stop_pipe_write = stop_pipe[1];
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  struct sigaction forward {};
  forward.sa_handler = forwardStopSignal;
  sigemptyset(&forward.sa_mask);
  sigaction(SIGINT, &forward, nullptr);
  sigaction(SIGTERM, &forward, nullptr);

  lowerPriority(options.nice);
  web::WebServer server(std::move(server_options));
  server.start();
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  // The token is printed once, here, only when it was generated: a token read from a file stays
  // out of logs.
  fmt::print("ringmaster serve: {} (database {}; Ctrl-C stops)\n", server.url(generated),
             options.db_path);
  std::fflush(stdout);
  char received = 0;
  while (read(stop_pipe[0], &received, 1) != 1) {
  }
  fmt::print(stderr, "ringmaster serve: stopping ({})\n",
             received == SIGINT ? "SIGINT" : "SIGTERM");
  server.stop();
  return 0;
}

void addServeCommand(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<ServeCommandOptions>();
  CLI::App* serve = app.add_subcommand(
      "serve", "the web dashboard: every run, live, in a browser (docs/web.md); Ctrl-C stops");
  serve
      ->add_option("--listen", options->listen,
                   "HOST:PORT to listen on; any address but loopback needs a token")
      ->default_val("127.0.0.1:8765");
  serve->add_option("--token-file", options->token_file,
                    "read the access token from this file (else one is generated where needed "
                    "and printed once)");
  serve->add_option("--assets", options->assets_dir,
                    "the pages' directory (default: web/ beside the ringmaster binary)");
  serve->add_flag("--read-only", options->read_only,
                  "refuse the pages' writes (a run's tags, note, name and deletion)");
  serve
      ->add_option("--nice", options->nice,
                   "the server's CPU priority (nice 0..19; default 10: below a run recording on "
                   "the same machine)")
      ->check(CLI::Range(0, 19));
  commands.add(serve, [options](const CommonOptions& common) {
    options->db_path = common.databasePath();
    return serveCommand(*options);
  });
}

}  // namespace ringmaster::cli
