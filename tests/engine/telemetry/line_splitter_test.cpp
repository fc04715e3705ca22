// LineSplitter: the same lines come out however the stream is chunked, and an oversized line is
// reported once, with its length, and skipped without being buffered.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sample_events.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

std::vector<LineSplitter::Line> drain(LineSplitter& splitter) {
  std::vector<LineSplitter::Line> lines;
  while (auto line = splitter.next()) lines.push_back(std::move(*line));
  return lines;
}

std::vector<std::string> texts(const std::vector<LineSplitter::Line>& lines) {
  std::vector<std::string> out;
  for (const auto& line : lines) {
    EXPECT_FALSE(line.oversized) << line.text;
    out.push_back(line.text);
  }
  return out;
}

// Three real event lines, an empty line and a CRLF line.
std::string sampleStream() {
  std::string stream;
  stream += encodeEvent(samples::wrap(samples::fullHello(), 0, 0)) + "\n";
  stream += "\n";
  stream += encodeEvent(samples::wrap(samples::fullStep(), 0, 1)) + "\r\n";
  stream += encodeEvent(samples::wrap(samples::sampleDone(), 0, 2)) + "\n";
  return stream;
}

std::vector<std::string> expectedLines(const std::string& stream) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = stream.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(stream.substr(start, nl - start));
  }
  return lines;
}

TEST(LineSplitter, SplitsAtEveryByteBoundary) {
  const std::string stream = sampleStream();
  const auto expected = expectedLines(stream);
  ASSERT_EQ(expected.size(), 4u);
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    LineSplitter splitter;
    splitter.feed(std::string_view(stream).substr(0, cut));
    splitter.feed(std::string_view(stream).substr(cut));
    ASSERT_EQ(texts(drain(splitter)), expected) << "cut at " << cut;
  }
}

TEST(LineSplitter, SplitsAtEveryPairOfBoundaries) {
  const std::string stream = "{\"a\":1}\n\n{\"b\":22}\r\nxyz\n";
  const auto expected = expectedLines(stream);
  for (std::size_t i = 0; i <= stream.size(); ++i) {
    for (std::size_t j = i; j <= stream.size(); ++j) {
      LineSplitter splitter;
      splitter.feed(std::string_view(stream).substr(0, i));
      splitter.feed(std::string_view(stream).substr(i, j - i));
      splitter.feed(std::string_view(stream).substr(j));
      ASSERT_EQ(texts(drain(splitter)), expected) << "cuts at " << i << ", " << j;
    }
  }
}

TEST(LineSplitter, ByteByByteAndEveryLineDecodes) {
  const std::string stream = sampleStream();
  LineSplitter splitter;
  std::vector<LineSplitter::Line> lines;
  for (char c : stream) {
    splitter.feed(std::string_view(&c, 1));
    for (auto& line : drain(splitter)) lines.push_back(std::move(line));
  }
  ASSERT_EQ(texts(lines), expectedLines(stream));
  EXPECT_TRUE(decodeEvent(lines[0].text).ok());
  EXPECT_FALSE(decodeEvent(lines[1].text).ok());  // the empty line
  EXPECT_TRUE(decodeEvent(lines[2].text).ok());   // '\r' is whitespace to the decoder
  EXPECT_TRUE(decodeEvent(lines[3].text).ok());
}

TEST(LineSplitter, PartialLineWaitsForItsNewlineOrFinish) {
  LineSplitter splitter;
  splitter.feed("abc");
  EXPECT_FALSE(splitter.next());
  EXPECT_EQ(splitter.pendingBytes(), 3u);
  splitter.feed("def");
  EXPECT_FALSE(splitter.next());
  splitter.finish();
  EXPECT_EQ(texts(drain(splitter)), std::vector<std::string>{"abcdef"});
  splitter.finish();  // nothing left: no empty line appears
  EXPECT_FALSE(splitter.next());
}

TEST(LineSplitter, LineOfExactlyTheLimitPasses) {
  LineSplitter splitter(8);
  splitter.feed("12345678\n123456789\nok\n");
  auto lines = drain(splitter);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].text, "12345678");
  EXPECT_FALSE(lines[0].oversized);
  EXPECT_TRUE(lines[1].oversized);
  EXPECT_EQ(lines[2].text, "ok");
}

// Feeds `stream` in chunks of `chunk` bytes, checking the buffered bytes never pass the limit.
std::vector<LineSplitter::Line> splitInChunks(const std::string& stream, std::size_t chunk,
                                              std::size_t limit, bool finish) {
  LineSplitter splitter(limit);
  std::vector<LineSplitter::Line> lines;
  for (std::size_t at = 0; at < stream.size(); at += chunk) {
    splitter.feed(std::string_view(stream).substr(at, chunk));
    EXPECT_LE(splitter.pendingBytes(), limit);
    for (auto& line : drain(splitter)) lines.push_back(std::move(line));
  }
  if (finish) splitter.finish();
  for (auto& line : drain(splitter)) lines.push_back(std::move(line));
  return lines;
}

TEST(LineSplitter, OversizedLineIsReportedOnceAndSkipped) {
  const std::string big(5000, 'x');
  const std::string stream = "before\n" + big + "\nafter\n";
  for (std::size_t chunk :
       {std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{4096}, stream.size()}) {
    SCOPED_TRACE(chunk);
    auto lines = splitInChunks(stream, chunk, 100, false);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[0].text, "before");
    EXPECT_TRUE(lines[1].oversized);
    EXPECT_FALSE(lines[1].text.empty());
    EXPECT_LE(lines[1].text.size(), LineSplitter::kPreviewBytes);
    EXPECT_EQ(big.compare(0, lines[1].text.size(), lines[1].text), 0);  // a prefix of the line
    EXPECT_EQ(lines[2].text, "after");
    EXPECT_FALSE(lines[2].oversized);
  }
}

TEST(LineSplitter, UnterminatedOversizedLineIsReportedOnceEvenAtTheEnd) {
  const std::string stream = "a\n" + std::string(1000, 'y');
  auto lines = splitInChunks(stream, 3, 10, true);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].text, "a");
  EXPECT_TRUE(lines[1].oversized);
}

TEST(LineSplitter, ManyOversizedLinesInARow) {
  std::string stream;
  for (int i = 0; i < 5; ++i) stream += std::string(50, 'z') + "\n";
  stream += "end\n";
  for (std::size_t chunk : {std::size_t{1}, std::size_t{13}, stream.size()}) {
    auto lines = splitInChunks(stream, chunk, 20, false);
    ASSERT_EQ(lines.size(), 6u);
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(lines[i].oversized);
    EXPECT_EQ(lines[5].text, "end");
  }
}

TEST(LineSplitter, DefaultLimitIsTheDecoders) {
  LineSplitter splitter;
  EXPECT_EQ(splitter.maxLineBytes(), kMaxLineBytes);
  std::string line(kMaxLineBytes, 'q');
  splitter.feed(line);
  splitter.feed("\n");
  auto lines = drain(splitter);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_FALSE(lines[0].oversized);
  splitter.feed(line + "q");
  EXPECT_EQ(splitter.pendingBytes(), 0u);  // already given up on, nothing held
  EXPECT_TRUE(drain(splitter).empty()) << "reported when it ends, with its length";
  splitter.feed("\n");
  lines = drain(splitter);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].oversized);
  EXPECT_EQ(lines[0].bytes, kMaxLineBytes + 1);
}

// Issue 16, finding 10: a 10 MB line is reported with its exact length (and the lines around it
// with theirs) however the stream is chunked, ended by its newline or by the end of the stream;
// the report names the rank and the size, and the readers after it recognise it.
TEST(LineSplitter, AnOversizedLineIsReportedWithItsLength) {
  const std::string big = "{\"v\":1,\"type\":\"log\"," + std::string(10'485'760 - 20, 'x');
  ASSERT_EQ(big.size(), 10'485'760u);
  for (bool terminated : {true, false}) {
    const std::string stream = "a\n" + big + (terminated ? "\nbc\n" : "");
    for (std::size_t chunk : {std::size_t{4093}, std::size_t{1} << 16, stream.size()}) {
      SCOPED_TRACE(fmt::format("terminated {}, chunks of {}", terminated, chunk));
      auto lines = splitInChunks(stream, chunk, kMaxLineBytes, true);
      ASSERT_EQ(lines.size(), terminated ? 3u : 2u);
      EXPECT_EQ(lines[0].bytes, 1u);
      EXPECT_TRUE(lines[1].oversized);
      EXPECT_EQ(lines[1].bytes, big.size());
      EXPECT_EQ(lines[1].text, big.substr(0, LineSplitter::kPreviewBytes));
      if (terminated) {
        EXPECT_EQ(lines[2].text, "bc");
      }
    }
  }
}

TEST(OversizedLineReport, NamesTheRankAndTheSizeAndIsRecognised) {
  const LineSplitter::Line line{
      .text = "{\"v\":1,\x1b[2J'\\", .oversized = true, .bytes = 10'485'760};
  const std::string report = oversizedLineReport(3, line, kMaxLineBytes);
  EXPECT_EQ(report,
            "oversized telemetry line from rank 3: 10485760 bytes, over the limit of 1048576, "
            "dropped; it began '{\"v\":1,\\x1b[2J\\x27\\x5c'");
  ASSERT_TRUE(parseOversizedLineReport(report));
  EXPECT_EQ(parseOversizedLineReport(report)->rank, 3);
  ASSERT_TRUE(parseOversizedLineReport("[agent node 1] " + report));
  EXPECT_EQ(parseOversizedLineReport("[agent node 1] " + report)->rank, 3);
  const std::string unranked = oversizedLineReport(std::nullopt, line, kMaxLineBytes);
  ASSERT_TRUE(parseOversizedLineReport(unranked));
  EXPECT_EQ(parseOversizedLineReport(unranked)->rank, std::nullopt);
  for (const char* other : {"", "[rank 3] hello", "oversized telemetry line from rank x: 1",
                            "oversized telemetry line from rank 3", "[agent node 1]",
                            "oversized telemetry lines: 3", "[a] [b] oversized telemetry line: 1"})
    EXPECT_FALSE(parseOversizedLineReport(other)) << other;
}

}  // namespace
}  // namespace ringmaster
