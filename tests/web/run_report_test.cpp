// Issue 31, one run report: `ringmaster show --json`, GET /api/v1/runs/ID and the desktop's run
// snapshot of the same run are equal field by field, on four real runs recorded once for the
// suite: DDP on 3 ranks, a pipeline, a run restarted after one of its workers was killed with
// SIGKILL (launch.max_restarts), and a program job (the user's PyTorch script; skipped where
// Debian's python3-torch is missing).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/proc_files.h"
#include "common/python_torch.h"
#include "common/test_paths.h"
#include "data/run_snapshot.h"
#include "db/database.h"
#include "query/run_report.h"
#include "storage/storage_test_support.h"
#include "web_server.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::CapturedProcess;
using testing::exampleSpec;
using web::WebServer;
using web::WebServerOptions;

const std::string kRingmaster = testing::ringmasterBinary();

class RunReportEverywhere : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / fmt::format("ringmaster_report_{}", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    json ddp = exampleSpec("ddp_mlp");
    ddp["launch"]["hosts"] = json::array({{{"host", "localhost"}, {"ranks", 3}}});
    ddp["train"]["steps"] = 12;
    ddp["telemetry"]["every_steps"] = 1;
    ASSERT_NO_FATAL_FAILURE(record("ddp", ddp));
    json pipeline = exampleSpec("pipeline_mlp");
    pipeline["train"]["steps"] = 6;
    ASSERT_NO_FATAL_FAILURE(record("pipeline", pipeline));
    ASSERT_NO_FATAL_FAILURE(recordRestarted());
    if (testing::pythonTorchUnavailable(RINGMASTER_PYTHON_TORCH).empty())
      ASSERT_NO_FATAL_FAILURE(record("program", programSpec()));
  }
  static void TearDownTestSuite() {
    for (pid_t pid : testing::processesOfRunsUnder(dir_)) ::kill(pid, SIGKILL);
    fs::remove_all(dir_);
  }

  static std::string dbPath() { return (dir_ / "runs.db").string(); }

  static std::string writeSpec(const std::string& name, json spec) {
    spec["name"] = name;
    const std::string path = (dir_ / (name + ".json")).string();
    std::ofstream(path) << spec.dump(2);
    return path;
  }
  static int64_t latestRun() {
    storage::Database db(dbPath());
    return storage::testing::queryInt(db, "SELECT max(id) FROM runs");
  }
  static void record(const std::string& name, const json& spec) {
    CapturedProcess run(kRingmaster, {"--db", dbPath(), "run", writeSpec(name, spec), "-q"});
    const ExitStatus status = run.wait(240s);
    ASSERT_TRUE(status.ok()) << name << ": " << status.describe() << "\n" << run.err();
    runs_[name] = latestRun();
  }

  // The user's script on 2 ranks, a small model: what matters is what it reports.
  static json programSpec() {
    return {{"program",
             {{"python", RINGMASTER_PYTHON_TORCH},
              {"script", std::string(testSourceDir()) + "/resources/examples/torch_ddp.py"},
              {"args", {"--steps", "4", "--width", "64"}},
              {"steps", 4}}},
            {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", 2}}}}, {"timeout_s", 120}}}};
  }

  // DDP on 3 ranks with a checkpoint every 5 steps, slow enough (a wider model, larger batches)
  // that rank 2 is killed between the first checkpoint and the last step; attempt 1 resumes.
  static void recordRestarted() {
    json spec = exampleSpec("ddp_mlp");
    spec["launch"]["hosts"] = json::array({{{"host", "localhost"}, {"ranks", 3}}});
    spec["launch"]["max_restarts"] = 1;
    spec["model"]["layers"] = json::array({784, 1024, 1024, 10});
    spec["train"]["steps"] = 40;
    spec["train"]["batch_size"] = 256;
    spec["telemetry"]["every_steps"] = 1;
    spec["checkpoint"] = {{"dir", (dir_ / "checkpoints").string()}, {"every_steps", 5}};
    CapturedProcess run(kRingmaster, {"--db", dbPath(), "run", writeSpec("restarted", spec), "-q"});
    const fs::path first = dir_ / "checkpoints" / "step_00000005";
    const auto deadline = std::chrono::steady_clock::now() + 180s;
    bool killed = false;
    while (!killed && std::chrono::steady_clock::now() < deadline && !run.status()) {
      run.readFor(50ms);
      if (!fs::exists(first) || !fs::exists(dbPath())) continue;
      storage::Database db(dbPath());
      const int64_t pid =
          storage::testing::queryInt(db,
                                     "SELECT pid FROM ranks WHERE run_id = (SELECT max(id) FROM "
                                     "runs) AND attempt = 0 AND rank = 2");
      if (pid > 0) killed = ::kill(static_cast<pid_t>(pid), SIGKILL) == 0;
    }
    ASSERT_TRUE(killed) << "the run ended before a worker could be killed:\n" << run.err();
    const ExitStatus status = run.wait(240s);
    ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.err();
    runs_["restarted"] = latestRun();
  }

  static json showJson(int64_t run_id) {
    CapturedProcess show(kRingmaster, {"--db", dbPath(), "show", std::to_string(run_id), "--json"});
    const ExitStatus status = show.wait(60s);
    EXPECT_TRUE(status.ok()) << status.describe() << show.err();
    return json::parse(show.out());
  }
  static json webJson(int64_t run_id) {
    WebServerOptions options;
    options.db_path = dbPath();
    options.listen = {"127.0.0.1", 0};
    WebServer server(std::move(options));
    server.start();
    httplib::Client client("127.0.0.1", server.port());
    client.set_read_timeout(30, 0);
    const httplib::Result res = client.Get(fmt::format("/api/v1/runs/{}", run_id));
    server.stop();
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    return res ? json::parse(res->body) : json();
  }
  static json desktopJson(int64_t run_id) {
    return storage::toJson(ui::loadRunSnapshot(dbPath(), run_id, {}).report);
  }

  static inline fs::path dir_;
  static inline std::map<std::string, int64_t> runs_;
};

// Every leaf of `expected` and `actual`, compared one by one so that a difference names its field.
void expectSameFields(const json& expected, const json& actual, const std::string& what) {
  const json left = expected.flatten(), right = actual.flatten();
  for (const auto& [field, value] : left.items()) {
    ASSERT_TRUE(right.contains(field)) << what << " lacks " << field;
    EXPECT_EQ(value, right[field]) << what << ": " << field;
  }
  for (const auto& [field, value] : right.items())
    EXPECT_TRUE(left.contains(field)) << what << " has " << field << " that show --json lacks";
}

TEST_P(RunReportEverywhere, ShowTheWebApiAndTheDesktopSnapshotAgreeFieldByField) {
  const auto found = runs_.find(GetParam());
  if (found == runs_.end())
    GTEST_SKIP() << testing::pythonTorchUnavailable(RINGMASTER_PYTHON_TORCH);
  const int64_t run_id = found->second;
  const json shown = showJson(run_id);
  ASSERT_EQ(shown["version"], storage::kRunReportVersion);
  ASSERT_EQ(shown["run"]["id"], run_id);
  EXPECT_NE(shown["run"]["status"], "running");
  expectSameFields(shown, webJson(run_id), "GET /api/v1/runs/ID");
  expectSameFields(shown, desktopJson(run_id), "the desktop's snapshot");

  // What makes each kind of run the kind it is, so the comparison covers those fields.
  ASSERT_FALSE(shown["ranks"].empty());
  for (const json& rank : shown["ranks"]) EXPECT_GT(rank["last_step"].get<int64_t>(), 0);
  if (GetParam() == "pipeline") EXPECT_TRUE(shown["bubble_fraction"].is_number());
  if (GetParam() == "program") EXPECT_EQ(shown["program"]["steps"], 4);
  if (GetParam() == "restarted") {
    ASSERT_EQ(shown["attempts"].size(), 2u);
    EXPECT_FALSE(shown["attempts"][0]["error"].is_null());
    const json& rolled = shown["attempts"][1]["rolled_back"];
    if (!rolled.is_null()) EXPECT_LE(rolled[0].get<int64_t>(), rolled[1].get<int64_t>());
  }
}

INSTANTIATE_TEST_SUITE_P(Runs, RunReportEverywhere,
                         ::testing::Values("ddp", "pipeline", "restarted", "program"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ringmaster
