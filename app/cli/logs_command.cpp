// `ringmaster logs`: the run's log lines from a cursor over the logs table (loadLogsAfter), and
// for --follow the same read repeated on a timer while the run runs.
#include "cli/logs_command.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <thread>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/terminal.h"
#include "core/display_text.h"
#include "recorder/run_lifecycle.h"

namespace ringmaster::cli {

namespace {

using namespace std::chrono_literals;

// How often --follow reads the database again, and how often it looks for a recorder that died.
constexpr auto kFollowPoll = 200ms;
constexpr int kPollsPerReconcile = 10;

// "2026-11-28 21:13:58.123", local time.
std::string logTime(double epoch_seconds) {
  if (!(epoch_seconds >= 0 && epoch_seconds < 253402300800.0)) return "-";
  const auto time = static_cast<std::time_t>(epoch_seconds);
  std::tm local{};
  ::localtime_r(&time, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  const int millis = static_cast<int>((epoch_seconds - static_cast<double>(time)) * 1000);
  return fmt::format("{}.{:03d}", text, std::min(millis, 999));
}

void printLine(const storage::LogLine& line, bool json, bool colour, std::FILE* out) {
  if (json) {
    const nlohmann::json object = {
        {"rank", line.rank ? nlohmann::json(*line.rank) : nlohmann::json(nullptr)},
        {"t", line.t},
        {"level", displaySafeLine(line.level)},
        {"message", displaySafeMessageLine(line.message)}};
    fmt::print(out, "{}\n", object.dump());
    return;
  }
  const Colour level_colour = line.level == "error"  ? Colour::kRed
                              : line.level == "warn" ? Colour::kYellow
                                                     : Colour::kNone;
  fmt::print(out, "{}  {:>7}  {:<6}  {}\n", logTime(line.t),
             line.rank ? fmt::format("rank {}", *line.rank) : "-",
             paint(line.level, level_colour, colour && level_colour != Colour::kNone),
             displaySafeMessageLine(line.message));
}

// Prints every line after `cursor`, moving it on; returns how many.
size_t printNewLines(const storage::Database& db, const LogsOptions& options, int64_t& cursor,
                     bool colour, std::FILE* out) {
  size_t printed = 0;
  for (;;) {
    const storage::LogPage page = storage::loadLogsAfter(db, options.run_id, cursor, options.query);
    for (const storage::LogLine& line : page.lines) printLine(line, options.json, colour, out);
    printed += page.lines.size();
    cursor = page.last_row;
    if (page.lines.size() < static_cast<size_t>(options.query.limit)) break;
  }
  std::fflush(out);
  return printed;
}

bool stillRunning(const storage::Database& db, int64_t run_id) {
  const std::string status = storage::loadRun(db, run_id).status;
  return status == "running" || status == "pending";
}

}  // namespace

int logsCommand(storage::Database& db, const LogsOptions& options, std::FILE* out) {
  storage::loadRun(db, options.run_id);  // a run that does not exist is an error
  const bool colour = colourFor(out);
  int64_t cursor = 0;
  printNewLines(db, options, cursor, colour, out);
  if (!options.follow) return 0;
  for (int poll = 1;; ++poll) {
    // Read the status before the lines: the lines of a run seen ended are all committed.
    if (poll % kPollsPerReconcile == 0 && !db.readOnly()) storage::reconcileInterruptedRuns(db);
    const bool running = stillRunning(db, options.run_id);
    printNewLines(db, options, cursor, colour, out);
    if (!running) return 0;
    std::this_thread::sleep_for(kFollowPoll);
  }
}

void addLogsCommand(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<LogsOptions>();
  CLI::App* logs = app.add_subcommand(
      "logs", "a run's log lines (time, rank, level, message); --follow while it runs");
  logs->add_option("run", options->run_id, "run id")->required();
  logs->add_option("--rank", options->query.rank, "only this rank's lines")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("--grep", options->query.containing,
                   "only lines holding this text (case-sensitive)");
  logs->add_flag("--follow,-f", options->follow,
                 "keep printing new lines until the run ends (or Ctrl-C)");
  logs->add_flag("--json", options->json, "one JSON object per line: rank, t, level, message");
  commands.add(logs, [options](const CommonOptions& common) {
    return logsCommand(*openDatabaseForReading(common.databasePath()), *options, stdout);
  });
}

}  // namespace ringmaster::cli
