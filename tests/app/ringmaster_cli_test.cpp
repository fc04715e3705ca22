// `ringmaster` end to end: each example strategy on 4 local ranks with every event sent counted
// against the database, the reports and exports, Ctrl-C, SIGKILL at random points, and a locked
// and a full database. Every process is started by PID and reaped; worker processes are found
// through their spec path in /proc to prove none is left behind.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/proc_files.h"
#include "common/test_paths.h"
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

const std::string kRingmaster = testing::ringmasterBinary();

using testing::examplePath;

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

class RingmasterCli : public testing::CliRunTest {
 protected:
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
  // Waits (bounded) until no agent or worker of this test runs; true when none is left.
  bool noProcessesLeft(std::chrono::seconds limit = 15s) const {
    return testing::noProcessOfRunsLeftUnder(dir_, limit);
  }
  void TearDown() override {
    for (pid_t pid : testing::processesOfRunsUnder(dir_))
      ::kill(pid, SIGKILL);  // only after a failure
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
                                      examplePath(GetParam()),
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
  EXPECT_EQ(summary["ingest"]["stored"], total);
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
    for (const json& rank : shown["ranks"]) EXPECT_FALSE(rank["straggler"]) << rank.dump();
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
  CapturedProcess run(kRingmaster,
                      args({"run", examplePath("single_mlp"), "--set", "train.steps=30", "--set",
                            "telemetry.every_steps=1", "-q", "--json"}));
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
    CapturedProcess run(kRingmaster,
                        args({"run", examplePath("pipeline_mlp"), "--set", steps, "-q"}));
    ASSERT_TRUE(run.wait(120s).ok()) << run.err();
    EXPECT_NE(run.out().find("completed"), std::string::npos);
  }
  const json runs = jsonOf({"runs"});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["id"], 2);  // newest first
  EXPECT_EQ(runs[0]["final_step"], 16);

  const json shown = jsonOf({"show", "1"});
  EXPECT_EQ(shown["run"]["strategy"], "pipeline");
  ASSERT_EQ(shown["ranks"].size(), 4u);
  for (const json& rank : shown["ranks"]) EXPECT_GT(rank["pid"].get<int64_t>(), 0) << rank.dump();
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
  EXPECT_EQ(files.size(), 7u);
  std::ifstream scalars(dir_ / "csv" / "scalars.csv");
  std::string header;
  std::getline(scalars, header);
  EXPECT_EQ(header, "rank,metric,step,value,attempt");

  CapturedProcess missing(kRingmaster, args({"show", "99"}));
  EXPECT_TRUE(exitedWith(missing.wait(30s), 2));
  EXPECT_NE(missing.err().find("no run 99"), std::string::npos) << missing.err();
}

// Issue 32, point 8: a pipeline stage keeps several receives posted at once, and each waits for
// its sender. A rank's time waiting and in communication is the union of those intervals, never
// more than the run's wall time (summed, the interleaved schedule's waits were 3.6 times it).
TEST_F(RingmasterCli, APipelineRanksWaitAndCommTimeAreWithinTheRunsWallTime) {
  CapturedProcess run(
      kRingmaster, args({"run", examplePath("pipeline_mlp"), "--set", "train.steps=40", "--set",
                         "strategy.schedule=interleaved_1f1b", "--set", "strategy.virtual_stages=2",
                         "--set", "model.layers=[784,256,256,256,256,256,256,128,10]", "-q"}));
  ASSERT_TRUE(run.wait(180s).ok()) << run.err();
  const json shown = jsonOf({"show", "1"});
  const double wall_ms = shown["run"]["duration_s"].get<double>() * 1000;
  ASSERT_GT(wall_ms, 0);
  ASSERT_EQ(shown["ranks"].size(), 4u);
  for (const json& rank : shown["ranks"]) {
    SCOPED_TRACE(rank.dump());
    ASSERT_TRUE(rank["wait_ms"].is_number());
    EXPECT_GT(rank["wait_ms"].get<double>(), 0);
    EXPECT_LE(rank["wait_ms"].get<double>(), wall_ms);
    EXPECT_LE(rank["comm_ms"].get<double>(), wall_ms);
    EXPECT_LE(rank["wait_ms"].get<double>(), rank["comm_ms"].get<double>());
    EXPECT_GE(rank["transfer_ms"].get<double>(), 0);
  }
}

TEST_F(RingmasterCli, ABadSpecIsRefusedNamingTheFieldAndNothingIsRecorded) {
  CapturedProcess run(kRingmaster,
                      args({"run", examplePath("ddp_mlp"), "--set", "train.batch_size=-3"}));
  EXPECT_TRUE(exitedWith(run.wait(30s), 2)) << run.err();
  EXPECT_NE(run.err().find("train.batch_size"), std::string::npos) << run.err();
  EXPECT_FALSE(fs::exists(dbPath())) << "a refused spec created the run database";
}

TEST_F(RingmasterCli, CtrlCCancelsCleanly) {
  CapturedProcess run(kRingmaster,
                      args({"run", examplePath("ddp_mlp"), "--set", "train.steps=100000", "--set",
                            "telemetry.every_steps=1", "--grace", "2"}));
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
      CapturedProcess run(
          kRingmaster, args({"run", examplePath("ddp_mlp"), "--set", "train.steps=100000", "--set",
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
    CapturedProcess run(kRingmaster,
                        args({"run", examplePath("ddp_mlp"), "--set", "train.steps=5"}));
    EXPECT_TRUE(exitedWith(run.wait(60s), 4)) << run.err();
    EXPECT_NE(run.err().find("locked by another process"), std::string::npos) << run.err();
    holder.exec("ROLLBACK");
  }
  EXPECT_TRUE(noProcessesLeft());
  EXPECT_TRUE(jsonOf({"runs"}).empty());

  // A lock held mid-run for less than the busy timeout: the recorder waits and loses nothing.
  const std::string telemetry = (dir_ / "telemetry.jsonl").string();
  CapturedProcess run(kRingmaster,
                      args({"run", examplePath("ddp_mlp"), "--set", "train.steps=40", "--set",
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
      kRingmaster, dbPath(), examplePath("ddp_mlp"));
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

// ---------------------------------------------------------------------------------------------
// Issue 16: files a run owns, master_port, checked writes, read-only and owner-only databases.

// Waits (bounded) until the database at `path` holds a step, reading `run`'s output meanwhile.
void waitForSteps(CapturedProcess& run, const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no step recorded in " << path;
    run.readFor(200ms);
    if (fs::exists(path) && queryInt(storage::Database(path), "SELECT count(*) FROM steps") > 0)
      return;
  }
}

// The --spec argument of the agent started by the process `launcher`.
std::string agentSpecOf(pid_t launcher) {
  for (const pid_t pid : testing::processIds()) {
    const std::string stat = testing::readProcFile(pid, "stat");
    const size_t end = stat.rfind(')');
    if (end == std::string::npos) continue;
    std::istringstream fields(stat.substr(end + 2));
    std::string state;
    pid_t parent = 0;
    fields >> state >> parent;
    if (parent != launcher) continue;
    std::vector<std::string> argv;
    std::istringstream cmdline(testing::readProcFile(pid, "cmdline"));
    for (std::string arg; std::getline(cmdline, arg, '\0');) argv.push_back(arg);
    for (size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == "--spec" && i > 0 && argv[1] == "agent") return argv[i + 1];
  }
  return "";
}

// A port nothing listens on now.
int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

mode_t modeOf(const fs::path& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 0777;
}

// Finding 2: two databases in one directory both number their first run 1; their runs shared
// DIR/specs/run-1.json, and a 1-rank run recorded the other's 4-rank training.
TEST_F(RingmasterCli, TwoDatabasesInOneDirectoryRunTogetherEachRecordingItsOwnTraining) {
  const std::string single_db = (dir_ / "single.db").string(), ddp_db = (dir_ / "ddp.db").string();
  const std::vector<std::string> long_run = {
      "--set", "train.steps=100000", "--set", "telemetry.every_steps=1", "--grace", "2", "-q"};
  std::vector<std::string> single_args = {"--db", single_db, "run", examplePath("single_mlp")};
  std::vector<std::string> ddp_args = {"--db", ddp_db, "run", examplePath("ddp_mlp")};
  single_args.insert(single_args.end(), long_run.begin(), long_run.end());
  ddp_args.insert(ddp_args.end(), long_run.begin(), long_run.end());
  CapturedProcess single(kRingmaster, single_args), ddp(kRingmaster, ddp_args);
  waitForSteps(single, single_db);
  waitForSteps(ddp, ddp_db);

  // Each run's agent reads a spec file of its own, holding its own job.
  const std::string single_spec = agentSpecOf(single.pid()), ddp_spec = agentSpecOf(ddp.pid());
  ASSERT_FALSE(single_spec.empty());
  ASSERT_FALSE(ddp_spec.empty());
  EXPECT_NE(single_spec, ddp_spec) << "both runs read one spec file";
  const auto meshIn = [](const std::string& path) {
    std::ifstream in(path);
    return json::parse(in)["strategy"]["mesh"];
  };
  EXPECT_EQ(meshIn(single_spec), (json{{"dp", 1}, {"tp", 1}, {"pp", 1}}));
  EXPECT_EQ(meshIn(ddp_spec), (json{{"dp", 4}, {"tp", 1}, {"pp", 1}}));

  single.signal(SIGINT);
  ddp.signal(SIGINT);
  EXPECT_TRUE(exitedWith(single.wait(60s), 130)) << single.err();
  EXPECT_TRUE(exitedWith(ddp.wait(60s), 130)) << ddp.err();
  EXPECT_TRUE(noProcessesLeft());
  for (const auto& [path, ranks, strategy] :
       {std::tuple{single_db, 1, "single"}, std::tuple{ddp_db, 4, "ddp"}}) {
    SCOPED_TRACE(path);
    storage::Database db(path);
    EXPECT_EQ(queryText(db, "SELECT strategy FROM runs WHERE id = 1"), strategy);
    EXPECT_EQ(queryInt(db, "SELECT count(*) FROM ranks WHERE run_id = 1"), ranks);
    EXPECT_EQ(queryInt(db, "SELECT max(rank) FROM steps WHERE run_id = 1"), ranks - 1);
  }
}

// Finding 2: a run directory left by an earlier database of the same name is not reused.
TEST_F(RingmasterCli, ARunDirectoryLeftByAnEarlierDatabaseIsRefusedNotShared) {
  fs::create_directories(dir_ / "runs.db-runs" / "run-1");
  CapturedProcess run(kRingmaster,
                      args({"run", examplePath("single_mlp"), "--set", "train.steps=2"}));
  EXPECT_TRUE(exitedWith(run.wait(60s), 1)) << run.err();
  EXPECT_NE(run.err().find((dir_ / "runs.db-runs" / "run-1").string() + " already exists"),
            std::string::npos)
      << run.err();
  EXPECT_TRUE(fs::is_empty(dir_ / "runs.db-runs" / "run-1"));
  EXPECT_EQ(jsonOf({"runs"})[0]["status"], "failed");
}

// Finding 2: an agent that cannot read its spec fails the run with the file and the reason, not
// only "the node agent ended with exit code 2".
TEST_F(RingmasterCli, AnAgentThatCannotReadItsSpecFailsTheRunNamingTheFileAndWhy) {
  const fs::path node = dir_ / "bin" / "ringmaster-node";
  fs::create_directories(node.parent_path());
  {
    std::ofstream script(node);
    script << "#!/bin/sh\n# agent --spec PATH ...: the spec is gone when the agent reads it\n"
           << "rm -f \"$3\"\nexec '" << ringmaster::testBinaryDir()
           << "/app/ringmaster-node' \"$@\"\n";
  }
  fs::permissions(node, fs::perms::owner_all);
  CapturedProcess run(kRingmaster, args({"run", examplePath("single_mlp"), "-q"}),
                      {{"RINGMASTER_NODE", node.string()}});
  EXPECT_TRUE(exitedWith(run.wait(60s), 1)) << run.err();
  const json runs = jsonOf({"runs"});
  ASSERT_EQ(runs.size(), 1u);
  const std::string error = runs[0]["error"].get<std::string>();
  EXPECT_NE(error.find("the node agent ended with exit code"), std::string::npos) << error;
  EXPECT_NE(error.find((dir_ / "runs.db-runs" / "run-1" / "spec.json").string() +
                       ": cannot open: No such file or directory"),
            std::string::npos)
      << error;
}

// Finding 7: launch.master_port is where rank 0's store listens, and a port in use is an error
// naming it.
TEST_F(RingmasterCli, LaunchMasterPortIsWhereTheRanksRendezvous) {
  const int port = freePort();
  CapturedProcess run(kRingmaster,
                      args({"run", examplePath("ddp_mlp"), "--set", "train.steps=3", "--set",
                            fmt::format("launch.master_port={}", port), "-v"}));
  ASSERT_TRUE(run.wait(120s).ok()) << run.err();
  EXPECT_NE(run.err().find(fmt::format("rendezvous store on 127.0.0.1:{}\n", port)),
            std::string::npos)
      << run.err();

  const int taken = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(freePort()));
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(taken, 1), 0);
  CapturedProcess refused(
      kRingmaster, args({"run", examplePath("ddp_mlp"), "--set", "train.steps=3", "--set",
                         fmt::format("launch.master_port={}", ntohs(address.sin_port)), "-q"}));
  EXPECT_TRUE(exitedWith(refused.wait(60s), 1)) << refused.err();
  ::close(taken);
  const json runs = jsonOf({"runs"});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_NE(runs[0]["error"].get<std::string>().find(fmt::format(
                "cannot listen on 127.0.0.1:{}: Address already in use", ntohs(address.sin_port))),
            std::string::npos)
      << runs[0].dump();
  EXPECT_TRUE(noProcessesLeft());
}

// Finding 8: a telemetry copy, an export or stdout on a full device is an error naming it.
TEST_F(RingmasterCli, WritesToAFullDeviceFailNamingTheFileAndTheReason) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  CapturedProcess run(kRingmaster, args({"run", examplePath("single_mlp"), "--set",
                                         "train.steps=20", "--save-telemetry", "/dev/full", "-q"}));
  EXPECT_TRUE(exitedWith(run.wait(60s), 1)) << run.err();
  EXPECT_NE(run.err().find("writing /dev/full failed: No space left on device"), std::string::npos)
      << run.err();
  EXPECT_EQ(jsonOf({"runs"})[0]["status"], "failed");

  CapturedProcess trace(kRingmaster, args({"export", "1", "--trace", "/dev/full"}));
  EXPECT_TRUE(exitedWith(trace.wait(30s), 1)) << trace.err();
  EXPECT_NE(trace.err().find("writing /dev/full failed: No space left on device"),
            std::string::npos)
      << trace.err();

  for (const char* command : {"runs --json", "show 1", "compare 1 1 --json"}) {
    SCOPED_TRACE(command);
    CapturedProcess listed("/bin/sh", {"-c", fmt::format("exec '{}' --db '{}' {} > /dev/full",
                                                         kRingmaster, dbPath(), command)});
    EXPECT_TRUE(exitedWith(listed.wait(30s), 1)) << listed.err();
    EXPECT_NE(listed.err().find("No space left on device"), std::string::npos) << listed.err();
  }
}

// Finding 9: a database on a read-only file system is listed, shown, compared and exported; a
// run into it says read-only and names the file. The file system is a tmpfs remounted read-only
// in a user and mount namespace of its own (chmod does not stop root).
TEST_F(RingmasterCli, ADatabaseOnAReadOnlyFileSystemIsReadAndARunSaysReadOnly) {
  const std::string unshare = "/usr/bin/unshare";
  if (!fs::exists(unshare) || !CapturedProcess(unshare, {"-rm", "true"}).wait(10s).ok())
    GTEST_SKIP() << "unshare -rm is not available or not allowed here";
  ASSERT_TRUE(CapturedProcess(kRingmaster, args({"run", examplePath("single_mlp"), "--set",
                                                 "train.steps=5", "-q"}))
                  .wait(60s)
                  .ok());
  const fs::path mounted = dir_ / "ro", out = dir_ / "out";
  fs::create_directories(mounted);
  fs::create_directories(out);
  const std::string db = (mounted / "runs.db").string();
  const std::string script = fmt::format(
      "set -e; mount -t tmpfs none '{ro}'; cp '{src}' '{ro}/'; mount -o remount,ro '{ro}'; "
      "R='{bin}'; "
      "$R --db '{db}' runs --json > '{out}/runs.json'; "
      "$R --db '{db}' show 1 --json > '{out}/show.json'; "
      "$R --db '{db}' compare 1 1 --json > '{out}/compare.json'; "
      "$R --db '{db}' export 1 --csv '{out}/csv' --trace '{out}/trace.json' > /dev/null; "
      "set +e; $R --db '{db}' run '{spec}' --set train.steps=2 -q; echo \"run exit $?\"",
      fmt::arg("ro", mounted.string()), fmt::arg("src", dbPath()), fmt::arg("bin", kRingmaster),
      fmt::arg("db", db), fmt::arg("out", out.string()),
      fmt::arg("spec", examplePath("single_mlp")));
  CapturedProcess inside(unshare, {"-rm", "/bin/sh", "-c", script});
  ASSERT_TRUE(inside.wait(120s).ok()) << inside.err();
  std::ifstream runs_file(out / "runs.json"), show_file(out / "show.json");
  const json runs = json::parse(runs_file), shown = json::parse(show_file);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["status"], "completed");
  EXPECT_EQ(shown["run"]["id"], 1) << shown.dump().substr(0, 300);
  EXPECT_TRUE(fs::exists(out / "csv" / "ranks.csv"));
  EXPECT_TRUE(fs::exists(out / "trace.json"));
  EXPECT_NE(inside.out().find("run exit 1"), std::string::npos) << inside.out();
  EXPECT_NE(inside.err().find("the run database " + db + " is read-only here"), std::string::npos)
      << inside.err();
  EXPECT_NE(inside.err().find("Read-only file system"), std::string::npos) << inside.err();
}

// Finding 14: the database, its run directories and the spec the workers read are owner-only.
TEST_F(RingmasterCli, TheDatabaseRunDirectoriesAndSpecsAreOwnerOnly) {
  CapturedProcess run("/bin/sh",
                      {"-c", fmt::format("umask 022; exec '{}' --db '{}' run '{}' --set "
                                         "train.steps=2 -q --save-telemetry '{}'",
                                         kRingmaster, dbPath(), examplePath("single_mlp"),
                                         (dir_ / "telemetry.jsonl").string())});
  ASSERT_TRUE(run.wait(60s).ok()) << run.err();
  EXPECT_EQ(modeOf(dir_), 0700u);
  EXPECT_EQ(modeOf(dbPath()), 0600u);
  EXPECT_EQ(modeOf(dir_ / "telemetry.jsonl"), 0600u);
  EXPECT_EQ(modeOf(dir_ / "runs.db-runs"), 0700u);
  EXPECT_EQ(modeOf(dir_ / "runs.db-runs" / "run-1"), 0700u);
  EXPECT_EQ(modeOf(dir_ / "runs.db-runs" / "run-1" / "spec.json"), 0600u);
}

// Issue 18: a run with train.eval_every stores each rank's eval events, and `show` reports them:
// the latest validation loss and perplexity with its step, and a row per evaluation.
TEST_F(RingmasterCli, ShowReportsTheValidationLossOfARunThatEvaluates) {
  fs::create_directories(dir_);
  {
    std::ofstream corpus(dir_ / "corpus.txt");
    const char* words[] = {"the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "dog. "};
    for (int i = 0; i < 800; ++i) corpus << words[(i * 3 + i / 5) % 8];
  }
  const json spec = {
      {"name", "eval"},
      {"strategy", {{"kind", "ddp"}}},
      {"model",
       {{"kind", "gpt"},
        {"layers", 1},
        {"vocab_size", 256},
        {"context", 8},
        {"heads", 2},
        {"dim", 16}}},
      {"data", {{"kind", "text"}, {"path", (dir_ / "corpus.txt").string()}}},
      {"train", {{"steps", 12}, {"batch_size", 4}, {"eval_every", 4}, {"eval_batches", 2}}},
      {"optimizer", {{"kind", "adamw"}, {"lr", 0.01}}},
      {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", 2}}}}}},
      {"device", "cpu"}};
  const std::string spec_path = (dir_ / "eval.json").string();
  std::ofstream(spec_path) << spec.dump();
  CapturedProcess run(kRingmaster, args({"run", spec_path, "-q"}));
  ASSERT_TRUE(run.wait(120s).ok()) << run.err();

  storage::Database db(dbPath());
  EXPECT_EQ(queryInt(db, "SELECT count(*) FROM evals"), 2 * 3) << "each rank after 4, 8 and 12";
  const json shown = jsonOf({"show", "1"});
  ASSERT_EQ(shown["evals"].size(), 3u) << shown["evals"].dump();
  for (size_t i = 0; i < 3; ++i) {
    const json& eval = shown["evals"][i];
    EXPECT_EQ(eval["step"], 4 * static_cast<int>(i + 1));
    EXPECT_EQ(eval["tokens"], 2 * 2 * 4 * 8) << "2 ranks x 2 batches x 4 windows x 8 tokens";
    const double loss = eval["val_loss"].get<double>();
    EXPECT_NEAR(eval["perplexity"].get<double>(), std::exp(loss), 1e-9 * std::exp(loss));
    EXPECT_NEAR(loss,
                std::stod(queryText(db, fmt::format("SELECT val_loss FROM evals WHERE rank = 1 AND "
                                                    "step = {}",
                                                    eval["step"].get<int>()))),
                1e-12)
        << "every rank stored the same loss";
  }
  CapturedProcess text(kRingmaster, args({"show", "1"}));
  ASSERT_TRUE(text.wait(60s).ok()) << text.err();
  EXPECT_NE(text.out().find("eval at step 12: val loss "), std::string::npos) << text.out();
  EXPECT_NE(text.out().find("EVAL STEP"), std::string::npos) << text.out();
  // Exported: a row per rank and evaluation.
  jsonOf({"export", "1", "--csv", (dir_ / "csv").string()});
  std::ifstream evals_csv(dir_ / "csv" / "evals.csv");
  std::string line;
  std::getline(evals_csv, line);
  EXPECT_EQ(line, "rank,attempt,step,t,val_loss,perplexity,tokens,eval_ms");
  int rows = 0;
  while (std::getline(evals_csv, line)) ++rows;
  EXPECT_EQ(rows, 2 * 3);
}

}  // namespace
}  // namespace ringmaster
