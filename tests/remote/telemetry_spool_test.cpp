// The detached run's telemetry spool (issue 21): segments rotated at their size, no more kept than
// the bound, a deleted segment's telemetry lines counted per rank with their seq range (in the
// `dropped` file and the report), and a reader that follows the segments in order to the end.
// Issue 32, point 6: the reader is bounded whatever a segment holds (an oversized record, a
// zero-filled region): it drops and counts, in time linear in the bytes and memory under its limit.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "agent/telemetry_spool.h"
#include "telemetry/codec.h"

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

// Issue 32, point 6: a spool written by hand, as a crash or an editor might leave it.
class SpoolBoundTest : public SpoolTest {
 protected:
  // Writes `bytes` as segment `index` of the spool.
  void writeSegment(int64_t index, const std::string& bytes) {
    fs::create_directories(dir_);
    std::ofstream(spoolSegmentPath(dir_.string(), index), std::ios::binary) << bytes;
  }
  // Three good telemetry records, for after the bad bytes.
  static std::string goodRecords() {
    return "T " + line(0, 1) + "\nL a log line\nT " + line(0, 2) + "\n";
  }
  // Checks that `lines` are one report of `kind` followed by the good records.
  static void expectReportThenGood(const std::vector<SpoolLine>& lines, const std::string& kind) {
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_FALSE(lines[0].telemetry);
    EXPECT_TRUE(lines[0].text.starts_with(kind)) << lines[0].text.substr(0, 200);
    EXPECT_LT(lines[0].text.size(), 1000u);
    EXPECT_EQ(lines[1].text, line(0, 1));
    EXPECT_TRUE(lines[1].telemetry);
    EXPECT_EQ(lines[2].text, "a log line");
    EXPECT_FALSE(lines[2].telemetry);
    EXPECT_EQ(lines[3].text, line(0, 2));
  }
};

TEST_F(SpoolBoundTest, ATelemetryRecordOfSeveralTimesTheLimitIsDroppedOnceAndCounted) {
  const size_t limit = 4096;
  writeSegment(0, "T " + std::string(5 * limit, 'x') + "\n" + goodRecords());
  SpoolReader reader(dir_.string(), limit);
  const std::vector<SpoolLine> lines = readAll(reader);
  expectReportThenGood(lines, "oversized telemetry line: 20480 bytes, over the limit of 4094");
  // In the wording the launchers count as a bad line.
  EXPECT_TRUE(parseOversizedLineReport(lines[0].text).has_value());
  EXPECT_EQ(reader.counts().oversized, 1);
  EXPECT_EQ(reader.counts().malformed, 0);
}

TEST_F(SpoolBoundTest, AnOversizedLogRecordIsAWarningOfTheSpool) {
  const size_t limit = 4096;
  writeSegment(0, "L " + std::string(3 * limit, 'y') + "\n" + goodRecords());
  SpoolReader reader(dir_.string(), limit);
  expectReportThenGood(readAll(reader),
                       "warning: the telemetry spool holds a log line of 12288 bytes");
  EXPECT_EQ(reader.counts().oversized, 1);
}

TEST_F(SpoolBoundTest, AZeroFilledRegionOverTheLimitIsOneOversizedLine) {
  const size_t limit = 4096;
  std::string bytes = "T " + line(0, 0) + "\n";
  bytes += std::string(10 * limit, '\0');
  bytes += "T " + line(0, 9) + "\n" + goodRecords();
  writeSegment(0, bytes);
  SpoolReader reader(dir_.string(), limit);
  std::vector<SpoolLine> lines = readAll(reader);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front().text, line(0, 0));
  lines.erase(lines.begin());
  // The zeros and the record they ran into are one line, reported with its NULs escaped.
  expectReportThenGood(
      lines, fmt::format("oversized telemetry line: {} bytes", 10 * limit + 2 + line(0, 9).size()));
  EXPECT_NE(lines[0].text.find("'\\x00\\x00"), std::string::npos) << lines[0].text;
  EXPECT_EQ(reader.counts().oversized, 1);
}

TEST_F(SpoolBoundTest, AShortZeroFilledRegionIsPassedOnAsAMalformedTelemetryLine) {
  writeSegment(0, std::string(100, '\0') + "T " + line(0, 0) + "\n" + goodRecords());
  SpoolReader reader(dir_.string());
  const std::vector<SpoolLine> lines = readAll(reader);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(lines[0].telemetry);  // for the decoder to refuse and count
  EXPECT_EQ(lines[0].text.size(), 100 + 2 + line(0, 0).size());
  EXPECT_FALSE(decodeEvent(lines[0].text).ok());
  EXPECT_EQ(lines[1].text, line(0, 1));
  EXPECT_EQ(reader.counts().malformed, 1);
  EXPECT_EQ(reader.counts().oversized, 0);
}

TEST_F(SpoolBoundTest, ASegmentEndingInZerosWithoutANewlineIsOneLineOnceTheNextSegmentExists) {
  const size_t limit = 4096;
  writeSegment(0, "T " + line(0, 0) + "\n" + std::string(3 * limit, '\0'));
  SpoolReader reader(dir_.string(), limit);
  std::vector<SpoolLine> lines = readAll(reader);
  ASSERT_EQ(lines.size(), 1u);  // the zeros may still become a line: nothing said yet
  EXPECT_EQ(reader.counts().oversized, 0);
  writeSegment(1, goodRecords());
  lines = readAll(reader);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(lines[0].text.starts_with("oversized telemetry line: 12288 bytes")) << lines[0].text;
  EXPECT_EQ(lines[3].text, line(0, 2));
  EXPECT_EQ(reader.counts().oversized, 1);
}

TEST_F(SpoolBoundTest, TheDefaultLimitDropsARecordJustOverItInLinearTime) {
  // Twice kMaxSpoolRecordBytes of zeros, then one byte over the limit of a telemetry record: read
  // in well under a second (the old reader searched its whole buffer again after each 64 KB).
  std::string bytes(2 * kMaxSpoolRecordBytes, '\0');
  bytes += "\nT " + std::string(kMaxSpoolRecordBytes - 1, 'x') + "\n" + goodRecords();
  writeSegment(0, bytes);
  const auto start = std::chrono::steady_clock::now();
  SpoolReader reader(dir_.string());
  std::vector<SpoolLine> lines = readAll(reader);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_TRUE(parseOversizedLineReport(lines[0].text).has_value()) << lines[0].text.substr(0, 80);
  lines.erase(lines.begin());
  expectReportThenGood(lines, "oversized telemetry line: ");
  EXPECT_EQ(reader.counts().oversized, 2);
}

}  // namespace
}  // namespace ringmaster
