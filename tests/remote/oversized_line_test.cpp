// Issue 16, finding 10: a 10 MB telemetry line is reported with its rank and size by every reader
// in the same wording: the node agent reading a worker writes the report on its stderr, and the
// local launcher passes that report, or a line it dropped itself, to on_bad_line (where
// `ringmaster run` counts it). An oversized log line is said to be dropped, not passed on cut.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "agent/node_agent.h"
#include "launcher/local_launcher.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

std::string readAll(std::FILE* file) {
  std::rewind(file);
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  return text;
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class OversizedLine : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("ringmaster_oversized_{}_{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A shell script printing `out_bytes` x's then "\nlast\n" on stdout, and `err_bytes` y's then
  // "\n" and `err_text` on stderr.
  std::string script(size_t out_bytes, size_t err_bytes, const std::string& err_text = "") {
    std::ofstream(dir_ / "stderr.txt", std::ios::binary) << err_text;
    const fs::path path = dir_ / "print.sh";
    std::ofstream(path) << fmt::format(
        "#!/bin/sh\n"
        "head -c {} /dev/zero | tr '\\0' x; printf '\\nlast\\n'\n"
        "head -c {} /dev/zero | tr '\\0' y >&2; printf '\\n' >&2; cat '{}' >&2\n",
        out_bytes, err_bytes, (dir_ / "stderr.txt").string());
    fs::permissions(path, fs::perms::owner_all);
    return path.string();
  }

  fs::path dir_;
};

JobSpec twoRanks() {
  SpecParseResult parsed = parseJobSpec(R"({
    "name": "oversized", "strategy": {"kind": "ddp"},
    "model": {"kind": "mlp", "layers": [4, 4], "seed": 3},
    "data": {"kind": "synthetic", "samples": 64, "features": 4, "classes": 4, "seed": 1},
    "train": {"steps": 1, "batch_size": 8},
    "optimizer": {"kind": "sgd", "lr": 0.05},
    "device": "cpu",
    "launch": {"hosts": [{"host": "localhost", "ranks": 2}], "timeout_s": 30}})");
  EXPECT_TRUE(parsed.ok()) << parsed.describe();
  return *parsed.spec;
}

TEST_F(OversizedLine, TheAgentReportsAWorkersTenMegabyteLineWithItsRankAndSize) {
  AgentOptions options;
  options.spec = twoRanks();
  options.worker_command = {script(10'485'760, 2'000'000)};
  options.host = "test";
  options.input_fd = -1;
  std::FILE* out = std::tmpfile();
  std::FILE* log = std::tmpfile();
  options.output_fd = fileno(out);
  options.log_fd = fileno(log);
  runAgent(options);  // the stand-in workers send no done: how the run ended is not the point
  const std::string telemetry = readAll(out), messages = readAll(log);
  std::fclose(out);
  std::fclose(log);

  const std::vector<std::string> forwarded = linesOf(telemetry);
  EXPECT_EQ(std::count(forwarded.begin(), forwarded.end(), "last"), 2);
  EXPECT_EQ(telemetry.find("xxxx"), std::string::npos) << "the oversized lines are not forwarded";
  std::vector<int> reported;
  for (const std::string& line : linesOf(messages)) {
    if (const auto report = parseOversizedLineReport(line)) {
      ASSERT_TRUE(report->rank.has_value()) << line;
      reported.push_back(*report->rank);
      EXPECT_NE(line.find(": 10485760 bytes, over the limit of 1048576"), std::string::npos)
          << line;
    }
  }
  std::sort(reported.begin(), reported.end());
  EXPECT_EQ(reported, (std::vector<int>{0, 1})) << messages.substr(0, 2000);
  // A worker's oversized stderr line is said to be dropped too, but is no telemetry to count.
  EXPECT_NE(messages.find("dropped a log line of 2000000 bytes"), std::string::npos)
      << messages.substr(0, 2000);
}

TEST_F(OversizedLine, TheLocalLauncherPassesReportsAndItsOwnAsBadLines) {
  const LineSplitter::Line worker_line{.text = "{", .oversized = true, .bytes = 20'000'000};
  const std::string agent_report =
      "[agent node 0] " + oversizedLineReport(2, worker_line, kMaxLineBytes) + "\n";
  // As the agent: a 10 MB line on stdout, a 100 KB line and the report of a worker's on stderr.
  LocalLauncher launcher(
      {.node_binary = script(10'485'760, 100'000, agent_report + "a plain line\n"),
       .spec_path = (dir_ / "unused.json").string()});
  std::vector<std::pair<std::optional<int>, std::string>> bad;
  std::vector<std::string> telemetry, logs;
  const LaunchSink sink{
      .on_telemetry = [&](std::string_view line) { telemetry.emplace_back(line); },
      .on_log = [&](std::string_view line) { logs.emplace_back(line); },
      .on_bad_line = [&](std::optional<int> rank,
                         std::string_view report) { bad.emplace_back(rank, report); }};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (launcher.pump(std::chrono::milliseconds(100), sink))
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
  EXPECT_TRUE(launcher.wait().ok());

  EXPECT_EQ(telemetry, std::vector<std::string>{"last"});
  ASSERT_EQ(bad.size(), 2u);
  std::sort(bad.begin(), bad.end());
  EXPECT_EQ(bad[0].first, std::nullopt) << "the launcher's own: the agent named no rank";
  EXPECT_NE(bad[0].second.find("oversized telemetry line: 10485760 bytes"), std::string::npos)
      << bad[0].second;
  EXPECT_EQ(bad[1].first, 2);
  EXPECT_NE(bad[1].second.find("from rank 2: 20000000 bytes"), std::string::npos) << bad[1].second;
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_NE(logs[0].find("a log line of 100000 bytes, over the limit of 65536, dropped"),
            std::string::npos)
      << logs[0];
  EXPECT_EQ(logs[1], "a plain line");
}

}  // namespace
}  // namespace ringmaster
