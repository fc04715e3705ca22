// Issue 37, the web API's sweeps over real HTTP: GET /api/v1/sweeps, /api/v1/sweeps/ID?by= and
// /api/v1/runs/ID/sweep on real `ringmaster sweep`s of the DDP example: a 2x2 grid (optimizer.lr x
// train.steps, the member with lr 1e30 and 12 steps failing on a NaN loss at step 2) and a sweep
// with a member the spec refuses; the runs list's `sweep` on member runs only; every refusal (bad
// id, unknown sweep, bad figure, bad limit) a JSON 4xx naming what was wrong, and the token rule on
// the new paths.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "access.h"
#include "api.h"
#include "common/captured_process.h"
#include "common/cli_run.h"
#include "query/sweeps.h"
#include "storage/storage_test_support.h"
#include "web_server.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using testing::CapturedProcess;
using testing::CliResult;
using web::WebServer;
using web::WebServerOptions;

const std::string kRingmaster = testing::ringmasterBinary();
const std::string kSpec = testing::examplePath("ddp_mlp");

// The grid in plan order (the first axis turning slowest): lr 0.01 learns over 12 steps; lr 1e30
// makes the loss NaN at step 2, so only its 12-step member fails (a 1-step run ends before any
// update).
struct Member {
  double lr;
  int steps;
};
const std::vector<Member> kGrid = {{0.01, 1}, {0.01, 12}, {1e30, 1}, {1e30, 12}};
constexpr char kTwoRanks[] = R"(launch.hosts=[{"host": "localhost", "ranks": 2}])";
constexpr int kLearns = 1;  // the member whose loss goes down
constexpr int kFails = 3;   // the member whose run fails

class WebSweepsTest : public ::testing::Test {
 protected:
  // Two real sweeps one after the other, and a run of no sweep between them: the grid, then a sweep
  // whose first member's batch size of 0 the spec refuses.
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / fmt::format("ringmaster_web_sweeps_{}", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    sweepOnce({"--name", "grid", "--axis", "optimizer.lr=0.01,1e30", "--axis", "train.steps=1,12"});
    plain_run_id_ = runOnce();
    sweepOnce({"--name", "refusing", "--axis", "train.batch_size=0,64", "--set", "train.steps=1"});
    storage::Database db(dbPath(), {.read_only = true});
    sweep_id_ = queryInt(db, "SELECT min(id) FROM sweeps");
    refusing_id_ = queryInt(db, "SELECT max(id) FROM sweeps");
    for (const storage::SweepMember& member : storage::loadSweep(db, sweep_id_).members)
      run_ids_.push_back(member.run_id.value_or(0));
    for (const storage::SweepMember& member : storage::loadSweep(db, refusing_id_).members)
      if (member.run_id) refusing_run_id_ = *member.run_id;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // A real `ringmaster sweep` of the DDP example on 2 ranks, one member at a time; it exits 1, a
  // member's run failing or a member refused.
  static void sweepOnce(const std::vector<std::string>& options) {
    std::vector<std::string> args = {"--db", dbPath(), "sweep", kSpec, "-q", "--set", kTwoRanks};
    args.insert(args.end(), options.begin(), options.end());
    const CliResult sweep = testing::runToEnd(CapturedProcess(kRingmaster, args), 180s);
    EXPECT_EQ(sweep.status.exit_code, 1) << sweep.status.describe() << "\n"
                                         << sweep.out << sweep.err;
  }

  // A real 1-step run of the DDP example on 2 ranks; its run id.
  static int64_t runOnce() {
    const CliResult run = testing::runToEnd(
        CapturedProcess(kRingmaster, {"--db", dbPath(), "run", kSpec, "-q", "--set", kTwoRanks,
                                      "--set", "train.steps=1"}),
        120s);
    EXPECT_TRUE(run.status.ok()) << run.status.describe() << "\n" << run.out << run.err;
    storage::Database db(dbPath(), {.read_only = true});
    return queryInt(db, "SELECT max(id) FROM runs");
  }

  static std::string dbPath() { return (dir_ / "runs.db").string(); }

  void start(std::optional<std::string> token = std::nullopt) {
    WebServerOptions o;
    o.db_path = dbPath();
    o.listen = {"127.0.0.1", 0};
    o.token = token;
    server_ = std::make_unique<WebServer>(std::move(o));
    server_->start();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(10, 0);
  }
  void TearDown() override {
    if (server_) server_->stop();
  }

  json getJson(const std::string& path) {
    httplib::Result res = client_->Get(path.c_str());
    EXPECT_TRUE(res) << path;
    if (!res) return json();
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json") << path;
    return json::parse(res->body);
  }
  // A refusal: `status`, JSON, its message starting with `named`.
  void expectError(const std::string& path, int status, const std::string& named) {
    SCOPED_TRACE(path);
    httplib::Result res = client_->Get(path.c_str());
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status) << res->body;
    const json body = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << res->body;
    EXPECT_EQ(body["error"]["status"], status);
    const std::string message = body["error"]["message"];
    EXPECT_TRUE(message.starts_with(named)) << "'" << message << "' should start with " << named;
  }
  std::string sweepPath(const std::string& rest = "") {
    return fmt::format("/api/v1/sweeps/{}{}", sweep_id_, rest);
  }

  static inline fs::path dir_;
  static inline int64_t sweep_id_ = 0, refusing_id_ = 0, plain_run_id_ = 0, refusing_run_id_ = 0;
  static inline std::vector<int64_t> run_ids_;  // the grid's runs, in plan order
  std::unique_ptr<WebServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(WebSweepsTest, TheListHasEverySweepNewestFirstWithItsMembersCounted) {
  start();
  const json sweeps = getJson("/api/v1/sweeps")["sweeps"];
  ASSERT_EQ(sweeps.size(), 2u) << sweeps.dump(2);
  EXPECT_EQ(sweeps[0]["id"], refusing_id_);
  EXPECT_EQ(sweeps[0]["name"], "refusing");
  EXPECT_EQ(sweeps[0]["status"], "completed");
  EXPECT_EQ(sweeps[0]["members"], 2);
  EXPECT_EQ(sweeps[0]["ended"], 2);  // the refused member, and the run that completed
  const json& grid = sweeps[1];
  EXPECT_EQ(grid["id"], sweep_id_);
  EXPECT_EQ(grid["name"], "grid");
  EXPECT_EQ(grid["spec_path"], kSpec);
  EXPECT_EQ(grid["status"], "completed");
  EXPECT_EQ(grid["members"], 4);
  EXPECT_EQ(grid["ended"], 4);
  EXPECT_GT(grid["ended_at"].get<double>(), grid["created_at"].get<double>());
  EXPECT_LT(grid["ended_at"].get<double>(), sweeps[0]["created_at"].get<double>());
  const json newest = getJson("/api/v1/sweeps?limit=1")["sweeps"];
  ASSERT_EQ(newest.size(), 1u);
  EXPECT_EQ(newest[0]["id"], refusing_id_);
}

TEST_F(WebSweepsTest, ASweepsReportHasEveryMemberItsAxesAndTheBestRunByTheChosenFigure) {
  start();
  const json report = getJson(sweepPath());
  EXPECT_EQ(report["sweep"]["fields"], json({"optimizer.lr", "train.steps"}));
  ASSERT_EQ(report["members"].size(), kGrid.size()) << report.dump(2);
  for (size_t i = 0; i < kGrid.size(); ++i) {
    SCOPED_TRACE(i);
    const json& member = report["members"][i];
    EXPECT_EQ(member["position"], i);
    EXPECT_EQ(member["values"]["optimizer.lr"], kGrid[i].lr);
    EXPECT_EQ(member["values"]["train.steps"], kGrid[i].steps);
    EXPECT_EQ(member["state"], "started");
    EXPECT_EQ(member["run"], run_ids_[i]);
    EXPECT_EQ(member["status"], static_cast<int>(i) == kFails ? "failed" : "completed");
    EXPECT_EQ(member["error"].is_string(), static_cast<int>(i) == kFails) << member["error"];
    EXPECT_TRUE(member["figures"]["final_loss"].is_number());
  }
  EXPECT_NE(report["members"][kFails]["error"].get<std::string>().find("loss became"),
            std::string::npos);
  EXPECT_EQ(report["runs"], json(run_ids_));
  // An axis per swept field, then per run figure, a value per run.
  ASSERT_GE(report["axes"].size(), 3u);
  EXPECT_EQ(report["axes"][0]["key"], "optimizer.lr");
  EXPECT_EQ(report["axes"][1]["key"], "train.steps");
  for (const json& axis : report["axes"]) EXPECT_EQ(axis["values"].size(), kGrid.size());
  // By final loss (the default), the member that learned; by final step (lower is better), one of
  // those that stopped at step 1, the data's other answer.
  const json& best = report["best"];
  EXPECT_EQ(best["figure"], "final_loss");
  EXPECT_FALSE(best["higher_is_better"].get<bool>());
  EXPECT_EQ(best["run"], run_ids_[kLearns]);
  EXPECT_EQ(best["position"], kLearns);
  EXPECT_EQ(best["value"], report["members"][kLearns]["figures"]["final_loss"]);
  const json by_step = getJson(sweepPath("?by=final_step"))["best"];
  EXPECT_EQ(by_step["figure"], "final_step");
  EXPECT_NE(by_step["run"], run_ids_[kLearns]);
  EXPECT_EQ(by_step["value"], 1);
  const json by_rate = getJson(sweepPath("?by=samples_per_second"))["best"];
  EXPECT_TRUE(by_rate["higher_is_better"].get<bool>());
}

TEST_F(WebSweepsTest, ARefusedMemberKeepsItsErrorAndAFigureNoRunHasNamesNoBest) {
  start();
  const json report = getJson(fmt::format("/api/v1/sweeps/{}", refusing_id_));
  EXPECT_EQ(report["sweep"]["fields"], json({"train.batch_size"}));
  ASSERT_EQ(report["members"].size(), 2u);
  const json& refused = report["members"][0];
  EXPECT_EQ(refused["state"], "refused");
  EXPECT_EQ(refused["values"]["train.batch_size"], 0);
  EXPECT_NE(refused["error"].get<std::string>().find("train.batch_size"), std::string::npos)
      << refused["error"];
  EXPECT_TRUE(refused["run"].is_null());
  EXPECT_TRUE(refused["figures"].empty());
  EXPECT_EQ(report["members"][1]["state"], "started");
  EXPECT_EQ(report["members"][1]["run"], refusing_run_id_);
  EXPECT_EQ(report["runs"], json({refusing_run_id_}));
  EXPECT_EQ(report["best"]["run"], refusing_run_id_);
  // A DDP run has no pipeline bubble: no best by it.
  EXPECT_TRUE(
      getJson(fmt::format("/api/v1/sweeps/{}?by=bubble_fraction", refusing_id_))["best"].is_null());
}

TEST_F(WebSweepsTest, MemberRunsNameTheirSweepInTheRunsListAndOnTheStream) {
  start();
  std::set<int64_t> seen;
  const json listed = getJson("/api/v1/runs");
  for (const json& run : listed["runs"]) {
    const int64_t id = run["id"];
    seen.insert(id);
    if (id == plain_run_id_) {
      EXPECT_FALSE(run.contains("sweep")) << run.dump();
      continue;
    }
    if (id == refusing_run_id_) {
      EXPECT_EQ(run["sweep"], json({{"id", refusing_id_}, {"position", 1}}));
      continue;
    }
    const auto at = std::find(run_ids_.begin(), run_ids_.end(), id);
    ASSERT_NE(at, run_ids_.end()) << id;
    EXPECT_EQ(run["sweep"], json({{"id", sweep_id_}, {"position", at - run_ids_.begin()}}));
  }
  EXPECT_EQ(seen.size(), run_ids_.size() + 2);
  // The run page asks for its run's sweep.
  EXPECT_EQ(getJson(fmt::format("/api/v1/runs/{}/sweep", run_ids_[1]))["sweep"],
            json({{"id", sweep_id_}, {"name", "grid"}, {"position", 1}, {"members", 4}}));
  EXPECT_TRUE(getJson(fmt::format("/api/v1/runs/{}/sweep", plain_run_id_))["sweep"].is_null());
  // The stream's `runs` event carries the same entries.
  storage::Database db(dbPath(), {.read_only = true});
  EXPECT_EQ(web::runListEntry(db, run_ids_[2])["sweep"]["position"], 2);
  EXPECT_FALSE(web::runListEntry(db, plain_run_id_).contains("sweep"));
}

TEST_F(WebSweepsTest, BadIdsUnknownSweepsAndBadFiguresAreRefusedByName) {
  start();
  expectError("/api/v1/sweeps?limit=0", 400, "limit");
  expectError("/api/v1/sweeps/x", 400, "sweep id");
  expectError("/api/v1/sweeps/0", 400, "sweep id");
  expectError("/api/v1/sweeps/-3", 400, "sweep id");
  expectError("/api/v1/sweeps/999", 404, "no sweep 999");
  expectError(sweepPath("?by=nope"), 400, "by");
  expectError(sweepPath("?by=mean_wait_ms"), 400, "by");  // a rank's figure, not a run's
  expectError(sweepPath("?by="), 400, "by");
  expectError(sweepPath("/members"), 404, "no such API path");
}

TEST_F(WebSweepsTest, WithATokenTheSweepPathsNeedIt) {
  const std::string token = web::generateToken();
  start(token);
  for (const std::string& path : {std::string("/api/v1/sweeps"), sweepPath()}) {
    SCOPED_TRACE(path);
    httplib::Result missing = client_->Get(path.c_str());
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 401);
    httplib::Result bearer = client_->Get(path.c_str(), {{"Authorization", "Bearer " + token}});
    ASSERT_TRUE(bearer);
    EXPECT_EQ(bearer->status, 200);
  }
}

}  // namespace
}  // namespace ringmaster
