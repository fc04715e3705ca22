// libFuzzer target for SpoolReader (issue 32, point 6): arbitrary segment files must never crash,
// hang or trip a sanitizer, and the reader must give exactly the lines a plain split gives: each
// segment cut at '\n' (its unfinished tail too, once a later segment exists), a line over the
// limit replaced by one short report and counted, an untagged line passed on whole and counted.
// Input: the first byte draws the limit; the rest are the segments' bytes, separated by 0xff.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "agent/telemetry_spool.h"

namespace {

namespace fs = std::filesystem;
using ringmaster::SpoolLine;
using ringmaster::SpoolReader;

void require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_spool_reader: property violated: %s\n", what);
    std::abort();
  }
}

struct Expected {
  std::string text;  // the whole line, its tag included
  bool oversized;
};

// The reference: each segment split at '\n'; a segment's tail is a line unless it is the last.
std::vector<Expected> plainSplit(const std::vector<std::string_view>& segments, std::size_t limit) {
  std::vector<Expected> lines;
  for (std::size_t index = 0; index < segments.size(); ++index) {
    std::string_view rest = segments[index];
    while (!rest.empty()) {
      const std::size_t newline = rest.find('\n');
      if (newline == std::string_view::npos && index + 1 == segments.size()) break;
      const std::string_view line = rest.substr(0, newline);
      lines.push_back({std::string(line), line.size() > limit});
      rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    }
  }
  return lines;
}

void checkLine(const SpoolLine& got, const Expected& expected, int64_t& oversized,
               int64_t& malformed) {
  const bool tagged = expected.text.starts_with("T ") || expected.text.starts_with("L ");
  if (expected.oversized) {
    ++oversized;
    require(!got.telemetry && got.text.size() < 512, "an oversized line is one short report");
  } else if (tagged) {
    require(got.telemetry == (expected.text[0] == 'T'), "a record keeps its kind");
    require(got.text == expected.text.substr(2), "a record comes out whole, less its tag");
  } else {
    ++malformed;
    require(got.telemetry && got.text == expected.text, "an untagged line is passed on whole");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t limit = 3 + data[0] % 61;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string_view> segments;
  for (std::size_t start = 0;;) {
    const std::size_t end = input.find('\xff', start);
    segments.push_back(input.substr(start, end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  static const fs::path directory =
      fs::temp_directory_path() / ("fuzz_spool_reader_" + std::to_string(::getpid()));
  fs::remove_all(directory);
  fs::create_directories(directory);
  for (std::size_t index = 0; index < segments.size(); ++index) {
    std::ofstream(ringmaster::spoolSegmentPath(directory.string(), static_cast<int64_t>(index)),
                  std::ios::binary)
        << segments[index];
  }

  SpoolReader reader(directory.string(), limit);
  const std::vector<Expected> expected = plainSplit(segments, limit);
  int64_t oversized = 0, malformed = 0;
  for (const Expected& line : expected) {
    const std::optional<SpoolLine> got = reader.next();
    require(got.has_value(), "as many lines as a plain split");
    checkLine(*got, line, oversized, malformed);
  }
  require(!reader.next().has_value(), "no more lines than a plain split");
  require(reader.counts().oversized == oversized, "each oversized line counted once");
  require(reader.counts().malformed == malformed, "each untagged line counted once");
  return 0;
}
