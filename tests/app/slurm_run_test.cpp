// Issue 35: jobs handed to a real Slurm (slurmctld and two slurmd started by the test,
// tests/common/slurm_cluster.h) through `ringmaster run`: a DDP engine job of 2 nodes x 2 ranks
// and a PyTorch program job complete with every event stored once (counted per rank and kind
// against the nodes' spools); a job pending on resources shows `pending` with Slurm's reason and
// `cancel` takes it out of the queue; a worker killed with SIGKILL fails the run with its rank,
// node and signal, or, with launch.max_restarts 1, restarts inside the allocation and completes;
// `ringmaster run` killed while the job runs leaves it to `attach`, which stores each event once.
// After every job no process of it is left.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/injection_corpus.h"
#include "common/proc_files.h"
#include "common/slurm_cluster.h"
#include "common/ssh_hosts.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "slurm/slurm_script.h"
#include "spec/job_spec.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using storage::testing::queryText;
using testing::CapturedProcess;

constexpr int kNodes = 2;
constexpr int kRanksPerNode = 2;
constexpr int kWorld = kNodes * kRanksPerNode;

// Telemetry lines the nodes' agents spooled, per (rank, kind), and per rank.
struct Spooled {
  std::map<std::pair<int, std::string>, int64_t> by_kind;
  std::map<int, int64_t> by_rank;
  int64_t lines = 0;
  int64_t of(int rank, const std::string& kind) const {
    const auto found = by_kind.find({rank, kind});
    return found == by_kind.end() ? 0 : found->second;
  }
};

Spooled spooledTelemetry(const fs::path& job_dir) {
  Spooled spooled;
  for (int node = 0; node < kNodes; ++node) {
    const fs::path spool = job_dir / fmt::format("node-{}", node) / "spool";
    if (!fs::is_directory(spool)) continue;
    for (const auto& entry : fs::directory_iterator(spool)) {
      if (!entry.path().filename().string().starts_with("segment-")) continue;
      std::ifstream in(entry.path());
      for (std::string line; std::getline(in, line);) {
        if (!line.starts_with("T ")) continue;
        DecodeResult decoded = decodeEvent(line.substr(2));
        if (!decoded.ok()) continue;
        const TelemetryEvent& event = decoded.event();
        ++spooled.by_kind[{event.rank, std::string(eventTypeName(event.body))}];
        ++spooled.by_rank[event.rank];
        ++spooled.lines;
      }
    }
  }
  return spooled;
}

class SlurmRun : public testing::CliRunTest {
 protected:
  void SetUp() override {
    CliRunTest::SetUp();
    if (const std::string why = testing::slurmUnavailable(); !why.empty()) GTEST_SKIP() << why;
    cluster_ = std::make_unique<testing::SlurmCluster>(clusterOptions());
  }

  virtual testing::SlurmClusterOptions clusterOptions() const { return {.nodes = kNodes}; }

  // Whether the job waits in the queue (PENDING).
  bool jobQueued(const std::string& job_id) const {
    return cluster_->squeue({"--noheader", "--jobs", job_id, "--format=%T"}).find("PENDING") !=
           std::string::npos;
  }

  void TearDown() override {
    // Only after a failure: what a run left, by PID, before the cluster goes.
    for (pid_t pid : testing::processesOfRunsUnder(dir_)) ::kill(pid, SIGKILL);
    cluster_.reset();
    CliRunTest::TearDown();
  }

  fs::path jobDir(int64_t run) const {
    return dir_ / "runs.db-runs" / fmt::format("run-{}", run) / "job";
  }

  // The DDP example on the cluster's two nodes, two ranks each.
  json ddpSpec(const std::string& name, int steps) const {
    json spec = testing::exampleSpec("ddp_mlp");
    spec["name"] = name;
    spec["launch"].erase("hosts");
    spec["launch"]["scheduler"] = {
        {"kind", "slurm"}, {"nodes", kNodes}, {"ranks_per_node", kRanksPerNode}};
    spec["train"]["steps"] = steps;
    spec["telemetry"]["every_steps"] = 1;
    return spec;
  }

  // `ringmaster --db DB ARGS...` with the cluster's SLURM_CONF, started.
  CapturedProcess slurmRingmaster(std::vector<std::string> args) const {
    return ringmaster(std::move(args), cluster_->env());
  }

  json shown(int64_t run) const {
    CapturedProcess show = slurmRingmaster({"show", std::to_string(run), "--json"});
    const ExitStatus status = show.wait(60s);
    EXPECT_TRUE(status.ok()) << show.err();
    return json::parse(show.out())["run"];
  }

  // Waits (bounded) until `file` lists `count` PIDs; the PIDs.
  std::vector<pid_t> waitForPids(const fs::path& file, size_t count) const {
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    while (testing::pidsInFile(file).size() < count && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(50ms);
    return testing::pidsInFile(file);
  }

  // Every event the nodes spooled is stored once: counted per rank and kind.
  void expectEveryEventStoredOnce(int64_t run, int steps) const {
    const Spooled spooled = spooledTelemetry(jobDir(run));
    storage::Database db(dbPath());
    EXPECT_EQ(
        queryInt(db, fmt::format("SELECT sum(events_stored) FROM attempts WHERE run_id = {}", run)),
        spooled.lines);
    for (int rank = 0; rank < kWorld; ++rank) {
      SCOPED_TRACE(fmt::format("rank {}", rank));
      EXPECT_EQ(spooled.of(rank, "hello"), 1);
      EXPECT_EQ(spooled.of(rank, "done"), 1);
      EXPECT_EQ(spooled.of(rank, "step"), steps);
      EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM steps WHERE run_id = {} AND "
                                         "rank = {}",
                                         run, rank)),
                spooled.of(rank, "step"));
      EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM comm_events WHERE run_id = {} AND "
                                         "rank = {}",
                                         run, rank)),
                spooled.of(rank, "comm"));
      EXPECT_EQ(queryInt(db, fmt::format("SELECT total(last_seq - first_seq + 1) FROM seq_ranges "
                                         "WHERE run_id = {} AND rank = {}",
                                         run, rank)),
                spooled.by_rank.at(rank));
    }
  }

  std::unique_ptr<testing::SlurmCluster> cluster_;
};

TEST_F(SlurmRun, DdpOnTwoNodesOfTwoRanksCompletesAndEveryEventIsStoredOnce) {
  constexpr int kSteps = 30;
  CapturedProcess run = slurmRingmaster({"run", writeSpec("ddp", ddpSpec("ddp", kSteps)), "-q"});
  const ExitStatus status = run.wait(240s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.err();
  const json record = shown(1);
  EXPECT_EQ(record["status"], "completed") << record.dump(2);
  ASSERT_TRUE(record.contains("scheduler")) << record.dump(2);
  EXPECT_EQ(record["scheduler"]["kind"], "slurm");
  EXPECT_EQ(record["scheduler"]["state"], "COMPLETED");
  const std::string job_id = record["scheduler"]["job_id"];
  EXPECT_FALSE(job_id.empty());
  // The script is kept with the run, and Slurm's output file beside it.
  const std::string script = testing::fileBytes(jobDir(1) / "slurm.sbatch");
  EXPECT_NE(script.find("#SBATCH --nodes=2"), std::string::npos) << script;
  EXPECT_TRUE(fs::exists(jobDir(1) / fmt::format("slurm-{}.out", job_id)));
  expectEveryEventStoredOnce(1, kSteps);
  // Each rank ran on its node, as Slurm names them: ranks 0-1 on the first, 2-3 on the second.
  storage::Database db(dbPath());
  const std::vector<std::string> nodes = cluster_->nodeNames();
  for (int rank = 0; rank < kWorld; ++rank)
    EXPECT_EQ(
        queryText(db, fmt::format("SELECT host FROM ranks WHERE run_id = 1 AND rank = {}", rank)),
        nodes.at(static_cast<size_t>(rank / kRanksPerNode)));
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_));
}

TEST_F(SlurmRun, APyTorchProgramJobOnTwoNodesCompletes) {
  json spec = testing::exampleSpec("torch_ddp");
  spec["program"]["workdir"] = std::string(testSourceDir());
  spec["program"]["args"] = {"--steps", "20", "--batch-size", "32"};
  spec["program"]["steps"] = 20;
  spec["launch"].erase("hosts");
  spec["launch"]["scheduler"] = {
      {"kind", "slurm"}, {"nodes", kNodes}, {"ranks_per_node", kRanksPerNode}};
  CapturedProcess run = slurmRingmaster({"run", writeSpec("torch", spec), "-q"});
  const ExitStatus status = run.wait(300s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.err();
  const json record = shown(1);
  EXPECT_EQ(record["status"], "completed") << record.dump(2);
  EXPECT_EQ(record["scheduler"]["state"], "COMPLETED");
  expectEveryEventStoredOnce(1, 20);
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_));
}

TEST_F(SlurmRun, APendingJobShowsItsReasonAndCancelTakesItOutOfTheQueue) {
  // Both nodes held by another job: ours waits for resources.
  const std::string blocker =
      cluster_->sbatch({"--nodes=2", "--exclusive", "--output=/dev/null", "--wrap", "sleep 300"});
  CapturedProcess run = slurmRingmaster({"run", writeSpec("queued", ddpSpec("queued", 10)), "-q"});
  json record;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  do {
    run.readFor(500ms);
    if (fs::exists(dbPath())) record = shown(1);
  } while (record.value("scheduler", json::object()).value("reason", "") != "Resources" &&
           std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(record.value("status", ""), "pending") << record.dump(2) << run.err();
  ASSERT_TRUE(record.contains("scheduler")) << record.dump(2);
  EXPECT_EQ(record["scheduler"]["state"], "PENDING") << record.dump(2);
  EXPECT_EQ(record["scheduler"]["reason"], "Resources") << record.dump(2);
  const std::string job_id = record["scheduler"]["job_id"];
  EXPECT_TRUE(jobQueued(job_id));
  // The launching process goes away (a closed window): the job stays queued, the run pending.
  run.signal(SIGKILL);
  run.wait(30s);
  EXPECT_EQ(shown(1).value("status", ""), "pending");
  EXPECT_TRUE(jobQueued(job_id));

  CapturedProcess cancel = slurmRingmaster({"cancel", "1"});
  const ExitStatus cancelled = cancel.wait(90s);
  EXPECT_EQ(cancelled.exit_code, 130) << cancelled.describe() << "\n" << cancel.err();
  EXPECT_NE(cancel.err().find("no process of it is left"), std::string::npos) << cancel.err();
  EXPECT_FALSE(jobQueued(job_id));
  record = shown(1);
  EXPECT_EQ(record["status"], "cancelled") << record.dump(2);
  EXPECT_EQ(record["scheduler"]["state"], "CANCELLED") << record.dump(2);
  cluster_->command("scancel", {blocker});
}

TEST_F(SlurmRun, RunDetachReturnsOnceQueuedWithTheJobsState) {
  CapturedProcess run =
      slurmRingmaster({"run", writeSpec("detached", ddpSpec("detached", 10)), "--detach", "-q"});
  ASSERT_TRUE(run.wait(60s).ok()) << run.err();
  const json record = shown(1);
  ASSERT_TRUE(record.contains("scheduler")) << record.dump(2);
  EXPECT_FALSE(record["scheduler"]["state"].get<std::string>().empty()) << record.dump(2);
  CapturedProcess attach = slurmRingmaster({"attach", "1", "-q"});
  ASSERT_TRUE(attach.wait(120s).ok()) << attach.err();
  EXPECT_EQ(shown(1)["status"], "completed");
  expectEveryEventStoredOnce(1, 10);
}

TEST_F(SlurmRun, AWorkerKilledFailsTheRunNamingItsRankNodeAndSignal) {
  CapturedProcess run =
      slurmRingmaster({"run", writeSpec("killed", ddpSpec("killed", 100000)), "--detach", "-q"});
  ASSERT_TRUE(run.wait(60s).ok()) << run.err();
  const std::vector<pid_t> workers =
      waitForPids(jobDir(1) / "node-1" / "workers.pid", kRanksPerNode);
  ASSERT_EQ(workers.size(), static_cast<size_t>(kRanksPerNode));
  std::this_thread::sleep_for(2s);  // a few steps stored
  ::kill(workers[1], SIGKILL);      // rank 3, on the second node
  CapturedProcess attach = slurmRingmaster({"attach", "1", "-q"});
  const ExitStatus attached = attach.wait(180s);
  EXPECT_FALSE(attached.ok()) << attach.err();
  const json record = shown(1);
  EXPECT_EQ(record["status"], "failed") << record.dump(2);
  const std::string error = record.value("error", "");
  EXPECT_NE(error.find("SIGKILL"), std::string::npos) << record.dump(2);
  EXPECT_EQ(record.value("error_rank", -1), 3) << record.dump(2);
  EXPECT_EQ(record.value("error_host", ""), cluster_->nodeNames().at(1)) << record.dump(2);
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_, 60s));
}

TEST_F(SlurmRun, WithMaxRestartsAKilledWorkerRestartsInsideTheAllocationAndCompletes) {
  json spec = ddpSpec("restarts", 300);
  spec["launch"]["max_restarts"] = 1;
  CapturedProcess run = slurmRingmaster({"run", writeSpec("restarts", spec), "--detach", "-q"});
  ASSERT_TRUE(run.wait(60s).ok()) << run.err();
  const std::vector<pid_t> workers =
      waitForPids(jobDir(1) / "node-1" / "workers.pid", kRanksPerNode);
  ASSERT_EQ(workers.size(), static_cast<size_t>(kRanksPerNode));
  std::this_thread::sleep_for(1s);
  ::kill(workers[0], SIGKILL);
  CapturedProcess attach = slurmRingmaster({"attach", "1", "-q"});
  const ExitStatus attached = attach.wait(240s);
  EXPECT_TRUE(attached.ok()) << attached.describe() << "\n" << attach.err();
  const json record = shown(1);
  EXPECT_EQ(record["status"], "completed") << record.dump(2);
  EXPECT_EQ(record["scheduler"]["state"], "COMPLETED") << record.dump(2);
  storage::Database db(dbPath());
  EXPECT_EQ(queryInt(db, "SELECT count(DISTINCT attempt) FROM attempts WHERE run_id = 1"), 2);
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_, 60s));
}

TEST_F(SlurmRun, RunKilledWhileTheJobRunsLeavesItToAttachWhichStoresEachEventOnce) {
  constexpr int kSteps = 400;
  CapturedProcess run =
      slurmRingmaster({"run", writeSpec("closed", ddpSpec("closed", kSteps)), "-q"});
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  const auto stepsStored = [&] {
    if (!fs::exists(dbPath())) return int64_t{0};
    storage::Database db(dbPath());
    return queryInt(db, "SELECT count(*) FROM steps WHERE run_id = 1");
  };
  while (std::chrono::steady_clock::now() < deadline && stepsStored() < kWorld * 20)
    run.readFor(200ms);
  run.signal(SIGKILL);  // the launching process goes away mid-run
  run.wait(30s);
  storage::Database db(dbPath());
  EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "running");
  CapturedProcess attach = slurmRingmaster({"attach", "1", "-q"});
  const ExitStatus attached = attach.wait(240s);
  ASSERT_TRUE(attached.ok()) << attached.describe() << "\n" << attach.err();
  EXPECT_EQ(queryText(db, "SELECT status FROM runs WHERE id = 1"), "completed");
  expectEveryEventStoredOnce(1, kSteps);
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_));
}

TEST_F(SlurmRun, AJobPastItsTimeLimitIsRecordedTimedOutWithEverythingItStored) {
  json spec = ddpSpec("late", 1000000);
  spec["launch"]["scheduler"]["time"] = "1";  // a minute; Slurm checks limits every ~30 s
  CapturedProcess run = slurmRingmaster({"run", writeSpec("late", spec), "-q"});
  const ExitStatus status = run.wait(240s);
  EXPECT_FALSE(status.ok()) << run.err();
  const json record = shown(1);
  EXPECT_EQ(record["status"], "failed") << record.dump(2);
  EXPECT_EQ(record["scheduler"]["state"], "TIMEOUT") << record.dump(2);
  EXPECT_NE(record.value("error", "").find("time limit"), std::string::npos) << record.dump(2);
  // What the ranks reported until Slurm stopped them is stored, each event once.
  const Spooled spooled = spooledTelemetry(jobDir(1));
  storage::Database db(dbPath());
  EXPECT_GT(spooled.of(0, "step"), 0);
  for (int rank = 0; rank < kWorld; ++rank)
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM steps WHERE run_id = 1 AND rank = {}",
                                       rank)),
              spooled.of(rank, "step"))
        << "rank " << rank;
  EXPECT_EQ(queryInt(db, "SELECT sum(events_stored) FROM attempts WHERE run_id = 1"),
            spooled.lines);
  EXPECT_TRUE(testing::noProcessOfRunsLeftUnder(dir_, 60s));
}

// Slurm notices a silent slurmd after SlurmdTimeout: short here, so that a node failure ends the
// job within seconds.
class SlurmNodeFailure : public SlurmRun {
 protected:
  testing::SlurmClusterOptions clusterOptions() const override {
    return {.nodes = kNodes, .slurmd_timeout_s = 3, .message_timeout_s = 3};
  }
};

TEST_F(SlurmNodeFailure, AKilledSlurmdEndsTheRunNodeFailNamingTheNode) {
  CapturedProcess run =
      slurmRingmaster({"run", writeSpec("lost", ddpSpec("lost", 1000000)), "--detach", "-q"});
  ASSERT_TRUE(run.wait(60s).ok()) << run.err();
  ASSERT_EQ(waitForPids(jobDir(1) / "node-1" / "workers.pid", kRanksPerNode).size(),
            static_cast<size_t>(kRanksPerNode));
  const std::string lost = cluster_->nodeNames().at(1);
  cluster_->killSlurmd(lost);
  CapturedProcess attach = slurmRingmaster({"attach", "1", "-q"});
  EXPECT_FALSE(attach.wait(180s).ok()) << attach.err();
  const json record = shown(1);
  EXPECT_EQ(record["status"], "failed") << record.dump(2);
  EXPECT_EQ(record["scheduler"]["state"], "NODE_FAIL") << record.dump(2);
  const std::string error = record.value("error", "");
  EXPECT_NE(error.find("NODE_FAIL"), std::string::npos) << record.dump(2);
  EXPECT_NE(error.find("down: " + lost), std::string::npos) << record.dump(2);
}

TEST_F(SlurmRun, AJobSubmittedFromALoginNodeOverSshCompletesWithEveryEventStored) {
  // The login node: an sshd on loopback whose sessions reach the test cluster (SLURM_CONF).
  const fs::path ssh_dir = dir_ / "ssh";
  testing::SshdServers servers = testing::startSshHosts(ssh_dir, 1);
  servers[0]->restartWithConfig("SetEnv SLURM_CONF=" + cluster_->conf().string() + "\n");
  json spec = ddpSpec("login", 20);
  spec["launch"]["scheduler"]["submit_from"] = {{"host", "127.0.0.1"},
                                                {"port", servers[0]->port()},
                                                {"identity_file", (ssh_dir / "id_user").string()}};
  std::vector<std::string> args = {"run", writeSpec("login", spec), "-q"};
  for (const std::string& option : testing::sshOptions(ssh_dir)) args.push_back(option);
  CapturedProcess run = slurmRingmaster(args);
  const ExitStatus status = run.wait(240s);
  // The job's directory, made in the login node's home.
  std::string job_dir;
  if (fs::exists(dbPath())) {
    storage::Database db(dbPath());
    job_dir = queryText(db, "SELECT job_dir FROM run_job_dirs WHERE run_id = 1");
  }
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.err();
  ASSERT_FALSE(job_dir.empty());
  EXPECT_NE(job_dir.find("/.ringmaster/jobs/run-"), std::string::npos) << job_dir;
  const json record = shown(1);
  EXPECT_EQ(record["status"], "completed") << record.dump(2);
  EXPECT_EQ(record["scheduler"]["state"], "COMPLETED") << record.dump(2);
  const Spooled spooled = spooledTelemetry(job_dir);
  storage::Database db(dbPath());
  EXPECT_EQ(queryInt(db, "SELECT sum(events_stored) FROM attempts WHERE run_id = 1"),
            spooled.lines);
  for (int rank = 0; rank < kWorld; ++rank)
    EXPECT_EQ(queryInt(db, fmt::format("SELECT count(*) FROM steps WHERE run_id = 1 AND rank = {}",
                                       rank)),
              spooled.of(rank, "step"))
        << "rank " << rank;
  EXPECT_EQ(spooled.of(kWorld - 1, "step"), 20);
  // No process of the job is left: none names its job directory.
  const auto left = [&] {
    std::vector<pid_t> found;
    for (pid_t pid : testing::processIds())
      if (pid != ::getpid() &&
          testing::readProcFile(pid, "cmdline").find(job_dir) != std::string::npos)
        found.push_back(pid);
    return found;
  };
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!left().empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(left().empty());
  fs::remove_all(job_dir);
}

TEST_F(SlurmRun, EveryCorpusValueOfEverySlurmFieldReachesSbatchAsDataOrIsRefusedNamingIt) {
  // Each value in each text field and as an extra option: refused at its field, or the script it
  // makes is read by the real sbatch (--test-only: validated and scheduled, never run), which
  // answers about the value as data; nothing it holds is ever executed.
  size_t accepted = 0, refused = 0;
  const fs::path job_dir = dir_ / "job";
  const auto check = [&](const std::string& key, const json& value, const std::string& field) {
    json document = ddpSpec("corpus", 1);
    document["launch"]["scheduler"][key] = value;
    const SpecParseResult parsed = parseJobSpec(document.dump());
    if (!parsed.ok()) {
      ++refused;
      ASSERT_EQ(parsed.problems.size(), 1u) << parsed.describe();
      EXPECT_EQ(parsed.problems[0].path, field) << parsed.describe();
      return;
    }
    ++accepted;
    const fs::path script = dir_ / "corpus.sbatch";
    std::ofstream(script) << slurm::slurmBatchScript(*parsed.spec,
                                                     {.job_dir = job_dir.string(),
                                                      .spec_path = (dir_ / "spec.json").string(),
                                                      .node_binary = "/bin/false"});
    const testing::SlurmCommandResult answer =
        cluster_->command("sbatch", {"--test-only", script.string()});
    SCOPED_TRACE(field + " = " + value.dump() + ": " + answer.err);
    // sbatch either schedules it or refuses the value itself ("invalid partition", ...).
    EXPECT_NE(answer.err.find(answer.ok() ? "to start at" : "error:"), std::string::npos);
  };
  for (const std::string& word : testing::injectionCorpus()) {
    for (const char* key :
         {"partition", "account", "qos", "reservation", "job_name", "constraint", "mem", "time"})
      check(key, word, std::string("launch.scheduler.") + key);
    for (const std::string& item : {word, "--comment=" + word})
      check("extra_sbatch", json::array({item}), "launch.scheduler.extra_sbatch[0]");
  }
  EXPECT_GT(accepted, 0u);
  EXPECT_GT(refused, accepted);
  for (const fs::path& where : {dir_, cluster_->dir(), fs::current_path()})
    EXPECT_FALSE(fs::exists(where / "CANARY")) << where;
  EXPECT_EQ(cluster_->squeue({"--noheader"}), "");  // --test-only queued nothing
}

}  // namespace
}  // namespace ringmaster
