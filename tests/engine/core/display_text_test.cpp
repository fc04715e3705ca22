// displaySafe (issue 16, finding 6: terminal escape injection): one test per class of character,
// each checking both what is escaped and that what is safe passes unchanged.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/display_text.h"

namespace ringmaster {
namespace {

TEST(DisplaySafe, PrintableTextOfAnyScriptPassesUnchanged) {
  const std::string text =
      "loss 0.25 at step 3: caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC "
      "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xF0\x9F\x9A\x80 C:\\dir ~ <b>";
  EXPECT_EQ(displaySafe(text), text);
  EXPECT_EQ(displaySafeLine(text), text);
  EXPECT_EQ(displaySafe(""), "");
}

TEST(DisplaySafe, EveryC0ControlAndDelAreEscaped) {
  for (int c = 0; c < 0x20; ++c) {
    if (c == '\n' || c == '\t' || c == '\r') continue;
    const std::string text = std::string("a") + static_cast<char>(c) + "b";
    char expected[16];
    std::snprintf(expected, sizeof expected, "a\\x%02xb", c);
    EXPECT_EQ(displaySafe(text), expected) << "control " << c;
    EXPECT_EQ(displaySafeLine(text), expected) << "control " << c;
  }
  EXPECT_EQ(displaySafe("a\x7f"), "a\\x7f");
  EXPECT_EQ(displaySafe("\x1b[2J\x1b]0;title\x07"), "\\x1b[2J\\x1b]0;title\\x07");
}

TEST(DisplaySafe, NewlineAndTabAreKeptInMultiLineTextOnly) {
  EXPECT_EQ(displaySafe("a\nb\tc"), "a\nb\tc");
  EXPECT_EQ(displaySafeLine("a\nb\tc"), "a\\nb\\tc");
  // A carriage return would let a line overwrite what came before it on a terminal.
  EXPECT_EQ(displaySafe("ok\rfake"), "ok\\rfake");
  EXPECT_EQ(displaySafeLine("ok\rfake"), "ok\\rfake");
}

TEST(DisplaySafe, EveryC1ControlIsEscaped) {
  for (int c = 0x80; c <= 0x9F; ++c) {
    // U+0080 ... U+009F encoded as UTF-8: C2 80 ... C2 9F.
    const std::string text = std::string("\xC2") + static_cast<char>(c);
    char expected[16];
    std::snprintf(expected, sizeof expected, "\\u%04x", c);
    EXPECT_EQ(displaySafe(text), expected) << "control " << c;
  }
  // U+00A0 (no-break space) is the first code point after them and is printable.
  EXPECT_EQ(displaySafe("\xC2\xA0"), "\xC2\xA0");
}

TEST(DisplaySafe, BidiControlsAndSeparatorsAreEscaped) {
  const struct {
    const char* utf8;
    const char* escaped;
  } cases[] = {
      {"\xD8\x9C", "\\u061c"},     {"\xE2\x80\x8E", "\\u200e"}, {"\xE2\x80\x8F", "\\u200f"},
      {"\xE2\x80\xAA", "\\u202a"}, {"\xE2\x80\xAB", "\\u202b"}, {"\xE2\x80\xAC", "\\u202c"},
      {"\xE2\x80\xAD", "\\u202d"}, {"\xE2\x80\xAE", "\\u202e"}, {"\xE2\x81\xA6", "\\u2066"},
      {"\xE2\x81\xA7", "\\u2067"}, {"\xE2\x81\xA8", "\\u2068"}, {"\xE2\x81\xA9", "\\u2069"},
      {"\xE2\x80\xA8", "\\u2028"}, {"\xE2\x80\xA9", "\\u2029"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(displaySafe(std::string("run") + c.utf8 + "txt.exe"),
              std::string("run") + c.escaped + "txt.exe");
  }
  // Their neighbours are ordinary characters.
  EXPECT_EQ(displaySafe("\xE2\x80\xA9\xE2\x80\xAF"), "\\u2029\xE2\x80\xAF");
  EXPECT_EQ(displaySafe("\xE2\x80\x8D"), "\xE2\x80\x8D");
}

TEST(DisplaySafe, InvalidUtf8IsEscapedByteByByte) {
  EXPECT_EQ(displaySafe("a\x9b"
                        "31m"),
            "a\\x9b31m");                                              // a lone C1 byte (8-bit CSI)
  EXPECT_EQ(displaySafe("\xC0\xAF"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(displaySafe("\xE0\x80\xAF"), "\\xe0\\x80\\xaf");           // overlong, 3 bytes
  EXPECT_EQ(displaySafe("\xED\xA0\x80"), "\\xed\\xa0\\x80");           // a UTF-16 surrogate
  EXPECT_EQ(displaySafe("\xF4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // beyond U+10FFFF
  EXPECT_EQ(displaySafe("\xF5"), "\\xf5");
  EXPECT_EQ(displaySafe("ok\xE2\x80"), "ok\\xe2\\x80");  // truncated at the end
  EXPECT_EQ(displaySafe("\xE2\x80"
                        "A"),
            "\\xe2\\x80A");  // truncated in the middle
  EXPECT_EQ(displaySafe("\xFF\xFE"), "\\xff\\xfe");
  // The largest valid code point and a 4-byte emoji pass.
  EXPECT_EQ(displaySafe("\xF4\x8F\xBF\xBF"), "\xF4\x8F\xBF\xBF");
}

TEST(DisplaySafe, EscapedTextIsSafeItself) {
  // Whatever goes in, nothing that comes out is a control byte or a byte >= 0x80 outside valid,
  // harmless UTF-8: sanitising is idempotent.
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte += static_cast<char>(b);
  const std::string once = displaySafeLine(every_byte);
  for (unsigned char c : once) EXPECT_TRUE(c >= 0x20 && c < 0x7F) << int(c);
  EXPECT_EQ(displaySafeLine(once), once);
}

// Issue 32, point 7: a 500 KB host name printed a 500 KB row. Every text is bounded, whatever it
// holds (plain ASCII, escapes, multi-byte characters, a mix), cut at a character's boundary with a
// visible mark, in time linear in what is kept; a text within the bound passes whole.
TEST(DisplaySafe, EveryTextIsBoundedAndCutVisibly) {
  const auto code_points = [](const std::string& text) {
    size_t count = 0;
    for (unsigned char c : text) count += (c & 0xC0) != 0x80;
    return count;
  };
  // Each unit and the width of its escaped form.
  const std::vector<std::pair<std::string, size_t>> units = {
      {"a", 1},    {"\x1b", 4}, {"\xC3\xA9", 1}, {"\xE2\x80\xAE", 6}, {"\xF0\x9F\x98\x80", 1},
      {"\xFF", 4}, {"\n", 2}};
  for (const auto& [unit, width] : units) {
    for (size_t count : {size_t{1}, size_t{39}, size_t{40}, size_t{159}, size_t{160}, size_t{161},
                         size_t{100'000}}) {
      std::string text;
      for (size_t i = 0; i < count; ++i) text += unit;
      SCOPED_TRACE(::testing::PrintToString(unit) + " x " + std::to_string(count));
      const std::string line = displaySafeLine(text);
      EXPECT_LE(code_points(line), kMaxDisplayLineChars);
      const bool over = count * width > kMaxDisplayLineChars;
      EXPECT_EQ(line.ends_with("..."), over) << line;
      // What is shown is whole units, as many as fit beside the mark: never a partial character
      // or a partial escape.
      const std::string one = displaySafeLine(unit);
      const size_t kept = over ? (kMaxDisplayLineChars - 3) / width : count;
      std::string expected;
      for (size_t i = 0; i < kept; ++i) expected += one;
      EXPECT_EQ(line, expected + (over ? "..." : ""));
    }
  }
  const std::string host(500'000, 'h');
  EXPECT_EQ(displaySafeLine(host), std::string(kMaxDisplayLineChars - 3, 'h') + "...");
  EXPECT_EQ(displaySafeLine(std::string(kMaxDisplayLineChars, 'h')),
            std::string(kMaxDisplayLineChars, 'h'));
  EXPECT_EQ(displaySafeLine(std::string(kMaxDisplayLineChars + 1, 'h')),
            std::string(kMaxDisplayLineChars - 3, 'h') + "...");
  EXPECT_EQ(displaySafe(std::string(kMaxDisplayBlockChars + 10, 'm')),
            std::string(kMaxDisplayBlockChars, 'm') + " ... [cut: 10 more bytes]");
  // A message on one line (a log line) keeps a line's escapes and a block's bound.
  const std::string log_line(1000, 'l');
  EXPECT_EQ(displaySafeMessageLine(log_line + "\n"), log_line + "\\n");
  EXPECT_EQ(displaySafeMessageLine(std::string(kMaxDisplayBlockChars + 7, 'l')),
            std::string(kMaxDisplayBlockChars, 'l') + " ... [cut: 7 more bytes]");
  // An escape is never split: "\x1b" (4 characters) that would pass the bound is left out whole.
  const std::string escapes = displaySafeLine(std::string(100, '\x1b'));
  EXPECT_EQ(escapes, [] {
    std::string expected;
    for (int i = 0; i < 39; ++i) expected += "\\x1b";
    return expected + "...";
  }());
}

}  // namespace
}  // namespace ringmaster
