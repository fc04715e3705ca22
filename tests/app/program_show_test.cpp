// `ringmaster show` and `compare` of a program job (issue 19): the shipped PyTorch DDP example
// (resources/examples/torch_ddp.py, Gloo, 4 local ranks, reporting with the `ringmaster` package)
// recorded by `ringmaster run`, beside an engine DDP run. show counts each rank's steps and comm
// events as the database holds them, names the script's command line and gives no memory estimate
// for a model the spec does not describe (n/a, null in --json) where the engine run has one;
// compare lists the spec differences between the two kinds of job. Skipped where /usr/bin/python3
// cannot import torch.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
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
    std::string(ringmaster::testSourceDir()) + "/resources/examples/torch_ddp.py";
constexpr int kRanks = 4;
constexpr int kSteps = 8;

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

// The lines of `text` from the one starting with `header` to the next empty line, header left out.
std::vector<std::string> tableAfter(const std::string& text, const std::string& header) {
  std::istringstream in(text);
  std::vector<std::string> rows;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (inside && line.empty()) break;
    if (inside) rows.push_back(line);
    if (line.starts_with(header)) inside = true;
  }
  return rows;
}

class ProgramShow : public testing::CliRunTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    if (const std::string why = testing::pythonTorchUnavailable(RINGMASTER_PYTHON_TORCH);
        !why.empty())
      GTEST_SKIP() << why;
    fs::create_directories(dir_);
  }

  // Runs `spec` through `ringmaster run` into the test's database.
  void record(const json& spec, const std::string& file) {
    const fs::path path = dir_ / file;
    std::ofstream(path) << spec.dump(2);
    CapturedProcess run(kRingmaster, {"--db", dbPath(), "run", path.string(), "-q"});
    const ExitStatus status = run.wait(240s);
    ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.out() << run.err();
  }
  std::string ringmaster(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"--db", dbPath()};
    all.insert(all.end(), args.begin(), args.end());
    CapturedProcess process(kRingmaster, all);
    const ExitStatus status = process.wait(60s);
    EXPECT_TRUE(status.ok()) << status.describe() << process.err();
    return process.out();
  }
};

TEST_F(ProgramShow, ShowCountsEachRanksStepsAndCommEventsWithoutAnEstimate) {
  const json program = {
      {"python", RINGMASTER_PYTHON_TORCH},
      {"script", kScript},
      // A smaller model than the example's default: the test is about what is recorded.
      {"args", {"--steps", std::to_string(kSteps), "--width", "64"}},
      {"steps", kSteps}};
  ASSERT_NO_FATAL_FAILURE(record(
      {{"name", "torch-ddp"},
       {"program", program},
       {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", kRanks}}}}, {"timeout_s", 120}}}},
      "program.json"));
  ASSERT_NO_FATAL_FAILURE(
      record({{"name", "engine-ddp"},
              {"strategy", {{"kind", "ddp"}}},
              {"model", {{"kind", "mlp"}, {"layers", {16, 32, 4}}}},
              {"data", {{"kind", "synthetic"}, {"samples", 256}, {"features", 16}, {"classes", 4}}},
              {"train", {{"steps", kSteps}, {"batch_size", 8}}},
              {"optimizer", {{"kind", "sgd"}, {"lr", 0.1}}},
              {"device", "cpu"},
              {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", kRanks}}}}}}},
             "engine.json"));

  // What the database holds for the program run, per rank.
  std::map<int, int64_t> steps, comm;
  int64_t comm_total = 0;
  {
    storage::Database db(dbPath());
    for (int r = 0; r < kRanks; ++r) {
      steps[r] = queryInt(db, fmt::format("SELECT count(*) FROM steps WHERE run_id = 1 AND "
                                          "rank = {}",
                                          r));
      comm[r] = queryInt(db, fmt::format("SELECT count(*) FROM comm_events WHERE run_id = 1 AND "
                                         "rank = {}",
                                         r));
      comm_total += comm[r];
      EXPECT_EQ(steps[r], kSteps) << "rank " << r;
      // DDP's bucket all-reduces at least, the same on every rank.
      EXPECT_GE(comm[r], kSteps) << "rank " << r;
      EXPECT_EQ(comm[r], comm[0]) << "rank " << r;
    }
  }

  // --json: each rank's last step and comm operations as stored, no estimate, the program.
  const json shown = json::parse(ringmaster({"show", "1", "--json"}));
  json canonical = program;
  canonical["upload"] = false;  // the default, filled in
  EXPECT_EQ(shown["program"], canonical);
  EXPECT_EQ(shown["run"]["strategy"], "ddp");
  EXPECT_EQ(shown["final_step"], kSteps);
  ASSERT_EQ(shown["ranks"].size(), static_cast<size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE(fmt::format("rank {}", r));
    EXPECT_EQ(shown["ranks"][r]["rank"], r);
    EXPECT_EQ(shown["ranks"][r]["last_step"], kSteps);
    EXPECT_TRUE(shown["ranks"][r]["estimated_memory"].is_null());
    EXPECT_GT(shown["ranks"][r]["peak_memory"].get<int64_t>(), 0);  // what the script measured
    EXPECT_EQ(shown["ranks"][r]["rank"], r);
    EXPECT_EQ(shown["ranks"][r]["operations"], comm[r]);
  }
  int64_t by_op = 0;
  for (const json& op : shown["comm_ops"]) by_op += op["count"].get<int64_t>();
  EXPECT_EQ(by_op, comm_total);

  // The text: the command line, each rank at its last step with n/a for the estimate, the comm
  // table's counts adding up to every stored event.
  const std::string text = ringmaster({"show", "1"});
  EXPECT_NE(text.find(fmt::format("  program: {} {} --steps {} --width 64\n",
                                  RINGMASTER_PYTHON_TORCH, kScript, kSteps)),
            std::string::npos)
      << text;
  const std::vector<std::string> rank_rows = tableAfter(text, "RANK ");
  ASSERT_EQ(rank_rows.size(), static_cast<size_t>(kRanks)) << text;
  for (int r = 0; r < kRanks; ++r) {
    const std::vector<std::string> cells = words(rank_rows[static_cast<size_t>(r)]);
    ASSERT_GE(cells.size(), 14u) << rank_rows[static_cast<size_t>(r)];
    EXPECT_EQ(cells[0], std::to_string(r));
    EXPECT_EQ(cells[4], "completed");
    EXPECT_EQ(cells[5], std::to_string(kSteps));
    // PEAK MEM ("251.3 MiB") then ESTIMATED, then the straggler flag if any.
    EXPECT_TRUE(cells[14] == "n/a") << rank_rows[static_cast<size_t>(r)];
  }
  int64_t listed = 0;
  for (const std::string& row : tableAfter(text, "OP ")) {
    const std::vector<std::string> cells = words(row);  // op, size, unit, count, ...
    ASSERT_GE(cells.size(), 4u) << row;
    listed += std::stoll(cells[3]);
  }
  EXPECT_EQ(listed, comm_total) << text;

  // The engine run beside it has its estimate.
  const json engine = json::parse(ringmaster({"show", "2", "--json"}));
  EXPECT_TRUE(engine["program"].is_null());
  for (const json& rank : engine["ranks"]) EXPECT_GT(rank["estimated_memory"].get<double>(), 0);
  for (const std::string& row : tableAfter(ringmaster({"show", "2"}), "RANK "))
    EXPECT_EQ(row.find("n/a"), std::string::npos) << row;

  // compare: the two kinds of job side by side, their specs' differences path by path.
  const json compared = json::parse(ringmaster({"compare", "1", "2", "--json"}));
  std::map<std::string, std::vector<std::string>> differences;
  for (const json& difference : compared["spec_differences"])
    differences[difference["path"]] = difference["values"].get<std::vector<std::string>>();
  EXPECT_EQ(differences["program.script"], (std::vector<std::string>{kScript, ""}));
  EXPECT_EQ(differences["model.kind"], (std::vector<std::string>{"", "mlp"}));
  EXPECT_EQ(differences["name"], (std::vector<std::string>{"torch-ddp", "engine-ddp"}));
  // Both ddp: a program's strategy is its label, an engine job's the mesh; the runs say so alike.
  EXPECT_EQ(compared["runs"][0]["run"]["strategy"], "ddp");
  EXPECT_EQ(compared["runs"][1]["run"]["strategy"], "ddp");
  EXPECT_TRUE(compared["runs"][0]["program"].is_object());
  EXPECT_TRUE(compared["runs"][1]["program"].is_null());
  const std::string compare_text = ringmaster({"compare", "1", "2"});
  EXPECT_NE(compare_text.find("program.script"), std::string::npos) << compare_text;
  EXPECT_NE(compare_text.find("model.kind"), std::string::npos) << compare_text;
}

}  // namespace
}  // namespace ringmaster
