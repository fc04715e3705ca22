// core/number_format: the byte formatter the CLI and the window share (issue 17: they disagreed,
// "1.5 GiB" against "1.50 GiB", from two copies of the same rules).
#include "core/number_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ringmaster {
namespace {

TEST(NumberFormat, EachFrontEndsStyleKeepsItsSpelling) {
  EXPECT_EQ(formatBytes(1536, kTerminalBytes), "1.5 KiB");
  EXPECT_EQ(formatBytes(1536, kWindowBytes), "1.50 KiB");
  EXPECT_EQ(formatBytes(1.5 * (1 << 30), kTerminalBytes), "1.5 GiB");
  EXPECT_EQ(formatBytes(1.5 * (1 << 30), kWindowBytes), "1.50 GiB");
  EXPECT_EQ(formatBytes(300.0 * (1 << 20), kTerminalBytes), "300.0 MiB");
  EXPECT_EQ(formatBytes(300.0 * (1 << 20), kWindowBytes), "300 MiB");
  EXPECT_EQ(formatBytes(42.0 * (1 << 10), kWindowBytes), "42.0 KiB");
}

TEST(NumberFormat, TheRulesAreOneForEveryStyle) {
  for (const ByteStyle& style : {kTerminalBytes, kWindowBytes}) {
    EXPECT_EQ(formatBytes(0, style), "0 B");
    EXPECT_EQ(formatBytes(-0.0, style), "0 B");
    EXPECT_EQ(formatBytes(512, style), "512 B");
    EXPECT_EQ(formatBytes(1023.9, style), "1023 B");  // whole bytes, never "1024 B"
    EXPECT_EQ(formatBytes(18446744073709551615.0, style), "16.0 EiB");
    EXPECT_EQ(formatBytes(-1, style), style.missing);
    EXPECT_EQ(formatBytes(std::nan(""), style), style.missing);
    EXPECT_LE(formatBytes(1e308, style).size(), 16u) << formatBytes(1e308, style);
    EXPECT_LE(formatBytes(std::numeric_limits<double>::infinity(), style).size(), 16u);
  }
}

}  // namespace
}  // namespace ringmaster
