// Issue 35, a run handed to a cluster scheduler in the run database: a file of the previous
// schema (17) is migrated with its runs owning no scheduler job; recordSchedulerJob and
// recordSchedulerState store the job, its state, reason and nodes, which every query that reads
// runs gives back; the scheduler's queued states make a running run pending and its started ones
// a pending run running, for every state word and every run status, and an ended run's status and
// end are never changed; a detached pending run is live (never reconciled as interrupted).
#include <gtest/gtest.h>

#include <algorithm>

#include <optional>
#include <string>
#include <vector>

#include "db/database.h"
#include "query/runs.h"
#include "recorder/run_lifecycle.h"
#include "storage_test_support.h"

namespace ringmaster::storage {
namespace {

// Slurm's words for a job waiting in the queue, for a started one, and for an ended one (with a
// word Slurm might add later and none at all), as remote/slurm/slurm_state.h maps them.
const std::vector<std::string> kQueuedStates = {"PENDING", "CONFIGURING", "REQUEUED", "RESIZING",
                                                "SUSPENDED"};
const std::vector<std::string> kStartedStates = {"RUNNING", "COMPLETING", "STOPPED", "SIGNALING",
                                                 "STAGE_OUT"};
const std::vector<std::string> kOtherStates = {
    "COMPLETED", "FAILED",    "CANCELLED", "TIMEOUT",       "NODE_FAIL", "OUT_OF_MEMORY",
    "PREEMPTED", "BOOT_FAIL", "DEADLINE",  "NEW_WORD_2030", ""};
const std::vector<std::string> kEndedStatuses = {"completed", "failed", "cancelled", "interrupted"};

bool contains(const std::vector<std::string>& words, const std::string& word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

class SchedulerJobStorage : public testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    path_ = (dir_ / "runs.db").string();
    db_.emplace(path_);
  }
  void TearDown() override {
    db_.reset();
    StorageTest::TearDown();
  }
  int64_t newRun(const std::string& name = "slurm") {
    return createRun(*db_, {.name = name, .spec_json = "{}", .strategy = "ddp", .world_size = 4});
  }
  // A run in `status`: pending through the scheduler's PENDING, an ended one through finishRun.
  int64_t runWithStatus(const std::string& status) {
    const int64_t run = newRun(status);
    recordSchedulerJob(*db_, run, "slurm", "4242");
    if (status == "pending") recordSchedulerState(*db_, run, {.state = "PENDING"});
    if (contains(kEndedStatuses, status)) finishRun(*db_, run, status);
    EXPECT_EQ(loadRun(*db_, run).status, status);
    return run;
  }
  std::string path_;
  std::optional<Database> db_;
};

// The run status each state word leaves a run of each status in: queued words make a running
// run pending, started ones a pending run running; nothing else moves, and an ended run keeps its
// status and end time whatever the scheduler says. The state is kept in every case.
TEST_F(SchedulerJobStorage, StatusFollowsQueuedAndStartedStatesAndNeverAnEndedRun) {
  std::vector<std::string> words = kQueuedStates;
  words.insert(words.end(), kStartedStates.begin(), kStartedStates.end());
  words.insert(words.end(), kOtherStates.begin(), kOtherStates.end());
  std::vector<std::string> statuses = {"running", "pending"};
  statuses.insert(statuses.end(), kEndedStatuses.begin(), kEndedStatuses.end());
  for (const std::string& status : statuses) {
    for (const std::string& word : words) {
      SCOPED_TRACE(status + " + " + word);
      const int64_t run = runWithStatus(status);
      const RunRecord before = loadRun(*db_, run);
      recordSchedulerState(*db_, run, {.state = word, .reason = "Resources", .nodes = "node[1-2]"});
      std::string expected = status;
      if (status == "running" && contains(kQueuedStates, word)) expected = "pending";
      if (status == "pending" && contains(kStartedStates, word)) expected = "running";
      const RunRecord after = loadRun(*db_, run);
      EXPECT_EQ(after.status, expected);
      EXPECT_EQ(after.ended_at, before.ended_at);
      ASSERT_TRUE(after.scheduler.has_value());
      EXPECT_EQ(*after.scheduler, (SchedulerJob{.kind = "slurm",
                                                .job_id = "4242",
                                                .state = word,
                                                .reason = "Resources",
                                                .nodes = "node[1-2]"}));
    }
  }
}

// A job queued, started and queued again (requeued): the status follows each time, and a run
// finished while the scheduler still says RUNNING stays finished.
TEST_F(SchedulerJobStorage, AJobQueuedStartedAndRequeuedThenFinished) {
  const int64_t run = newRun();
  recordSchedulerJob(*db_, run, "slurm", "77");
  const std::vector<std::pair<std::string, std::string>> steps = {{"PENDING", "pending"},
                                                                  {"RUNNING", "running"},
                                                                  {"REQUEUED", "pending"},
                                                                  {"PENDING", "pending"},
                                                                  {"RUNNING", "running"}};
  for (const auto& [word, status] : steps) {
    recordSchedulerState(*db_, run, {.state = word});
    EXPECT_EQ(loadRun(*db_, run).status, status) << word;
  }
  finishRun(*db_, run, "completed");
  recordSchedulerState(*db_, run, {.state = "PENDING", .reason = "BeginTime"});
  recordSchedulerState(*db_, run, {.state = "RUNNING"});
  EXPECT_EQ(loadRun(*db_, run).status, "completed");
}

// What recordSchedulerJob and recordSchedulerState stored comes back from loadRun, listRuns
// (filtered by status pending too) and findDetachedRun, detached or not; other runs have none.
TEST_F(SchedulerJobStorage, TheJobComesBackFromEveryQueryThatReadsRuns) {
  const int64_t plain = newRun("plain");
  const int64_t queued = newRun("queued");
  const int64_t detached = newRun("detached");
  markRunDetached(*db_, detached, {"/tmp/job-0", "/tmp/job-1"});
  recordSchedulerJob(*db_, queued, "slurm", "4242");
  recordSchedulerJob(*db_, detached, "slurm", "4243");
  const SchedulerJob just_submitted{.kind = "slurm", .job_id = "4243"};
  EXPECT_EQ(loadRun(*db_, detached).scheduler, just_submitted);
  EXPECT_EQ(findDetachedRun(*db_, detached)->scheduler, just_submitted);

  // A state without kind or id keeps the recorded ones.
  recordSchedulerState(*db_, queued, {.state = "PENDING", .reason = "Priority"});
  const SchedulerJob pending{
      .kind = "slurm", .job_id = "4242", .state = "PENDING", .reason = "Priority"};
  const SchedulerJob running{
      .kind = "slurm", .job_id = "4243", .state = "RUNNING", .nodes = "n[1-2]"};
  recordSchedulerState(*db_, detached, running);

  EXPECT_EQ(loadRun(*db_, plain).scheduler, std::nullopt);
  EXPECT_EQ(loadRun(*db_, queued).scheduler, pending);
  EXPECT_EQ(loadRun(*db_, detached).scheduler, running);
  EXPECT_EQ(findDetachedRun(*db_, plain)->scheduler, std::nullopt);
  EXPECT_EQ(findDetachedRun(*db_, queued)->scheduler, pending);
  const std::optional<DetachedRun> found = findDetachedRun(*db_, detached);
  EXPECT_EQ(found->scheduler, running);
  EXPECT_EQ(found->job_dirs.size(), 2u);

  const std::vector<RunRecord> all = listRuns(*db_);
  ASSERT_EQ(all.size(), 3u);
  for (const RunRecord& run : all)
    EXPECT_EQ(run.scheduler, run.id == plain    ? std::nullopt
                             : run.id == queued ? std::optional(pending)
                                                : std::optional(running))
        << run.name;
  const std::vector<RunRecord> pending_runs = listRuns(*db_, {.status = "pending"});
  ASSERT_EQ(pending_runs.size(), 1u);
  EXPECT_EQ(pending_runs[0].id, queued);
  EXPECT_EQ(pending_runs[0].scheduler, pending);
}

// A pending run is live: detached, it is never reconciled as interrupted (its job waits in the
// queue with no recorder); left by a vanished recorder without detaching, it is, as a running one.
TEST_F(SchedulerJobStorage, ADetachedPendingRunIsNotInterrupted) {
  const int64_t detached = runWithStatus("pending");
  markRunDetached(*db_, detached, {"/tmp/job-0"});
  const int64_t orphan = runWithStatus("pending");
  db_->exec("UPDATE runs SET recorder_pid = NULL WHERE id = " + std::to_string(orphan));
  EXPECT_EQ(reconcileInterruptedRuns(*db_), 1);
  EXPECT_EQ(loadRun(*db_, detached).status, "pending");
  EXPECT_EQ(loadRun(*db_, orphan).status, "interrupted");
}

// A database of the previous schema (17) with runs of every status reaches the current one: none
// has a scheduler job, the columns are NULL, and a migrated run can be handed to one.
TEST_F(SchedulerJobStorage, MigrationFromVersion17GivesOldRunsNoSchedulerJob) {
  db_.reset();
  const std::string old_path = (dir_ / "v17.db").string();
  {
    Database old(old_path, {.schema_version = 17});
    ASSERT_EQ(old.schemaVersion(), 17);
    old.exec(
        "INSERT INTO runs (id, name, spec, strategy, world_size, status, created_at, detached) "
        "VALUES (1, 'done', '{}', 'ddp', 2, 'completed', 1, 0), (2, 'live', '{}', 'ddp', 2, "
        "'running', 2, 1), (3, 'queued', '{}', 'single', 1, 'pending', 3, 0);"
        "INSERT INTO attempts (run_id, attempt, started_at) VALUES (1, 0, 1), (2, 0, 2), "
        "(3, 0, 3);"
        "INSERT INTO run_job_dirs (run_id, node_rank, job_dir) VALUES (2, 0, '/tmp/job-0');");
  }
  Database db(old_path);
  EXPECT_EQ(db.schemaVersion(), currentSchemaVersion());
  EXPECT_EQ(testing::queryInt(db,
                              "SELECT count(*) FROM runs WHERE scheduler IS NULL AND "
                              "scheduler_job_id IS NULL AND scheduler_state IS NULL AND "
                              "scheduler_reason IS NULL AND scheduler_nodes IS NULL"),
            3);
  for (const RunRecord& run : listRuns(db)) EXPECT_EQ(run.scheduler, std::nullopt) << run.name;
  EXPECT_EQ(findDetachedRun(db, 2)->scheduler, std::nullopt);
  EXPECT_EQ(findDetachedRun(db, 2)->job_dirs, std::vector<std::string>{"/tmp/job-0"});
  EXPECT_EQ(loadRun(db, 3).status, "pending");

  recordSchedulerJob(db, 2, "slurm", "9");
  recordSchedulerState(db, 2, {.state = "PENDING", .reason = "Resources"});
  EXPECT_EQ(loadRun(db, 2).status, "pending");
  EXPECT_EQ(
      loadRun(db, 2).scheduler,
      (SchedulerJob{.kind = "slurm", .job_id = "9", .state = "PENDING", .reason = "Resources"}));
  EXPECT_EQ(loadRun(db, 1).scheduler, std::nullopt);
}

}  // namespace
}  // namespace ringmaster::storage
