// A strict UTF-8 decoder (RFC 3629) that copies what is safe to show and escapes the rest.
#include "core/display_text.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

namespace ringmaster {

namespace {

// The length of the valid UTF-8 sequence at the start of `text` and its code point, or 0 when
// the first byte does not start one.
size_t decodeUtf8(std::string_view text, char32_t& code_point) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(0);
  size_t length = 0;
  char32_t min = 0;
  if (lead < 0x80) {
    code_point = lead;
    return 1;
  } else if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code_point = lead & 0x1F, min = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code_point = lead & 0x0F, min = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code_point = lead & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(i) & 0x3F);
  }
  if (code_point < min || code_point > 0x10FFFF) return 0;     // overlong, too large
  if (code_point >= 0xD800 && code_point <= 0xDFFF) return 0;  // a UTF-16 surrogate
  return length;
}

bool isBidiOrSeparator(char32_t c) {
  return c == 0x061C || c == 0x200E || c == 0x200F || (c >= 0x202A && c <= 0x202E) ||
         (c >= 0x2066 && c <= 0x2069) || c == 0x2028 || c == 0x2029;
}

// What one character at the start of `text` shows as, and how many bytes it takes.
std::string_view shownAs(std::string_view text, bool one_line, std::string& escape,
                         size_t& length) {
  char32_t c = 0;
  length = decodeUtf8(text, c);
  if (length == 0) {
    length = 1;
    return escape = fmt::format("\\x{:02x}", static_cast<uint8_t>(text[0]));
  }
  if (c == '\n' || c == '\t') return one_line ? (c == '\n' ? "\\n" : "\\t") : text.substr(0, 1);
  if (c == '\r') return "\\r";
  if (c < 0x20 || c == 0x7F) return escape = fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
  if ((c >= 0x80 && c <= 0x9F) || isBidiOrSeparator(c))
    return escape = fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
  return text.substr(0, length);
}

// The number of code points in valid UTF-8 (an escape is ASCII: one per byte).
size_t codePoints(std::string_view shown) {
  size_t count = 0;
  for (char byte : shown) count += (static_cast<uint8_t>(byte) & 0xC0) != 0x80;
  return count;
}

// The text escaped (as one line or not) and bounded to `max_chars`: "..." within the bound when
// `short_mark`, else " ... [cut: N more bytes]" beyond it.
std::string escapeBounded(std::string_view text, bool one_line, size_t max_chars, bool short_mark) {
  const size_t marker_room = short_mark ? 3 : 0;
  std::string out, escape;
  out.reserve(std::min(text.size(), max_chars));
  size_t chars = 0;
  size_t cut_at = std::string::npos, rest_at_cut = 0;  // where a cut text ends, what it leaves
  while (!text.empty()) {
    size_t length = 0;
    const std::string_view shown = shownAs(text, one_line, escape, length);
    const size_t width = codePoints(shown);
    if (cut_at == std::string::npos && chars + width > max_chars - marker_room) {
      cut_at = out.size();
      rest_at_cut = text.size();
    }
    if (chars + width > max_chars) {
      out.resize(cut_at);
      out += short_mark ? "..." : fmt::format(" ... [cut: {} more bytes]", rest_at_cut);
      return out;
    }
    out += shown;
    chars += width;
    text.remove_prefix(length);
  }
  return out;
}

}  // namespace

std::string displaySafe(std::string_view text, TextLines lines) {
  return lines == TextLines::kOneLine ? escapeBounded(text, true, kMaxDisplayLineChars, true)
                                      : escapeBounded(text, false, kMaxDisplayBlockChars, false);
}

std::string displaySafeMessageLine(std::string_view text) {
  return escapeBounded(text, true, kMaxDisplayBlockChars, false);
}

}  // namespace ringmaster
