// The one byte-count formatter of every front end (the CLI, the window, later the web page): binary
// units, a length bounded whatever the value, never negative. Each front end picks its style; the
// rules (units, rounding, the hostile values) live here once.
#pragma once

#include <string>

namespace ringmaster {

// How many decimals a scaled value gets, by its size, and what stands for a value that is no byte
// count (negative, NaN).
struct ByteStyle {
  int decimals_below_10 = 1;
  int decimals_below_100 = 1;
  int decimals_from_100 = 1;
  const char* missing = "-";
};

// The terminal's: one decimal, "1.5 GiB", "300.0 MiB", "-" for no value.
inline constexpr ByteStyle kTerminalBytes{1, 1, 1, "-"};
// The window's: three significant digits, "1.50 GiB", "300 MiB", "–" for no value.
inline constexpr ByteStyle kWindowBytes{2, 1, 0, "\u2013"};

// "512 B", "1.5 KiB" / "1.50 KiB", ... up to EiB; beyond 2^64 bytes three significant digits
// with an exponent ("1.2e+05 EiB"), so the text stays short.
std::string formatBytes(double bytes, const ByteStyle& style);

}  // namespace ringmaster
