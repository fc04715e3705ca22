// Storage benchmark: (1) telemetry ingest, lines decoded and stored by the Recorder, beside bare
// prepared-statement inserts of the same rows into the same schema (the anchor: what SQLite itself
// does on this disk), and into leaner schemas (SQLite's ceiling for these rows); (2) the flood of
// issue 16: 4 threads as 4 ranks pushing 100,000 step events each into one Recorder, every event
// stored, with the recorder's peak memory; (3) loading a 1M-point series reduced to 2,000 buckets,
// beside the plain SQL GROUP BY that reads every point.
#include <sqlite3.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "db/database.h"
#include "db/statement.h"
#include "query/series.h"
#include "recorder/recorder.h"
#include "telemetry/codec.h"

namespace {

using namespace ringmaster;
using namespace ringmaster::storage;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// `events` telemetry lines: the recorded file's lines repeated with their sequence numbers and
// steps shifted so every copy is new; without a file, a DDP-like stream (per rank and step two
// all-reduces and a step event).
std::vector<std::string> telemetryLines(const std::string& recorded, int64_t events) {
  std::vector<TelemetryEvent> source;
  if (!recorded.empty()) {
    std::ifstream in(recorded);
    std::string line;
    while (std::getline(in, line)) {
      DecodeResult decoded = decodeEvent(line);
      if (decoded.ok() && !std::holds_alternative<HelloEvent>(decoded.event().body) &&
          !std::holds_alternative<DoneEvent>(decoded.event().body))
        source.push_back(decoded.event());
    }
    if (source.empty()) throw std::runtime_error("no events in " + recorded);
  } else {
    for (int rank = 0; rank < 4; ++rank) {
      for (int64_t step = 1; step <= 100; ++step) {
        for (uint64_t bytes : {uint64_t{1} << 20, uint64_t{4}})
          source.push_back({.rank = rank,
                            .seq = 0,
                            .time = 1.8e9 + step,
                            .body = CommEvent{.op = "all_reduce",
                                              .group = "world",
                                              .bytes = bytes,
                                              .dtype = "float32",
                                              .duration_ms = 1.5,
                                              .algbw_gbps = 0.7,
                                              .busbw_gbps = 1.05,
                                              .step = step}});
        source.push_back({.rank = rank,
                          .seq = 0,
                          .time = 1.8e9 + step,
                          .body = StepEvent{.step = step,
                                            .loss = 1.0 / step,
                                            .lr = 1e-3,
                                            .samples = 64,
                                            .step_ms = 10,
                                            .compute_ms = 7,
                                            .comm_ms = 4,
                                            .exposed_comm_ms = 3,
                                            .mem_allocated = 1 << 22,
                                            .mem_peak = 1 << 23,
                                            .mem_reserved = 1 << 24,
                                            .accuracy = 0.5}});
      }
    }
  }
  int64_t max_step = 0;
  for (const TelemetryEvent& e : source)
    if (const auto* s = std::get_if<StepEvent>(&e.body)) max_step = std::max(max_step, s->step);
  std::vector<std::string> lines;
  std::vector<uint64_t> next_seq(1024, 0);
  for (int64_t copy = 0; static_cast<int64_t>(lines.size()) < events; ++copy) {
    for (TelemetryEvent e : source) {
      if (static_cast<int64_t>(lines.size()) >= events) break;
      e.seq = next_seq.at(static_cast<size_t>(e.rank))++;
      if (auto* s = std::get_if<StepEvent>(&e.body)) s->step += copy * max_step;
      if (auto* c = std::get_if<CommEvent>(&e.body); c && c->step) *c->step += copy * max_step;
      lines.push_back(encodeEvent(e));
    }
  }
  return lines;
}

// What the bare inserts keep of the schema: the anchor keeps all of it; the leaner variants show
// what SQLite itself allows for these rows on this machine.
struct SchemaVariant {
  const char* name;
  bool comm_index = true;
  bool foreign_keys = true;
};

// The anchor: the same rows the recorder writes (a steps row per step event, a comm_events row per
// comm event), bound from already decoded events and inserted with bare prepared statements in
// transactions of the recorder's batch size, into a new database.
double bareInserts(const std::string& path, const std::vector<TelemetryEvent>& events,
                   const SchemaVariant& variant) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
  Database db(path);
  const int64_t run =
      createRun(db, {.name = "raw", .spec_json = "{}", .strategy = "ddp", .world_size = 4});
  if (!variant.comm_index) db.exec("DROP INDEX comm_events_by_step");
  if (!variant.foreign_keys) db.exec("PRAGMA foreign_keys = OFF");
  Statement step(db,
                 "INSERT INTO steps (run_id, rank, step, attempt, wall_time_s, loss, lr, samples, "
                 "step_ms, compute_ms, comm_ms, exposed_comm_ms, mem_allocated, mem_peak, "
                 "mem_reserved, device_mem_used, grad_norm, accuracy) "
                 "VALUES (?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  Statement comm(db,
                 "INSERT INTO comm_events (run_id, attempt, rank, t, step, op, group_name, "
                 "group_size, bytes, dtype, duration_ms, wait_ms, algbw_gbps, busbw_gbps, seq_op) "
                 "VALUES (?, 0, ?, ?, ?, ?, ?, 0, ?, ?, ?, NULL, ?, ?, ?)");
  const auto start = Clock::now();
  for (size_t first = 0; first < events.size(); first += 8192) {
    db.transaction([&] {
      for (size_t i = first; i < std::min(events.size(), first + 8192); ++i) {
        const TelemetryEvent& e = events[i];
        if (const auto* s = std::get_if<StepEvent>(&e.body)) {
          step.bind(1, run).bind(2, e.rank).bind(3, s->step).bind(4, e.time).bind(5, s->loss);
          step.bind(6, s->lr).bind(7, double(s->samples)).bind(8, s->step_ms);
          step.bind(9, s->compute_ms).bind(10, s->comm_ms).bind(11, s->exposed_comm_ms);
          step.bind(12, double(s->mem_allocated)).bind(13, double(s->mem_peak));
          step.bind(14, double(s->mem_reserved)).bind(15, double(s->device_mem_used));
          step.bind(16, s->grad_norm).bind(17, s->accuracy).run();
        } else if (const auto* c = std::get_if<CommEvent>(&e.body)) {
          comm.bind(1, run)
              .bind(2, e.rank)
              .bind(3, e.time)
              .bind(4, c->step)
              .bind(5, c->op)
              .bind(6, c->group)
              .bind(7, static_cast<int64_t>(c->bytes))
              .bind(8, c->dtype)
              .bind(9, c->duration_ms)
              .bind(10, c->algbw_gbps)
              .bind(11, c->busbw_gbps)
              .bind(12, static_cast<int64_t>(c->seq_op))
              .run();
        }
      }
    });
  }
  return secondsSince(start);
}

// The rows of `steps` and `comm_events` in one database and not in the other (either way, the run
// id aside): 0 when the anchor inserted exactly the rows the recorder stored.
int64_t differingRows(const std::string& recorded, const std::string& anchor) {
  Database db(recorded);
  db.exec(fmt::format("ATTACH DATABASE '{}' AS anchor", anchor));
  int64_t differing = 0;
  for (const std::string columns :
       {"rank, step, attempt, wall_time_s, loss, lr, samples, step_ms, compute_ms, comm_ms, "
        "exposed_comm_ms, mem_allocated, mem_peak, mem_reserved, device_mem_used, grad_norm, "
        "accuracy, tokens, tokens_per_s, mfu, loss_scale, skipped FROM steps",
        "rowid, attempt, rank, t, step, op, group_name, group_size, bytes, dtype, duration_ms, "
        "wait_ms, algbw_gbps, busbw_gbps, peer, seq_op, start_us, end_us, dim FROM comm_events"}) {
    for (const auto& [from, less] : {std::pair{"main.", "anchor."}, {"anchor.", "main."}}) {
      const size_t table = columns.rfind("FROM ") + 5;
      const std::string a = columns.substr(0, table) + from + columns.substr(table);
      const std::string b = columns.substr(0, table) + less + columns.substr(table);
      Statement count(db, fmt::format("SELECT count(*) FROM (SELECT {} EXCEPT SELECT {})", a, b));
      count.run();
      differing += count.columnInt(0);
    }
  }
  return differing;
}

// The flood's streams: per rank a hello, `steps` step events and a done, as lines.
std::vector<std::vector<std::string>> floodLines(int ranks, int64_t steps) {
  std::vector<std::vector<std::string>> streams(static_cast<size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    uint64_t seq = 0;
    auto add = [&](EventBody body) {
      streams[static_cast<size_t>(rank)].push_back(encodeEvent(
          {.rank = rank, .seq = seq, .time = 1.8e9 + seq * 1e-3, .body = std::move(body)}));
      ++seq;
    };
    add(HelloEvent{.world_size = ranks, .local_rank = rank, .host = "flood", .strategy = "ddp"});
    for (int64_t step = 1; step <= steps; ++step) {
      add(StepEvent{.step = step,
                    .loss = 1.0 / step,
                    .lr = 1e-3,
                    .samples = 32,
                    .step_ms = 1,
                    .compute_ms = 0.8,
                    .comm_ms = 0.2});
    }
    add(DoneEvent{.final_step = steps, .wall_s = 1});
  }
  return streams;
}

int64_t peakResidentKiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// One flood: the streams pushed into a new run's Recorder, each by its own thread, as fast as
// they can. Returns the seconds and the recorder's counts.
std::pair<double, RecorderCounts> floodOnce(const std::string& path,
                                            const std::vector<std::vector<std::string>>& streams) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
  Database db(path);
  const int64_t run = createRun(db, {.name = "flood",
                                     .spec_json = "{}",
                                     .strategy = "ddp",
                                     .world_size = static_cast<int>(streams.size())});
  const auto start = Clock::now();
  RecorderCounts counts;
  {
    Recorder recorder(path, run, 0);
    std::vector<std::thread> producers;
    for (const auto& stream : streams) {
      producers.emplace_back([&recorder, &stream] {
        for (const std::string& line : stream) recorder.submitLine(line);
      });
    }
    for (std::thread& producer : producers) producer.join();
    recorder.flush();
    counts = recorder.counts();
  }
  return {secondsSince(start), counts};
}

// 1. The flood (issue 16): 4 ranks of 100,000 step events, each pushed into one Recorder by its
// own thread as fast as it can, beside bare inserts of the same rows; `rounds` rounds, the two
// alternating, best against best.
void benchFlood(const std::string& dir, int rounds) {
  constexpr int kRanks = 4;
  constexpr int64_t kSteps = 100'000;
  const auto streams = floodLines(kRanks, kSteps);
  const std::string flood_db = dir + "/flood.db";
  // The first round's peak, before the anchor's events are decoded: the recorder's own.
  const int64_t rss_before = peakResidentKiB();
  auto [flood_s, counts] = floodOnce(flood_db, streams);
  const int64_t rss_growth = peakResidentKiB() - rss_before;
  std::vector<TelemetryEvent> flood_events;
  for (const auto& stream : streams)
    for (const std::string& line : stream) flood_events.push_back(decodeEvent(line).event());
  double raw_flood_s = bareInserts(dir + "/raw.db", flood_events, {"anchor"});
  double writer_cpu_s = counts.writer_cpu_s;
  for (int round = 1; round < rounds; ++round) {
    const auto [seconds, round_counts] = floodOnce(flood_db, streams);
    flood_s = std::min(flood_s, seconds);
    writer_cpu_s = std::min(writer_cpu_s, round_counts.writer_cpu_s);
    raw_flood_s = std::min(raw_flood_s, bareInserts(dir + "/raw.db", flood_events, {"anchor"}));
  }
  const int64_t flood_differing = differingRows(flood_db, dir + "/raw.db");
  fmt::print(
      "Flood (issue 16): {} ranks x {} step events, a hello and a done each, pushed by {} "
      "threads at once; best of {} alternating rounds\n\n",
      kRanks, kSteps, kRanks, rounds);
  fmt::print("{:<44} {:>12} {:>14} {:>10}\n", "", "seconds", "events/s", "ratio");
  fmt::print("{:<44} {:>12.3f} {:>14.0f} {:>10.2f}\n", "recorder, default queue, 4 producers",
             flood_s, counts.stored / flood_s, raw_flood_s / flood_s);
  fmt::print("{:<44} {:>12.3f} {:>14.0f} {:>10.2f}\n", "anchor: bare prepared inserts, same rows",
             raw_flood_s, flood_events.size() / raw_flood_s, 1.0);
  fmt::print("{:<44} {:>12.3f} {:>14.0f} {:>10.2f}\n", "of which the writer thread on a core",
             writer_cpu_s, counts.stored / writer_cpu_s, raw_flood_s / writer_cpu_s);
  fmt::print(
      "stored {} of {} ({} dropped, {} bad); the queue held at most {} events; peak resident "
      "size grew by {:.1f} MiB; rows of steps and comm_events differing from the anchor's: {}\n",
      counts.stored, flood_events.size(), counts.dropped, counts.malformed + counts.rejected,
      counts.peak_queued, rss_growth / 1024.0, flood_differing);
}

// The bare inserts of `decoded` into leaner schemas, against `raw_s`, the full schema's time.
void benchLeanerSchemas(const std::string& raw_db, const std::vector<TelemetryEvent>& decoded,
                        double raw_s) {
  const size_t events = decoded.size();
  fmt::print(
      "\nThe same bare inserts into leaner schemas: SQLite's own ceiling for these rows\n\n");
  fmt::print("{:<44} {:>12} {:>14} {:>10}\n", "", "seconds", "events/s", "ratio");
  for (const SchemaVariant& variant : {SchemaVariant{"without the comm events' index", false, true},
                                       SchemaVariant{"without foreign keys", true, false},
                                       SchemaVariant{"without either", false, false}}) {
    const double seconds = bareInserts(raw_db, decoded, variant);
    fmt::print("{:<44} {:>12.3f} {:>14.0f} {:>10.2f}\n", variant.name, seconds, events / seconds,
               raw_s / seconds);
  }
}

// The lines through a new run's Recorder from one thread: the seconds and the recorder's counts.
std::pair<double, RecorderCounts> ingestOnce(const std::string& path,
                                             const std::vector<std::string>& lines) {
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
  Database db(path);
  const int64_t run =
      createRun(db, {.name = "bench", .spec_json = "{}", .strategy = "ddp", .world_size = 4});
  const auto start = Clock::now();
  RecorderCounts counts;
  {
    Recorder recorder(path, run, 0);
    for (const std::string& line : lines) recorder.submitLine(line);
    recorder.flush();
    counts = recorder.counts();
  }
  return {secondsSince(start), counts};
}

// 2. Ingest: the lines through the Recorder, beside bare inserts of the same rows (and decoding
// alone), `rounds` rounds alternating, best against best; then the bare inserts into leaner
// schemas.
void benchIngest(const std::string& dir, const std::vector<std::string>& lines,
                 const std::string& recorded, int rounds) {
  std::vector<TelemetryEvent> decoded;
  decoded.reserve(lines.size());
  const auto decode_start = Clock::now();
  for (const std::string& line : lines) decoded.push_back(decodeEvent(line).event());
  const double decode_s = secondsSince(decode_start);
  size_t steps = 0;
  for (const TelemetryEvent& e : decoded) steps += std::holds_alternative<StepEvent>(e.body);

  const std::string ingest_db = dir + "/ingest.db";
  const std::string raw_db = dir + "/raw.db";
  double recorder_s = 0, raw_s = 0, writer_cpu_s = 0;
  int64_t stored = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto [seconds, counts] = ingestOnce(ingest_db, lines);
    const double raw_now = bareInserts(raw_db, decoded, {"anchor"});
    recorder_s = round == 0 ? seconds : std::min(recorder_s, seconds);
    writer_cpu_s = round == 0 ? counts.writer_cpu_s : std::min(writer_cpu_s, counts.writer_cpu_s);
    raw_s = round == 0 ? raw_now : std::min(raw_s, raw_now);
    stored = counts.stored;
  }
  const int64_t differing = differingRows(ingest_db, raw_db);
  fmt::print(
      "\nTelemetry ingest: {} events ({} of them step events, the rest comm), "
      "{}; best of {} alternating rounds\n\n",
      lines.size(), steps, recorded.empty() ? "synthetic DDP stream" : recorded, rounds);
  fmt::print("{:<44} {:>12} {:>14} {:>10}\n", "", "seconds", "events/s", "ratio");
  fmt::print("{:<44} {:>12.3f} {:>14.0f} {:>10.2f}\n", "recorder (decode + store + rollups)",
             recorder_s, stored / recorder_s, raw_s / recorder_s);
  fmt::print("{:<44} {:>12.3f} {:>14.0f} {:>10.2f}\n", "anchor: bare prepared inserts, same rows",
             raw_s, lines.size() / raw_s, 1.0);
  fmt::print("{:<44} {:>12.3f} {:>14.0f} {:>10.2f}\n", "of which the writer thread on a core",
             writer_cpu_s, stored / writer_cpu_s, raw_s / writer_cpu_s);
  fmt::print("{:<44} {:>12.3f} {:>14.0f} {:>10}\n", "decoding alone (one thread)", decode_s,
             lines.size() / decode_s, "");
  fmt::print(
      "rows of steps and comm_events differing from the anchor's: {} (the recorder also writes "
      "the rollups, sequence ranges and counts)\n",
      differing);
  benchLeanerSchemas(raw_db, decoded, raw_s);
}

// 3. Series load: a v1 database of `points` points, summarised by migration 2, loaded reduced to
// `buckets` buckets `repeats` times, beside the plain SQL GROUP BY that reads every point.
void benchSeriesLoad(const std::string& dir, int64_t points, int buckets, int repeats) {
  const std::string series_db = dir + "/series.db";
  {
    Database old(series_db, {.schema_version = 1});
    old.exec(
        "INSERT INTO runs (name, spec, strategy, world_size, status, created_at) VALUES "
        "('long', '{}', 'ddp', 1, 'completed', 0)");
    old.exec("INSERT INTO metrics (name) VALUES ('loss')");
    old.transaction([&] {
      Statement insert(old, "INSERT INTO scalars VALUES (1, 1, 0, ?, ?, 0)");
      for (int64_t step = 1; step <= points; ++step)
        insert.bind(1, step).bind(2, 1.0 / step + (step % 1000 == 0 ? 1.0 : 0.0)).run();
    });
  }
  Database db(series_db);
  std::vector<double> reduced_ms, scan_ms;
  size_t got = 0;
  for (int i = 0; i < repeats; ++i) {
    auto start = Clock::now();
    got = loadSeries(db, 1, "loss", 0, {.buckets = buckets}).buckets.size();
    reduced_ms.push_back(secondsSince(start) * 1e3);
    start = Clock::now();
    Statement scan(db, fmt::format("SELECT (step - 1) * {} / {}, min(value), max(value), "
                                   "avg(value), count(*) FROM scalar_points WHERE run_id = 1 "
                                   "AND metric = 'loss' AND rank = 0 GROUP BY 1",
                                   buckets, points));
    while (scan.run()) {
    }
    scan_ms.push_back(secondsSince(start) * 1e3);
  }
  fmt::print(
      "\nSeries load: {} points reduced to {} buckets ({} came back), median of {} "
      "loads\n\n",
      points, buckets, got, repeats);
  fmt::print("{:<44} {:>12} {:>14} {:>10}\n", "", "median ms", "max ms", "ratio");
  fmt::print("{:<44} {:>12.2f} {:>14.2f} {:>10.2f}\n", "loadSeries (rollups + edge points)",
             median(reduced_ms), *std::max_element(reduced_ms.begin(), reduced_ms.end()),
             median(scan_ms) / median(reduced_ms));
  fmt::print("{:<44} {:>12.2f} {:>14.2f} {:>10.2f}\n", "anchor: SQL GROUP BY over every point",
             median(scan_ms), *std::max_element(scan_ms.begin(), scan_ms.end()), 1.0);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"storage benchmark: telemetry ingest and reduced series loading"};
  std::string recorded, dir = (fs::temp_directory_path() / "ringmaster_storage_bench").string();
  int64_t events = 1'000'000, points = 1'000'000;
  int buckets = 2000, repeats = 20, rounds = 3;
  app.add_option("--telemetry", recorded,
                 "a recorded telemetry file (ringmaster run "
                 "--save-telemetry); default: a synthetic DDP stream");
  app.add_option("--events", events, "telemetry events to ingest")->default_val(events);
  app.add_option("--points", points, "points of the series to load")->default_val(points);
  app.add_option("--buckets", buckets, "buckets to reduce it to")->default_val(buckets);
  app.add_option("--rounds", rounds,
                 "rounds of the flood and of the ingest, each beside its anchor")
      ->default_val(rounds)
      ->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "where the benchmark databases go (removed afterwards)");
  CLI11_PARSE(app, argc, argv);
  fs::remove_all(dir);
  fs::create_directories(dir);

  // The flood first, so that the peak resident size it reports is the recorder's, not the ingest's.
  benchFlood(dir, rounds);
  benchIngest(dir, telemetryLines(recorded, events), recorded, rounds);
  benchSeriesLoad(dir, points, buckets, repeats);
  fs::remove_all(dir);
  return 0;
}
