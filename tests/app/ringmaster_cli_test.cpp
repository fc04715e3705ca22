// `ringmaster` end to end: each example strategy on 4 local ranks with every event sent counted
// against the database, the reports and exports, Ctrl-C, SIGKILL at random points, and a locked
// and a full database. Every process is started by PID and reaped; worker processes are found
// through their spec path in /proc to prove none is left behind.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/proc_files.h"
#include "db/database.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using storage::testing::queryText;
using storage::testing::storedEvents;
using testing::CapturedProcess;
using testing::exitedWith;

const std::string kRingmaster = std::string(RINGMASTER_BINARY_DIR) + "/app/ringmaster";

std::string example(const std::string& name) {
  return std::string(RINGMASTER_SOURCE_DIR) + "/resources/examples/" + name + ".json";
}

// Checks that no two complete ("X") events of one track (pid, tid) overlap without nesting:
// Perfetto keeps only properly nested slices on a track and drops the others.
void expectSlicesNestPerTrack(const json& events) {
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
  for (const json& event : events) {
    if (event["ph"] != "X") continue;
    const double ts = event["ts"].get<double>();
    tracks[{event["pid"].get<int>(), event["tid"].get<int>()}].push_back(
        {ts, ts + event["dur"].get<double>()});
  }
  EXPECT_FALSE(tracks.empty());
  constexpr double kRoundingUs = 1e-6;
  for (auto& [track, slices] : tracks) {
    // By start, the longer first: each slice must end before the next one starts or contain it.
    std::sort(slices.begin(), slices.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<std::pair<double, double>> open;  // the enclosing slices, innermost last
    int overlapping = 0;
    for (const auto& slice : slices) {
      while (!open.empty() && open.back().second <= slice.first + kRoundingUs) open.pop_back();
      if (!open.empty() && slice.second > open.back().second + kRoundingUs) ++overlapping;
      open.push_back(slice);
    }
    EXPECT_EQ(overlapping, 0) << "rank " << track.first << " track " << track.second << ": "
                              << overlapping << " of " << slices.size()
                              << " slices overlap without nesting";
  }
}

class RingmasterCli : public storage::testing::StorageTest {
 protected:
  std::string dbPath() const { return (dir_ / "runs.db").string(); }

  std::vector<std::string> args(std::vector<std::string> rest) const {
    rest.insert(rest.begin(), {"--db", dbPath()});
    return rest;
  }
  // Runs a reading command to the end and returns its stdout parsed as JSON.
  json jsonOf(std::vector<std::string> command) {
    command.push_back("--json");
    CapturedProcess process(kRingmaster, args(command));
    const ExitStatus status = process.wait(60s);
    EXPECT_TRUE(status.ok()) << process.err();
    return json::parse(process.out());
  }
  // PIDs of processes (other than the test) whose command line mentions this test's directory:
  // the agent and workers read their spec from there.
  std::vector<pid_t> processesOfThisTest() const {
    std::vector<pid_t> found;
    for (const pid_t pid : testing::processIds()) {
      const std::string text = testing::readProcFile(pid, "cmdline");
      if (pid != getpid() && text.find(dir_.string() + "/specs") != std::string::npos)
        found.push_back(pid);
    }
    return found;
  }
  // Waits (bounded) until no agent or worker of this test runs; true when none is left.
  bool noProcessesLeft(std::chrono::seconds limit = 15s) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!processesOfThisTest().empty()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(50ms);
    }
    return true;
  }
  void TearDown() override {
    for (pid_t pid : processesOfThisTest()) ::kill(pid, SIGKILL);  // only after a failure
    StorageTest::TearDown();
  }
};

// Per rank, the sequence numbers of a saved telemetry file; checks they run 0, 1, 2, ...
std::map<int, int64_t> countPerRank(const std::string& path) {
  std::map<int, int64_t> counts;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const DecodeResult decoded = decodeEvent(line);
    EXPECT_TRUE(decoded.ok()) << line;
    if (!decoded.ok()) continue;
    const TelemetryEvent& event = decoded.event();
    EXPECT_EQ(event.seq, static_cast<uint64_t>(counts[event.rank])) << "rank " << event.rank;
    ++counts[event.rank];
  }
  return counts;
}

// Per rank and event type ("step", "comm", ...), the events of a saved telemetry file.
std::map<std::pair<int, std::string>, int64_t> countPerRankAndType(const std::string& path) {
  std::map<std::pair<int, std::string>, int64_t> counts;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const DecodeResult decoded = decodeEvent(line);
    if (decoded.ok())
      ++counts[{decoded.event().rank, std::string(eventTypeName(decoded.event().body))}];
  }
  return counts;
}

// Checks that each rank's stored events are exactly 0..n-1 (the recorder commits in arrival
// order, so anything committed is a whole prefix), and returns how many events are stored.
int64_t expectWholePrefixes(const storage::Database& db, int64_t run) {
  EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM (SELECT rank FROM seq_ranges WHERE "
                                     "run_id = {} GROUP BY rank HAVING count(*) != 1 OR "
                                     "min(first_seq) != 0)",
                                     run)),
            0)
      << "run " << run << " has a hole in a rank's events";
  return queryInt(db, fmt::format("SELECT total(last_seq - first_seq + 1) FROM seq_ranges WHERE "
                                  "run_id = {}",
                                  run));
}

class EveryStrategy : public RingmasterCli, public ::testing::WithParamInterface<const char*> {};

TEST_P(EveryStrategy, RunsFourLocalRanksAndStoresEveryEventSent) {
  const std::string telemetry = (dir_ / "telemetry.jsonl").string();
  std::vector<std::string> command = {"run",
                                      example(GetParam()),
                                      "--set",
                                      "train.steps=20",
                                      "--set",
                                      "telemetry.every_steps=1",
                                      "--save-telemetry",
                                      telemetry,
                                      "--json"};
  if (std::string(GetParam()) == "fsdp_mlp") {  // its checkpoints go to this test's directory
    command.insert(command.end(), {"--set", "checkpoint.dir=" + (dir_ / "checkpoints").string()});
  }
  CapturedProcess run(kRingmaster, args(command));
  const ExitStatus status = run.wait(240s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.err();

  const std::map<int, int64_t> sent = countPerRank(telemetry);
  const auto sent_by_type = countPerRankAndType(telemetry);
  const auto sent_of = [&](int rank, const char* type) {
    const auto it = sent_by_type.find({rank, type});
    return it == sent_by_type.end() ? int64_t{0} : it->second;
  };
  ASSERT_EQ(sent.size(), 4u);
  storage::Database db(dbPath());
  int64_t total = 0;
  for (const auto& [rank, count] : sent) {
    SCOPED_TRACE(fmt::format("rank {}", rank));
    EXPECT_EQ(storedEvents(db, rank), count);
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM steps WHERE rank = {}", rank)),
              sent_of(rank, "step"));
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM comm_events WHERE rank = {}", rank)),
              sent_of(rank, "comm"));
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM sched_events WHERE rank = {}", rank)),
              sent_of(rank, "sched"));
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM steps WHERE loss IS NOT NULL AND "
                                       "rank = {}",
                                       rank)),
              20);
    total += count;
  }
  EXPECT_EQ(queryInt(db, "SELECT events_stored FROM attempts"), total);
  EXPECT_EQ(queryInt(db, "SELECT events_dropped + lines_malformed FROM attempts"), 0);
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "completed");
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM ranks WHERE status = 'completed'"), 4);
  if (std::string(GetParam()) == "pipeline_mlp") {
    EXPECT_GT(queryInt(db, "SELECT count(*) FROM sched_events"), 0);
  }

  // The summary printed at the end is the database's.
  const json summary = json::parse(run.out());
  EXPECT_EQ(summary["run"]["status"], "completed");
  EXPECT_EQ(summary["final_step"], 20);
  EXPECT_EQ(summary["events"]["stored"], total);
  EXPECT_EQ(summary["ranks"].size(), 4u);
  EXPECT_GT(summary["samples_per_second"].get<double>(), 0);
  EXPECT_TRUE(noProcessesLeft());

  // One final loss everywhere: the summary, `runs` and `show` give the same figure.
  const json listed = jsonOf({"runs"});
  const json shown = jsonOf({"show", "1"});
  ASSERT_TRUE(summary["final_loss"].is_number());
  EXPECT_EQ(listed[0]["final_loss"], summary["final_loss"]);
  EXPECT_EQ(shown["final_loss"], summary["final_loss"]);
  EXPECT_EQ(listed[0]["final_step"], 20);

  // Communication per step describes transfers: no op takes more of a rank's step than the step.
  const double step_ms = shown["mean_step_ms"].get<double>();
  for (const json& op : shown["comm_ops"]) {
    SCOPED_TRACE(op.dump());
    EXPECT_LT(op["total_ms"].get<double>() / (4 * 20), step_ms);
    EXPECT_GT(op["algbw_gbps"].get<double>(), 0);
  }
  if (std::string(GetParam()) == "pipeline_mlp") {
    // Each stage does work of its own: no stage is anyone's straggler. The receives' waits for
    // their senders were measured apart from their transfers.
    for (const json& rank : shown["comm_ranks"]) EXPECT_FALSE(rank["straggler"]) << rank.dump();
    const auto recv = std::find_if(shown["comm_ops"].begin(), shown["comm_ops"].end(),
                                   [](const json& op) { return op["op"] == "recv"; });
    ASSERT_NE(recv, shown["comm_ops"].end());
    EXPECT_TRUE((*recv)["wait_ms"].is_number());
  }

  const std::string trace = (dir_ / "trace.json").string();
  EXPECT_GT(jsonOf({"export", "1", "--trace", trace})["slices"].get<int64_t>(), 0);
  std::ifstream trace_file(trace);
  expectSlicesNestPerTrack(json::parse(trace_file)["traceEvents"]);
}

INSTANTIATE_TEST_SUITE_P(Examples, EveryStrategy,
                         ::testing::Values("ddp_mlp", "fsdp_mlp", "pipeline_mlp"));

TEST_F(RingmasterCli, ASingleRankRunsTraceNestsAndItsFinalLossIsItsLastLoss) {
  CapturedProcess run(kRingmaster, args({"run", example("single_mlp"), "--set", "train.steps=30",
                                         "--set", "telemetry.every_steps=1", "-q", "--json"}));
  ASSERT_TRUE(run.wait(120s).ok()) << run.err();
  const json summary = json::parse(run.out());
  storage::Database db(dbPath());
  // One rank's loss is the global batch's (SQLite prints a REAL to 15 significant digits).
  EXPECT_NEAR(summary["final_loss"].get<double>(),
              std::stod(queryText(db, "SELECT loss FROM steps WHERE step = 30")), 1e-12);
  const std::string trace = (dir_ / "single.json").string();
  EXPECT_GT(jsonOf({"export", "1", "--trace", trace})["slices"].get<int64_t>(), 0);
  std::ifstream trace_file(trace);
  expectSlicesNestPerTrack(json::parse(trace_file)["traceEvents"]);
}

TEST_F(RingmasterCli, ListsShowsComparesAndExportsRuns) {
  for (const char* steps : {"train.steps=12", "train.steps=16"}) {
    CapturedProcess run(kRingmaster, args({"run", example("pipeline_mlp"), "--set", steps, "-q"}));
    ASSERT_TRUE(run.wait(120s).ok()) << run.err();
    EXPECT_NE(run.out().find("completed"), std::string::npos);
  }
  const json runs = jsonOf({"runs"});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["id"], 2);  // newest first
  EXPECT_EQ(runs[0]["final_step"], 16);

  const json shown = jsonOf({"show", "1"});
  EXPECT_EQ(shown["run"]["strategy"], "pipeline");
  EXPECT_EQ(shown["rank_records"].size(), 4u);
  EXPECT_GT(shown["bubble_fraction"].get<double>(), 0);
  EXPECT_LT(shown["bubble_fraction"].get<double>(), 1);
  EXPECT_FALSE(shown["comm_ops"].empty());

  const json compared = jsonOf({"compare", "1", "2"});
  ASSERT_EQ(compared["spec_differences"].size(), 1u);
  EXPECT_EQ(compared["spec_differences"][0]["path"], "train.steps");
  EXPECT_EQ(compared["spec_differences"][0]["values"], json({"12", "16"}));
  // Ten buckets of 2 steps over the longer run's 16: the second run's last point, step 16, falls
  // in the bucket starting at 15, and (a pipeline's ranks all report the last stage's loss) it is
  // the run's final loss.
  const json& last_bucket = compared["runs"][1]["loss_rank0"].back();
  EXPECT_EQ(last_bucket["start"].get<int64_t>(), 15);
  EXPECT_NEAR(last_bucket["last"].get<double>(), compared["runs"][1]["final_loss"].get<double>(),
              1e-9);

  const std::string trace = (dir_ / "trace.json").string();
  EXPECT_GT(jsonOf({"export", "1", "--trace", trace})["slices"].get<int64_t>(), 0);
  std::ifstream trace_file(trace);
  const json events = json::parse(trace_file)["traceEvents"];
  std::set<std::pair<int, int>> tracks;
  std::set<std::string> pipeline_names;
  int processes = 0;
  for (const json& event : events) {
    if (event["ph"] == "M" && event["name"] == "process_name") ++processes;
    if (event["ph"] != "X") continue;
    EXPECT_GE(event["ts"].get<double>(), 0);
    EXPECT_GE(event["dur"].get<double>(), 0);
    tracks.insert({event["pid"].get<int>(), event["tid"].get<int>()});
    if (event["tid"] == 3) pipeline_names.insert(event["name"].get<std::string>().substr(0, 1));
  }
  EXPECT_EQ(processes, 4);
  for (int rank = 0; rank < 4; ++rank)
    for (int track = 1; track <= 3; ++track) EXPECT_TRUE(tracks.count({rank, track})) << rank;
  // Compute slices F / B; the stages that waited for their input a "wait F3" before it, ending
  // in a "transfer F3" where the input's transfer held them up.
  EXPECT_TRUE(pipeline_names.count("B") && pipeline_names.count("F") && pipeline_names.count("w"));
  for (const std::string& name : pipeline_names)
    EXPECT_TRUE(name == "B" || name == "F" || name == "w" || name == "t") << name;
  expectSlicesNestPerTrack(events);

  const json files = jsonOf({"export", "2", "--csv", (dir_ / "csv").string()})["files"];
  EXPECT_EQ(files.size(), 6u);
  std::ifstream scalars(dir_ / "csv" / "scalars.csv");
  std::string header;
  std::getline(scalars, header);
  EXPECT_EQ(header, "rank,metric,step,value,attempt");

  CapturedProcess missing(kRingmaster, args({"show", "99"}));
  EXPECT_TRUE(exitedWith(missing.wait(30s), 2));
  EXPECT_NE(missing.err().find("no run 99"), std::string::npos) << missing.err();
}

TEST_F(RingmasterCli, ABadSpecIsRefusedNamingTheFieldAndNothingIsRecorded) {
  CapturedProcess run(kRingmaster,
                      args({"run", example("ddp_mlp"), "--set", "train.batch_size=-3"}));
  EXPECT_TRUE(exitedWith(run.wait(30s), 2)) << run.err();
  EXPECT_NE(run.err().find("train.batch_size"), std::string::npos) << run.err();
  EXPECT_FALSE(fs::exists(dbPath())) << "a refused spec created the run database";
}

TEST_F(RingmasterCli, CtrlCCancelsCleanly) {
  CapturedProcess run(kRingmaster, args({"run", example("ddp_mlp"), "--set", "train.steps=100000",
                                         "--set", "telemetry.every_steps=1", "--grace", "2"}));
  // Wait until steps are being recorded, then interrupt.
  {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no step recorded";
      run.readFor(200ms);
      if (fs::exists(dbPath()) &&
          queryInt(storage::Database(dbPath()), "SELECT count(*) FROM steps") > 0)
        break;
    }
  }
  run.signal(SIGINT);
  const ExitStatus status = run.wait(60s);
  EXPECT_TRUE(exitedWith(status, 130)) << status.describe() << run.err();
  EXPECT_FALSE(run.timedOut());
  EXPECT_TRUE(noProcessesLeft());
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs"), "cancelled");
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM ranks WHERE status = 'cancelled'"), 4);
  expectWholePrefixes(db, 1);
}

TEST_F(RingmasterCli, SigkillAtRandomPointsLosesNothingCommittedAndLeavesNoWorker) {
  std::mt19937 random(20261123);
  std::map<int64_t, int64_t> stored_before;  // events of each earlier run after its kill
  for (int i = 1; i <= 20; ++i) {
    SCOPED_TRACE(fmt::format("kill {}", i));
    {
      CapturedProcess run(kRingmaster,
                          args({"run", example("ddp_mlp"), "--set", "train.steps=100000", "--set",
                                "telemetry.every_steps=1", "--grace", "1", "-q"}));
      run.readFor(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 1500)(random)));
      run.signal(SIGKILL);
      EXPECT_EQ(run.wait(30s).signal, SIGKILL);
    }
    ASSERT_TRUE(noProcessesLeft()) << "an agent or worker outlived the killed ringmaster";
    storage::Database db(dbPath());
    ASSERT_EQ(queryText(db, "PRAGMA integrity_check"), "ok");
    for (const auto& [run, stored] : stored_before)
      EXPECT_EQ(expectWholePrefixes(db, run), stored) << "run " << run << " changed";
    const int64_t latest = queryInt(db, "SELECT max(id) FROM runs");
    if (latest > 0 && !stored_before.count(latest))
      stored_before[latest] = expectWholePrefixes(db, latest);
  }
  // The next start reconciles every killed run to interrupted.
  const json runs = jsonOf({"runs", "--limit", "100"});
  EXPECT_GE(runs.size(), 15u);  // a kill before the run row is created leaves none
  for (const json& run : runs) EXPECT_EQ(run["status"], "interrupted") << run.dump();
}

TEST_F(RingmasterCli, ALockedDatabaseIsAClearErrorOrABoundedWait) {
  { storage::Database create(dbPath()); }
  {
    // Another process's write lock for longer than the busy timeout: refused before launching.
    storage::Database holder(dbPath());
    holder.exec("BEGIN IMMEDIATE");
    CapturedProcess run(kRingmaster, args({"run", example("ddp_mlp"), "--set", "train.steps=5"}));
    EXPECT_TRUE(exitedWith(run.wait(60s), 4)) << run.err();
    EXPECT_NE(run.err().find("locked by another process"), std::string::npos) << run.err();
    holder.exec("ROLLBACK");
  }
  EXPECT_TRUE(noProcessesLeft());
  EXPECT_TRUE(jsonOf({"runs"}).empty());

  // A lock held mid-run for less than the busy timeout: the recorder waits and loses nothing.
  const std::string telemetry = (dir_ / "telemetry.jsonl").string();
  CapturedProcess run(kRingmaster,
                      args({"run", example("ddp_mlp"), "--set", "train.steps=40", "--set",
                            "telemetry.every_steps=1", "--save-telemetry", telemetry, "-q"}));
  {
    storage::Database holder(dbPath());
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (queryInt(holder, "SELECT count(*) FROM steps") == 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      run.readFor(100ms);
    }
    holder.exec("BEGIN IMMEDIATE");
    run.readFor(1500ms);
    holder.exec("COMMIT");
  }
  ASSERT_TRUE(run.wait(120s).ok()) << run.err();
  int64_t sent = 0;
  for (const auto& [rank, count] : countPerRank(telemetry)) sent += count;
  storage::Database check(dbPath());
  EXPECT_EQ(queryInt(check, "SELECT total(last_seq - first_seq + 1) FROM seq_ranges"), sent);
  EXPECT_EQ(queryText(check, "SELECT status FROM runs"), "completed");
}

TEST_F(RingmasterCli, AFullDatabaseStopsTheRunWithAClearErrorAndNoCorruption) {
  { storage::Database create(dbPath()); }
  // The file size limit (ulimit -f, in KiB) makes SQLite's writes fail as on a full disk.
  const std::string command = fmt::format(
      "ulimit -f 400; trap '' XFSZ; exec '{}' --db '{}' run '{}' --set train.steps=100000 --set "
      "telemetry.every_steps=1 --grace 1 -q",
      kRingmaster, dbPath(), example("ddp_mlp"));
  CapturedProcess run("/bin/bash", {"-c", command});
  const ExitStatus status = run.wait(120s);
  EXPECT_TRUE(exitedWith(status, 1)) << status.describe() << run.err();
  EXPECT_FALSE(run.timedOut());
  EXPECT_NE(run.err().find("full"), std::string::npos) << run.err();
  EXPECT_TRUE(noProcessesLeft());
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "PRAGMA integrity_check"), "ok");
  EXPECT_GT(expectWholePrefixes(db, 1), 0);
  const json runs = jsonOf({"runs"});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0]["status"] == "failed" || runs[0]["status"] == "interrupted") << runs.dump();
}

}  // namespace
}  // namespace ringmaster
