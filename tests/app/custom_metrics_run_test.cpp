// Issue 33, any metric, end to end: a real PyTorch script (a program job on 2 local ranks through
// the node agent) logs train/grad_norm, eval/acc and my_custom_thing with ringmaster.log. Each is
// stored per rank with its rollups, `show --json` lists it, `compare --metric` overlays it across
// two runs (text and JSON) and `export --csv` writes it; a name past each bound (length,
// characters, a leading '/', a step series' name, the run's 256 names) and a non-finite value are
// refused with one counted warning each, which `show` lists, and nothing else is lost. Skipped
// where /usr/bin/python3 cannot import torch.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/python_torch.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using testing::CapturedProcess;

const std::string kRingmaster = testing::ringmasterBinary();
const std::string kScript =
    std::string(ringmaster::testSourceDir()) + "/tests/app/scripts/custom_metrics_program.py";
constexpr int kRanks = 2;
const std::vector<std::string> kNames = {"train/grad_norm", "eval/acc", "my_custom_thing"};

class CustomMetricsRun : public testing::CliRunTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    if (const std::string why = testing::pythonTorchUnavailable(RINGMASTER_PYTHON_TORCH);
        !why.empty())
      GTEST_SKIP() << why;
    fs::create_directories(dir_);
  }

  // Runs the script on kRanks local ranks as run `name`; fails the test unless it completes.
  void runScript(const std::string& name, int steps, std::vector<std::string> extra_args) {
    std::vector<std::string> args = {"--steps", std::to_string(steps)};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    const json spec = {
        {"name", name},
        {"program",
         {{"python", RINGMASTER_PYTHON_TORCH},
          {"script", kScript},
          {"args", args},
          {"steps", steps}}},
        {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", kRanks}}}}, {"timeout_s", 60}}}};
    CapturedProcess run(kRingmaster, {"--db", dbPath(), "run", writeSpec(name, spec), "-q"});
    const ExitStatus status = run.wait(240s);
    ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.out() << run.err();
  }

  json cliJson(std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", dbPath()});
    CapturedProcess cli(kRingmaster, args);
    const ExitStatus status = cli.wait(60s);
    EXPECT_TRUE(status.ok()) << status.describe() << "\n" << cli.err();
    return json::parse(cli.out(), nullptr, false);
  }

  int64_t count(const std::string& sql) {
    storage::Database db(dbPath());
    return queryInt(db, sql);
  }
  // Points of `metric` of run 1 on `rank`, in `scalars` and in its rollups of each width.
  int64_t points(const std::string& metric, int rank, const std::string& table = "scalars",
                 int64_t width = 0) {
    const std::string n = table == "scalars" ? "count(*)" : "sum(n)";
    return count(fmt::format(
        "SELECT {} FROM {} t JOIN metrics m ON m.id = t.metric_id WHERE m.name = '{}' AND "
        "t.run_id = 1 AND t.rank = {}{}",
        n, table, metric, rank, width > 0 ? fmt::format(" AND t.width = {}", width) : ""));
  }
};

TEST_F(CustomMetricsRun, EveryMetricIsStoredShownOverlaidAndBoundedWithCountedWarnings) {
  constexpr int kSteps = 6;
  runScript("with-bounds", kSteps, {"--bounds"});
  runScript("shifted", 4, {"--shift", "0.5"});

  // Stored per rank, each point once in every width of its rollups; nothing else lost.
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    for (const std::string& name : kNames) {
      const int64_t expected = name == "eval/acc" ? kSteps / 2 : kSteps;
      EXPECT_EQ(points(name, rank), expected) << name;
      for (const int64_t width : {64, 512, 4096})
        EXPECT_EQ(points(name, rank, "scalar_rollups", width), expected) << name << " " << width;
    }
    EXPECT_EQ(count(fmt::format("SELECT count(*) FROM scalars s JOIN metrics m ON m.id = "
                                "s.metric_id WHERE m.name = 'my_custom_thing' AND s.run_id = 1 "
                                "AND s.rank = {0} AND s.value = {0} * 1000 + s.step",
                                rank)),
              kSteps);
    EXPECT_EQ(count(fmt::format("SELECT count(*) FROM steps WHERE run_id = 1 AND rank = {} AND "
                                "loss IS NOT NULL AND samples = 16",
                                rank)),
              kSteps);
  }
  EXPECT_EQ(count("SELECT count(*) FROM scalars WHERE run_id = 1 AND value != value"), 0);

  // show --json lists the metrics, and one counted warning per bound.
  const json shown = cliJson({"show", "1", "--json"});
  for (const std::string& name : kNames) {
    EXPECT_NE(std::find(shown["metrics"].begin(), shown["metrics"].end(), name),
              shown["metrics"].end())
        << name << " in " << shown["metrics"].dump();
  }
  std::vector<std::string> warnings;
  for (const json& line : shown["problems"]["last"])
    if (line["level"] == "warn") warnings.push_back(line["message"]);
  const auto counted = [&](const std::string& text) {
    std::vector<std::string> found;
    for (const std::string& w : warnings)
      if (w.find(text) != std::string::npos) found.push_back(w.substr(w.rfind(": ") + 2));
    return found;
  };
  const std::string every_step = fmt::format("{} points", kRanks * kSteps);
  EXPECT_EQ(counted("longer than 128 bytes"), std::vector<std::string>{every_step});
  EXPECT_EQ(counted("outside [A-Za-z0-9_./-]"), std::vector<std::string>{every_step});
  EXPECT_EQ(counted("starts with '/'"), std::vector<std::string>{every_step});
  EXPECT_EQ(counted("a step field's"), std::vector<std::string>{every_step});
  EXPECT_EQ(counted("'nan/metric' refused, a non-finite value"),
            std::vector<std::string>{every_step});
  // The run's names: the three, nan/metric and 252 of extra/000..259 at the last step; the other
  // 8 refused on each rank.
  EXPECT_EQ(counted("past the limit of 256 names"),
            std::vector<std::string>{fmt::format("{} points", kRanks * 8)});
  EXPECT_EQ(warnings.size(), 6u) << shown["problems"].dump(2);
  EXPECT_EQ(points("extra/251", 1), 1);
  EXPECT_EQ(points("extra/252", 0), 0);

  // compare --metric overlays any metric across the runs: rank 0's series and last value.
  const json compared = cliJson(
      {"compare", "1", "2", "--metric", "my_custom_thing", "--metric", "eval/acc", "--json"});
  ASSERT_EQ(compared["metric_overlays"].size(), 2u) << compared.dump(2);
  const json& custom = compared["metric_overlays"][0];
  EXPECT_EQ(custom["metric"], "my_custom_thing");
  EXPECT_EQ(custom["rank"], 0);
  ASSERT_EQ(custom["runs"].size(), 2u);
  EXPECT_EQ(custom["runs"][0]["run"], 1);
  EXPECT_EQ(custom["runs"][0]["last_step"], kSteps);
  EXPECT_EQ(custom["runs"][0]["last"], kSteps);
  EXPECT_EQ(custom["runs"][1]["last_step"], 4);
  EXPECT_EQ(custom["runs"][1]["last"], 4.5);
  for (const json& run : custom["runs"]) {
    ASSERT_FALSE(run["series"].empty()) << run.dump();
    EXPECT_EQ(run["series"].back()["last"], run["last"]) << run.dump();
  }
  EXPECT_EQ(compared["metric_overlays"][1]["metric"], "eval/acc");
  EXPECT_EQ(compared["metric_overlays"][1]["runs"][1]["last_step"], 4);

  CapturedProcess text(kRingmaster,
                       {"--db", dbPath(), "compare", "1", "2", "--metric", "train/grad_norm"});
  ASSERT_TRUE(text.wait(60s).ok()) << text.err();
  EXPECT_NE(text.out().find("train/grad_norm (rank 0, mean per bucket)"), std::string::npos)
      << text.out();
  CapturedProcess unknown(kRingmaster,
                          {"--db", dbPath(), "compare", "1", "2", "--metric", "no/such"});
  EXPECT_TRUE(testing::exitedWith(unknown.wait(60s), 2)) << unknown.err();
  EXPECT_NE(unknown.err().find("eval/acc"), std::string::npos) << unknown.err();
  EXPECT_NE(unknown.err().find(" in all)"), std::string::npos) << unknown.err();

  // The CSV export carries them.
  const fs::path csv = dir_ / "csv";
  cliJson({"export", "1", "--csv", csv.string(), "--json"});
  const std::string scalars = testing::fileBytes(csv / "scalars.csv");
  for (const std::string& name : kNames)
    EXPECT_NE(scalars.find("," + name + ","), std::string::npos) << name;
}

}  // namespace
}  // namespace ringmaster
