// `ringmaster-node estimate --spec FILE` (issue 34, the benchmark's per-rank estimate): the real
// program prints, for every rank of the spec's world, exactly what the engine's estimateMemory
// computes in process (rank, total, each part's bytes and formula), over every dp x tp x pp layout
// of the GPT example's 4 ranks with dp as DDP and as FSDP and the MLP examples; a program job has
// no estimate (an empty array); an invalid spec exits with the usage code and names its field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "spec/job_spec.h"
#include "spec/memory_estimate.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using testing::CapturedProcess;

const std::string kNode = std::string(testBinaryDir()) + "/app/ringmaster-node";

class NodeEstimate : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("ringmaster_node_estimate_{}", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `ringmaster-node estimate --spec` on `spec`, written to a file, to its end.
  testing::CliResult estimate(const json& spec) {
    const fs::path path = dir_ / "spec.json";
    std::ofstream(path) << spec.dump(2);
    return testing::runToEnd(CapturedProcess(kNode, {"estimate", "--spec", path.string()}), 60s);
  }

  // The printed estimate equals the engine's, rank by rank and part by part.
  void expectPrintedEqualsEngine(const json& spec, const std::string& name) {
    SCOPED_TRACE(name);
    const testing::CliResult printed = estimate(spec);
    ASSERT_TRUE(printed.status.ok()) << printed.status.describe() << printed.err;
    const json ranks = json::parse(printed.out);
    const SpecParseResult parsed = parseJobSpec(spec.dump());
    ASSERT_TRUE(parsed.ok());
    const std::vector<RankMemoryEstimate> expected = estimateMemory(*parsed.spec);
    ASSERT_EQ(ranks.size(), expected.size());
    ASSERT_EQ(static_cast<int>(expected.size()), worldSize(*parsed.spec));
    for (size_t r = 0; r < expected.size(); ++r) {
      EXPECT_EQ(ranks[r]["rank"], expected[r].rank);
      EXPECT_DOUBLE_EQ(ranks[r]["total"].get<double>(), expected[r].total());
      ASSERT_EQ(ranks[r]["parts"].size(), expected[r].parts.size()) << "rank " << r;
      for (size_t p = 0; p < expected[r].parts.size(); ++p) {
        const json& part = ranks[r]["parts"][p];
        EXPECT_EQ(part["name"], expected[r].parts[p].name);
        EXPECT_DOUBLE_EQ(part["bytes"].get<double>(), expected[r].parts[p].bytes);
        EXPECT_EQ(part["formula"], expected[r].parts[p].formula);
      }
    }
  }

  fs::path dir_;
};

// The GPT example on 4 ranks in layout dp x tp x pp, dp as `kind`.
json gptOnMesh(int dp, int tp, int pp, const std::string& kind) {
  json spec = testing::exampleSpec("gpt_text");
  spec["launch"]["hosts"] = json::array({{{"host", "localhost"}, {"ranks", 4}}});
  spec["strategy"] = {{"mesh", {{"dp", dp}, {"tp", tp}, {"pp", pp}}}, {"dp", {{"kind", kind}}}};
  if (pp > 1) {
    spec["strategy"]["pp"] = {{"schedule", "1f1b"}};
    spec["train"]["micro_batches"] = 4;
  }
  return spec;
}

TEST_F(NodeEstimate, PrintsTheEnginesEstimateForEveryRankOfEveryLayout) {
  for (const std::string kind : {"ddp", "fsdp"}) {
    for (const auto& [dp, tp, pp] : std::vector<std::array<int, 3>>{
             {4, 1, 1}, {1, 4, 1}, {1, 1, 4}, {2, 2, 1}, {2, 1, 2}, {1, 2, 2}}) {
      expectPrintedEqualsEngine(gptOnMesh(dp, tp, pp, kind),
                                fmt::format("gpt {}x{}x{} {}", dp, tp, pp, kind));
    }
  }
  for (const std::string example : {"single_mlp", "ddp_mlp", "fsdp_mlp", "pipeline_mlp"})
    expectPrintedEqualsEngine(testing::exampleSpec(example), example);
}

TEST_F(NodeEstimate, AProgramJobHasNoEstimate) {
  const testing::CliResult printed = estimate(testing::exampleSpec("torch_ddp"));
  ASSERT_TRUE(printed.status.ok()) << printed.status.describe() << printed.err;
  EXPECT_EQ(json::parse(printed.out), json::array());
}

TEST_F(NodeEstimate, AnInvalidSpecExitsWithTheUsageCodeNamingItsField) {
  const testing::CliResult printed = estimate(gptOnMesh(3, 1, 1, "ddp"));  // 3 x 1 x 1 on 4 ranks
  EXPECT_TRUE(testing::exitedWith(printed.status, 2)) << printed.status.describe() << printed.err;
  EXPECT_NE(printed.err.find("strategy.mesh"), std::string::npos) << printed.err;
  EXPECT_EQ(printed.out, "");
}

}  // namespace
}  // namespace ringmaster
