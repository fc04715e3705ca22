// Hostile numbers (issue 16, findings 1 and 12): the extremes of every integer and float field of
// every telemetry event kind, sent as JSON text, go through the decoders, the recorder into a real
// database, every query the command line and the window run, and the formatting of what comes
// out; a database holding what the decoders now refuse (written by an older version, or edited)
// is read the same way. Nothing may crash or overflow, no number may print unbounded, and no byte
// count may print negative. The command line itself is run on the run of issue 16's finding 1.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/history_commands.h"
#include "cli/terminal.h"
#include "common/captured_process.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "db/statement.h"
#include "db/step_columns.h"
#include "db/step_rollups.h"
#include "engine/telemetry/sample_events.h"
#include "export/run_export.h"
#include "query/comm_stats.h"
#include "query/evals.h"
#include "query/hang.h"
#include "query/runs.h"
#include "query/schedule.h"
#include "query/series.h"
#include "query/summary.h"
#include "recorder/recorder.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr uint64_t kUint64Max = std::numeric_limits<uint64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The longest line a report may print: a table row of a dozen bounded figures and short names.
constexpr size_t kLongestLine = 400;

// ---------------------------------------------------------------------------------------------
// The telemetry a hostile stream sends.

// The extremes every numeric field is tried with (JSON text).
const std::vector<std::string>& kExtremes = samples::numericExtremes();

struct Kind {
  const char* type;
  ordered_json body;              // valid values for every field
  std::vector<const char*> keys;  // its numeric fields (and the envelope's, for step)
};

std::vector<Kind> kinds() {
  return {
      {"step",
       {{"step", 1},
        {"loss", 2.5},
        {"lr", 0.001},
        {"samples", 8},
        {"step_ms", 10},
        {"compute_ms", 8},
        {"comm_ms", 2},
        {"exposed_comm_ms", 1},
        {"mem_allocated", 100},
        {"mem_peak", 200},
        {"mem_reserved", 300},
        {"device_mem_used", 400},
        {"grad_norm", 1},
        {"accuracy", 0.5}},
       {"rank", "seq", "t", "step", "loss", "lr", "samples", "step_ms", "compute_ms", "comm_ms",
        "exposed_comm_ms", "mem_allocated", "mem_peak", "mem_reserved", "device_mem_used",
        "grad_norm", "accuracy"}},
      {"comm",
       {{"seq_op", 0},
        {"op", "all_reduce"},
        {"group", "world"},
        {"bytes", 4096},
        {"dtype", "float32"},
        {"duration_ms", 1},
        {"algbw_gbps", 1},
        {"busbw_gbps", 1},
        {"wait_ms", 0.1},
        {"step", 1}},
       {"seq_op", "bytes", "duration_ms", "algbw_gbps", "busbw_gbps", "wait_ms", "step"}},
      {"sched",
       {{"step", 1},
        {"stage", 0},
        {"micro_batch", 0},
        {"phase", "F"},
        {"start_us", 0},
        {"end_us", 100},
        {"ready_us", 10},
        {"transfer_us", 5},
        {"virtual_stage", 0}},
       {"step", "stage", "micro_batch", "start_us", "end_us", "ready_us", "transfer_us",
        "virtual_stage"}},
      {"hello",
       {{"world_size", 2},
        {"local_rank", 0},
        {"host", "node"},
        {"pid", 1},
        {"device", "cpu"},
        {"device_name", "cpu"},
        {"device_memory_total", 1024},
        {"version", "0"},
        {"strategy", "pipeline"},
        {"attempt", 0}},
       {"world_size", "local_rank", "pid", "device_memory_total", "attempt"}},
      {"error",
       {{"message", "m"},
        {"kind", "k"},
        {"where", "w"},
        {"step", 1},
        {"fatal", false},
        {"exit_code", 1}},
       {"step", "exit_code"}},
      {"done",
       {{"status", "completed"}, {"final_step", 1}, {"wall_s", 1}},
       {"final_step", "wall_s"}},
  };
}

// One line of `kind` from `rank`, with `key` (a body or envelope field) set to the raw JSON text.
std::string line(const Kind& kind, int rank, uint64_t seq, const std::string& key = "",
                 const std::string& raw = "") {
  ordered_json j = {{"v", kTelemetryProtocol},
                    {"type", kind.type},
                    {"rank", rank},
                    {"seq", seq},
                    {"t", 1.7e9 + static_cast<double>(seq)}};
  for (const auto& [name, value] : kind.body.items()) j[name] = value;
  if (key.empty()) return j.dump();
  j[key] = "@@RAW@@";
  std::string text = j.dump();
  text.replace(text.find("\"@@RAW@@\""), 9, raw);
  return text;
}

// ---------------------------------------------------------------------------------------------
// Reading a run every way the command line and the window do.

// What a report printed, captured from a FILE* (or from stdout around `print`).
std::string captured(const std::function<void(std::FILE*)>& print) {
  std::FILE* file = std::tmpfile();
  EXPECT_NE(file, nullptr);
  print(file);
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
  std::fclose(file);
  return text;
}

std::string capturedStdout(const std::function<void()>& print) {
  return captured([&](std::FILE* file) {
    std::fflush(stdout);
    const int saved = ::dup(STDOUT_FILENO);
    ::dup2(::fileno(file), STDOUT_FILENO);
    print();
    std::fflush(stdout);
    ::dup2(saved, STDOUT_FILENO);
    ::close(saved);
  });
}

// Every line bounded, and no byte count negative ("-1 B", "-16.0 EiB").
void expectPrintedSanely(const std::string& text, const std::string& what) {
  static const std::regex negative_bytes(R"(-[0-9][0-9.]* (B|KiB|MiB|GiB|TiB|PiB|EiB)\b)");
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), kLongestLine) << what << ": " << line.substr(0, 200) << "...";
    EXPECT_FALSE(std::regex_search(line, negative_bytes)) << what << ": " << line;
  }
}

const std::vector<storage::SeriesRange> kRanges = {
    {},
    {.from_step = 0, .to_step = kInt64Max, .buckets = 1},
    {.from_step = 1, .to_step = kInt64Max, .buckets = 10},
    {.from_step = kInt64Min, .to_step = kInt64Max, .buckets = 7},
    {.from_step = kInt64Min, .to_step = kInt64Min, .buckets = 1},
    {.from_step = kInt64Max - 1, .to_step = kInt64Max, .buckets = 3},
    {.from_step = kInt64Max, .to_step = kInt64Max, .buckets = 1},
    {.from_step = 5, .to_step = 4, .buckets = 10},
    {.from_step = -100, .to_step = 100, .buckets = 0},
    {.from_step = 0, .to_step = kMaxStep, .buckets = 2048},
    {.from_step = kMaxStep, .to_step = kInt64Max, .buckets = 5},
    {.from_step = 1, .to_step = 1000, .buckets = 100000},
};

void expectSeriesSane(const storage::Series& series, const storage::SeriesRange& range,
                      const std::string& what) {
  EXPECT_GE(series.bucket_width, 1) << what;
  EXPECT_LE(series.buckets.size(), static_cast<size_t>(std::max(range.buckets, 1))) << what;
  for (const storage::SeriesBucket& bucket : series.buckets) {
    EXPECT_GE(bucket.summary.count, 1) << what;
    EXPECT_GE(bucket.summary.first_step, bucket.start) << what;
    EXPECT_GE(series.lastStepOf(bucket.start), bucket.summary.last_step) << what;
  }
}

// Every query the command line and the window run on one run, and every report printed of it.
void readEverything(const storage::Database& db, int64_t run_id, const fs::path& dir) {
  const storage::RunRecord run = storage::loadRun(db, run_id);
  std::vector<std::string> metrics(storage::kStepColumns.begin(), storage::kStepColumns.end());
  for (const std::string& name : storage::metricNames(db, run_id)) metrics.push_back(name);
  for (const std::string& metric : metrics) {
    for (const storage::SeriesRange& range : kRanges) {
      const std::string what = fmt::format("run {} {} [{}, {}] / {}", run_id, metric,
                                           range.from_step, range.to_step, range.buckets);
      for (int rank : {0, 1, -1, std::numeric_limits<int>::max()})
        expectSeriesSane(storage::loadSeries(db, run_id, metric, rank, range), range, what);
      const storage::Band band = storage::loadRankBand(db, run_id, metric, range);
      EXPECT_LE(band.buckets.size(), static_cast<size_t>(std::max(range.buckets, 1))) << what;
      const storage::CommTimeByOp comm = storage::commTimeByOp(
          db, run_id, range.from_step, range.to_step, range.buckets, std::nullopt);
      EXPECT_GE(comm.bucket_width, 1) << what;
      for (const storage::OpTimeSeries& op : comm.ops)
        EXPECT_LE(op.buckets.size(), static_cast<size_t>(std::max(range.buckets, 1))) << what;
      storage::commTimeByOp(db, run_id, range.from_step, range.to_step, range.buckets, 0);
    }
    storage::summarizeSeries(db, run_id, metric, 0);
  }
  const storage::RunSummary summary = storage::summarizeRun(db, run_id);
  for (const storage::RankSummary& rank : summary.ranks) EXPECT_GE(rank.peak_memory, 0);
  storage::finalLoss(db, run_id, run.world_size);
  storage::compareRuns(db, {run_id, run_id});
  for (const storage::CommOpStats& op : storage::commStatsByOp(db, run_id))
    EXPECT_GE(op.count, 1) << op.op;
  storage::commStatsByRank(db, run_id);
  for (int64_t step : storage::scheduledSteps(db, run_id)) {
    if (auto schedule = storage::loadStepSchedule(db, run_id, step)) {
      EXPECT_GE(schedule->bubble_fraction, 0);
      EXPECT_LE(schedule->bubble_fraction, 1);
      for (const storage::RankBubble& rank : schedule->ranks) {
        EXPECT_GE(rank.wait_us, 0);
        EXPECT_GE(rank.transfer_us, 0);
      }
    }
  }
  storage::meanBubbleFraction(db, run_id);
  const std::vector<storage::EvalPoint> evals = storage::loadEvals(db, run_id);
  const std::optional<storage::EvalPoint> latest = storage::latestEval(db, run_id);
  EXPECT_EQ(latest.has_value(), !evals.empty());
  storage::listRuns(db, {});
  for (const storage::RankRecord& rank : storage::loadRanks(db, run_id))
    EXPECT_GE(static_cast<double>(rank.memory_total), 0);
  storage::loadLogs(db, run_id, std::nullopt, 1000);
  storage::loadFlightRecorderDumps(db, run_id);
  storage::loadIngestCounts(db, run_id);

  // Exports: CSV byte counts never negative, the trace is JSON with finite times.
  const fs::path csv = dir / fmt::format("csv{}", run_id);
  storage::exportRunCsv(db, run_id, csv.string());
  for (const char* table : {"comm_events.csv", "ranks.csv"}) {
    std::ifstream in(csv / table);
    std::string header, row;
    std::getline(in, header);
    EXPECT_EQ(header.find(",-"), std::string::npos);
    std::vector<std::string> names;
    std::istringstream header_fields(header);
    for (std::string name; std::getline(header_fields, name, ',');) names.push_back(name);
    while (std::getline(in, row)) {
      std::istringstream fields(row);
      std::string field;
      for (size_t c = 0; std::getline(fields, field, ',') && c < names.size(); ++c) {
        if (names[c] == "bytes" || names[c] == "memory_total") {
          EXPECT_TRUE(field.empty() || field[0] != '-') << table << ": " << row;
        }
      }
    }
  }
  const fs::path trace = dir / fmt::format("trace{}.json", run_id);
  storage::exportRunTrace(db, run_id, trace.string());
  std::ifstream trace_in(trace);
  const json events = json::parse(trace_in)["traceEvents"];
  for (const json& event : events) {
    if (event["ph"] != "X") continue;
    EXPECT_TRUE(event["ts"].is_number()) << event.dump();
    EXPECT_TRUE(event["dur"].is_number()) << event.dump();
  }

  // The reports of `show`, `show --json`, `compare` and `runs`.
  for (bool as_json : {false, true}) {
    const std::string shown =
        captured([&](std::FILE* out) { cli::printRunReport(db, run_id, as_json, out); });
    expectPrintedSanely(shown, fmt::format("show {}{}", run_id, as_json ? " --json" : ""));
    if (as_json) {
      const json document = json::parse(shown);
      for (const json& op : document["comm_ops"]) EXPECT_GE(op["bytes"].get<double>(), 0);
      for (const json& rank : document["ranks"]) EXPECT_GE(rank["peak_memory"].get<double>(), 0);
    }
    expectPrintedSanely(capturedStdout([&] {
                          cli::compareCommand(db, {run_id, run_id}, as_json);
                        }),
                        "compare");
    expectPrintedSanely(capturedStdout([&] { cli::runsCommand(db, {}, as_json); }), "runs");
  }
}

class HostileNumbers : public storage::testing::StorageTest {
 protected:
  std::string dbPath() const { return (dir_ / "runs.db").string(); }

  int64_t newRun(storage::Database& db, const std::string& name) {
    return storage::createRun(db, {.name = name,
                                   .spec_json = R"({"strategy": {"kind": "pipeline"}})",
                                   .strategy = "pipeline",
                                   .world_size = 2});
  }
};

// ---------------------------------------------------------------------------------------------
// The tests.

TEST_F(HostileNumbers, ExtremesOfEveryFieldThroughDecodeStoreQueryAndPrint) {
  storage::Database db(dbPath());
  int accepted = 0, refused = 0;
  for (const Kind& kind : kinds()) {
    const Kind step = kinds()[0], comm = kinds()[1], sched = kinds()[2], hello = kinds()[3];
    for (const char* key : kind.keys) {
      SCOPED_TRACE(fmt::format("{}.{}", kind.type, key));
      const int64_t run_id = newRun(db, fmt::format("{}.{}", kind.type, key));
      {
        storage::Recorder recorder(dbPath(), run_id, 0);
        uint64_t seq[2] = {0, 0};
        for (int rank : {0, 1}) EXPECT_TRUE(recorder.submitLine(line(hello, rank, seq[rank]++)));
        // A few ordinary events around the hostile ones, so that every query has data.
        for (const Kind* plain : {&step, &comm, &sched})
          for (int rank : {0, 1}) recorder.submitLine(line(*plain, rank, seq[rank]++));
        for (const std::string& value : kExtremes) {
          const std::string text = line(kind, 0, seq[0]++, key, value);
          const DecodeResult decoded = decodeEvent(text);
          decoded.ok() ? ++accepted : ++refused;
          recorder.submitLine(text);
        }
        recorder.flush();
        EXPECT_EQ(recorder.failure(), "");
      }
      storage::finishRun(db, run_id, "completed");
      readEverything(db, run_id, dir_);
    }
  }
  EXPECT_GT(accepted, 200);  // the in-domain extremes reach storage
  EXPECT_GT(refused, 200);   // the others are refused at decode
}

// The column `name` of every row of a CSV export.
std::vector<std::string> csvColumn(const fs::path& path, const std::string& name) {
  std::ifstream in(path);
  std::string header, row;
  std::getline(in, header);
  std::vector<std::string> names;
  std::istringstream header_fields(header);
  for (std::string field; std::getline(header_fields, field, ',');) names.push_back(field);
  const size_t column = std::find(names.begin(), names.end(), name) - names.begin();
  std::vector<std::string> values;
  while (std::getline(in, row)) {
    std::istringstream fields(row);
    std::string field;
    for (size_t c = 0; std::getline(fields, field, ','); ++c)
      if (c == column) values.push_back(field);
  }
  return values;
}

bool holds(const std::vector<std::string>& values, uint64_t value) {
  return std::find(values.begin(), values.end(), std::to_string(value)) != values.end();
}

// Issue 32, point 7: an unsigned 64-bit quantity (a byte count, a memory figure, a sequence
// number, a collective counter) either keeps its exact value through the real decoder, recorder,
// SQLite file, CSV and trace export, `show` and `show --json`, or is refused at ingest as a bad
// line and counted; never stored with its sign flipped (2^63 as -2^63) or rounded (2^64 - 1 as
// 2^63 - 1). Storage's integers are signed 64-bit, so the unsigned fields stop at 2^63 - 1; a
// step's memory figures are kept as doubles, so they stop at 2^53.
TEST_F(HostileNumbers, UnsignedQuantitiesKeepTheirValueOrAreRefusedAsBadLines) {
  const Kind hello = kinds()[3], step = kinds()[0], comm = kinds()[1];
  const Kind progress{
      "progress", {{"group", "world"}, {"period_s", 5}, {"started", 1}, {"completed", 1}}, {}};
  const Kind log{"log", {{"level", "info"}, {"message", "m"}}, {}};
  constexpr uint64_t kDoubleExact = uint64_t{1} << 53;
  const std::vector<uint64_t> values = {0,
                                        1,
                                        kDoubleExact,
                                        kDoubleExact + 1,
                                        uint64_t{kInt64Max} - 1,
                                        uint64_t{kInt64Max},
                                        uint64_t{1} << 63,
                                        (uint64_t{1} << 63) + 1,
                                        kUint64Max - 1,
                                        kUint64Max};
  storage::Database db(dbPath());
  for (const uint64_t value : values) {
    SCOPED_TRACE(fmt::format("value {}", value));
    const std::string raw = std::to_string(value);
    const bool fits_int64 = value <= uint64_t{kInt64Max}, fits_double = value <= kDoubleExact;
    const int64_t bad_lines = (fits_int64 ? 0 : 5) + (fits_double ? 0 : 1);
    const int64_t run_id = newRun(db, raw);
    {
      storage::Recorder recorder(dbPath(), run_id, 0);
      for (int rank : {0, 1}) recorder.submitLine(line(hello, rank, 10));
      recorder.submitLine(line(hello, 0, 11, "device_memory_total", raw));
      recorder.submitLine(line(step, 0, 12, "mem_peak", raw));
      recorder.submitLine(line(comm, 0, 13, "bytes", raw));
      recorder.submitLine(line(comm, 0, 14, "seq_op", raw));
      recorder.submitLine(line(progress, 0, 15, "started", raw));
      recorder.submitLine(line(log, 0, 16, "seq", raw));
      recorder.flush();
      ASSERT_EQ(recorder.failure(), "");
      EXPECT_EQ(recorder.counts().malformed, bad_lines);
    }
    storage::finishRun(db, run_id, "completed");

    // The database, as the queries read it.
    EXPECT_EQ(storage::loadRanks(db, run_id).at(0).memory_total, fits_int64 ? value : 1024);
    const storage::LiveProgress live = storage::loadLiveProgress(db, run_id, 1.8e9);
    ASSERT_EQ(live.ranks.size(), fits_int64 ? 1u : 0u);
    if (fits_int64) EXPECT_EQ(static_cast<uint64_t>(live.ranks[0].started), value);
    const auto last_seqs = storage::lastStoredSeqs(db, run_id);
    EXPECT_EQ(last_seqs.at(0).second, fits_int64 ? std::max<uint64_t>(value, 15) : 10);

    // The CSV and trace exports.
    const fs::path csv = dir_ / fmt::format("csv{}", run_id);
    storage::exportRunCsv(db, run_id, csv.string());
    EXPECT_EQ(holds(csvColumn(csv / "comm_events.csv", "bytes"), value), fits_int64);
    EXPECT_EQ(holds(csvColumn(csv / "ranks.csv", "memory_total"), value), fits_int64);
    const fs::path trace = dir_ / fmt::format("trace{}.json", run_id);
    storage::exportRunTrace(db, run_id, trace.string());
    std::ifstream trace_in(trace);
    const json events = json::parse(trace_in)["traceEvents"];
    bool traced = false;
    for (const json& event : events) {
      if (!event.contains("args") || !event["args"].contains("bytes")) continue;
      EXPECT_TRUE(event["args"]["bytes"].is_number_unsigned()) << event.dump();
      traced |= event["args"]["bytes"].get<uint64_t>() == value;
    }
    EXPECT_EQ(traced, fits_int64);

    // `show --json` and `show`.
    const json shown =
        json::parse(captured([&](std::FILE* out) { cli::printRunReport(db, run_id, true, out); }));
    bool op_shown = false;
    for (const json& op : shown["comm_ops"]) op_shown |= op["bytes"].get<uint64_t>() == value;
    EXPECT_EQ(op_shown, fits_int64) << shown["comm_ops"].dump();
    EXPECT_EQ(shown["peak_memory"].get<uint64_t>(), fits_double ? value : 0);
    const std::string text =
        captured([&](std::FILE* out) { cli::printRunReport(db, run_id, false, out); });
    if (fits_double && value > 0)
      EXPECT_NE(text.find(cli::formatBytes(static_cast<double>(value))), std::string::npos) << text;
    EXPECT_NE(text.find(fmt::format(", {} bad lines", bad_lines)), std::string::npos) << text;
  }
}

// What a database written by an older version (whose decoder took any int64 step, any finite
// duration, 2^64-1 bytes) or edited by hand may hold: every query and report stays defined.
TEST_F(HostileNumbers, ADatabaseHoldingAnyValueIsReadSafely) {
  storage::Database db(dbPath());
  const int64_t run_id = newRun(db, "old");
  {
    storage::Recorder recorder(dbPath(), run_id, 0);
    uint64_t seq = 0;
    auto submit = [&](int rank, EventBody body, double t = 1.7e9) {
      recorder.submit(TelemetryEvent{rank, seq++, t, std::move(body)});
    };
    HelloEvent hello{.world_size = 2, .host = "node", .device = "cpu"};
    hello.device_memory_total = kUint64Max;
    submit(0, hello);
    const std::vector<int64_t> steps = {0,
                                        1,
                                        2,
                                        63,
                                        64,
                                        4095,
                                        4096,
                                        kMaxStep,
                                        kMaxStep + 1,
                                        kInt64Max / 2,
                                        kInt64Max - 4096,
                                        kInt64Max - 1,
                                        kInt64Max};
    const std::vector<double> values = {1e308, -1e308, 0, -1, 1e-308, 5e-324, 1.5, 1e300, -0.0};
    for (size_t i = 0; i < steps.size(); ++i) {
      const double x = values[i % values.size()];
      submit(0,
             StepEvent{.step = steps[i],
                       .loss = x,
                       .lr = x,
                       .samples = i % 2 ? kInt64Max : 0,
                       .step_ms = x,
                       .compute_ms = -x,
                       .comm_ms = x,
                       .exposed_comm_ms = x,
                       .mem_allocated = kUint64Max,
                       .mem_peak = kUint64Max - i,
                       .mem_reserved = kUint64Max,
                       .device_mem_used = kUint64Max,
                       .grad_norm = x,
                       .accuracy = x},
             i % 3 ? 1.7e9 : 1e308);
      submit(0,
             CommEvent{.seq_op = kUint64Max,
                       .op = "all_reduce",
                       .group = "world",
                       .bytes = i % 2 ? kUint64Max : uint64_t{1} << 63,
                       .dtype = "float32",
                       .duration_ms = x,
                       .algbw_gbps = -x,
                       .busbw_gbps = x,
                       .wait_ms = -x,
                       .step = steps[i]},
             i % 4 ? 1.7e9 : 1e308);
      submit(static_cast<int>(i % 2),
             SchedEvent{.step = steps[i],
                        .stage = 0,
                        .micro_batch = std::numeric_limits<int>::max(),
                        .start_us = i % 2 ? kInt64Min : kInt64Max - 1,
                        .end_us = kInt64Max,
                        .ready_us = i % 3 ? std::optional<int64_t>(kInt64Min) : std::nullopt,
                        .transfer_us = kInt64Max});
      submit(static_cast<int>(i % 2), EvalEvent{.step = steps[i],
                                                .val_loss = x,
                                                .perplexity = -x,
                                                .tokens = i % 2 ? kInt64Max : kInt64Min,
                                                .eval_ms = x});
    }
    submit(0, ErrorEvent{.message = "m", .step = kInt64Max, .fatal = false});
    submit(0, DoneEvent{.final_step = kInt64Max, .wall_s = -1e308});
    recorder.flush();
    ASSERT_EQ(recorder.failure(), "");
  }
  storage::finishRun(db, run_id, "completed");
  // Edits no recorder writes: negative steps, rollups contradicting their points, times and
  // counts beyond any clock.
  db.exec(
      fmt::format("INSERT INTO steps (run_id, rank, step, attempt, loss, step_ms, mem_peak) VALUES "
                  "({0}, 1, -9223372036854775808, 0, 1e308, -1e308, -5), ({0}, 1, -1, 0, 1, 1, 1), "
                  "({0}, 1, 9223372036854775807, 0, 1, 1, 1e300)",
                  run_id));
  db.exec(fmt::format(
      "INSERT OR REPLACE INTO scalar_rollups (run_id, metric_id, rank, width, bucket, n, sum, min, "
      "max, first_step, last_step, last_value) SELECT {0}, id, 1, w.width, w.bucket, -3, 1e308, "
      "1e308, -1e308, 9223372036854775807, -9223372036854775808, 1e308 FROM metrics, "
      "(SELECT 64 AS width, -144115188075855872 AS bucket UNION ALL SELECT 64, 144115188075855871 "
      "UNION ALL SELECT 512, 0 UNION ALL SELECT 4096, 2251799813685247) w",
      run_id));
  std::vector<std::string> step_columns, contradicting;
  for (std::string_view column : storage::kStepColumns) {
    step_columns.push_back(storage::stepRollupColumns(column));
    contradicting.push_back(
        "-3, 1e308, 1e308, -1e308, 9223372036854775807, -9223372036854775808, 1e308");
  }
  db.exec(fmt::format(
      "INSERT OR REPLACE INTO step_rollups (run_id, width, rank, bucket, {1}) SELECT {0}, "
      "w.width, 1, w.bucket, {2} FROM (SELECT 64 AS width, -144115188075855872 AS bucket UNION "
      "ALL SELECT 64, 144115188075855871 UNION ALL SELECT 512, 0 UNION ALL SELECT 4096, "
      "2251799813685247) w",
      run_id, fmt::join(step_columns, ", "), fmt::join(contradicting, ", ")));
  db.exec(fmt::format(
      "INSERT INTO comm_events (run_id, attempt, rank, t, step, op, group_name, group_size, bytes, "
      "dtype, duration_ms, wait_ms, algbw_gbps, busbw_gbps) VALUES "
      "({0}, 0, 9, -1e308, -9223372036854775808, 'x', 'w', 0, -9223372036854775808, 'f', 1e308, "
      "1e308, 1e308, 1e308), ({0}, 0, 1, 1e308, 9223372036854775807, 'x', 'w', 0, -1, 'f', "
      "-1e308, -1e308, -1e308, -1e308)",
      run_id));
  db.exec(fmt::format(
      "INSERT INTO sched_events (run_id, attempt, rank, step, stage, virtual_stage, micro_batch, "
      "phase, start_us, end_us, ready_us, transfer_us) VALUES ({0}, 0, 1, -5, -1, "
      "9223372036854775807, -9223372036854775808, 'B', 9223372036854775807, "
      "-9223372036854775808, 0, -9223372036854775808)",
      run_id));
  db.exec(fmt::format(
      "UPDATE runs SET created_at = 1e308, started_at = -1e308, ended_at = 1e308 WHERE id = {}",
      run_id));
  db.exec(fmt::format(
      "UPDATE attempts SET events_stored = 9223372036854775807, events_dropped = -1 WHERE "
      "run_id = {}",
      run_id));
  db.exec(fmt::format("UPDATE ranks SET pid = -9223372036854775808 WHERE run_id = {}", run_id));
  db.exec(fmt::format(
      "INSERT OR REPLACE INTO evals (run_id, rank, step, attempt, t, val_loss, perplexity, "
      "tokens, eval_ms) VALUES ({0}, 0, -9223372036854775808, 0, -1e308, 1e308, -1e308, "
      "-9223372036854775808, -1e308), ({0}, 9, 9223372036854775807, 0, 1e308, -1e308, 1e308, "
      "9223372036854775807, 1e308)",
      run_id));
  readEverything(db, run_id, dir_);
}

// The human forms of numbers: bounded whatever the value, byte counts never negative.
TEST(HostileNumbersFormatting, EveryFigureIsBoundedAndNoByteCountNegative) {
  const std::vector<double> extremes = {0,
                                        -0.0,
                                        1,
                                        -1,
                                        0.5,
                                        1023,
                                        1024,
                                        1e15,
                                        1e16,
                                        9.2e18,
                                        1.8e19,
                                        1e100,
                                        1e300,
                                        1e308,
                                        -1e308,
                                        1e-308,
                                        5e-324,
                                        kInf,
                                        -kInf,
                                        kNaN,
                                        std::numeric_limits<double>::max(),
                                        std::numeric_limits<double>::lowest()};
  for (double x : extremes) {
    SCOPED_TRACE(fmt::format("{}", x));
    const std::string bytes = cli::formatBytes(x);
    EXPECT_LE(bytes.size(), 16u) << bytes;
    EXPECT_TRUE(bytes == "-" || bytes.front() != '-') << bytes;
    for (int significant : {1, 3, 4, 6})
      EXPECT_LE(cli::formatNumber(x, significant).size(), 16u) << cli::formatNumber(x, significant);
    EXPECT_LE(cli::formatDuration(x).size(), 16u) << cli::formatDuration(x);
    EXPECT_LE(cli::formatTimestamp(x).size(), 16u) << cli::formatTimestamp(x);
  }
  EXPECT_EQ(cli::formatBytes(static_cast<double>(kUint64Max)), "16.0 EiB");
  EXPECT_EQ(cli::formatBytes(1536), "1.5 KiB");
  EXPECT_EQ(cli::formatBytes(512), "512 B");
  EXPECT_EQ(cli::formatNumber(12345.6, 3), "12346");
  EXPECT_EQ(cli::formatNumber(0.012345, 3), "0.0123");
  EXPECT_EQ(cli::formatNumber(1e308, 4), "1e+308");
  EXPECT_EQ(cli::formatDuration(-5), "-");
  EXPECT_EQ(cli::formatDuration(42.25), "42.2 s");
  EXPECT_EQ(cli::formatDuration(3723), "1:02:03");
  EXPECT_EQ(cli::formatTimestamp(kNaN), "-");
}

// Issue 16, finding 1: a run whose rank 0 reported step 1 and then step 2^63-1 (as an older
// version recorded it; the decoder now refuses that step) is shown and compared, as text and as
// JSON, by the real `ringmaster`, which exits cleanly every time.
TEST_F(HostileNumbers, ShowAndCompareOfARunWithStepInt64MaxExitCleanly) {
  const std::string step_max = line(kinds()[0], 0, 2, "step", std::to_string(kInt64Max));
  EXPECT_FALSE(decodeEvent(step_max).ok());
  {
    storage::Database db(dbPath());
    for (const char* name : {"first", "second"}) {
      const int64_t run_id = newRun(db, name);
      storage::Recorder recorder(dbPath(), run_id, 0);
      recorder.submitLine(line(kinds()[3], 0, 0));
      recorder.submitLine(line(kinds()[0], 0, 1));  // step 1
      DecodeResult decoded = decodeEvent(line(kinds()[0], 0, 2));
      ASSERT_TRUE(decoded.ok());
      std::get<StepEvent>(decoded.event().body).step = kInt64Max;
      recorder.submit(decoded.event());
      recorder.submitLine(step_max);  // refused and counted as malformed
      recorder.flush();
      ASSERT_EQ(recorder.failure(), "");
      EXPECT_EQ(recorder.counts().malformed, 1);
    }
  }
  const std::string ringmaster = std::string(ringmaster::testBinaryDir()) + "/app/ringmaster";
  const std::vector<std::vector<std::string>> commands = {{"show", "1"},
                                                          {"show", "1", "--json"},
                                                          {"compare", "1", "2"},
                                                          {"compare", "1", "2", "--json"},
                                                          {"runs"},
                                                          {"runs", "--json"},
                                                          {"show", "2"}};
  for (std::vector<std::string> command : commands) {
    const std::string shown = fmt::format("{}", fmt::join(command, " "));
    command.insert(command.begin(), {"--db", dbPath()});
    testing::CapturedProcess process(ringmaster, command);
    const ExitStatus status = process.wait(60s);
    EXPECT_TRUE(status.ok()) << shown << ": " << process.err();
    expectPrintedSanely(process.out(), shown);
    if (command.back() == "--json") {
      EXPECT_TRUE(json::accept(process.out())) << shown;
    }
  }
}

}  // namespace
}  // namespace ringmaster
