// formatBytes: scale by 1024 to the largest unit below the value, then print with the style's
// decimals.
#include "core/number_format.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

namespace ringmaster {

std::string formatBytes(double bytes, const ByteStyle& style) {
  if (!(bytes >= 0)) return style.missing;  // no byte count is negative (or NaN)
  bytes += 0.0;                             // not "-0 B"
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  constexpr int kLargest = static_cast<int>(std::size(units)) - 1;
  int unit = 0;
  while (bytes >= 1024 && unit < kLargest) {
    bytes /= 1024;
    ++unit;
  }
  if (unit == 0) return fmt::format("{:.0f} B", std::floor(bytes));       // whole bytes
  if (bytes >= 1e5) return fmt::format("{:.3g} {}", bytes, units[unit]);  // beyond 2^64
  const int decimals = bytes < 10    ? style.decimals_below_10
                       : bytes < 100 ? style.decimals_below_100
                                     : style.decimals_from_100;
  return fmt::format("{:.{}f} {}", bytes, decimals, units[unit]);
}

}  // namespace ringmaster
