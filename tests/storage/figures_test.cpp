// Issue 33, one name per figure: the table of figures (query/figures.h) has one entry for every
// number of the run report's JSON, at the run and at each rank, and no name twice; the axes of a
// comparison (query/compare_axes.h) read any run figure or spec field, numbers as numbers and the
// rest as categories.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "query/compare_axes.h"
#include "query/figures.h"
#include "query/run_report.h"

namespace ringmaster::storage {
namespace {

using nlohmann::json;

// A report with every optional figure set, so that each figure's key holds a number.
RunReport everyFigureSet() {
  RunReport report;
  RunSummary& s = report.summary;
  s.run = {.id = 1, .name = "r", .strategy = "pipeline", .world_size = 1, .status = "completed"};
  s.final_loss = s.final_accuracy = s.tokens_per_second = s.mfu = s.lr = s.loss_scale = 0.5;
  s.skipped_steps = 1;
  s.bubble_fraction = 0.25;
  RankSummary rank{.tokens_per_second = 1, .mfu = 0.5, .lr = 0.1, .loss_scale = 2};
  rank.skipped_steps = 1;
  s.ranks = {rank};
  RankReport row{.figures = rank};
  row.record = RankRecord{.host = "h", .device = "cpu", .pid = 7};
  row.record->status = "ok";
  row.comm.wait_ms = row.comm.transfer_ms = row.comm.mean_wait_ms = 1;
  row.comm.peers_mean_wait_ms = 1;
  row.estimated_memory = 1e6;
  row.waiting_on = "nothing";
  report.ranks = {row};
  return report;
}

// The keys that identify rather than measure.
const std::set<std::string> kIdentities = {"version",    "rank",       "pid",        "id",
                                           "world_size", "created_at", "started_at", "ended_at"};

std::set<std::string> numberKeys(const json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items())
    if (value.is_number() && !kIdentities.contains(key)) keys.insert(key);
  return keys;
}

TEST(FigureTable, EveryNumberOfTheRunReportHasOneEntryAndEveryEntryIsInTheReport) {
  const json report = toJson(everyFigureSet());
  std::set<std::string> run_keys = numberKeys(report);
  run_keys.merge(numberKeys(report["run"]));  // duration_s
  const std::set<std::string> rank_keys = numberKeys(report["ranks"][0]);
  std::set<std::string> run_figures, rank_figures;
  for (const Figure& figure : figureTable()) {
    if (isRunFigure(figure)) run_figures.emplace(figure.id);
    if (isRankFigure(figure)) rank_figures.emplace(figure.id);
  }
  EXPECT_EQ(run_figures, run_keys);
  EXPECT_EQ(rank_figures, rank_keys);
}

TEST(FigureTable, NoIdOrNameTwiceAndEachSaysWhatItIs) {
  std::set<std::string_view> ids, names;
  for (const Figure& figure : figureTable()) {
    SCOPED_TRACE(std::string(figure.id));
    EXPECT_TRUE(ids.insert(figure.id).second) << "id twice";
    EXPECT_TRUE(names.insert(figure.name).second) << "name twice: " << figure.name;
    EXPECT_FALSE(figure.name.empty());
    EXPECT_FALSE(figure.description.empty());
    EXPECT_EQ(findFigure(figure.id), &figure);
    if (figure.kind == FigureKind::kFraction) {
      EXPECT_EQ(figure.unit, "%");
    }
  }
  EXPECT_EQ(findFigure("no_such_figure"), nullptr);
  EXPECT_THROW(figure("no_such_figure"), Error);
  // The example: one name for the share of step time spent in exposed communication.
  EXPECT_EQ(figure("comm_share").name, "exposed comm share");
}

json reportWith(double final_loss, const json& spec) {
  return {{"final_loss", final_loss}, {"run", {{"duration_s", 3.0}}}, {"spec", spec}};
}

TEST(CompareAxes, AFigureAndANumericSpecFieldAreNumbersOthersAreCategories) {
  const std::vector<json> reports = {
      reportWith(0.5, {{"optimizer", {{"lr", 0.01}, {"kind", "sgd"}}}, {"mesh", {2, 2}}}),
      reportWith(0.25, {{"optimizer", {{"lr", 0.001}, {"kind", "adamw"}}}, {"mesh", {4}}}),
      reportWith(0.75, {{"optimizer", {{"lr", 0.01}, {"kind", "adamw"}}}})};
  const ComparisonAxis loss = comparisonAxis(reports, "final_loss");
  EXPECT_TRUE(loss.is_figure && loss.numeric);
  EXPECT_EQ(loss.name, "final loss");
  ASSERT_EQ(loss.points.size(), 3u);
  EXPECT_EQ(loss.points[1].number, 0.25);
  EXPECT_EQ(comparisonAxis(reports, "duration_s").points[2].number, 3.0);

  const ComparisonAxis lr = comparisonAxis(reports, "optimizer.lr");
  EXPECT_TRUE(lr.numeric && !lr.is_figure);
  EXPECT_EQ(lr.categories, (std::vector<std::string>{"0.001", "0.01"}));  // by value
  EXPECT_EQ(lr.points[0].category, 1);
  EXPECT_EQ(lr.points[1].category, 0);
  EXPECT_EQ(lr.points[2].category, 1);  // the same value, the same group

  const ComparisonAxis kind = comparisonAxis(reports, "optimizer.kind");
  EXPECT_FALSE(kind.numeric);
  EXPECT_EQ(kind.categories, (std::vector<std::string>{"adamw", "sgd"}));
  EXPECT_FALSE(kind.points[0].number);
  EXPECT_EQ(kind.points[0].category, 1);

  const ComparisonAxis mesh = comparisonAxis(reports, "mesh");  // an array of scalars: one field
  EXPECT_FALSE(mesh.numeric);
  EXPECT_EQ(mesh.points[0].text, "[2,2]");
  EXPECT_EQ(mesh.points[2].category, -1);  // the run has none
  EXPECT_TRUE(toJson(mesh)["values"][2].is_null());

  const AxisChoices choices = axisChoices(reports);
  EXPECT_EQ(choices.differing_fields, 3u);
  EXPECT_EQ(std::vector<std::string>(choices.spec_fields.begin(), choices.spec_fields.end()),
            (std::vector<std::string>{"mesh", "optimizer.kind", "optimizer.lr"}));
  EXPECT_NE(std::find(choices.figures.begin(), choices.figures.end(), "comm_share"),
            choices.figures.end());
}

TEST(CompareAxes, AnUnknownAxisIsRefusedNamingTheChoices) {
  const std::vector<json> reports = {reportWith(1, {{"optimizer", {{"lr", 0.1}}}})};
  try {
    comparisonAxis(reports, "optimizer.lrr");
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    const std::string message = error.what();
    EXPECT_NE(message.find("'optimizer.lrr'"), std::string::npos) << message;
    EXPECT_NE(message.find("final_loss"), std::string::npos) << message;
    EXPECT_NE(message.find("optimizer.lr"), std::string::npos) << message;
  }
  // A rank-only figure is no axis of a run.
  EXPECT_THROW(comparisonAxis(reports, "mean_compute_ms"), Error);
}

}  // namespace
}  // namespace ringmaster::storage
