// Making untrusted text (a worker's error or log line, a host, run or file name) safe to print on
// a terminal or show in a window: controls, bidirectional overrides and invalid UTF-8 become
// visible escapes, so that no such text can move the cursor, clear the screen, retitle the
// terminal or reorder what a reader sees. Printable text, any script, passes unchanged.
#pragma once

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
// Everything else, backslashes included, is kept as it is.
std::string displaySafe(std::string_view text, TextLines lines = TextLines::kMultiLine);

// displaySafe(text, TextLines::kOneLine).
inline std::string displaySafeLine(std::string_view text) {
  return displaySafe(text, TextLines::kOneLine);
}

}  // namespace ringmaster
