// libFuzzer target for the telemetry decoder and LineSplitter. Arbitrary bytes must never crash,
// hang or trip a sanitizer; beyond that it checks three properties: a decoded line re-encodes to a
// line that decodes to the same encoding (the codec is a fixed point after one trip), the simdjson
// fast path decodes a line only as the full decoder does, and the splitter yields exactly the
// lines a plain split at '\n' gives, however the stream is chunked.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "telemetry/codec.h"
#include "telemetry/fast_decoder.h"

namespace {

using ringmaster::DecodeResult;
using ringmaster::LineSplitter;

void require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_telemetry_decoder: property violated: %s\n", what);
    std::abort();
  }
}

void checkLine(std::string_view line) {
  if (const auto fast = ringmaster::decodeCommonEvent(line)) {
    DecodeResult full = ringmaster::decodeEventFully(line);
    require(full.ok(), "the fast path accepts only what the full decoder accepts");
    require(ringmaster::encodeEvent(*fast) == ringmaster::encodeEvent(full.event()),
            "the fast path decodes as the full decoder");
  }
  DecodeResult first = ringmaster::decodeEvent(line);
  if (!first.ok()) {
    require(!first.error().message.empty(), "an error has a message");
    return;
  }
  const std::string encoded = ringmaster::encodeEvent(first.event());
  require(encoded.find('\n') == std::string::npos, "an encoded event is one line");
  // Re-encoding can lengthen numbers ("1e5" becomes "100000.0"), so only lines that still fit.
  if (encoded.size() > ringmaster::kMaxLineBytes) return;
  DecodeResult second = ringmaster::decodeEvent(encoded);
  require(second.ok(), "an encoded event decodes");
  require(ringmaster::encodeEvent(second.event()) == encoded, "encode(decode(x)) is stable");
}

struct Expected {
  std::string text;  // the whole line; for an oversized one the preview must be its prefix
  bool oversized;
};

void checkSplitter(std::string_view stream, std::size_t limit, const uint8_t* chunking,
                   std::size_t chunking_size) {
  // The reference: a plain split, the unterminated tail included (finish() is called).
  std::vector<Expected> expected;
  std::size_t start = 0;
  while (start < stream.size()) {
    std::size_t newline = stream.find('\n', start);
    std::size_t end = newline == std::string_view::npos ? stream.size() : newline;
    std::string_view line = stream.substr(start, end - start);
    expected.push_back({std::string(line), line.size() > limit});
    start = end + 1;
  }

  LineSplitter splitter(limit);
  std::vector<LineSplitter::Line> got;
  std::size_t at = 0;
  for (std::size_t i = 0; at < stream.size(); ++i) {
    std::size_t chunk = 1 + (chunking_size ? chunking[i % chunking_size] % 23 : 0);
    splitter.feed(stream.substr(at, chunk));
    at += chunk;
    require(splitter.pendingBytes() <= limit, "the splitter holds at most the limit");
    while (auto line = splitter.next()) got.push_back(std::move(*line));
  }
  splitter.finish();
  while (auto line = splitter.next()) got.push_back(std::move(*line));

  require(got.size() == expected.size(), "as many lines as a plain split");
  for (std::size_t i = 0; i < got.size(); ++i) {
    require(got[i].oversized == expected[i].oversized, "oversized exactly when over the limit");
    if (got[i].oversized) {
      require(!got[i].text.empty() && got[i].text.size() <= LineSplitter::kPreviewBytes,
              "an oversized preview is short and not empty");
      require(expected[i].text.compare(0, got[i].text.size(), got[i].text) == 0,
              "an oversized preview is a prefix of its line");
    } else {
      require(got[i].text == expected[i].text, "a line comes out whole");
      checkLine(got[i].text);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  checkLine(input);
  // The same bytes as a stream, with a small limit and chunk sizes both drawn from the input.
  const std::size_t limit = size == 0 ? 1 : 1 + data[0] % 97;
  checkSplitter(input, limit, data, size);
  checkSplitter(input, ringmaster::kMaxLineBytes, data + size / 2, size - size / 2);
  return 0;
}
