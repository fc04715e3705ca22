// Scale benchmark (issue 36): the telemetry of a simulated 16,384-rank DDP run, fed to the real
// recorder for a few minutes through the agents' line protocol: this executable, run as the node
// agent (`scale_bench agent --spec FILE`, as LocalLauncher starts ringmaster-node), writes every
// rank's hello, step and comm lines on its stdout at the run's step rate; the launcher reads them
// (pipe, line splitter, classification) and the session's sink decodes, observes and submits them
// to the Recorder, which writes the SQLite file. Meanwhile a desktop run view (offscreen, band
// mode) and the web's band series request run in processes of their own, as the window and
// `ringmaster serve` do. Reports events/s stored against offered, the lag from a line's write to
// its commit, the recorder process's resident memory over time, and the longest stalls. No real
// rank is started: the lines are simulated, everything that reads them is real.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "db/database.h"
#include "db/statement.h"
#include "launcher/local_launcher.h"
#include "process/child_process.h"
#include "recorder/recorder.h"
#include "telemetry/codec.h"
#include "telemetry/progress.h"
#if SCALE_BENCH_WITH_DESKTOP
#include <QApplication>
#include <QElapsedTimer>
#include <QTimer>

#include "views/run_view.h"
#endif
#if SCALE_BENCH_WITH_WEB
#include "api.h"
#endif

namespace {

using namespace ringmaster;
using namespace ringmaster::storage;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double wallSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<size_t>(p * values.size()))];
}

// What the simulated run sends: `ranks` ranks, a step every 1 / step_hz seconds for `seconds`,
// each step `comm_per_step` all-reduces (DDP's gradient buckets) and the step event.
struct RunPlan {
  int ranks = 16384;
  double seconds = 150;
  double step_hz = 1;
  int comm_per_step = 2;
};

// ---------------------------------------------------------------------------------------------
// The simulated agent.

std::atomic<bool> agent_stop{false};
std::atomic<bool> agent_cancelled{false};

// A telemetry line as a format string: the codec's own line of an event holding sentinel values,
// each sentinel made a named argument (rank, seq, t, step, loss), so every line is the protocol's
// byte for byte (the first one is checked by decoding it) without encoding each through JSON.
std::string lineFormat(const EventBody& body) {
  std::string line =
      encodeEvent({.rank = 7777777, .seq = 8888888888, .time = 1999999999.25, .body = body});
  std::string escaped;
  for (const char c : line) escaped += c == '{' ? "{{" : c == '}' ? "}}" : std::string(1, c);
  for (const auto& [sentinel, name] : {std::pair{"7777777", "{rank}"},
                                       {"8888888888", "{seq}"},
                                       {"1999999999.25", "{t}"},
                                       {"6666666", "{step}"},
                                       {"0.4375", "{loss}"}}) {
    if (const size_t at = escaped.find(sentinel); at != std::string::npos)
      escaped.replace(at, std::string_view(sentinel).size(), name);
  }
  return escaped;
}

std::string fillLine(const std::string& format, int rank, uint64_t seq, int64_t step, double loss) {
  return fmt::format(fmt::runtime(format), fmt::arg("rank", rank), fmt::arg("seq", seq),
                     fmt::arg("t", wallSeconds()), fmt::arg("step", step), fmt::arg("loss", loss));
}

RunPlan readPlan(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json plan = nlohmann::json::parse(in);
  return {.ranks = plan.at("ranks"),
          .seconds = plan.at("seconds"),
          .step_hz = plan.at("step_hz"),
          .comm_per_step = plan.at("comm_per_step")};
}

// Writes `text` whole on stdout (a full pipe blocks: the launcher's backpressure).
void writeOut(const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(STDOUT_FILENO, text.data() + done, text.size() - done);
    if (n <= 0) {
      agent_stop = true;
      return;
    }
    done += static_cast<size_t>(n);
  }
}

// Each rank's lines of one step: its all-reduces, then its step event.
void writeStep(const RunPlan& plan, int64_t step, std::vector<uint64_t>& seqs,
               const std::string& comm_format, const std::string& step_format) {
  std::string chunk;
  for (int rank = 0; rank < plan.ranks && !agent_stop; ++rank) {
    uint64_t& seq = seqs[static_cast<size_t>(rank)];
    for (int c = 0; c < plan.comm_per_step; ++c)
      (chunk += fillLine(comm_format, rank, seq++, step, 0)) += '\n';
    const double loss = 2.0 / static_cast<double>(step) + 1e-6 * rank;
    (chunk += fillLine(step_format, rank, seq++, step, loss)) += '\n';
    if (chunk.size() > (1 << 16)) writeOut(std::exchange(chunk, {}));
  }
  writeOut(chunk);
}

// `scale_bench agent --spec PLAN --grace S`: the node agent of every rank of the plan. Ends at the
// plan's end, at SIGTERM (cancelled) or when its stdin closes (the launcher is gone).
int runAgent(int argc, char** argv) {
  CLI::App app{"scale_bench's simulated node agent"};
  std::string plan_path;
  double grace = 5;
  app.add_option("--spec", plan_path)->required();
  app.add_option("--grace", grace);
  app.allow_extras();
  CLI11_PARSE(app, argc - 1, argv + 1);
  const RunPlan plan = readPlan(plan_path);
  ::signal(SIGTERM, [](int) { agent_cancelled = agent_stop = true; });
  std::thread([] {
    char byte;
    while (::read(STDIN_FILENO, &byte, 1) > 0) {
    }
    agent_stop = true;
  }).detach();
  const std::string comm_format = lineFormat(CommEvent{.op = "all_reduce",
                                                       .group = "world",
                                                       .bytes = 25 << 20,
                                                       .dtype = "float32",
                                                       .duration_ms = 1.5,
                                                       .algbw_gbps = 0.7,
                                                       .busbw_gbps = 1.05,
                                                       .step = 6666666});
  const std::string step_format = lineFormat(StepEvent{.step = 6666666,
                                                       .loss = 0.4375,
                                                       .lr = 1e-3,
                                                       .samples = 64,
                                                       .step_ms = 950,
                                                       .compute_ms = 700,
                                                       .comm_ms = 300,
                                                       .exposed_comm_ms = 250,
                                                       .mem_allocated = 1 << 30,
                                                       .mem_peak = 3 << 29,
                                                       .mem_reserved = uint64_t{1} << 31});
  for (const std::string* format : {&comm_format, &step_format}) {
    const DecodeResult check = decodeEvent(fillLine(*format, 0, 1, 1, 0.5));
    if (!check.ok()) {
      fmt::print(stderr, "scale_bench agent: a simulated line does not decode: {}\n",
                 check.error().message);
      return 1;
    }
  }
  std::vector<uint64_t> seqs(static_cast<size_t>(plan.ranks), 0);
  std::string hellos;
  for (int rank = 0; rank < plan.ranks; ++rank) {
    (hellos += encodeEvent({.rank = rank,
                            .seq = seqs[static_cast<size_t>(rank)]++,
                            .time = wallSeconds(),
                            .body = HelloEvent{.world_size = plan.ranks,
                                               .local_rank = rank % 8,
                                               .host = fmt::format("node{:05}", rank / 8),
                                               .strategy = "ddp"}})) += '\n';
  }
  writeOut(hellos);
  const auto start = Clock::now();
  int64_t step = 0;
  while (!agent_stop && Clock::now() - start < std::chrono::duration<double>(plan.seconds)) {
    ++step;
    writeStep(plan, step, seqs, comm_format, step_format);
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(step / plan.step_hz)));
  }
  std::string dones;
  for (int rank = 0; rank < plan.ranks; ++rank) {
    (dones += encodeEvent(
         {.rank = rank,
          .seq = seqs[static_cast<size_t>(rank)]++,
          .time = wallSeconds(),
          .body = DoneEvent{
              .status = agent_cancelled ? DoneStatus::kCancelled : DoneStatus::kCompleted,
              .final_step = step,
              .wall_s = std::chrono::duration<double>(Clock::now() - start).count()}})) += '\n';
  }
  writeOut(dones);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The front ends, each in a process of its own: `scale_bench desktop|web --db PATH --run ID
// --seconds S` prints one JSON line of what it measured.

#if SCALE_BENCH_WITH_DESKTOP
// A run view in band mode, refreshing as the window does, and a 1 ms timer: its largest gap is
// the GUI thread's longest stall.
nlohmann::json measureDesktop(int argc, char** argv, const std::string& db, int64_t run,
                              double seconds) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  ui::RunView view(db, run);
  view.resize(1500, 950);
  view.show();
  view.showRanks(ui::RunView::RankMode::kBand);
  int64_t refreshes = 0;
  QObject::connect(&view, &ui::RunView::refreshed, [&] { ++refreshes; });
  std::vector<double> gaps;
  QElapsedTimer clock;
  clock.start();
  qint64 last = clock.nsecsElapsed();
  QTimer tick;
  tick.setTimerType(Qt::PreciseTimer);
  tick.setInterval(1);
  QObject::connect(&tick, &QTimer::timeout, [&] {
    const qint64 now = clock.nsecsElapsed();
    gaps.push_back(static_cast<double>(now - last) / 1e6);
    last = now;
    if (clock.elapsed() > seconds * 1000) QApplication::quit();
  });
  tick.start();
  QApplication::exec();
  return {{"max_ms", percentile(gaps, 1.0)},
          {"p99_ms", percentile(gaps, 0.99)},
          {"ticks", gaps.size()},
          {"refreshes", refreshes}};
}
#endif

#if SCALE_BENCH_WITH_WEB
// The web page's band series request (loss, 1,000 buckets), once every `every_s` as a live page
// polls, each through the API handler on a new read-only connection as the server makes it.
nlohmann::json measureWeb(const std::string& db, int64_t run, double seconds, double every_s) {
  std::vector<double> ms;
  size_t bytes = 0;
  const auto start = Clock::now();
  const std::string path = fmt::format("/runs/{}/series", run);
  const web::QueryParams params{{"metric", "loss"}, {"ranks", "band"}, {"buckets", "1000"}};
  while (Clock::now() - start < std::chrono::duration<double>(seconds)) {
    const auto t = Clock::now();
    try {
      DatabaseOptions options;
      options.read_only = true;
      Database reader(db, options);
      bytes = web::handleApi(reader, path, params).dump().size();
    } catch (const std::exception& e) {
      fmt::print(stderr, "web request failed: {}\n", e.what());
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    std::this_thread::sleep_until(
        t + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(every_s)));
  }
  return {{"max_ms", percentile(ms, 1.0)},
          {"p50_ms", percentile(ms, 0.5)},
          {"p99_ms", percentile(ms, 0.99)},
          {"requests", ms.size()},
          {"bytes", bytes}};
}
#endif

int runFrontEnd(int argc, char** argv) {
  CLI::App app{"scale_bench's front end"};
  std::string db;
  int64_t run = 0;
  double seconds = 10, every_s = 1;
  app.add_option("--db", db)->required();
  app.add_option("--run", run)->required();
  app.add_option("--seconds", seconds);
  app.add_option("--every", every_s);
  CLI11_PARSE(app, argc - 1, argv + 1);
  nlohmann::json result;
  const std::string which = argv[1];
#if SCALE_BENCH_WITH_DESKTOP
  if (which == "desktop") result = measureDesktop(argc, argv, db, run, seconds);
#endif
#if SCALE_BENCH_WITH_WEB
  if (which == "web") result = measureWeb(db, run, seconds, every_s);
#endif
  std::cout << result.dump() << std::endl;
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The recording side: launcher, session sink, recorder; and what is sampled while it runs.

int64_t residentKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with("VmRSS:")) return std::stoll(line.substr(6));
  return 0;
}

// Each second: the events stored so far and the process's resident size.
struct Sample {
  double t_s;
  int64_t stored, rss_kib;
};

// Polls the database every 50 ms on a connection of its own, as a reader would, for the step rows
// of a few ranks spread over the world that became visible since the last poll: each one's lag is
// the time it became visible less the time its line was written (its wall_time_s). A row is seen
// at most one poll after its commit, so the lag is over-estimated by up to the poll's period.
class LagProbe {
 public:
  LagProbe(const std::string& db, int64_t run, int ranks)
      : thread_([=, this] {
          DatabaseOptions options;
          options.read_only = true;
          Database reader(db, options);
          Statement rows(reader,
                         "SELECT step, wall_time_s FROM steps WHERE run_id = ? AND rank = ? AND "
                         "step > ? ORDER BY step");
          std::vector<int> probes;
          for (int i = 0; i < 8; ++i)
            probes.push_back(static_cast<int>(int64_t{ranks - 1} * i / 7));
          std::vector<int64_t> last(probes.size(), 0);
          while (!stop_) {
            for (size_t i = 0; i < probes.size(); ++i) {
              rows.bind(1, run).bind(2, int64_t{probes[i]}).bind(3, last[i]);
              while (rows.run()) {
                last[i] = rows.columnInt(0);
                lags_.push_back(wallSeconds() - rows.columnDouble(1));
              }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          }
        }) {}
  std::vector<double> finish() {
    stop_ = true;
    thread_.join();
    return lags_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<double> lags_;
  std::thread thread_;
};

struct Recording {
  double seconds = 0;
  int64_t stored = 0, offered = 0, bad = 0;
  std::vector<Sample> samples;
  std::vector<double> lags_s;
  int64_t last_step = 0;
};

// Launches the simulated agent and records everything it sends, as `ringmaster run` does.
Recording record(const std::string& self, const std::string& db, int64_t run,
                 const std::string& plan_path, const RunPlan& plan) {
  Recording out;
  Recorder recorder(db, run, 0);
  RunProgress progress(plan.ranks, 0);
  std::atomic<int64_t> offered{0};
  // The session's sink (session/run/run_session.cpp, LaunchRecording): decode, observe, submit.
  const LaunchSink sink{
      .on_telemetry =
          [&](std::string_view line) {
            ++offered;
            DecodeResult decoded = decodeEvent(line);
            if (!decoded.ok()) {
              recorder.submitLine(line);
              return;
            }
            progress.observe(decoded.event());
            recorder.submit(std::move(decoded.event()));
          },
      .on_log = [&](std::string_view line) { recorder.submitLog(std::nullopt, "stderr", line); }};
  LagProbe lag(db, run, plan.ranks);
  std::atomic<bool> sampling{true};
  const auto start = Clock::now();
  std::thread sampler([&] {
    while (sampling) {
      out.samples.push_back({std::chrono::duration<double>(Clock::now() - start).count(),
                             recorder.counts().stored, residentKiB()});
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  LocalLauncher launch({.node_binary = self, .spec_path = plan_path});
  while (launch.pump(std::chrono::milliseconds(100), sink)) {
  }
  launch.wait();
  recorder.flush();
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  sampling = false;
  sampler.join();
  out.lags_s = lag.finish();
  const RecorderCounts counts = recorder.counts();
  out.stored = counts.stored;
  out.bad = counts.malformed + counts.rejected;
  out.offered = offered;
  out.last_step = progress.step();
  return out;
}

// A front end measuring alongside the recording, in its own process.
void startFrontEnd(std::optional<ChildProcess>& child, const std::string& self,
                   const std::string& which, const std::string& db, int64_t run, double seconds) {
  ChildOptions options;
  options.argv = {self,        which,
                  "--db",      db,
                  "--run",     std::to_string(run),
                  "--seconds", fmt::format("{}", seconds)};
  options.stdin_mode = StreamMode::kNull;
  options.stdout_mode = StreamMode::kPipe;
  options.stderr_mode = StreamMode::kInherit;
  child.emplace(options);
}

nlohmann::json frontEndResult(std::optional<ChildProcess>& child) {
  if (!child) return nullptr;
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(child->stdoutFd(), buffer, sizeof buffer)) > 0;)
    text.append(buffer, static_cast<size_t>(n));
  child->wait();
  try {
    return nlohmann::json::parse(text);
  } catch (const std::exception&) {
    return nullptr;
  }
}

void printReport(const RunPlan& plan, const Recording& r, const nlohmann::json& desktop,
                 const nlohmann::json& web, int64_t db_bytes) {
  fmt::print(
      "\nScale: {} ranks of DDP, a step every {:.2f} s ({} all-reduces and a step event per "
      "rank and step), {:.0f} s, through the agents' line protocol\n\n",
      plan.ranks, 1 / plan.step_hz, plan.comm_per_step, plan.seconds);
  fmt::print("{:<44} {:>14} {:>14} {:>10}\n", "", "events/s", "offered/s", "ratio");
  fmt::print("{:<44} {:>14.0f} {:>14.0f} {:>10.2f}\n", "stored by the recorder (whole run)",
             r.stored / r.seconds, r.offered / r.seconds,
             static_cast<double>(r.stored) / std::max<int64_t>(r.offered, 1));
  fmt::print(
      "stored {} of {} events offered ({} bad), last step every rank reached {}, "
      "database {:.0f} MiB\n\n",
      r.stored, r.offered, r.bad, r.last_step, db_bytes / 1048576.0);
  fmt::print("{:<44} {:>10} {:>10} {:>10} {:>8}\n", "lag from a line's write to its commit",
             "p50 s", "p99 s", "max s", "rows");
  fmt::print("{:<44} {:>10.3f} {:>10.3f} {:>10.3f} {:>8}\n", "step rows of 8 ranks, polled 20/s",
             percentile(r.lags_s, 0.5), percentile(r.lags_s, 0.99), percentile(r.lags_s, 1.0),
             r.lags_s.size());
  fmt::print("\nrecorder process (launcher, session, recorder) resident MiB over the run:\n");
  for (size_t i = 0; i < r.samples.size(); i += std::max<size_t>(1, r.samples.size() / 10))
    fmt::print("  t = {:>5.0f} s  {:>8.1f} MiB  {:>10} events stored\n", r.samples[i].t_s,
               r.samples[i].rss_kib / 1024.0, r.samples[i].stored);
  if (!r.samples.empty())
    fmt::print("  t = {:>5.0f} s  {:>8.1f} MiB  {:>10} events stored\n", r.samples.back().t_s,
               r.samples.back().rss_kib / 1024.0, r.samples.back().stored);
  fmt::print("\n{:<44} {:>10} {:>10} {:>10}\n", "front ends with the run open (band)", "max ms",
             "p99 ms", "count");
  if (desktop.is_object())
    fmt::print("{:<44} {:>10.1f} {:>10.2f} {:>10}\n", "desktop: GUI thread stall, 1 ms timer",
               desktop["max_ms"].get<double>(), desktop["p99_ms"].get<double>(),
               fmt::format("{} refr.", desktop["refreshes"].get<int64_t>()));
  if (web.is_object())
    fmt::print("{:<44} {:>10.1f} {:>10.2f} {:>10}\n", "web: series?ranks=band request, 1/s",
               web["max_ms"].get<double>(), web["p99_ms"].get<double>(),
               web["requests"].get<int64_t>());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "agent") return runAgent(argc, argv);
  if (argc > 1 && (std::string_view(argv[1]) == "desktop" || std::string_view(argv[1]) == "web"))
    return runFrontEnd(argc, argv);
  CLI::App app{"scale benchmark: a simulated 16,384-rank DDP run's telemetry into the recorder"};
  RunPlan plan;
  std::string dir = (fs::temp_directory_path() / "ringmaster_scale_bench").string();
  bool front_ends = true;
  app.add_option("--ranks", plan.ranks, "ranks of the simulated run")->default_val(plan.ranks);
  app.add_option("--seconds", plan.seconds, "how long it runs (10 for a smoke test)")
      ->default_val(plan.seconds);
  app.add_option("--step-hz", plan.step_hz, "steps per second")->default_val(plan.step_hz);
  app.add_option("--comm-per-step", plan.comm_per_step, "all-reduces per rank and step")
      ->default_val(plan.comm_per_step);
  app.add_option("--dir", dir, "where the database goes (removed afterwards)");
  app.add_flag("!--no-front-ends", front_ends, "without the desktop view and the web requests");
  CLI11_PARSE(app, argc, argv);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = dir + "/scale.db", plan_path = dir + "/plan.json";
  std::ofstream(plan_path) << nlohmann::json{
      {"ranks", plan.ranks},
      {"seconds", plan.seconds},
      {"step_hz", plan.step_hz},
      {"comm_per_step",
       plan.comm_per_step}}.dump();
  int64_t run = 0;
  {
    Database database(db);
    run = createRun(
        database,
        {.name = "scale", .spec_json = "{}", .strategy = "ddp", .world_size = plan.ranks});
  }
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::optional<ChildProcess> desktop, web;
  if (front_ends) {
#if SCALE_BENCH_WITH_DESKTOP
    startFrontEnd(desktop, self, "desktop", db, run, plan.seconds);
#endif
#if SCALE_BENCH_WITH_WEB
    startFrontEnd(web, self, "web", db, run, plan.seconds);
#endif
  }
  const Recording recording = record(self, db, run, plan_path, plan);
  const nlohmann::json desktop_result = frontEndResult(desktop), web_result = frontEndResult(web);
  printReport(plan, recording, desktop_result, web_result, static_cast<int64_t>(fs::file_size(db)));
  fs::remove_all(dir);
  return 0;
}
