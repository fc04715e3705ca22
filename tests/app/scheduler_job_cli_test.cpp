// Issue 35, a run handed to Slurm on the command line: runs made in a real database file through
// the storage's own functions (createRun, recordSchedulerJob, recordSchedulerState), as the Slurm
// launch records them, then `ringmaster show` (text and --json) and `ringmaster runs` (table,
// --json, --status pending) read by the real binary: each names the job id, Slurm's state and
// reason ("pending (Slurm 4242: PENDING, Resources)"), the JSON carries `scheduler` only for such
// runs, `flight` says a pending run has no workers yet, and the scheduler's text reaches the
// terminal without its control characters.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cli_run.h"
#include "db/database.h"
#include "recorder/run_lifecycle.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::CliResult;
using testing::exitedWith;

class SchedulerJobCli : public testing::CliRunTest {
 protected:
  // `ringmaster ARGS...` run to its end, expected to succeed.
  CliResult run(std::vector<std::string> args) {
    CliResult result = runRingmaster(std::move(args), 60s);
    EXPECT_TRUE(exitedWith(result.status, 0)) << result.err;
    return result;
  }
  // A run as the Slurm launch records it: created, handed to Slurm as `job_id`, and (where
  // `job.state` is given) Slurm's state recorded.
  int64_t slurmRun(const std::string& name, const std::string& job_id,
                   const storage::SchedulerJob& job) {
    storage::Database db(dbPath());
    const int64_t id = storage::createRun(
        db, {.name = name, .spec_json = "{}", .strategy = "ddp", .world_size = 4});
    storage::recordSchedulerJob(db, id, "slurm", job_id);
    if (!job.state.empty()) storage::recordSchedulerState(db, id, job);
    return id;
  }
  int64_t plainRun() {
    storage::Database db(dbPath());
    const int64_t id = storage::createRun(
        db, {.name = "plain", .spec_json = "{}", .strategy = "ddp", .world_size = 2});
    storage::finishRun(db, id, "completed");
    return id;
  }
};

struct Expected {
  int64_t id;
  std::string status_text;  // as `show` and `runs` print the status
  json scheduler;           // null: no key
};

TEST_F(SchedulerJobCli, ShowAndRunsNameTheSlurmJobItsStateAndReason) {
  const int64_t pending = slurmRun("queued", "4242", {.state = "PENDING", .reason = "Resources"});
  const int64_t running = slurmRun("started", "4243", {.state = "RUNNING", .nodes = "node[1-2]"});
  const int64_t submitted = slurmRun("submitted", "4244", {});
  const int64_t timed_out = slurmRun("timed out", "4245", {.state = "RUNNING"});
  {
    storage::Database db(dbPath());
    storage::finishRun(db, timed_out, "failed");
    storage::recordSchedulerState(db, timed_out,
                                  {.state = "TIMEOUT", .reason = "TimeLimit", .nodes = "node1"});
  }
  const int64_t plain = plainRun();
  const std::vector<Expected> runs = {
      {pending,
       "pending (Slurm 4242: PENDING, Resources)",
       {{"kind", "slurm"},
        {"job_id", "4242"},
        {"state", "PENDING"},
        {"reason", "Resources"},
        {"nodes", ""}}},
      {running,
       "running (Slurm 4243: RUNNING)",
       {{"kind", "slurm"},
        {"job_id", "4243"},
        {"state", "RUNNING"},
        {"reason", ""},
        {"nodes", "node[1-2]"}}},
      {submitted,
       "running (Slurm 4244)",
       {{"kind", "slurm"}, {"job_id", "4244"}, {"state", ""}, {"reason", ""}, {"nodes", ""}}},
      {timed_out,
       "failed (Slurm 4245: TIMEOUT, TimeLimit)",
       {{"kind", "slurm"},
        {"job_id", "4245"},
        {"state", "TIMEOUT"},
        {"reason", "TimeLimit"},
        {"nodes", "node1"}}},
      {plain, "completed", nullptr},
  };

  const CliResult table = run({"runs"});
  const json listed = json::parse(run({"runs", "--json"}).out);
  ASSERT_EQ(listed.size(), runs.size());
  for (const Expected& expected : runs) {
    SCOPED_TRACE(expected.status_text);
    EXPECT_NE(table.out.find(expected.status_text), std::string::npos) << table.out;
    const CliResult shown = run({"show", std::to_string(expected.id)});
    EXPECT_NE(shown.out.find(fmt::format("  {}\n", expected.status_text)), std::string::npos)
        << shown.out;
    const json report = json::parse(run({"show", std::to_string(expected.id), "--json"}).out);
    const auto in_list = std::find_if(listed.begin(), listed.end(), [&](const json& entry) {
      return entry.at("id") == expected.id;
    });
    ASSERT_NE(in_list, listed.end());
    for (const json& entry : {report.at("run"), *in_list}) {
      EXPECT_EQ(entry.at("id"), expected.id);
      if (expected.scheduler.is_null())
        EXPECT_FALSE(entry.contains("scheduler")) << entry.dump();
      else
        EXPECT_EQ(entry.value("scheduler", json()), expected.scheduler);
    }
  }
  // The allocated nodes under the status of a started job.
  EXPECT_NE(run({"show", std::to_string(running)}).out.find("  nodes: node[1-2]\n"),
            std::string::npos);
  // The status filter lists the pending run, with its job.
  const json pending_only = json::parse(run({"runs", "--json", "--status", "pending"}).out);
  ASSERT_EQ(pending_only.size(), 1u);
  EXPECT_EQ(pending_only[0].at("id"), pending);
  EXPECT_EQ(pending_only[0].at("scheduler").at("reason"), "Resources");
  // A pending run has no workers yet: `flight` says so rather than that they ended.
  testing::CapturedProcess flight = ringmaster({"flight", std::to_string(pending)});
  EXPECT_TRUE(exitedWith(flight.wait(60s), 2)) << flight.err();
  EXPECT_NE(flight.err().find("pending (queued in its scheduler)"), std::string::npos)
      << flight.err();
}

// Slurm's words are text from another program: a reason or node list holding terminal escapes
// or newlines reaches `show` and `runs` as visible text, and --json as the exact string.
TEST_F(SchedulerJobCli, TheSchedulersTextReachesTheTerminalWithoutControls) {
  const std::string reason = "Res\x1b]0;pwned\x07ources\nFAKE LINE";
  const std::string nodes = "node\x1b[2J1";
  const int64_t id =
      slurmRun("hostile", "4246\r", {.state = "PENDING", .reason = reason, .nodes = nodes});
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"runs"}, std::vector<std::string>{"show", std::to_string(id)}}) {
    const std::string out = run(args).out;
    SCOPED_TRACE(args[0]);
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_EQ(out.find('\x07'), std::string::npos) << out;
    EXPECT_EQ(out.find('\r'), std::string::npos) << out;
    EXPECT_EQ(out.find("\nFAKE LINE"), std::string::npos) << out;
    EXPECT_NE(out.find("pending (Slurm 4246"), std::string::npos) << out;
  }
  const json report = json::parse(run({"show", std::to_string(id), "--json"}).out);
  EXPECT_EQ(report.at("run").at("scheduler").at("reason"), reason);
  EXPECT_EQ(report.at("run").at("scheduler").at("nodes"), nodes);
  EXPECT_EQ(report.at("run").at("scheduler").at("job_id"), "4246\r");
}

}  // namespace
}  // namespace ringmaster
