// The detached run's telemetry spool (issue 21): segments rotated at their size, no more kept than
// the bound, a deleted segment's telemetry lines counted per rank with their seq range (in the
// `dropped` file and the report), and a reader that follows the segments in order to the end.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "agent/telemetry_spool.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

class SpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("rm_spool_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<SpoolLine> readAll(SpoolReader& reader) {
    std::vector<SpoolLine> lines;
    while (auto line = reader.next()) lines.push_back(*line);
    return lines;
  }
  size_t segmentCount() const {
    size_t n = 0;
    for (const auto& entry : fs::directory_iterator(dir_))
      n += entry.path().filename().string().starts_with("segment-");
    return n;
  }
  fs::path dir_;
};

std::string line(int rank, int seq) {
  return fmt::format("{{\"rank\":{},\"seq\":{},\"pad\":\"0123456789\"}}", rank, seq);
}

TEST_F(SpoolTest, WithinItsBoundEveryLineIsReadBackInOrderThenTheEnd) {
  TelemetrySpool spool({.directory = dir_.string(), .segment_bytes = 200, .max_segments = 100});
  for (int seq = 0; seq < 30; ++seq) {
    EXPECT_EQ(spool.appendTelemetry(line(seq % 3, seq / 3), seq % 3, seq / 3), "");
    if (seq % 10 == 0) {
      EXPECT_EQ(spool.appendLog(fmt::format("log {}", seq)), "");
    }
  }
  EXPECT_GT(segmentCount(), 5u);  // rotated
  SpoolReader reader(dir_.string());
  EXPECT_EQ(reader.ended(), std::nullopt);  // the agent has not ended
  const std::vector<SpoolLine> lines = readAll(reader);
  ASSERT_EQ(lines.size(), 33u);
  int telemetry = 0;
  for (const SpoolLine& read : lines) {
    if (!read.telemetry) continue;
    EXPECT_EQ(read.text, line(telemetry % 3, telemetry / 3));
    ++telemetry;
  }
  EXPECT_EQ(telemetry, 30);
  EXPECT_EQ(lines[1].text, "log 0");  // after telemetry line 0, as written
  EXPECT_FALSE(lines[1].telemetry);
  EXPECT_EQ(reader.ended(), std::nullopt);
  spool.finish(7);
  EXPECT_EQ(reader.ended(), 7);
  EXPECT_TRUE(readSpoolDrops(dir_.string()).empty());
}

TEST_F(SpoolTest, RotationKeepsTheBoundAndCountsWhatItDroppedPerRank) {
  // Each telemetry record is about 40 bytes: two per 80-byte segment, three segments kept.
  TelemetrySpool spool({.directory = dir_.string(), .segment_bytes = 80, .max_segments = 3});
  std::vector<std::string> reports;
  for (int seq = 0; seq < 20; ++seq) {
    for (int rank = 0; rank < 2; ++rank) {
      std::string report = spool.appendTelemetry(line(rank, seq), rank, seq);
      if (!report.empty()) reports.push_back(report);
      EXPECT_LE(segmentCount(), 3u);
    }
  }
  // 40 lines, a rotation after every second: 21 segments made (the last one empty), 3 kept, 18
  // deleted, each reported once.
  EXPECT_EQ(segmentCount(), 3u);
  ASSERT_EQ(reports.size(), 18u);
  EXPECT_NE(reports[0].find("outgrew its bound"), std::string::npos) << reports[0];
  EXPECT_NE(reports[0].find("2 telemetry lines dropped"), std::string::npos) << reports[0];
  const std::map<int, SpoolDrop> drops = readSpoolDrops(dir_.string());
  ASSERT_EQ(drops.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(drops.at(rank).lines, 18) << rank;
    EXPECT_EQ(drops.at(rank).first_seq, 0u) << rank;
    EXPECT_EQ(drops.at(rank).last_seq, 17u) << rank;
  }
  EXPECT_EQ(spool.dropped().at(1).lines, 18);
  // What is kept is what was not dropped: seq 18 and 19 of both ranks.
  SpoolReader reader(dir_.string());
  std::vector<std::string> texts;
  for (const SpoolLine& read : readAll(reader)) texts.push_back(read.text);
  const std::vector<std::string> expected = {line(0, 18), line(1, 18), line(0, 19), line(1, 19)};
  EXPECT_EQ(texts, expected);
}

TEST_F(SpoolTest, AReaderFollowsLiveAndSaysSoWhenItFellBehindTheRotation) {
  TelemetrySpool spool({.directory = dir_.string(), .segment_bytes = 80, .max_segments = 2});
  SpoolReader reader(dir_.string());
  EXPECT_EQ(reader.next(), std::nullopt);  // an empty segment
  spool.appendTelemetry(line(0, 0), 0, 0);
  auto first = reader.next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->text, line(0, 0));
  EXPECT_EQ(reader.next(), std::nullopt);  // caught up: live
  for (int seq = 1; seq < 12; ++seq) spool.appendTelemetry(line(0, seq), 0, seq);
  const std::vector<SpoolLine> lines = readAll(reader);
  ASSERT_FALSE(lines.empty());
  // Its open segment stays readable; the ones deleted before it got there are reported missing.
  EXPECT_EQ(lines[0].text, line(0, 1));
  bool reported = false;
  for (const SpoolLine& read : lines)
    reported = reported || (!read.telemetry &&
                            read.text.find("deleted before they were read") != std::string::npos);
  EXPECT_TRUE(reported);
  EXPECT_EQ(lines.back().text, line(0, 11));
}

}  // namespace
}  // namespace ringmaster
