// Issue 21, the live hang view on real runs: `ringmaster run` of the DDP example on 3 and 4 local
// ranks with the default 300 s collective timeout, one worker stopped with SIGSTOP (its PID from
// the ranks table); within 10 s of the stop `ringmaster show --json` names that rank as the one
// that has not reached the all_reduce the others wait in, with its sequence number, and the text
// report says so too; `ringmaster flight` then dumps the waiting ranks' flight recorders (the
// stopped one's once it is continued). The run is then cancelled and every process reaped.
// `ringmaster flight` on a live run stores and prints a dump per local worker.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/proc_files.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using testing::CapturedProcess;
using testing::exitedWith;
using Clock = std::chrono::steady_clock;

class HangViewRun : public testing::CliRunTest, public ::testing::WithParamInterface<int> {
 protected:
  int worldSize() const { return GetParam(); }

  // The DDP example on worldSize() local ranks, long enough to be running throughout the test.
  std::string writeSpec() {
    json spec = testing::localDdpSpec(worldSize());
    spec["launch"]["timeout_s"] = 300;
    spec["train"]["steps"] = 10'000'000;
    return CliRunTest::writeSpec("ddp", spec);
  }

  std::string show(const std::vector<std::string>& extra) {
    std::vector<std::string> command = {"show", "1"};
    command.insert(command.end(), extra.begin(), extra.end());
    CapturedProcess process = ringmaster(command);
    const ExitStatus status = process.wait(60s);
    EXPECT_TRUE(status.ok()) << process.err();
    return process.out();
  }

  // PIDs of the agent and workers of this test's runs (they read their spec from its directory).
  std::vector<pid_t> processesOfThisTest() const { return testing::processesOfRunsUnder(dir_); }

  void TearDown() override {
    for (pid_t pid : processesOfThisTest()) {  // only after a failure
      ::kill(pid, SIGCONT);
      ::kill(pid, SIGKILL);
    }
    StorageTest::TearDown();
  }

  // Waits until every rank has said hello (its PID) and completed a few of the training's
  // collectives, past the start's broadcasts; the workers' PIDs by rank.
  void waitUntilUnderWay(CapturedProcess& run, std::vector<pid_t>& workers) {
    workers.assign(static_cast<size_t>(worldSize()), 0);
    const auto deadline = Clock::now() + 120s;
    for (;;) {
      ASSERT_LT(Clock::now(), deadline) << "the run did not get going\n" << run.err();
      run.readFor(200ms);
      if (!std::filesystem::exists(dbPath())) continue;
      storage::Database db(dbPath());
      if (queryInt(db, "SELECT count(*) FROM rank_progress WHERE completed >= 8") < worldSize())
        continue;
      for (int r = 0; r < worldSize(); ++r) {
        workers[static_cast<size_t>(r)] = static_cast<pid_t>(
            queryInt(db, fmt::format("SELECT pid FROM ranks WHERE rank = {}", r)));
      }
      return;
    }
  }

  // `show --json` once a diagnosis names `victim` as stuck, polled for 10 s from now; null when
  // none did.
  json waitForDiagnosisOf(CapturedProcess& run, int victim) {
    const auto stopped = Clock::now();
    while (Clock::now() < stopped + 10s) {
      run.readFor(250ms);
      const json shown = json::parse(show({"--json"}));
      for (const json& diagnosis : shown["hang"]["diagnoses"]) {
        const auto& stuck = diagnosis["stuck"];
        if (std::find(stuck.begin(), stuck.end(), victim) == stuck.end()) continue;
        std::printf("rank %d of %d named %.1f s after its SIGSTOP\n", victim, worldSize(),
                    std::chrono::duration<double>(Clock::now() - stopped).count());
        return shown;
      }
    }
    return nullptr;
  }

  // The sequence number is past what the stopped rank last started. Every other rank waits in it,
  // or is held up waiting in the one before (a ring all_reduce completes on the ranks the stopped
  // one owed nothing more, while its successor still waits for its last chunk), said so. Returns
  // the collective each other rank waits in.
  static std::map<int, int64_t> expectTheOthersWaitInIt(const json& hang, int victim,
                                                        const std::string& op, int64_t seq) {
    std::map<int, int64_t> waits_in;
    for (const json& rank : hang["ranks"]) {
      SCOPED_TRACE(rank.dump());
      if (rank["rank"] == victim) {
        EXPECT_LT(rank["started"].get<int64_t>(), seq);
        continue;
      }
      EXPECT_EQ(rank["op"], op);
      const int64_t in = rank["op_seq"].get<int64_t>();
      waits_in[rank["rank"].get<int>()] = in;
      EXPECT_EQ(rank["completed"].get<int64_t>(), in - 1);
      if (in != seq) {
        EXPECT_EQ(in, seq - 1);
        EXPECT_NE(rank["state"].get<std::string>().find("held up"), std::string::npos);
      }
    }
    return waits_in;
  }

  // `ringmaster flight` while `victim` is stopped: the others' dumps arrive, each with the
  // collective it waits in as started; the stopped rank's is missing (exit 1).
  void expectTheOthersFlightRecorders(int victim, const std::string& op,
                                      const std::map<int, int64_t>& waits_in) {
    CapturedProcess flight = ringmaster({"flight", "1", "--json", "--wait", "3"});
    const ExitStatus flight_status = flight.wait(60s);
    EXPECT_TRUE(exitedWith(flight_status, 1)) << flight_status.describe() << flight.err();
    const json dumps = json::parse(flight.out());
    EXPECT_EQ(dumps["missing"], json::array({victim}));
    ASSERT_EQ(dumps["dumps"].size(), static_cast<size_t>(worldSize() - 1)) << dumps.dump(2);
    for (const json& dump : dumps["dumps"]) {
      bool in_it = false;
      const auto waits = waits_in.find(dump["rank"].get<int>());
      const int64_t in = waits == waits_in.end() ? 0 : waits->second;
      for (const json& record : dump["records"])
        in_it =
            in_it || (record["op"] == op && record["seq"] == in && record["state"] == "started");
      EXPECT_TRUE(in_it) << "rank " << dump["rank"] << "'s flight recorder";
    }
  }

  // Once continued, the signal pending on the stopped rank is handled: its dump is stored.
  void expectTheContinuedRanksDump(CapturedProcess& run, int victim) {
    const auto deadline = Clock::now() + 20s;
    int64_t victim_dumps = 0;
    while (victim_dumps == 0 && Clock::now() < deadline) {
      run.readFor(200ms);
      victim_dumps = queryInt(
          storage::Database(dbPath()),
          fmt::format("SELECT count(*) FROM flight_recorder_dumps WHERE rank = {}", victim));
    }
    EXPECT_EQ(victim_dumps, 1) << "the continued rank's pending SIGUSR1 gave no dump";
  }

  // Cancels the run: it ends cancelled, every process reaped, and an ended run has no diagnosis.
  void cancelAndExpectEveryProcessReaped(CapturedProcess& run, const std::vector<pid_t>& workers) {
    run.signal(SIGINT);
    const ExitStatus status = run.wait(60s);
    EXPECT_TRUE(exitedWith(status, 130)) << status.describe() << run.err();
    const auto deadline = Clock::now() + 15s;
    for (pid_t pid : workers) {
      while (testing::processRuns(pid) && Clock::now() < deadline)
        std::this_thread::sleep_for(50ms);
      EXPECT_FALSE(testing::processRuns(pid)) << "worker " << pid << " outlived its run";
    }
    while (!processesOfThisTest().empty() && Clock::now() < deadline)
      std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(processesOfThisTest().empty());
    const json ended = json::parse(show({"--json"}));
    EXPECT_EQ(ended["run"]["status"], "cancelled");
    EXPECT_FALSE(ended["hang"]["running"].get<bool>());
    EXPECT_TRUE(ended["hang"]["diagnoses"].empty());
  }
};

TEST_P(HangViewRun, AStoppedWorkerIsNamedWithTheOpAndItsSequenceWithinTenSeconds) {
  CapturedProcess run = ringmaster({"run", writeSpec(), "--grace", "1", "-q"});
  std::vector<pid_t> workers;
  ASSERT_NO_FATAL_FAILURE(waitUntilUnderWay(run, workers));
  const int victim = worldSize() - 2;  // rank 1 of 3, rank 2 of 4
  const pid_t victim_pid = workers[static_cast<size_t>(victim)];
  ASSERT_GT(victim_pid, 0);
  ASSERT_NE(testing::readProcFile(victim_pid, "cmdline").find("worker"), std::string::npos)
      << "pid " << victim_pid << " from the ranks table is not a worker";

  ASSERT_EQ(::kill(victim_pid, SIGSTOP), 0);
  const json named = waitForDiagnosisOf(run, victim);
  ASSERT_FALSE(named.is_null()) << "no diagnosis named rank " << victim
                                << " within 10 s of its SIGSTOP:\n"
                                << show({"--json"});
  ASSERT_EQ(named["hang"]["diagnoses"].size(), 1u) << named["hang"].dump(2);
  const json& diagnosis = named["hang"]["diagnoses"][0];
  const std::string op = diagnosis["op"].get<std::string>();
  EXPECT_EQ(op, "all_reduce") << "DDP's gradient buckets";
  EXPECT_EQ(diagnosis["stuck"], json::array({victim}));
  const int64_t seq = diagnosis["seq"].get<int64_t>();
  const std::map<int, int64_t> waits_in = expectTheOthersWaitInIt(named["hang"], victim, op, seq);
  // The text report names it the same way.
  const std::string text = show({});
  EXPECT_NE(text.find(fmt::format("rank {} has not reached {} #{}", victim, op, seq)),
            std::string::npos)
      << text;

  expectTheOthersFlightRecorders(victim, op, waits_in);
  ASSERT_EQ(::kill(victim_pid, SIGCONT), 0);
  expectTheContinuedRanksDump(run, victim);
  cancelAndExpectEveryProcessReaped(run, workers);
}

TEST_P(HangViewRun, FlightStoresAndPrintsADumpPerLocalWorker) {
  const std::string spec = writeSpec();
  CapturedProcess run = ringmaster({"run", spec, "--grace", "1", "-q"});
  {
    const auto deadline = Clock::now() + 120s;
    for (;;) {
      ASSERT_LT(Clock::now(), deadline) << "the run did not get going\n" << run.err();
      run.readFor(200ms);
      if (std::filesystem::exists(dbPath()) &&
          queryInt(storage::Database(dbPath()),
                   "SELECT count(*) FROM rank_progress WHERE completed >= 8") >= worldSize())
        break;
    }
  }
  CapturedProcess flight = ringmaster({"flight", "1", "--json"});
  const ExitStatus flight_status = flight.wait(60s);
  EXPECT_TRUE(flight_status.ok()) << flight_status.describe() << flight.err();
  const json dumps = json::parse(flight.out());
  EXPECT_TRUE(dumps["missing"].empty());
  EXPECT_TRUE(dumps["unreachable"].empty()) << "every rank runs on this host";
  ASSERT_EQ(dumps["dumps"].size(), static_cast<size_t>(worldSize())) << dumps.dump(2);
  for (const json& dump : dumps["dumps"]) {
    ASSERT_FALSE(dump["records"].empty());
    EXPECT_EQ(dump["records"].back()["group"], "world");
  }
  {
    storage::Database db(dbPath());
    EXPECT_EQ(queryInt(db, "SELECT count(DISTINCT rank) FROM flight_recorder_dumps"), worldSize());
  }
  // The text form names each rank and its newest records.
  CapturedProcess text = ringmaster({"flight", "1"});
  EXPECT_TRUE(text.wait(60s).ok()) << text.err();
  EXPECT_NE(text.out().find("rank 0 (pid "), std::string::npos) << text.out();
  EXPECT_NE(text.out().find("all_reduce #"), std::string::npos) << text.out();

  run.signal(SIGINT);
  const ExitStatus status = run.wait(60s);
  EXPECT_TRUE(exitedWith(status, 130)) << status.describe() << run.err();
  const auto deadline = Clock::now() + 15s;
  while (!processesOfThisTest().empty() && Clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(processesOfThisTest().empty());
  // Asking an ended run is a clear error.
  CapturedProcess ended = ringmaster({"flight", "1"});
  EXPECT_TRUE(exitedWith(ended.wait(60s), 2)) << ended.err();
  EXPECT_NE(ended.err().find("not running"), std::string::npos) << ended.err();
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, HangViewRun, ::testing::Values(3, 4),
                         [](const auto& info) { return fmt::format("{}Ranks", info.param); });

}  // namespace
}  // namespace ringmaster
