// GUI benchmark (offscreen, release build): (1) redrawing the loss chart of a run of 64 ranks x 1M
// steps: the storage query that reduces it to one bucket per pixel column (on the view's worker
// thread) and the chart update and paint (on the GUI thread), for the all-ranks band and for every
// rank's line, beside bare QPainter polylines of the same points (the anchor: what drawing costs
// without the chart library); (2) the GUI thread's longest stall while 64 ranks stream telemetry
// into the database under an open run view, beside the same event loop with no view open.
#include <QApplication>
#include <QElapsedTimer>
#include <QImage>
#include <QPainter>
#include <QTimer>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "data/run_snapshot.h"
#include "db/database.h"
#include "db/statement.h"
#include "db/step_rollups.h"
#include "recorder/recorder.h"
#include "views/run_view.h"
#include "widgets/metric_chart.h"

namespace {

using namespace ringmaster;
using namespace ringmaster::storage;
using namespace ringmaster::ui;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A completed run of `ranks` x `steps` loss points, written with bare inserts of the points and
// their rollups (the recorder's schema: step_rollups) so the benchmark does not wait for ingest.
int64_t writeLongRun(const std::string& path, int ranks, int64_t steps) {
  Database db(path);
  const int64_t run =
      createRun(db, {.name = "long",
                     .spec_json = fmt::format(R"({{"train": {{"steps": {}}}}})", steps),
                     .strategy = "ddp",
                     .world_size = ranks});
  db.exec("INSERT OR IGNORE INTO metrics (name) VALUES ('loss')");
  for (int rank = 0; rank < ranks; ++rank) {
    db.transaction([&] {
      Statement point(
          db, "INSERT INTO steps (run_id, rank, step, attempt, loss) VALUES (?, ?, ?, 0, ?)");
      Statement rollup(db, "INSERT INTO step_rollups (run_id, width, rank, bucket, " +
                               stepRollupColumns("loss") +
                               ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
      for (int64_t width : kRollupWidths) {
        SeriesSummary bucket;
        auto flush = [&](int64_t index) {
          if (bucket.empty()) return;
          rollup.bind(1, run).bind(2, width).bind(3, rank).bind(4, index);
          rollup.bind(5, bucket.count).bind(6, bucket.sum).bind(7, bucket.min);
          rollup.bind(8, bucket.max).bind(9, bucket.first_step).bind(10, bucket.last_step);
          rollup.bind(11, bucket.last_value).run();
          bucket = {};
        };
        for (int64_t step = 1; step <= steps; ++step) {
          const double value = 2.0 * std::exp(-static_cast<double>(step) / (steps / 5.0)) +
                               0.01 * rank + (step % 9973 == 0 ? 1.0 : 0.0);
          if (width == kRollupWidths[0])
            point.bind(1, run).bind(2, rank).bind(3, step).bind(4, value).run();
          if (step / width != (step - 1) / width) flush((step - 1) / width);
          bucket.add(step, value);
        }
        flush(steps / width);
      }
    });
  }
  finishRun(db, run, "completed");
  return run;
}

// As the run view draws every rank: envelopes only up to 8 ranks.
std::vector<ChartLine> linesOf(const std::vector<Series>& per_rank) {
  std::vector<ChartLine> lines;
  for (size_t r = 0; r < per_rank.size(); ++r) {
    ChartLine line{QString("rank %1").arg(r),
                   QColor::fromHsv(static_cast<int>(r * 37 % 360), 200, 200),
                   {},
                   {},
                   {}};
    for (const auto& b : per_rank[r].buckets) {
      const double x = static_cast<double>(b.start);
      line.centre.append({x, b.summary.mean()});
      if (per_rank.size() <= 8) {
        line.low.append({x, b.summary.min});
        line.high.append({x, b.summary.max});
      }
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

void redrawBenchmark(const std::string& path, int64_t run, int64_t steps, int repeats) {
  MetricChart chart("Loss", "loss");
  chart.resize(1200, 500);
  chart.show();
  QApplication::processEvents();
  const int buckets = chart.bucketsWanted();
  Database db(path);

  std::vector<double> band_query, band_draw, each_query, each_draw, anchor_each;
  size_t band_points = 0, each_points = 0;
  for (int i = 0; i < repeats; ++i) {
    auto t = Clock::now();
    const Band band = loadRankBand(db, run, "loss", {.buckets = buckets});
    band_query.push_back(msSince(t));
    ChartLine line{"median", Qt::blue, {}, {}, {}};
    for (const auto& b : band.buckets) {
      line.centre.append({static_cast<double>(b.start), b.median});
      line.low.append({static_cast<double>(b.start), b.min});
      line.high.append({static_cast<double>(b.start), b.max});
    }
    band_points = band.buckets.size();
    t = Clock::now();
    chart.setLines({line});
    chart.repaint();
    band_draw.push_back(msSince(t));

    t = Clock::now();
    std::vector<Series> per_rank;
    const auto world = loadRun(db, run).world_size;
    for (int r = 0; r < world; ++r)
      per_rank.push_back(loadSeries(db, run, "loss", r, {.buckets = buckets}));
    each_query.push_back(msSince(t));
    const std::vector<ChartLine> lines = linesOf(per_rank);
    each_points = 0;
    for (const auto& l : lines) each_points += static_cast<size_t>(l.centre.size());
    t = Clock::now();
    chart.setLines(lines);
    chart.repaint();
    each_draw.push_back(msSince(t));
    // The anchor: the same polylines (centre, low and high) painted on an image of the same size.
    QImage image(chart.size(), QImage::Format_ARGB32_Premultiplied);
    t = Clock::now();
    {
      image.fill(Qt::white);
      QPainter painter(&image);
      // As the chart does: no antialiasing at thousands of points.
      painter.setRenderHint(QPainter::Antialiasing, each_points < 1500);
      const double sx = chart.width() / 1e6, sy = chart.height() / 3.0;
      for (const auto& l : lines) {
        painter.setPen(QPen(l.color, 1.5));
        for (const auto* points : {&l.centre, &l.low, &l.high}) {
          if (points->isEmpty()) continue;
          QPolygonF polygon;
          polygon.reserve(points->size());
          for (const QPointF& p : *points)
            polygon << QPointF(p.x() * sx, chart.height() - p.y() * sy);
          painter.drawPolyline(polygon);
        }
      }
    }
    anchor_each.push_back(msSince(t));
    chart.setLines({});
  }
  fmt::print(
      "Loss chart redraw: {} ranks x {} steps, {:.0f} px plot ({} buckets), median of {}\n"
      "(query: the view's worker thread; draw: the GUI thread)\n\n",
      loadRun(db, run).world_size, steps, chart.chart()->plotArea().width(), buckets, repeats);
  fmt::print("{:<44} {:>10} {:>12} {:>12} {:>8}\n", "", "points", "query ms", "draw ms", "total");
  fmt::print("{:<44} {:>10} {:>12.1f} {:>12.1f} {:>8.1f}\n", "all-ranks band (min/median/max)",
             band_points, median(band_query), median(band_draw),
             median(band_query) + median(band_draw));
  fmt::print("{:<44} {:>10} {:>12.1f} {:>12.1f} {:>8.1f}\n",
             fmt::format("every rank ({} lines)", loadRun(db, run).world_size), each_points,
             median(each_query), median(each_draw), median(each_query) + median(each_draw));
  fmt::print("{:<44} {:>10} {:>12} {:>12.1f} {:>8}\n",
             "anchor: bare QPainter polylines, same points", each_points, "", median(anchor_each),
             "");
  fmt::print("draw ratio (chart / bare QPainter), every rank: {:.2f}\n\n",
             median(each_draw) / median(anchor_each));
}

struct StallResult {
  double max_ms = 0, p99_ms = 0;
  int64_t ticks = 0, refreshes = 0, stored = 0;
};

// Runs the event loop for `seconds` with a 1 ms precise timer and returns the gaps between its
// ticks; with a view, 64 ranks stream step events into the run meanwhile.
StallResult stallBenchmark(const std::string& path, bool with_view, int ranks, double seconds,
                           int steps_per_second) {
  Database db(path);
  const int64_t run = createRun(db, {.name = "streaming",
                                     .spec_json = R"({"train": {"steps": 1000000}})",
                                     .strategy = "ddp",
                                     .world_size = ranks});
  std::atomic<bool> stop{false};
  std::atomic<int64_t> submitted{0};
  std::thread producer([&] {
    Recorder recorder(path, run, 0);
    const auto start = Clock::now();
    int64_t step = 0;
    while (!stop) {
      ++step;
      for (int rank = 0; rank < ranks; ++rank) {
        recorder.submit({.rank = rank,
                         .seq = static_cast<uint64_t>(step),
                         .time = 1.8e9 + step,
                         .body = StepEvent{.step = step,
                                           .loss = 2.0 / static_cast<double>(step) + rank * 1e-3,
                                           .samples = 64,
                                           .step_ms = 10,
                                           .compute_ms = 7,
                                           .comm_ms = 4,
                                           .exposed_comm_ms = 3,
                                           .mem_allocated = 1 << 20,
                                           .mem_peak = 2 << 20}});
        ++submitted;
      }
      std::this_thread::sleep_until(start +
                                    std::chrono::microseconds(step * 1000000 / steps_per_second));
    }
    recorder.flush();
  });
  std::unique_ptr<RunView> view;
  int64_t refreshes = 0;
  if (with_view) {
    view = std::make_unique<RunView>(path, run);
    view->resize(1500, 950);
    view->show();
    QObject::connect(view.get(), &RunView::refreshed, [&] { ++refreshes; });
  }
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
  stop = true;
  producer.join();
  view.reset();
  StallResult result;
  result.ticks = static_cast<int64_t>(gaps.size());
  std::sort(gaps.begin(), gaps.end());
  result.max_ms = gaps.back();
  result.p99_ms = gaps[gaps.size() * 99 / 100];
  result.refreshes = refreshes;
  result.stored = submitted;
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{
      "gui_bench: chart redraw of a long 64-rank run, and the GUI thread's longest stall "
      "while 64 ranks stream"};
  std::string dir = (fs::temp_directory_path() / "ringmaster_gui_bench").string();
  int ranks = 64;
  int64_t steps = 1'000'000;
  int repeats = 7;
  double seconds = 10;
  int rate = 50;
  cli.add_option("--dir", dir,
                 "scratch directory (the long run's database is kept there and reused)");
  cli.add_option("--ranks", ranks, "ranks")->default_val(64);
  cli.add_option("--steps", steps, "steps per rank of the long run")->default_val(1'000'000);
  cli.add_option("--repeats", repeats, "redraws measured")->default_val(7);
  cli.add_option("--seconds", seconds, "streaming time per stall measurement")->default_val(10);
  cli.add_option("--rate", rate, "steps per second each rank reports while streaming")
      ->default_val(50);
  CLI11_PARSE(cli, argc, argv);
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY"))
    qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  fs::create_directories(dir);

  const std::string long_db = (fs::path(dir) / fmt::format("long-{}x{}.db", ranks, steps)).string();
  int64_t run = 1;
  if (!fs::exists(long_db)) {
    const auto t = Clock::now();
    fmt::print("writing {} ranks x {} steps to {} ...\n", ranks, steps, long_db);
    run = writeLongRun(long_db, ranks, steps);
    fmt::print("written in {:.0f} s\n\n", msSince(t) / 1000);
  }
  redrawBenchmark(long_db, run, steps, repeats);

  fmt::print(
      "GUI thread stall: {} ranks streaming {} steps/s each (a step event of 14 fields each) for "
      "{} s, "
      "event loop ticking every 1 ms\n\n",
      ranks, rate, seconds);
  fmt::print("{:<40} {:>10} {:>10} {:>10} {:>12} {:>10}\n", "", "max ms", "p99 ms", "ticks",
             "refreshes", "events");
  const std::string stream_db = (fs::path(dir) / "streaming.db").string();
  for (bool with_view : {true, false}) {
    fs::remove(stream_db);
    fs::remove(stream_db + "-wal");
    fs::remove(stream_db + "-shm");
    const StallResult r = stallBenchmark(stream_db, with_view, ranks, seconds, rate);
    fmt::print("{:<40} {:>10.1f} {:>10.2f} {:>10} {:>12} {:>10}\n",
               with_view ? "run view open, 25 Hz refresh" : "anchor: same loop, no view", r.max_ms,
               r.p99_ms, r.ticks, with_view ? std::to_string(r.refreshes) : "", r.stored);
  }
  return 0;
}
