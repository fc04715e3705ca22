// Web series benchmark (issue 20): a run of 64 ranks x 1M steps written through the Recorder (the
// rows and rollups a real run leaves), then GET /api/v1/runs/ID/series?metric=loss&buckets=1000 for
// every rank, the band, one rank and a zoomed range: ringmaster::web's handler in process (a
// read-only connection per request, the JSON text included, as the server does it) and the HTTP
// round trip through a `ringmaster serve` on 127.0.0.1, beside the anchor, the same bucketing done
// by a plain SQL GROUP BY over the same file. It does not time the browser (web_first_chart.mjs).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <httplib.h>
#include <CLI/CLI.hpp>

#include "api.h"
#include "db/database.h"
#include "db/statement.h"
#include "recorder/recorder.h"

namespace {

using namespace ringmaster;
using namespace ringmaster::storage;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Stats {
  double min = 0, median = 0, max = 0;
};
Stats statsOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2], v.back()};
}

// --- The run ------------------------------------------------------------------------------------

// A completed DDP run of `ranks` x `steps` step events (loss with a spike every 9,973 steps, lr,
// samples, the step's time split and memory, as a training rank reports them), submitted to the
// Recorder step by step for every rank, as the ranks' streams arrive.
int64_t writeRun(const std::string& path, int ranks, int64_t steps) {
  int64_t run = 0;
  {
    Database db(path);
    run = createRun(
        db, {.name = fmt::format("ddp_{}x{}", ranks, steps),
             .spec_json = fmt::format(R"({{"name": "ddp_{0}x{1}", "strategy": {{"kind": "ddp"}}, )"
                                      R"("train": {{"steps": {1}, "batch_size": 64}}}})",
                                      ranks, steps),
             .strategy = "ddp",
             .world_size = ranks});
  }
  {
    // The largest batches the recorder allows: the fastest real path into the database.
    Recorder recorder(path, run, 0,
                      {.queue_capacity = 1 << 17, .batch_size = 1 << 16, .commit_delay = {}});
    int64_t next_report = steps / 10;
    const auto start = Clock::now();
    for (int64_t step = 1; step <= steps; ++step) {
      const double decay = 2.0 * std::exp(-static_cast<double>(step) / (steps / 5.0));
      for (int rank = 0; rank < ranks; ++rank) {
        const double loss = decay + 0.01 * rank + (step % 9973 == 0 ? 1.0 : 0.0);
        recorder.submit({.rank = rank,
                         .seq = static_cast<uint64_t>(step),
                         .time = 1.8e9 + step * 0.01,
                         .body = StepEvent{.step = step,
                                           .loss = loss,
                                           .lr = 1e-3,
                                           .samples = 64,
                                           .step_ms = 10.0 + rank % 3,
                                           .compute_ms = 7,
                                           .comm_ms = 4,
                                           .exposed_comm_ms = 3.0 + rank % 3,
                                           .mem_allocated = 1 << 22,
                                           .mem_peak = 1 << 23}});
      }
      if (step == next_report) {
        fmt::print("  {} of {} steps, {:.0f} s\n", step, steps, msSince(start) / 1000);
        std::fflush(stdout);
        next_report += steps / 10;
      }
    }
    recorder.flush();
    if (!recorder.failure().empty()) throw std::runtime_error(recorder.failure());
  }
  Database db(path);
  finishRun(db, run, "completed");
  return run;
}

// --- The anchor: one plain GROUP BY
// ---------------------------------------------------------------

// The same buckets (the API's bucket width, from `from`) as min / max / mean / last step per
// bucket, by a SQL GROUP BY reading every point of the range, once per rank asked for (one rank
// per query lets SQLite seek the step range in the primary key). Returns the rows produced.
int64_t groupByAnchor(const std::string& path, int64_t run, const std::vector<int>& ranks,
                      int64_t from, int64_t to, int64_t width) {
  DatabaseOptions options;
  options.read_only = true;
  Database db(path, options);
  Statement select(db,
                   "SELECT (step - ?3) / ?4 AS bucket, min(loss), max(loss), avg(loss), max(step) "
                   "FROM steps WHERE run_id = ?1 AND rank = ?2 AND step BETWEEN ?3 AND ?5 AND "
                   "loss IS NOT NULL GROUP BY bucket");
  int64_t rows = 0;
  for (int rank : ranks) {
    select.bind(1, run).bind(2, int64_t{rank}).bind(3, from).bind(4, width).bind(5, to);
    while (select.run()) ++rows;
    select.reset();
  }
  return rows;
}

// --- ringmaster serve ---------------------------------------------------------------------------

// `ringmaster --db FILE serve --listen 127.0.0.1:0` as a child process; the port from the URL it
// prints. Stopped with SIGTERM.
class Server {
 public:
  Server(const std::string& binary, const std::string& db) {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      execl(binary.c_str(), binary.c_str(), "--db", db.c_str(), "serve", "--listen", "127.0.0.1:0",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    std::string line;
    char c = 0;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    const auto at = line.find("http://127.0.0.1:");
    if (at == std::string::npos) throw std::runtime_error("ringmaster serve printed: " + line);
    port_ = std::stoi(line.substr(at + 17));
  }
  ~Server() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// --- The cases ----------------------------------------------------------------------------------

struct Case {
  std::string label, ranks;  // ranks= of the request
  int64_t from = -1, to = -1;
};

std::string queryOf(const Case& c, int buckets) {
  std::string query = fmt::format("metric=loss&ranks={}&buckets={}", c.ranks, buckets);
  if (c.from >= 0) query += fmt::format("&from={}&to={}", c.from, c.to);
  return query;
}

// --- The benchmark -------------------------------------------------------------------------------

// Writes the run through the Recorder to `path` (by way of a partial file, renamed when complete,
// so that an interrupted write is never taken for a run).
void writeRunDatabase(const std::string& path, int ranks, int64_t steps) {
  fmt::print("writing {} ranks x {} steps through the Recorder to {} ...\n", ranks, steps, path);
  std::fflush(stdout);
  const std::string partial = path + ".partial";
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(partial + suffix);
  const auto t = Clock::now();
  writeRun(partial, ranks, steps);
  {
    Database db(partial);
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  fs::rename(partial, path);
  for (const char* suffix : {"-wal", "-shm"}) fs::remove(partial + suffix);
  fmt::print("written in {:.0f} s ({:.0f} events/s), {:.0f} MiB\n\n", msSince(t) / 1000,
             static_cast<double>(ranks) * static_cast<double>(steps) / (msSince(t) / 1000),
             static_cast<double>(fs::file_size(path)) / (1 << 20));
}

int64_t latestRun(const std::string& path) {
  Database db(path);
  Statement select(db, "SELECT id FROM runs ORDER BY id DESC LIMIT 1");
  select.run();
  return select.columnInt(0);
}

// What every case is timed against: the run, the buckets asked for, how often each is timed, and
// the client of a `ringmaster serve` (null: no HTTP round trip).
struct Setup {
  std::string path;
  int64_t run = 0;
  int ranks = 0, buckets = 0, repeats = 0, anchor_repeats = 0;
  httplib::Client* client = nullptr;
};

web::QueryParams paramsOf(const Case& c, int buckets) {
  web::QueryParams params;
  params.emplace("metric", "loss");
  params.emplace("ranks", c.ranks);
  params.emplace("buckets", std::to_string(buckets));
  if (c.from >= 0) {
    params.emplace("from", std::to_string(c.from));
    params.emplace("to", std::to_string(c.to));
  }
  return params;
}

// One request through ringmaster::web's handler as the server makes it (a new read-only
// connection, the JSON text included): its time, and the size, points and bucket width of what
// came back.
struct HandlerReply {
  double ms = 0;
  size_t bytes = 0, points = 0;
  int64_t width = 1;
};
HandlerReply callHandler(const std::string& path, const std::string& api_path,
                         const web::QueryParams& params) {
  const auto t = Clock::now();
  DatabaseOptions options;
  options.read_only = true;
  Database db(path, options);
  const nlohmann::json document = web::handleApi(db, api_path, params);
  const std::string text = document.dump();
  HandlerReply reply{.ms = msSince(t), .bytes = text.size()};
  reply.width = document["bucket_width"].get<int64_t>();
  if (document.contains("band")) reply.points = document["band"].size();
  for (const auto& r : document.value("ranks", nlohmann::json::array()))
    reply.points += r["buckets"].size();
  return reply;
}

// The same request over HTTP: its time; throws unless it is answered 200.
double timeHttpGet(httplib::Client& client, const std::string& url) {
  const auto t = Clock::now();
  const auto response = client.Get(url);
  const double ms = msSince(t);
  if (!response || response->status != 200)
    throw std::runtime_error(fmt::format("HTTP {}: {}", response ? response->status : 0,
                                         response ? response->body : "no response"));
  return ms;
}

// The anchor's GROUP BY for the case's ranks and range, in buckets of `width`: its time.
double timeAnchor(const Setup& setup, const Case& c, int64_t width) {
  const auto t = Clock::now();
  std::vector<int> anchor_ranks;
  if (c.ranks == "all" || c.ranks == "band") {
    for (int r = 0; r < setup.ranks; ++r) anchor_ranks.push_back(r);
  } else {
    anchor_ranks.push_back(std::stoi(c.ranks));
  }
  groupByAnchor(setup.path, setup.run, anchor_ranks, c.from >= 0 ? c.from : 0,
                c.from >= 0 ? c.to : std::numeric_limits<int64_t>::max(), width);
  return msSince(t);
}

void printCaseRow(const Case& c, const HandlerReply& reply, const std::vector<double>& handler,
                  const std::vector<double>& http, const std::vector<double>& anchor) {
  const Stats h = statsOf(handler), a = statsOf(anchor);
  // The server shares a document between requests until the database changes: the first
  // request of a case is the one that queries, the others are served from that.
  std::string http_first = "(no ringmaster)", http_again;
  if (!http.empty()) {
    http_first = fmt::format("{:.1f}", http.front());
    if (http.size() > 1) {
      const Stats again = statsOf({http.begin() + 1, http.end()});
      http_again = fmt::format("{:.1f} / {:.1f} / {:.1f}", again.min, again.median, again.max);
    }
  }
  fmt::print("{:<38} {:>8} {:>9.0f} {:>22} {:>11} {:>22} {:>22} {:>8.4f}\n", c.label, reply.points,
             static_cast<double>(reply.bytes) / 1024,
             fmt::format("{:.1f} / {:.1f} / {:.1f}", h.min, h.median, h.max), http_first,
             http_again, fmt::format("{:.0f} / {:.0f} / {:.0f}", a.min, a.median, a.max),
             h.median / a.median);
}

// Times one case `repeats` times through the handler and over HTTP, and its anchor
// `anchor_repeats` times unless an earlier case timed the same query (`anchor_times`, by ranks and
// range), and prints its row.
void benchCase(const Setup& setup, const Case& c,
               std::map<std::string, std::vector<double>>& anchor_times) {
  const web::QueryParams params = paramsOf(c, setup.buckets);
  const std::string api_path = fmt::format("/runs/{}/series", setup.run);
  std::vector<double> handler, http, anchor;
  const std::string anchor_key =
      (c.ranks == "band" ? std::string("all") : c.ranks) + fmt::format(":{}-{}", c.from, c.to);
  HandlerReply reply;
  for (int i = 0; i < setup.repeats; ++i) {
    reply = callHandler(setup.path, api_path, params);
    handler.push_back(reply.ms);
    if (setup.client) {
      http.push_back(timeHttpGet(*setup.client,
                                 fmt::format("/api/v1{}?{}", api_path, queryOf(c, setup.buckets))));
    }
    if (i >= setup.anchor_repeats || anchor_times.count(anchor_key) > 0) continue;
    anchor.push_back(timeAnchor(setup, c, reply.width));
  }
  // The band's anchor is the every-rank query (the median of 64 means per bucket is not timed).
  if (anchor.empty()) anchor = anchor_times[anchor_key];
  anchor_times[anchor_key] = anchor;
  printCaseRow(c, reply, handler, http, anchor);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{
      "web_series_bench: the series API on a 64-rank x 1M-step run, in process and over HTTP, "
      "beside a plain SQL GROUP BY"};
  std::string dir = RINGMASTER_BENCH_CACHE_DIR;
  std::string ringmaster = RINGMASTER_BINARY;
  int ranks = 64, buckets = 1000, repeats = 7, anchor_repeats = 3;
  int64_t steps = 1'000'000;
  cli.add_option("--dir", dir, "where the run database is written and kept for the next runs")
      ->default_val(dir);
  cli.add_option("--ranks", ranks, "ranks of the run")->default_val(ranks);
  cli.add_option("--steps", steps, "steps per rank")->default_val(steps);
  cli.add_option("--buckets", buckets, "buckets asked for")->default_val(buckets);
  cli.add_option("--repeats", repeats, "requests timed per case")->default_val(repeats);
  cli.add_option("--anchor-repeats", anchor_repeats,
                 "GROUP BY queries timed per case (each reads every point: 64M rows for every "
                 "rank)")
      ->default_val(anchor_repeats);
  cli.add_option("--ringmaster", ringmaster,
                 "the ringmaster binary for the HTTP round trip (none: skipped)")
      ->default_val(ringmaster);
  CLI11_PARSE(cli, argc, argv);

  fs::create_directories(dir);
  const std::string path = (fs::path(dir) / fmt::format("web-{}x{}.db", ranks, steps)).string();
  if (!fs::exists(path)) writeRunDatabase(path, ranks, steps);
  Setup setup{.path = path,
              .run = latestRun(path),
              .ranks = ranks,
              .buckets = buckets,
              .repeats = repeats,
              .anchor_repeats = anchor_repeats};
  const std::vector<Case> cases = {
      {"every rank (ranks=all)", "all"},
      {"band (ranks=band)", "band"},
      {"one rank (ranks=0)", "0"},
      {"every rank, zoomed to 10% (from/to)", "all", steps / 2, steps / 2 + steps / 10 - 1},
  };
  std::optional<Server> server;
  std::optional<httplib::Client> client;
  if (!ringmaster.empty() && fs::exists(ringmaster)) {
    server.emplace(ringmaster, path);
    client.emplace("127.0.0.1", server->port());
    client->set_keep_alive(true);
    client->set_read_timeout(60, 0);
    setup.client = &*client;
  }

  fmt::print(
      "Series API: run {} of {} ranks x {} steps ({}), metric=loss, buckets={}, {} requests per "
      "case ({} for the anchor); ms min / median / max\n(handler: ringmaster::web's handleApi in "
      "this process on a "
      "new read-only connection, JSON text included; HTTP: GET through `ringmaster serve` on "
      "127.0.0.1, keep-alive;\nanchor: SQL GROUP BY bucket over the same rows of the same file, "
      "one query per rank asked for; the band: the every-rank queries)\n\n",
      setup.run, ranks, steps, path, buckets, repeats, anchor_repeats);
  fmt::print("{:<38} {:>8} {:>9} {:>22} {:>11} {:>22} {:>22} {:>8}\n", "", "buckets", "KiB",
             "handler ms", "HTTP 1st ms", "HTTP again ms (shared)", "anchor GROUP BY ms", "ratio");
  std::map<std::string, std::vector<double>> anchor_times;
  for (const Case& c : cases) benchCase(setup, c, anchor_times);
  fmt::print(
      "\nHTTP 1st: the case's first request, which the server queries; again: the same "
      "request repeated, the server's shared document (until the database changes)\n");
  fmt::print(
      "ratio: handler median / anchor median (below 1: the API is faster than the plain "
      "GROUP BY)\n");
  return 0;
}
