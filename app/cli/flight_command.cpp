// `ringmaster flight`: signal the local workers, wait for their dumps, print them.
#include "cli/flight_command.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/display_text.h"
#include "core/error.h"
#include "core/host_name.h"
#include "db/statement.h"
#include "query/runs.h"

namespace ringmaster::cli {

using nlohmann::json;

namespace {

// Whether `pid` runs `ringmaster-node worker` (a PID from the ranks table may have been reused).
bool isWorker(int64_t pid) {
  std::ifstream in(fmt::format("/proc/{}/cmdline", pid));
  const std::string cmdline(std::istreambuf_iterator<char>(in), {});
  std::vector<std::string> args;
  for (size_t start = 0; start < cmdline.size();) {
    const size_t end = cmdline.find('\0', start);
    args.push_back(cmdline.substr(start, end == std::string::npos ? end : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return args.size() >= 2 && args[0].find("ringmaster-node") != std::string::npos &&
         args[1] == "worker";
}

int64_t lastDumpRow(const storage::Database& db) {
  storage::Statement select(db, "SELECT coalesce(max(rowid), 0) FROM flight_recorder_dumps");
  select.run();
  return select.columnInt(0);
}

struct Dump {
  double t = 0;
  json records;
};

// The dumps stored after row `after`, newest per rank.
std::map<int, Dump> dumpsAfter(const storage::Database& db, int64_t run_id, int64_t after) {
  storage::Statement select(db,
                            "SELECT rank, t, dump FROM flight_recorder_dumps WHERE run_id = ? "
                            "AND rowid > ? ORDER BY rowid");
  select.bind(1, run_id).bind(2, after);
  std::map<int, Dump> dumps;
  while (select.run()) {
    json records = json::parse(select.columnText(2), nullptr, false);
    if (records.is_discarded()) records = json::array();
    dumps[static_cast<int>(select.columnInt(0))] = {select.columnDouble(1), std::move(records)};
  }
  return dumps;
}

std::string text(const json& value) {
  return value.is_string() ? displaySafeLine(value.get<std::string>()) : value.dump();
}

// One record as a line: "all_reduce #28 on world, 4096 bytes float32: started".
std::string describeRecord(const json& record) {
  if (!record.is_object()) return displaySafeLine(record.dump());
  return fmt::format("{} #{} on {}, {} bytes {}: {}", text(record.value("op", json("?"))),
                     text(record.value("seq", json("?"))), text(record.value("group", json("?"))),
                     text(record.value("bytes", json("?"))), text(record.value("dtype", json("?"))),
                     text(record.value("state", json("?"))));
}

}  // namespace

int flightCommand(const storage::Database& db, const FlightOptions& options) {
  const storage::RunRecord run = storage::loadRun(db, options.run_id);
  if (run.status == "pending")  // queued in its scheduler (issue 35)
    RM_THROW(kInvalidArgument,
             fmt::format("run {} is pending (queued in its scheduler): its workers have not "
                         "started, so there is no flight recorder to dump yet",
                         run.id));
  if (run.status != "running") {
    RM_THROW(kInvalidArgument,
             fmt::format("run {} is {}, not running: its flight recorders ended with its workers "
                         "(a failed rank's dump is kept: the desktop's Flight recorder tab)",
                         run.id, run.status));
  }
  const std::string host = thisHostName();
  const int64_t before = lastDumpRow(db);
  std::vector<storage::RankRecord> asked, unreachable, not_worker;
  for (const storage::RankRecord& rank : storage::loadRanks(db, options.run_id)) {
    if (rank.host != host) {
      unreachable.push_back(rank);
    } else if (rank.pid <= 0 || !isWorker(rank.pid) ||
               ::kill(static_cast<pid_t>(rank.pid), SIGUSR1) != 0) {
      not_worker.push_back(rank);
    } else {
      asked.push_back(rank);
    }
  }

  // The workers emit their dump at once (a stopped one when it is continued); the run's recorder
  // commits it within its group-commit delay.
  std::map<int, Dump> dumps;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(options.wait_s);
  for (;;) {
    dumps = dumpsAfter(db, options.run_id, before);
    size_t arrived = 0;
    for (const storage::RankRecord& rank : asked) arrived += dumps.count(rank.rank);
    if (arrived == asked.size() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::vector<int> missing;
  for (const storage::RankRecord& rank : asked)
    if (dumps.count(rank.rank) == 0) missing.push_back(rank.rank);

  if (options.json) {
    json out = {{"run", run.id}};
    json rows = json::array();
    for (const storage::RankRecord& rank : asked) {
      auto it = dumps.find(rank.rank);
      if (it == dumps.end()) continue;
      rows.push_back({{"rank", rank.rank},
                      {"host", rank.host},
                      {"pid", rank.pid},
                      {"t", it->second.t},
                      {"records", it->second.records}});
    }
    out["dumps"] = rows;
    out["missing"] = missing;
    json others = json::array();
    for (const storage::RankRecord& rank : unreachable)
      others.push_back({{"rank", rank.rank}, {"host", rank.host}, {"pid", rank.pid}});
    out["unreachable"] = others;
    json gone = json::array();
    for (const storage::RankRecord& rank : not_worker)
      gone.push_back({{"rank", rank.rank}, {"pid", rank.pid}});
    out["not_running"] = gone;
    fmt::print("{}\n", out.dump(2));
    return missing.empty() ? 0 : 1;
  }

  constexpr size_t kShown = 8;  // the newest records of each rank
  for (const storage::RankRecord& rank : asked) {
    auto it = dumps.find(rank.rank);
    if (it == dumps.end()) continue;
    const json& records = it->second.records;
    fmt::print("rank {} (pid {}): {} record{}\n", rank.rank, rank.pid, records.size(),
               records.size() == 1 ? "" : "s");
    const size_t first = records.size() > kShown ? records.size() - kShown : 0;
    for (size_t i = first; i < records.size(); ++i)
      fmt::print("  {}\n", describeRecord(records[i]));
  }
  for (int rank : missing) {
    fmt::print(
        "rank {}: no dump within {:g} s (a stopped worker handles the signal once it is "
        "continued)\n",
        rank, options.wait_s);
  }
  for (const storage::RankRecord& rank : unreachable) {
    fmt::print(
        "rank {} on {}: not reachable from here (`ringmaster flight` signals the workers of "
        "this host, {}, only)\n",
        rank.rank, displaySafeLine(rank.host), displaySafeLine(host));
  }
  for (const storage::RankRecord& rank : not_worker)
    fmt::print(
        "rank {}: pid {} is not a running ringmaster-node worker (it ended, or the run is "
        "a program job, whose script keeps no flight recorder): not signalled\n",
        rank.rank, rank.pid);
  fmt::print("the dumps are kept with the run (the desktop's Flight recorder tab)\n");
  return missing.empty() ? 0 : 1;
}

void addFlightCommand(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<FlightOptions>();
  CLI::App* flight = app.add_subcommand(
      "flight",
      "dump a running run's flight recorders now: SIGUSR1 to its workers on this host, whose "
      "dumps are stored with the run and printed");
  flight->add_option("run", options->run_id, "run id")->required();
  flight->add_option("--wait", options->wait_s, "seconds to wait for the dumps")
      ->default_val(10.0)
      ->check(CLI::Range(0.0, 3600.0));
  flight->add_flag("--json", options->json, "JSON instead of text");
  commands.add(flight, [options](const CommonOptions& common) {
    return flightCommand(*openDatabaseForReading(common.databasePath()), *options);
  });
}

}  // namespace ringmaster::cli
