// Issue 33, "compare can put any figure on either axis": `ringmaster compare RUNS --x KEY --y KEY`
// on three real runs of different learning rates and optimizers prints one point per run, for
// every run figure of the table of figures and for spec fields, numbers as numbers and the rest
// as categories, each value the one `show --json` reports; an unknown axis is refused naming the
// choices. Every process is reaped by CapturedProcess.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "query/figures.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::CapturedProcess;
using testing::CliResult;
using testing::exitedWith;

const std::string kRingmaster = testing::ringmasterBinary();

class CompareAxesCli : public storage::testing::StorageTest {
 protected:
  CliResult ringmaster(std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", (dir_ / "runs.db").string()});
    return testing::runToEnd(CapturedProcess(kRingmaster, args), 120s);
  }
  // Runs 1, 2 and 3 of the single-rank example: lr 0.01 (adamw), 0.001 (adamw), 0.05 (sgd); the
  // first `count` of them.
  void recordThreeRuns(size_t count = 3) {
    fs::create_directories(dir_);
    const std::vector<std::pair<std::string, std::string>> runs = {
        {"0.01", "adamw"}, {"0.001", "adamw"}, {"0.05", "sgd"}};
    for (size_t i = 0; i < count; ++i) {
      const auto& [lr, optimizer] = runs[i];
      const CliResult run =
          ringmaster({"run", testing::examplePath("single_mlp"), "-q", "--set", "train.steps=3",
                      "--set", "optimizer.lr=" + lr, "--set", "optimizer.kind=" + optimizer});
      ASSERT_TRUE(run.status.ok()) << run.status.describe() << "\n" << run.err;
    }
  }
  json points(const std::string& x, const std::string& y) {
    const CliResult compared = ringmaster({"compare", "1", "2", "3", "--x", x, "--y", y, "--json"});
    EXPECT_TRUE(compared.status.ok()) << x << " / " << y << ": " << compared.err;
    return compared.status.ok() ? json::parse(compared.out) : json();
  }
};

TEST_F(CompareAxesCli, FinalLossAgainstTheLearningRateIsOnePointPerRunAsShowReportsIt) {
  ASSERT_NO_FATAL_FAILURE(recordThreeRuns());
  const json document = points("optimizer.lr", "final_loss");
  ASSERT_EQ(document["points"].size(), 3u) << document.dump(2);
  EXPECT_TRUE(document["x"]["numeric"]);
  EXPECT_FALSE(document["x"]["figure"]);
  EXPECT_EQ(document["y"]["name"], storage::figure("final_loss").name);
  const std::vector<double> lrs = {0.01, 0.001, 0.05};
  for (int i = 0; i < 3; ++i) {
    const json& point = document["points"][i];
    EXPECT_EQ(point["run"], i + 1);
    EXPECT_DOUBLE_EQ(point["x"].get<double>(), lrs[static_cast<size_t>(i)]);
    const json shown = json::parse(ringmaster({"show", std::to_string(i + 1), "--json"}).out);
    EXPECT_EQ(point["y"], shown["final_loss"]);
  }

  // The table: the axes by their names, a row per run with its values.
  const CliResult table =
      ringmaster({"compare", "1", "2", "3", "--x", "optimizer.lr", "--y", "final_loss"});
  ASSERT_TRUE(table.status.ok()) << table.err;
  EXPECT_NE(table.out.find("optimizer.lr"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("final loss"), std::string::npos) << table.out;
  for (const char* lr : {"0.01", "0.001", "0.05"})
    EXPECT_NE(table.out.find(lr), std::string::npos) << lr << " in\n" << table.out;
}

TEST_F(CompareAxesCli, EveryRunFigureIsAnAxisAndATextFieldIsACategory) {
  ASSERT_NO_FATAL_FAILURE(recordThreeRuns());
  std::vector<json> shown;
  for (int run = 1; run <= 3; ++run)
    shown.push_back(json::parse(ringmaster({"show", std::to_string(run), "--json"}).out));
  for (const storage::Figure& figure : storage::figureTable()) {
    if (!storage::isRunFigure(figure)) continue;
    const std::string id(figure.id);
    SCOPED_TRACE(id);
    const json document = points("optimizer.kind", id);
    ASSERT_EQ(document["points"].size(), 3u);
    EXPECT_EQ(document["y"]["name"], figure.name);
    EXPECT_EQ(document["y"]["unit"], figure.unit);
    EXPECT_FALSE(document["x"]["numeric"]);
    EXPECT_EQ(document["x"]["categories"], json({"adamw", "sgd"}));
    for (size_t i = 0; i < 3; ++i) {
      const json& report = shown[i];
      const json expected = report.contains(id) ? report[id] : report["run"][id];
      if (id == "duration_s")
        EXPECT_NEAR(document["points"][i]["y"].get<double>(), expected.get<double>(), 1e-6);
      else
        EXPECT_EQ(document["points"][i]["y"], expected) << "run " << i + 1;
    }
  }
}

TEST_F(CompareAxesCli, AnUnknownAxisOrALoneXIsRefusedNamingTheChoices) {
  ASSERT_NO_FATAL_FAILURE(recordThreeRuns(2));
  const CliResult unknown =
      ringmaster({"compare", "1", "2", "--x", "optimizer.lrr", "--y", "final_loss"});
  EXPECT_TRUE(exitedWith(unknown.status, 2)) << unknown.status.describe();
  EXPECT_NE(unknown.err.find("'optimizer.lrr' is neither a figure nor a spec field"),
            std::string::npos)
      << unknown.err;
  EXPECT_NE(unknown.err.find("comm_share"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("optimizer.lr"), std::string::npos) << unknown.err;
  const CliResult lone = ringmaster({"compare", "1", "2", "--x", "final_loss"});
  EXPECT_TRUE(exitedWith(lone.status, 2)) << lone.status.describe();
  EXPECT_NE(lone.err.find("--x and --y go together"), std::string::npos) << lone.err;
}

}  // namespace
}  // namespace ringmaster
