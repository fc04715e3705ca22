// Output for people and for scripts: aligned text tables, colour only on a terminal (and never
// with NO_COLOR), and the human forms of bytes, durations, times and rates.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace ringmaster::cli {

// Whether `stream` is a terminal that takes colour (a TTY, NO_COLOR unset, TERM not "dumb").
bool colourFor(std::FILE* stream);

enum class Colour { kNone, kGreen, kRed, kYellow, kCyan, kDim, kBold };
// `text`, made safe for display (displaySafeLine: one line, no controls of its own), wrapped in
// the colour's escape codes when `enabled`.
std::string paint(const std::string& text, Colour colour, bool enabled);
// The colour of a run status: completed green, failed red, running cyan, others yellow.
Colour statusColour(const std::string& status);

// A table printed with each column as wide as its widest cell; numbers right-aligned. A cell
// holding untrusted text (a name, a host, a message) is passed through displaySafeLine first.
class Table {
 public:
  explicit Table(std::vector<std::string> headers);
  // Cells may hold colour escapes: widths count only the visible characters.
  void addRow(std::vector<std::string> cells);
  // Marks columns as right-aligned (numbers).
  void alignRight(std::vector<size_t> columns);
  void print(std::FILE* out) const;
  bool empty() const { return rows_.empty(); }

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

std::string formatBytes(double bytes);       // "1.5 GiB": core/number_format's, kTerminalBytes
std::string formatDuration(double seconds);  // "1:02:03", "4:05", "12.3 s"
std::string formatTimestamp(double epoch_seconds);            // "2026-11-23 14:05" local time
std::string formatNumber(double value, int significant = 4);  // "0.01234", "1235"
std::string formatOptional(const std::optional<double>& value, int significant = 4);  // "-"

}  // namespace ringmaster::cli
