// Issue 37, sweeps in storage, on real runs of this build's `ringmaster run`: a sweep and its
// members round trip (planned, started with its run, refused with its error, not started), the
// report gives each member its swept values and its run's figures as the run's own report has
// them, the best run by a figure is the one the runs' figures say (lowest loss, highest rate) with
// its spec differences, a deleted run leaves its member without a run, a dead driver's sweep is
// found interrupted, and bad input is refused by name.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cli_run.h"
#include "core/error.h"
#include "db/database.h"
#include "query/run_report.h"
#include "query/sweep_report.h"
#include "query/sweeps.h"
#include "recorder/run_edits.h"
#include "recorder/sweep_records.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::exitedWith;

class SweepStorage : public testing::CliRunTest {
 protected:
  // A real DDP run with these overrides; its id.
  int64_t record(const std::vector<std::string>& overrides) {
    std::vector<std::string> args = {"run", testing::examplePath("ddp_mlp"), "--json", "--set",
                                     "train.steps=6"};
    for (const std::string& each : overrides) args.insert(args.end(), {"--set", each});
    const testing::CliResult run = runRingmaster(args);
    EXPECT_TRUE(exitedWith(run.status, 0)) << run.err;
    return json::parse(run.out).at("run").at("id").get<int64_t>();
  }

  storage::NewSweep newSweep(std::vector<std::string> members) {
    return {.name = "lr",
            .spec_path = testing::examplePath("ddp_mlp"),
            .spec_json = testing::exampleSpec("ddp_mlp").dump(),
            .plan_json =
                json{{"method", "grid"},
                     {"axes", {{{"field", "optimizer.lr"}, {"values", {0.3, 0.001, 0.03, 1e-5}}}}}}
                    .dump(),
            .parallel = 1,
            .member_overrides_json = std::move(members),
            .created_at = 1000};
  }
};

TEST_F(SweepStorage, MembersRoundTripAndTheReportRanksTheRealRunsByTheirFigures) {
  const std::vector<double> rates = {0.3, 0.001, 0.03};
  std::vector<int64_t> runs;
  for (double lr : rates) runs.push_back(record({fmt::format("optimizer.lr={}", lr)}));

  storage::Database db(dbPath());
  std::vector<std::string> members;
  for (double lr : rates) members.push_back(json{{"optimizer.lr", lr}}.dump());
  members.push_back(json{{"optimizer.lr", -1}}.dump());
  members.push_back(json{{"optimizer.lr", 1e-5}}.dump());
  const int64_t sweep = storage::createSweep(db, newSweep(members));
  for (int i = 0; i < 3; ++i) storage::recordSweepMemberStarted(db, sweep, i, runs[i]);
  storage::recordSweepMemberRefused(db, sweep, 3, "optimizer.lr: must be positive");
  EXPECT_EQ(storage::recordSweepMembersNotStarted(db, sweep), 1);
  storage::finishSweep(db, sweep, "cancelled", 2000);
  storage::finishSweep(db, sweep, "completed", 3000);  // an ended sweep stays as it ended
  EXPECT_THROW(storage::recordSweepMemberStarted(db, sweep, 4, runs[0]), Error);

  const storage::SweepRecord loaded = storage::loadSweep(db, sweep);
  EXPECT_EQ(loaded.status, "cancelled");
  EXPECT_EQ(loaded.ended_at, 2000);
  ASSERT_EQ(loaded.members.size(), 5u);
  EXPECT_EQ(loaded.membersEnded(), 5);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(loaded.members[i].state, "started");
    EXPECT_EQ(loaded.members[i].run_id, runs[i]);
    EXPECT_EQ(loaded.members[i].run_status, "completed");
    EXPECT_EQ(storage::sweepOfRun(db, runs[i])->sweep_id, sweep);
    EXPECT_EQ(storage::sweepOfRun(db, runs[i])->position, i);
  }
  EXPECT_EQ(loaded.members[3].state, "refused");
  EXPECT_EQ(loaded.members[3].error, "optimizer.lr: must be positive");
  EXPECT_EQ(loaded.members[4].state, "not_started");
  EXPECT_EQ(storage::listSweeps(db).size(), 1u);

  // Each member's figures are its run's own report's; the best is the runs' lowest final loss.
  const json report = storage::sweepReport(db, sweep, 4000);
  EXPECT_EQ(report["sweep"]["fields"], json({"optimizer.lr"}));
  EXPECT_EQ(report["runs"], json(runs));
  double lowest_loss = std::numeric_limits<double>::infinity();
  double highest_rate = 0;
  int64_t lowest_run = 0, fastest_run = 0;
  for (int i = 0; i < 3; ++i) {
    const json own = storage::toJson(storage::buildRunReport(db, runs[i], 4000));
    const json& figures = report["members"][i]["figures"];
    EXPECT_EQ(report["members"][i]["values"]["optimizer.lr"], rates[i]);
    EXPECT_DOUBLE_EQ(figures["final_loss"].get<double>(), own["final_loss"].get<double>());
    EXPECT_DOUBLE_EQ(figures["samples_per_second"].get<double>(),
                     own["samples_per_second"].get<double>());
    if (own["final_loss"].get<double>() < lowest_loss)
      lowest_loss = own["final_loss"].get<double>(), lowest_run = runs[i];
    if (own["samples_per_second"].get<double>() > highest_rate)
      highest_rate = own["samples_per_second"].get<double>(), fastest_run = runs[i];
  }
  EXPECT_EQ(report["members"][3]["run"], nullptr);
  EXPECT_EQ(report["members"][3]["figures"], json::object());
  ASSERT_TRUE(report["best"].is_object());
  EXPECT_EQ(report["best"]["run"], lowest_run);
  EXPECT_EQ(report["best"]["higher_is_better"], false);
  // Its difference from the others is the swept field: its value and the two others'.
  bool lr_differs = false;
  for (const json& difference : report["best"]["differences"]) {
    if (difference["field"] != "optimizer.lr") continue;
    lr_differs = true;
    EXPECT_EQ(difference["others"].size(), 2u);
  }
  EXPECT_TRUE(lr_differs) << report["best"].dump();
  const json by_rate = storage::sweepReport(db, sweep, 4000, "samples_per_second");
  EXPECT_EQ(by_rate["best"]["run"], fastest_run);
  EXPECT_EQ(by_rate["best"]["higher_is_better"], true);
  // An axis per swept field, with the members' values in the runs' order.
  EXPECT_EQ(report["axes"][0]["key"], "optimizer.lr");
  EXPECT_EQ(report["axes"][0]["values"], json(rates));

  // A deleted run leaves its member, without a run.
  storage::deleteRun(db, runs[1]);
  const storage::SweepRecord after = storage::loadSweep(db, sweep);
  EXPECT_EQ(after.members[1].state, "started");
  EXPECT_FALSE(after.members[1].run_id.has_value());
  EXPECT_EQ(storage::sweepReport(db, sweep, 4000)["runs"], json({runs[0], runs[2]}));
}

TEST_F(SweepStorage, ADeadDriversSweepIsInterruptedAndBadInputIsRefusedByName) {
  storage::Database db(dbPath());
  const int64_t sweep = storage::createSweep(db, newSweep({"{}", "{}"}));
  // No driver recorded yet: left alone.
  EXPECT_TRUE(
      storage::reconcileInterruptedSweeps(db, 5, [](const auto&) { return false; }).empty());
  storage::recordSweepDriver(db, sweep,
                             {.pid = 4242, .start_time = 7, .boot_id = "b", .host = "h"});
  EXPECT_TRUE(storage::reconcileInterruptedSweeps(db, 5, [](const auto&) { return true; }).empty());
  storage::SweepDriver seen;
  EXPECT_EQ(storage::reconcileInterruptedSweeps(db, 6,
                                                [&](const storage::SweepDriver& driver) {
                                                  seen = driver;
                                                  return false;
                                                }),
            std::vector<int64_t>{sweep});
  EXPECT_EQ(seen.pid, 4242);
  EXPECT_EQ(seen.start_time, 7);
  EXPECT_EQ(seen.boot_id, "b");
  const storage::SweepRecord loaded = storage::loadSweep(db, sweep);
  EXPECT_EQ(loaded.status, "interrupted");
  EXPECT_EQ(loaded.members[0].state, "not_started");

  auto message = [](const auto& call) {
    try {
      call();
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { storage::createSweep(db, newSweep({})); }).find("no members"),
            std::string::npos);
  EXPECT_NE(message([&] { (void)storage::loadSweep(db, 99); }).find("no sweep 99"),
            std::string::npos);
  const std::string figure = message([&] { (void)storage::sweepReport(db, sweep, 0, "rank"); });
  EXPECT_NE(figure.find("'rank' is not a run figure"), std::string::npos) << figure;
  EXPECT_NE(figure.find("samples_per_second"), std::string::npos) << figure;
  EXPECT_TRUE(storage::sweepReport(db, sweep, 0)["best"].is_null());
}

}  // namespace
}  // namespace ringmaster
