// `ringmaster run` of a local job with launch.env and launch.env_file (issue 21): every worker of
// the run gets the values byte for byte, a hostile value executes nothing, the env_file's values
// are in no file the run writes (database, run directory) nor on its output, and a malformed
// env_file fails the run naming the file and line. The workers are /bin/sh scripts speaking the
// telemetry protocol on their channel, so no Python is needed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryText;
using testing::CapturedProcess;

const std::string kRingmaster = testing::ringmasterBinary();
constexpr int kRanks = 2;

// Every byte of every file under `dir`.
std::string everyFileUnder(const fs::path& dir) {
  std::string all;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) all += testing::fileBytes(entry.path());
  return all;
}

class LaunchEnvRun : public testing::CliRunTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    fs::create_directories(dir_ / "out");
    // A rank in sh: the values it got into files, then hello and done on its telemetry channel.
    std::ofstream(dir_ / "worker.sh") << fmt::format(
        R"sh(for name in HOSTILE NCCL_DEBUG HF_TOKEN; do
  eval "printf '%s' \"\$$name\"" > "{0}/$name.$RANK"
done
fd=$RINGMASTER_TELEMETRY_FD
t=$(date +%s)
printf '{{"v":1,"type":"hello","rank":%s,"seq":0,"t":%s,"world_size":%s,"local_rank":%s,"host":"h","pid":%s,"device":"cpu","device_name":"cpu","device_memory_total":0,"version":"%s","strategy":"%s"}}\n' "$RANK" "$t" "$WORLD_SIZE" "$LOCAL_RANK" "$$" "$RINGMASTER_VERSION" "$RINGMASTER_STRATEGY" >&$fd
printf '{{"v":1,"type":"done","rank":%s,"seq":1,"t":%s,"status":"completed","final_step":0,"wall_s":0}}\n' "$RANK" "$t" >&$fd
)sh",
        (dir_ / "out").string());
  }

  std::string writeSpec(const json& launch_extra) {
    json spec = {
        {"name", "env-run"},
        {"program", {{"python", "sh"}, {"script", "worker.sh"}, {"workdir", dir_.string()}}},
        {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", kRanks}}}}, {"timeout_s", 30}}}};
    for (const auto& [key, value] : launch_extra.items()) spec["launch"][key] = value;
    const fs::path path = dir_ / "spec.json";
    std::ofstream(path) << spec.dump(2);
    return path.string();
  }
  std::string got(const std::string& name, int rank) const {
    return testing::fileBytes(dir_ / "out" / fmt::format("{}.{}", name, rank));
  }
};

TEST_F(LaunchEnvRun, EveryLocalWorkerGetsTheValuesAndTheEnvFilesAreRecordedNowhere) {
  const fs::path canary = dir_ / "CANARY";
  const std::string hostile =
      fmt::format("a  b 'c' \"d\" $(touch {0}) `touch {0}`; touch {0}", canary.string());
  const std::string secret = "hf_L0cal-s3cret";
  std::ofstream(dir_ / "job.env") << "HF_TOKEN=" << secret << "\n";
  CapturedProcess run(kRingmaster,
                      {"--db", dbPath(), "run",
                       writeSpec({{"env", {{"HOSTILE", hostile}, {"NCCL_DEBUG", "INFO"}}},
                                  {"env_file", (dir_ / "job.env").string()}})});
  const ExitStatus status = run.wait(120s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.out() << run.err();
  for (int rank = 0; rank < kRanks; ++rank) {
    SCOPED_TRACE(rank);
    EXPECT_EQ(got("HOSTILE", rank), hostile);
    EXPECT_EQ(got("NCCL_DEBUG", rank), "INFO");
    EXPECT_EQ(got("HF_TOKEN", rank), secret);
  }
  EXPECT_FALSE(fs::exists(canary)) << "a value was executed";

  // The spec is recorded with launch.env and the file's path, never the file's values.
  {
    storage::Database db(dbPath());
    const json recorded = json::parse(queryText(db, "SELECT spec FROM runs"));
    EXPECT_EQ(recorded["launch"]["env"]["HOSTILE"], hostile);
    EXPECT_EQ(recorded["launch"]["env_file"], (dir_ / "job.env").string());
  }
  fs::remove(dir_ / "job.env");
  fs::remove_all(dir_ / "out");
  const std::string written = everyFileUnder(dir_);
  EXPECT_EQ(written.find(secret), std::string::npos) << "the env_file's value was written";
  EXPECT_EQ(run.out().find(secret), std::string::npos) << run.out();
  EXPECT_EQ(run.err().find(secret), std::string::npos) << run.err();
}

TEST_F(LaunchEnvRun, AMalformedEnvFileFailsTheRunNamingTheFileAndLineBeforeAnyWorker) {
  std::ofstream(dir_ / "bad.env") << "NCCL_DEBUG=INFO\nhf_not-a-line\n";
  CapturedProcess run(kRingmaster, {"--db", dbPath(), "run",
                                    writeSpec({{"env_file", (dir_ / "bad.env").string()}})});
  const ExitStatus status = run.wait(120s);
  EXPECT_FALSE(status.ok()) << run.out() << run.err();
  const std::string output = run.out() + run.err();
  EXPECT_NE(output.find(fmt::format("{}:2: expected NAME=VALUE", (dir_ / "bad.env").string())),
            std::string::npos)
      << output;
  EXPECT_EQ(output.find("hf_not-a-line"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(dir_ / "out" / "NCCL_DEBUG.0")) << "a worker started";
}

}  // namespace
}  // namespace ringmaster
