// Making untrusted text (a worker's error or log line, a host, run or file name) safe to print on
// a terminal or show in a window: controls, bidirectional overrides and invalid UTF-8 become
// visible escapes, so that no such text can move the cursor, clear the screen, retitle the
// terminal or reorder what a reader sees; and bounded in length, so that no such text can make a
// row or a message of unbounded width (issue 32). Printable text, any script, passes unchanged.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ringmaster {

enum class TextLines {
  kMultiLine,  // keeps '\n' and '\t' (a log message, an error's body)
  kOneLine,    // escapes them too (a table cell, a name, a status line)
};

// The text with, as visible escapes:
// - C0 controls and DEL: "\x1b", "\x7f"; '\r' as "\r", and in kOneLine '\n' and '\t' as "\n", "\t";
// - C1 controls (U+0080 ... U+009F): "\u009b";
// - bidirectional controls (U+061C, U+200E, U+200F, U+202A ... U+202E, U+2066 ... U+2069) and the
//   line and paragraph separators U+2028, U+2029: "\u202e";
// - each byte that is not part of valid UTF-8 (overlong forms, surrogates, beyond U+10FFFF,
//   truncated sequences): "\x9b".
// Everything else, backslashes included, is kept as it is. The result holds at most
// kMaxDisplayLineChars code points in kOneLine, kMaxDisplayBlockChars in kMultiLine (an escape
// counts as the characters it shows); a longer text is cut at a character's boundary and ends
// with "..." (one line, within the bound) or " ... [cut: N more bytes]" (a block). Time is linear
// in what is kept, not in the text's size.
std::string displaySafe(std::string_view text, TextLines lines = TextLines::kMultiLine);

// The longest one-line text shown (a table cell, a name, a status line): wider than any column,
// narrower than a screenful.
inline constexpr std::size_t kMaxDisplayLineChars = 160;
// The longest block shown (a log message, an error's body): the writer's own cut of a message.
inline constexpr std::size_t kMaxDisplayBlockChars = 64 * 1024;

// displaySafe(text, TextLines::kOneLine): a table cell, a name, a status line.
inline std::string displaySafeLine(std::string_view text) {
  return displaySafe(text, TextLines::kOneLine);
}

// A message shown on one line (a worker's log line, an error beside its rank): escaped as one
// line, bounded as a block (a log line is not cut at a table cell's width).
std::string displaySafeMessageLine(std::string_view text);

}  // namespace ringmaster
