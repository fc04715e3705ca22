// libFuzzer target from telemetry bytes to every read of the run database: the bytes are one
// worker stream (split into lines as a launcher splits them), recorded by the real Recorder into a
// fresh SQLite file, and then every query the CLI and the window run on a run is run on it, over
// whole and hostile step ranges. Nothing may crash, hang or trip a sanitizer, and a few properties
// that hold on any input are checked.
//
// The first input byte picks the run's world size (1..8) and the step ranges queried; the rest is
// the stream. Run it:
//   ./build/fuzz/tests/fuzz/fuzz_recorder_queries -max_total_time=600
//   -dict=tests/fuzz/telemetry.dict
//       <scratch corpus dir> tests/fuzz/corpus/recorder
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "db/database.h"
#include "export/run_export.h"
#include "query/comm_stats.h"
#include "query/evals.h"
#include "query/runs.h"
#include "query/schedule.h"
#include "query/series.h"
#include "query/summary.h"
#include "recorder/recorder.h"
#include "telemetry/codec.h"

namespace {

namespace fs = std::filesystem;
using namespace ringmaster::storage;

void require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_recorder_queries: property violated: %s\n", what);
    std::abort();
  }
}

fs::path scratchBase() {
  return fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
}

// Removes this process's scratch directory and template database when the fuzzer exits.
void removeScratch() {
  std::error_code ignored;
  const std::string pid = std::to_string(::getpid());
  fs::remove_all(scratchBase() / ("rm-fuzz-recorder-" + pid), ignored);
  fs::remove(scratchBase() / ("rm-fuzz-recorder-template-" + pid + ".db"), ignored);
}

// One scratch directory per fuzzing process, emptied before every input, removed at exit.
const fs::path& scratchDirectory() {
  static const fs::path dir = [] {
    fs::path path = scratchBase() / ("rm-fuzz-recorder-" + std::to_string(::getpid()));
    fs::create_directories(path);
    std::atexit(removeScratch);
    return path;
  }();
  return dir;
}

void checkSeries(const Series& series, const SeriesRange& range) {
  require(series.bucket_width >= 1, "a bucket is at least one step wide");
  require(series.buckets.size() <= static_cast<size_t>(std::max(range.buckets, 1)),
          "no more buckets than asked for");
  for (size_t i = 1; i < series.buckets.size(); ++i) {
    require(series.buckets[i - 1].start < series.buckets[i].start, "buckets ascend");
  }
  for (const SeriesBucket& bucket : series.buckets) {
    require(bucket.summary.count > 0, "an empty bucket is left out");
  }
}

// Every query the CLI (runs, show, compare, export, trace) and the window's run snapshot make.
void queryEverything(const Database& db, int64_t run_id, uint8_t selector) {
  const RunRecord run = loadRun(db, run_id);
  require(listRuns(db).size() == 8, "every run is listed");
  const std::vector<RankRecord> ranks = loadRanks(db, run_id);
  (void)summarizeRun(db, run_id);
  (void)finalLoss(db, run_id, run.world_size);
  (void)compareRuns(db, {run_id, run_id});
  (void)commStatsByOp(db, run_id);
  (void)commStatsByRank(db, run_id);
  (void)loadLogs(db, run_id);
  (void)loadLogs(db, run_id, 0, 10);
  (void)loadFlightRecorderDumps(db, run_id);
  (void)loadIngestCounts(db, run_id);
  (void)meanBubbleFraction(db, run_id);

  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<SeriesRange> ranges = {
      {},
      {0, kMax, 1},
      {kMin, kMax, 1 + (selector & 0x3f)},
      {kMax - 1, kMax, 1000},
      {1, 1, 3},
      {(int64_t{1} << 53) - 10, int64_t{1} << 53, 7},
      {5, 2, 10},  // an empty range
      {0, kMax, std::numeric_limits<int>::max()},
  };
  const std::vector<std::string> metrics = metricNames(db, run_id);
  for (const std::string& metric : metrics) {
    for (const SeriesRange& range : ranges) {
      for (int rank = 0; rank < run.world_size; ++rank) {
        checkSeries(loadSeries(db, run_id, metric, rank, range), range);
      }
      for (size_t i = 0; i < ranks.size() && i < 16; ++i) {
        checkSeries(loadSeries(db, run_id, metric, ranks[i].rank, range), range);
      }
      (void)loadRankBand(db, run_id, metric, range);
    }
    (void)summarizeSeries(db, run_id, metric, 0);
  }
  for (const SeriesRange& range : ranges) {
    (void)commTimeByOp(db, run_id, range.from_step, range.to_step, range.buckets);
    (void)commTimeByOp(db, run_id, range.from_step, range.to_step, range.buckets, 0);
  }
  const std::vector<int64_t> steps = scheduledSteps(db, run_id);
  for (size_t i = 0; i < steps.size() && i < 8; ++i) (void)loadStepSchedule(db, run_id, steps[i]);
  (void)loadStepSchedule(db, run_id, kMax);
  (void)loadStepSchedule(db, run_id, kMin);
  const std::vector<EvalPoint> evals = loadEvals(db, run_id);
  const std::optional<EvalPoint> latest = latestEval(db, run_id);
  require(evals.empty() == !latest.has_value(), "a latest evaluation exactly when there are any");
  require(!latest || latest->step == evals.back().step, "the latest evaluation is the last");

  const fs::path out = scratchDirectory() / "export";
  (void)exportRunCsv(db, run_id, out.string());
  (void)exportRunTrace(db, run_id, (out / "trace.json").string());
}

// A database with the schema and one run of each world size 1..8 (run id = world size), made once:
// copying it is much faster than migrating a new file for every input.
const fs::path& templateDatabase() {
  static const fs::path path = [] {
    fs::path file = scratchDirectory().parent_path() /
                    ("rm-fuzz-recorder-template-" + std::to_string(::getpid()) + ".db");
    fs::remove(file);
    Database db(file.string());
    for (int world_size = 1; world_size <= 8; ++world_size) {
      const int64_t id = createRun(
          db, {.name = "fuzz", .spec_json = "{}", .strategy = "ddp", .world_size = world_size});
      require(id == world_size, "run ids count from 1");
    }
    return file;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const int64_t run_id = 1 + selector % 8;  // its world size too
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);

  const fs::path& dir = scratchDirectory();
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(dir, ignored)) fs::remove_all(entry, ignored);
  const std::string db_path = (dir / "runs.db").string();
  fs::copy_file(templateDatabase(), db_path);
  {
    // A small queue so that the writer's full-queue path runs too.
    Recorder recorder(db_path, run_id, 0, {.queue_capacity = 64, .batch_size = 16});
    ringmaster::LineSplitter splitter;
    splitter.feed(stream);
    splitter.finish();
    while (auto line = splitter.next()) {
      if (line->oversized) continue;
      recorder.submitLine(line->text);
    }
    recorder.flush();
    require(recorder.failure().empty(), "the recorder keeps writing");
  }
  Database db(db_path);
  finishRun(db, run_id, "completed");
  queryEverything(db, run_id, selector);
  return 0;
}
